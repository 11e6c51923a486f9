//! The results view (MCP Apps, `io.modelcontextprotocol/ui`): `trino_query` and
//! the export tools name `ui://docket/results` only to hosts that declare the
//! extension (per request in the current era, in `initialize` in the earlier one),
//! the view is served as a resource with its media type and a CSP that allows no
//! other origin, and a query's result carries the rows the view shows. Hosts
//! without the extension get the tool list, resource list and results of before.

use docket_server::Config;
use docket_storage::test_db::TestDatabase;
use docket_trino_double::TrinoDouble;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{Backend, StoredServer, TestServer, key_of, users};

const VIEW: &str = "ui://docket/results";
const MIME: &str = "text/html;profile=mcp-app";

/// The tools that show their results in the view.
const VIEW_TOOLS: &[&str] = &[
    "trino_query",
    "trino_export",
    "api_export",
    "graphql_export",
];

struct Fixture {
    server: TestServer,
    _double: TrinoDouble,
    _database: TestDatabase,
}

/// Docket on SQLite with assets, a Trino connection to the double and an HTTP one
/// (so every export tool exists); alice may use everything.
async fn fixture() -> Fixture {
    let database = Backend::Sqlite.database().await.expect("SQLite");
    let double = TrinoDouble::start().await.expect("double");
    let yaml = format!(
        "connections:\n\
         \x20 warehouse: {{ kind: trino, url: \"{}\", user: docket, catalog: memory, schema: default }}\n\
         \x20 service: {{ kind: api, base_url: \"http://127.0.0.1:9\" }}\n\
         \x20 catalog: {{ kind: graphql, endpoint: \"http://127.0.0.1:9/graphql\" }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n",
        double.url()
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"])]);
    let stored = StoredServer::start(config, &database, false).await;
    Fixture {
        server: stored.server,
        _double: double,
        _database: database,
    }
}

/// Client capabilities declaring the UI extension as a host that renders views does.
fn ui() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": [MIME]}}})
}

impl Fixture {
    async fn rpc(&self, method: &str, params: Value, capabilities: Value) -> Value {
        let (status, body) = self
            .server
            .rpc(method, params)
            .capabilities(capabilities)
            .header("x-api-key", &key_of("alice"))
            .send()
            .await;
        assert_eq!(status, 200, "{body}");
        body
    }

    async fn tools(&self, capabilities: Value) -> Vec<Value> {
        let body = self.rpc("tools/list", json!({}), capabilities).await;
        body["result"]["tools"].as_array().expect("tools").clone()
    }
}

fn named<'a>(tools: &'a [Value], name: &str) -> &'a Value {
    tools
        .iter()
        .find(|tool| tool["name"] == name)
        .unwrap_or_else(|| panic!("{name} is listed"))
}

