//! From bytes to one JSON value: the size, UTF-8 and format checks, the JSON or
//! YAML parser (with its line and column on a syntax error), and the nesting
//! bound, checked without recursion so that no document can exhaust the stack.

use serde_json::{Map, Number, Value};

use crate::error::CatalogError;
use crate::limits::{MAX_DOCUMENT_BYTES, MAX_NESTING_DEPTH};
use crate::lines::line_of;
use crate::pointer::{Pointer, Segment};
use crate::source::{Format, Source};

/// Reads a document's bytes into a value.
///
/// # Errors
/// When the document is too large, not UTF-8, not well-formed, or nested too deep.
pub(crate) fn read<'a>(name: &str, bytes: &'a [u8]) -> Result<(Value, Source<'a>), CatalogError> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(CatalogError::TooLarge {
            name: name.to_owned(),
            size: bytes.len(),
            limit: MAX_DOCUMENT_BYTES,
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|error| CatalogError::NotUtf8 {
        name: name.to_owned(),
        line: line_at(bytes, error.valid_up_to()),
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let format = if text.trim_start().starts_with('{') {
        Format::Json
    } else {
        Format::Yaml
    };
    let source = Source { text, format };
    let value = match format {
        Format::Json => read_json(name, text)?,
        Format::Yaml => read_yaml(name, source)?,
    };
    if let Some(too_deep) = too_deep_at(&value, MAX_NESTING_DEPTH) {
        return Err(CatalogError::TooDeep {
            name: name.to_owned(),
            limit: MAX_NESTING_DEPTH,
            line: line_of(source, &too_deep),
        });
    }
    Ok((value, source))
}

fn read_json(name: &str, text: &str) -> Result<Value, CatalogError> {
    serde_json::from_str(text).map_err(|error| {
        let (line, column) = (error.line(), error.column());
        let message = without_position(&error.to_string(), line, column);
        syntax_or_depth(name, Format::Json, message, Some((line, column)))
    })
}

fn read_yaml(name: &str, source: Source<'_>) -> Result<Value, CatalogError> {
    let parsed: Result<yaml_serde::Value, _> = yaml_serde::from_str(source.text);
    let mut yaml = parsed.map_err(|error| {
        let position = error
            .location()
            .map(|location| (location.line(), location.column()));
        let message = match position {
            Some((line, column)) => without_position(&error.to_string(), line, column),
            None => error.to_string(),
        };
        syntax_or_depth(name, Format::Yaml, message, position)
    })?;
    // `<<: *base` merge keys, as YAML tools read them.
    yaml.apply_merge()
        .map_err(|error| syntax_or_depth(name, Format::Yaml, error.to_string(), None))?;
    let mut path = Pointer::root();
    yaml_to_json(yaml, &mut path).map_err(|problem| match problem {
        YamlProblem::TooDeep => CatalogError::TooDeep {
            name: name.to_owned(),
            limit: MAX_NESTING_DEPTH,
            line: line_of(source, &path),
        },
        YamlProblem::KeyNotText => CatalogError::Invalid {
            name: name.to_owned(),
            location: path.to_string(),
            line: line_of(source, &path),
            message: "has a key that is a list or a mapping; OpenAPI keys are text".to_owned(),
        },
    })
}

/// The parsers' own depth guards (128 levels) say "recursion limit exceeded".
fn syntax_or_depth(
    name: &str,
    format: Format,
    message: String,
    position: Option<(usize, usize)>,
) -> CatalogError {
    if message.contains("recursion limit exceeded") {
        return CatalogError::TooDeep {
            name: name.to_owned(),
            limit: MAX_NESTING_DEPTH,
            line: position.map(|(line, _)| line),
        };
    }
    let message = if message == "repetition limit exceeded" {
        "its aliases expand to too many values (repetition limit exceeded)".to_owned()
    } else {
        message
    };
    CatalogError::Syntax {
        name: name.to_owned(),
        format: format.name(),
        line: position.map(|(line, _)| line),
        column: position.map(|(_, column)| column),
        message,
    }
}

/// The parser's message without its own ` at line 3 column 7`, which the error
/// states once in its own words.
fn without_position(message: &str, line: usize, column: usize) -> String {
    message.replacen(&format!(" at line {line} column {column}"), "", 1)
}

/// The line (from 1) of a byte offset.
fn line_at(bytes: &[u8], offset: usize) -> usize {
    let before = bytes.get(..offset).unwrap_or(bytes);
    1 + before.iter().filter(|byte| **byte == b'\n').count()
}

/// The location of the first object or array nested deeper than `limit`, found
/// with an explicit stack of iterators (memory grows with the depth, not the size).
fn too_deep_at(value: &Value, limit: usize) -> Option<Pointer> {
    type Children<'a> = Box<dyn Iterator<Item = (Segment, &'a Value)> + 'a>;
    fn children(value: &Value) -> Option<Children<'_>> {
        match value {
            Value::Array(items) => Some(Box::new(
                items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| (Segment::Index(index), item)),
            )),
            Value::Object(map) => Some(Box::new(
                map.iter()
                    .map(|(key, item)| (Segment::Key(key.clone()), item)),
            )),
            _ => None,
        }
    }
    let mut pointer = Pointer::root();
    let mut frames: Vec<Children<'_>> = children(value).into_iter().collect();
    if limit == 0 && !frames.is_empty() {
        return Some(pointer);
    }
    while let Some(frame) = frames.last_mut() {
        match frame.next() {
            Some((segment, child)) => {
                if let Some(grandchildren) = children(child) {
                    pointer.push(segment);
                    if frames.len() + 1 > limit {
                        return Some(pointer);
                    }
                    frames.push(grandchildren);
                }
            }
            None => {
                frames.pop();
                pointer.pop();
            }
        }
    }
    None
}

