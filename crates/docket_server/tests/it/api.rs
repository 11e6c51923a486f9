//! The HTTP API and GraphQL tools against real upstreams on loopback (a hyper
//! server and an async-graphql schema, see `upstream`), with tasks, assets and call
//! records on SQLite and on PostgreSQL: every auth mode, secrets kept out of
//! results and errors, pagination hints, binary bodies, hostile paths and caller
//! credentials refused before any I/O, redirects not followed, persona routes,
//! exports direct and as tasks (progress, cancel, caps, failing upstreams,
//! idempotency), GraphQL errors, document checks and Relay pagination.

use std::sync::Arc;
use std::time::Duration;

use docket_catalog::CallCatalog;
use docket_server::config::Config;
use docket_storage::test_db::TestDatabase;
use serde_json::{Value, json};

use crate::support::{Backend, StoredServer, TASKS, TestServer, on_both_backends, users};
use crate::upstream::Upstream;

/// The connection secrets, as the environment gives them.
const SECRETS: &[(&str, &str)] = &[
    ("SHOP_TOKEN", "shop-token-0f9e8d7c"),
    ("BASIC_PASSWORD", "basic-pw-5a4b3c"),
    ("HEADER_KEY", "header-key-1a2b3c"),
    ("QUERY_KEY", "query-key-9z8y7x"),
    ("GQL_TOKEN", "gql-token-6d5e4f"),
];

on_both_backends!(
    every_auth_mode_reaches_the_upstream_and_no_secret_comes_back,
    pagination_hints_binary_bodies_and_the_inline_cap,
    hostile_paths_and_caller_credentials_are_refused_before_any_request,
    redirects_are_reported_not_followed,
    persona_routes_and_connection_rules_apply_to_calls_and_exports,
    a_direct_export_stores_the_response_with_its_type_and_status,
    a_failing_upstream_is_stored_and_reported_as_upstream_status,
    a_response_over_the_cap_leaves_no_asset,
    an_export_task_reports_progress_and_ends_with_the_asset,
    cancelling_an_export_task_drops_the_upstream_and_leaves_no_asset,
    an_idempotency_key_returns_the_asset_without_calling_again,
    graphql_queries_report_errors_and_documents_are_checked_before_io,
    graphql_exports_follow_relay_pages_into_one_asset,
    graphql_errors_fail_an_export_without_an_asset,
    cancelling_a_graphql_export_task_stops_it_without_an_asset,
    timeouts_end_a_call_and_an_export_without_an_asset,
);

struct Fixture {
    server: TestServer,
    upstream: Upstream,
    catalog: Arc<dyn CallCatalog>,
    audit: Arc<dyn docket_task::TaskStore>,
    _database: TestDatabase,
    _files: std::path::PathBuf,
}

async fn fixture(backend: Backend) -> Option<Fixture> {
    let upstream = Upstream::start().await;
    let base = upstream.url("/v1");
    let yaml = format!(
        "connections:\n\
         \x20 shop: {{ kind: api, base_url: \"{base}\", auth: {{ bearer: \"${{SHOP_TOKEN}}\" }}, headers: {{ X-Tenant: acme }}, methods: [GET, HEAD, POST], max_response_bytes: 64KiB }}\n\
         \x20 open: {{ kind: api, base_url: \"{base}\" }}\n\
         \x20 basic: {{ kind: api, base_url: \"{base}\", auth: {{ basic: {{ username: svc, password: \"${{BASIC_PASSWORD}}\" }} }} }}\n\
         \x20 keyed: {{ kind: api, base_url: \"{base}\", auth: {{ api_key: {{ header: X-API-Key, value: \"${{HEADER_KEY}}\" }} }} }}\n\
         \x20 queried: {{ kind: api, base_url: \"{base}\", auth: {{ api_key: {{ query: api_key, value: \"${{QUERY_KEY}}\" }} }} }}\n\
         \x20 limited: {{ kind: api, base_url: \"{base}\", paths: [\"/items*\"] }}\n\
         \x20 hasty: {{ kind: api, base_url: \"{base}\", call_timeout: 1s }}\n\
         \x20 down: {{ kind: api, base_url: \"http://127.0.0.1:1\", auth: {{ api_key: {{ query: api_key, value: \"${{QUERY_KEY}}\" }} }}, connect_timeout: 2s }}\n\
         \x20 catalog: {{ kind: graphql, endpoint: \"{}\", auth: {{ bearer: \"${{GQL_TOKEN}}\" }} }}\n\
         exports: {{ max_bytes: 1MiB }}\n\
         tasks: {{ heartbeat_interval: 100ms }}\n\
         personas:\n\
         \x20 analyst:\n\
         \x20   roles: [analyst]\n\
         \x20   tools: {{ allow: [\"*\"] }}\n\
         \x20   connections: {{ allow: [\"*\"] }}\n\
         \x20   api_routes:\n\
         \x20     - {{ connection: shop, methods: [GET], paths: [\"/items*\", \"/echo\"], action: allow }}\n\
         \x20     - {{ connection: shop, paths: [\"/items/secret*\"], action: deny }}\n\
         \x20     - {{ connection: catalog, action: deny }}\n",
        upstream.url("/graphql")
    );
    let env = |name: &str| {
        SECRETS
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned())
    };
    let mut config = Config::from_yaml(&yaml, &env).expect("config");
    config.auth = users(&[("alice", &["admin"]), ("eve", &["analyst"])]);
    let database = backend.database().await?;
    let stored = StoredServer::start(config, &database, false).await;
    Some(Fixture {
        server: stored.server,
        upstream,
        catalog: stored.store.call_catalog(),
        audit: stored.store.task_store(),
        _database: database,
        _files: stored.files,
    })
}

