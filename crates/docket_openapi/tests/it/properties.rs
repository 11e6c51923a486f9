//! Properties over any input: parsing never panics on any bytes or any JSON,
//! planning never panics on any arguments, a path value never adds a segment,
//! search never panics and keeps to its limit, and a description never exceeds
//! its size. Each runs a fixed number of cases, so a run takes the same time
//! every time.

use docket_openapi::{Catalog, MAX_SEARCH_LIMIT};
use proptest::prelude::*;
use serde_json::{Map, Value, json};

use crate::shop;

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Any JSON value, a few levels deep, with keys an OpenAPI document uses.
fn any_json() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("$ref".to_owned()),
        Just("type".to_owned()),
        Just("in".to_owned()),
        Just("name".to_owned()),
        Just("schema".to_owned()),
        Just("required".to_owned()),
        Just("properties".to_owned()),
        Just("items".to_owned()),
        Just("content".to_owned()),
        Just("application/json".to_owned()),
        Just("parameters".to_owned()),
        Just("nullable".to_owned()),
        "[a-z/{}#~0-9]{0,8}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        Just(json!("#/components/schemas/A")),
        Just(json!("#/paths")),
        Just(json!("query")),
        Just(json!("path")),
        Just(json!("string")),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// Call arguments: the four groups, sometimes of the wrong kind, plus strays.
fn any_args() -> impl Strategy<Value = Map<String, Value>> {
    let name = prop_oneof![
        Just("id".to_owned()),
        Just("limit".to_owned()),
        Just("tag".to_owned()),
        Just("order_id".to_owned()),
        Just("X-Request-Id".to_owned()),
        Just("Authorization".to_owned()),
        ".{0,6}",
    ];
    let group = prop_oneof![
        prop::collection::btree_map(name, any_json(), 0..4)
            .prop_map(|members| Value::Object(members.into_iter().collect())),
        any_json(),
    ];
    prop::collection::btree_map(
        prop_oneof![
            Just("path".to_owned()),
            Just("query".to_owned()),
            Just("headers".to_owned()),
            Just("body".to_owned()),
            ".{0,5}",
        ],
        group,
        0..5,
    )
    .prop_map(|members| members.into_iter().collect())
}

const SHOP_OPERATIONS: [&str; 13] = [
    "listItems",
    "createItem",
    "get_items_by_id",
    "deleteItem",
    "listOrders",
    "placeOrder",
    "listOrderItems",
    "legacyListOrders",
    "dailyReport",
    "getCategoryTree",
    "replaceCategoryTree",
    "getGraph",
    "missing",
];

proptest! {
    #![proptest_config(config())]

    /// Any bytes are read without panicking.
    #[test]
    fn parse_never_panics_on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let _ = Catalog::parse("any", &bytes);
    }

    /// Any JSON, alone or in every place of a document, is read without
    /// panicking, and what parses answers every question without panicking.
    #[test]
    fn parse_never_panics_on_any_json(value in any_json(), args in any_args()) {
        let documents = [
            value.clone(),
            json!({"openapi": "3.1.0", "paths": value.clone()}),
            json!({"openapi": "3.0.3", "paths": {"/x/{id}": value.clone()}}),
            json!({"openapi": "3.1.0", "paths": {"/x/{id}": {"post": value.clone()}}}),
            json!({"openapi": "3.0.3", "paths": {"/x": {"get": {"parameters": [value.clone()]}}}, "components": {"schemas": {"A": value.clone()}}}),
            json!({"openapi": "3.1.0", "paths": {"/x": {"get": {
                "operationId": "x",
                "parameters": [{"name": "q", "in": "query", "schema": value.clone()}],
                "requestBody": {"content": {"application/json": {"schema": value.clone()}}},
                "responses": {"200": {"description": "x", "content": {"application/json": {"schema": value.clone()}}}}
            }}}, "components": {"schemas": {"A": value.clone()}}}),
        ];
        for document in documents {
            for text in [document.to_string(), to_yaml(&document)] {
                let Ok(catalog) = Catalog::parse("any", text.as_bytes()) else { continue };
                for operation in catalog.operations() {
                    let id = operation.operation_id.clone();
                    if let Ok(schema) = catalog.endpoint_schema(&id, 2048) {
                        prop_assert!(serde_json::to_vec(&schema).map_or(0, |bytes| bytes.len()) <= 2048);
                    }
                    let _ = catalog.plan_call(&id, &args);
                }
                let page = catalog.search("x q", &|_| true, 0, 10);
                prop_assert!(page.results.len() <= 10);
            }
        }
    }

    /// Any arguments are planned or refused without panicking.
    #[test]
    fn plan_call_never_panics_on_any_args(
        operation in prop::sample::select(&SHOP_OPERATIONS[..]),
        args in any_args(),
    ) {
        let _ = shop().plan_call(operation, &args);
    }

    /// A path value never adds or removes a segment, and decodes back to itself.
    #[test]
    fn a_path_value_never_changes_the_segments(id in "\\PC{0,24}|[./%?#]{0,6}") {
        let catalog = shop();
        let args: Map<String, Value> = [("path".to_owned(), json!({"id": id}))].into_iter().collect();
        if let Ok(planned) = catalog.plan_call("get_items_by_id", &args) {
            prop_assert_eq!(planned.path.matches('/').count(), 2);
            let segment = planned.path.trim_start_matches("/items/");
            prop_assert!(segment != "." && segment != ".." && !segment.is_empty());
            prop_assert_eq!(percent_decode(segment), id);
        }
    }

    /// Any query, offset and limit search without panicking and keep to the limit.
    #[test]
    fn search_never_panics_and_keeps_to_the_limit(
        query in ".{0,600}",
        offset in 0_usize..20,
        limit in 0_usize..300,
    ) {
        let page = shop().search(&query, &|_| true, offset, limit);
        prop_assert!(page.results.len() <= limit.min(MAX_SEARCH_LIMIT));
        prop_assert!(page.results.len() <= page.total);
    }

    /// A description never exceeds the bytes asked for.
    #[test]
    fn an_endpoint_schema_never_exceeds_its_size(
        operation in prop::sample::select(&SHOP_OPERATIONS[..12]),
        max_bytes in 0_usize..4096,
    ) {
        if let Ok(schema) = shop().endpoint_schema(operation, max_bytes) {
            prop_assert!(serde_json::to_vec(&schema).map_or(0, |bytes| bytes.len()) <= max_bytes);
        }
    }
}

/// A JSON value written as block-style YAML, by hand so the test needs no YAML writer.
fn to_yaml(value: &Value) -> String {
    // JSON is YAML 1.2 flow style; a leading key line makes the text start with
    // something other than `{`, so the YAML reader takes it.
    match value {
        Value::Object(members) if !members.is_empty() => {
            let mut text = String::new();
            for (key, member) in members {
                text.push_str(&format!("{}: {}\n", Value::String(key.clone()), member));
            }
            text
        }
        other => format!("{other}\n"),
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::new();
    let mut position = 0;
    while position < bytes.len() {
        if bytes[position] == b'%' {
            let hex = std::str::from_utf8(&bytes[position + 1..position + 3]).expect("ascii");
            decoded.push(u8::from_str_radix(hex, 16).expect("hex"));
            position += 3;
        } else {
            decoded.push(bytes[position]);
            position += 1;
        }
    }
    String::from_utf8(decoded).expect("UTF-8")
}
