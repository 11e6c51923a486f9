//! The verifier: discovery, the cached key set and its refreshes, and checking
//! one access token against it.

use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, Validation};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::claims::{describe, roles_at};
use super::config::{ASYMMETRIC_ALGORITHMS, OidcConfig, check_provider_url};
use super::keys::{KeySet, VerifyingKey, algorithm_name, verifying_key};
use crate::auth::error::AuthError;
use crate::auth::identity::{Attributes, Identity, IdentityKind, InboundToken};

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
pub(super) const LEEWAY_SECONDS: u64 = 30;
/// The shortest time between two key-set fetches caused by an unknown key id.
pub(super) const MIN_FORCED_REFRESH_INTERVAL: Duration = Duration::from_secs(10);
/// How long after a failed fetch the provider is left alone; requests in that
/// window use the keys fetched earlier or are answered "unavailable" at once
/// instead of each waiting for a timeout.
pub(super) const FAILURE_BACKOFF: Duration = Duration::from_secs(5);
/// The largest discovery document or key set accepted.
pub(super) const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
/// The whole-request and connect timeouts for calls to the provider.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where the provider publishes its keys, from its discovery document.
#[derive(Clone)]
pub(super) struct Discovery {
    issuer: String,
    jwks_uri: String,
}

/// Bookkeeping for fetches; held (as a tokio mutex) for the duration of a fetch
/// so that concurrent requests wait for one fetch instead of starting their own.
#[derive(Default)]
pub(super) struct RefreshState {
    discovery: Option<Discovery>,
    last_forced: Option<Instant>,
    last_failure: Option<Instant>,
}

/// Why the key set is wanted.
#[derive(Clone, Copy)]
pub(super) enum Refresh {
    /// Use the cache unless it is older than `jwks_cache_seconds`.
    IfStale,
    /// A token named a key id missing from the set fetched at `seen_fetched_at`.
    UnknownKey { seen_fetched_at: Instant },
}

/// Checks OIDC access tokens against one provider.
pub(crate) struct OidcVerifier {
    issuer: String,
    audience: String,
    role_claim: Vec<String>,
    algorithms: Vec<Algorithm>,
    cache_for: Duration,
    http: reqwest::Client,
    keys: RwLock<Option<Arc<KeySet>>>,
    refresh: tokio::sync::Mutex<RefreshState>,
}

impl fmt::Debug for OidcVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcVerifier")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("algorithms", &self.algorithms)
            .finish_non_exhaustive()
    }
}

