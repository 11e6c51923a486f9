//! The `auth.oidc` configuration section, and which provider URLs it accepts.

use serde::Deserialize;

/// The issuer and key-set URL rules, shared with Docket's own authorization server.
pub(super) use docket_oauth::config::check_provider_url;

/// The signature algorithms accepted by default: every asymmetric algorithm
/// jsonwebtoken verifies. The key published by the provider decides which one
/// a given token can actually use.
pub(super) const ASYMMETRIC_ALGORITHMS: [&str; 9] = [
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
