//! Argument values checked against the document's schemas with `jsonschema`
//! (draft 2020-12, which OpenAPI 3.1 uses).
//!
//! The schema is compiled in a root that also holds, at their own locations,
//! every part of the document its local references reach, so
//! `#/components/schemas/Item` resolves as in the document and recursive schemas
//! validate as written. OpenAPI 3.0's own keywords are translated on the way
//! (`nullable: true` allows `null`; boolean `exclusiveMinimum` and
//! `exclusiveMaximum` become numbers), references to other documents accept any
//! value (nothing is fetched), and a schema that does not compile is reported as a
//! problem with the argument, not a panic.

use std::collections::{BTreeSet, HashMap};

use serde_json::{Map, Value, json};

use crate::limits::MAX_PROBLEMS_PER_ARGUMENT;
use crate::pointer::{local_tokens, lookup};
use crate::problem::ArgumentProblem;

/// The longest message taken from the validator, in characters (its messages
/// quote the offending value, which may be long).
const MAX_MESSAGE_CHARS: usize = 300;

/// The most distinct references followed to build one validation root.
const MAX_REFERENCES: usize = 10_000;

/// The longest run of references, one inside another, a checked schema may follow.
/// The validator follows such a run by recursion, so a document could otherwise
/// exhaust the stack (it does at a few thousand); real schemas stay far below.
const MAX_REFERENCE_CHAIN: usize = 500;

/// The problems of `value` against `schema` (none when it is valid), each named
/// from `argument` (`body` becomes `body.items[0].quantity`).
pub(crate) fn check(
    document: &Value,
    openapi_30: bool,
    schema: &Value,
    value: &Value,
    argument: &str,
) -> Vec<ArgumentProblem> {
    let reached = reach(document, schema);
    if reached.longest_chain > MAX_REFERENCE_CHAIN {
        return vec![ArgumentProblem::new(
            argument,
            format!(
                "cannot be checked: the document's schema for it follows more than {MAX_REFERENCE_CHAIN} references one inside another"
            ),
        )];
    }
    let root = validation_root(document, schema, openapi_30, reached.targets);
    let validator = match jsonschema::draft202012::new(&root) {
        Ok(validator) => validator,
        Err(error) => {
            return vec![ArgumentProblem::new(
                argument,
                format!(
                    "cannot be checked: the document's schema for it does not compile ({})",
                    shorten(&error.to_string())
                ),
            )];
        }
    };
    validator
        .iter_errors(value)
        .take(MAX_PROBLEMS_PER_ARGUMENT)
        .map(|error| {
            let location = instance_path(argument, &error.instance_path().to_string());
            ArgumentProblem::new(
                location,
                format!("is not valid: {}", shorten(&error.to_string())),
            )
        })
        .collect()
}

/// `body` and `/items/0/quantity` give `body.items[0].quantity`.
fn instance_path(argument: &str, pointer: &str) -> String {
    let mut path = argument.to_owned();
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        if !token.is_empty() && token.bytes().all(|byte| byte.is_ascii_digit()) {
            path.push_str(&format!("[{token}]"));
        } else {
            path.push('.');
            path.push_str(&token);
        }
    }
    path
}

fn shorten(message: &str) -> String {
    if message.chars().count() <= MAX_MESSAGE_CHARS {
        return message.to_owned();
    }
    let mut short: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
    short.push('…');
    short
}

/// The local references a schema reaches, directly or through other references.
struct Reached {
    /// Every location reached, as reference tokens, sorted.
    targets: BTreeSet<Vec<String>>,
    /// The longest run of references followed one inside another (cycles not counted).
    longest_chain: usize,
}

/// Finds what `schema`'s local references reach, with explicit stacks throughout.
fn reach(document: &Value, schema: &Value) -> Reached {
    // The references found directly inside each reached location (`None`: the schema itself).
    let mut edges: HashMap<Option<Vec<String>>, Vec<Vec<String>>> = HashMap::new();
    let mut pending: Vec<(Option<Vec<String>>, &Value)> = vec![(None, schema)];
    while let Some((from, next)) = pending.pop() {
        let mut found = Vec::new();
        let mut stack = vec![next];
        while let Some(node) = stack.pop() {
            match node {
                Value::Object(map) => {
                    if let Some(Value::String(reference)) = map.get("$ref")
                        && let Some(tokens) = local_tokens(reference)
                        && !tokens.is_empty()
                        && let Some((target, _)) = lookup(document, &tokens)
                    {
                        let key = Some(tokens.clone());
                        if edges.len() < MAX_REFERENCES && !edges.contains_key(&key) {
                            // Reserved now, so each location is scanned once.
                            edges.insert(key.clone(), Vec::new());
                            pending.push((key, target));
                        }
                        found.push(tokens);
                    }
                    stack.extend(map.values());
                }
                Value::Array(items) => stack.extend(items),
                _ => {}
            }
        }
        edges.insert(from, found);
    }
    let longest_chain = longest_chain(&edges);
    let targets = edges.into_keys().flatten().collect();
    Reached {
        targets,
        longest_chain,
    }
}

