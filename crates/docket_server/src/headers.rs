//! The Streamable HTTP request headers that mirror the body (`MCP-Protocol-Version`,
//! `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`): decoding and comparison.
//!
//! Values are trimmed of optional whitespace and may be wrapped as
//! `=?base64?<base64 of UTF-8>?=` to carry characters a header cannot. Names are
//! case-insensitive; values are compared exactly.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;
use serde_json::Value;

/// The protocol version header.
pub(crate) const PROTOCOL_VERSION: &str = "mcp-protocol-version";
/// The method header.
pub(crate) const METHOD: &str = "mcp-method";
/// The name header (tool name, task id).
pub(crate) const NAME: &str = "mcp-name";
/// The prefix of headers that mirror tool arguments marked `x-mcp-header`.
pub(crate) const PARAM_PREFIX: &str = "mcp-param-";

/// Reads and decodes one header.
///
/// Returns `Ok(None)` when absent, and `Err` with a reason when present but not a
/// valid value (not visible ASCII, a broken base64 wrapper, or repeated).
pub(crate) fn read(headers: &HeaderMap, name: &str) -> Result<Option<String>, String> {
    let mut values = headers.get_all(name).iter();
    let Some(raw) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(format!("the {name} header is repeated"));
    }
    let text = raw
        .to_str()
        .map_err(|_| format!("the {name} header has invalid characters"))?;
    let text = text.trim_matches(|c| c == ' ' || c == '\t');
    if text.chars().any(|c| c.is_ascii_control()) {
        return Err(format!("the {name} header has invalid characters"));
    }
    decode(text)
        .map(Some)
        .map_err(|reason| format!("the {name} header {reason}"))
}

/// Decodes the `=?base64?…?=` wrapper; other values are returned as they are.
fn decode(text: &str) -> Result<String, String> {
    let Some(inner) = text
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    else {
        return Ok(text.to_owned());
    };
    let bytes = STANDARD
        .decode(inner)
        .map_err(|_| "has an invalid base64 value".to_owned())?;
    String::from_utf8(bytes).map_err(|_| "has a base64 value that is not UTF-8".to_owned())
}

/// Requires `name` to be present and equal to `expected`.
///
/// # Errors
/// A message naming the header and both values.
pub(crate) fn require_match(
    headers: &HeaderMap,
    name: &str,
    display: &str,
    expected: &str,
) -> Result<(), String> {
    match read(headers, name)? {
        None => Err(format!(
            "the {display} header is required and must be {expected:?}"
        )),
        Some(actual) if actual == expected => Ok(()),
        Some(actual) => Err(format!(
            "Header mismatch: {display} header value {actual:?} does not match body value {expected:?}"
        )),
    }
}

/// Checks the `Mcp-Param-{X}` headers for a tool whose schema marks top-level string,
/// integer or boolean properties with `"x-mcp-header": "X"`: when the argument is
/// present and not null, the header must be present and equal (integers numerically).
///
/// # Errors
/// A message naming the first header that is missing or differs.
pub(crate) fn check_param_headers(
    headers: &HeaderMap,
    input_schema: &Value,
    arguments: &serde_json::Map<String, Value>,
) -> Result<(), String> {
    let Some(properties) = input_schema.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    for (property, schema) in properties {
        let Some(header) = schema.get("x-mcp-header").and_then(Value::as_str) else {
            continue;
        };
        let Some(value) = arguments.get(property).filter(|value| !value.is_null()) else {
            continue;
        };
        let name = format!("{PARAM_PREFIX}{}", header.to_ascii_lowercase());
        let display = format!("Mcp-Param-{header}");
        let Some(actual) = read(headers, &name)? else {
            return Err(format!(
                "the {display} header is required because argument {property:?} is set"
            ));
        };
        let matches = match value {
            Value::String(text) => actual == *text,
            Value::Bool(flag) => actual == flag.to_string(),
            Value::Number(number) => match (actual.parse::<i64>(), number.as_i64()) {
                (Ok(left), Some(right)) => left == right,
                _ => actual == number.to_string(),
            },
            _ => false,
        };
        if !matches {
            return Err(format!(
                "Header mismatch: {display} header value {actual:?} does not match argument {property:?}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;
    use serde_json::json;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).expect("valid header"));
        }
        map
    }

    #[test]
    fn values_are_trimmed_and_base64_decoded() {
        let map = headers(&[("mcp-name", "  greet  ")]);
        assert_eq!(read(&map, NAME), Ok(Some("greet".into())));
        let map = headers(&[("mcp-name", "=?base64?w6lsw6h2ZQ==?=")]);
        assert_eq!(read(&map, NAME), Ok(Some("élève".into())));
        let map = headers(&[("mcp-name", "=?base64?%%%?=")]);
        assert!(read(&map, NAME).is_err());
    }

    #[test]
    fn values_are_case_sensitive() {
        let map = headers(&[("Mcp-Method", "TOOLS/LIST")]);
        assert!(require_match(&map, METHOD, "Mcp-Method", "tools/list").is_err());
        assert!(require_match(&HeaderMap::new(), METHOD, "Mcp-Method", "tools/list").is_err());
    }

    #[test]
    fn param_headers_mirror_marked_arguments() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "other": {"type": "string"}
        }});
        let args = json!({"region": "eu-west", "limit": 10, "other": "x"});
        let args = args.as_object().expect("object");
        assert!(
            check_param_headers(
                &headers(&[("mcp-param-region", "eu-west"), ("mcp-param-limit", "010")]),
                &schema,
                args
            )
            .is_ok()
        );
        assert!(
            check_param_headers(&headers(&[("mcp-param-region", "us")]), &schema, args).is_err()
        );
        assert!(
            check_param_headers(&headers(&[("mcp-param-limit", "10")]), &schema, args).is_err()
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any header bytes read as a value or a reason, never a panic.
        #[test]
        fn no_header_bytes_panic_the_reader(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            if let Ok(value) = HeaderValue::from_bytes(&bytes) {
                let mut map = HeaderMap::new();
                map.insert("mcp-name", value);
                let _ = read(&map, "mcp-name");
            }
        }

        /// Any text travels base64-wrapped and reads back as itself.
        #[test]
        fn wrapped_values_read_back_as_sent(text in "\\PC{0,40}") {
            let wrapped = format!("=?base64?{}?=", STANDARD.encode(&text));
            let map = headers(&[("mcp-name", &wrapped)]);
            proptest::prop_assert_eq!(read(&map, "mcp-name"), Ok(Some(text)));
        }
    }
}
