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

mod claims;
mod config;
mod keys;
mod verifier;

pub(crate) use claims::looks_like_jwt;
pub use config::OidcConfig;
pub(crate) use verifier::{OidcVerifier, identity_from_claims};

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use jsonwebtoken::Algorithm;
    use serde_json::{Map, Value};

    use super::claims::*;
    use super::config::*;
    use super::keys::*;

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
