//! Docket as a confidential OpenID Connect client of the team's provider: the
//! discovery document (cached), the authorization request (PKCE S256, a
//! nonce, `state` = the pending authorization's id), the code exchange
//! (`client_secret_basic`), the ID token's verification (the provider's keys,
//! issuer, audience = Docket's client id, nonce, expiry) and the userinfo
//! claims, merged and cut to the configured ones. With `offline_access` among
//! the scopes the provider's refresh token is kept (sealed inside Docket's
//! own) and every refresh of Docket's tokens is a refresh at the provider,
//! so a person the provider no longer accepts stops refreshing.

use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{AlgorithmFamily, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::config::{UpstreamConfig, check_provider_url};
use crate::params::encode;

/// How long the discovery document is used before it is fetched again.
const DISCOVERY_FOR: Duration = Duration::from_secs(3600);

/// How long the provider's keys are used before they are fetched again.
const JWKS_FOR: Duration = Duration::from_secs(300);

/// How often an ID token naming an unknown key may make the keys be fetched.
const JWKS_REFETCH_EVERY: Duration = Duration::from_secs(10);

/// The most bytes read of any answer of the provider.
const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// The most bytes of the claims a login keeps.
pub const MAX_CLAIMS_BYTES: usize = 8 * 1024;

/// Why the provider step failed; the message names the step, never a secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the identity provider step failed: {0}")]
pub struct UpstreamError(pub String);

fn fail(message: impl Into<String>) -> UpstreamError {
    UpstreamError(message.into())
}

/// The parts of the provider's discovery document Docket uses.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Discovery {
    pub(crate) issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
    #[serde(default)]
    userinfo_endpoint: Option<String>,
    #[serde(default)]
    revocation_endpoint: Option<String>,
    /// The provider sends `iss` with every authorization response (RFC 9207),
    /// so an answer without it is refused.
    #[serde(default)]
    pub(crate) authorization_response_iss_parameter_supported: bool,
}

#[derive(Deserialize)]
struct TokenAnswer {
    id_token: Option<String>,
    access_token: Option<String>,
    refresh_token: Option<String>,
}

/// What a login (or a refresh) at the provider gave.
pub(crate) struct Login {
    /// The person's claims.
    pub(crate) claims: Map<String, Value>,
    /// The provider's refresh token, when it sent one.
    pub(crate) refresh_token: Option<String>,
}

/// Why a refresh at the provider did not go through.
pub(crate) enum RefreshFailure {
    /// The provider no longer accepts the login: the refresh is refused.
    Refused(String),
    /// The provider cannot be asked now; the client may retry.
    Unavailable(UpstreamError),
}

/// The provider, as Docket's client of it.
pub(crate) struct Upstream {
    config: UpstreamConfig,
    redirect_uri: String,
    http: reqwest::Client,
    discovery: Mutex<Option<(Discovery, Instant)>>,
    jwks: Mutex<Option<(JwkSet, Instant)>>,
    jwks_refetched: Mutex<Option<Instant>>,
}

