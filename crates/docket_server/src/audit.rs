//! What an audit row may record about a call's arguments: secrets redacted, huge
//! strings truncated.

use docket_protocol::JsonObject;
use serde_json::Value;

/// Argument keys whose values never reach the audit log, whatever the configuration.
const BUILT_IN_SECRET_KEYS: &[&str] = &[
    "password",
    "secret",
    "token",
    "api_key",
    "authorization",
    "credentials",
];

/// Strings longer than this are replaced by a note of their size.
const MAX_STRING_BYTES: usize = 16 * 1024;

/// The arguments as the audit log records them: values of secret keys (built-in and
/// `extra_keys`, compared case-insensitively, at any depth) become `"[REDACTED]"`,
/// and strings over 16 KiB become `"[TRUNCATED: <n> bytes]"`.
pub(crate) fn redact_arguments(arguments: &JsonObject, extra_keys: &[String]) -> Value {
    let is_secret = |key: &str| {
        BUILT_IN_SECRET_KEYS
            .iter()
            .any(|secret| secret.eq_ignore_ascii_case(key))
            || extra_keys
                .iter()
                .any(|secret| secret.eq_ignore_ascii_case(key))
    };
    fn walk(value: &Value, is_secret: &dyn Fn(&str) -> bool) -> Value {
        match value {
            Value::Object(object) => Value::Object(
                object
                    .iter()
                    .map(|(key, value)| {
                        let value = if is_secret(key) {
                            Value::String("[REDACTED]".into())
                        } else {
                            walk(value, is_secret)
                        };
                        (key.clone(), value)
                    })
                    .collect(),
            ),
            Value::Array(items) => {
                Value::Array(items.iter().map(|item| walk(item, is_secret)).collect())
            }
            Value::String(text) if text.len() > MAX_STRING_BYTES => {
                Value::String(format!("[TRUNCATED: {} bytes]", text.len()))
            }
            other => other.clone(),
        }
    }
    walk(&Value::Object(arguments.clone()), &is_secret)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let arguments = json!({
            "sql": "select 1",
            "Password": "hunter2",
            "headers": {"Authorization": "Bearer abc", "x": "y"},
            "auth": [{"token": "t"}],
            "pin": "1234",
            "blob": "x".repeat(MAX_STRING_BYTES + 1),
        });
        let redacted = redact_arguments(arguments.as_object().expect("object"), &["pin".into()]);
        assert_eq!(redacted["sql"], "select 1");
        assert_eq!(redacted["Password"], "[REDACTED]");
        assert_eq!(redacted["headers"]["Authorization"], "[REDACTED]");
        assert_eq!(redacted["headers"]["x"], "y");
        assert_eq!(redacted["auth"][0]["token"], "[REDACTED]");
        assert_eq!(redacted["pin"], "[REDACTED]");
        assert_eq!(
            redacted["blob"],
            format!("[TRUNCATED: {} bytes]", MAX_STRING_BYTES + 1)
        );
        assert!(!redacted.to_string().contains("hunter2"));
    }
}