fn no_secret_in(text: &str) {
    for (_, secret) in SECRETS {
        assert!(!text.contains(secret), "a secret leaked: {text}");
    }
    // The basic credential as it is sent, base64("svc:basic-pw-5a4b3c").
    assert!(!text.contains("c3ZjOmJhc2ljLXB3LTVhNGIzYw=="), "{text}");
}

impl Fixture {
    /// Calls a tool as `user`; no answer may hold a secret.
    async fn call(&self, user: &str, tool: &str, arguments: Value, capabilities: Value) -> Value {
        let body = self
            .server
            .call_as(user, tool, arguments, capabilities)
            .await;
        no_secret_in(&body.to_string());
        body
    }

    /// A direct call's result.
    async fn result(&self, user: &str, tool: &str, arguments: Value) -> Value {
        self.call(user, tool, arguments, json!({})).await["result"].clone()
    }

    async fn task(&self, user: &str, task_id: &str) -> Value {
        let task = self.server.task_as(user, task_id).await;
        no_secret_in(&task.to_string());
        task
    }

    async fn wait_task(&self, user: &str, task_id: &str, status: &str) -> Value {
        let task = self.server.wait_task_as(user, task_id, status).await;
        no_secret_in(&task.to_string());
        task
    }

    async fn download(&self, user: &str, asset_id: &str) -> reqwest::Response {
        self.server.download_as(user, asset_id).await
    }

    async fn assets(&self, user: &str) -> Value {
        self.result(user, "list_assets", json!({})).await["structuredContent"]["assets"].clone()
    }

