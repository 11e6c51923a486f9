//! A document as FastAPI generates it (OpenAPI 3.1: `anyOf` with `null`,
//! `$ref`s to `#/components/schemas`, `HTTPValidationError`) parses, describes
//! and plans calls.

use docket_openapi::Catalog;
use serde_json::json;

use crate::{FASTAPI, args};

fn fastapi() -> Catalog {
    Catalog::parse("fastapi", FASTAPI.as_bytes()).expect("the FastAPI document parses")
}

#[test]
fn the_fastapi_document_is_indexed() {
    let catalog = fastapi();
    assert_eq!(catalog.version().openapi, "3.1.0");
    let ids: Vec<&str> = catalog
        .operations()
        .iter()
        .map(|operation| operation.operation_id.as_str())
        .collect();
    assert_eq!(
        ids,
        [
            "read_item_items__item_id__get",
            "update_item_items__item_id__put",
            "read_users_me_users_me_get"
        ]
    );
    let page = catalog.search("read item", &|_| true, 0, 10);
    assert_eq!(
        page.results[0].operation_id,
        "read_item_items__item_id__get"
    );
}

#[test]
fn optional_query_parameters_take_null_or_a_value() {
    let catalog = fastapi();
    let planned = catalog
        .plan_call(
            "read_item_items__item_id__get",
            &args(json!({"path": {"item_id": 5}, "query": {"q": null}})),
        )
        .expect("planned");
    assert_eq!(planned.path, "/items/5");
    assert!(planned.query.is_empty());
    let planned = catalog
        .plan_call(
            "read_item_items__item_id__get",
            &args(json!({"path": {"item_id": 5}, "query": {"q": "lamp"}})),
        )
        .expect("planned");
    assert_eq!(planned.query, [("q".to_owned(), "lamp".to_owned())]);
    let problems = catalog
        .plan_call(
            "read_item_items__item_id__get",
            &args(json!({"path": {"item_id": "five"}})),
        )
        .expect_err("not an integer");
    assert_eq!(problems[0].argument, "path.item_id");
}

#[test]
fn the_body_is_checked_against_the_referenced_model() {
    let catalog = fastapi();
    let planned = catalog
        .plan_call(
            "update_item_items__item_id__put",
            &args(json!({"path": {"item_id": 1}, "body": {"name": "Lamp", "price": 3.5, "is_offer": null}})),
        )
        .expect("planned");
    assert_eq!(planned.method, "PUT");
    assert_eq!(planned.content_type.as_deref(), Some("application/json"));
    let problems = catalog
        .plan_call(
            "update_item_items__item_id__put",
            &args(json!({"path": {"item_id": 1}, "body": {"name": "Lamp", "is_offer": "yes"}})),
        )
        .expect_err("no price, and is_offer is not a boolean");
    assert!(
        problems
            .iter()
            .any(|problem| problem.argument == "body" && problem.problem.contains("price"))
    );
    assert!(
        problems
            .iter()
            .any(|problem| problem.argument == "body.is_offer")
    );
}

#[test]
fn the_validation_error_schema_is_resolved_and_security_left_out() {
    let schema = fastapi()
        .endpoint_schema("read_item_items__item_id__get", 16 * 1024)
        .expect("fits");
    let detail = &schema["responses"]["422"]["schema"]["properties"]["detail"];
    assert_eq!(detail["items"]["title"], "ValidationError");
    assert_eq!(detail["items"]["required"], json!(["loc", "msg", "type"]));
    let query = &schema["parameters"][1];
    assert_eq!(query["schema"]["anyOf"][1], json!({"type": "null"}));
    let me = fastapi()
        .endpoint_schema("read_users_me_users_me_get", 16 * 1024)
        .expect("fits");
    assert!(!me.to_string().contains("OAuth2PasswordBearer"));
}
