//! The Trino tools against the Trino double, with tasks, assets and call records
//! on SQLite and on PostgreSQL and files in a temporary folder: queries, read-only
//! refusals, exports direct and as tasks, cancellation reaching Trino, caps,
//! idempotency, consent (threshold and `consent: always`), the connection timeout
//! against the export timeout, downloads, and the retention pass.

use std::sync::Arc;
use std::time::Duration;

use docket_server::config::Config;
use docket_storage::test_db::TestDatabase;
use docket_trino_double::TrinoDouble;
use serde_json::{Value, json};

use crate::support::{Backend, StoredServer, TASKS, TestServer, key_of, on_both_backends, users};

struct Fixture {
    server: TestServer,
    double: TrinoDouble,
    catalog: Arc<dyn docket_catalog::CallCatalog>,
    /// For another replica's view of the database.
    database_url: String,
    _database: TestDatabase,
    _files: std::path::PathBuf,
}

on_both_backends!(
    a_direct_export_writes_an_asset_only_its_owner_can_download,
    exported_assets_are_their_owners_resources,
    an_export_task_reports_progress_and_ends_with_the_asset,
    cancelling_an_export_task_stops_the_query_and_leaves_no_asset,
    the_row_cap_stops_an_export_without_an_asset,
    an_idempotency_key_returns_the_owners_asset_without_running_again,
    an_expensive_export_asks_first_and_no_task_exists_until_accepted,
    a_connection_marked_consent_always_asks_even_for_one_row,
    the_connection_timeout_bounds_a_page_never_a_longer_export,
    the_retention_pass_deletes_audit_calls_and_assets_with_their_bytes,
);

/// A fixture on SQLite with the `warehouse` connection's default settings.
async fn fixture(row_threshold: u64, max_rows: u64) -> Fixture {
    fixture_on(Backend::Sqlite, row_threshold, max_rows, "")
        .await
        .expect("SQLite is always there")
}

/// A fixture whose tasks, assets and call records live on `backend`;
/// `connection_extra` is added to the `warehouse` connection's YAML mapping
/// (for example `", consent: always"`). `None` only when PostgreSQL is absent and
/// not required.
async fn fixture_on(
    backend: Backend,
    row_threshold: u64,
    max_rows: u64,
    connection_extra: &str,
) -> Option<Fixture> {
    let tasks = "{ heartbeat_interval: 100ms }";
    fixture_with(backend, row_threshold, max_rows, connection_extra, tasks).await
}

/// [`fixture_on`] with `tasks` as the `tasks:` section.
async fn fixture_with(
    backend: Backend,
    row_threshold: u64,
    max_rows: u64,
    connection_extra: &str,
    tasks: &str,
) -> Option<Fixture> {
    let database = backend.database().await?;
    let double = TrinoDouble::start().await.expect("double");
    let yaml = format!(
        "connections:\n  warehouse: {{ kind: trino, url: \"{}\", user: docket, catalog: memory, schema: default{connection_extra} }}\n\
         consent: {{ trino: {{ row_threshold: {row_threshold} }} }}\n\
         exports: {{ max_rows: {max_rows} }}\n\
         tasks: {tasks}\n\
         server: {{ max_resource_read_bytes: 1KiB }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n",
        double.url()
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[
        ("alice", &["admin"]),
        ("bob", &["admin"]),
        ("eve", &["analyst"]),
    ]);
    let stored = StoredServer::start(config, &database, false).await;
    Some(Fixture {
        database_url: database.url().to_owned(),
        server: stored.server,
        double,
        catalog: stored.store.call_catalog(),
        _database: database,
        _files: stored.files,
    })
}

impl Fixture {
    async fn call(
        &self,
        user: &str,
        tool: &str,
        arguments: Value,
        capabilities: Value,
    ) -> (u16, Value) {
        self.server
            .rpc("tools/call", json!({"name": tool, "arguments": arguments}))
            .capabilities(capabilities)
            .header("x-api-key", &key_of(user))
            .send()
            .await
    }

    async fn task(&self, user: &str, task_id: &str) -> Value {
        self.server.task_as(user, task_id).await
    }

    async fn wait_task(&self, user: &str, task_id: &str, status: &str) -> Value {
        self.server.wait_task_as(user, task_id, status).await
    }

    async fn download(&self, user: &str, asset_id: &str) -> reqwest::Response {
        self.server.download_as(user, asset_id).await
    }
}