impl Upstream {
    pub(crate) fn new(config: &UpstreamConfig, redirect_uri: String) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(config.timeout))
            .user_agent("docket-oauth")
            .build()
            .map_err(|error| error.to_string())?;
        Ok(Self {
            config: config.clone(),
            redirect_uri,
            http,
            discovery: Mutex::new(None),
            jwks: Mutex::new(None),
            jwks_refetched: Mutex::new(None),
        })
    }

    async fn get_json(&self, url: &str, bearer: Option<&str>) -> Result<Value, UpstreamError> {
        let mut request = self
            .http
            .get(url)
            .header(http::header::ACCEPT, "application/json");
        if let Some(token) = bearer {
            request = request.bearer_auth(token);
        }
        let response = request
            .send()
            .await
            .map_err(|_| fail(format!("{url} could not be reached")))?;
        if !response.status().is_success() {
            return Err(fail(format!("{url} answered {}", response.status())));
        }
        read_json(response, url).await
    }

    /// Whether Docket asks for the provider's refresh token (`offline_access`
    /// among the scopes), to check each refresh with the provider.
    pub(crate) fn offline(&self) -> bool {
        self.config
            .scopes
            .iter()
            .any(|scope| scope == "offline_access")
    }

    /// The discovery document, cached.
    pub(crate) async fn discovery(&self) -> Result<Discovery, UpstreamError> {
        {
            let cached = self
                .discovery
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some((discovery, at)) = cached.as_ref()
                && at.elapsed() < DISCOVERY_FOR
            {
                return Ok(discovery.clone());
            }
        }
        let issuer = self.config.issuer.trim_end_matches('/');
        let url = format!("{issuer}/.well-known/openid-configuration");
        let document: Discovery = serde_json::from_value(self.get_json(&url, None).await?)
            .map_err(|_| fail("the provider's discovery document lacks an endpoint"))?;
        if document.issuer.trim_end_matches('/') != issuer {
            return Err(fail(format!(
                "the provider's discovery document names the issuer {}, not {issuer}",
                document.issuer
            )));
        }
        for endpoint in [
            &document.authorization_endpoint,
            &document.token_endpoint,
            &document.jwks_uri,
        ]
        .into_iter()
        .chain(document.userinfo_endpoint.as_ref())
        .chain(document.revocation_endpoint.as_ref())
        {
            check_provider_url(endpoint.split('?').next().unwrap_or_default())
                .map_err(|why| fail(format!("the provider's endpoint {endpoint} {why}")))?;
        }
        *self
            .discovery
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((document.clone(), Instant::now()));
        Ok(document)
    }

    /// Where to send the browser to sign in.
    pub(crate) async fn authorization_url(
        &self,
        state: &str,
        nonce: &str,
        challenge: &str,
    ) -> Result<String, UpstreamError> {
        let discovery = self.discovery().await?;
        let scope = self.config.scopes.join(" ");
        let mut pairs = vec![
            ("response_type", "code"),
            ("client_id", self.config.client_id.as_str()),
            ("redirect_uri", self.redirect_uri.as_str()),
            ("scope", scope.as_str()),
            ("state", state),
            ("nonce", nonce),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
        ];
        // OpenID Connect Core §11: offline access is asked for with a consent prompt.
        if self.offline() {
            pairs.push(("prompt", "consent"));
        }
        let query = encode(pairs);
        let separator = if discovery.authorization_endpoint.contains('?') {
            '&'
        } else {
            '?'
        };
        Ok(format!(
            "{}{separator}{query}",
            discovery.authorization_endpoint
        ))
    }

    /// Docket's `client_secret_basic` credentials: both parts form-encoded
    /// first (RFC 6749 §2.3.1).
    fn basic_credentials(&self) -> String {
        let credentials = format!(
            "{}:{}",
            encode_component(&self.config.client_id),
            encode_component(&self.config.client_secret)
        );
        format!("Basic {}", STANDARD.encode(credentials))
    }

    /// Posts `form` to the provider's token endpoint as Docket
    /// (`client_secret_basic`): the status and the JSON answer.
    async fn token_request(
        &self,
        discovery: &Discovery,
        form: &[(&str, &str)],
    ) -> Result<(reqwest::StatusCode, Value), UpstreamError> {
        let response = self
            .http
            .post(&discovery.token_endpoint)
            .header(http::header::AUTHORIZATION, self.basic_credentials())
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(http::header::ACCEPT, "application/json")
            .body(encode(form.iter().copied()))
            .send()
            .await
            .map_err(|_| fail("the provider's token endpoint could not be reached"))?;
        let status = response.status();
        match read_json(response, "the provider's token endpoint").await {
            Ok(answer) => Ok((status, answer)),
            Err(error) if status.is_success() => Err(error),
            Err(_) => Ok((status, Value::Object(Map::new()))),
        }
    }

    /// The person's claims from a token answer: its ID token's, checked
    /// (with `nonce` at a login; a refresh's ID token has none to compare),
    /// and its userinfo's merged in.
    async fn claims_of(
        &self,
        discovery: &Discovery,
        answer: &TokenAnswer,
        nonce: Option<&str>,
    ) -> Result<Map<String, Value>, UpstreamError> {
        let mut claims = match (&answer.id_token, nonce) {
            (Some(id_token), _) => self.verify_id_token(discovery, id_token, nonce).await?,
            (None, Some(_)) => {
                return Err(fail(
                    "the provider sent no ID token (is openid among the scopes?)",
                ));
            }
            (None, None) => Map::new(),
        };
        if let (Some(userinfo), Some(access_token)) =
            (&discovery.userinfo_endpoint, &answer.access_token)
        {
            let info = self.get_json(userinfo, Some(access_token)).await?;
            let Value::Object(info) = info else {
                return Err(fail("the provider's userinfo is not a JSON object"));
            };
            if claims
                .get("sub")
                .is_some_and(|sub| info.get("sub") != Some(sub))
            {
                return Err(fail("the provider's userinfo is for another subject"));
            }
            for (name, value) in info {
                claims.entry(name).or_insert(value);
            }
        }
        Ok(claims)
    }

    /// Exchanges the provider's code, verifies its ID token and merges its
    /// userinfo claims: the person's claims (at least `sub`) and the
    /// provider's refresh token, when it sent one (`offline_access`).
    pub(crate) async fn login(
        &self,
        code: &str,
        verifier: &str,
        nonce: &str,
    ) -> Result<Login, UpstreamError> {
        let discovery = self.discovery().await?;
        let (status, answer) = self
            .token_request(
                &discovery,
                &[
                    ("grant_type", "authorization_code"),
                    ("code", code),
                    ("redirect_uri", self.redirect_uri.as_str()),
                    ("code_verifier", verifier),
                ],
            )
            .await?;
        if !status.is_success() {
            let code = answer
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("error");
            return Err(fail(format!(
                "the provider refused the code: {code} ({status})"
            )));
        }
        let answer: TokenAnswer = serde_json::from_value(answer)
            .map_err(|_| fail("the provider's token answer is not understood"))?;
        let claims = self.claims_of(&discovery, &answer, Some(nonce)).await?;
        Ok(Login {
            claims,
            refresh_token: answer.refresh_token,
        })
    }

    /// Asks the provider whether a login still has access: a refresh with
    /// its refresh token. The claims it now gives (empty when it gives none;
    /// the caller compares their `sub`) and its next refresh token (the same
    /// one when it does not rotate).
    pub(crate) async fn refresh(&self, refresh_token: &str) -> Result<Login, RefreshFailure> {
        let discovery = self
            .discovery()
            .await
            .map_err(RefreshFailure::Unavailable)?;
        let (status, answer) = self
            .token_request(
                &discovery,
                &[
                    ("grant_type", "refresh_token"),
                    ("refresh_token", refresh_token),
                ],
            )
            .await
            .map_err(RefreshFailure::Unavailable)?;
        if !status.is_success() {
            let code = answer
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or_default();
            // invalid_grant: the provider no longer accepts this login (the
            // person was removed or signed out everywhere, the grant revoked).
            return Err(if matches!(code, "invalid_grant" | "unauthorized_client") {
                RefreshFailure::Refused(format!("the provider refused the refresh: {code}"))
            } else {
                RefreshFailure::Unavailable(fail(format!(
                    "the provider's token endpoint answered {status} {code}"
                )))
            });
        }
        let answer: TokenAnswer = serde_json::from_value(answer).map_err(|_| {
            RefreshFailure::Unavailable(fail("the provider's token answer is not understood"))
        })?;
        let claims = self
            .claims_of(&discovery, &answer, None)
            .await
            .map_err(RefreshFailure::Unavailable)?;
        Ok(Login {
            claims,
            refresh_token: Some(
                answer
                    .refresh_token
                    .unwrap_or_else(|| refresh_token.to_owned()),
            ),
        })
    }

    /// Revokes the provider's refresh token (RFC 7009) when the provider has
    /// a revocation endpoint; best effort, the caller has already ended its
    /// own family.
    pub(crate) async fn revoke(&self, refresh_token: &str) -> Result<(), UpstreamError> {
        let discovery = self.discovery().await?;
        let Some(endpoint) = &discovery.revocation_endpoint else {
            return Ok(());
        };
        let response = self
            .http
            .post(endpoint)
            .header(http::header::AUTHORIZATION, self.basic_credentials())
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(encode([
                ("token", refresh_token),
                ("token_type_hint", "refresh_token"),
            ]))
            .send()
            .await
            .map_err(|_| fail("the provider's revocation endpoint could not be reached"))?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(fail(format!(
                "the provider's revocation endpoint answered {}",
                response.status()
            )))
        }
    }

    async fn keys(&self, jwks_uri: &str, refetch: bool) -> Result<JwkSet, UpstreamError> {
        if !refetch {
            let cached = self.jwks.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((keys, at)) = cached.as_ref()
                && at.elapsed() < JWKS_FOR
            {
                return Ok(keys.clone());
            }
        }
        let keys: JwkSet = serde_json::from_value(self.get_json(jwks_uri, None).await?)
            .map_err(|_| fail("the provider's key set is not a JWK set"))?;
        *self.jwks.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((keys.clone(), Instant::now()));
        Ok(keys)
    }

    async fn verify_id_token(
        &self,
        discovery: &Discovery,
        token: &str,
        nonce: Option<&str>,
    ) -> Result<Map<String, Value>, UpstreamError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| fail("the provider's ID token is not a JWT"))?;
        let algorithm = header.alg;
        if matches!(algorithm.family(), AlgorithmFamily::Hmac) {
            return Err(fail(
                "the provider's ID token is signed with a shared secret",
            ));
        }
        let mut keys = self.keys(&discovery.jwks_uri, false).await?;
        let pick = |keys: &JwkSet| -> Option<jsonwebtoken::jwk::Jwk> {
            match &header.kid {
                Some(kid) => keys.find(kid).cloned(),
                None if keys.keys.len() == 1 => keys.keys.first().cloned(),
                None => None,
            }
        };
        let mut jwk = pick(&keys);
        if jwk.is_none() {
            let may = {
                let mut refetched = self
                    .jwks_refetched
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                let may = refetched.is_none_or(|at| at.elapsed() >= JWKS_REFETCH_EVERY);
                if may {
                    *refetched = Some(Instant::now());
                }
                may
            };
            if may {
                keys = self.keys(&discovery.jwks_uri, true).await?;
                jwk = pick(&keys);
            }
        }
        let jwk = jwk.ok_or_else(|| fail("the provider's ID token names an unknown key"))?;
        let key = DecodingKey::from_jwk(&jwk)
            .map_err(|_| fail("the provider's signing key is not usable"))?;
        let mut validation = Validation::new(algorithm);
        validation.algorithms = vec![algorithm];
        validation.set_issuer(&[discovery.issuer.as_str()]);
        validation.set_audience(&[self.config.client_id.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let decoded = jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation)
            .map_err(|error| fail(format!("the provider's ID token was refused: {error}")))?;
        let claims = decoded.claims;
        if let Some(nonce) = nonce {
            let sent = claims
                .get("nonce")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if !crate::tokens::same_secret(sent, nonce) {
                return Err(fail("the provider's ID token carries another nonce"));
            }
        }
        if !matches!(claims.get("sub"), Some(Value::String(sub)) if !sub.is_empty() && sub.len() <= 255)
        {
            return Err(fail("the provider's ID token has no usable sub"));
        }
        if let Some(Value::Array(audiences)) = claims.get("aud")
            && audiences.len() > 1
            && claims.get("azp").and_then(Value::as_str) != Some(self.config.client_id.as_str())
        {
            return Err(fail(
                "the provider's ID token is for several audiences without azp",
            ));
        }
        Ok(claims)
    }
}

