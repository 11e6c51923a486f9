//! Trino's file-based system access control, as far as the double enforces it: the
//! `impersonation` rules of a `rules.json`, and who the authenticated principal of a
//! statement request is.
//!
//! The rules follow Trino's `io.trino.plugin.base.security.ImpersonationRule` and
//! `FileBasedSystemAccessControl#checkCanImpersonateUser`: rules are tried in order,
//! the first whose `original_user` and `new_user` both match the whole name decides,
//! and no match denies. `new_user` may refer to the groups `original_user` captured
//! (`$1`, `${name}`); the reference is replaced as Java's
//! `Matcher.appendReplacement` replaces it, so a `\` in `new_user` escapes the next
//! character and a `$` must start a group reference. The replaced text is used as a
//! regular expression, unquoted, as in Trino.
//!
//! Patterns are compiled with the `regex` crate, whose syntax agrees with Java's for
//! what rules files use; look-around and backreferences, which it lacks, are refused
//! when the rules load rather than silently matching differently.

use std::collections::HashMap;
use std::fmt;

use base64::Engine as _;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use regex::{Captures, Regex};
use serde_json::{Map, Value};

/// Why a rules file or a rule was refused, or why a rule could not be evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulesError {
    message: String,
}

impl RulesError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The same error, with where it was found in front.
    fn within(self, place: &str) -> Self {
        Self::new(format!("{place}: {}", self.message))
    }
}

impl fmt::Display for RulesError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.message)
    }
}

impl std::error::Error for RulesError {}

/// A regular expression that must match a whole name, as Java's `Matcher.matches()`.
#[derive(Debug, Clone)]
struct WholeMatch {
    source: String,
    regex: Regex,
}

impl WholeMatch {
    fn new(field: &str, source: &str) -> Result<Self, RulesError> {
        let invalid = |error: regex::Error| {
            RulesError::new(format!(
                "`{field}` is not a valid regular expression: `{source}`: {error}"
            ))
        };
        // Compiled alone first, so that the anchoring group cannot turn an unbalanced
        // pattern such as `a)|(b` into a valid one.
        Regex::new(source).map_err(invalid)?;
        let regex = Regex::new(&format!("^(?:{source})$")).map_err(invalid)?;
        Ok(Self {
            source: source.to_owned(),
            regex,
        })
    }

    fn is_match(&self, text: &str) -> bool {
        self.regex.is_match(text)
    }

    fn captures<'t>(&self, text: &'t str) -> Option<Captures<'t>> {
        self.regex.captures(text)
    }

    /// The number of capturing groups, not counting the whole match.
    fn group_count(&self) -> usize {
        self.regex.captures_len().saturating_sub(1)
    }

    fn group_index(&self, name: &str) -> Option<usize> {
        self.regex
            .capture_names()
            .position(|group| group == Some(name))
    }
}

/// A piece of `new_user` once its group references are parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    /// The text `original_user`'s group of this number captured (0: all of it).
    Group(usize),
}

