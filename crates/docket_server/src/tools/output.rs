//! Small builders for the tools' output schemas (the shape of their
//! `structuredContent` on success), so each tool declares its own beside its code
//! in a few readable lines. Only keywords that JSON Schema 2020-12 and draft-07
//! read alike are used (`type`, `properties`, `required`, `items`,
//! `additionalProperties`, `enum`, `description`) and no `$schema`: clients of
//! revision 2025-06-18, which names no dialect, validate with draft-07 tools.

use serde_json::{Map, Value, json};

/// An object with exactly these `properties` (no others), of which `required`
/// must be present; every other property may be left out.
pub(crate) fn object(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// An object whose every listed property is required.
pub(crate) fn record(properties: Value) -> Value {
    let names: Vec<String> = properties
        .as_object()
        .map(|properties| properties.keys().cloned().collect())
        .unwrap_or_default();
    let mut schema = Map::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), properties);
    schema.insert("required".into(), json!(names));
    schema.insert("additionalProperties".into(), json!(false));
    Value::Object(schema)
}

/// Any JSON value: upstream data whose shape is the upstream's (a cell, a body).
pub(crate) fn any(description: &str) -> Value {
    json!({"description": description})
}

/// A string.
pub(crate) fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

/// A string or `null`.
pub(crate) fn string_or_null(description: &str) -> Value {
    json!({"type": ["string", "null"], "description": description})
}

/// A non-negative integer.
pub(crate) fn count(description: &str) -> Value {
    json!({"type": "integer", "minimum": 0, "description": description})
}

/// A non-negative integer or `null` (unknown).
pub(crate) fn count_or_null(description: &str) -> Value {
    json!({"type": ["integer", "null"], "minimum": 0, "description": description})
}

/// A boolean.
pub(crate) fn boolean(description: &str) -> Value {
    json!({"type": "boolean", "description": description})
}

/// An array of `items`.
pub(crate) fn array(items: Value, description: &str) -> Value {
    json!({"type": "array", "items": items, "description": description})
}

/// An RFC 3339 time as text.
pub(crate) fn time(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

/// An RFC 3339 time as text, or `null` (not yet, or never).
pub(crate) fn time_or_null(description: &str) -> Value {
    json!({"type": ["string", "null"], "description": description})
}

/// The fields a result cut short by continuation adds (issue 39): all optional,
/// present only when there is more to read.
pub(crate) fn continuation(properties: &mut Value) {
    if let Some(properties) = properties.as_object_mut() {
        properties.insert(
            "cursor".into(),
            string("Pass it back to this tool to read the next page of the same result."),
        );
        properties.insert(
            "remaining_rows".into(),
            count_or_null("How many rows are left after this page, when known."),
        );
        properties.insert(
            "remaining_bytes".into(),
            count_or_null("How many bytes are left after this page, when known."),
        );
        properties.insert(
            "note".into(),
            string("Why the answer was cut, and how to read on."),
        );
        properties.insert(
            "remaining_note".into(),
            string("What to do when the rest is large (an export, an aggregation)."),
        );
    }
}

/// The annotations of a tool that only reads Docket's own state.
pub(crate) fn read_only() -> docket_protocol::tools::ToolAnnotations {
    docket_protocol::tools::ToolAnnotations {
        read_only_hint: Some(true),
        destructive_hint: Some(false),
        idempotent_hint: Some(true),
        open_world_hint: Some(false),
        ..docket_protocol::tools::ToolAnnotations::default()
    }
}
