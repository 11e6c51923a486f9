//! The Trino session user a caller runs as: `impersonation:` of a Trino connection.
//!
//! ```yaml
//! impersonation:
//!   user_claim: email            # any claim path; required
//!   transforms: [strip_domain, lowercase, {rewrite: {pattern: "^svc-(.*)$", replacement: "$1"}}]
//!   allow: ["[a-z][a-z0-9._-]*"] # who may be impersonated (full matches); empty allows all
//!   deny: ["admin", "root"]      # never impersonated, even if allowed
//! ```
//!
//! The claim's text goes through the transforms in order, then must match an
//! `allow` pattern (when there are any) and no `deny` pattern. An API key names
//! its user in its key entry; that name is checked the same way but not
//! transformed. A caller without a usable value is refused with a sentence that
//! names the claim, before anything reaches Trino.

use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::claims::ClaimPath;

/// The longest session user Docket sends, in bytes.
pub const MAX_USER_BYTES: usize = 256;

/// `impersonation:` as configured.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ImpersonationConfig {
    /// The claim path the session user comes from: `email`, `preferred_username`,
    /// `sub`, or any dot path.
    pub user_claim: String,
    /// What is done to the claim's text, in order.
    pub transforms: Vec<Transform>,
    /// Regular expressions (whole-value matches) of the users that may be
    /// impersonated; empty allows every user.
    pub allow: Vec<String>,
    /// Regular expressions (whole-value matches) of users never impersonated.
    pub deny: Vec<String>,
}

/// One step from the claim's text to the session user.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Transform {
    /// Lower-cases the text.
    Lowercase,
    /// Drops `@` and everything after the last one (`alice@example.com` → `alice`).
    StripDomain,
    /// Replaces the first match of `pattern` with `replacement` (`$1` names a group).
    Rewrite {
        /// A regular expression.
        pattern: String,
        /// The replacement, with `$1`, `${name}` for groups.
        replacement: String,
    },
}

/// Who is asking, as far as the session user is concerned.
#[derive(Clone, Copy, Debug)]
pub enum Caller<'a> {
    /// A caller with verified token claims.
    Claims(&'a Map<String, Value>),
    /// An API key; `user` is the session user its key entry names, if any.
    ApiKey {
        /// The key's name, for messages.
        name: &'a str,
        /// The `user:` of its entry.
        user: Option<&'a str>,
    },
    /// A caller with neither (the anonymous identity).
    Anonymous,
}

/// Why a caller has no session user. Its `Display` is a sentence for the caller.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The claim is missing, or holds no text.
    #[error(
        "this connection runs queries as the caller, and the caller's token has no usable `{claim}` claim"
    )]
    NoClaim {
        /// The configured claim path.
        claim: String,
    },
    /// An API key whose entry names no user.
    #[error(
        "this connection runs queries as the caller, and API key \"{key}\" names no `user` in its entry"
    )]
    KeyWithoutUser {
        /// The key's name.
        key: String,
    },
    /// No credentials at all.
    #[error(
        "this connection runs queries as the caller, and an anonymous caller has no `{claim}` claim"
    )]
    Anonymous {
        /// The configured claim path.
        claim: String,
    },
    /// The value is not a user Trino can be given.
    #[error("the `{claim}` claim does not give a usable session user: {reason}")]
    Unusable {
        /// The configured claim path.
        claim: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// An allow or deny pattern refuses the user.
    #[error("this connection may not run queries as \"{user}\"")]
    NotAllowed {
        /// The session user that was refused.
        user: String,
    },
}

/// A compiled [`ImpersonationConfig`].
#[derive(Clone, Debug)]
pub struct UserMapping {
    claim: ClaimPath,
    transforms: Vec<Step>,
    allow: Vec<Regex>,
    deny: Vec<Regex>,
}

#[derive(Clone, Debug)]
enum Step {
    Lowercase,
    StripDomain,
    Rewrite(Regex, String),
}