/// Parses `template` as Java's `Matcher.appendReplacement` reads a replacement:
/// `\c` is `c`, `$n` refers to group `n` (more digits are taken while they still
/// name a group, so with one group `$12` is group 1 then `2`), `${name}` to a named
/// group; anything else is itself. The errors Java would raise on the first query
/// are raised here, when the rules load.
fn parse_replacement(template: &str, original: &WholeMatch) -> Result<Vec<Piece>, RulesError> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = template.chars().peekable();
    while let Some(char) = chars.next() {
        match char {
            '\\' => match chars.next() {
                Some(escaped) => text.push(escaped),
                None => {
                    return Err(RulesError::new(
                        "`new_user` ends with a `\\` that escapes nothing",
                    ));
                }
            },
            '$' => {
                let group = match chars.next() {
                    None => {
                        return Err(RulesError::new(
                            "`new_user` ends with a `$` that names no group (write `\\$` for a literal `$`)",
                        ));
                    }
                    Some('{') => {
                        let mut name = String::new();
                        loop {
                            match chars.next() {
                                Some('}') => break,
                                Some(letter) if letter.is_ascii_alphanumeric() => name.push(letter),
                                _ => {
                                    return Err(RulesError::new(
                                        "`new_user` has a `${` group name without its closing `}` (group names are ASCII letters and digits)",
                                    ));
                                }
                            }
                        }
                        if !name.starts_with(|first: char| first.is_ascii_alphabetic()) {
                            return Err(RulesError::new(format!(
                                "`new_user` refers to group `${{{name}}}`, but a group name starts with a letter"
                            )));
                        }
                        original.group_index(&name).ok_or_else(|| {
                            RulesError::new(format!(
                                "`new_user` refers to group `{name}`, which `original_user` `{}` does not have",
                                original.source
                            ))
                        })?
                    }
                    Some(digit) if digit.is_ascii_digit() => {
                        let mut number = digit.to_digit(10).map_or(0, |value| value as usize);
                        while let Some(next) = chars.peek().and_then(|next| next.to_digit(10)) {
                            match number
                                .checked_mul(10)
                                .and_then(|tens| tens.checked_add(next as usize))
                            {
                                Some(longer) if longer <= original.group_count() => {
                                    number = longer;
                                    chars.next();
                                }
                                _ => break,
                            }
                        }
                        if number > original.group_count() {
                            return Err(RulesError::new(format!(
                                "`new_user` refers to group {number}, which does not exist in `original_user` `{}` ({} groups)",
                                original.source,
                                original.group_count()
                            )));
                        }
                        number
                    }
                    Some(other) => {
                        return Err(RulesError::new(format!(
                            "`new_user` has `${other}`: a `$` starts a group reference such as `$1` or `${{name}}` (write `\\$` for a literal `$`)"
                        )));
                    }
                };
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Group(group));
            }
            other => text.push(other),
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// `pieces` with each group reference replaced by what it captured (nothing for a
/// group that did not take part in the match, as in Java).
fn expand(pieces: &[Piece], captures: &Captures<'_>) -> String {
    let mut text = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(literal) => text.push_str(literal),
            Piece::Group(index) => {
                if let Some(group) = captures.get(*index) {
                    text.push_str(group.as_str());
                }
            }
        }
    }
    text
}

/// Trino's `ImpersonationRule.Reason`s; a rule applies to query impersonation only
/// when its `reasons` include `IMPERSONATION` (the default).
const REASONS: &[&str] = &[
    "IMPERSONATION",
    "VIEW_OWNER",
    "MATERIALIZED_VIEW_OWNER",
    "FUNCTION_OWNER",
    "ROW_FILTER",
    "COLUMN_MASK",
];

/// One entry of a rules file's `impersonation` list.
#[derive(Debug, Clone)]
pub struct ImpersonationRule {
    original_user: Option<WholeMatch>,
    original_role: Option<WholeMatch>,
    /// `new_user` as written, compiled when the rules load as Trino compiles it.
    new_user: WholeMatch,
    /// `new_user` with its group references parsed, when there is an
    /// `original_user` to take the groups from.
    replacement: Option<Vec<Piece>>,
    applies_to_impersonation: bool,
    allow: bool,
}

impl ImpersonationRule {
    /// A rule: an authenticated user whose whole name matches `original_user` may
    /// (`allow`) or may not impersonate a user whose whole name matches `new_user`.
    /// `new_user` may refer to `original_user`'s groups (`$1`, `${name}`).
    ///
    /// # Errors
    ///
    /// When a pattern is not a valid regular expression, or `new_user` refers to a
    /// group `original_user` does not have.
    pub fn new(original_user: &str, new_user: &str, allow: bool) -> Result<Self, RulesError> {
        Self::build(Some(original_user), None, new_user, None, allow)
    }

    fn build(
        original_user: Option<&str>,
        original_role: Option<&str>,
        new_user: &str,
        reasons: Option<Vec<String>>,
        allow: bool,
    ) -> Result<Self, RulesError> {
        let original_user = original_user
            .map(|source| WholeMatch::new("original_user", source))
            .transpose()?;
        let original_role = original_role
            .map(|source| WholeMatch::new("original_role", source))
            .transpose()?;
        let new_user_match = WholeMatch::new("new_user", new_user)?;
        let replacement = original_user
            .as_ref()
            .map(|original| parse_replacement(new_user, original))
            .transpose()?;
        let applies_to_impersonation = match reasons {
            None => true,
            Some(reasons) => {
                if reasons.is_empty() {
                    return Err(RulesError::new(
                        "`reasons` in an impersonation rule must not be empty",
                    ));
                }
                if let Some(unknown) = reasons
                    .iter()
                    .find(|reason| !REASONS.contains(&reason.as_str()))
                {
                    return Err(RulesError::new(format!(
                        "`reasons` has `{unknown}`, which is none of {}",
                        REASONS.join(", ")
                    )));
                }
                reasons.iter().any(|reason| reason == "IMPERSONATION")
            }
        };
        Ok(Self {
            original_user,
            original_role,
            new_user: new_user_match,
            replacement,
            applies_to_impersonation,
            allow,
        })
    }

