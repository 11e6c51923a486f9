//! OpenID Connect access tokens: the `auth.oidc` configuration and the verifier
//! that checks a JWT against the provider's published signing keys.
//!
//! The provider is found through its discovery document
//! (`{issuer}/.well-known/openid-configuration` → `jwks_uri`). Its key set is
//! fetched on the first token, cached for `jwks_cache_seconds`, and fetched again
//! early when a token names a key id the cache does not know (the provider
//! rotated its keys) — but at most once per [`MIN_FORCED_REFRESH_INTERVAL`], so a
//! stream of tokens with made-up key ids cannot turn into a stream of requests to
//! the provider. While the provider cannot be reached, the keys fetched earlier
//! stay in use.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{Jwk, KeyOperations, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::AuthError;
use super::identity::{Identity, IdentityKind};

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
const LEEWAY_SECONDS: u64 = 30;
/// The shortest time between two key-set fetches caused by an unknown key id.
const MIN_FORCED_REFRESH_INTERVAL: Duration = Duration::from_secs(10);
/// How long after a failed fetch the provider is left alone; requests in that
/// window use the keys fetched earlier or are answered "unavailable" at once
/// instead of each waiting for a timeout.
const FAILURE_BACKOFF: Duration = Duration::from_secs(5);
/// The largest discovery document or key set accepted.
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;
/// The whole-request and connect timeouts for calls to the provider.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The signature algorithms accepted by default: every asymmetric algorithm
/// jsonwebtoken verifies. The key published by the provider decides which one
/// a given token can actually use.
const ASYMMETRIC_ALGORITHMS: [&str; 9] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

/// The `auth.oidc` configuration section.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct OidcConfig {
    /// The provider's issuer URL, exactly as it appears in the tokens' `iss`
    /// claim (a trailing `/` difference is tolerated). `https://`, or `http://`
    /// for a loopback host.
    pub issuer: String,
    /// The audience the tokens must be issued for (one of their `aud` values).
    pub audience: String,
    /// The claim holding the caller's roles, as a dot path into nested objects
    /// (`roles`, `realm_access.roles`). Its value is a string or an array of
    /// strings. A claim whose own name contains dots (`https://example.com/roles`)
    /// is found too: the longest matching name wins at each level.
    pub role_claim: String,
    /// How long the provider's signing keys are cached, in seconds.
    pub jwks_cache_seconds: u64,
    /// The signature algorithms accepted (`RS256`, `ES256`, …). `none` and the
    /// HMAC algorithms are refused: they would let anyone holding the shared
    /// secret — or nobody at all — mint tokens.
    pub allowed_algorithms: Vec<String>,
}

impl Default for OidcConfig {
    fn default() -> Self {
        Self {
            issuer: String::new(),
            audience: String::new(),
            role_claim: "roles".to_owned(),
            jwks_cache_seconds: 300,
            allowed_algorithms: ASYMMETRIC_ALGORITHMS.map(str::to_owned).to_vec(),
        }
    }
}

impl OidcConfig {
    /// Every problem in this section, each prefixed by `path` (normally `auth.oidc`).
    #[must_use]
    pub fn problems(&self, path: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if self.issuer.trim().is_empty() {
            problems.push(format!("{path}.issuer: must be set"));
        } else if let Err(why) = check_provider_url(&self.issuer) {
            problems.push(format!("{path}.issuer: {why}"));
        }
        if self.audience.trim().is_empty() {
            problems.push(format!("{path}.audience: must be set"));
        }
        if self.role_claim.split('.').any(str::is_empty) {
            problems.push(format!(
                "{path}.role_claim: must be a claim name or a dot path such as realm_access.roles"
            ));
        }
        if self.jwks_cache_seconds == 0 {
            problems.push(format!(
                "{path}.jwks_cache_seconds: must be at least 1, or every token would fetch the provider's keys"
            ));
        }
        if self.allowed_algorithms.is_empty() {
            problems.push(format!(
                "{path}.allowed_algorithms: must name at least one algorithm"
            ));
        }
        for (index, name) in self.allowed_algorithms.iter().enumerate() {
            let item = format!("{path}.allowed_algorithms[{index}]");
            if name.eq_ignore_ascii_case("none") {
                problems.push(format!(
                    "{item}: \"none\" would accept unsigned tokens and is not allowed"
                ));
            } else if name.to_ascii_uppercase().starts_with("HS") {
                problems.push(format!(
                    "{item}: {name} is an HMAC algorithm; only asymmetric algorithms are accepted"
                ));
            } else if !ASYMMETRIC_ALGORITHMS.contains(&name.as_str()) {
                problems.push(format!(
                    "{item}: unknown algorithm \"{name}\"; use one of {}",
                    ASYMMETRIC_ALGORITHMS.join(", ")
                ));
            }
        }
        problems
    }
}