/// The claims a token carries: the configured ones and the role claim's top
/// key, at most [`MAX_CLAIMS_BYTES`] as JSON.
///
/// # Errors
/// [`UpstreamError`] when they are over the bound.
pub fn keep_claims(
    claims: &Map<String, Value>,
    configured: &[String],
    role_claim: &str,
) -> Result<Map<String, Value>, UpstreamError> {
    let role_top = role_top_key(claims, role_claim);
    let kept: Map<String, Value> = claims
        .iter()
        .filter(|(name, _)| {
            configured.iter().any(|wanted| wanted == *name)
                || role_top.as_deref() == Some(name.as_str())
        })
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let bytes = serde_json::to_vec(&kept).map_or(usize::MAX, |encoded| encoded.len());
    if bytes > MAX_CLAIMS_BYTES {
        return Err(fail(format!(
            "the provider's claims are over {MAX_CLAIMS_BYTES} bytes"
        )));
    }
    Ok(kept)
}

/// The top-level claim that holds the role claim at `path`: the longest
/// prefix of its segments that is a key (so `https://example.com/roles` is
/// found although its name has dots).
fn role_top_key(claims: &Map<String, Value>, path: &str) -> Option<String> {
    let segments: Vec<&str> = path.split('.').collect();
    (1..=segments.len())
        .rev()
        .map(|take| segments[..take].join("."))
        .find(|name| claims.contains_key(name))
}