#[tokio::test]
async fn queries_return_rows_columns_and_a_truncation_flag() {
    let f = fixture(u64::MAX, 1_000_000).await;
    let (_, body) = f.call("alice", "trino_query", json!({"sql": "SELECT orderkey FROM memory.default.orders ORDER BY orderkey", "limit": 10}), json!({})).await;
    let result = &body["result"]["structuredContent"];
    assert_eq!(result["row_count"], 10, "{body}");
    assert_eq!(result["truncated"], true);
    assert_eq!(result["columns"][0]["name"], "orderkey");
    assert_eq!(result["rows"][0][0], 1);
    let submitted = f.double.submitted();
    assert_eq!(submitted[0].header("x-trino-user"), Some("docket"));
    assert_eq!(submitted[0].header("x-trino-catalog"), Some("memory"));

    let (_, body) = f
        .call(
            "alice",
            "trino_browse",
            json!({"catalog": "memory"}),
            json!({}),
        )
        .await;
    assert!(
        body["result"]["structuredContent"]["schemas"]
            .as_array()
            .is_some_and(|s| s.contains(&json!("default"))),
        "{body}"
    );
    let (_, body) = f
        .call(
            "alice",
            "trino_describe_table",
            json!({"table": "memory.default.orders"}),
            json!({}),
        )
        .await;
    assert!(
        body["result"]["structuredContent"]["columns"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{body}"
    );
}

#[tokio::test]
async fn writes_and_hostile_sql_are_refused_before_trino_sees_them() {
    let f = fixture(u64::MAX, 1_000_000).await;
    for sql in [
        "DELETE FROM memory.default.orders",
        "SELECT 1; DROP TABLE memory.default.orders",
        "WITH gone AS (DELETE FROM memory.default.orders RETURNING *) SELECT * FROM gone",
        "CREATE TABLE x AS SELECT 1",
        "CALL system.runtime.kill_query('x')",
        "SELECT * FROM TABLE(postgresql.system.query(query => 'DELETE FROM accounts RETURNING *'))",
        "SELECT * FROM TABLE(postgresql.system.query(query => 'UPDATE accounts SET a = 1 RETURNING *'))",
        "SELECT * FROM TABLE(sqlserver.system.procedure(query => 'EXECUTE dbo.purge'))",
    ] {
        for (tool, arguments) in [
            ("trino_query", json!({"sql": sql})),
            (
                "trino_export",
                json!({"sql": sql, "format": "csv", "name": "x"}),
            ),
        ] {
            let (_, body) = f.call("alice", tool, arguments, json!({})).await;
            assert_eq!(body["result"]["isError"], true, "{tool}: {sql}: {body}");
            assert_eq!(
                body["result"]["structuredContent"]["error"]["code"], "read_only",
                "{tool}: {sql}"
            );
        }
    }
    assert!(f.double.submitted().is_empty(), "nothing reached Trino");

    // What Trino receives is the statement the gate checked, not the raw text.
    for tool in ["trino_query", "trino_explain"] {
        let (_, body) = f
            .call("alice", tool, json!({"sql": "SELECT 1;\n-- c"}), json!({}))
            .await;
        assert_ne!(body["result"]["isError"], true, "{tool}: {body}");
    }
    let sent: Vec<String> = f
        .double
        .submitted()
        .into_iter()
        .map(|request| request.body)
        .collect();
    // The query, its consent estimate and the explain: each the checked statement.
    assert!(sent.contains(&"SELECT 1".to_owned()), "{sent:?}");
    assert!(
        sent.iter()
            .all(|body| body == "SELECT 1" || body == "EXPLAIN SELECT 1"),
        "{sent:?}"
    );
}

async fn a_direct_export_writes_an_asset_only_its_owner_can_download(backend: Backend) {
    let Some(f) = fixture_on(backend, u64::MAX, 1_000_000, "").await else {
        return;
    };
    let (_, body) = f
        .call("alice", "trino_export", json!({"sql": "SELECT orderkey, orderstatus FROM memory.default.orders ORDER BY orderkey", "format": "csv", "name": "orders"}), json!({}))
        .await;
    let result = &body["result"]["structuredContent"];
    assert_eq!(result["row_count"], 50, "{body}");
    assert_eq!(result["format"], "csv");
    let asset_id = result["asset_id"].as_str().expect("asset id");
    assert!(
        result["download_url"]
            .as_str()
            .is_some_and(|u| u.contains(&format!("/assets/{asset_id}/content?expires=")))
    );
    assert!(result["call_id"].is_string());

    let response = f.download("alice", asset_id).await;
    assert_eq!(response.status().as_u16(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .expect("ascii")
            .starts_with("text/csv")
    );
    assert!(
        response.headers()["content-disposition"]
            .to_str()
            .expect("ascii")
            .starts_with("attachment; filename=\"orders.csv")
    );
    let text = response.text().await.expect("body");
    assert_eq!(text.lines().count(), 51, "a header and 50 rows");
    assert!(text.starts_with("orderkey,orderstatus"), "{text}");

    assert_eq!(
        f.download("eve", asset_id).await.status().as_u16(),
        404,
        "not the owner, not an admin"
    );
    assert_eq!(
        f.download("eve", "no-such-asset").await.status().as_u16(),
        404
    );
    let (_, listed) = f.call("eve", "list_assets", json!({}), json!({})).await;
    assert_eq!(listed["result"]["structuredContent"]["assets"], json!([]));
    let (_, other) = f
        .call("eve", "get_asset", json!({"asset_id": asset_id}), json!({}))
        .await;
    assert_eq!(
        other["result"]["structuredContent"]["error"]["code"],
        "not_found"
    );
    let (_, own) = f
        .call(
            "alice",
            "get_asset",
            json!({"asset_id": asset_id}),
            json!({}),
        )
        .await;
    assert_eq!(own["result"]["structuredContent"]["name"], "orders");

    // The call catalog records the export: kind sql, statement, rows, bytes, asset.
    let records = f
        .catalog
        .recent(Some("apikey:alice"), 10)
        .await
        .expect("call records");
    let record = records
        .iter()
        .find(|r| r.tool == "trino_export")
        .expect("a call record");
    assert_eq!(record.kind.as_str(), "sql");
    assert_eq!(record.connection.as_deref(), Some("warehouse"));
    assert!(record.statement.starts_with("SELECT orderkey"));
    assert_eq!(record.rows, Some(50));
    assert_eq!(record.asset_id.as_deref(), Some(asset_id));
    assert_eq!(Some(record.id.as_str()), result["call_id"].as_str());
    assert!(record.success);
}

/// An XLSX export is a workbook a real reader opens: a header, one row per result
/// row in typed cells, served with the spreadsheet media type and file name.
#[tokio::test]
async fn an_xlsx_export_is_a_workbook_with_every_row() {
    use calamine::{Data, Reader as _, Xlsx, open_workbook_from_rs};

    let f = fixture(u64::MAX, 1_000_000).await;
    let (_, body) = f
        .call(
            "alice",
            "trino_export",
            json!({"sql": "SELECT * FROM memory.default.orders ORDER BY orderkey", "format": "xlsx", "name": "orders"}),
            json!({}),
        )
        .await;
    let result = &body["result"]["structuredContent"];
    assert_eq!(result["row_count"], 50, "{body}");
    assert_eq!(result["format"], "xlsx");
    assert_eq!(
        result["content_type"],
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
    );
    let asset_id = result["asset_id"].as_str().expect("asset id");
    let response = f.download("alice", asset_id).await;
    assert_eq!(response.status().as_u16(), 200);
    assert!(
        response.headers()["content-disposition"]
            .to_str()
            .expect("ascii")
            .starts_with("attachment; filename=\"orders.xlsx")
    );
    let bytes = response.bytes().await.expect("body");
    assert_eq!(result["size_bytes"], bytes.len());
    let mut workbook: Xlsx<_> =
        open_workbook_from_rs(std::io::Cursor::new(bytes.to_vec())).expect("an xlsx file");
    let sheet = workbook.worksheet_range("export").expect("the sheet");
    assert_eq!(sheet.height(), 51, "a header and 50 rows");
    let header: Vec<&Data> = sheet.rows().next().expect("a header").iter().collect();
    assert_eq!(
        header,
        [
            "orderkey",
            "custkey",
            "orderstatus",
            "totalprice",
            "orderdate",
            "comment"
        ]
        .map(|name| Data::String(name.to_owned()))
        .iter()
        .collect::<Vec<_>>()
    );
    let first = sheet.rows().nth(1).expect("the first order");
    assert_eq!(first[0], Data::Float(1.0));
    assert!(matches!(first[2], Data::String(_)), "{:?}", first[2]);
    assert!(
        matches!(first[3], Data::Float(_)),
        "a decimal is a number: {:?}",
        first[3]
    );
    assert!(
        matches!(first[4], Data::DateTime(_)),
        "a date is a date: {:?}",
        first[4]
    );
}

async fn exported_assets_are_their_owners_resources(backend: Backend) {
    let Some(f) = fixture_on(backend, u64::MAX, 1_000_000, "").await else {
        return;
    };
    let export = |sql: &str, format: &str, name: &str| {
        f.call(
            "alice",
            "trino_export",
            json!({"sql": sql, "format": format, "name": name}),
            json!({}),
        )
    };
    // A listener of alice's resources hears each export she makes.
    let mut listening = f
        .server
        .rpc(
            "subscriptions/listen",
            json!({"notifications": {"resourcesListChanged": true,
                                     "resourceSubscriptions": ["docket://assets/0"]}}),
        )
        .header("x-api-key", &key_of("alice"))
        .response()
        .await;
    let acked = crate::support::read_until(&mut listening, |message| {
        message["method"] == "notifications/subscriptions/acknowledged"
    })
    .await;
    // Resource subscriptions are not honoured: an asset never changes once written
    // (docs/design.md, Following).
    assert_eq!(
        acked[0]["params"]["notifications"],
        json!({"resourcesListChanged": true}),
        "{acked:?}"
    );
    let (_, small) = export(
        "SELECT orderkey FROM memory.default.orders ORDER BY orderkey",
        "csv",
        "keys",
    )
    .await;
    let (_, binary) = export(
        "SELECT orderkey FROM memory.default.orders ORDER BY orderkey",
        "json",
        "keys-json",
    )
    .await;
    let (_, large) = export(
        "SELECT * FROM memory.default.orders ORDER BY orderkey",
        "csv",
        "everything",
    )
    .await;
    let id = |body: &Value| {
        body["result"]["structuredContent"]["asset_id"]
            .as_str()
            .unwrap_or_else(|| panic!("an asset: {body}"))
            .to_owned()
    };
    let (small_id, binary_id, large_id) = (id(&small), id(&binary), id(&large));

    let heard = crate::support::read_until(&mut listening, |message| {
        message["method"] == "notifications/resources/list_changed"
    })
    .await;
    assert_eq!(
        heard.last().map(|message| {
            message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone()
        }),
        Some(json!(1))
    );

    // The export's result links its asset as a resource.
    let link = small["result"]["content"]
        .as_array()
        .and_then(|blocks| blocks.iter().find(|block| block["type"] == "resource_link"))
        .unwrap_or_else(|| panic!("a resource link in {small}"));
    assert_eq!(link["uri"], format!("docket://assets/{small_id}"));
    assert_eq!(link["mimeType"], "text/csv", "{link}");

    let rpc = |user: &str, method: &str, params: Value| {
        f.server
            .rpc(method, params)
            .header("x-api-key", &key_of(user))
            .send()
    };
    let (_, listed) = rpc("alice", "resources/list", json!({})).await;
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|resource| resource["uri"].as_str())
        .collect();
    for asset in [&small_id, &binary_id, &large_id] {
        assert!(
            uris.contains(&format!("docket://assets/{asset}").as_str()),
            "{listed}"
        );
    }
    assert_eq!(listed["result"]["cacheScope"], "private");
    let (_, theirs) = rpc("eve", "resources/list", json!({})).await;
    assert_eq!(theirs["result"]["resources"], json!([]), "{theirs}");

    // Text inline, anything else as a blob.
    let (_, read) = rpc(
        "alice",
        "resources/read",
        json!({"uri": format!("docket://assets/{small_id}")}),
    )
    .await;
    let text = read["result"]["contents"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("text: {read}"));
    assert_eq!(text.lines().count(), 51, "{text}");
    let (_, read) = rpc(
        "alice",
        "resources/read",
        json!({"uri": format!("docket://assets/{binary_id}")}),
    )
    .await;
    // JSON is text too (a binary asset reads as a blob: asset_resources' unit test).
    assert!(
        read["result"]["contents"][0]["text"]
            .as_str()
            .is_some_and(|text| text.starts_with('[')),
        "{read}"
    );

    // Larger than the server sends: refused with the size and where to download it.
    let (_, refused) = rpc(
        "alice",
        "resources/read",
        json!({"uri": format!("docket://assets/{large_id}")}),
    )
    .await;
    let said = refused["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("refused: {refused}"));
    assert!(
        said.contains("bytes") && said.contains(&format!("/assets/{large_id}/content")),
        "{said}"
    );

    // The template's id completes from the caller's own assets.
    let (_, completed) = rpc(
        "alice",
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "docket://assets/{id}"},
               "argument": {"name": "id", "value": &small_id[..6]}}),
    )
    .await;
    let values = completed["result"]["completion"]["values"].clone();
    assert!(
        values
            .as_array()
            .is_some_and(|ids| ids.contains(&json!(small_id))),
        "{completed}"
    );
    let (_, theirs) = rpc(
        "eve",
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "docket://assets/{id}"},
               "argument": {"name": "id", "value": ""}}),
    )
    .await;
    assert_eq!(
        theirs["result"]["completion"]["values"],
        json!([]),
        "{theirs}"
    );

    // Another's asset reads as one that does not exist.
    let (_, not_yours) = rpc(
        "eve",
        "resources/read",
        json!({"uri": format!("docket://assets/{small_id}")}),
    )
    .await;
    let (_, unknown) = rpc(
        "eve",
        "resources/read",
        json!({"uri": format!("docket://assets/{}", "0".repeat(32))}),
    )
    .await;
    assert_eq!(not_yours["error"]["code"], -32602, "{not_yours}");
    assert_eq!(not_yours["error"]["message"], unknown["error"]["message"]);
    assert_eq!(
        not_yours["error"]["data"]["uri"],
        format!("docket://assets/{small_id}")
    );
}

