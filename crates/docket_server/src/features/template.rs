//! [`UriTemplate`]: the simple RFC 6570 templates resource templates use
//! (`test://template/{id}/data`, `docket://assets/{id}`): literal text and `{name}`
//! variables, each matching one non-empty path segment's worth of text (no `/`).

use std::collections::BTreeMap;

/// One piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Variable(String),
}

/// A parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct UriTemplate {
    parts: Vec<Part>,
}

impl UriTemplate {
    /// Parses `template`; `None` when a brace is unbalanced, a variable is unnamed,
    /// or two variables touch (their boundary would be ambiguous).
    pub(crate) fn parse(template: &str) -> Option<Self> {
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            match rest.find('{') {
                Some(0) => {
                    let end = rest.find('}')?;
                    let name = &rest[1..end];
                    let valid = !name.is_empty()
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                    if !valid || matches!(parts.last(), Some(Part::Variable(_))) {
                        return None;
                    }
                    parts.push(Part::Variable(name.to_owned()));
                    rest = &rest[end + 1..];
                }
                found => {
                    let end = found.unwrap_or(rest.len());
                    let literal = &rest[..end];
                    if literal.contains('}') {
                        return None;
                    }
                    parts.push(Part::Literal(literal.to_owned()));
                    rest = &rest[end..];
                }
            }
        }
        Some(Self { parts })
    }

    /// The variables of `uri` when it is one of this template's URIs.
    pub(crate) fn matches(&self, uri: &str) -> Option<BTreeMap<String, String>> {
        let mut variables = BTreeMap::new();
        let mut rest = uri;
        let mut parts = self.parts.iter().peekable();
        while let Some(part) = parts.next() {
            match part {
                Part::Literal(literal) => rest = rest.strip_prefix(literal.as_str())?,
                Part::Variable(name) => {
                    // A variable runs to the next literal (or the end), never past a '/'.
                    let end = match parts.peek() {
                        Some(Part::Literal(next)) => rest.find(next.as_str())?,
                        _ => rest.len(),
                    };
                    let value = &rest[..end];
                    if value.is_empty() || value.contains('/') {
                        return None;
                    }
                    variables.insert(name.clone(), value.to_owned());
                    rest = &rest[end..];
                }
            }
        }
        rest.is_empty().then_some(variables)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_take_what_lies_between_literals() {
        let template = UriTemplate::parse("test://template/{id}/data").expect("parses");
        let matched = template
            .matches("test://template/123/data")
            .expect("matches");
        assert_eq!(matched.get("id").map(String::as_str), Some("123"));
        for other in [
            "test://template//data",
            "test://template/1/2/data",
            "test://template/123/data/",
            "test://other/123/data",
        ] {
            assert_eq!(template.matches(other), None, "{other}");
        }
        let tail = UriTemplate::parse("docket://assets/{id}").expect("parses");
        assert_eq!(
            tail.matches("docket://assets/abc")
                .and_then(|vars| vars.get("id").cloned()),
            Some("abc".to_owned())
        );
    }

    #[test]
    fn malformed_templates_are_refused() {
        for bad in ["a/{", "a/{}", "a/}b", "{a}{b}", "a/{b c}"] {
            assert_eq!(UriTemplate::parse(bad), None, "{bad}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any template and URI parse or are refused without panicking, and a URI built
        /// from a template's own variables matches it with those values.
        #[test]
        fn matching_never_panics_and_round_trips(
            template in "\\PC{0,30}",
            uri in "\\PC{0,40}",
            value in "[a-z0-9]{1,8}",
        ) {
            if let Some(parsed) = UriTemplate::parse(&template) {
                let _ = parsed.matches(&uri);
            }
            let parsed = UriTemplate::parse("x://a/{one}/b").expect("parses");
            let built = format!("x://a/{value}/b");
            let matched = parsed.matches(&built).expect("its own URI matches");
            proptest::prop_assert_eq!(matched.get("one"), Some(&value));
        }
    }
}