/// `roles` placed at the dot path `path` (`realm_access.roles` →
/// `{"realm_access": {"roles": [...]}}`).
#[must_use]
pub fn roles_at(path: &str, roles: &[String]) -> Map<String, Value> {
    let mut value = Value::from(roles.to_vec());
    for segment in path.split('.').rev() {
        let mut object = Map::new();
        object.insert(segment.to_owned(), value);
        value = Value::Object(object);
    }
    match value {
        Value::Object(object) => object,
        _ => Map::new(),
    }
}

fn encode_component(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

async fn read_json(mut response: reqwest::Response, what: &str) -> Result<Value, UpstreamError> {
    let status = response.status();
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|_| fail(format!("{what} did not answer in full")))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(fail(format!(
                "{what} answered over {MAX_ANSWER_BYTES} bytes"
            )));
        }
        body.extend_from_slice(&chunk);
    }
    let value: Value = serde_json::from_slice(&body)
        .map_err(|_| fail(format!("{what} answered {status} without JSON")))?;
    if !status.is_success() && value.get("error").is_none() {
        return Err(fail(format!("{what} answered {status}")));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claims_are_cut_to_the_configured_ones_and_roles_nest() {
        let claims = json!({"sub": "a", "email": "a@x", "secret": "s",
                            "realm_access": {"roles": ["r"]}});
        let claims = claims.as_object().cloned().unwrap_or_default();
        let kept = keep_claims(
            &claims,
            &["sub".into(), "email".into()],
            "realm_access.roles",
        )
        .expect("small");
        assert_eq!(
            Value::Object(kept),
            json!({"sub": "a", "email": "a@x", "realm_access": {"roles": ["r"]}})
        );
        assert_eq!(
            Value::Object(roles_at("realm_access.roles", &["x".to_owned()])),
            json!({"realm_access": {"roles": ["x"]}})
        );
    }
}