impl UserMapping {
    /// Compiles `config`; `path` prefixes each problem (`connections.wh.impersonation`).
    ///
    /// # Errors
    /// Every problem, one sentence each.
    pub fn compile(config: &ImpersonationConfig, path: &str) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        let claim = ClaimPath::parse(config.user_claim.trim());
        if claim.is_none() {
            problems.push(format!(
                "{path}.user_claim: required, a claim name or dot path such as email or preferred_username"
            ));
        }
        let mut compile = |key: String, pattern: &str, whole: bool| {
            let source = if whole {
                format!("^(?:{pattern})$")
            } else {
                pattern.to_owned()
            };
            match regex::RegexBuilder::new(&source)
                .size_limit(1 << 20)
                .build()
            {
                Ok(regex) => Some(regex),
                Err(error) => {
                    problems.push(format!("{key}: not a regular expression: {error}"));
                    None
                }
            }
        };
        let transforms = config
            .transforms
            .iter()
            .enumerate()
            .filter_map(|(index, transform)| match transform {
                Transform::Lowercase => Some(Step::Lowercase),
                Transform::StripDomain => Some(Step::StripDomain),
                Transform::Rewrite {
                    pattern,
                    replacement,
                } => compile(
                    format!("{path}.transforms[{index}].rewrite.pattern"),
                    pattern,
                    false,
                )
                .map(|regex| Step::Rewrite(regex, replacement.clone())),
            })
            .collect();
        let allow = config
            .allow
            .iter()
            .enumerate()
            .filter_map(|(index, pattern)| compile(format!("{path}.allow[{index}]"), pattern, true))
            .collect();
        let deny = config
            .deny
            .iter()
            .enumerate()
            .filter_map(|(index, pattern)| compile(format!("{path}.deny[{index}]"), pattern, true))
            .collect();
        match claim {
            Some(claim) if problems.is_empty() => Ok(Self {
                claim,
                transforms,
                allow,
                deny,
            }),
            _ => Err(problems),
        }
    }

    /// The claim path the user comes from.
    #[must_use]
    pub fn claim(&self) -> &str {
        self.claim.as_str()
    }

    /// The session user `caller` runs as.
    ///
    /// # Errors
    /// A [`Refusal`] that says why there is none.
    pub fn session_user(&self, caller: Caller<'_>) -> Result<String, Refusal> {
        let user = match caller {
            Caller::Claims(claims) => {
                let text = self.claim.text(claims).ok_or_else(|| Refusal::NoClaim {
                    claim: self.claim().to_owned(),
                })?;
                self.transform(text)
            }
            Caller::ApiKey { name, user } => {
                user.map(str::to_owned)
                    .ok_or_else(|| Refusal::KeyWithoutUser {
                        key: name.to_owned(),
                    })?
            }
            Caller::Anonymous => {
                return Err(Refusal::Anonymous {
                    claim: self.claim().to_owned(),
                });
            }
        };
        let unusable = |reason| Refusal::Unusable {
            claim: self.claim().to_owned(),
            reason,
        };
        if user.trim().is_empty() {
            return Err(unusable("it is empty"));
        }
        if user.len() > MAX_USER_BYTES {
            return Err(unusable("it is longer than 256 bytes"));
        }
        if user.chars().any(char::is_control) {
            return Err(unusable("it contains a control character"));
        }
        let allowed = self.allow.is_empty() || self.allow.iter().any(|regex| regex.is_match(&user));
        if !allowed || self.deny.iter().any(|regex| regex.is_match(&user)) {
            return Err(Refusal::NotAllowed { user });
        }
        Ok(user)
    }

    fn transform(&self, mut text: String) -> String {
        for step in &self.transforms {
            text = match step {
                Step::Lowercase => text.to_lowercase(),
                Step::StripDomain => match text.rfind('@') {
                    Some(at) => text[..at].to_owned(),
                    None => text,
                },
                Step::Rewrite(regex, replacement) => {
                    regex.replace(&text, replacement.as_str()).into_owned()
                }
            };
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn mapping(yaml_like: Value) -> UserMapping {
        let config: ImpersonationConfig =
            serde_json::from_value(yaml_like).unwrap_or_else(|error| panic!("{error}"));
        UserMapping::compile(&config, "impersonation")
            .unwrap_or_else(|problems| panic!("{problems:?}"))
    }

    fn claims(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn transforms_run_in_order() {
        let mapping = mapping(json!({
            "user_claim": "email",
            "transforms": ["strip_domain", "lowercase",
                {"rewrite": {"pattern": "^ext-(.*)$", "replacement": "guest_$1"}}],
        }));
        let user =
            |email: &str| mapping.session_user(Caller::Claims(&claims(json!({"email": email}))));
        assert_eq!(user("Alice@Example.com").as_deref(), Ok("alice"));
        assert_eq!(user("EXT-Bob@partner.io").as_deref(), Ok("guest_bob"));
        assert_eq!(user("a@b@c").as_deref(), Ok("a@b"));
    }

    #[test]
    fn a_missing_claim_is_refused_by_name() {
        let mapping = mapping(json!({"user_claim": "preferred_username"}));
        let refusal = mapping
            .session_user(Caller::Claims(&claims(json!({"email": "a@b"}))))
            .expect_err("refused");
        assert!(
            refusal.to_string().contains("`preferred_username`"),
            "{refusal}"
        );
        let anonymous = mapping
            .session_user(Caller::Anonymous)
            .expect_err("refused");
        assert!(
            anonymous.to_string().contains("`preferred_username`"),
            "{anonymous}"
        );
        let key = mapping
            .session_user(Caller::ApiKey {
                name: "ci",
                user: None,
            })
            .expect_err("refused");
        assert!(key.to_string().contains("\"ci\""), "{key}");
    }

    #[test]
    fn api_keys_name_their_user_untransformed() {
        let mapping = mapping(json!({"user_claim": "email", "transforms": ["lowercase"]}));
        assert_eq!(
            mapping
                .session_user(Caller::ApiKey {
                    name: "ci",
                    user: Some("Svc_CI")
                })
                .as_deref(),
            Ok("Svc_CI")
        );
    }

    #[test]
    fn allow_and_deny_match_whole_values() {
        let mapping = mapping(json!({
            "user_claim": "sub",
            "allow": ["[a-z]+"],
            "deny": ["root|admin"],
        }));
        let user = |sub: &str| mapping.session_user(Caller::Claims(&claims(json!({"sub": sub}))));
        assert_eq!(user("alice").as_deref(), Ok("alice"));
        assert!(matches!(user("alice2"), Err(Refusal::NotAllowed { .. })));
        assert!(matches!(user("admin"), Err(Refusal::NotAllowed { .. })));
        assert!(user("xadmin").is_ok());
        assert!(matches!(
            user("  "),
            Err(Refusal::Unusable { .. }) | Err(Refusal::NotAllowed { .. })
        ));
    }

    #[test]
    fn bad_configuration_names_every_problem() {
        let config: ImpersonationConfig = serde_json::from_value(json!({
            "user_claim": "a..b",
            "allow": ["("],
            "transforms": [{"rewrite": {"pattern": "[", "replacement": ""}}],
        }))
        .unwrap_or_else(|error| panic!("{error}"));
        let problems = UserMapping::compile(&config, "c.impersonation").expect_err("refused");
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("c.impersonation.user_claim"));
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("c.impersonation.allow[0]"))
        );
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("c.impersonation.transforms[0].rewrite.pattern"))
        );
        let unknown =
            serde_json::from_value::<ImpersonationConfig>(json!({"user_claim": "email", "usr": 1}));
        assert!(unknown.is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any claim value gives a usable user or a refusal, never a panic, and
        /// what is accepted is short, has no control character and is not denied.
        #[test]
        fn any_claim_value_is_mapped_or_refused(value in any::<String>(), lower in any::<bool>()) {
            let mut transforms = vec![json!("strip_domain")];
            if lower {
                transforms.push(json!("lowercase"));
            }
            transforms.push(json!({"rewrite": {"pattern": "\\s+", "replacement": "_"}}));
            let mapping = mapping(json!({"user_claim": "email", "transforms": transforms, "deny": ["root"]}));
            if let Ok(user) = mapping.session_user(Caller::Claims(&claims(json!({"email": value})))) {
                prop_assert!(!user.trim().is_empty());
                prop_assert!(user.len() <= MAX_USER_BYTES);
                prop_assert!(!user.chars().any(char::is_control));
                prop_assert_ne!(user, "root");
            }
        }
    }
}
