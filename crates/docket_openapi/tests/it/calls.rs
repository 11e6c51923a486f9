//! Calls planned by operation id: values rendered and encoded, and every kind of
//! refusal named by its argument before anything is sent.

use docket_openapi::ArgumentProblem;
use serde_json::json;

use crate::{args, shop};

fn problems_of(operation_id: &str, arguments: serde_json::Value) -> Vec<ArgumentProblem> {
    shop()
        .plan_call(operation_id, &args(arguments))
        .expect_err("refused")
}

fn named<'a>(problems: &'a [ArgumentProblem], argument: &str) -> &'a ArgumentProblem {
    problems
        .iter()
        .find(|problem| problem.argument == argument)
        .unwrap_or_else(|| panic!("no problem with {argument} in {problems:?}"))
}

#[test]
fn a_call_is_planned_with_its_query_pairs_and_headers() {
    let planned = shop()
        .plan_call(
            "listItems",
            &args(json!({
                "query": {"limit": 10, "tag": ["red", "big sale"], "in_stock": true},
                "headers": {"x-request-id": "abc-1"}
            })),
        )
        .expect("planned");
    assert_eq!(planned.method, "GET");
    assert_eq!(planned.path, "/items");
    assert_eq!(
        planned.query,
        [
            ("limit".to_owned(), "10".to_owned()),
            ("tag".to_owned(), "red".to_owned()),
            ("tag".to_owned(), "big sale".to_owned()),
            ("in_stock".to_owned(), "true".to_owned()),
        ]
    );
    assert_eq!(
        planned.headers,
        [("X-Request-Id".to_owned(), "abc-1".to_owned())]
    );
    assert_eq!(planned.body, None);
    assert_eq!(planned.content_type, None);
}

#[test]
fn a_null_argument_counts_as_not_given() {
    let planned = shop()
        .plan_call(
            "listItems",
            &args(json!({"query": {"limit": null}, "body": null})),
        )
        .expect("planned");
    assert!(planned.query.is_empty());
}

#[test]
fn a_body_is_checked_and_sent_with_its_media_type() {
    let body = json!({"lines": [{"item_id": "i-1", "quantity": 2}]});
    let planned = shop()
        .plan_call("placeOrder", &args(json!({"body": body})))
        .expect("planned");
    assert_eq!(planned.method, "POST");
    assert_eq!(planned.body, Some(body));
    assert_eq!(planned.content_type.as_deref(), Some("application/json"));
}

#[test]
fn a_missing_required_parameter_or_body_is_named() {
    let problems = problems_of("get_items_by_id", json!({}));
    assert_eq!(
        named(&problems, "path.id").problem,
        "is required (string: The item's id.)"
    );
    let problems = problems_of("placeOrder", json!({}));
    assert_eq!(
        named(&problems, "body").problem,
        "is required (application/json)"
    );
}

#[test]
fn a_value_of_the_wrong_type_or_range_is_refused() {
    let problems = problems_of("listItems", json!({"query": {"limit": "ten"}}));
    let problem = named(&problems, "query.limit");
    assert!(problem.problem.contains("integer"), "{problem}");
    let problems = problems_of("listItems", json!({"query": {"limit": 500}}));
    assert!(named(&problems, "query.limit").problem.contains("100"));
    let problems = problems_of("listOrders", json!({"query": {"status": "lost"}}));
    assert!(named(&problems, "query.status").problem.contains("open"));
    let problems = problems_of("listOrderItems", json!({"path": {"order_id": 0}}));
    assert!(
        named(&problems, "path.order_id")
            .problem
            .contains("minimum")
    );
}

#[test]
fn a_body_problem_names_the_place_inside_the_body() {
    let problems = problems_of(
        "placeOrder",
        json!({"body": {"lines": [{"item_id": "i-1", "quantity": 0}]}}),
    );
    let problem = named(&problems, "body.lines[0].quantity");
    assert!(problem.problem.contains("minimum"), "{problem}");
    let problems = problems_of("placeOrder", json!({"body": {"lines": []}}));
    let problem = named(&problems, "body.lines");
    assert!(problem.problem.contains("less than 1 item"), "{problem}");
}

