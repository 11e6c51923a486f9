//! Identity: who is calling. The `auth:` configuration section, the
//! [`Authenticator`] that turns request headers into an [`Identity`], and the
//! RFC 9728 protected-resource metadata that tells clients where to get a token.
//!
//! A caller proves who it is with `Authorization: Bearer <token>` (an API key or
//! an OIDC access token) or `X-API-Key: <key>`. What the identity may do is not
//! decided here: its roles select a persona (see [`crate::persona`]).
//!
//! Secrets (API keys, bearer tokens) never appear in `Debug` output, logs or
//! error messages.

mod api_key;
mod error;
mod identity;
mod oidc;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::sync::Arc;

use http::HeaderMap;
use http::header::AUTHORIZATION;
use serde::Deserialize;
use serde_json::json;

pub(crate) use api_key::key_claims;
pub use api_key::{ApiKeyConfig, key_sha256_hex};
pub use error::AuthError;
pub use identity::{Attributes, Identity, IdentityKind, InboundToken, RunIdentity};
pub use oidc::OidcConfig;

use api_key::ApiKeyTable;
use docket_oauth::{AuthorizationServer, TokenError};
use oidc::{OidcVerifier, identity_from_claims};

/// The header a client may use instead of `Authorization: Bearer` for an API key.
pub const API_KEY_HEADER: &str = "x-api-key";

/// The `auth:` configuration section.
///
/// `Debug` is safe to log: API keys are redacted (see [`ApiKeyConfig`]).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct AuthConfig {
    /// Whether a request without credentials is served as the anonymous identity.
    pub allow_anonymous: bool,
    /// The roles the anonymous identity has.
    pub anonymous_roles: Vec<String>,
    /// The API keys clients may present.
    pub api_keys: Vec<ApiKeyConfig>,
    /// The OpenID Connect provider whose access tokens are accepted, if any.
    pub oidc: Option<OidcConfig>,
    /// Docket's own OAuth 2.1 authorization server (`docket_oauth`), brokering
    /// logins to the team's provider, so MCP hosts register and log in by
    /// themselves; its access tokens are accepted beside the others.
    pub oauth_server: Option<docket_oauth::OAuthServerConfig>,
}

impl AuthConfig {
    /// Every problem in this section, as human sentences prefixed by the key
    /// path (e.g. `"auth.api_keys[1]: set either key or key_sha256, not both"`).
    /// Empty means valid. No problem ever quotes a key.
    #[must_use]
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (index, role) in self.anonymous_roles.iter().enumerate() {
            if role.trim().is_empty() {
                problems.push(format!("auth.anonymous_roles[{index}]: must not be empty"));
            }
        }

        // Each duplicate names the first entry that has the same name or key.
        let mut first_with_name = HashMap::new();
        let mut first_with_digest = HashMap::new();
        for (index, key) in self.api_keys.iter().enumerate() {
            let path = format!("auth.api_keys[{index}]");
            problems.extend(key.problems(&path));
            if !key.name.trim().is_empty() {
                match first_with_name.entry(key.name.as_str()) {
                    Entry::Occupied(first) => problems.push(format!(
                        "{path}.name: \"{}\" is already the name of auth.api_keys[{}]",
                        key.name,
                        first.get()
                    )),
                    Entry::Vacant(slot) => {
                        slot.insert(index);
                    }
                }
            }
            if let Some(digest) = key.digest() {
                match first_with_digest.entry(digest) {
                    Entry::Occupied(first) => problems.push(format!(
                        "{path}: has the same key as auth.api_keys[{}]; give each holder its own key",
                        first.get()
                    )),
                    Entry::Vacant(slot) => {
                        slot.insert(index);
                    }
                }
            }
        }

        if let Some(oidc) = &self.oidc {
            problems.extend(oidc.problems("auth.oidc"));
        }
        if let Some(server) = &self.oauth_server {
            problems.extend(server.problems("auth.oauth_server"));
        }
        problems
    }
}

/// The credential a request presents.
enum Credential<'a> {
    /// `Authorization: Bearer <token>`: an API key or an OIDC access token.
    Bearer(&'a str),
    /// `X-API-Key: <key>`: an API key only.
    ApiKey(&'a str),
}

/// Finds the request's credential: `Authorization: Bearer` first, then `X-API-Key`.
fn extract_credential(headers: &HeaderMap) -> Result<Option<Credential<'_>>, AuthError> {
    let mut unsupported_scheme = false;
    if let Some(value) = headers.get(AUTHORIZATION) {
        let value = value
            .to_str()
            .map_err(|_| AuthError::invalid("the Authorization header is not valid text"))?
            .trim();
        let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
        if scheme.eq_ignore_ascii_case("bearer") {
            let token = token.trim();
            if token.is_empty() {
                return Err(AuthError::invalid("the bearer token is empty"));
            }
            return Ok(Some(Credential::Bearer(token)));
        }
        // Another scheme (Basic, say) is not ours; an X-API-Key header may still
        // carry the credential, so only refuse once that is known to be absent.
        unsupported_scheme = true;
    }
    if let Some(value) = headers.get(API_KEY_HEADER) {
        let key = value
            .to_str()
            .map_err(|_| AuthError::invalid("the X-API-Key header is not valid text"))?
            .trim();
        if key.is_empty() {
            return Err(AuthError::invalid("the X-API-Key header is empty"));
        }
        return Ok(Some(Credential::ApiKey(key)));
    }
    if unsupported_scheme {
        return Err(AuthError::invalid(
            "the Authorization header must use the Bearer scheme",
        ));
    }
    Ok(None)
}