impl OidcVerifier {
    /// A verifier for a configuration that has no problems. Contacts nobody.
    pub(crate) fn new(config: &OidcConfig) -> Result<Self, AuthError> {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::limited(3))
            .build()
            .map_err(|error| {
                AuthError::Config(format!(
                    "cannot build the HTTP client for the OIDC provider: {error}"
                ))
            })?;
        Ok(Self {
            issuer: config.issuer.clone(),
            audience: config.audience.clone(),
            role_claim: config.role_claim.split('.').map(str::to_owned).collect(),
            algorithms: config
                .allowed_algorithms
                .iter()
                .filter_map(|name| Algorithm::from_str(name).ok())
                .filter(|algorithm| ASYMMETRIC_ALGORITHMS.contains(&algorithm_name(*algorithm)))
                .collect(),
            cache_for: Duration::from_secs(config.jwks_cache_seconds),
            http,
            keys: RwLock::new(None),
            refresh: tokio::sync::Mutex::new(RefreshState::default()),
        })
    }

    /// The configured issuer URL.
    pub(crate) fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Validates `token` and returns the identity it proves.
    pub(crate) async fn validate(&self, token: &str) -> Result<Identity, AuthError> {
        let (algorithm, key_id) = self.read_header(token)?;
        let mut keys = self.key_set(Refresh::IfStale).await?;
        if let Some(key_id) = &key_id
            && !keys.has_key_id(key_id)
        {
            keys = self
                .key_set(Refresh::UnknownKey {
                    seen_fetched_at: keys.fetched_at,
                })
                .await?;
        }

        let mut validation = Validation::new(algorithm);
        validation.leeway = LEEWAY_SECONDS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = true;
        validation.set_audience(&[&self.audience]);
        validation.set_issuer(&keys.accepted_issuers);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);

        // Without a key id several keys may fit; a signature that verifies under
        // none of them is reported as such, but a claim error means a key did
        // verify the signature, and that is the more useful thing to report.
        let mut signature_error = None;
        for candidate in keys.candidates(algorithm, key_id.as_deref()) {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &candidate.key, &validation) {
                Ok(data) => return identity_from_claims(token, &data.claims, &self.role_claim),
                Err(error) if matches!(error.kind(), ErrorKind::InvalidSignature) => {
                    signature_error = Some(error);
                }
                Err(error) => return Err(describe(&error)),
            }
        }
        Err(match (signature_error, key_id) {
            (Some(error), _) => describe(&error),
            (None, Some(_)) => AuthError::invalid(
                "the token is signed with a key the identity provider does not publish",
            ),
            (None, None) => AuthError::invalid(
                "the identity provider publishes no key for the token's algorithm",
            ),
        })
    }

    /// The token's algorithm and key id, after refusing `none`, HMAC and any
    /// algorithm the configuration does not accept.
    fn read_header(&self, token: &str) -> Result<(Algorithm, Option<String>), AuthError> {
        let encoded = token.split('.').next().unwrap_or_default();
        let header: Value = URL_SAFE_NO_PAD
            .decode(encoded)
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok())
            .ok_or_else(|| {
                AuthError::invalid("the token's header is not base64url-encoded JSON")
            })?;
        let name = header
            .get("alg")
            .and_then(Value::as_str)
            .ok_or_else(|| AuthError::invalid("the token's header names no algorithm"))?;
        if name.eq_ignore_ascii_case("none") {
            return Err(AuthError::invalid(
                "unsigned tokens (alg \"none\") are not accepted",
            ));
        }
        let algorithm = Algorithm::from_str(name)
            .map_err(|_| AuthError::invalid("the token's algorithm is not supported"))?;
        if algorithm.family() == jsonwebtoken::AlgorithmFamily::Hmac {
            return Err(AuthError::invalid(
                "tokens signed with a shared secret (HMAC) are not accepted",
            ));
        }
        if !self.algorithms.contains(&algorithm) {
            return Err(AuthError::invalid(
                "the token's algorithm is not one this server accepts",
            ));
        }
        let key_id = header.get("kid").and_then(Value::as_str).map(str::to_owned);
        Ok((algorithm, key_id))
    }

    /// The cached key set, if any.
    fn cached(&self) -> Option<Arc<KeySet>> {
        self.keys
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The key set to check a token against, fetching it when `refresh` says so.
    async fn key_set(&self, refresh: Refresh) -> Result<Arc<KeySet>, AuthError> {
        if matches!(refresh, Refresh::IfStale)
            && let Some(keys) = self.cached()
            && keys.fetched_at.elapsed() < self.cache_for
        {
            return Ok(keys);
        }

        let mut state = self.refresh.lock().await;
        // Another request may have fetched while this one waited for the lock.
        let cached = self.cached();
        if let Some(keys) = &cached {
            let reuse = match refresh {
                Refresh::IfStale => keys.fetched_at.elapsed() < self.cache_for,
                Refresh::UnknownKey { seen_fetched_at } => {
                    keys.fetched_at > seen_fetched_at
                        || state
                            .last_forced
                            .is_some_and(|at| at.elapsed() < MIN_FORCED_REFRESH_INTERVAL)
                }
            };
            if reuse {
                return Ok(Arc::clone(keys));
            }
        }
        if matches!(refresh, Refresh::UnknownKey { .. }) {
            state.last_forced = Some(Instant::now());
        }
        if state
            .last_failure
            .is_some_and(|at| at.elapsed() < FAILURE_BACKOFF)
        {
            return cached.ok_or_else(|| AuthError::Unavailable {
                reason:
                    "the identity provider could not be reached a moment ago; try again shortly"
                        .to_owned(),
                source: None,
            });
        }

        match self.fetch(&mut state).await {
            Ok(keys) => {
                let keys = Arc::new(keys);
                *self.keys.write().unwrap_or_else(PoisonError::into_inner) =
                    Some(Arc::clone(&keys));
                state.last_failure = None;
                tracing::debug!(issuer = %self.issuer, keys = keys.keys.len(), "fetched the OIDC signing keys");
                Ok(keys)
            }
            Err(error) => {
                state.last_failure = Some(Instant::now());
                match cached {
                    Some(stale) => {
                        tracing::warn!(issuer = %self.issuer, error = %error, "cannot refresh the OIDC signing keys; using the ones fetched earlier");
                        Ok(stale)
                    }
                    None => {
                        tracing::warn!(issuer = %self.issuer, error = %error, "cannot fetch the OIDC signing keys");
                        Err(error)
                    }
                }
            }
        }
    }

    /// Fetches the key set, discovering where it lives first if need be.
    async fn fetch(&self, state: &mut RefreshState) -> Result<KeySet, AuthError> {
        let discovery = match &state.discovery {
            Some(discovery) => discovery.clone(),
            None => {
                let discovery = self.discover().await?;
                state.discovery = Some(discovery.clone());
                discovery
            }
        };
        let result = self.fetch_jwks(&discovery).await;
        if result.is_err() {
            // The provider may have moved its keys; look again next time.
            state.discovery = None;
        }
        result
    }

    async fn discover(&self) -> Result<Discovery, AuthError> {
        #[derive(Deserialize)]
        struct DiscoveryDocument {
            issuer: String,
            jwks_uri: String,
        }

        let url = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let document: DiscoveryDocument = self.get_json(&url, "OIDC discovery document").await?;
        if document.issuer.trim_end_matches('/') != self.issuer.trim_end_matches('/') {
            return Err(AuthError::Unavailable {
                reason: format!(
                    "the discovery document at {url} names the issuer {}, not the configured {}",
                    document.issuer, self.issuer
                ),
                source: None,
            });
        }
        if let Err(why) = check_provider_url(&document.jwks_uri) {
            return Err(AuthError::Unavailable {
                reason: format!("the discovery document's jwks_uri {why}"),
                source: None,
            });
        }
        Ok(Discovery {
            issuer: document.issuer,
            jwks_uri: document.jwks_uri,
        })
    }

    async fn fetch_jwks(&self, discovery: &Discovery) -> Result<KeySet, AuthError> {
        #[derive(Deserialize)]
        struct JwksDocument {
            keys: Vec<Value>,
        }

        let document: JwksDocument = self
            .get_json(&discovery.jwks_uri, "OIDC key set (JWKS)")
            .await?;
        // Entries are read one by one so that one key this server cannot use (an
        // encryption key, an unknown key type) does not hide the others.
        let keys: Vec<VerifyingKey> = document
            .keys
            .into_iter()
            .filter_map(|value| serde_json::from_value::<Jwk>(value).ok())
            .filter_map(|jwk| verifying_key(&jwk))
            .collect();
        if keys.is_empty() {
            return Err(AuthError::Unavailable {
                reason: format!(
                    "the key set at {} holds no signing key this server can use",
                    discovery.jwks_uri
                ),
                source: None,
            });
        }
        let mut accepted_issuers = vec![self.issuer.clone()];
        if discovery.issuer != self.issuer {
            accepted_issuers.push(discovery.issuer.clone());
        }
        Ok(KeySet {
            keys,
            fetched_at: Instant::now(),
            accepted_issuers,
        })
    }

    /// GETs `url` and parses its JSON body, refusing bodies over
    /// [`MAX_DOCUMENT_BYTES`]. `what` names the document in errors.
    async fn get_json<T: DeserializeOwned>(&self, url: &str, what: &str) -> Result<T, AuthError> {
        let unreachable = |error: reqwest::Error| AuthError::Unavailable {
            reason: format!("cannot fetch the {what} from {url}"),
            source: Some(Box::new(error)),
        };
        let mut response = self
            .http
            .get(url)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(unreachable)?;
        if !response.status().is_success() {
            return Err(AuthError::Unavailable {
                reason: format!(
                    "the {what} at {url} answered HTTP {}",
                    response.status().as_u16()
                ),
                source: None,
            });
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
            if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
                return Err(AuthError::Unavailable {
                    reason: format!("the {what} at {url} is larger than 1 MiB"),
                    source: None,
                });
            }
            body.extend_from_slice(&chunk);
        }
        serde_json::from_slice(&body).map_err(|error| AuthError::Unavailable {
            reason: format!("the {what} at {url} is not what was expected"),
            source: Some(Box::new(error)),
        })
    }
}

