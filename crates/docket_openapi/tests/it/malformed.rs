//! Documents Docket refuses, each with an error that says why and, where it can,
//! on which line: syntax errors, other versions, duplicate ids, shapes unlike
//! OpenAPI, and documents too large, too deep or with too many operations.

use docket_openapi::{
    Catalog, CatalogError, MAX_DOCUMENT_BYTES, MAX_NESTING_DEPTH, MAX_OPERATIONS,
};

use crate::{SHOP, line_of};

fn refused(text: &str) -> CatalogError {
    Catalog::parse("bad", text.as_bytes()).expect_err("refused")
}

#[test]
fn a_json_syntax_error_names_its_line_and_column() {
    let error = refused("{\n  \"openapi\": \"3.1.0\",\n  \"paths\": {,}\n}\n");
    assert_eq!(
        error.to_string(),
        "the OpenAPI document `bad` is not valid JSON at line 3, column 13: key must be a string"
    );
    assert!(matches!(
        error,
        CatalogError::Syntax {
            line: Some(3),
            format: "JSON",
            ..
        }
    ));
}

#[test]
fn a_yaml_syntax_error_names_its_line() {
    let error =
        refused("openapi: 3.1.0\ninfo:\n  title: x\npaths:\n  /x:\n    get: [unclosed\n  /y: {}\n");
    let CatalogError::Syntax { format, line, .. } = &error else {
        panic!("a syntax error: {error}");
    };
    assert_eq!(*format, "YAML");
    assert!(line.is_some_and(|line| (6..=8).contains(&line)), "{error}");
    assert!(
        error.to_string().contains("is not valid YAML at line"),
        "{error}"
    );
}

#[test]
fn swagger_2_and_other_versions_are_refused() {
    let error = refused("swagger: \"2.0\"\ninfo:\n  title: old\n  version: '1'\npaths: {}\n");
    assert_eq!(
        error.to_string(),
        "the OpenAPI document `bad` at line 1: it is a Swagger 2.0 document (convert it to OpenAPI 3 first); Docket reads OpenAPI 3.0 and 3.1 documents"
    );
    let error = refused("info: {}\nopenapi: 2.0.0\npaths: {}\n");
    assert_eq!(
        error.to_string(),
        "the OpenAPI document `bad` at line 2: it says `openapi: 2.0.0`; Docket reads OpenAPI 3.0 and 3.1 documents"
    );
    let error = refused("openapi: 3.1\npaths: {}\n");
    assert!(error.to_string().contains("not text"), "{error}");
    let error = refused("info: {}\npaths: {}\n");
    assert!(error.to_string().contains("no `openapi` field"), "{error}");
}

#[test]
fn a_duplicate_operation_id_names_both_operations_and_their_lines() {
    let text = "openapi: 3.1.0\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    get:\n      operationId: fetch\n  /b:\n    post:\n      operationId: fetch\n";
    let error = refused(text);
    assert_eq!(
        error.to_string(),
        "the OpenAPI document `bad` gives two operations the operationId `fetch`: GET /a at line 6 and POST /b at line 9"
    );
}

#[test]
fn a_wrong_parameter_location_names_its_path_and_line() {
    let text = SHOP.replacen(
        "        - name: in_stock\n          in: query",
        "        - name: in_stock\n          in: body",
        1,
    );
    let error = refused(&text);
    let line = line_of(&text, "in: body");
    assert_eq!(
        error.to_string(),
        format!(
            "the OpenAPI document `bad` at line {line}: paths./items.get.parameters[2].in must be one of path, query, header, cookie (it is `body`)"
        )
    );
}

#[test]
fn a_structural_error_in_json_names_its_line() {
    let text = "{\n  \"openapi\": \"3.0.1\",\n  \"info\": {\"title\": \"t\", \"version\": \"1\"},\n  \"paths\": {\n    \"/x\": {\n      \"get\": \"nothing\"\n    }\n  }\n}\n";
    let error = refused(text);
    assert_eq!(
        error.to_string(),
        "the OpenAPI document `bad` at line 6: paths./x.get must be an object"
    );
    let text = "{\"openapi\": \"3.0.1\",\n \"paths\": {\"/x\": {\"get\": {\"parameters\": [\n {\"name\": \"a\", \"in\": \"query\"},\n {\"in\": \"query\"}]}}}}";
    let error = refused(text);
    assert_eq!(
        error.to_string(),
        "the OpenAPI document `bad` at line 4: paths./x.get.parameters[1].name is missing; every parameter has a name"
    );
}

