//! One endpoint's schema: references resolved, cycles marked, other documents'
//! references kept with a note, security and servers left out, and the size
//! bound held by degrading in steps.

use docket_openapi::{Catalog, CatalogError};
use serde_json::{Value, json};

use crate::shop;

fn compact_len(value: &Value) -> usize {
    serde_json::to_vec(value).expect("serializes").len()
}

#[test]
fn references_are_resolved_and_security_and_servers_are_left_out() {
    let schema = shop()
        .endpoint_schema("createItem", 64 * 1024)
        .expect("fits");
    assert_eq!(schema["method"], "POST");
    assert_eq!(schema["path"], "/items");
    assert_eq!(schema["truncated"], false);
    let body = &schema["request_body"];
    assert_eq!(body["content_type"], "application/json");
    assert_eq!(body["required"], true);
    assert_eq!(body["schema"]["required"], json!(["name", "price"]));
    assert_eq!(body["schema"]["properties"]["name"]["minLength"], 1);
    assert_eq!(
        schema["responses"]["201"]["description"],
        "The item, as stored."
    );
    assert_eq!(
        schema["responses"]["422"]["schema"]["properties"]["title"]["type"],
        "string"
    );
    let text = schema.to_string();
    for left_out in [
        "security",
        "securitySchemes",
        "servers",
        "bearer",
        "shop.example.com",
    ] {
        assert!(!text.contains(left_out), "{left_out} in {text}");
    }
}

#[test]
fn parameters_are_described_with_their_resolved_schemas() {
    let schema = shop()
        .endpoint_schema("listItems", 64 * 1024)
        .expect("fits");
    let limit = &schema["parameters"][0];
    assert_eq!(limit["name"], "limit");
    assert_eq!(limit["in"], "query");
    assert_eq!(limit["required"], false);
    assert_eq!(limit["description"], "How many to return.");
    assert_eq!(
        limit["schema"],
        json!({"type": "integer", "minimum": 1, "maximum": 100})
    );
    assert_eq!(schema["parameters"][3]["in"], "header");
}

#[test]
fn a_self_referential_schema_stops_at_the_cycle_marker() {
    let schema = shop()
        .endpoint_schema("getCategoryTree", 64 * 1024)
        .expect("fits");
    let tree = &schema["responses"]["200"]["schema"];
    assert_eq!(tree["properties"]["name"]["type"], "string");
    assert_eq!(
        tree["properties"]["children"]["items"],
        json!({"$ref": "#/components/schemas/Tree", "x-docket-cycle": true})
    );
}

#[test]
fn mutual_recursion_stops_where_it_comes_back() {
    let schema = shop().endpoint_schema("getGraph", 64 * 1024).expect("fits");
    let a = &schema["responses"]["200"]["schema"];
    assert_eq!(
        a["properties"]["b"]["properties"]["a"],
        json!({"$ref": "#/components/schemas/A", "x-docket-cycle": true})
    );
}

#[test]
fn a_reference_to_another_document_is_kept_with_a_note() {
    let schema = shop()
        .endpoint_schema("get_items_by_id", 64 * 1024)
        .expect("fits");
    let item = &schema["responses"]["200"]["schema"];
    assert_eq!(
        item["properties"]["price"],
        json!({"$ref": "money.yaml#/components/schemas/Money"})
    );
    let notes = schema["notes"].as_array().expect("notes");
    assert!(notes.iter().any(|note| {
        note.as_str()
            .is_some_and(|note| note.contains("money.yaml"))
    }));
}

/// A document whose one operation takes a body of 400 properties, each an
/// object three levels deep with a long description.
fn huge() -> Catalog {
    let mut properties = serde_json::Map::new();
    for index in 0..400 {
        properties.insert(
            format!("field_{index}"),
            json!({
                "type": "object",
                "description": "a field with a long description ".repeat(4),
                "properties": {"inner": {"type": "object", "properties": {"leaf": {"type": "string"}}}}
            }),
        );
    }
    let document = json!({
        "openapi": "3.1.0",
        "info": {"title": "huge", "version": "1"},
        "paths": {"/things": {"post": {
            "operationId": "createThing",
            "summary": "Create a thing",
            "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}},
            "responses": {"200": {"description": "The thing.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Thing"}}}}}
        }}},
        "components": {"schemas": {"Thing": {"type": "object", "properties": properties}}}
    });
    Catalog::parse("huge", document.to_string().as_bytes()).expect("parses")
}

#[test]
fn a_huge_schema_is_degraded_and_stays_under_the_limit() {
    let catalog = huge();
    let full = catalog
        .endpoint_schema("createThing", usize::MAX)
        .expect("fits");
    assert_eq!(full["truncated"], false);
    let full_len = compact_len(&full);
    assert!(full_len > 100_000, "{full_len}");

    // Response schemas go first: the body's schema is still whole.
    let smaller = catalog
        .endpoint_schema("createThing", full_len - 1000)
        .expect("fits");
    assert_eq!(smaller["truncated"], true);
    assert!(smaller["responses"]["200"].get("schema").is_none());
    assert_eq!(smaller["responses"]["200"]["description"], "The thing.");
    let leaf = &smaller["request_body"]["schema"]["properties"]["field_399"]["properties"]["inner"]
        ["properties"]["leaf"];
    assert_eq!(leaf["type"], "string");
    assert!(compact_len(&smaller) <= full_len - 1000);

    let small = catalog.endpoint_schema("createThing", 4096).expect("fits");
    assert_eq!(small["truncated"], true);
    assert!(compact_len(&small) <= 4096);
    assert_eq!(small["request_body"]["schema"]["type"], "object");
    assert!(small.to_string().contains("x-docket-truncated"));

    for max_bytes in [0, 10, 100, 300, 1000, 2500, 10_000, 50_000, 200_000] {
        match catalog.endpoint_schema("createThing", max_bytes) {
            Ok(schema) => assert!(compact_len(&schema) <= max_bytes, "{max_bytes}"),
            Err(error) => assert_eq!(
                error,
                CatalogError::EndpointTooLarge {
                    operation_id: "createThing".to_owned(),
                    max_bytes,
                }
            ),
        }
    }
}

#[test]
fn an_unknown_operation_is_an_error() {
    let error = shop().endpoint_schema("nope", 1024).expect_err("unknown");
    assert_eq!(error.to_string(), "the catalog has no operation `nope`");
}

#[test]
fn an_exponential_chain_of_references_is_bounded() {
    // Each level refers to the next twice: fully expanded, 2^40 values.
    let mut schemas = serde_json::Map::new();
    for level in 0..40 {
        schemas.insert(
            format!("L{level}"),
            json!({"type": "object", "properties": {
                "left": {"$ref": format!("#/components/schemas/L{}", level + 1)},
                "right": {"$ref": format!("#/components/schemas/L{}", level + 1)}
            }}),
        );
    }
    schemas.insert("L40".to_owned(), json!({"type": "string"}));
    let document = json!({
        "openapi": "3.1.0",
        "info": {"title": "chain", "version": "1"},
        "paths": {"/x": {"get": {"operationId": "getX", "responses": {"200": {
            "description": "x", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0"}}}}}}}},
        "components": {"schemas": schemas}
    });
    let catalog = Catalog::parse("chain", document.to_string().as_bytes()).expect("parses");
    let schema = catalog.endpoint_schema("getX", 32 * 1024).expect("fits");
    assert_eq!(schema["truncated"], true);
    assert!(compact_len(&schema) <= 32 * 1024);
}