/// The identity a verified token's claims describe: `oidc:<sub>`, its name and
/// (verified) e-mail, and the roles at `role_claim`. The same mapping for the
/// provider's tokens and for the ones Docket's own authorization server issues,
/// so a person is the same identity with either.
pub(crate) fn identity_from_claims(
    token: &str,
    claims: &Map<String, Value>,
    role_claim: &[String],
) -> Result<Identity, AuthError> {
    let text = |name: &str| {
        claims
            .get(name)
            .and_then(Value::as_str)
            .filter(|value| !value.is_empty())
    };
    let subject = text("sub")
        .ok_or_else(|| AuthError::invalid("the token's `sub` claim is empty or not a string"))?;
    // An e-mail address decides ownership elsewhere (scripts, assets), so one
    // the provider says it has not verified is not taken.
    let email_unverified = matches!(claims.get("email_verified"), Some(Value::Bool(false)))
        || matches!(claims.get("email_verified"), Some(Value::String(s)) if s == "false");
    let email = text("email")
        .filter(|_| !email_unverified)
        .map(str::to_owned);
    let display_name = text("name")
        .or_else(|| text("preferred_username"))
        .or_else(|| text("email"))
        .unwrap_or(subject)
        .to_owned();
    Ok(Identity {
        subject: format!("oidc:{subject}"),
        display_name,
        email,
        roles: roles_at(claims, role_claim),
        kind: IdentityKind::Oidc,
        run: None,
        attributes: Attributes {
            claims: Arc::new(claims.clone()),
            key_user: None,
            token: Some(InboundToken::new(token)),
        },
    })
}