enum YamlProblem {
    TooDeep,
    KeyNotText,
}

/// A YAML value as JSON: keys that are numbers or booleans (`200:` in `responses`)
/// become text, tags are dropped, numbers JSON cannot hold (`.nan`, `.inf`) become
/// text. The parser has already bounded the depth (128); this guard stands behind it.
fn yaml_to_json(value: yaml_serde::Value, path: &mut Pointer) -> Result<Value, YamlProblem> {
    if path.segments().len() > 2 * MAX_NESTING_DEPTH {
        return Err(YamlProblem::TooDeep);
    }
    Ok(match value {
        yaml_serde::Value::Null => Value::Null,
        yaml_serde::Value::Bool(flag) => Value::Bool(flag),
        yaml_serde::Value::Number(number) => yaml_number(&number),
        yaml_serde::Value::String(text) => Value::String(text),
        yaml_serde::Value::Sequence(items) => {
            let mut converted = Vec::with_capacity(items.len());
            for (index, item) in items.into_iter().enumerate() {
                path.push(Segment::Index(index));
                converted.push(yaml_to_json(item, path)?);
                path.pop();
            }
            Value::Array(converted)
        }
        yaml_serde::Value::Mapping(mapping) => {
            let mut converted = Map::new();
            for (key, item) in mapping {
                let key = match key {
                    yaml_serde::Value::String(text) => text,
                    yaml_serde::Value::Number(number) => number.to_string(),
                    yaml_serde::Value::Bool(flag) => flag.to_string(),
                    yaml_serde::Value::Null => "null".to_owned(),
                    _ => return Err(YamlProblem::KeyNotText),
                };
                path.push(Segment::Key(key.clone()));
                let item = yaml_to_json(item, path)?;
                path.pop();
                converted.insert(key, item);
            }
            Value::Object(converted)
        }
        yaml_serde::Value::Tagged(tagged) => yaml_to_json(tagged.value, path)?,
    })
}

fn yaml_number(number: &yaml_serde::Number) -> Value {
    if let Some(unsigned) = number.as_u64() {
        Value::Number(unsigned.into())
    } else if let Some(signed) = number.as_i64() {
        Value::Number(signed.into())
    } else {
        number
            .as_f64()
            .and_then(Number::from_f64)
            .map_or_else(|| Value::String(number.to_string()), Value::Number)
    }
}
