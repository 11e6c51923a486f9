//! The catalog's integration tests, one binary: a shop API in YAML end to end
//! (index, search, schemas, calls), malformed documents, a FastAPI-style 3.1
//! document, and properties over any input.

mod calls;
mod fastapi;
mod index;
mod malformed;
mod properties;
mod schemas;
mod search;

use docket_openapi::Catalog;
use serde_json::{Map, Value};

/// The shop document's text (`shop.yaml`).
pub(crate) const SHOP: &str = include_str!("shop.yaml");

/// The FastAPI document's text (`fastapi.json`).
pub(crate) const FASTAPI: &str = include_str!("fastapi.json");

/// The shop document as a catalog.
pub(crate) fn shop() -> Catalog {
    Catalog::parse("shop", SHOP.as_bytes()).expect("the shop document parses")
}

/// A JSON object literal as call arguments.
pub(crate) fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments are an object, not {other}"),
    }
}

/// The line (from 1) of the first line of `text` that contains `needle`.
pub(crate) fn line_of(text: &str, needle: &str) -> usize {
    text.lines()
        .position(|line| line.contains(needle))
        .map(|index| index + 1)
        .expect("the needle is in the text")
}