/// Turns request headers into an [`Identity`].
///
/// Cheap to share in an `Arc`: API keys live in a digest table and OIDC signing
/// keys in a cache that is refreshed in the background of the first request that
/// needs them.
pub struct Authenticator {
    anonymous: Option<Arc<Identity>>,
    api_keys: ApiKeyTable,
    oidc: Option<OidcVerifier>,
    /// Docket's own authorization server, whose tokens it verifies itself, and
    /// the claim path their roles are at.
    authorization_server: Option<(Arc<AuthorizationServer>, Vec<String>)>,
}

impl fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Authenticator")
            .field("allow_anonymous", &self.anonymous.is_some())
            .field("api_keys", &self.api_keys.len())
            .field("oidc", &self.oidc)
            .field("authorization_server", &self.authorization_server.is_some())
            .finish()
    }
}

impl Authenticator {
    /// Builds the authenticator from configuration. API keys are hashed here
    /// (SHA-256) and the plain keys are not kept. The OIDC provider is not
    /// contacted until the first token arrives, so an identity provider that is
    /// down does not stop the server from starting.
    ///
    /// # Errors
    ///
    /// [`AuthError::Config`] when [`AuthConfig::problems`] finds any problem, or
    /// when the HTTP client for the OIDC provider cannot be built.
    pub fn new(config: &AuthConfig) -> Result<Self, AuthError> {
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(AuthError::Config(problems.join("; ")));
        }
        let oidc = config.oidc.as_ref().map(OidcVerifier::new).transpose()?;
        let api_keys = ApiKeyTable::new(&config.api_keys);
        if !config.allow_anonymous
            && api_keys.len() == 0
            && oidc.is_none()
            && config.oauth_server.is_none()
        {
            tracing::warn!(
                "no API keys, no OIDC provider, no authorization server and anonymous access is off: every request will be refused"
            );
        }
        Ok(Self {
            anonymous: config
                .allow_anonymous
                .then(|| Arc::new(Identity::anonymous(config.anonymous_roles.clone()))),
            api_keys,
            oidc,
            authorization_server: None,
        })
    }

    /// Accepts the access tokens Docket's own authorization server issues, with
    /// their roles at `role_claim` (a dot path, as `auth.oidc.role_claim`), and
    /// names it as the authorization server in the protected-resource metadata.
    #[must_use]
    pub fn with_authorization_server(
        mut self,
        server: Arc<AuthorizationServer>,
        role_claim: &str,
    ) -> Self {
        let path = role_claim.split('.').map(str::to_owned).collect();
        self.authorization_server = Some((server, path));
        self
    }

    /// Docket's own authorization server, when `auth.oauth_server` is configured.
    #[must_use]
    pub fn authorization_server(&self) -> Option<&Arc<AuthorizationServer>> {
        self.authorization_server.as_ref().map(|(server, _)| server)
    }

    /// Establishes who sent a request, from its headers.
    ///
    /// `Authorization: Bearer <token>` is looked at first, then `X-API-Key: <key>`.
    /// A bearer token that is a configured API key is an API key; otherwise, when
    /// OIDC is configured and the token has the shape of a JWT, it is validated
    /// as an OIDC access token. A request without credentials is anonymous when
    /// the configuration allows it.
    ///
    /// # Errors
    ///
    /// - [`AuthError::MissingCredentials`]: no credentials and anonymous access is off;
    /// - [`AuthError::InvalidCredentials`]: a key or token that is not valid;
    /// - [`AuthError::Unavailable`]: a token that cannot be checked because the
    ///   identity provider cannot be reached (API keys keep working meanwhile).
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Arc<Identity>, AuthError> {
        match extract_credential(headers)? {
            Some(Credential::Bearer(token)) => {
                if let Some(identity) = self.api_keys.lookup(token) {
                    return Ok(Arc::clone(identity));
                }
                if let Some((server, role_claim)) = &self.authorization_server
                    && server.is_own_token(token)
                {
                    let claims =
                        server
                            .verify_access_token(token)
                            .await
                            .map_err(|error| match error {
                                TokenError::Unavailable(reason) => AuthError::Unavailable {
                                    reason,
                                    source: None,
                                },
                                TokenError::Invalid(reason) => AuthError::invalid(reason),
                                other => AuthError::invalid(other.to_string()),
                            })?;
                    return identity_from_claims(token, &claims, role_claim).map(Arc::new);
                }
                match &self.oidc {
                    Some(oidc) if oidc::looks_like_jwt(token) => {
                        oidc.validate(token).await.map(Arc::new)
                    }
                    Some(_) => Err(AuthError::invalid(
                        "the bearer token is neither a known API key nor an OIDC access token",
                    )),
                    None if self.authorization_server.is_some() => Err(AuthError::invalid(
                        "the bearer token is neither a known API key nor an access token this server issued",
                    )),
                    None => Err(AuthError::invalid(
                        "the bearer token is not a known API key",
                    )),
                }
            }
            Some(Credential::ApiKey(key)) => self
                .api_keys
                .lookup(key)
                .cloned()
                .ok_or_else(|| AuthError::invalid("the API key is not a known API key")),
            None => self.anonymous.clone().ok_or(AuthError::MissingCredentials),
        }
    }

    /// The RFC 9728 protected-resource metadata document for `resource` (the
    /// absolute URL of the `/mcp` endpoint). It names Docket's own authorization
    /// server when `auth.oauth_server` is configured, else the OIDC issuer when
    /// OIDC is.
    #[must_use]
    pub fn protected_resource_metadata(&self, resource: &str) -> serde_json::Value {
        let mut metadata = json!({
            "resource": resource,
            "resource_name": "Docket",
            "bearer_methods_supported": ["header"],
        });
        // Docket's own authorization server, when there is one, is the one
        // clients are sent to: it brokers to the provider for them.
        if let Some(server) = self.authorization_server() {
            metadata["authorization_servers"] = json!([server.issuer()]);
        } else if let Some(oidc) = &self.oidc {
            metadata["authorization_servers"] = json!([oidc.issuer()]);
        }
        metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn key(name: &str, secret: &str) -> ApiKeyConfig {
        ApiKeyConfig {
            name: name.to_owned(),
            key: Some(secret.to_owned()),
            ..ApiKeyConfig::default()
        }
    }

    #[test]
    fn problems_find_duplicate_names_and_keys_without_quoting_keys() {
        let config = AuthConfig {
            anonymous_roles: vec![" ".to_owned()],
            api_keys: vec![
                key("alice", "alice-secret-0123456789"),
                key("alice", "other-secret-0123456789"),
                ApiKeyConfig {
                    name: "bob".to_owned(),
                    key_sha256: Some(key_sha256_hex("alice-secret-0123456789")),
                    ..ApiKeyConfig::default()
                },
                key("alice", "third-secret-0123456789"),
            ],
            ..AuthConfig::default()
        };
        assert_eq!(
            config.problems(),
            vec![
                "auth.anonymous_roles[0]: must not be empty",
                "auth.api_keys[1].name: \"alice\" is already the name of auth.api_keys[0]",
                "auth.api_keys[2]: has the same key as auth.api_keys[0]; give each holder its own key",
                "auth.api_keys[3].name: \"alice\" is already the name of auth.api_keys[0]",
            ]
        );
        assert!(matches!(
            Authenticator::new(&config),
            Err(AuthError::Config(message)) if !message.contains("secret")
        ));
    }

    #[test]
    fn default_config_is_valid_and_refuses_everyone() {
        assert!(AuthConfig::default().problems().is_empty());
        let config: AuthConfig = serde_json::from_str("{}").unwrap_or_default();
        assert!(!config.allow_anonymous);
        assert!(config.api_keys.is_empty() && config.oidc.is_none());
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            if let (Ok(name), Ok(value)) = (
                http::HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                map.append(name, value);
            }
        }
        map
    }

    #[test]
    fn bearer_comes_before_x_api_key() {
        let both = headers(&[("authorization", "bearer  tok "), ("x-api-key", "key")]);
        assert!(matches!(
            extract_credential(&both),
            Ok(Some(Credential::Bearer("tok")))
        ));
        let basic = headers(&[("authorization", "Basic abc"), ("x-api-key", "key")]);
        assert!(matches!(
            extract_credential(&basic),
            Ok(Some(Credential::ApiKey("key")))
        ));
        let basic_only = headers(&[("authorization", "Basic abc")]);
        assert!(matches!(
            extract_credential(&basic_only),
            Err(AuthError::InvalidCredentials { .. })
        ));
        let empty = headers(&[("authorization", "Bearer")]);
        assert!(matches!(
            extract_credential(&empty),
            Err(AuthError::InvalidCredentials { .. })
        ));
        assert!(matches!(extract_credential(&HeaderMap::new()), Ok(None)));
    }

    #[test]
    fn www_authenticate_points_at_the_metadata() {
        let url = "http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp";
        assert_eq!(
            AuthError::MissingCredentials
                .www_authenticate(url)
                .as_deref(),
            Some(
                "Bearer resource_metadata=\"http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp\""
            )
        );
        let invalid = AuthError::invalid("the \"token\" has expired");
        assert_eq!(
            invalid.www_authenticate("u").as_deref(),
            Some(
                "Bearer error=\"invalid_token\", error_description=\"the \\\"token\\\" has expired\", resource_metadata=\"u\""
            )
        );
        assert_eq!(AuthError::Config(String::new()).www_authenticate(url), None);
    }
}