#[tokio::test]
async fn tools_name_the_results_view_only_for_hosts_that_declare_the_extension() {
    let f = fixture().await;

    let plain = f.tools(json!({})).await;
    assert!(
        plain.iter().all(|tool| tool.get("_meta").is_none()),
        "{plain:?}"
    );

    let rendering = f.tools(ui()).await;
    for name in VIEW_TOOLS {
        assert_eq!(
            named(&rendering, name)["_meta"]["ui"]["resourceUri"],
            VIEW,
            "{name}"
        );
    }
    // Everything else is as a host without the extension sees it.
    for tool in &rendering {
        let mut without = tool.clone();
        if let Some(fields) = without.as_object_mut() {
            fields.remove("_meta");
        }
        assert_eq!(
            &without,
            named(&plain, tool["name"].as_str().expect("name"))
        );
    }
    assert!(named(&rendering, "trino_explain").get("_meta").is_none());

    // A host whose views are of another kind is not told of this one.
    let other =
        json!({"extensions": {"io.modelcontextprotocol/ui": {"mimeTypes": ["text/uri-list"]}}});
    assert!(
        f.tools(other)
            .await
            .iter()
            .all(|tool| tool.get("_meta").is_none())
    );

    // The view is listed to hosts that render views, and to no one else.
    let listed = |body: Value| -> Vec<String> {
        body["result"]["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|resource| resource["uri"].as_str().map(str::to_owned))
            .collect()
    };
    let plain = listed(f.rpc("resources/list", json!({}), json!({})).await);
    assert!(!plain.iter().any(|uri| uri == VIEW), "{plain:?}");
    let body = f.rpc("resources/list", json!({}), ui()).await;
    let view = body["result"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .find(|resource| resource["uri"] == VIEW)
        .unwrap_or_else(|| panic!("the view is listed: {body}"));
    assert_eq!(view["mimeType"], MIME);

    // The server says it speaks the extension.
    let body = f.rpc("server/discover", json!({}), json!({})).await;
    assert_eq!(
        body["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/ui"]["mimeTypes"],
        json!([MIME]),
        "{body}"
    );
}

#[tokio::test]
async fn the_results_view_is_one_html_document_that_may_reach_no_other_origin() {
    let f = fixture().await;
    let body = f.rpc("resources/read", json!({"uri": VIEW}), ui()).await;
    let contents = body["result"]["contents"].as_array().expect("contents");
    assert_eq!(contents.len(), 1, "{body}");
    let view = &contents[0];
    assert_eq!(view["uri"], VIEW);
    assert_eq!(view["mimeType"], MIME);
    let html = view["text"].as_str().expect("the document is text");
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    // Its own policy and the one the host builds from `_meta.ui.csp` allow no
    // origin: no fetches, no outside scripts, styles, images or frames.
    assert!(html.contains("http-equiv=\"Content-Security-Policy\""));
    assert!(html.contains("default-src 'none'"));
    assert!(html.contains("connect-src 'none'"));
    assert!(
        !html.contains("src=\"http"),
        "nothing is loaded from elsewhere"
    );
    let csp = &view["_meta"]["ui"]["csp"];
    for directive in [
        "connectDomains",
        "resourceDomains",
        "frameDomains",
        "baseUriDomains",
    ] {
        assert_eq!(csp[directive], json!([]), "{directive}: {body}");
    }
    // A host without the extension may read it too: it is only a document.
    let body = f
        .rpc("resources/read", json!({"uri": VIEW}), json!({}))
        .await;
    assert_eq!(body["result"]["contents"][0]["mimeType"], MIME);
}

#[tokio::test]
async fn a_query_result_carries_its_columns_types_and_rows_and_the_same_text_as_before() {
    let f = fixture().await;
    let call = json!({"name": "trino_query", "arguments": {
        "sql": "SELECT orderkey, orderstatus FROM memory.default.orders ORDER BY orderkey",
        "limit": 3,
    }});
    let rendering = f.rpc("tools/call", call.clone(), ui()).await;
    let result = &rendering["result"];
    let rows = &result["structuredContent"];
    assert_eq!(
        rows["columns"],
        json!([{"name": "orderkey", "type": "bigint"}, {"name": "orderstatus", "type": "varchar(1)"}]),
        "{rendering}"
    );
    assert_eq!(rows["rows"].as_array().map(Vec::len), Some(3));
    assert_eq!(rows["rows"][0][0], 1);
    assert_eq!(rows["truncated"], true);

    // A host without the extension gets the same result, text included, except
    // for the query id Trino gives each run and the cursor of each cut answer.
    let plain = f.rpc("tools/call", call, json!({})).await;
    let without_id = |result: &Value| {
        let mut result = result.clone();
        result["structuredContent"]["query_id"] = Value::Null;
        result["structuredContent"]["cursor"] = Value::Null;
        let text: Value =
            serde_json::from_str(result["content"][0]["text"].as_str().expect("text"))
                .expect("the text is the structured content");
        (
            result["structuredContent"].clone(),
            text,
            result["content"].as_array().map(Vec::len),
        )
    };
    let (structured, text, blocks) = without_id(result);
    let (plain_structured, plain_text, plain_blocks) = without_id(&plain["result"]);
    assert_eq!(structured, plain_structured);
    assert_eq!(blocks, plain_blocks);
    assert_eq!(text["rows"], plain_text["rows"]);
    assert_eq!(text["columns"], rows["columns"]);
}

#[tokio::test]
async fn an_export_result_carries_what_the_view_offers_for_download() {
    let f = fixture().await;
    let call = json!({"name": "trino_export", "arguments": {
        "sql": "SELECT orderkey FROM memory.default.orders ORDER BY orderkey LIMIT 5",
        "format": "csv",
        "name": "five-orders",
    }});
    let body = f.rpc("tools/call", call, ui()).await;
    let export = &body["result"]["structuredContent"];
    assert_eq!(export["row_count"], 5, "{body}");
    assert!(
        export["download_url"]
            .as_str()
            .is_some_and(|url| url.starts_with("http")),
        "{body}"
    );
    // The view reads the first rows through the host by this URI.
    let uri = export["resource_uri"].as_str().expect("resource_uri");
    let read = f.rpc("resources/read", json!({"uri": uri}), ui()).await;
    let text = read["result"]["contents"][0]["text"]
        .as_str()
        .expect("a small CSV reads inline");
    assert!(text.starts_with("orderkey"), "{text}");
}

/// The earlier era: a host declares the extension in `initialize`.
#[tokio::test]
async fn in_the_earlier_era_the_extension_declared_at_initialize_names_the_view() {
    let f = fixture().await;
    for (capabilities, named_view) in [(ui(), true), (json!({}), false)] {
        let post = |session: Option<String>, message: Value| {
            let mut request = f
                .server
                .http
                .post(f.server.url("/mcp"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("x-api-key", key_of("alice"))
                .json(&message);
            if let Some(session) = session {
                request = request
                    .header("mcp-session-id", session)
                    .header("mcp-protocol-version", "2025-11-25");
            }
            request.send()
        };
        let response = post(
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "apps-tests", "version": "1"}
            }}),
        )
        .await
        .expect("initialize");
        assert_eq!(response.status(), StatusCode::OK);
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .expect("a session");
        let initialized: Value = response.json().await.expect("json");
        assert_eq!(
            initialized["result"]["capabilities"]["extensions"]["io.modelcontextprotocol/ui"]["mimeTypes"],
            json!([MIME]),
            "{initialized}"
        );
        let listed: Value = post(
            Some(session),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        )
        .await
        .expect("tools/list")
        .json()
        .await
        .expect("json");
        let tools = listed["result"]["tools"].as_array().expect("tools");
        let query = named(tools, "trino_query");
        match named_view {
            true => assert_eq!(query["_meta"]["ui"]["resourceUri"], VIEW, "{listed}"),
            false => assert!(query.get("_meta").is_none(), "{listed}"),
        }
    }
}
