//! Media types: which one of an operation's a call uses, and which are JSON.

use serde_json::{Map, Value};

/// The media type a call uses: `application/json`, then any JSON type
/// (`application/problem+json`), then the first by name.
pub(crate) fn choose_media(content: &Map<String, Value>) -> Option<(&String, &Value)> {
    content
        .iter()
        .find(|(media_type, _)| media_type.as_str() == "application/json")
        .or_else(|| content.iter().find(|(media_type, _)| is_json(media_type)))
        .or_else(|| content.iter().next())
}

/// Whether a media type is JSON (`application/json`, `application/vnd.x+json;
/// charset=utf-8`).
pub(crate) fn is_json(media_type: &str) -> bool {
    let essence = media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence.ends_with("/json") || essence.ends_with("+json")
}