#[test]
fn openapi_30_nullable_and_exclusive_bounds_are_understood() {
    let catalog = shop();
    let accepted = catalog.plan_call(
        "createItem",
        &args(json!({"body": {"name": "Lamp", "price": 12.5, "description": null}})),
    );
    assert!(accepted.is_ok(), "{accepted:?}");
    let problems = catalog
        .plan_call(
            "createItem",
            &args(json!({"body": {"name": "Lamp", "price": 0}})),
        )
        .expect_err("zero is excluded");
    assert!(named(&problems, "body.price").problem.contains('0'));
}

#[test]
fn a_recursive_body_is_checked_all_the_way_down() {
    let catalog = shop();
    let tree = json!({"name": "root", "children": [{"name": "a", "children": [{"name": "b"}]}]});
    let planned = catalog
        .plan_call(
            "replaceCategoryTree",
            &args(json!({"path": {"id": 7}, "body": tree})),
        )
        .expect("planned");
    assert_eq!(planned.path, "/categories/7/tree");
    let broken =
        json!({"name": "root", "children": [{"name": "a", "children": [{"children": []}]}]});
    let problems = catalog
        .plan_call(
            "replaceCategoryTree",
            &args(json!({"path": {"id": 7}, "body": broken})),
        )
        .expect_err("a node without a name");
    assert!(
        named(&problems, "body.children[0].children[0]")
            .problem
            .contains("name")
    );
}

#[test]
fn unknown_names_are_refused_with_the_known_ones() {
    let problems = problems_of(
        "listItems",
        json!({"query": {"colour": "red"}, "fields": 1}),
    );
    assert_eq!(
        named(&problems, "query.colour").problem,
        "is not a parameter of GET /items; its query parameters are limit, tag, in_stock"
    );
    assert!(
        named(&problems, "fields")
            .problem
            .contains("path, query, headers and body")
    );
    let problems = problems_of("dailyReport", json!({"path": {"id": "x"}}));
    assert!(
        named(&problems, "path.id")
            .problem
            .contains("it takes no path parameters")
    );
}

#[test]
fn a_body_for_an_operation_without_one_is_refused() {
    let problems = problems_of(
        "deleteItem",
        json!({"path": {"id": "i-1"}, "body": {"why": "old"}}),
    );
    assert_eq!(
        named(&problems, "body").problem,
        "is given, but DELETE /items/{id} takes no request body"
    );
}

#[test]
fn credentials_host_and_malformed_header_names_are_refused() {
    for header in [
        "Authorization",
        "cookie",
        "Host",
        "Proxy-Authorization",
        "Content-Length",
    ] {
        let problems = problems_of("listItems", json!({"headers": {header: "x"}}));
        let problem = named(&problems, &format!("headers.{header}"));
        assert!(problem.problem.contains("never by a call"), "{problem}");
        assert_eq!(problems.len(), 1, "{problems:?}");
    }
    let problems = problems_of("listItems", json!({"headers": {"Bad Header": "x"}}));
    assert!(
        named(&problems, "headers.Bad Header")
            .problem
            .contains("not a valid header name")
    );
    let problems = problems_of(
        "listItems",
        json!({"headers": {"X-Request-Id": "a\r\nHost: evil"}}),
    );
    assert!(
        named(&problems, "headers.X-Request-Id")
            .problem
            .contains("control character")
    );
}

#[test]
fn a_path_value_stays_in_its_own_segment() {
    let catalog = shop();
    let planned = catalog
        .plan_call("get_items_by_id", &args(json!({"path": {"id": "../x"}})))
        .expect("planned");
    assert_eq!(planned.path, "/items/..%2Fx");
    let planned = catalog
        .plan_call(
            "get_items_by_id",
            &args(json!({"path": {"id": "a b?c#d%e/é"}})),
        )
        .expect("planned");
    assert_eq!(planned.path, "/items/a%20b%3Fc%23d%25e%2F%C3%A9");
    for dots in ["..", ".", ""] {
        let problems = catalog
            .plan_call("get_items_by_id", &args(json!({"path": {"id": dots}})))
            .expect_err("a dot segment");
        assert!(
            named(&problems, "path.id")
                .problem
                .contains("changes the path"),
            "{problems:?}"
        );
    }
}

#[test]
fn an_unknown_operation_is_a_problem_with_the_operation_id() {
    let problems = problems_of("nope", json!({}));
    assert_eq!(
        named(&problems, "operation_id").problem,
        "`nope` is not an operation of this catalog"
    );
}