    /// Whether this rule allows or denies an impersonation: `Some(allow)` when it
    /// matches `original_user` impersonating `new_user`, `None` when it does not
    /// match (the next rule decides).
    ///
    /// A rule with `original_role` never matches: the double's principals have no
    /// roles.
    ///
    /// # Errors
    ///
    /// When `new_user`, with `original_user`'s groups substituted, is not a valid
    /// regular expression (a user name such as `a(b` put into it), which fails the
    /// query in Trino too.
    pub fn decide(&self, original_user: &str, new_user: &str) -> Result<Option<bool>, RulesError> {
        if !self.applies_to_impersonation {
            return Ok(None);
        }
        let substituted;
        let new_user_match = match (&self.original_user, &self.replacement) {
            (Some(original), Some(pieces)) => {
                let Some(captures) = original.captures(original_user) else {
                    return Ok(None);
                };
                let text = expand(pieces, &captures);
                substituted = WholeMatch::new("new_user", &text).map_err(|error| {
                    error.within(&format!(
                        "`new_user` `{}` with the groups of `{original_user}` substituted",
                        self.new_user.source
                    ))
                })?;
                &substituted
            }
            (Some(original), None) => {
                if !original.is_match(original_user) {
                    return Ok(None);
                }
                &self.new_user
            }
            (None, _) => &self.new_user,
        };
        if self.original_role.is_some() {
            return Ok(None);
        }
        Ok(new_user_match.is_match(new_user).then_some(self.allow))
    }

    fn from_json(value: &Value) -> Result<Self, RulesError> {
        let Value::Object(fields) = value else {
            return Err(RulesError::new(format!(
                "a rule is an object such as {{\"original_user\": \"admin\", \"new_user\": \".*\"}}, not `{value}`"
            )));
        };
        let mut original_user = None;
        let mut original_role = None;
        let mut new_user = None;
        let mut reasons = None;
        let mut allow = None;
        for (name, field) in fields {
            match name.as_str() {
                "original_user" | "originalUser" => {
                    set_once(&mut original_user, name, optional_text(name, field)?)?;
                }
                "original_role" => set_once(&mut original_role, name, optional_text(name, field)?)?,
                "new_user" | "newUser" => {
                    set_once(&mut new_user, name, optional_text(name, field)?)?
                }
                "reasons" => {
                    reasons = match field {
                        Value::Null => None,
                        Value::Array(items) => Some(
                            items
                                .iter()
                                .map(|item| match item {
                                    Value::String(reason) => Ok(reason.clone()),
                                    other => Err(RulesError::new(format!(
                                        "`reasons` lists strings, not `{other}`"
                                    ))),
                                })
                                .collect::<Result<Vec<_>, _>>()?,
                        ),
                        other => {
                            return Err(RulesError::new(format!(
                                "`reasons` is a list of strings, not `{other}`"
                            )));
                        }
                    };
                }
                "allow" => {
                    allow = match field {
                        Value::Null => None,
                        Value::Bool(allow) => Some(*allow),
                        other => {
                            return Err(RulesError::new(format!(
                                "`allow` is true or false, not `{other}`"
                            )));
                        }
                    };
                }
                other => {
                    return Err(RulesError::new(format!(
                        "unknown field `{other}` (an impersonation rule has original_user, original_role, new_user, reasons and allow)"
                    )));
                }
            }
        }
        let Some(Some(new_user)) = new_user else {
            return Err(RulesError::new("`new_user` is required"));
        };
        Self::build(
            original_user.flatten().as_deref(),
            original_role.flatten().as_deref(),
            &new_user,
            reasons,
            allow.unwrap_or(true),
        )
    }
}

/// Sets `slot` from a field, refusing a field given twice under its two names.
fn set_once<T>(slot: &mut Option<T>, name: &str, value: T) -> Result<(), RulesError> {
    if slot.is_some() {
        return Err(RulesError::new(format!(
            "`{name}` is given twice (under its name and its alias)"
        )));
    }
    *slot = Some(value);
    Ok(())
}

fn optional_text(name: &str, value: &Value) -> Result<Option<String>, RulesError> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(text.clone())),
        other => Err(RulesError::new(format!(
            "`{name}` is a regular expression in a string, not `{other}`"
        ))),
    }
}