#[test]
fn missing_paths_bad_paths_and_bad_references_are_named() {
    let error = refused("openapi: 3.0.0\ninfo: {title: t, version: '1'}\n");
    assert_eq!(
        error.to_string(),
        "the OpenAPI document `bad`: paths is missing (OpenAPI 3.0 requires it)"
    );
    assert!(Catalog::parse("ok", b"openapi: 3.1.0\ninfo: {title: t, version: '1'}\n").is_ok());
    let error = refused("openapi: 3.1.0\npaths:\n  items:\n    get: {}\n");
    assert_eq!(
        error.to_string(),
        "the OpenAPI document `bad` at line 3: paths.items must start with `/`"
    );
    let error = refused("openapi: 3.1.0\npaths:\n  /x/{id:\n    get: {}\n");
    assert!(error.to_string().contains("without its `}`"), "{error}");
    let error = refused(
        "openapi: 3.1.0\npaths:\n  /x:\n    get:\n      parameters:\n        - $ref: '#/components/parameters/Nope'\n",
    );
    assert_eq!(
        error.to_string(),
        "the OpenAPI document `bad` at line 6: paths./x.get.parameters[0].$ref is `#/components/parameters/Nope`, which points at nothing in the document"
    );
    let error = refused(
        "openapi: 3.1.0\npaths:\n  /x:\n    get:\n      parameters:\n        - $ref: 'common.yaml#/Limit'\n",
    );
    assert!(
        error.to_string().contains("follows only local references"),
        "{error}"
    );
    let error = refused(
        "openapi: 3.1.0\npaths:\n  /x:\n    $ref: '#/paths/~1y'\n  /y:\n    $ref: '#/paths/~1x'\n",
    );
    assert!(error.to_string().contains("a cycle?"), "{error}");
    let error = refused("- just\n- a list\n");
    assert!(error.to_string().contains("must be an object"), "{error}");
}

#[test]
fn a_document_over_the_size_limit_is_refused_before_parsing() {
    let bytes = vec![b' '; MAX_DOCUMENT_BYTES + 1];
    let error = Catalog::parse("big", &bytes).expect_err("too large");
    assert_eq!(
        error,
        CatalogError::TooLarge {
            name: "big".to_owned(),
            size: MAX_DOCUMENT_BYTES + 1,
            limit: MAX_DOCUMENT_BYTES
        }
    );
}

#[test]
fn a_ten_thousand_deep_document_is_refused_without_a_crash() {
    let yaml = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let error = refused(&yaml);
    assert!(matches!(error, CatalogError::TooDeep { .. }), "{error}");
    let json = format!(
        "{{\"openapi\": \"3.1.0\",\n\"x-deep\": {}{}}}",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    let error = refused(&json);
    assert!(
        matches!(error, CatalogError::TooDeep { line: Some(2), .. }),
        "{error}"
    );
    let yaml = format!(
        "openapi: 3.1.0\nx-deep: {}{}\n",
        "{a: ".repeat(10_000),
        "}".repeat(10_000)
    );
    assert!(matches!(refused(&yaml), CatalogError::TooDeep { .. }));
}

#[test]
fn nesting_just_past_the_limit_is_refused_with_its_line() {
    let depth = MAX_NESTING_DEPTH + 5;
    let json = format!(
        "{{\"openapi\": \"3.1.0\",\n\"paths\": {{}},\n\"x-deep\": {}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let error = refused(&json);
    assert_eq!(
        error.to_string(),
        format!(
            "the OpenAPI document `bad` nests objects and arrays deeper than {MAX_NESTING_DEPTH} levels at line 3"
        )
    );
    let depth = MAX_NESTING_DEPTH - 2;
    let json = format!(
        "{{\"openapi\": \"3.1.0\",\n\"paths\": {{}},\n\"x-deep\": {}{}}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    assert!(Catalog::parse("fine", json.as_bytes()).is_ok());
}

#[test]
fn bytes_that_are_not_utf8_are_refused_with_their_line() {
    let error =
        Catalog::parse("binary", b"openapi: 3.1.0\npaths:\n  /\xff: {}\n").expect_err("not UTF-8");
    assert_eq!(
        error,
        CatalogError::NotUtf8 {
            name: "binary".to_owned(),
            line: 3
        }
    );
}

#[test]
fn too_many_operations_are_refused() {
    let mut text = String::from("{\"openapi\": \"3.1.0\", \"paths\": {");
    for index in 0..=MAX_OPERATIONS {
        if index > 0 {
            text.push(',');
        }
        text.push_str(&format!("\"/p{index}\": {{\"get\": {{}}}}"));
    }
    text.push_str("}}");
    let error = refused(&text);
    assert_eq!(
        error,
        CatalogError::TooManyOperations {
            name: "bad".to_owned(),
            limit: MAX_OPERATIONS
        }
    );
}