    /// Waits until the call catalog holds a record with this id.
    async fn call_record(&self, id: &str) -> docket_catalog::CallRecord {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(record) = self.catalog.get(id).await.expect("catalog") {
                return record;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no call record {id}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The audit rows of `tool`, once there are at least `at_least` (they are
    /// written in the background).
    async fn audit_rows(&self, tool: &str, at_least: usize) -> Vec<docket_task::store::AuditEntry> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let rows = self.audit.audit_for_tool(tool, 100).await.expect("audit");
            if rows.len() >= at_least {
                return rows;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no audit rows for {tool}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The newest call records, after every record written so far has landed.
    async fn recent_calls(&self) -> Vec<docket_catalog::CallRecord> {
        self.catalog.recent(None, 100).await.expect("recent")
    }
}

/// `arguments` written for an export, without the asset fields when `tool` is not
/// an export.
fn for_tool(tool: &str, mut arguments: Value) -> Value {
    if !tool.ends_with("_export")
        && let Some(arguments) = arguments.as_object_mut()
    {
        arguments.remove("name");
        arguments.remove("format");
    }
    arguments
}

fn structured(result: &Value) -> &Value {
    &result["structuredContent"]
}

fn error_message(result: &Value) -> String {
    assert_eq!(result["isError"], true, "expected a refusal: {result}");
    structured(result)["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn every_auth_mode_reaches_the_upstream_and_no_secret_comes_back(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    for connection in ["shop", "open", "basic", "keyed", "queried"] {
        let result = f
            .result(
                "alice",
                "api_invoke_endpoint",
                json!({"connection": connection, "method": "GET", "path": "/echo",
                       "query_params": {"q": "a b", "n": [1, 2]}, "headers": {"X-Trace": "t1"}}),
            )
            .await;
        assert_eq!(structured(&result)["status"], 200, "{connection}: {result}");
        assert_eq!(structured(&result)["ok"], true);
    }
    let seen = f.upstream.seen();
    assert_eq!(seen.len(), 5);
    assert!(
        seen.iter()
            .all(|s| s.path == "/v1/echo" && s.method == "GET")
    );
    // Query parameters in name order, a list repeated.
    assert!(
        seen.iter().all(|s| s.query.starts_with("n=1&n=2&q=a+b")),
        "{seen:?}"
    );
    assert!(seen.iter().all(|s| s.header("x-trace") == Some("t1")));
    assert_eq!(
        seen[0].header("authorization"),
        Some("Bearer shop-token-0f9e8d7c")
    );
    assert_eq!(seen[0].header("x-tenant"), Some("acme"));
    assert_eq!(seen[1].header("authorization"), None);
    assert_eq!(
        seen[2].header("authorization"),
        Some("Basic c3ZjOmJhc2ljLXB3LTVhNGIzYw==")
    );
    assert_eq!(seen[3].header("x-api-key"), Some("header-key-1a2b3c"));
    assert_eq!(seen[3].header("authorization"), None);
    assert!(
        seen[4].query.ends_with("&api_key=query-key-9z8y7x"),
        "{:?}",
        seen[4]
    );

    // The echo sent the credentials back; the result shows them redacted
    // (`call` asserts that no secret appears anywhere in an answer).
    let echoed = f
        .result(
            "alice",
            "api_invoke_endpoint",
            json!({"connection": "shop", "method": "GET", "path": "/echo"}),
        )
        .await;
    assert_eq!(
        structured(&echoed)["body"]["headers"]["authorization"],
        "Bearer [REDACTED]"
    );
    // Stored bytes pass the same scrub: an export of the echo, and a GraphQL
    // field that echoes the token, keep no credential in any form.
    for connection in ["shop", "basic", "keyed", "queried"] {
        let exported = f
            .result(
                "alice",
                "api_export",
                json!({"connection": connection, "method": "GET", "path": "/echo", "name": "echo"}),
            )
            .await;
        let stored = f
            .download(
                "alice",
                structured(&exported)["asset_id"].as_str().expect("id"),
            )
            .await
            .text()
            .await
            .expect("text");
        no_secret_in(&stored);
        assert!(stored.contains("[REDACTED]"), "{connection}: {stored}");
    }
    let exported = f
        .result(
            "alice",
            "graphql_export",
            json!({"connection": "catalog", "query": "{ authorization }", "name": "who", "format": "json"}),
        )
        .await;
    let stored = f
        .download(
            "alice",
            structured(&exported)["asset_id"].as_str().expect("id"),
        )
        .await
        .text()
        .await
        .expect("text");
    assert!(stored.contains("Bearer [REDACTED]"), "{stored}");
    // An unreachable upstream whose key travels in the query: the error names no
    // URL and no key.
    let down = f
        .result(
            "alice",
            "api_invoke_endpoint",
            json!({"connection": "down", "method": "GET", "path": "/x"}),
        )
        .await;
    assert!(
        error_message(&down).contains("could not be reached"),
        "{down}"
    );
    // Nor does any call record or audit row.
    for record in f.recent_calls().await {
        no_secret_in(&format!("{record:?}"));
    }
    let audited = f.audit_rows("api_invoke_endpoint", 7).await;
    no_secret_in(&format!("{audited:?}"));
    assert!(
        audited
            .iter()
            .any(|row| row.context.connection.as_deref() == Some("queried"))
    );
}

async fn pagination_hints_binary_bodies_and_the_inline_cap(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let call = |path: &str, query: Value| json!({"connection": "shop", "method": "GET", "path": path, "query_params": query});
    let items = f
        .result(
            "alice",
            "api_invoke_endpoint",
            call("/items", json!({"page": 2})),
        )
        .await;
    let items = structured(&items);
    assert_eq!(items["body"]["items"], json!([{"id": 3}, {"id": 4}]));
    assert_eq!(items["pagination"]["source"], "link_header");
    assert_eq!(
        items["pagination"]["next_url"],
        f.upstream.url("/v1/items?page=3")
    );
    let feed = f
        .result("alice", "api_invoke_endpoint", call("/feed", json!({})))
        .await;
    assert_eq!(
        structured(&feed)["pagination"],
        json!({"has_more": true, "next_url": null, "next_cursor": "feed-2", "source": "paging.nextCursor"})
    );
    let echo = f
        .result("alice", "api_invoke_endpoint", call("/echo", json!({})))
        .await;
    assert_eq!(structured(&echo)["pagination"], Value::Null);

    let binary = f
        .result("alice", "api_invoke_endpoint", call("/binary", json!({})))
        .await;
    let binary = structured(&binary);
    assert_eq!(binary["body"], Value::Null, "{binary}");
    assert_eq!(binary["binary"]["content_type"], "image/png");
    assert_eq!(binary["binary"]["size_bytes"], 4008);

    // The shop connection inlines at most 64 KiB.
    let big = f
        .result(
            "alice",
            "api_invoke_endpoint",
            call("/big", json!({"bytes": 500_000})),
        )
        .await;
    let big = structured(&big);
    assert_eq!(big["truncated"], true, "{big}");
    // Up to the cap, less what the scrub holds back for the rest (a secret split at
    // the cut is found whole there): the rest is read on by the cursor.
    let size = big["size_bytes"].as_u64().expect("a size");
    assert!((64 * 1024 - 64..=64 * 1024).contains(&size), "{size}");
    assert!(big["cursor"].is_string(), "{big}");
    assert!(
        big["body"]
            .as_str()
            .is_some_and(|b| b.starts_with("0123456789abcdef,"))
    );

    // A call's own byte budget cuts it shorter, as the cap does, and says so.
    let mut budgeted = call("/big", json!({"bytes": 500_000}));
    budgeted["max_result_bytes"] = json!(2048);
    let small = f.result("alice", "api_invoke_endpoint", budgeted).await;
    let small = structured(&small);
    assert_eq!(small["truncated"], true, "{small}");
    let size = small["size_bytes"].as_u64().expect("a size");
    assert!((2048 - 64..=2048).contains(&size), "{size}");
    assert!(
        small["note"]
            .as_str()
            .is_some_and(|note| note.contains("max_result_bytes")),
        "{small}"
    );
}

async fn hostile_paths_and_caller_credentials_are_refused_before_any_request(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    for path in [
        "//evil.example/x",
        "/a//b",
        "/../admin",
        "/items/..",
        "/%2e%2e/admin",
        "/user@evil.example",
        "/a\r\nX-Injected: yes",
        "/a\nb",
        "/a\u{0}b",
        "/a%0d%0ab",
        "http://evil.example/x",
        "https://127.0.0.1/v1/echo",
        "echo",
        "/echo?x=1",
    ] {
        for tool in ["api_invoke_endpoint", "api_export"] {
            let result = f
                .result(
                    "alice",
                    tool,
                    for_tool(
                        tool,
                        json!({"connection": "open", "method": "GET", "path": path, "name": "x"}),
                    ),
                )
                .await;
            assert!(
                error_message(&result).contains("the path is refused"),
                "{tool} {path:?}: {result}"
            );
        }
    }
    let refused_headers = [
        ("shop", "Authorization", "Bearer mine"),
        ("shop", "authorization", "Basic bWU6eW91"),
        ("shop", "X-Tenant", "other"),
        ("shop", "Host", "evil.example"),
        ("keyed", "X-API-Key", "mine"),
        ("keyed", "x-api-key", "mine"),
        ("open", "Cookie", "session=1"),
        ("open", "X-Ok", "a\r\nAuthorization: b"),
    ];
    for (connection, name, value) in refused_headers {
        let result = f
            .result(
                "alice",
                "api_invoke_endpoint",
                json!({"connection": connection, "method": "GET", "path": "/echo", "headers": {name: value}}),
            )
            .await;
        assert!(
            error_message(&result).contains("header"),
            "{connection} {name}: {result}"
        );
    }
    let result = f
        .result(
            "alice",
            "api_invoke_endpoint",
            json!({"connection": "queried", "method": "GET", "path": "/echo", "query_params": {"api_key": "mine"}}),
        )
        .await;
    assert!(
        error_message(&result).contains("query parameter"),
        "{result}"
    );
    // As a task too: refused directly, no task created.
    let created = f
        .call(
            "alice",
            "api_export",
            json!({"connection": "open", "method": "GET", "path": "/../x", "name": "x"}),
            json!({"extensions": {TASKS: {}}}),
        )
        .await;
    assert_eq!(created["result"]["isError"], true, "{created}");
    assert_eq!(created["result"]["taskId"], Value::Null);
    assert!(f.upstream.seen().is_empty(), "{:?}", f.upstream.seen());
}

async fn redirects_are_reported_not_followed(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let result = f
        .result(
            "alice",
            "api_invoke_endpoint",
            json!({"connection": "open", "method": "GET", "path": "/redirect"}),
        )
        .await;
    let result = structured(&result);
    assert_eq!(result["status"], 302, "{result}");
    assert_eq!(result["ok"], false);
    assert_eq!(
        result["headers"]["location"],
        f.upstream.url("/v1/echo?redirected=1")
    );
    let exported = f
        .result(
            "alice",
            "api_export",
            json!({"connection": "open", "method": "GET", "path": "/redirect", "name": "moved"}),
        )
        .await;
    assert_eq!(structured(&exported)["upstream_status"], 302, "{exported}");
    let seen = f.upstream.seen();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|s| s.path == "/v1/redirect"), "{seen:?}");
}

async fn persona_routes_and_connection_rules_apply_to_calls_and_exports(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let call = |connection: &str, method: &str, path: &str| json!({"connection": connection, "method": method, "path": path, "name": "x"});
    let allowed = f
        .result(
            "eve",
            "api_invoke_endpoint",
            for_tool("api_invoke_endpoint", call("shop", "GET", "/items")),
        )
        .await;
    assert_eq!(structured(&allowed)["status"], 200, "{allowed}");
    for (method, path) in [
        ("GET", "/items/secret/1"),
        // Encoded forms of the denied path are the denied path.
        ("GET", "/items/%73ecret/1"),
        ("GET", "/items/%73%65%63%72%65%74"),
        ("POST", "/items"),
        ("GET", "/orders"),
    ] {
        for tool in ["api_invoke_endpoint", "api_export"] {
            let refused = f
                .result("eve", tool, for_tool(tool, call("shop", method, path)))
                .await;
            assert!(
                error_message(&refused)
                    .starts_with("not authorized for this method/path on this connection"),
                "{tool} {method} {path}: {refused}"
            );
        }
    }
    // A refused export is answered directly: no task.
    let created = f
        .call(
            "eve",
            "api_export",
            call("shop", "GET", "/items/secret/2"),
            json!({"extensions": {TASKS: {}}}),
        )
        .await;
    assert_eq!(created["result"]["isError"], true, "{created}");
    let refused = f
        .result(
            "eve",
            "graphql_query",
            json!({"connection": "catalog", "query": "{ hello }"}),
        )
        .await;
    assert!(
        error_message(&refused).starts_with("not authorized"),
        "{refused}"
    );
    // Connections without rules are gated by the connection rules alone, and by
    // their own methods and paths.
    let open = f
        .result(
            "eve",
            "api_invoke_endpoint",
            for_tool("api_invoke_endpoint", call("open", "GET", "/echo")),
        )
        .await;
    assert_eq!(structured(&open)["status"], 200, "{open}");
    for (connection, method, expected) in [
        ("open", "POST", "does not allow POST"),
        ("limited", "GET", "does not allow the path"),
        ("catalog", "GET", "no api connection"),
    ] {
        let refused = f
            .result(
                "alice",
                "api_invoke_endpoint",
                for_tool("api_invoke_endpoint", call(connection, method, "/echo")),
            )
            .await;
        assert!(
            error_message(&refused).contains(expected),
            "{connection} {method}: {refused}"
        );
    }
    // The connection's own path globs match the normal form too: `/%69tems` is
    // `/items`, which `limited` allows, and is sent as `/items`.
    let encoded = f
        .result(
            "alice",
            "api_invoke_endpoint",
            for_tool("api_invoke_endpoint", call("limited", "GET", "/%69tems")),
        )
        .await;
    assert_eq!(structured(&encoded)["status"], 200, "{encoded}");
    let seen: Vec<String> = f.upstream.seen().iter().map(|s| s.path.clone()).collect();
    assert_eq!(seen, ["/v1/items", "/v1/echo", "/v1/items"]);
}

async fn a_direct_export_stores_the_response_with_its_type_and_status(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let result = f
        .result(
            "alice",
            "api_export",
            json!({"connection": "shop", "method": "GET", "path": "/items", "query_params": {"page": 1},
                   "name": "items page", "description": "first page", "tags": ["shop"]}),
        )
        .await;
    let exported = structured(&result);
    assert_eq!(exported["upstream_status"], 200, "{result}");
    assert_eq!(exported["content_type"], "application/json");
    assert_eq!(exported["format"], "json");
    let asset_id = exported["asset_id"].as_str().expect("asset id");
    let response = f.download("alice", asset_id).await;
    assert_eq!(response.status(), 200);
    let disposition = response.headers()["content-disposition"]
        .to_str()
        .expect("text")
        .to_owned();
    assert!(disposition.contains("items_page.json"), "{disposition}");
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["items"], json!([{"id": 1}, {"id": 2}]));
    assert_eq!(f.download("eve", asset_id).await.status(), 404);

    // No declared type: sniffed from the bytes.
    let untyped = f
        .result(
            "alice",
            "api_export",
            json!({"connection": "open", "method": "GET", "path": "/untyped", "name": "lines"}),
        )
        .await;
    assert_eq!(
        structured(&untyped)["content_type"],
        "application/x-ndjson",
        "{untyped}"
    );
    assert_eq!(structured(&untyped)["format"], "jsonl");

    let record = f
        .call_record(exported["call_id"].as_str().expect("call id"))
        .await;
    assert_eq!(record.kind, docket_catalog::CallKind::Api);
    assert_eq!(record.statement, "GET /items");
    assert_eq!(record.upstream_status, Some(200));
    assert_eq!(record.asset_id.as_deref(), Some(asset_id));
    assert_eq!(record.bytes, exported["size_bytes"].as_i64());
    assert!(record.success);
}

async fn a_failing_upstream_is_stored_and_reported_as_upstream_status(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let result = f
        .result(
            "alice",
            "api_export",
            json!({"connection": "open", "method": "GET", "path": "/fail", "name": "outage"}),
        )
        .await;
    assert_eq!(result["isError"], Value::Null, "{result}");
    let exported = structured(&result);
    assert_eq!(exported["upstream_status"], 503);
    assert!(
        exported["message"]
            .as_str()
            .is_some_and(|m| m.contains("HTTP 503"))
    );
    let body = f
        .download("alice", exported["asset_id"].as_str().expect("id"))
        .await
        .text()
        .await
        .expect("text");
    assert_eq!(body, "{\"error\":\"down for maintenance\"}");
    let record = f
        .call_record(exported["call_id"].as_str().expect("call id"))
        .await;
    assert_eq!(record.upstream_status, Some(503));
    assert!(!record.success);
    assert_eq!(
        record.error_message.as_deref(),
        Some("upstream answered 503")
    );

    let invoked = f
        .result(
            "alice",
            "api_invoke_endpoint",
            json!({"connection": "open", "method": "GET", "path": "/fail"}),
        )
        .await;
    assert_eq!(structured(&invoked)["status"], 503, "{invoked}");
    assert_eq!(
        structured(&invoked)["body"]["error"],
        "down for maintenance"
    );
}

async fn a_response_over_the_cap_leaves_no_asset(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    // exports.max_bytes is 1 MiB; the body is streamed without a length.
    let result = f
        .result(
            "alice",
            "api_export",
            json!({"connection": "open", "method": "GET", "path": "/big", "query_params": {"bytes": 3_000_000}, "name": "huge"}),
        )
        .await;
    assert!(
        error_message(&result).contains("larger than the cap of 1048576 bytes"),
        "{result}"
    );
    assert_eq!(f.assets("alice").await, json!([]));
    let files: Vec<_> = walk(&f._files);
    assert!(files.is_empty(), "left behind: {files:?}");
    let record = f.recent_calls().await.into_iter().next().expect("a record");
    assert_eq!(record.outcome, "failed");
    assert_eq!(record.asset_id, None);
}

/// Every file below `root`.
fn walk(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                walk(&path)
            } else {
                vec![path]
            }
        })
        .collect()
}

