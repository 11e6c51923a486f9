//! `identity:` of an API or GraphQL connection: who the upstream is told the caller
//! is, and the credential each call carries.
//!
//! ```yaml
//! identity: { mode: fixed }            # the connection's own `auth:` (the default)
//!
//! identity:                            # RFC 8693; the connection's `auth:` is none
//!   mode: token_exchange
//!   token_url: https://idp.example/token
//!   client_id: docket
//!   client_secret: ${DOCKET_EXCHANGE_SECRET}
//!   audience: crm-api
//!
//! identity:                            # for upstreams that trust Docket as their gateway
//!   mode: headers
//!   headers: { X-User-Email: "{email}", X-User: "{preferred_username}" }
//! ```
//!
//! [`IdentityConfig`] is what the configuration holds; [`Identity`] is it compiled,
//! and [`Identity::credential`] gives one caller's [`CallerCredential`].

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::exchange::{ExchangeError, TokenExchange, TokenExchangeConfig};
use crate::headers::{self, HeaderTemplates, HeadersConfig};
use crate::secret::Secret;

/// `identity:` as configured, tagged by `mode`.
#[derive(Clone, Debug, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum IdentityConfig {
    /// Every caller is the connection: its own `auth:` credential. (A struct variant
    /// with no fields, so that keys beside `mode: fixed` are refused too.)
    Fixed {},
    /// The caller's access token exchanged for one for the upstream (RFC 8693).
    TokenExchange(TokenExchangeConfig),
    /// Identity headers filled from the caller's claims.
    Headers(HeadersConfig),
}

impl Default for IdentityConfig {
    fn default() -> Self {
        IdentityConfig::Fixed {}
    }
}

impl IdentityConfig {
    /// Its mode, as written: `fixed`, `token_exchange` or `headers`.
    #[must_use]
    pub fn mode(&self) -> &'static str {
        match self {
            IdentityConfig::Fixed {} => "fixed",
            IdentityConfig::TokenExchange(_) => "token_exchange",
            IdentityConfig::Headers(_) => "headers",
        }
    }

    /// Every problem, one sentence each, each prefixed by `path`
    /// (`connections.crm.identity`).
    #[must_use]
    pub fn problems(&self, path: &str) -> Vec<String> {
        match self {
            IdentityConfig::Fixed {} => Vec::new(),
            IdentityConfig::TokenExchange(config) => config.problems(path),
            IdentityConfig::Headers(config) => HeaderTemplates::compile(config, path)
                .err()
                .unwrap_or_default(),
        }
    }

    /// Compiles it; `path` prefixes each problem. No I/O happens.
    ///
    /// # Errors
    /// Every problem, one sentence each.
    pub fn compile(&self, path: &str) -> Result<Identity, Vec<String>> {
        Ok(match self {
            IdentityConfig::Fixed {} => Identity::Fixed,
            IdentityConfig::TokenExchange(config) => {
                Identity::TokenExchange(TokenExchange::new(config, path)?)
            }
            IdentityConfig::Headers(config) => {
                Identity::Headers(HeaderTemplates::compile(config, path)?)
            }
        })
    }
}

/// A compiled [`IdentityConfig`]. Cheap to clone.
#[derive(Clone, Debug)]
pub enum Identity {
    /// The connection's own credential for everyone.
    Fixed,
    /// The caller's token, exchanged.
    TokenExchange(TokenExchange),
    /// Identity headers from the caller's claims.
    Headers(HeaderTemplates),
}

/// What the caller presented, as the server verified it.
#[derive(Clone, Copy, Debug)]
pub enum Presented<'a> {
    /// A verified OIDC access token and its claims.
    AccessToken {
        /// The token as the caller sent it.
        token: &'a str,
        /// Its verified claims.
        claims: &'a Map<String, Value>,
    },
    /// An API key.
    ApiKey {
        /// The key's name, for messages.
        name: &'a str,
    },
    /// No credentials (the anonymous identity).
    Anonymous,
}

/// What one caller's calls carry in place of, or beside, the connection's
/// credential. Its `Debug` output never shows the token.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallerCredential {
    /// Sent as `Authorization: Bearer`, in place of the connection's own credential.
    pub bearer: Option<Secret>,
    /// Identity headers, as (name, value) pairs.
    pub headers: Vec<(String, String)>,
}

