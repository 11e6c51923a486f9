//! One operation described for an agent: method, path, parameters, request body
//! and responses with their schemas' local references resolved, and never more
//! than the bytes asked for.
//!
//! Security requirements, security schemes and servers are left out on purpose:
//! the connection, not the agent, decides where a call goes and what credentials
//! it carries. When the description is too large it degrades in steps, each
//! tried in turn until one fits: response schemas are dropped (their descriptions
//! stay), then schemas are cut at shrinking depths, then long texts are shortened,
//! then schemas go altogether; the result then says `"truncated": true`.

use serde_json::{Map, Value, json};

use crate::error::CatalogError;
use crate::operation::Operation;
use crate::resolve::Resolver;
use crate::size::compact_len;

/// How much of the description is kept.
#[derive(Clone, Copy)]
struct Shape {
    /// Whether response schemas are kept.
    response_schemas: bool,
    /// How deep schemas go before they are cut (`None`: as deep as they are).
    schema_depth: Option<usize>,
    /// How many characters of each text are kept (`None`: all; `Some(0)`: descriptions go).
    text_chars: Option<usize>,
    /// Whether schemas are kept at all.
    schemas: bool,
    /// Whether the notes on what resolution left out are kept.
    notes: bool,
}

const FULL: Shape = Shape {
    response_schemas: true,
    schema_depth: None,
    text_chars: None,
    schemas: true,
    notes: true,
};

/// Every shape tried, from the full description to the barest.
const SHAPES: [Shape; 12] = [
    FULL,
    Shape {
        response_schemas: false,
        ..FULL
    },
    cut_at(16, None),
    cut_at(8, None),
    cut_at(5, None),
    cut_at(3, None),
    cut_at(2, None),
    cut_at(1, Some(200)),
    cut_at(0, Some(80)),
    Shape {
        response_schemas: false,
        schema_depth: None,
        text_chars: Some(80),
        schemas: false,
        notes: true,
    },
    Shape {
        response_schemas: false,
        schema_depth: None,
        text_chars: Some(0),
        schemas: false,
        notes: true,
    },
    Shape {
        response_schemas: false,
        schema_depth: None,
        text_chars: Some(0),
        schemas: false,
        notes: false,
    },
];

const fn cut_at(depth: usize, text_chars: Option<usize>) -> Shape {
    Shape {
        response_schemas: false,
        schema_depth: Some(depth),
        text_chars,
        schemas: true,
        notes: true,
    }
}

/// The operation's schemas, resolved once for every shape.
struct Resolved {
    parameters: Vec<Option<Value>>,
    request_body: Option<Value>,
    responses: Vec<Option<Value>>,
    notes: Vec<String>,
    cut: bool,
}

/// The description of `operation` in at most `max_bytes` bytes of compact JSON.
///
/// # Errors
/// [`CatalogError::EndpointTooLarge`] when not even the barest shape fits.
pub(crate) fn describe(
    document: &Value,
    operation: &Operation,
    max_bytes: usize,
) -> Result<Value, CatalogError> {
    let mut resolver = Resolver::new(document);
    let parameters = operation
        .parameters
        .iter()
        .map(|parameter| {
            parameter
                .schema
                .as_ref()
                .map(|schema| resolver.resolve(schema))
        })
        .collect();
    let request_body = operation
        .request_body
        .as_ref()
        .and_then(|body| body.schema.as_ref())
        .map(|schema| resolver.resolve(schema));
    let responses = operation
        .responses
        .iter()
        .map(|response| {
            response
                .schema
                .as_ref()
                .map(|schema| resolver.resolve(schema))
        })
        .collect();
    let cut = resolver.cut();
    let resolved = Resolved {
        parameters,
        request_body,
        responses,
        notes: resolver.into_notes(),
        cut,
    };
    for (step, shape) in SHAPES.iter().enumerate() {
        let description = render(operation, &resolved, *shape, step > 0 || resolved.cut);
        if compact_len(&description) <= max_bytes {
            return Ok(description);
        }
    }
    Err(CatalogError::EndpointTooLarge {
        operation_id: operation.operation_id.clone(),
        max_bytes,
    })
}

