//! Schemas with their local `$ref`s replaced by what they point at, for an agent
//! to read in one piece.
//!
//! Three things keep the result finite: a reference already being expanded on
//! the way down is left as `{"$ref": …, "x-docket-cycle": true}` (so `Tree` whose
//! `children` are `Tree`s, or `A` → `B` → `A`, stops); the expansion stops at
//! [`MAX_RESOLVED_DEPTH`] levels (of nesting, and of references followed in a row); and after [`MAX_RESOLVED_VALUES`] values no
//! further reference is expanded. References to other documents or URLs are kept
//! as they are, with a note, and never fetched.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use crate::limits::{MAX_RESOLVED_DEPTH, MAX_RESOLVED_VALUES};
use crate::pointer::{local_tokens, lookup};

/// The most notes one resolution keeps.
const MAX_NOTES: usize = 20;

/// Resolves schemas against one document, sharing its budget between them.
pub(crate) struct Resolver<'a> {
    document: &'a Value,
    values_left: usize,
    /// The references being expanded, outermost first.
    stack: Vec<String>,
    notes: BTreeSet<String>,
    /// Whether a depth or value bound cut something.
    cut: bool,
}

impl<'a> Resolver<'a> {
    pub(crate) fn new(document: &'a Value) -> Self {
        Self {
            document,
            values_left: MAX_RESOLVED_VALUES,
            stack: Vec::new(),
            notes: BTreeSet::new(),
            cut: false,
        }
    }

    /// `schema` with its local references expanded.
    pub(crate) fn resolve(&mut self, schema: &Value) -> Value {
        self.walk(schema, 0)
    }

    /// Whether a bound cut something out of a resolved schema.
    pub(crate) fn cut(&self) -> bool {
        self.cut
    }

    /// What the resolutions left out, in words (sorted, at most a few).
    pub(crate) fn into_notes(self) -> Vec<String> {
        self.notes.into_iter().collect()
    }

    fn note(&mut self, note: String) {
        if self.notes.len() < MAX_NOTES {
            self.notes.insert(note);
        }
    }

    fn walk(&mut self, value: &Value, depth: usize) -> Value {
        self.values_left = self.values_left.saturating_sub(1);
        if depth >= MAX_RESOLVED_DEPTH && matches!(value, Value::Object(_) | Value::Array(_)) {
            self.cut = true;
            self.note(format!(
                "schemas nested deeper than {MAX_RESOLVED_DEPTH} levels are cut and marked \"x-docket-truncated\""
            ));
            return json!({"x-docket-truncated": true});
        }
        match value {
            Value::Object(map) => {
                if let Some(Value::String(reference)) = map.get("$ref") {
                    return self.reference(reference, map, depth);
                }
                Value::Object(
                    map.iter()
                        .map(|(key, item)| (key.clone(), self.walk(item, depth + 1)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.walk(item, depth + 1))
                    .collect(),
            ),
            scalar => scalar.clone(),
        }
    }

    fn reference(&mut self, reference: &str, map: &Map<String, Value>, depth: usize) -> Value {
        let mut siblings = Map::new();
        for (key, item) in map {
            if key != "$ref" {
                siblings.insert(key.clone(), self.walk(item, depth + 1));
            }
        }
        let marked = |marker: &str, mut siblings: Map<String, Value>| {
            siblings.insert("$ref".to_owned(), Value::String(reference.to_owned()));
            siblings.insert(marker.to_owned(), Value::Bool(true));
            Value::Object(siblings)
        };
        let Some(tokens) = local_tokens(reference) else {
            self.note(format!(
                "`{reference}` is in another document and was not followed"
            ));
            siblings.insert("$ref".to_owned(), Value::String(reference.to_owned()));
            return Value::Object(siblings);
        };
        if self.stack.iter().any(|open| open == reference) {
            return marked("x-docket-cycle", siblings);
        }
        // A chain of references that each hold only the next one adds no depth of
        // its own, so its length is bounded apart from the depth.
        if self.stack.len() >= MAX_RESOLVED_DEPTH {
            self.cut = true;
            self.note(format!(
                "chains of more than {MAX_RESOLVED_DEPTH} references are cut and marked \"x-docket-truncated\""
            ));
            return marked("x-docket-truncated", siblings);
        }
        if self.values_left == 0 {
            self.cut = true;
            self.note(format!(
                "after {MAX_RESOLVED_VALUES} values no further reference is expanded; those left are marked \"x-docket-truncated\""
            ));
            return marked("x-docket-truncated", siblings);
        }
        let Some((target, _)) = lookup(self.document, &tokens) else {
            self.note(format!("`{reference}` points at nothing in the document"));
            return marked("x-docket-unresolved", siblings);
        };
        self.stack.push(reference.to_owned());
        let resolved = self.walk(target, depth);
        self.stack.pop();
        if siblings.is_empty() {
            return resolved;
        }
        // Keywords beside a `$ref` (a `description`, in OpenAPI 3.1) apply too.
        match resolved {
            Value::Object(mut expanded) => {
                expanded.extend(siblings);
                Value::Object(expanded)
            }
            other => {
                siblings.insert("allOf".to_owned(), Value::Array(vec![other]));
                Value::Object(siblings)
            }
        }
    }
}
