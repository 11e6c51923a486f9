//! Reading a caller's verified claims at a dot path.
//!
//! A path such as `realm_access.roles` walks into nested objects. At each level
//! the longest run of segments that is itself a key wins, so a claim named
//! `https://example.com/email` is found although its name contains dots.

use serde_json::{Map, Value};

/// A claim path: `email`, `preferred_username`, `realm_access.roles`, ...
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimPath {
    text: String,
    segments: Vec<String>,
}

impl ClaimPath {
    /// Parses `text`; `None` when it is empty or has an empty segment (`a..b`).
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        if text.split('.').any(str::is_empty) {
            return None;
        }
        Some(Self {
            text: text.to_owned(),
            segments: text.split('.').map(str::to_owned).collect(),
        })
    }

    /// The path as written.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The value at this path in `claims`, if there is one.
    #[must_use]
    pub fn lookup<'a>(&self, claims: &'a Map<String, Value>) -> Option<&'a Value> {
        lookup(claims, &self.segments)
    }

    /// The text at this path: a string, or a number or boolean written out.
    /// Objects, arrays, `null` and empty strings are no text.
    #[must_use]
    pub fn text(&self, claims: &Map<String, Value>) -> Option<String> {
        match self.lookup(claims)? {
            Value::String(text) if !text.is_empty() => Some(text.clone()),
            Value::Number(number) => Some(number.to_string()),
            Value::Bool(flag) => Some(flag.to_string()),
            _ => None,
        }
    }
}

/// The value at `path` in `object` (see the module documentation).
#[must_use]
pub fn lookup<'a>(object: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    (1..=path.len()).rev().find_map(|take| {
        let value = object.get(&path[..take].join("."))?;
        match (&path[take..], value) {
            ([], value) => Some(value),
            (rest, Value::Object(inner)) => lookup(inner, rest),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn claims(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn paths_walk_nested_objects_and_keys_with_dots() {
        let claims = claims(json!({
            "email": "Alice@Example.com",
            "realm_access": {"user": "alice"},
            "https://example.com/login": "a.lice",
            "employee": 42,
            "empty": "",
            "list": ["x"],
        }));
        let text = |path: &str| ClaimPath::parse(path).and_then(|path| path.text(&claims));
        assert_eq!(text("email").as_deref(), Some("Alice@Example.com"));
        assert_eq!(text("realm_access.user").as_deref(), Some("alice"));
        assert_eq!(text("https://example.com/login").as_deref(), Some("a.lice"));
        assert_eq!(text("employee").as_deref(), Some("42"));
        assert_eq!(text("empty"), None);
        assert_eq!(text("list"), None);
        assert_eq!(text("realm_access.missing"), None);
        assert_eq!(text("email.inner"), None);
    }

    #[test]
    fn empty_segments_are_not_paths() {
        assert!(ClaimPath::parse("").is_none());
        assert!(ClaimPath::parse("a..b").is_none());
        assert!(ClaimPath::parse(".a").is_none());
        assert_eq!(
            ClaimPath::parse("a.b")
                .map(|p| p.as_str().to_owned())
                .as_deref(),
            Some("a.b")
        );
    }
}