fn render(operation: &Operation, resolved: &Resolved, shape: Shape, truncated: bool) -> Value {
    let schema = |schema: &Option<Value>| -> Option<Value> {
        let schema = schema.as_ref().filter(|_| shape.schemas)?;
        Some(match shape.schema_depth {
            Some(depth) => cut(schema, depth, shape.text_chars),
            None => shorten_all(schema, shape.text_chars),
        })
    };
    let mut description = Map::new();
    description.insert("operation_id".into(), json!(operation.operation_id));
    description.insert("method".into(), json!(operation.method));
    description.insert("path".into(), json!(operation.path));
    insert_text(
        &mut description,
        "summary",
        operation.summary.as_deref(),
        shape.text_chars,
    );
    insert_text(
        &mut description,
        "description",
        operation.description.as_deref(),
        shape.text_chars,
    );
    description.insert("tags".into(), json!(operation.tags));
    description.insert("deprecated".into(), json!(operation.deprecated));
    let parameters: Vec<Value> = operation
        .parameters
        .iter()
        .zip(&resolved.parameters)
        .map(|(parameter, resolved)| {
            let mut entry = Map::new();
            entry.insert("name".into(), json!(parameter.name));
            entry.insert("in".into(), json!(parameter.location.as_str()));
            entry.insert("required".into(), json!(parameter.required));
            insert_text(
                &mut entry,
                "description",
                parameter.description.as_deref(),
                shape.text_chars,
            );
            if parameter.deprecated {
                entry.insert("deprecated".into(), json!(true));
            }
            if let Some(schema) = schema(resolved) {
                entry.insert("schema".into(), schema);
            }
            Value::Object(entry)
        })
        .collect();
    description.insert("parameters".into(), Value::Array(parameters));
    if let Some(body) = &operation.request_body {
        let mut entry = Map::new();
        entry.insert("content_type".into(), json!(body.content_type));
        entry.insert("required".into(), json!(body.required));
        insert_text(
            &mut entry,
            "description",
            body.description.as_deref(),
            shape.text_chars,
        );
        if let Some(schema) = schema(&resolved.request_body) {
            entry.insert("schema".into(), schema);
        }
        description.insert("request_body".into(), Value::Object(entry));
    }
    let mut responses = Map::new();
    for (response, resolved) in operation.responses.iter().zip(&resolved.responses) {
        let mut entry = Map::new();
        insert_text(
            &mut entry,
            "description",
            response.description.as_deref(),
            shape.text_chars,
        );
        if shape.response_schemas
            && let Some(schema) = schema(resolved)
        {
            if let Some(content_type) = &response.content_type {
                entry.insert("content_type".into(), json!(content_type));
            }
            entry.insert("schema".into(), schema);
        }
        responses.insert(response.status.clone(), Value::Object(entry));
    }
    description.insert("responses".into(), Value::Object(responses));
    if shape.notes && !resolved.notes.is_empty() {
        description.insert("notes".into(), json!(resolved.notes));
    }
    description.insert("truncated".into(), json!(truncated));
    Value::Object(description)
}

fn insert_text(map: &mut Map<String, Value>, key: &str, text: Option<&str>, limit: Option<usize>) {
    let Some(text) = text else { return };
    if limit == Some(0) {
        return;
    }
    map.insert(key.to_owned(), Value::String(shorten(text, limit)));
}

/// At most `limit` characters of `text`, with `…` when some were left out.
fn shorten(text: &str, limit: Option<usize>) -> String {
    match limit {
        Some(limit) if text.chars().count() > limit => {
            let mut short: String = text.chars().take(limit).collect();
            short.push('…');
            short
        }
        _ => text.to_owned(),
    }
}

/// `schema` with every text shortened.
fn shorten_all(schema: &Value, text_chars: Option<usize>) -> Value {
    if text_chars.is_none() {
        return schema.clone();
    }
    cut(schema, usize::MAX, text_chars)
}

/// `schema` with objects and arrays below `depth` replaced by a marker (which
/// keeps an object's `type`), and texts shortened.
fn cut(value: &Value, depth: usize, text_chars: Option<usize>) -> Value {
    match value {
        Value::Object(map) if depth == 0 && !map.is_empty() => {
            let mut marker = Map::new();
            if let Some(kind @ (Value::String(_) | Value::Array(_))) = map.get("type") {
                marker.insert("type".to_owned(), kind.clone());
            }
            marker.insert("x-docket-truncated".to_owned(), Value::Bool(true));
            Value::Object(marker)
        }
        Value::Array(items) if depth == 0 && !items.is_empty() => {
            let short_scalars = items.len() <= 20
                && items
                    .iter()
                    .all(|item| !matches!(item, Value::Object(_) | Value::Array(_)));
            if short_scalars {
                Value::Array(items.iter().map(|item| cut(item, 0, text_chars)).collect())
            } else {
                json!({"x-docket-truncated": true})
            }
        }
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), cut(item, depth.saturating_sub(1), text_chars)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| cut(item, depth.saturating_sub(1), text_chars))
                .collect(),
        ),
        Value::String(text) => Value::String(shorten(text, text_chars.map(|limit| limit.max(1)))),
        scalar => scalar.clone(),
    }
}