async fn an_export_task_reports_progress_and_ends_with_the_asset(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    // 60 chunks of 800 bytes, 20 ms apart.
    let created = f
        .call(
            "alice",
            "api_export",
            json!({"connection": "open", "method": "GET", "path": "/slow", "query_params": {"chunks": 60},
                   "name": "drip"}),
            json!({"extensions": {TASKS: {}}}),
        )
        .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("task id")
        .to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut saw_progress = false;
    let done = loop {
        let task = f.task("alice", &task_id).await;
        if task["status"] == "working"
            && task["statusMessage"]
                .as_str()
                .is_some_and(|m| m.contains("received"))
        {
            saw_progress = true;
        }
        if task["status"] == "completed" {
            break task;
        }
        assert!(tokio::time::Instant::now() < deadline, "{task}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        saw_progress,
        "the status message carried the bytes received"
    );
    let exported = &done["result"]["structuredContent"];
    assert_eq!(exported["upstream_status"], 200, "{done}");
    assert_eq!(exported["size_bytes"], 60 * 800);
    assert_eq!(exported["content_type"], "text/plain");
    let record = f
        .call_record(exported["call_id"].as_str().expect("call id"))
        .await;
    assert_eq!(record.task_id.as_deref(), Some(task_id.as_str()));
    assert_eq!(record.bytes, Some(60 * 800));
    let body = f
        .download("alice", exported["asset_id"].as_str().expect("id"))
        .await
        .text()
        .await
        .expect("text");
    assert_eq!(body.len(), 60 * 800);
    assert!(body.starts_with("line 0000\n") && body.ends_with("line 0059\n"));
    assert_eq!(f.upstream.abandoned(), 0);
    // The task's one audit row names the export's connection.
    let audited = f.audit_rows("api_export", 1).await;
    assert_eq!(audited.len(), 1, "{audited:?}");
    assert_eq!(audited[0].outcome, "completed");
    assert_eq!(audited[0].context.connection.as_deref(), Some("open"));
}

async fn cancelling_an_export_task_drops_the_upstream_and_leaves_no_asset(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let created = f
        .call(
            "alice",
            "api_export",
            json!({"connection": "open", "method": "GET", "path": "/slow", "name": "never"}),
            json!({"extensions": {TASKS: {}}}),
        )
        .await;
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("task id")
        .to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !f.task("alice", &task_id).await["statusMessage"]
        .as_str()
        .is_some_and(|m| m.contains("received"))
    {
        assert!(tokio::time::Instant::now() < deadline, "no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f.server.cancel_task_as("alice", &task_id).await;
    f.wait_task("alice", &task_id, "cancelled").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while f.upstream.abandoned() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upstream kept sending"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(f.assets("alice").await, json!([]));
    assert!(walk(&f._files).is_empty());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let calls = f.recent_calls().await;
        if let Some(record) = calls.first() {
            assert_eq!(record.outcome, "cancelled");
            assert_eq!(record.task_id.as_deref(), Some(task_id.as_str()));
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no call record");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn an_idempotency_key_returns_the_asset_without_calling_again(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let arguments = json!({"connection": "open", "method": "GET", "path": "/items", "name": "once",
                           "idempotency_key": "nightly-1"});
    let first = f.result("alice", "api_export", arguments.clone()).await;
    let second = f.result("alice", "api_export", arguments).await;
    assert_eq!(
        structured(&first)["asset_id"],
        structured(&second)["asset_id"],
        "{second}"
    );
    assert_eq!(f.upstream.seen().len(), 1);
    // Another owner's key is theirs alone.
    let other = f
        .result(
            "eve",
            "api_export",
            json!({"connection": "open", "method": "GET", "path": "/items", "name": "once",
                                           "idempotency_key": "nightly-1"}),
        )
        .await;
    assert_ne!(
        structured(&other)["asset_id"],
        structured(&first)["asset_id"]
    );
    assert_eq!(f.upstream.seen().len(), 2);
}

async fn graphql_queries_report_errors_and_documents_are_checked_before_io(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let query = |document: &str, extra: Value| {
        let mut arguments = json!({"connection": "catalog", "query": document});
        if let (Some(arguments), Some(extra)) = (arguments.as_object_mut(), extra.as_object()) {
            arguments.extend(extra.clone());
        }
        arguments
    };
    let hello = f
        .result("alice", "graphql_query", query("{ hello }", json!({})))
        .await;
    assert_eq!(
        structured(&hello)["data"],
        json!({"hello": "world"}),
        "{hello}"
    );
    // A response larger than the call's byte budget is refused whole, never cut: a
    // GraphQL document means something only whole.
    let many: String = (0..200).map(|n| format!(" a{n}: hello")).collect();
    let too_large = f
        .result(
            "alice",
            "graphql_query",
            query(&format!("{{{many} }}"), json!({"max_result_bytes": 1024})),
        )
        .await;
    assert!(
        error_message(&too_large).contains("larger than 1024 bytes"),
        "{too_large}"
    );
    assert_eq!(
        f.upstream.seen()[0].header("authorization"),
        Some("Bearer gql-token-6d5e4f")
    );
    // Errors beside data are reported, not hidden.
    let partial = f
        .result(
            "alice",
            "graphql_query",
            query("query Both { hello boom }", json!({})),
        )
        .await;
    assert_eq!(partial["isError"], Value::Null, "{partial}");
    assert_eq!(
        structured(&partial)["errors"][0]["message"],
        "boom failed on purpose"
    );
    assert!(
        structured(&partial)["message"]
            .as_str()
            .is_some_and(|m| m.contains("1 GraphQL error")),
        "{partial}"
    );
    // The operation is chosen by name.
    let chosen = f
        .result(
            "alice",
            "graphql_query",
            query(
                "query A { hello } query B($n: Int) { items(first: $n) { nodes { id } } }",
                json!({"operation_name": "B", "variables": {"n": 1}}),
            ),
        )
        .await;
    assert_eq!(
        structured(&chosen)["data"]["items"]["nodes"],
        json!([{"id": 1}]),
        "{chosen}"
    );
    let calls = f.upstream.seen().len();
    for (document, operation_name, expected) in [
        ("{ hello ", None, "syntax errors"),
        ("mutation { drop }", None, "mutations are not allowed"),
        (
            "subscription { ticks }",
            None,
            "subscriptions are not allowed",
        ),
        (
            "query A { hello } query B { hello }",
            None,
            "several operations",
        ),
        ("query A { hello }", Some("C"), "no operation named"),
        ("type T { a: Int }", None, "only queries and fragments"),
    ] {
        let extra = operation_name.map_or(json!({}), |name| json!({"operation_name": name}));
        for tool in ["graphql_query", "graphql_export"] {
            let mut arguments = query(document, extra.clone());
            arguments["name"] = json!("x");
            arguments["format"] = json!("json");
            let refused = f.result("alice", tool, for_tool(tool, arguments)).await;
            assert!(
                error_message(&refused).contains(expected),
                "{tool} {document}: {refused}"
            );
        }
    }
    assert_eq!(
        f.upstream.seen().len(),
        calls,
        "a refused document reached the server"
    );
    let records = f.recent_calls().await;
    assert!(
        records
            .iter()
            .all(|r| r.kind == docket_catalog::CallKind::Graphql)
    );
    assert!(
        records.iter().any(|r| r.statement == "query B"),
        "{records:?}"
    );
}

async fn graphql_exports_follow_relay_pages_into_one_asset(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let document = "query Items($after: String) { items(first: 2, after: $after) { nodes { id name } pageInfo { hasNextPage endCursor } } }";
    let paginate =
        json!({"page_info_path": "items.pageInfo", "cursor_variable": "after", "max_pages": 10});
    let result = f
        .result(
            "alice",
            "graphql_export",
            json!({"connection": "catalog", "query": document, "name": "all items", "format": "jsonl", "paginate": paginate}),
        )
        .await;
    let exported = structured(&result);
    assert_eq!(exported["row_count"], 5, "{result}");
    assert_eq!(exported["pages"], 3);
    assert_eq!(exported["has_more"], false);
    assert_eq!(exported["content_type"], "application/x-ndjson");
    let body = f
        .download("alice", exported["asset_id"].as_str().expect("id"))
        .await
        .text()
        .await
        .expect("text");
    let ids: Vec<i64> = body
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).expect("json line")["id"]
                .as_i64()
                .expect("id")
        })
        .collect();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    let cursors: Vec<String> = f.upstream.seen().iter().map(|s| s.path.clone()).collect();
    assert_eq!(cursors.len(), 3);
    let record = f
        .call_record(exported["call_id"].as_str().expect("call id"))
        .await;
    assert_eq!(record.statement, "query Items");
    assert_eq!(record.rows, Some(5));
    assert_eq!(record.upstream_status, Some(200));

    // max_pages stops early and says more exist; json is one array.
    let mut limited = paginate.clone();
    limited["max_pages"] = json!(2);
    let created = f
        .call(
            "alice",
            "graphql_export",
            json!({"connection": "catalog", "query": document, "name": "some", "format": "json", "paginate": limited}),
            json!({"extensions": {TASKS: {}}}),
        )
        .await;
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("task id")
        .to_owned();
    let done = f.wait_task("alice", &task_id, "completed").await;
    let exported = &done["result"]["structuredContent"];
    assert_eq!(exported["row_count"], 4, "{done}");
    assert_eq!(exported["has_more"], true);
    let body: Value = f
        .download("alice", exported["asset_id"].as_str().expect("id"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(body.as_array().map(Vec::len), Some(4));

    // Without pagination the one record is the data.
    let single = f
        .result(
            "alice",
            "graphql_export",
            json!({"connection": "catalog", "query": "{ hello }", "name": "one", "format": "json"}),
        )
        .await;
    let body: Value = f
        .download(
            "alice",
            structured(&single)["asset_id"].as_str().expect("id"),
        )
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(body, json!([{"hello": "world"}]));

    // The cursor variable must be one the operation declares.
    let undeclared = f
        .result(
            "alice",
            "graphql_export",
            json!({"connection": "catalog", "query": "{ hello }", "name": "x", "format": "json", "paginate": paginate}),
        )
        .await;
    assert!(
        error_message(&undeclared).contains("declares no variable $after"),
        "{undeclared}"
    );
}

async fn graphql_errors_fail_an_export_without_an_asset(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let result = f
        .result(
            "alice",
            "graphql_export",
            json!({"connection": "catalog", "query": "{ hello boom }", "name": "broken", "format": "json"}),
        )
        .await;
    assert!(
        error_message(&result).contains("boom failed on purpose"),
        "{result}"
    );
    assert_eq!(
        structured(&result)["errors"][0]["message"],
        "boom failed on purpose"
    );
    assert_eq!(f.assets("alice").await, json!([]));
    assert!(walk(&f._files).is_empty());
}

async fn cancelling_a_graphql_export_task_stops_it_without_an_asset(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let created = f
        .call(
            "alice",
            "graphql_export",
            json!({"connection": "catalog", "query": "{ slow }", "name": "never", "format": "json"}),
            json!({"extensions": {TASKS: {}}}),
        )
        .await;
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("task id")
        .to_owned();
    // Cancel once the query is with the server, which answers only after minutes.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while f.upstream.seen().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no request");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f.server.cancel_task_as("alice", &task_id).await;
    let task = f.wait_task("alice", &task_id, "cancelled").await;
    assert_eq!(task["result"], Value::Null, "{task}");
    assert_eq!(f.assets("alice").await, json!([]));
    assert!(walk(&f._files).is_empty());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(record) = f.recent_calls().await.first() {
            assert_eq!(record.outcome, "cancelled");
            assert_eq!(record.statement, "query");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no call record");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn timeouts_end_a_call_and_an_export_without_an_asset(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    // The connection's call timeout bounds a whole inline call...
    let call = f
        .result(
            "alice",
            "api_invoke_endpoint",
            json!({"connection": "hasty", "method": "GET", "path": "/slow"}),
        )
        .await;
    assert!(
        error_message(&call).contains("did not answer within 1 seconds"),
        "{call}"
    );
    // ...and an export, whose body may take longer than the call timeout, ends at
    // its own timeout.
    let export = f
        .result(
            "alice",
            "api_export",
            json!({"connection": "open", "method": "GET", "path": "/slow", "name": "never", "timeout_seconds": 1}),
        )
        .await;
    assert!(
        error_message(&export).contains("did not finish within 1 seconds"),
        "{export}"
    );
    assert_eq!(f.assets("alice").await, json!([]));
    assert!(walk(&f._files).is_empty());
}
