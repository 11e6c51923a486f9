//! The shop document indexed: ids given and made up, methods, merged and
//! overridden parameters, request bodies and responses, and the version.

use docket_openapi::ParameterLocation;
use serde_json::json;

use crate::{SHOP, shop};

#[test]
fn every_operation_is_indexed_by_path_then_method() {
    let catalog = shop();
    let ids: Vec<&str> = catalog
        .operations()
        .iter()
        .map(|operation| operation.operation_id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "getCategoryTree",
            "replaceCategoryTree",
            "getGraph",
            "listItems",
            "createItem",
            "get_items_by_id",
            "deleteItem",
            "legacyListOrders",
            "listOrders",
            "placeOrder",
            "listOrderItems",
            "dailyReport",
        ]
    );
}

#[test]
fn an_operation_without_an_id_gets_one_from_its_method_and_path() {
    let catalog = shop();
    let operation = catalog.operation("get_items_by_id").expect("made-up id");
    assert!(operation.operation_id_synthesized);
    assert_eq!(operation.method, "GET");
    assert_eq!(operation.path, "/items/{id}");
    assert_eq!(operation.summary.as_deref(), Some("Fetch one item"));
    assert!(
        !catalog
            .operation("listItems")
            .expect("given id")
            .operation_id_synthesized
    );
}

#[test]
fn path_item_parameters_are_merged_and_overridden_by_the_operation() {
    let catalog = shop();
    let get = catalog.operation("get_items_by_id").expect("get");
    assert_eq!(get.parameters.len(), 1);
    assert_eq!(
        get.parameters[0].description.as_deref(),
        Some("The item's id.")
    );
    let delete = catalog.operation("deleteItem").expect("delete");
    assert_eq!(delete.parameters.len(), 1);
    assert_eq!(
        delete.parameters[0].description.as_deref(),
        Some("The id of the item to remove.")
    );
    assert!(delete.deprecated);
}

#[test]
fn referenced_parameters_and_their_locations_are_read() {
    let catalog = shop();
    let list = catalog.operation("listItems").expect("listItems");
    let described: Vec<(&str, ParameterLocation, bool)> = list
        .parameters
        .iter()
        .map(|parameter| {
            (
                parameter.name.as_str(),
                parameter.location,
                parameter.required,
            )
        })
        .collect();
    assert_eq!(
        described,
        [
            ("limit", ParameterLocation::Query, false),
            ("tag", ParameterLocation::Query, false),
            ("in_stock", ParameterLocation::Query, false),
            ("X-Request-Id", ParameterLocation::Header, false),
            ("session", ParameterLocation::Cookie, false),
        ]
    );
    assert_eq!(
        list.parameters[0].schema,
        Some(json!({"type": "integer", "minimum": 1, "maximum": 100}))
    );
    assert_eq!(list.parameters[1].style, "form");
    assert!(list.parameters[1].explode);
    assert_eq!(list.tags, ["catalog"]);
}

#[test]
fn the_request_body_prefers_json_and_responses_follow_references() {
    let catalog = shop();
    let create = catalog.operation("createItem").expect("createItem");
    let body = create.request_body.as_ref().expect("a body");
    assert_eq!(body.content_type, "application/json");
    assert!(body.required);
    assert_eq!(
        body.schema,
        Some(json!({"$ref": "#/components/schemas/NewItem"}))
    );
    let statuses: Vec<&str> = create
        .responses
        .iter()
        .map(|response| response.status.as_str())
        .collect();
    assert_eq!(statuses, ["201", "422"]);
    let invalid = &create.responses[1];
    assert_eq!(
        invalid.description.as_deref(),
        Some("The body was refused.")
    );
    assert_eq!(
        invalid.content_type.as_deref(),
        Some("application/problem+json")
    );
}

#[test]
fn the_version_names_the_bytes_and_the_document() {
    let catalog = shop();
    let version = catalog.version();
    assert_eq!(version.digest.len(), 16);
    assert!(version.digest.bytes().all(|byte| byte.is_ascii_hexdigit()));
    assert_eq!(version.openapi, "3.0.3");
    assert_eq!(version.title.as_deref(), Some("Shop"));
    assert_eq!(version.version.as_deref(), Some("2.1.0"));
    let changed = SHOP.replace("Daily figures", "Daily numbers");
    let other = docket_openapi::Catalog::parse("shop", changed.as_bytes()).expect("parses");
    assert_ne!(other.version().digest, version.digest);
    assert_eq!(catalog.name(), "shop");
}

#[test]
fn made_up_ids_step_aside_for_given_ones() {
    let document = json!({
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/a": {"get": {"responses": {}}},
            "/b": {"get": {"operationId": "get_a", "responses": {}}},
            "/": {"get": {}}
        }
    });
    let catalog =
        docket_openapi::Catalog::parse("ids", document.to_string().as_bytes()).expect("parses");
    let mut ids: Vec<&str> = catalog
        .operations()
        .iter()
        .map(|operation| operation.operation_id.as_str())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["get_a", "get_a_2", "get_root"]);
}

#[test]
fn an_undeclared_template_variable_becomes_a_required_string() {
    let document = json!({
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {"/files/{name}": {"get": {"operationId": "getFile"}}}
    });
    let catalog =
        docket_openapi::Catalog::parse("files", document.to_string().as_bytes()).expect("parses");
    let parameter = &catalog.operation("getFile").expect("getFile").parameters[0];
    assert_eq!(parameter.name, "name");
    assert_eq!(parameter.location, ParameterLocation::Path);
    assert!(parameter.required);
}
