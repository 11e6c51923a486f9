//! Identity headers filled from the caller's verified claims: `identity:` of an API
//! connection in `headers` mode, for upstreams that trust Docket as their gateway.
//!
//! ```yaml
//! identity:
//!   mode: headers
//!   headers:
//!     X-User-Email: "{email}"
//!     X-User: "{preferred_username}"
//!     X-Groups: "realm={realm_access.realm} {{literal braces}}"
//! ```
//!
//! A placeholder is a claim path ([`ClaimPath`]); `{{` and `}}` are literal braces.
//! Names and templates are checked when the configuration is read: a header the
//! client or the connection's credentials own (`Authorization`, `Host`, `Cookie`,
//! `Content-Length`, ...) is refused there. A caller whose token lacks a claim, or
//! whose claim could not be carried in a header (a control character, white space at
//! either end, a value longer than [`MAX_HEADER_VALUE_BYTES`]), is refused with a
//! sentence naming the claim, before anything is sent.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::claims::ClaimPath;

/// The longest value one identity header may have once filled, in bytes.
pub const MAX_HEADER_VALUE_BYTES: usize = 1024;

/// The most identity headers one connection may send.
pub const MAX_HEADERS: usize = 32;

/// The longest header name accepted, in bytes.
const MAX_NAME_BYTES: usize = 128;

/// Headers an identity header may never be: credentials, the target host, and the
/// framing and content headers the HTTP client decides (the same list as the API
/// caller's, with the content headers it sets for a body).
const FORBIDDEN_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "host",
    "content-length",
    "content-type",
    "content-encoding",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
    "trailer",
    "keep-alive",
    "proxy-connection",
    "expect",
];

/// `headers:` of an identity in `headers` mode: header name to template.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeadersConfig {
    /// Header name to template (`"{email}"`, `"user={preferred_username}"`).
    pub headers: BTreeMap<String, String>,
}

/// Why a caller's claims fill no headers. Its `Display` is a sentence for the caller.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The claim is missing, or holds no text (an object, a list, `null`, "").
    #[error(
        "this connection sends the caller's `{claim}` claim in {header}, and the caller's token has no usable `{claim}` claim"
    )]
    NoClaim {
        /// The header the claim goes into.
        header: String,
        /// The claim path.
        claim: String,
    },
    /// The claim's text cannot be carried in a header.
    #[error("the caller's `{claim}` claim cannot be sent in {header}: {reason}")]
    Unusable {
        /// The header the claim goes into.
        header: String,
        /// The claim path.
        claim: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The filled value is longer than [`MAX_HEADER_VALUE_BYTES`].
    #[error("the caller's claims make {header} longer than {limit} bytes", limit = MAX_HEADER_VALUE_BYTES)]
    TooLong {
        /// The header.
        header: String,
    },
}

/// A compiled [`HeadersConfig`].
#[derive(Clone, Debug)]
pub struct HeaderTemplates {
    headers: Vec<Template>,
}

#[derive(Clone, Debug)]
struct Template {
    name: String,
    parts: Vec<Part>,
}

#[derive(Clone, Debug)]
enum Part {
    Text(String),
    Claim(ClaimPath),
}

impl HeaderTemplates {
    /// Compiles `config`; `path` prefixes each problem (`connections.crm.identity`).
    ///
    /// # Errors
    /// Every problem, one sentence each.
    pub fn compile(config: &HeadersConfig, path: &str) -> Result<Self, Vec<String>> {
        let mut problems = Vec::new();
        if config.headers.is_empty() {
            problems.push(format!(
                "{path}.headers: name at least one header, such as X-User-Email: \"{{email}}\""
            ));
        }
        if config.headers.len() > MAX_HEADERS {
            problems.push(format!(
                "{path}.headers: at most {MAX_HEADERS} identity headers"
            ));
        }
        let mut seen: Vec<String> = Vec::new();
        let mut headers = Vec::new();
        for (name, template) in &config.headers {
            let key = format!("{path}.headers.{name}");
            if let Err(reason) = check_name(name) {
                problems.push(format!("{key}: {reason}"));
                continue;
            }
            let lower = name.to_ascii_lowercase();
            if seen.contains(&lower) {
                problems.push(format!("{key}: named twice (header names ignore case)"));
                continue;
            }
            seen.push(lower);
            match parse_template(template) {
                Ok(parts) => headers.push(Template {
                    name: name.clone(),
                    parts,
                }),
                Err(reason) => problems.push(format!("{key}: {reason}")),
            }
        }
        if problems.is_empty() {
            Ok(Self { headers })
        } else {
            Err(problems)
        }
    }

    /// The headers' names, as configured.
    #[must_use]
    pub fn names(&self) -> Vec<&str> {
        self.headers
            .iter()
            .map(|header| header.name.as_str())
            .collect()
    }

