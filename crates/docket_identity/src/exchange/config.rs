//! `identity:` of a connection in `token_exchange` mode, and its checks.

use std::net::IpAddr;
use std::time::Duration;

use reqwest::Url;
use serde::Deserialize;

use crate::duration;
use crate::secret::Secret;

/// How long before an exchanged token expires it is exchanged anew, unless configured.
pub const DEFAULT_REFRESH_BEFORE: Duration = Duration::from_secs(60);

/// How long one exchange may take, unless configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The longest text accepted for a client id, audience, resource or scope, in bytes.
const MAX_PARAMETER_BYTES: usize = 2048;

/// The settings of an RFC 8693 token exchange, as configured:
///
/// ```yaml
/// identity:
///   mode: token_exchange
///   token_url: https://idp.example/realms/acme/protocol/openid-connect/token
///   client_id: docket
///   client_secret: ${DOCKET_EXCHANGE_SECRET}
///   audience: crm-api
///   resource: https://crm.example/api   # optional
///   scope: "crm.read"                   # optional
///   refresh_before: 60s                 # optional, 60s by default
///   timeout: 10s                        # optional, 10s by default
/// ```
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenExchangeConfig {
    /// The identity provider's token endpoint: `https://`, or `http://` for a
    /// loopback host only.
    pub token_url: String,
    /// Docket's client id at the identity provider.
    pub client_id: String,
    /// Docket's client secret, sent by HTTP Basic authentication.
    pub client_secret: Secret,
    /// The audience the exchanged token is for (the upstream API).
    pub audience: String,
    /// The resource (an absolute URI) the exchanged token is for, if the identity
    /// provider wants one.
    #[serde(default)]
    pub resource: Option<String>,
    /// The scopes asked for, space separated.
    #[serde(default)]
    pub scope: Option<String>,
    /// How long before its expiry an exchanged token stops being reused.
    #[serde(
        default = "default_refresh_before",
        deserialize_with = "duration::deserialize"
    )]
    pub refresh_before: Duration,
    /// How long one exchange may take, the answer's body included.
    #[serde(
        default = "default_timeout",
        deserialize_with = "duration::deserialize"
    )]
    pub timeout: Duration,
}

fn default_refresh_before() -> Duration {
    DEFAULT_REFRESH_BEFORE
}

fn default_timeout() -> Duration {
    DEFAULT_TIMEOUT
}

impl TokenExchangeConfig {
    /// Every problem with these settings, one sentence each, each prefixed by `path`
    /// (`connections.crm.identity`).
    #[must_use]
    pub fn problems(&self, path: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if let Err(reason) = check_token_url(&self.token_url) {
            problems.push(format!("{path}.token_url: {reason}"));
        }
        let mut text = |key: &str, value: &str, required: bool| {
            if value.trim().is_empty() {
                if required {
                    problems.push(format!("{path}.{key}: required"));
                } else {
                    problems.push(format!("{path}.{key}: must not be empty when given"));
                }
            } else if value.len() > MAX_PARAMETER_BYTES {
                problems.push(format!(
                    "{path}.{key}: longer than {MAX_PARAMETER_BYTES} bytes"
                ));
            } else if value.chars().any(char::is_control) {
                problems.push(format!("{path}.{key}: contains a control character"));
            }
        };
        text("client_id", &self.client_id, true);
        text("client_secret", self.client_secret.expose(), true);
        text("audience", &self.audience, true);
        if let Some(scope) = &self.scope {
            text("scope", scope, false);
        }
        if let Some(resource) = &self.resource {
            text("resource", resource, false);
        }
        if let Some(scope) = &self.scope
            && !scope
                .split(' ')
                .filter(|s| !s.is_empty())
                .all(is_scope_token)
        {
            problems.push(format!(
                "{path}.scope: scopes are separated by spaces and hold no quote or backslash"
            ));
        }
        if let Some(resource) = self.resource.as_deref().filter(|r| !r.trim().is_empty())
            && Url::parse(resource).map_or(true, |url| url.fragment().is_some())
        {
            problems.push(format!(
                "{path}.resource: must be an absolute URI without a fragment (RFC 8707)"
            ));
        }
        if self.timeout.is_zero() {
            problems.push(format!("{path}.timeout: must be greater than zero"));
        }
        problems
    }
}

/// Whether `scope` is one scope token (RFC 6749 §3.3).
fn is_scope_token(scope: &str) -> bool {
    scope
        .bytes()
        .all(|byte| byte == 0x21 || (0x23..=0x5b).contains(&byte) || (0x5d..=0x7e).contains(&byte))
}

/// Why `url` cannot be a token endpoint, if it cannot. It carries Docket's client
/// secret and the caller's token, so it must be `https://` (`http://` only to a
/// loopback host, as for the OIDC issuer), with no credentials or fragment; a query is
/// allowed (RFC 6749 §3.2).
pub(crate) fn check_token_url(url: &str) -> Result<Url, &'static str> {
    let parsed = Url::parse(url).map_err(|_| "must be an absolute https:// URL")?;
    if parsed.fragment().is_some() {
        return Err("must not have a fragment");
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("must not hold credentials; use client_id and client_secret");
    }
    let host = parsed.host_str().unwrap_or_default();
    match parsed.scheme() {
        "https" if !host.is_empty() => Ok(parsed),
        "http" if is_loopback_host(host) => Ok(parsed),
        _ => Err("must be an https:// URL (http:// is allowed only for a loopback host)"),
    }
}

/// Whether `host` (as `Url::host_str` gives it) names the local machine.
fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TokenExchangeConfig {
        TokenExchangeConfig {
            token_url: "https://idp.example/token".into(),
            client_id: "docket".into(),
            client_secret: Secret::new("s3cret"),
            audience: "crm".into(),
            resource: None,
            scope: None,
            refresh_before: DEFAULT_REFRESH_BEFORE,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    #[test]
    fn token_urls_must_be_https_or_loopback_http() {
        for url in [
            "https://idp.example/token",
            "https://idp.example/token?realm=a",
            "http://127.0.0.1:8080/token",
            "http://localhost/token",
            "http://[::1]:9/token",
        ] {
            assert!(check_token_url(url).is_ok(), "{url}");
        }
        for url in [
            "http://idp.example/token",
            "ftp://idp.example/token",
            "https://u:p@idp.example/token",
            "https://idp.example/token#x",
            "idp.example/token",
            "",
        ] {
            assert!(check_token_url(url).is_err(), "{url}");
        }
    }

    #[test]
    fn problems_name_each_key() {
        assert_eq!(config().problems("p"), Vec::<String>::new());
        let bad = TokenExchangeConfig {
            token_url: "http://idp.example/token".into(),
            client_id: String::new(),
            client_secret: Secret::new(""),
            audience: "a\nb".into(),
            resource: Some("not a uri".into()),
            scope: Some("a \"b\"".into()),
            timeout: Duration::ZERO,
            ..config()
        };
        let problems = bad.problems("connections.crm.identity");
        for key in [
            "token_url",
            "client_id",
            "client_secret",
            "audience",
            "resource",
            "scope",
            "timeout",
        ] {
            assert!(
                problems
                    .iter()
                    .any(|p| p.starts_with(&format!("connections.crm.identity.{key}:"))),
                "{key}: {problems:?}"
            );
        }
        assert!(!format!("{problems:?}").contains("s3cret"));
    }
}