/// The most references followed one inside another from the schema (`None`), by a
/// depth-first walk on an explicit stack; a reference back onto the walk's own path
/// (a cycle) ends the chain there.
fn longest_chain(edges: &HashMap<Option<Vec<String>>, Vec<Vec<String>>>) -> usize {
    let no_edges = Vec::new();
    let children = |node: &Option<Vec<String>>| edges.get(node).unwrap_or(&no_edges);
    let mut longest: HashMap<Option<Vec<String>>, usize> = HashMap::new();
    let mut on_path: BTreeSet<Option<Vec<String>>> = BTreeSet::new();
    let mut stack: Vec<(Option<Vec<String>>, usize)> = vec![(None, 0)];
    on_path.insert(None);
    while let Some((node, next_child)) = stack.last_mut() {
        let node_children = children(node);
        if let Some(child) = node_children.get(*next_child) {
            *next_child += 1;
            let child = Some(child.clone());
            if !longest.contains_key(&child) && !on_path.contains(&child) {
                on_path.insert(child.clone());
                stack.push((child, 0));
            }
            continue;
        }
        let chain = node_children
            .iter()
            .map(|child| 1 + longest.get(&Some(child.clone())).copied().unwrap_or(0))
            .max()
            .unwrap_or(0);
        let node = node.clone();
        stack.pop();
        on_path.remove(&node);
        longest.insert(node, chain);
    }
    longest.get(&None).copied().unwrap_or(0)
}

/// `{"allOf": [schema]}`, beside a copy of every part of the document that
/// `schema`'s local references reach, each at its own location.
fn validation_root(
    document: &Value,
    schema: &Value,
    openapi_30: bool,
    targets: BTreeSet<Vec<String>>,
) -> Value {
    let mut root = Map::new();
    root.insert(
        "allOf".to_owned(),
        Value::Array(vec![translate(schema, openapi_30)]),
    );
    let mut placed: BTreeSet<Vec<String>> = BTreeSet::new();
    // Sorted, so a location comes before any inside it, which its copy already holds.
    for tokens in targets {
        let inside_placed = (1..tokens.len()).any(|length| placed.contains(&tokens[..length]));
        if inside_placed || tokens[0] == "allOf" {
            continue;
        }
        if let Some((target, _)) = lookup(document, &tokens) {
            place(&mut root, &tokens, translate(target, openapi_30));
            placed.insert(tokens);
        }
    }
    Value::Object(root)
}

fn place(root: &mut Map<String, Value>, tokens: &[String], value: Value) {
    let Some((last, parents)) = tokens.split_last() else {
        return;
    };
    let mut current = root;
    for token in parents {
        let next = current
            .entry(token.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        let Value::Object(next) = next else { return };
        current = next;
    }
    current.insert(last.clone(), value);
}

/// A schema as draft 2020-12 reads it. The walk knows which keywords hold
/// schemas, so a property named `nullable` is not taken for the keyword.
fn translate(schema: &Value, openapi_30: bool) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut translated = Map::new();
    for (keyword, item) in map {
        let value = match (keyword.as_str(), item) {
            // Identifiers would move the base that local references resolve against.
            ("$id" | "$schema", _) => continue,
            // Another document's schema is never fetched: any value passes there.
            ("$ref", Value::String(reference)) if local_tokens(reference).is_none() => continue,
            ("items", Value::Array(items)) => {
                translated.insert(
                    "prefixItems".to_owned(),
                    Value::Array(
                        items
                            .iter()
                            .map(|item| translate(item, openapi_30))
                            .collect(),
                    ),
                );
                continue;
            }
            (
                "not"
                | "items"
                | "additionalProperties"
                | "additionalItems"
                | "contains"
                | "propertyNames"
                | "if"
                | "then"
                | "else"
                | "unevaluatedItems"
                | "unevaluatedProperties"
                | "contentSchema",
                _,
            ) => translate(item, openapi_30),
            ("allOf" | "anyOf" | "oneOf" | "prefixItems", Value::Array(items)) => Value::Array(
                items
                    .iter()
                    .map(|item| translate(item, openapi_30))
                    .collect(),
            ),
            (
                "properties" | "patternProperties" | "$defs" | "definitions" | "dependentSchemas",
                Value::Object(members),
            ) => Value::Object(
                members
                    .iter()
                    .map(|(name, member)| (name.clone(), translate(member, openapi_30)))
                    .collect(),
            ),
            _ => item.clone(),
        };
        translated.insert(keyword.clone(), value);
    }
    if openapi_30 {
        translate_30(translated)
    } else {
        Value::Object(translated)
    }
}

/// OpenAPI 3.0's `nullable` and boolean exclusive bounds, as draft 2020-12 says them.
fn translate_30(mut schema: Map<String, Value>) -> Value {
    for (exclusive, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        match schema.get(exclusive) {
            Some(Value::Bool(true)) => {
                match schema.remove(bound) {
                    Some(limit) => schema.insert(exclusive.to_owned(), limit),
                    None => schema.remove(exclusive),
                };
            }
            Some(Value::Bool(false)) => {
                schema.remove(exclusive);
            }
            _ => {}
        }
    }
    if schema.remove("nullable") != Some(Value::Bool(true)) {
        return Value::Object(schema);
    }
    if let Some(Value::Array(allowed)) = schema.get_mut("enum")
        && !allowed.contains(&Value::Null)
    {
        allowed.push(Value::Null);
    }
    match schema.get_mut("type") {
        Some(Value::String(kind)) => {
            let kind = std::mem::take(kind);
            schema.insert("type".to_owned(), json!([kind, "null"]));
            Value::Object(schema)
        }
        Some(Value::Array(kinds)) => {
            if !kinds.contains(&json!("null")) {
                kinds.push(json!("null"));
            }
            Value::Object(schema)
        }
        _ => json!({"anyOf": [Value::Object(schema), {"type": "null"}]}),
    }
}