    /// The headers filled from `claims`, as (name, value) pairs in name order. Every
    /// value is a valid header value: no control character, no white space at either
    /// end, at most [`MAX_HEADER_VALUE_BYTES`].
    ///
    /// # Errors
    /// A [`Refusal`] naming the first claim that is missing or unusable.
    pub fn fill(&self, claims: &Map<String, Value>) -> Result<Vec<(String, String)>, Refusal> {
        let mut filled = Vec::with_capacity(self.headers.len());
        for header in &self.headers {
            let mut value = String::new();
            for part in &header.parts {
                match part {
                    Part::Text(text) => value.push_str(text),
                    Part::Claim(claim) => {
                        let Some(text) = claim.text(claims) else {
                            return Err(Refusal::NoClaim {
                                header: header.name.clone(),
                                claim: claim.as_str().to_owned(),
                            });
                        };
                        if let Err(reason) = check_claim_text(&text) {
                            return Err(Refusal::Unusable {
                                header: header.name.clone(),
                                claim: claim.as_str().to_owned(),
                                reason,
                            });
                        }
                        value.push_str(&text);
                    }
                }
                if value.len() > MAX_HEADER_VALUE_BYTES {
                    return Err(Refusal::TooLong {
                        header: header.name.clone(),
                    });
                }
            }
            filled.push((header.name.clone(), value));
        }
        Ok(filled)
    }
}

/// Why `name` cannot be an identity header, if it cannot.
fn check_name(name: &str) -> Result<(), String> {
    let is_token_byte =
        |byte: u8| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte);
    if name.is_empty() || name.len() > MAX_NAME_BYTES || !name.bytes().all(is_token_byte) {
        return Err(format!(
            "not a header name (letters, digits and -, at most {MAX_NAME_BYTES} bytes)"
        ));
    }
    if FORBIDDEN_HEADERS.contains(&name.to_ascii_lowercase().as_str()) {
        return Err(
            "the HTTP client or the connection's credentials set this header; it cannot carry an identity"
                .to_owned(),
        );
    }
    Ok(())
}

/// Why a claim's text cannot go into a header, if it cannot.
fn check_claim_text(text: &str) -> Result<(), &'static str> {
    if text.chars().any(char::is_control) {
        return Err("it contains a control character");
    }
    if text.starts_with(char::is_whitespace) || text.ends_with(char::is_whitespace) {
        // An HTTP parser drops white space at either end, so the upstream would see
        // another value than the claim's.
        return Err("it begins or ends with white space");
    }
    if text.len() > MAX_HEADER_VALUE_BYTES {
        return Err("it is longer than a header value may be");
    }
    Ok(())
}