/// The sections of Trino's system `rules.json` other than `impersonation`, which the
/// double does not enforce and so refuses rather than pretend to.
const UNENFORCED_SECTIONS: &[&str] = &[
    "catalogs",
    "schemas",
    "tables",
    "system_session_properties",
    "catalog_session_properties",
    "functions",
    "procedures",
    "queries",
    "principals",
    "system_information",
    "authorization",
];

/// The access control rules a double enforces: the `impersonation` section of
/// Trino's file-based system access control.
#[derive(Debug, Clone)]
pub struct AccessControlRules {
    /// `None` when the file has no `impersonation` section.
    impersonation: Option<Vec<ImpersonationRule>>,
}

impl AccessControlRules {
    /// Rules with these impersonation rules, as a file `{"impersonation": [...]}`.
    pub fn with_impersonation(rules: Vec<ImpersonationRule>) -> Self {
        Self {
            impersonation: Some(rules),
        }
    }

    /// Parses a Trino system `rules.json`, such as
    /// `{"impersonation": [{"original_user": "svc", "new_user": "(alice|bob)"}]}`.
    ///
    /// # Errors
    ///
    /// When the text is not JSON, a rule is malformed (an unknown field, a missing
    /// `new_user`, an invalid regular expression, a reference to a group that does
    /// not exist), or the file has a section other than `impersonation`: the double
    /// enforces no other, and says so rather than ignore it.
    pub fn from_json(text: &str) -> Result<Self, RulesError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|error| RulesError::new(format!("the rules are not valid JSON: {error}")))?;
        let Value::Object(sections) = value else {
            return Err(RulesError::new(
                "the rules are a JSON object such as {\"impersonation\": [...]}",
            ));
        };
        Self::from_sections(&sections)
    }

    fn from_sections(sections: &Map<String, Value>) -> Result<Self, RulesError> {
        let mut impersonation = None;
        for (name, section) in sections {
            match name.as_str() {
                "impersonation" => {
                    impersonation = match section {
                        Value::Null => None,
                        Value::Array(rules) => Some(
                            rules
                                .iter()
                                .enumerate()
                                .map(|(index, rule)| {
                                    ImpersonationRule::from_json(rule).map_err(|error| {
                                        error.within(&format!("impersonation rule {}", index + 1))
                                    })
                                })
                                .collect::<Result<Vec<_>, _>>()?,
                        ),
                        other => {
                            return Err(RulesError::new(format!(
                                "`impersonation` is a list of rules, not `{other}`"
                            )));
                        }
                    };
                }
                known if UNENFORCED_SECTIONS.contains(&known) => {
                    return Err(RulesError::new(format!(
                        "`{known}` rules are Trino's, but the double enforces only `impersonation` rules; remove `{known}`"
                    )));
                }
                other => {
                    return Err(RulesError::new(format!(
                        "unknown section `{other}` (the double enforces `impersonation`)"
                    )));
                }
            }
        }
        Ok(Self { impersonation })
    }

    /// The impersonation rules, in order; `None` when there is no `impersonation`
    /// section.
    pub fn impersonation_rules(&self) -> Option<&[ImpersonationRule]> {
        self.impersonation.as_deref()
    }

    /// Whether `original_user` may impersonate `new_user`: the first matching rule
    /// decides, and with no match, or no `impersonation` section at all (Trino's
    /// "neither impersonation nor principal rules"), impersonation is denied.
    ///
    /// Trino asks only when the two users differ; so does the double.
    ///
    /// # Errors
    ///
    /// When a rule cannot be evaluated (see [`ImpersonationRule::decide`]).
    pub fn can_impersonate(&self, original_user: &str, new_user: &str) -> Result<bool, RulesError> {
        let Some(rules) = &self.impersonation else {
            return Ok(false);
        };
        for rule in rules {
            if let Some(allow) = rule.decide(original_user, new_user)? {
                return Ok(allow);
            }
        }
        Ok(false)
    }
}

/// Who a statement request authenticated as, from its `Authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Credentials {
    /// No `Authorization` header: the session user is its own original user.
    Absent,
    /// The user name of Basic credentials, or the principal configured for a bearer
    /// token.
    Principal(String),
    /// A header the double can take no principal from, and why.
    Unusable(String),
}