#[test]
fn an_argument_group_that_is_not_an_object_is_refused() {
    let problems = problems_of("listItems", json!({"query": ["limit", 3]}));
    assert!(
        named(&problems, "query")
            .problem
            .contains("must be an object")
    );
}

#[test]
fn a_schema_that_does_not_compile_is_reported_not_panicked_on() {
    let document = json!({
        "openapi": "3.1.0",
        "info": {"title": "broken", "version": "1"},
        "paths": {"/x": {"get": {"operationId": "getX", "parameters": [
            {"name": "q", "in": "query", "schema": {"type": "whole number"}},
            {"name": "r", "in": "query", "schema": {"$ref": "#/components/schemas/Missing"}}
        ]}}}
    });
    let catalog =
        docket_openapi::Catalog::parse("broken", document.to_string().as_bytes()).expect("parses");
    let problems = catalog
        .plan_call("getX", &args(json!({"query": {"q": 1, "r": 2}})))
        .expect_err("uncheckable");
    assert!(
        named(&problems, "query.q")
            .problem
            .contains("does not compile")
    );
    assert!(
        named(&problems, "query.r")
            .problem
            .contains("does not compile")
    );
}

#[test]
fn a_value_too_long_for_a_request_is_refused_before_it_is_written() {
    let long = "x".repeat(docket_openapi::MAX_REQUEST_TARGET_BYTES + 1);
    let problems = problems_of("get_items_by_id", json!({"path": {"id": long}}));
    assert!(
        named(&problems, "path.id").problem.contains("bytes"),
        "{problems:?}"
    );
    let many: Vec<u32> = (0..300).collect();
    let problems = problems_of(
        "listItems",
        json!({"query": {"tag": many.iter().map(u32::to_string).collect::<Vec<_>>()}}),
    );
    assert!(
        named(&problems, "query.tag")
            .problem
            .contains("more than 256 items"),
        "{problems:?}"
    );
}

/// A document whose body schema is a run of `length` references, each to the next.
fn chain(length: usize) -> docket_openapi::Catalog {
    let mut schemas = serde_json::Map::new();
    for index in 0..length {
        schemas.insert(
            format!("S{index}"),
            json!({"$ref": format!("#/components/schemas/S{}", index + 1)}),
        );
    }
    schemas.insert(format!("S{length}"), json!({"type": "integer"}));
    let document = json!({
        "openapi": "3.1.0",
        "paths": {"/x": {"post": {"operationId": "postX",
            "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}}}}},
        "components": {"schemas": schemas}
    });
    docket_openapi::Catalog::parse("chain", document.to_string().as_bytes()).expect("parses")
}

#[test]
fn a_long_run_of_references_is_checked_and_a_very_long_one_refused_without_a_crash() {
    let problems = chain(100)
        .plan_call("postX", &args(json!({"body": "seven"})))
        .expect_err("not an integer");
    assert!(
        named(&problems, "body").problem.contains("integer"),
        "{problems:?}"
    );
    let catalog = chain(5_000);
    let problems = catalog
        .plan_call("postX", &args(json!({"body": 7})))
        .expect_err("too long to check");
    assert!(
        named(&problems, "body")
            .problem
            .contains("more than 500 references"),
        "{problems:?}"
    );
    let schema = catalog.endpoint_schema("postX", 8192).expect("fits");
    assert_eq!(schema["truncated"], true);
    assert_eq!(schema["request_body"]["schema"]["x-docket-truncated"], true);
}

#[test]
fn a_cycle_of_bare_references_neither_hangs_nor_crashes() {
    for schemas in [
        json!({"A": {"$ref": "#/components/schemas/B"}, "B": {"$ref": "#/components/schemas/A"}}),
        json!({"A": {"allOf": [{"$ref": "#/components/schemas/A"}]}}),
    ] {
        let document = json!({
            "openapi": "3.1.0",
            "paths": {"/x": {"post": {"operationId": "postX",
                "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}}}}}},
            "components": {"schemas": schemas}
        });
        let catalog = docket_openapi::Catalog::parse("cycle", document.to_string().as_bytes())
            .expect("parses");
        let _ = catalog.plan_call("postX", &args(json!({"body": {"a": 1}})));
        let schema = catalog.endpoint_schema("postX", 8192).expect("fits");
        assert!(schema.to_string().contains("x-docket-cycle"), "{schema}");
    }
}
