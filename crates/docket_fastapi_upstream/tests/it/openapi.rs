//! The plain upstream: the OpenAPI 3.1 document FastAPI generates, and the shop's answers to
//! what the document describes.

use docket_fastapi_upstream::{FastApiUpstream, UpstreamConfig};
use serde_json::{Value, json};

use crate::http;

#[tokio::test]
async fn fastapi_generates_an_openapi_3_1_document_with_every_operation() -> anyhow::Result<()> {
    let Some(upstream) = FastApiUpstream::start_or_skip(
        UpstreamConfig::new(),
        "fastapi_generates_an_openapi_3_1_document_with_every_operation",
    )
    .await?
    else {
        return Ok(());
    };
    assert!(upstream.base_url().starts_with("http://127.0.0.1:"));
    let response = http().get(upstream.openapi_url()).send().await?;
    assert_eq!(response.status(), 200);
    let document: Value = response.json().await?;

    let version = document["openapi"].as_str().unwrap_or_default();
    assert!(version.starts_with("3.1."), "openapi {version:?}");
    assert_eq!(document["info"]["title"], "Shop API");
    let paths = &document["paths"];
    let operation_ids = [
        ("/items", "get", "list_items"),
        ("/items", "post", "create_item"),
        ("/items/{item_id}", "get", "get_item"),
        ("/orders/{order_id}/lines", "get", "list_order_lines"),
        ("/legacy/items", "get", "list_items_legacy"),
        ("/whoami", "get", "whoami"),
        ("/echo-headers", "get", "echo_headers"),
        // FastAPI's own name, for a route without an explicit one.
        ("/health", "get", "health_health_get"),
    ];
    for (path, method, operation_id) in operation_ids {
        assert_eq!(
            paths[path][method]["operationId"], operation_id,
            "{method} {path}"
        );
    }

    let list_items = &paths["/items"]["get"];
    assert_eq!(list_items["tags"], json!(["items"]));
    assert_eq!(list_items["summary"], "List items");
    let parameters = list_items["parameters"].as_array().expect("parameters");
    let parameter = |name: &str| {
        parameters
            .iter()
            .find(|parameter| parameter["name"] == name)
            .unwrap_or_else(|| panic!("parameter {name}"))
    };
    assert_eq!(parameter("limit")["schema"]["maximum"], 100);
    assert_eq!(parameter("limit")["schema"]["default"], 10);
    assert_eq!(parameter("tag")["schema"]["type"], "array");
    assert_eq!(parameter("q")["required"], false);

    assert_eq!(paths["/legacy/items"]["get"]["deprecated"], true);
    assert_eq!(
        paths["/orders/{order_id}/lines"]["get"]["tags"],
        json!(["orders"])
    );
    let create = &paths["/items"]["post"];
    assert_eq!(
        create["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/Item"
    );
    assert!(create["responses"]["201"].is_object());
    let item = &document["components"]["schemas"]["Item"];
    assert_eq!(
        item["properties"]["price"]["exclusiveMinimum"].as_f64(),
        Some(0.0)
    );
    assert_eq!(item["required"], json!(["name", "price"]));
    // Without a JWT check there is nothing to declare.
    assert!(document["components"]["securitySchemes"].is_null());
    Ok(())
}

#[tokio::test]
async fn the_shop_answers_what_its_document_describes() -> anyhow::Result<()> {
    let Some(upstream) = FastApiUpstream::start_or_skip(
        UpstreamConfig::new(),
        "the_shop_answers_what_its_document_describes",
    )
    .await?
    else {
        return Ok(());
    };
    let base = upstream.base_url();
    let http = http();

    let kitchen: Value = http
        .get(format!("{base}/items?tag=kitchen&tag=ceramic&limit=5"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let names: Vec<&str> = kitchen
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|item| item["name"].as_str())
        .collect();
    assert_eq!(names, ["Teapot", "Espresso cup"]);

    let out_of_range = http.get(format!("{base}/items?limit=101")).send().await?;
    assert_eq!(out_of_range.status(), 422);

    let created = http
        .post(format!("{base}/items"))
        .json(&json!({ "name": "Milk jug", "price": 12.0, "tags": ["kitchen"] }))
        .send()
        .await?;
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await?;
    let id = created["id"].as_i64().expect("an id");
    let fetched: Value = http
        .get(format!("{base}/items/{id}"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    assert_eq!(fetched, created);
    let free = http
        .post(format!("{base}/items"))
        .json(&json!({ "name": "Free lunch", "price": 0 }))
        .send()
        .await?;
    assert_eq!(free.status(), 422);
    let missing = http.get(format!("{base}/items/999")).send().await?;
    assert_eq!(missing.status(), 404);

    let lines: Value = http
        .get(format!("{base}/orders/A-1001/lines"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    assert_eq!(lines.as_array().map(Vec::len), Some(2));

    let headers: Value = http
        .get(format!("{base}/echo-headers"))
        .header("X-Docket-Trace", "abc")
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    assert_eq!(headers["x-docket-trace"], "abc");
    assert!(headers["host"].as_str().is_some());

    let whoami: Value = http
        .get(format!("{base}/whoami"))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    assert_eq!(whoami["authenticated"], false);
    assert!(whoami["client_cert_cn"].is_null());
    Ok(())
}