/// Base64 as Java's `Base64.getDecoder()` reads it: padding optional.
const BASIC_DECODER: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// The principal of an `Authorization` header value: Basic credentials name their
/// user (the password is not checked), and a bearer token names the principal
/// `bearer_principals` has for it.
pub(crate) fn authenticate(
    authorization: Option<&[u8]>,
    bearer_principals: &HashMap<String, String>,
) -> Credentials {
    let Some(authorization) = authorization else {
        return Credentials::Absent;
    };
    let Ok(authorization) = std::str::from_utf8(authorization) else {
        return Credentials::Unusable("the Authorization header is not UTF-8".to_owned());
    };
    let (scheme, credentials) = authorization
        .trim()
        .split_once(' ')
        .unwrap_or((authorization.trim(), ""));
    let credentials = credentials.trim();
    if scheme.eq_ignore_ascii_case("basic") {
        let Ok(decoded) = BASIC_DECODER.decode(credentials) else {
            return Credentials::Unusable("the Basic credentials are not base64".to_owned());
        };
        let Ok(decoded) = String::from_utf8(decoded) else {
            return Credentials::Unusable("the Basic credentials are not UTF-8".to_owned());
        };
        return match decoded.split_once(':') {
            Some((user, _password)) if !user.is_empty() => Credentials::Principal(user.to_owned()),
            Some(_) => Credentials::Unusable("the Basic credentials have no user name".to_owned()),
            None => {
                Credentials::Unusable("the Basic credentials are not `user:password`".to_owned())
            }
        };
    }
    if scheme.eq_ignore_ascii_case("bearer") {
        return match bearer_principals.get(credentials) {
            Some(principal) => Credentials::Principal(principal.clone()),
            None => Credentials::Unusable(
                "the double has no principal for this bearer token (DoubleState::set_bearer_principal)"
                    .to_owned(),
            ),
        };
    }
    Credentials::Unusable(format!(
        "the double reads Basic and Bearer credentials, not `{scheme}`"
    ))
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose;
    use proptest::prelude::*;

    use super::*;

    /// `Basic` credentials for `user` and `password`, as a client sends them.
    fn basic_authorization(user: &str, password: &str) -> String {
        format!(
            "Basic {}",
            general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
    }

    fn parse(json: &str) -> AccessControlRules {
        match AccessControlRules::from_json(json) {
            Ok(rules) => rules,
            Err(error) => panic!("{json}: {error}"),
        }
    }

    fn allowed(rules: &AccessControlRules, original: &str, new: &str) -> bool {
        match rules.can_impersonate(original, new) {
            Ok(allowed) => allowed,
            Err(error) => panic!("{original} as {new}: {error}"),
        }
    }

    fn refused(json: &str) -> String {
        match AccessControlRules::from_json(json) {
            Ok(rules) => panic!("{json} was accepted: {rules:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn rules_are_tried_in_order_and_the_first_match_decides() {
        let rules = parse(
            r#"{"impersonation": [
                {"original_user": "svc", "new_user": "root", "allow": false},
                {"original_user": "svc", "new_user": ".*"},
                {"original_user": ".*", "new_user": "root"}
            ]}"#,
        );
        assert!(!allowed(&rules, "svc", "root"), "the deny comes first");
        assert!(allowed(&rules, "svc", "alice"));
        assert!(allowed(&rules, "bob", "root"), "only svc is denied root");
        let reversed = parse(
            r#"{"impersonation": [
                {"original_user": "svc", "new_user": ".*"},
                {"original_user": "svc", "new_user": "root", "allow": false}
            ]}"#,
        );
        assert!(allowed(&reversed, "svc", "root"), "the allow comes first");
    }

    #[test]
    fn patterns_match_whole_names_and_allow_defaults_to_true() {
        let rules = parse(r#"{"impersonation": [{"original_user": "svc", "new_user": "ana"}]}"#);
        assert!(allowed(&rules, "svc", "ana"));
        assert!(!allowed(&rules, "svc-2", "ana"));
        assert!(!allowed(&rules, "svc", "anabel"));
        assert!(!allowed(&rules, "my-svc", "ana"));
    }

    #[test]
    fn no_match_denies_and_no_section_denies() {
        let rules = parse(r#"{"impersonation": [{"original_user": "svc", "new_user": "ana"}]}"#);
        assert!(!allowed(&rules, "mallory", "ana"));
        assert!(!allowed(&parse("{\"impersonation\": []}"), "svc", "ana"));
        assert!(!allowed(&parse("{}"), "svc", "ana"));
        assert!(!allowed(&parse("{\"impersonation\": null}"), "svc", "ana"));
    }

    #[test]
    fn new_user_refers_to_the_groups_of_original_user() {
        let rules = parse(
            r#"{"impersonation": [
                {"original_user": "team_(.*)", "new_user": "team_$1_sandbox"},
                {"original_user": "(?<who>[a-z]+)-admin", "new_user": "$1|guest"},
                {"original_user": "(?<who>[a-z])-boss", "new_user": "[${who}]x"},
                {"original_user": "(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)", "new_user": "$10"},
                {"original_user": "(x)", "new_user": "$12"},
                {"original_user": "(.*)@(.*)", "new_user": "$2\\.$1"}
            ]}"#,
        );
        assert!(allowed(&rules, "team_backend", "team_backend_sandbox"));
        assert!(!allowed(&rules, "team_backend", "team_frontend_sandbox"));
        assert!(allowed(&rules, "ada-admin", "ada"));
        assert!(allowed(&rules, "ada-admin", "guest"));
        assert!(!allowed(&rules, "ada-admin", "grace"));
        // `new_user` is a regular expression before it is a replacement (Trino
        // compiles it when the rules load), so a named reference can only stand
        // where `{` is not a repetition, such as in a character class.
        assert!(allowed(&rules, "a-boss", "ax"));
        assert!(!allowed(&rules, "a-boss", "bx"));
        // With ten groups `$10` is group 10; with one, `$12` is group 1 and `2`.
        assert!(allowed(&rules, "abcdefghij", "j"));
        assert!(allowed(&rules, "x", "x2"));
        // A backslash escapes the next character in a replacement, as in Java, so
        // `\.` becomes `.` and matches any character.
        assert!(allowed(&rules, "ana@corp", "corp.ana"));
        assert!(allowed(&rules, "ana@corp", "corpXana"));
    }

    #[test]
    fn substituted_groups_are_regular_expressions_as_in_trino() {
        let rules =
            parse(r#"{"impersonation": [{"original_user": "(.*)-admin", "new_user": "$1"}]}"#);
        // Trino does not quote the group: `a.b` matches `axb`.
        assert!(allowed(&rules, "a.b-admin", "axb"));
        let error = rules
            .can_impersonate("a(b-admin", "a(b")
            .expect_err("an unbalanced group");
        assert!(error.to_string().contains("a(b"), "{error}");
    }

    #[test]
    fn original_user_defaults_to_everyone_and_roles_never_match() {
        let rules = parse(
            r#"{"impersonation": [
                {"original_role": "admin", "new_user": ".*"},
                {"new_user": "test"}
            ]}"#,
        );
        assert!(allowed(&rules, "anyone", "test"));
        assert!(!allowed(&rules, "admin", "bob"), "no principal has a role");
    }

    #[test]
    fn reasons_other_than_impersonation_do_not_apply() {
        let rules = parse(
            r#"{"impersonation": [
                {"original_user": "svc", "new_user": ".*", "reasons": ["VIEW_OWNER"]},
                {"original_user": "svc", "new_user": "ana", "reasons": ["IMPERSONATION", "ROW_FILTER"]}
            ]}"#,
        );
        assert!(!allowed(&rules, "svc", "bob"));
        assert!(allowed(&rules, "svc", "ana"));
        assert!(
            refused(r#"{"impersonation": [{"new_user": "a", "reasons": []}]}"#).contains("empty")
        );
        assert!(
            refused(r#"{"impersonation": [{"new_user": "a", "reasons": ["NOPE"]}]}"#)
                .contains("NOPE")
        );
    }

    #[test]
    fn malformed_rules_are_refused_with_the_reason() {
        for (json, expected) in [
            ("", "not valid JSON"),
            ("[]", "JSON object"),
            (r#"{"impersonation": {}}"#, "list of rules"),
            (r#"{"impersonation": [1]}"#, "impersonation rule 1"),
            (
                r#"{"impersonation": [{"original_user": "a"}]}"#,
                "`new_user` is required",
            ),
            (
                r#"{"impersonation": [{"new_user": null}]}"#,
                "`new_user` is required",
            ),
            (
                r#"{"impersonation": [{"new_user": "a", "user": "b"}]}"#,
                "unknown field `user`",
            ),
            (
                r#"{"impersonation": [{"new_user": "a", "allow": "yes"}]}"#,
                "`allow`",
            ),
            (
                r#"{"impersonation": [{"new_user": "("}]}"#,
                "not a valid regular expression",
            ),
            (
                r#"{"impersonation": [{"original_user": "a)|(b", "new_user": "x"}]}"#,
                "original_user",
            ),
            (
                r#"{"impersonation": [{"original_user": "(a)", "new_user": "$2"}]}"#,
                "group 2",
            ),
            (
                r#"{"impersonation": [{"original_user": "(?<a>a)", "new_user": "${a}"}]}"#,
                "not a valid regular expression",
            ),
            (
                r#"{"impersonation": [{"original_user": "(a)", "new_user": "[${b}]"}]}"#,
                "group `b`",
            ),
            (
                r#"{"impersonation": [{"original_user": "(a)", "new_user": "[${1}]"}]}"#,
                "starts with a letter",
            ),
            (
                r#"{"impersonation": [{"original_user": "(a)", "new_user": "[${a]"}]}"#,
                "closing `}`",
            ),
            (
                r#"{"impersonation": [{"original_user": "a", "new_user": "b$"}]}"#,
                "names no group",
            ),
            (
                r#"{"impersonation": [{"original_user": "a", "new_user": "$x"}]}"#,
                "`$x`",
            ),
            (
                r#"{"impersonation": [{"original_user": "a", "new_user": "b\\"}]}"#,
                "not a valid regular expression",
            ),
            (
                r#"{"impersonation": [{"original_user": "a", "originalUser": "b", "new_user": "c"}]}"#,
                "twice",
            ),
            (
                r#"{"impersonation": [{"original_user": "(?=a)", "new_user": "c"}]}"#,
                "original_user",
            ),
            (r#"{"tables": []}"#, "enforces only `impersonation`"),
            (
                r#"{"impersonations": []}"#,
                "unknown section `impersonations`",
            ),
        ] {
            let error = refused(json);
            assert!(error.contains(expected), "{json}: {error}");
        }
    }

    #[test]
    fn aliases_and_a_dollar_without_original_user_are_accepted() {
        let rules = parse(
            r#"{"impersonation": [{"originalUser": "svc", "newUser": "ana"}, {"new_user": "end$"}]}"#,
        );
        assert!(allowed(&rules, "svc", "ana"));
        assert!(allowed(&rules, "x", "end"));
    }

    #[test]
    fn typed_rules_behave_as_parsed_ones() {
        let rules = AccessControlRules::with_impersonation(vec![
            ImpersonationRule::new("(.*)-admin", "$1", true).expect("valid"),
            ImpersonationRule::new("svc", ".*", false).expect("valid"),
        ]);
        assert!(allowed(&rules, "ana-admin", "ana"));
        assert!(!allowed(&rules, "svc", "ana"));
        assert_eq!(rules.impersonation_rules().map(<[_]>::len), Some(2));
        assert!(ImpersonationRule::new("(a", "b", true).is_err());
    }

    #[test]
    fn the_principal_comes_from_basic_or_a_known_bearer_token() {
        let tokens = HashMap::from([("tok".to_owned(), "svc".to_owned())]);
        let basic = basic_authorization("svc", "any password: with colons");
        assert_eq!(
            authenticate(Some(basic.as_bytes()), &tokens),
            Credentials::Principal("svc".to_owned())
        );
        // Java's decoder does not insist on padding.
        assert_eq!(
            authenticate(Some(b"basic YTpi"), &tokens),
            Credentials::Principal("a".to_owned())
        );
        assert_eq!(
            authenticate(Some(b"Bearer tok"), &tokens),
            Credentials::Principal("svc".to_owned())
        );
        assert_eq!(authenticate(None, &tokens), Credentials::Absent);
        for unusable in [
            b"Bearer other".as_slice(),
            b"Basic !!!",
            b"Basic OnB3",
            b"Basic dXNlcg==",
            b"Negotiate abc",
            b"\xff",
        ] {
            assert!(
                matches!(
                    authenticate(Some(unusable), &tokens),
                    Credentials::Unusable(_)
                ),
                "{unusable:?}"
            );
        }
    }

    /// A name from a small alphabet, so that patterns built from names hold no
    /// regular expression syntax.
    fn name() -> impl Strategy<Value = String> {
        "[abc]{1,3}"
    }

    /// A rule the reference model below can evaluate by string comparison.
    #[derive(Debug, Clone)]
    enum ModelRule {
        /// `original_user: name`, `new_user: name`.
        Exact(String, String, bool),
        /// `original_user: name`, `new_user: ".*"`.
        AnyNew(String, bool),
        /// `original_user: "(.*)-admin"`, `new_user: "$1"`.
        OwnName(bool),
    }

    impl ModelRule {
        fn json(&self) -> Value {
            match self {
                Self::Exact(original, new, allow) => {
                    serde_json::json!({"original_user": original, "new_user": new, "allow": allow})
                }
                Self::AnyNew(original, allow) => {
                    serde_json::json!({"original_user": original, "new_user": ".*", "allow": allow})
                }
                Self::OwnName(allow) => {
                    serde_json::json!({"original_user": "(.*)-admin", "new_user": "$1", "allow": allow})
                }
            }
        }

        fn decide(&self, original: &str, new: &str) -> Option<bool> {
            match self {
                Self::Exact(o, n, allow) => (o == original && n == new).then_some(*allow),
                Self::AnyNew(o, allow) => (o == original).then_some(*allow),
                Self::OwnName(allow) => {
                    (original.strip_suffix("-admin") == Some(new)).then_some(*allow)
                }
            }
        }
    }

    fn model_rule() -> impl Strategy<Value = ModelRule> {
        prop_oneof![
            (name(), name(), any::<bool>()).prop_map(|(o, n, a)| ModelRule::Exact(o, n, a)),
            (name(), any::<bool>()).prop_map(|(o, a)| ModelRule::AnyNew(o, a)),
            any::<bool>().prop_map(ModelRule::OwnName),
        ]
    }

    fn user() -> impl Strategy<Value = String> {
        (name(), any::<bool>())
            .prop_map(|(name, admin)| if admin { format!("{name}-admin") } else { name })
    }

    /// Any JSON value, a few levels deep.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-z_$(){}\\\\.*]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(
                    (
                        prop_oneof![
                            Just("impersonation".to_owned()),
                            Just("original_user".to_owned()),
                            Just("new_user".to_owned()),
                            Just("allow".to_owned()),
                            Just("reasons".to_owned()),
                            "[a-z_]{1,6}",
                        ],
                        inner
                    ),
                    0..4
                )
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Parsed rules decide exactly as a first-match-wins model of them.
        #[test]
        fn parsed_rules_decide_as_the_first_matching_rule(
            model in prop::collection::vec(model_rule(), 0..6),
            original in user(),
            new in user(),
        ) {
            let json = serde_json::json!({
                "impersonation": model.iter().map(ModelRule::json).collect::<Vec<_>>()
            });
            let parsed = AccessControlRules::from_json(&json.to_string());
            prop_assert!(parsed.is_ok(), "{json}: {parsed:?}");
            let parsed = parsed.expect("checked above");
            let expected = model.iter().find_map(|rule| rule.decide(&original, &new)).unwrap_or(false);
            prop_assert_eq!(parsed.can_impersonate(&original, &new), Ok(expected));
        }

        /// A rule put in front of others decides whatever follows it.
        #[test]
        fn a_matching_rule_in_front_decides(
            model in prop::collection::vec(model_rule(), 0..6),
            original in user(),
            new in user(),
            allow in any::<bool>(),
        ) {
            let mut rules = vec![serde_json::json!({"original_user": original, "new_user": new, "allow": allow})];
            rules.extend(model.iter().map(ModelRule::json));
            let json = serde_json::json!({ "impersonation": rules }).to_string();
            let parsed = AccessControlRules::from_json(&json);
            prop_assert!(parsed.is_ok(), "{json}");
            prop_assert_eq!(parsed.expect("checked").can_impersonate(&original, &new), Ok(allow));
        }

        /// Any text, and any JSON, either parses or is refused with a message; and
        /// rules that parse can be evaluated for any pair of names without panicking.
        #[test]
        fn any_input_parses_or_is_refused_with_a_reason(
            value in json_value(),
            text in ".{0,40}",
            original in ".{0,8}",
            new in ".{0,8}",
        ) {
            for input in [value.to_string(), serde_json::json!({"impersonation": [value]}).to_string(), text] {
                match AccessControlRules::from_json(&input) {
                    Ok(rules) => {
                        // An error (a substitution that is no regex) is an answer too.
                        let _ = rules.can_impersonate(&original, &new);
                    }
                    Err(error) => prop_assert!(!error.to_string().is_empty()),
                }
            }
        }

        /// Any Authorization header yields a principal, or a reason it yields none.
        #[test]
        fn any_authorization_header_is_read_or_refused(header in prop::collection::vec(any::<u8>(), 0..40)) {
            if let Credentials::Unusable(reason) = authenticate(Some(&header), &HashMap::new()) {
                prop_assert!(!reason.is_empty());
            }
        }
    }
}