/// Why `url` cannot be the issuer or key-set URL, if it cannot.
fn check_provider_url(url: &str) -> Result<(), &'static str> {
    let parsed = reqwest::Url::parse(url).map_err(|_| "must be an absolute URL")?;
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err("must not have a query or a fragment");
    }
    let host = parsed.host_str().unwrap_or_default();
    match parsed.scheme() {
        "https" if !host.is_empty() => Ok(()),
        "http" if is_loopback_host(host) => Ok(()),
        _ => Err("must be an https:// URL (http:// is allowed only for a loopback host)"),
    }
}

/// Whether `host` (as `Url::host_str` gives it) names the local machine.
fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether `token` has the shape of a compact JWS: three dot-separated
/// base64url segments, the first two non-empty.
pub(super) fn looks_like_jwt(token: &str) -> bool {
    let is_base64url = |segment: &str| {
        segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let mut segments = token.split('.');
    match (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) {
        (Some(header), Some(payload), Some(signature), None) => {
            !header.is_empty()
                && !payload.is_empty()
                && is_base64url(header)
                && is_base64url(payload)
                && is_base64url(signature)
        }
        _ => false,
    }
}

/// One signing key the provider publishes.
struct VerifyingKey {
    key_id: Option<String>,
    /// The key's `alg`, when the provider pins one.
    algorithm: Option<Algorithm>,
    key: DecodingKey,
}

/// The provider's signing keys as of one fetch.
struct KeySet {
    keys: Vec<VerifyingKey>,
    fetched_at: Instant,
    /// The configured issuer and the one the discovery document spells out
    /// (they differ at most by a trailing `/`).
    accepted_issuers: Vec<String>,
}

impl KeySet {
    fn has_key_id(&self, key_id: &str) -> bool {
        self.keys
            .iter()
            .any(|key| key.key_id.as_deref() == Some(key_id))
    }

    /// The keys that may have signed a token with `algorithm` and `key_id`.
    fn candidates<'a>(
        &'a self,
        algorithm: Algorithm,
        key_id: Option<&'a str>,
    ) -> impl Iterator<Item = &'a VerifyingKey> + 'a {
        self.keys.iter().filter(move |key| {
            key.key.family() == algorithm.family()
                && key.algorithm.is_none_or(|pinned| pinned == algorithm)
                && key_id.is_none_or(|wanted| key.key_id.as_deref() == Some(wanted))
        })
    }
}

/// Where the provider publishes its keys, from its discovery document.
#[derive(Clone)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

/// Bookkeeping for fetches; held (as a tokio mutex) for the duration of a fetch
/// so that concurrent requests wait for one fetch instead of starting their own.
#[derive(Default)]
struct RefreshState {
    discovery: Option<Discovery>,
    last_forced: Option<Instant>,
    last_failure: Option<Instant>,
}