/// The parts of `template`, or why it is not one.
fn parse_template(template: &str) -> Result<Vec<Part>, String> {
    if template.is_empty() {
        return Err("the template is empty; write a claim such as \"{email}\"".to_owned());
    }
    if template.len() > MAX_HEADER_VALUE_BYTES {
        return Err(format!(
            "the template is longer than {MAX_HEADER_VALUE_BYTES} bytes"
        ));
    }
    if template.chars().any(char::is_control) {
        return Err("the template contains a control character".to_owned());
    }
    if template.starts_with(char::is_whitespace) || template.ends_with(char::is_whitespace) {
        return Err("the template begins or ends with white space, which HTTP drops".to_owned());
    }
    let mut parts = Vec::new();
    let mut text = String::new();
    let mut rest = template;
    while let Some(at) = rest.find(['{', '}']) {
        text.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if rest[at..].starts_with("{{") {
            text.push('{');
            rest = &rest[at + 2..];
        } else if rest[at..].starts_with("}}") {
            text.push('}');
            rest = &rest[at + 2..];
        } else if rest[at..].starts_with('}') {
            return Err("a } has no opening {; write }} for a literal brace".to_owned());
        } else {
            let Some(close) = after.find('}') else {
                return Err("a { has no closing }; write {{ for a literal brace".to_owned());
            };
            let inner = &after[..close];
            if inner.contains('{') {
                return Err("placeholders do not nest; write {{ for a literal brace".to_owned());
            }
            let Some(claim) = ClaimPath::parse(inner.trim()) else {
                return Err(format!(
                    "{{{inner}}} is not a claim path such as {{email}} or {{realm_access.user}}"
                ));
            };
            if !text.is_empty() {
                parts.push(Part::Text(std::mem::take(&mut text)));
            }
            parts.push(Part::Claim(claim));
            rest = &after[close + 1..];
        }
    }
    text.push_str(rest);
    if !text.is_empty() {
        parts.push(Part::Text(text));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy as _;
    use serde_json::json;

    fn claims(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn compile(pairs: &[(&str, &str)]) -> Result<HeaderTemplates, Vec<String>> {
        let config = HeadersConfig {
            headers: pairs
                .iter()
                .map(|(name, template)| ((*name).to_owned(), (*template).to_owned()))
                .collect(),
        };
        HeaderTemplates::compile(&config, "connections.crm.identity")
    }

    #[test]
    fn templates_fill_from_claims_with_literal_braces() {
        let templates = compile(&[
            ("X-User-Email", "{email}"),
            ("X-User", "user={ preferred_username }; id={{{sub}}}"),
            ("X-Realm", "{realm_access.realm}/{employee}"),
        ])
        .expect("compiled");
        assert_eq!(templates.names(), ["X-Realm", "X-User", "X-User-Email"]);
        let filled = templates
            .fill(&claims(json!({
                "email": "alice@example.com",
                "preferred_username": "alice",
                "sub": "1234",
                "realm_access": {"realm": "staff"},
                "employee": 42,
            })))
            .expect("filled");
        assert_eq!(
            filled,
            [
                ("X-Realm".to_owned(), "staff/42".to_owned()),
                ("X-User".to_owned(), "user=alice; id={1234}".to_owned()),
                ("X-User-Email".to_owned(), "alice@example.com".to_owned()),
            ]
        );
    }

    #[test]
    fn a_missing_or_unusable_claim_is_a_refusal_naming_it() {
        let templates = compile(&[("X-User-Email", "{email}")]).expect("compiled");
        let refusal = templates
            .fill(&claims(json!({"sub": "1"})))
            .expect_err("refused");
        assert_eq!(
            refusal,
            Refusal::NoClaim {
                header: "X-User-Email".into(),
                claim: "email".into()
            }
        );
        assert!(refusal.to_string().contains("`email` claim"), "{refusal}");
        for value in [json!(["a"]), json!(null), json!(""), json!({"a": 1})] {
            assert!(matches!(
                templates.fill(&claims(json!({"email": value}))),
                Err(Refusal::NoClaim { .. })
            ));
        }
        for value in [
            "a\r\nX-Injected: 1",
            "a\u{0}b",
            " admin",
            "admin\t",
            "a\u{7f}",
        ] {
            assert!(
                matches!(
                    templates.fill(&claims(json!({"email": value}))),
                    Err(Refusal::Unusable { .. })
                ),
                "{value:?} was accepted"
            );
        }
        let long = "a".repeat(MAX_HEADER_VALUE_BYTES + 1);
        assert!(templates.fill(&claims(json!({"email": long}))).is_err());
        let two = compile(&[("X-Both", "{a}{b}")]).expect("compiled");
        let half = "a".repeat(MAX_HEADER_VALUE_BYTES / 2 + 1);
        assert!(matches!(
            two.fill(&claims(json!({"a": half, "b": half}))),
            Err(Refusal::TooLong { .. })
        ));
    }

    #[test]
    fn bad_names_and_templates_are_refused_when_read() {
        for name in [
            "Authorization",
            "authorization",
            "Host",
            "Cookie",
            "Content-Length",
            "Content-Type",
            "Transfer-Encoding",
            "Proxy-Authorization",
            "",
            "X User",
            "X-User:",
            "X-Üser",
        ] {
            assert!(
                compile(&[(name, "{email}")]).is_err(),
                "{name:?} was accepted"
            );
        }
        for template in [
            "", "{email", "email}", "{}", "{a..b}", "{a{b}}", "x\ny", " {email}", "{email} ",
        ] {
            assert!(
                compile(&[("X-User", template)]).is_err(),
                "{template:?} was accepted"
            );
        }
        let problems = compile(&[("X-User", "{email"), ("x-user", "{sub}")]).expect_err("refused");
        assert!(
            problems
                .iter()
                .all(|problem| problem.starts_with("connections.crm.identity.headers.")),
            "{problems:?}"
        );
        assert!(
            problems.iter().any(|problem| problem.contains("twice")),
            "{problems:?}"
        );
        assert!(compile(&[]).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Whatever the claims hold, filling gives valid header values or a refusal,
        /// never a panic.
        #[test]
        fn any_claims_give_valid_header_values_or_a_refusal(
            email in proptest::option::of("\\PC{0,40}|[\\x00-\\x7f]{0,40}|.{0,2000}"),
            name in proptest::option::of(proptest::prop_oneof![
                "\\PC{0,40}|[\\x00-\\x7f]{0,40}".prop_map(Value::String),
                proptest::num::i64::ANY.prop_map(Value::from),
                proptest::bool::ANY.prop_map(Value::Bool),
                proptest::strategy::Just(Value::Null),
            ]),
        ) {
            let templates = compile(&[
                ("X-User-Email", "{email}"),
                ("X-User", "name={name}; {{x}}"),
            ])
            .map_err(|problems| proptest::test_runner::TestCaseError::fail(problems.join("; ")))?;
            let mut map = Map::new();
            if let Some(email) = email {
                map.insert("email".into(), Value::String(email));
            }
            if let Some(name) = name {
                map.insert("name".into(), name);
            }
            if let Ok(filled) = templates.fill(&map) {
                proptest::prop_assert_eq!(filled.len(), 2);
                for (header, value) in filled {
                    proptest::prop_assert!(
                        reqwest::header::HeaderName::from_bytes(header.as_bytes()).is_ok()
                    );
                    proptest::prop_assert!(
                        reqwest::header::HeaderValue::from_str(&value).is_ok(),
                        "{:?}", value
                    );
                    proptest::prop_assert!(!value.chars().any(char::is_control));
                    proptest::prop_assert!(value.len() <= MAX_HEADER_VALUE_BYTES);
                    proptest::prop_assert_eq!(value.trim(), value.as_str());
                }
            }
        }
    }
}