#[tokio::test]
async fn closing_a_query_stream_cancels_the_trino_query() {
    let f = fixture(u64::MAX, 1_000_000).await;
    f.double.set_page_rows(10);
    f.double.set_page_delay(Duration::from_millis(200));
    let mut meta = crate::support::meta(json!({}));
    meta["progressToken"] = json!("p-1");
    let arguments = json!({"sql": "SELECT * FROM synthetic.big.rows_1m", "limit": 10000});
    let mut response = f
        .server
        .rpc(
            "tools/call",
            json!({"name": "trino_query", "arguments": arguments, "_meta": meta}),
        )
        .header("x-api-key", &key_of("alice"))
        .response()
        .await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    // A first chunk (a progress notification) proves rows are flowing; then hang up.
    let first = response.chunk().await.expect("stream").expect("a chunk");
    assert!(
        String::from_utf8_lossy(&first).contains("notifications/progress"),
        "{first:?}"
    );
    drop(response);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while f.double.cancelled_queries().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Trino never saw the DELETE"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn an_export_task_reports_progress_and_ends_with_the_asset(backend: Backend) {
    let Some(f) = fixture_on(backend, u64::MAX, 1_000_000, "").await else {
        return;
    };
    f.double.set_page_rows(1000);
    f.double.set_page_delay(Duration::from_millis(50));
    let (_, created) = f
        .call("alice", "trino_export", json!({"sql": "SELECT * FROM synthetic.big.rows_100k", "format": "jsonl", "name": "big"}), json!({"extensions": {TASKS: {}}}))
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
        if task["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("rows,") && m.contains("written"))
        {
            saw_progress = true;
        }
        if task["status"] == "completed" {
            break task;
        }
        assert!(tokio::time::Instant::now() < deadline, "{task}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(saw_progress, "the status message carried rows and bytes");
    let asset = &done["result"]["structuredContent"];
    assert_eq!(asset["row_count"], 100_000, "{done}");
    let text = f
        .download("alice", asset["asset_id"].as_str().expect("id"))
        .await
        .text()
        .await
        .expect("body");
    assert_eq!(text.lines().count(), 100_000);
}

async fn cancelling_an_export_task_stops_the_query_and_leaves_no_asset(backend: Backend) {
    let Some(f) = fixture_on(backend, u64::MAX, 10_000_000, "").await else {
        return;
    };
    f.double.set_page_rows(100);
    f.double.set_page_delay(Duration::from_millis(100));
    let (_, created) = f
        .call(
            "alice",
            "trino_export",
            json!({"sql": "SELECT * FROM synthetic.big.rows_1m", "format": "csv", "name": "never"}),
            json!({"extensions": {TASKS: {}}}),
        )
        .await;
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("task id")
        .to_owned();
    // Wait until rows flow, then cancel.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !f.task("alice", &task_id).await["statusMessage"]
        .as_str()
        .is_some_and(|m| m.contains("rows,"))
    {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    f.server
        .rpc("tasks/cancel", json!({"taskId": task_id}))
        .capabilities(json!({"extensions": {TASKS: {}}}))
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    f.wait_task("alice", &task_id, "cancelled").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while f.double.cancelled_queries().is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "Trino never saw the DELETE"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (_, listed) = f.call("alice", "list_assets", json!({}), json!({})).await;
    assert_eq!(
        listed["result"]["structuredContent"]["assets"],
        json!([]),
        "no partial asset"
    );
}

/// A cancel acknowledged through another replica that the exporting replica
/// never heard (no notification crosses SQLite processes, and its next beat is an
/// hour away) wins in the ending statement over the export that finished after
/// it; the asset the export saved is taken back, bytes and row. (The race of the
/// ending statements themselves is a store property, on both backends.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unheard_cancel_wins_over_a_finished_export_and_takes_its_asset_back() {
    let tasks = "{ heartbeat_interval: 1h, stale_after: 2h }";
    let f = fixture_with(Backend::Sqlite, u64::MAX, 10_000_000, "", tasks)
        .await
        .expect("SQLite is always there");
    f.double.set_page_rows(1000);
    f.double.set_page_delay(Duration::from_millis(20));
    let (_, created) = f
        .call(
            "alice",
            "trino_export",
            json!({"sql": "SELECT * FROM synthetic.big.rows_100k", "format": "csv", "name": "unwanted"}),
            json!({"extensions": {TASKS: {}}}),
        )
        .await;
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("task id")
        .to_owned();
    // Another replica: its own connection, whose signals reach no one here.
    let elsewhere = docket_storage::connect(
        &f.database_url,
        docket_storage::ConnectOptions {
            max_connections: 1,
            migrate: false,
        },
    )
    .await
    .expect("connect")
    .task_store();
    elsewhere
        .request_cancel(&docket_task::TaskId::from_stored(task_id.clone()))
        .await
        .expect("the cancel is recorded");
    let ended = f.wait_task("alice", &task_id, "cancelled").await;
    assert!(ended.get("result").is_none(), "{ended}");
    // The take-back follows the ending; wait for it (the deadline only turns a
    // hang into a failure).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (_, listed) = f.call("alice", "list_assets", json!({}), json!({})).await;
        let files = crate::support::files_under(&f._files);
        if listed["result"]["structuredContent"]["assets"] == json!([]) && files.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the asset stayed: {listed} {files:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        f.double.cancelled_queries().is_empty(),
        "the export ran to its end: nothing stopped it but the ending statement"
    );
}

async fn the_row_cap_stops_an_export_without_an_asset(backend: Backend) {
    let Some(f) = fixture_on(backend, u64::MAX, 20, "").await else {
        return;
    };
    let (_, body) = f.call("alice", "trino_export", json!({"sql": "SELECT * FROM memory.default.orders", "format": "json", "name": "capped"}), json!({})).await;
    assert_eq!(body["result"]["isError"], true, "{body}");
    assert!(
        body["result"]["structuredContent"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("more than 20 rows"))
    );
    let (_, listed) = f.call("alice", "list_assets", json!({}), json!({})).await;
    assert_eq!(listed["result"]["structuredContent"]["assets"], json!([]));
    let (_, body) = f
        .call(
            "alice",
            "trino_export",
            json!({"sql": "SELECT 1", "format": "csv", "name": "x", "limit": 21}),
            json!({}),
        )
        .await;
    assert!(
        body["result"]["structuredContent"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("exceeds")),
        "{body}"
    );
}

async fn an_idempotency_key_returns_the_owners_asset_without_running_again(backend: Backend) {
    let Some(f) = fixture_on(backend, u64::MAX, 1_000_000, "").await else {
        return;
    };
    let arguments = json!({"sql": "SELECT orderkey FROM memory.default.orders", "format": "csv", "name": "once", "idempotency_key": "k-1"});
    let (_, first) = f
        .call("alice", "trino_export", arguments.clone(), json!({}))
        .await;
    let submitted = f.double.submitted().len();
    let (_, second) = f
        .call("alice", "trino_export", arguments.clone(), json!({}))
        .await;
    assert_eq!(
        first["result"]["structuredContent"]["asset_id"],
        second["result"]["structuredContent"]["asset_id"]
    );
    let bodies: Vec<String> = f
        .double
        .submitted()
        .iter()
        .map(|r| r.body.clone())
        .collect();
    assert_eq!(
        f.double.submitted().len(),
        submitted,
        "the query did not run again: {bodies:?}"
    );
    let (_, bobs) = f.call("bob", "trino_export", arguments, json!({})).await;
    assert_ne!(
        bobs["result"]["structuredContent"]["asset_id"],
        first["result"]["structuredContent"]["asset_id"],
        "keys are per owner"
    );
}

async fn an_expensive_export_asks_first_and_no_task_exists_until_accepted(backend: Backend) {
    let Some(f) = fixture_on(backend, 1000, 10_000_000, "").await else {
        return;
    };
    let arguments = json!({"sql": "SELECT * FROM synthetic.big.rows_100k", "format": "csv", "name": "consented"});
    let caps = json!({"elicitation": {}, "extensions": {TASKS: {}}});
    let (_, asked) = f
        .call("alice", "trino_export", arguments.clone(), caps.clone())
        .await;
    let asked = &asked["result"];
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    assert!(asked.get("taskId").is_none());
    let message = asked["inputRequests"]["consent"]["params"]["message"]
        .as_str()
        .expect("message");
    assert!(
        message.contains("100000") && message.contains("threshold"),
        "{message}"
    );
    let state = asked["requestState"].as_str().expect("state").to_owned();

    let retry = |action: &str| {
        json!({"name": "trino_export", "arguments": arguments, "requestState": state,
               "inputResponses": {"consent": {"action": action, "content": {"proceed": true}}}})
    };
    let (_, declined) = f
        .server
        .rpc("tools/call", retry("decline"))
        .capabilities(caps.clone())
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert_eq!(
        declined["result"]["structuredContent"]["error"]["code"], "user_declined",
        "{declined}"
    );

    let (_, accepted) = f
        .server
        .rpc("tools/call", retry("accept"))
        .capabilities(caps)
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert_eq!(accepted["result"]["resultType"], "task", "{accepted}");

    let (status, no_elicitation) = f.call("alice", "trino_export", arguments, json!({})).await;
    assert_eq!(
        (status, no_elicitation["error"]["code"].clone()),
        (400, json!(-32021)),
        "{no_elicitation}"
    );
    assert_eq!(
        no_elicitation["error"]["data"]["requiredCapabilities"],
        json!({"elicitation": {}})
    );
}

async fn a_connection_marked_consent_always_asks_even_for_one_row(backend: Backend) {
    let Some(f) = fixture_on(backend, u64::MAX, 1_000_000, ", consent: always").await else {
        return;
    };
    let caps = json!({"elicitation": {}, "extensions": {TASKS: {}}});
    let answer_with = |tool: &'static str, arguments: Value, state: Option<String>| {
        let mut params = json!({"name": tool, "arguments": arguments,
            "inputResponses": {"consent": {"action": "accept", "content": {"proceed": true}}}});
        if let Some(state) = state {
            params["requestState"] = json!(state);
        }
        f.server
            .rpc("tools/call", params)
            .capabilities(caps.clone())
            .header("x-api-key", &key_of("alice"))
            .send()
    };
    for (tool, arguments) in [
        ("trino_query", json!({"sql": "SELECT 1"})),
        (
            "trino_export",
            json!({"sql": "SELECT 1", "format": "csv", "name": "one"}),
        ),
    ] {
        // An answer sent before any question (no requestState) is no consent: the
        // call asks, and runs nothing.
        let (_, unasked) = answer_with(tool, arguments.clone(), None).await;
        assert_eq!(
            unasked["result"]["resultType"], "input_required",
            "{tool}: {unasked}"
        );
        let (_, asked) = f.call("alice", tool, arguments.clone(), caps.clone()).await;
        let asked = &asked["result"];
        assert_eq!(asked["resultType"], "input_required", "{tool}: {asked}");
        assert!(asked.get("taskId").is_none(), "no task before consent");
        let message = asked["inputRequests"]["consent"]["params"]["message"]
            .as_str()
            .expect("message");
        assert!(message.contains("warehouse"), "{tool}: {message}");
        let state = asked["requestState"].as_str().expect("state");
        let (_, accepted) = f
            .server
            .rpc(
                "tools/call",
                json!({"name": tool, "arguments": arguments, "requestState": state,
                       "inputResponses": {"consent": {"action": "accept", "content": {"proceed": true}}}}),
            )
            .capabilities(caps.clone())
            .header("x-api-key", &key_of("alice"))
            .send()
            .await;
        let expected = if tool == "trino_export" {
            "task"
        } else {
            "complete"
        };
        assert_eq!(
            accepted["result"]["resultType"], expected,
            "{tool}: {accepted}"
        );
        // The same sealed answer replayed runs nothing more.
        for _ in 0..2 {
            let (_, replayed) = answer_with(tool, arguments.clone(), Some(state.to_owned())).await;
            assert_eq!(replayed["result"]["isError"], true, "{tool}: {replayed}");
            let said = replayed["result"]["structuredContent"]["error"]["message"]
                .as_str()
                .unwrap_or_default();
            assert!(said.contains("already used"), "{tool}: {replayed}");
        }
    }
    // Only the accepted query ran; asking ran nothing but the EXPLAINs, if any.
    let statements: Vec<String> = f
        .double
        .submitted()
        .iter()
        .map(|r| r.body.clone())
        .filter(|sql| !sql.starts_with("EXPLAIN"))
        .collect();
    assert!(statements.len() <= 2, "{statements:?}");
}

async fn the_connection_timeout_bounds_a_page_never_a_longer_export(backend: Backend) {
    // Each page takes 0.3 s, well inside the connection's 1 s; the whole export
    // takes ten pages, far beyond it.
    let Some(f) = fixture_on(backend, u64::MAX, 1_000_000, ", timeout: 1s").await else {
        return;
    };
    f.double.set_page_rows(100);
    f.double.set_page_delay(Duration::from_millis(300));
    let (_, body) = f
        .call(
            "alice",
            "trino_export",
            json!({"sql": "SELECT * FROM synthetic.big.rows_1k", "format": "csv", "name": "slow", "timeout_seconds": 600}),
            json!({}),
        )
        .await;
    assert_eq!(
        body["result"]["structuredContent"]["row_count"], 1000,
        "the export outlived the connection timeout: {body}"
    );

    // The export's own, shorter timeout does stop it, with a message saying so.
    let (_, body) = f
        .call(
            "alice",
            "trino_export",
            json!({"sql": "SELECT * FROM synthetic.big.rows_1k", "format": "csv", "name": "too-slow", "timeout_seconds": 1}),
            json!({}),
        )
        .await;
    assert_eq!(body["result"]["isError"], true, "{body}");
    let message = body["result"]["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("did not finish within 1 second"), "{body}");
    let (_, listed) = f.call("alice", "list_assets", json!({}), json!({})).await;
    let names: Vec<&str> = listed["result"]["structuredContent"]["assets"]
        .as_array()
        .expect("assets")
        .iter()
        .filter_map(|asset| asset["name"].as_str())
        .collect();
    assert_eq!(names, ["slow"], "the timed-out export left no asset");
}

/// A persona's connection rules hold for the connection a call actually uses:
/// left out, `connection` means the default one, and a persona that may not use
/// it is refused before Trino sees anything.
#[tokio::test]
async fn a_persona_is_held_to_the_default_connection_a_call_falls_back_to() {
    let double = TrinoDouble::start().await.expect("double");
    let yaml = format!(
        "connections:\n  \
           secretwh: {{ kind: trino, url: \"{url}\", user: docket, catalog: memory, schema: default, default: true }}\n  \
           publicwh: {{ kind: trino, url: \"{url}\", user: docket, catalog: memory, schema: default }}\n\
         personas:\n  public: {{ roles: [public], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [publicwh] }} }}\n",
        url = double.url()
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[("pat", &["public"])]);
    let server = TestServer::start(docket_server::App::builder(config).build().expect("app")).await;
    let call = |arguments: Value| {
        server
            .rpc(
                "tools/call",
                json!({"name": "trino_query", "arguments": arguments}),
            )
            .header("x-api-key", &key_of("pat"))
            .send()
    };
    for arguments in [
        json!({"sql": "SELECT 1"}),
        json!({"sql": "SELECT 1", "connection": "secretwh"}),
    ] {
        let (_, body) = call(arguments.clone()).await;
        assert_eq!(body["result"]["isError"], true, "{arguments}: {body}");
        assert_eq!(
            body["result"]["structuredContent"]["error"]["category"], "authorization_denied",
            "{arguments}: {body}"
        );
        assert!(
            body["result"]["structuredContent"]["error"]["message"]
                .as_str()
                .is_some_and(|message| message.contains("connection not allowed")),
            "{body}"
        );
    }
    assert!(double.submitted().is_empty(), "Trino saw a refused call");
    let (_, body) = call(json!({"sql": "SELECT 1", "connection": "publicwh"})).await;
    assert_eq!(
        body["result"]["structuredContent"]["row_count"], 1,
        "{body}"
    );
}

/// The retention pass deletes audit rows and call records past their age, assets
/// (bytes first, then the row) past theirs, and with `delete_with_task` the assets
/// whose task is gone; nothing is deleted while the ages keep it.
async fn the_retention_pass_deletes_audit_calls_and_assets_with_their_bytes(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let double = TrinoDouble::start().await.expect("double");
    let yaml = format!(
        "connections:\n  warehouse: {{ kind: trino, url: \"{}\", user: docket, catalog: memory, schema: default }}\n",
        double.url()
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["admin"])]);
    let stored = StoredServer::start(config, &database, false).await;
    let export = |name: &str| {
        let server = &stored.server;
        let name = name.to_owned();
        async move {
            let (_, body) = server
                .rpc(
                    "tools/call",
                    json!({"name": "trino_export", "arguments": {
                        "sql": "SELECT orderkey FROM memory.default.orders", "format": "csv", "name": name}}),
                )
                .header("x-api-key", &key_of("alice"))
                .send()
                .await;
            body["result"]["structuredContent"]["asset_id"]
                .as_str()
                .expect("asset id")
                .to_owned()
        }
    };
    let kept = export("kept").await;
    let orphan = export("orphan").await;
    // The orphan's task is gone (as after the task retention pass).
    let assets = stored.store.asset_store();
    let mut row = docket_catalog::testing::new_asset("apikey:alice", "of-a-gone-task.csv");
    row.storage_key = assets
        .get(&orphan)
        .await
        .expect("get")
        .expect("row")
        .storage_key;
    assets.delete(&orphan).await.expect("re-keyed");
    let orphan = assets
        .create_or_get(row)
        .await
        .expect("orphan")
        .into_asset()
        .id;
    let app = &stored.server.app;
    let files = || crate::support::files_under(&stored.files);
    assert_eq!(files().len(), 2);

    let keep_all = docket_server::RetentionAges::default();
    assert_eq!(
        app.delete_expired(keep_all).await,
        docket_server::RetentionReport::default()
    );
    let report = app
        .delete_expired(docket_server::RetentionAges {
            audit: Some(Duration::ZERO),
            calls: Some(Duration::ZERO),
            assets: None,
            assets_with_their_task: true,
        })
        .await;
    assert_eq!(report.assets, 1, "{report:?}");
    assert!(report.calls >= 2, "{report:?}");
    assert!(assets.get(&orphan).await.expect("get").is_none());
    assert_eq!(files().len(), 1, "the orphan's bytes went with it");
    assert_eq!(
        stored.server.download_as("alice", &kept).await.status(),
        200
    );
    // Its owner, listening, hears that their resource list changed.
    let mut listening = stored
        .server
        .rpc(
            "subscriptions/listen",
            json!({"notifications": {"resourcesListChanged": true}}),
        )
        .header("x-api-key", &key_of("alice"))
        .response()
        .await;
    crate::support::read_until(&mut listening, |message| {
        message["method"] == "notifications/subscriptions/acknowledged"
    })
    .await;
    let report = app
        .delete_expired(docket_server::RetentionAges {
            assets: Some(Duration::ZERO),
            ..docket_server::RetentionAges::default()
        })
        .await;
    assert_eq!(report.assets, 1, "{report:?}");
    // Keep-alives keep a quiet stream open: the guard makes a missing notice fail.
    tokio::time::timeout(
        Duration::from_secs(30),
        crate::support::read_until(&mut listening, |message| {
            message["method"] == "notifications/resources/list_changed"
        }),
    )
    .await
    .expect("the owner heard that their resource list changed");
    assert!(files().is_empty());
    assert_eq!(
        stored.server.download_as("alice", &kept).await.status(),
        404
    );
}