/// Why a caller cannot call a connection as themselves. Its `Display` is a sentence
/// for the caller; none carries a token or a secret.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The connection needs an access token (and its claims), and the caller used an
    /// API key.
    #[error(
        "this connection acts as the caller, which needs an OIDC access token; API key \"{key}\" cannot be used with it"
    )]
    ApiKey {
        /// The key's name.
        key: String,
    },
    /// The connection needs an access token, and the caller presented none.
    #[error("this connection acts as the caller, and an anonymous caller has no identity")]
    Anonymous,
    /// The caller's claims fill no identity headers.
    #[error(transparent)]
    Headers(#[from] headers::Refusal),
    /// The token exchange failed.
    #[error(transparent)]
    Exchange(#[from] ExchangeError),
}

impl Identity {
    /// Whether each caller gets a credential of their own.
    #[must_use]
    pub fn is_per_caller(&self) -> bool {
        !matches!(self, Identity::Fixed)
    }

    /// The credential `presented`'s calls carry: `None` for a fixed identity (the
    /// connection's own credential applies), the exchanged token in `bearer` for a
    /// token exchange, the filled headers for identity headers.
    ///
    /// # Errors
    /// [`IdentityError`] when the caller has no token or claims, a claim is missing or
    /// unusable, or the exchange fails.
    pub async fn credential(
        &self,
        presented: Presented<'_>,
    ) -> Result<Option<CallerCredential>, IdentityError> {
        let (token, claims) = match (self, presented) {
            (Identity::Fixed, _) => return Ok(None),
            (_, Presented::AccessToken { token, claims }) => (token, claims),
            (_, Presented::ApiKey { name }) => {
                return Err(IdentityError::ApiKey {
                    key: name.to_owned(),
                });
            }
            (_, Presented::Anonymous) => return Err(IdentityError::Anonymous),
        };
        match self {
            Identity::Fixed => Ok(None),
            Identity::TokenExchange(exchange) => Ok(Some(CallerCredential {
                bearer: Some(exchange.exchange(token).await?),
                headers: Vec::new(),
            })),
            Identity::Headers(templates) => Ok(Some(CallerCredential {
                bearer: None,
                headers: templates.fill(claims)?,
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml_like_json: &str) -> Result<IdentityConfig, String> {
        serde_json::from_str(yaml_like_json).map_err(|error| error.to_string())
    }

    #[test]
    fn each_mode_deserializes_and_unknown_keys_are_refused() {
        assert!(matches!(
            parse(r#"{"mode":"fixed"}"#),
            Ok(IdentityConfig::Fixed {})
        ));
        let exchange = parse(
            r#"{"mode":"token_exchange","token_url":"https://idp.example/token","client_id":"docket",
                "client_secret":"s3cret","audience":"crm","refresh_before":"30s"}"#,
        );
        let Ok(IdentityConfig::TokenExchange(config)) = &exchange else {
            panic!("{exchange:?}");
        };
        assert_eq!(config.refresh_before, std::time::Duration::from_secs(30));
        assert_eq!(config.timeout, crate::exchange::DEFAULT_TIMEOUT);
        assert!(config.problems("p").is_empty());
        assert!(!format!("{exchange:?}").contains("s3cret"));
        let defaulted = parse(
            r#"{"mode":"token_exchange","token_url":"https://idp.example/token","client_id":"docket",
                "client_secret":"s3cret","audience":"crm"}"#,
        );
        assert!(
            matches!(&defaulted, Ok(IdentityConfig::TokenExchange(config))
                if config.refresh_before == crate::exchange::DEFAULT_REFRESH_BEFORE),
            "{defaulted:?}"
        );
        let headers = parse(r#"{"mode":"headers","headers":{"X-User-Email":"{email}"}}"#);
        assert!(
            matches!(headers, Ok(IdentityConfig::Headers(_))),
            "{headers:?}"
        );
        for bad in [
            r#"{"mode":"token_exchange","token_url":"https://i/t","client_id":"d","client_secret":"s","audience":"a","extra":1}"#,
            r#"{"mode":"headers","headers":{},"extra":1}"#,
            r#"{"mode":"magic"}"#,
            r#"{"mode":"fixed","token_url":"https://i/t"}"#,
            r#"{"token_url":"https://i/t"}"#,
            r#"{"mode":"token_exchange","token_url":"https://i/t","client_id":"d","client_secret":"s","audience":"a","refresh_before":"soon"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn problems_and_compile_agree() {
        let headers = IdentityConfig::Headers(HeadersConfig {
            headers: [("Authorization".to_owned(), "{email}".to_owned())].into(),
        });
        assert_eq!(headers.problems("c.identity").len(), 1);
        assert!(headers.compile("c.identity").is_err());
        assert!(IdentityConfig::Fixed {}.problems("c").is_empty());
        assert!(matches!(
            IdentityConfig::Fixed {}.compile("c"),
            Ok(Identity::Fixed)
        ));
        assert_eq!(IdentityConfig::default().mode(), "fixed");
    }

    #[tokio::test]
    async fn callers_without_a_token_are_refused_clearly() {
        let identity = IdentityConfig::Headers(HeadersConfig {
            headers: [("X-User".to_owned(), "{preferred_username}".to_owned())].into(),
        })
        .compile("c.identity")
        .expect("compiled");
        assert!(identity.is_per_caller());
        let refused = identity.credential(Presented::ApiKey { name: "ci" }).await;
        assert_eq!(refused, Err(IdentityError::ApiKey { key: "ci".into() }));
        assert_eq!(
            identity.credential(Presented::Anonymous).await,
            Err(IdentityError::Anonymous)
        );
        let claims = match serde_json::json!({"preferred_username": "alice"}) {
            Value::Object(claims) => claims,
            _ => Map::new(),
        };
        let credential = identity
            .credential(Presented::AccessToken {
                token: "t",
                claims: &claims,
            })
            .await;
        assert_eq!(
            credential,
            Ok(Some(CallerCredential {
                bearer: None,
                headers: vec![("X-User".into(), "alice".into())],
            }))
        );
        assert_eq!(
            Identity::Fixed.credential(Presented::Anonymous).await,
            Ok(None)
        );
    }
}
