//! Argument values written as a request writes them: path values
//! percent-encoded (every byte outside the unreserved characters, so `/`, `?`,
//! `#` and `%` in a value cannot change the path), query pairs and header values
//! in the parameter's style, scalars as JSON renders them (`true`, `42`, `1.5`,
//! text as is). Also the header names a call may never set.

use serde_json::Value;

use crate::media::is_json;
use crate::operation::Parameter;

/// Headers a call never sets: the connection sets credentials and the host, and
/// the HTTP client owns the framing.
const FORBIDDEN_HEADERS: [&str; 7] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
];

/// Whether a header name is one a call may never set.
pub(crate) fn is_forbidden_header(name: &str) -> bool {
    FORBIDDEN_HEADERS
        .iter()
        .any(|forbidden| forbidden.eq_ignore_ascii_case(name))
}

/// Whether `name` is an HTTP token (RFC 9110, section 5.6.2), as header names are.
pub(crate) fn is_token(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte))
}

/// `text` with every byte outside the unreserved characters (`A-Z a-z 0-9 - . _ ~`)
/// percent-encoded.
pub(crate) fn encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// A scalar as text: JSON's rendering for numbers and booleans, text as is;
/// `None` for `null`, lists and objects.
pub(crate) fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Number(number) => Some(number.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

const NESTED: &str = "holds a null, a list inside a list, or an object inside a list or object, which this parameter's style cannot write";

/// The scalars of a list, or of an object's members as `name, value` pairs.
fn scalars<'a>(items: impl Iterator<Item = &'a Value>) -> Result<Vec<String>, String> {
    items
        .map(|item| scalar(item).ok_or_else(|| NESTED.to_owned()))
        .collect()
}

/// A path parameter's value, encoded, in its style (`simple`, `label`, `matrix`).
pub(crate) fn path_value(parameter: &Parameter, value: &Value) -> Result<String, String> {
    if let Some(content_type) = &parameter.content_type {
        return Ok(encode(&content_text(content_type, value)));
    }
    let (prefix, separator) = match parameter.style.as_str() {
        "simple" => (String::new(), ","),
        "label" => (".".to_owned(), if parameter.explode { "." } else { "," }),
        "matrix" => (format!(";{}=", encode(&parameter.name)), ","),
        other => return Err(unsupported_style(other)),
    };
    let pieces: Vec<String> = match value {
        Value::Array(items) => scalars(items.iter())?
            .iter()
            .map(|item| encode(item))
            .collect(),
        Value::Object(members) => {
            let mut pieces = Vec::new();
            for (name, member) in members {
                let member = scalar(member).ok_or_else(|| NESTED.to_owned())?;
                if parameter.explode {
                    pieces.push(format!("{}={}", encode(name), encode(&member)));
                } else {
                    pieces.push(encode(name));
                    pieces.push(encode(&member));
                }
            }
            pieces
        }
        other => vec![encode(&scalar(other).ok_or_else(|| NESTED.to_owned())?)],
    };
    if parameter.style == "matrix" && parameter.explode {
        // `;id=3;id=4` for a list, `;r=1;g=2` for an object.
        return Ok(match value {
            Value::Array(_) => pieces
                .iter()
                .map(|piece| format!("{prefix}{piece}"))
                .collect(),
            Value::Object(_) => pieces.iter().map(|piece| format!(";{piece}")).collect(),
            _ => format!("{prefix}{}", pieces.concat()),
        });
    }
    Ok(format!("{prefix}{}", pieces.join(separator)))
}

/// A query parameter's pairs (not yet encoded), in its style (`form`,
/// `spaceDelimited`, `pipeDelimited`, `deepObject`).
pub(crate) fn query_pairs(
    parameter: &Parameter,
    value: &Value,
) -> Result<Vec<(String, String)>, String> {
    let name = &parameter.name;
    if let Some(content_type) = &parameter.content_type {
        return Ok(vec![(name.clone(), content_text(content_type, value))]);
    }
    let delimiter = match parameter.style.as_str() {
        "form" => ",",
        "spaceDelimited" => " ",
        "pipeDelimited" => "|",
        "deepObject" => {
            let Value::Object(members) = value else {
                return Err("must be an object: its style is deepObject".to_owned());
            };
            return members
                .iter()
                .map(|(member, item)| {
                    let item = scalar(item).ok_or_else(|| NESTED.to_owned())?;
                    Ok((format!("{name}[{member}]"), item))
                })
                .collect();
        }
        other => return Err(unsupported_style(other)),
    };
    Ok(match value {
        Value::Array(items) => {
            let items = scalars(items.iter())?;
            if parameter.explode {
                items.into_iter().map(|item| (name.clone(), item)).collect()
            } else {
                vec![(name.clone(), items.join(delimiter))]
            }
        }
        Value::Object(members) => {
            let mut pairs = Vec::new();
            let mut flat = Vec::new();
            for (member, item) in members {
                let item = scalar(item).ok_or_else(|| NESTED.to_owned())?;
                if parameter.explode {
                    pairs.push((member.clone(), item));
                } else {
                    flat.push(member.clone());
                    flat.push(item);
                }
            }
            if !parameter.explode {
                pairs.push((name.clone(), flat.join(delimiter)));
            }
            pairs
        }
        other => vec![(
            name.clone(),
            scalar(other).ok_or_else(|| NESTED.to_owned())?,
        )],
    })
}

/// A header parameter's value, in the `simple` style, refused when it holds a
/// control character (a line break would start another header).
pub(crate) fn header_value(parameter: &Parameter, value: &Value) -> Result<String, String> {
    let text = if let Some(content_type) = &parameter.content_type {
        content_text(content_type, value)
    } else {
        match value {
            Value::Array(items) => scalars(items.iter())?.join(","),
            Value::Object(members) => {
                let mut pieces = Vec::new();
                for (name, member) in members {
                    let member = scalar(member).ok_or_else(|| NESTED.to_owned())?;
                    if parameter.explode {
                        pieces.push(format!("{name}={member}"));
                    } else {
                        pieces.push(name.clone());
                        pieces.push(member);
                    }
                }
                pieces.join(",")
            }
            other => scalar(other).ok_or_else(|| NESTED.to_owned())?,
        }
    };
    if text
        .chars()
        .any(|character| character.is_control() && character != '\t')
    {
        return Err(
            "holds a control character (such as a line break), which a header cannot carry"
                .to_owned(),
        );
    }
    Ok(text)
}

/// A value described by `content`: as JSON for a JSON media type, otherwise text
/// as is and anything else as JSON.
fn content_text(content_type: &str, value: &Value) -> String {
    match value {
        Value::String(text) if !is_json(content_type) => text.clone(),
        other => other.to_string(),
    }
}

fn unsupported_style(style: &str) -> String {
    format!("has the style `{style}`, which Docket cannot write")
}