/// Why the key set is wanted.
#[derive(Clone, Copy)]
enum Refresh {
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
    pub(super) fn new(config: &OidcConfig) -> Result<Self, AuthError> {
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
    pub(super) fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Validates `token` and returns the identity it proves.
    pub(super) async fn validate(&self, token: &str) -> Result<Identity, AuthError> {
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
                Ok(data) => return self.identity(&data.claims),
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

    /// The identity a validated token's claims describe.
    fn identity(&self, claims: &Map<String, Value>) -> Result<Identity, AuthError> {
        let text = |name: &str| {
            claims
                .get(name)
                .and_then(Value::as_str)
                .filter(|value| !value.is_empty())
        };
        let subject = text("sub").ok_or_else(|| {
            AuthError::invalid("the token's `sub` claim is empty or not a string")
        })?;
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
            roles: roles_at(claims, &self.role_claim),
            kind: IdentityKind::Oidc,
            run: None,
        })
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

/// The key `jwk` stands for, if it is a public signing key this server can use.
fn verifying_key(jwk: &Jwk) -> Option<VerifyingKey> {
    if !matches!(
        jwk.common.public_key_use,
        None | Some(PublicKeyUse::Signature)
    ) {
        return None;
    }
    if let Some(operations) = &jwk.common.key_operations
        && !operations.contains(&KeyOperations::Verify)
    {
        return None;
    }
    // A key pinned to an algorithm jsonwebtoken does not verify (RSA-OAEP, say)
    // is an encryption key: skip it.
    let algorithm = match jwk.common.key_algorithm {
        Some(pinned) => Some(Algorithm::try_from(pinned).ok()?),
        None => None,
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    // A symmetric key in a public key set would let whoever read the set mint
    // tokens; it is never used.
    if key.family() == jsonwebtoken::AlgorithmFamily::Hmac {
        return None;
    }
    Some(VerifyingKey {
        key_id: jwk.common.key_id.clone(),
        algorithm,
        key,
    })
}

/// The name jsonwebtoken gives `algorithm` (`RS256`, …).
fn algorithm_name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::HS256 => "HS256",
        Algorithm::HS384 => "HS384",
        Algorithm::HS512 => "HS512",
        Algorithm::ES256 => "ES256",
        Algorithm::ES384 => "ES384",
        Algorithm::RS256 => "RS256",
        Algorithm::RS384 => "RS384",
        Algorithm::RS512 => "RS512",
        Algorithm::PS256 => "PS256",
        Algorithm::PS384 => "PS384",
        Algorithm::PS512 => "PS512",
        Algorithm::EdDSA => "EdDSA",
        // `Algorithm` is non-exhaustive; an algorithm added later is not accepted
        // until this list names it.
        _ => "",
    }
}

/// The caller-safe description of a token validation failure.
fn describe(error: &jsonwebtoken::errors::Error) -> AuthError {
    AuthError::invalid(match error.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".to_owned(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".to_owned(),
        ErrorKind::InvalidAudience => "the token was issued for another audience".to_owned(),
        ErrorKind::InvalidIssuer => "the token was issued by another issuer".to_owned(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no `{claim}` claim"),
        ErrorKind::InvalidClaimFormat(claim) => format!("the token's `{claim}` claim is malformed"),
        ErrorKind::InvalidAlgorithm => {
            "the token's algorithm does not match its signing key".to_owned()
        }
        _ => "the token is malformed".to_owned(),
    })
}

/// The roles found at the dot path `path` in `claims`: a string is one role, an
/// array contributes its strings; anything else, or nothing there, is no roles.
fn roles_at(claims: &Map<String, Value>, path: &[String]) -> Vec<String> {
    match lookup(claims, path) {
        Some(Value::String(role)) if !role.is_empty() => vec![role.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .filter(|role| !role.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The value at `path` in `object`. At each level the longest run of segments
/// that is itself a key wins, so a claim named `https://example.com/roles` is
/// found although its name contains dots.
fn lookup<'a>(object: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    (1..=path.len()).rev().find_map(|take| {
        let value = object.get(&path[..take].join("."))?;
        match (&path[take..], value) {
            ([], value) => Some(value),
            (rest, Value::Object(inner)) => lookup(inner, rest),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn path(text: &str) -> Vec<String> {
        text.split('.').map(str::to_owned).collect()
    }

    fn claims(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn roles_come_from_nested_paths_strings_and_dotted_names() {
        let claims = claims(json!({
            "roles": "solo",
            "realm_access": {"roles": ["analyst", 7, "", "admin"]},
            "https://example.com/roles": ["namespaced"],
            "deep": {"a.b": {"c": ["dotted-inner"]}},
            "number": 3,
        }));
        assert_eq!(roles_at(&claims, &path("roles")), ["solo"]);
        assert_eq!(
            roles_at(&claims, &path("realm_access.roles")),
            ["analyst", "admin"]
        );
        assert_eq!(
            roles_at(&claims, &path("https://example.com/roles")),
            ["namespaced"]
        );
        assert_eq!(roles_at(&claims, &path("deep.a.b.c")), ["dotted-inner"]);
        assert!(roles_at(&claims, &path("number")).is_empty());
        assert!(roles_at(&claims, &path("realm_access.missing")).is_empty());
        assert!(roles_at(&claims, &path("roles.inner")).is_empty());
    }

    #[test]
    fn jwt_shape() {
        assert!(looks_like_jwt("eyJh.eyJz.c2ln"));
        assert!(looks_like_jwt("eyJh.eyJz."));
        assert!(!looks_like_jwt("eyJh.eyJz"));
        assert!(!looks_like_jwt("a.b.c.d"));
        assert!(!looks_like_jwt(".eyJz.c2ln"));
        assert!(!looks_like_jwt("ey+h.eyJz.c2ln"));
        assert!(!looks_like_jwt("plain-api-key-without-dots"));
    }

    #[test]
    fn config_problems() {
        let config = OidcConfig {
            issuer: "http://idp.example".to_owned(),
            audience: String::new(),
            role_claim: "realm_access..roles".to_owned(),
            jwks_cache_seconds: 0,
            allowed_algorithms: vec!["none".to_owned(), "HS256".to_owned(), "XX1".to_owned()],
        };
        assert_eq!(
            config.problems("auth.oidc"),
            vec![
                "auth.oidc.issuer: must be an https:// URL (http:// is allowed only for a loopback host)",
                "auth.oidc.audience: must be set",
                "auth.oidc.role_claim: must be a claim name or a dot path such as realm_access.roles",
                "auth.oidc.jwks_cache_seconds: must be at least 1, or every token would fetch the provider's keys",
                "auth.oidc.allowed_algorithms[0]: \"none\" would accept unsigned tokens and is not allowed",
                "auth.oidc.allowed_algorithms[1]: HS256 is an HMAC algorithm; only asymmetric algorithms are accepted",
                "auth.oidc.allowed_algorithms[2]: unknown algorithm \"XX1\"; use one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA",
            ]
        );
        let good = OidcConfig {
            issuer: "https://idp.example/realms/main".to_owned(),
            audience: "docket".to_owned(),
            ..OidcConfig::default()
        };
        assert!(good.problems("auth.oidc").is_empty());
        for loopback in [
            "http://127.0.0.1:9000",
            "http://localhost/x",
            "http://[::1]:80",
        ] {
            let config = OidcConfig {
                issuer: loopback.to_owned(),
                ..good.clone()
            };
            assert!(config.problems("p").is_empty(), "{loopback}");
        }
        let with_query = OidcConfig {
            issuer: "https://idp.example/?a=b".to_owned(),
            ..good
        };
        assert_eq!(with_query.problems("p").len(), 1);
    }

    #[test]
    fn every_default_algorithm_is_known_to_jsonwebtoken() {
        for name in ASYMMETRIC_ALGORITHMS {
            let algorithm = Algorithm::from_str(name);
            assert!(algorithm.is_ok(), "{name}");
            assert_eq!(algorithm.map(algorithm_name).ok(), Some(name));
        }
    }
}
