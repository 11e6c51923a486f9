//! Results that continue where they were cut (issue 39): a `trino_query` answer
//! cut at its row limit or byte budget carries a cursor; the rest of the same
//! result streams into a spool on the replica that ran it, and any replica on the
//! same database and asset store serves the next pages from there, without
//! running the query again. Cursors are their caller's; a spool is deleted when
//! read to its end, stops at the export limits, and each caller holds a bounded
//! number of them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use docket_server::App;
use docket_server::config::Config;
use docket_storage::test_db::TestDatabase;
use docket_trino_double::TrinoDouble;
use proptest::prelude::*;
use serde_json::{Value, json};

use crate::support::{Backend, TestServer, key_of, on_both_backends, users};

on_both_backends!(a_cut_answer_reads_on_from_another_replica);

/// Two replicas of one configuration on `database`, sharing the asset store at
/// `files`, querying `double`.
struct Replicas {
    a: TestServer,
    b: TestServer,
    double: TrinoDouble,
    files: PathBuf,
    _database: TestDatabase,
}

impl Drop for Replicas {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.files);
    }
}

async fn replicas(backend: Backend, extra: &str) -> Option<Replicas> {
    let database = backend.database().await?;
    let double = TrinoDouble::start().await.expect("double");
    double.set_page_rows(64);
    let yaml = format!(
        "connections:\n  warehouse: {{ kind: trino, url: \"{}\", user: docket, catalog: synthetic, schema: big }}\n\
         consent: {{ trino: {{ row_threshold: 1000000000000 }} }}\n\
         rate_limit: {{ requests_per_minute: 1000000, burst: 100000 }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n{extra}",
        double.url()
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"]), ("bob", &["analyst"])]);
    let files = std::env::temp_dir().join(format!(
        "docket-spools-{}",
        docket_catalog::generate_id().expect("id")
    ));
    let a = replica(&config, &database, &files).await;
    let b = replica(&config, &database, &files).await;
    Some(Replicas {
        a,
        b,
        double,
        files,
        _database: database,
    })
}

async fn replica(config: &Config, database: &TestDatabase, files: &Path) -> TestServer {
    let store = database.connect().await;
    let app = App::builder(config.clone())
        .task_store(store.task_store())
        .sessions(store.session_store())
        .spools(store.spool_store())
        .assets(
            store.asset_store(),
            Some(store.call_catalog()),
            Arc::new(docket_export::sink::FilesystemSink::new(files)),
        )
        .build()
        .expect("app");
    TestServer::start(app).await
}

/// Calls `trino_query` as `user` with `arguments`; the structured result, or the
/// text of a tool error as `Err`.
async fn query(server: &TestServer, user: &str, arguments: Value) -> Result<Value, String> {
    let (status, body) = server
        .rpc(
            "tools/call",
            json!({"name": "trino_query", "arguments": arguments}),
        )
        .header("x-api-key", &key_of(user))
        .send()
        .await;
    assert_eq!(status, 200, "{body}");
    if let Some(error) = body["error"]["message"].as_str() {
        return Err(error.to_owned());
    }
    let result = &body["result"];
    if result["isError"] == true {
        return Err(result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned());
    }
    Ok(result["structuredContent"].clone())
}

fn rows(result: &Value) -> Vec<Value> {
    result["rows"].as_array().expect("rows").clone()
}

fn cursor(result: &Value) -> Option<String> {
    result["cursor"].as_str().map(str::to_owned)
}

/// Reads pages from `server` until a page carries no cursor; every row, and the
/// last page.
async fn read_on(
    server: &TestServer,
    user: &str,
    mut next: String,
    limit: u64,
    bytes: Option<u64>,
) -> (Vec<Value>, Value) {
    let mut read = Vec::new();
    loop {
        let mut arguments = json!({"cursor": next, "limit": limit});
        if let Some(bytes) = bytes {
            arguments["max_result_bytes"] = json!(bytes);
        }
        let page = query(server, user, arguments).await.expect("a page");
        if let Some(bytes) = bytes {
            let size: u64 = rows(&page)
                .iter()
                .map(|row| row.to_string().len() as u64 + 1)
                .sum();
            assert!(size <= bytes, "a page holds at most its budget: {size}");
        }
        assert!(rows(&page).len() as u64 <= limit);
        read.extend(rows(&page));
        match cursor(&page) {
            Some(cursor) => next = cursor,
            None => return (read, page),
        }
    }
}

async fn a_cut_answer_reads_on_from_another_replica(backend: Backend) {
    let Some(r) = replicas(backend, "").await else {
        return;
    };
    let sql = "SELECT id, name, amount FROM synthetic.big.rows_1k WHERE id <= 900";
    let whole = query(
        &r.a,
        "alice",
        json!({"sql": sql, "limit": 5000, "max_result_bytes": 8_000_000}),
    )
    .await
    .expect("the whole result");
    assert_eq!(whole["truncated"], false);
    assert_eq!(rows(&whole).len(), 900);
    // The statement itself, not the EXPLAIN of each call's consent check.
    let runs = || {
        r.double
            .queries()
            .iter()
            .filter(|recorded| recorded.sql == sql)
            .count()
    };
    let queries_before = runs();

    let first = query(&r.a, "alice", json!({"sql": sql, "limit": 100}))
        .await
        .expect("the first page");
    assert_eq!(first["truncated"], true, "{first}");
    assert_eq!(rows(&first).len(), 100);
    let started = cursor(&first).expect("a cut answer carries a cursor");

    // Another caller's use of it reaches nothing, with the answer a forged one gets.
    let foreign = query(&r.b, "bob", json!({"cursor": started}))
        .await
        .expect_err("not bob's");
    let forged = query(&r.b, "bob", json!({"cursor": "dkc1.bm90LWEtY3Vyc29y"}))
        .await
        .expect_err("forged");
    assert_eq!(foreign, forged);
    assert!(foreign.contains("unknown or has expired"), "{foreign}");
    let both = query(&r.b, "alice", json!({"cursor": started, "sql": sql}))
        .await
        .expect_err("a cursor goes without sql");
    assert!(both.contains("without sql"), "{both}");

    // Replica B reads the rest from the spool A fills.
    let (rest, last) = read_on(&r.b, "alice", started.clone(), 300, None).await;
    let mut all = rows(&first);
    all.extend(rest);
    assert_eq!(all, rows(&whole), "the pages are the result, in order");
    assert_eq!(last["truncated"], false);
    assert_eq!(last["remaining_rows"], 0, "{last}");
    assert_eq!(
        last["query_id"], first["query_id"],
        "every page names the query"
    );
    assert_eq!(
        runs(),
        queries_before + 1,
        "the rest came from the spool, not from running the query again"
    );

    // Read to its end, the spool is gone, its chunks with it.
    let gone = query(&r.a, "alice", json!({"cursor": started}))
        .await
        .expect_err("read to its end");
    assert_eq!(gone, forged);
    let left = walk(&r.files.join("spools"));
    assert!(left.is_empty(), "no chunk is left: {left:?}");
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
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

/// A byte budget cuts an answer as the row limit does: fewer rows than the limit,
/// `truncated`, a cursor, and every page within the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_byte_budget_cuts_like_the_row_limit() {
    let r = replicas(Backend::Sqlite, "").await.expect("SQLite");
    let sql = "SELECT * FROM synthetic.big.rows_1k WHERE id <= 300";
    let first = query(
        &r.a,
        "alice",
        json!({"sql": sql, "limit": 1000, "max_result_bytes": 2048}),
    )
    .await
    .expect("a page");
    let size: usize = rows(&first)
        .iter()
        .map(|row| row.to_string().len() + 1)
        .sum();
    assert!(size <= 2048 && !rows(&first).is_empty(), "{size}");
    assert!(rows(&first).len() < 300);
    assert!(
        first["note"]
            .as_str()
            .is_some_and(|note| note.contains("max_result_bytes"))
    );
    let (rest, _) = read_on(
        &r.a,
        "alice",
        cursor(&first).expect("a cursor"),
        1000,
        Some(2048),
    )
    .await;
    assert_eq!(rows(&first).len() + rest.len(), 300);

    let refused = query(&r.a, "alice", json!({"sql": sql, "max_result_bytes": 512})).await;
    assert!(refused.is_err(), "below the schema's minimum: {refused:?}");
}

/// A spool stops at the export limits and says so on its last page; a caller
/// holds at most `results.max_spools_per_owner` unread spools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spools_stop_at_the_export_limits_and_the_callers_cap() {
    let r = replicas(
        Backend::Sqlite,
        "exports: { max_rows: 250 }\nresults: { max_spools_per_owner: 1 }\n",
    )
    .await
    .expect("SQLite");
    let sql = "SELECT id FROM synthetic.big.rows_1k";
    let first = query(&r.a, "alice", json!({"sql": sql, "limit": 10}))
        .await
        .expect("a page");
    let (rest, last) = read_on(&r.b, "alice", cursor(&first).expect("a cursor"), 1000, None).await;
    assert_eq!(rest.len(), 250, "the spool holds the export limit's rows");
    let note = last["note"].as_str().expect("a note");
    assert!(
        note.contains("export limits") && note.contains("trino_export"),
        "{note}"
    );

    // A cut spool stays until it expires: it still counts against the cap.
    let second = query(&r.a, "alice", json!({"sql": sql, "limit": 10}))
        .await
        .expect("a page");
    assert_eq!(second["truncated"], true);
    assert!(cursor(&second).is_none(), "over the cap: {second}");
    assert!(
        second["note"]
            .as_str()
            .is_some_and(|note| note.contains("unread continuations")),
        "{second}"
    );
    let bobs = query(&r.a, "bob", json!({"sql": sql, "limit": 10}))
        .await
        .expect("a page");
    assert!(cursor(&bobs).is_some(), "the cap is per caller");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    /// However the pages are sized (rows and bytes, first page and the rest), the
    /// pages concatenated are the whole result.
    #[test]
    fn pages_concatenated_are_the_whole_result(
        rows_in_result in 1u64..1500,
        first_limit in 1u64..200,
        page_limit in 10u64..400,
        budget in prop::option::of(1024u64..20_000),
    ) {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async {
            let r = replicas(Backend::Sqlite, "").await.expect("SQLite");
            let sql = format!("SELECT * FROM synthetic.big.rows_1k WHERE id < {rows_in_result}");
            let whole = query(&r.a, "alice", json!({"sql": sql, "limit": 5000, "max_result_bytes": 8_000_000}))
                .await
                .expect("the whole result");
            let mut arguments = json!({"sql": sql, "limit": first_limit});
            if let Some(budget) = budget {
                arguments["max_result_bytes"] = json!(budget);
            }
            let first = query(&r.a, "alice", arguments).await.expect("a page");
            let mut all = rows(&first);
            if let Some(next) = cursor(&first) {
                let (rest, _) = read_on(&r.b, "alice", next, page_limit, budget).await;
                all.extend(rest);
            }
            assert_eq!(all, rows(&whole));
        });
    }
}

/// A secret of the API connection that the upstream echoes back.
const SECRET: &str = "Zq7WvX3kPm9TnB2rLs4Y";

/// An `api_invoke_endpoint` body cut at its byte budget reads on by its cursor on
/// another replica; the pages put together are the body, and the connection's
/// secret is scrubbed wherever the cuts fall, even one through the secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_body_reads_on_and_no_secret_crosses_a_cut() {
    let upstream = crate::upstream::Upstream::start().await;
    let database = Backend::Sqlite.database().await.expect("SQLite");
    let yaml = format!(
        "connections:\n  keyed: {{ kind: api, base_url: \"{}\", auth: {{ api_key: {{ header: X-API-Key, value: \"{SECRET}\" }} }} }}\n\
         rate_limit: {{ requests_per_minute: 1000000, burst: 100000 }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n",
        upstream.url("/v1")
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"]), ("bob", &["analyst"])]);
    let files = std::env::temp_dir().join(format!(
        "docket-spools-{}",
        docket_catalog::generate_id().expect("id")
    ));
    let a = replica(&config, &database, &files).await;
    let b = replica(&config, &database, &files).await;
    let call = |server: &TestServer, arguments: Value| {
        let request = server
            .rpc(
                "tools/call",
                json!({"name": "api_invoke_endpoint", "arguments": arguments}),
            )
            .header("x-api-key", &key_of("alice"));
        async move {
            let (status, body) = request.send().await;
            assert_eq!(status, 200, "{body}");
            assert!(body["result"]["isError"] != true, "{body}");
            body["result"]["structuredContent"].clone()
        }
    };
    // Headers are echoed sorted by name: the padding puts the secret near the end.
    let echo = |budget: u64| {
        json!({"connection": "keyed", "method": "GET", "path": "/echo",
               "headers": {"A-Pad": "p".repeat(1500)}, "max_result_bytes": budget})
    };
    let whole = call(&a, echo(1_000_000)).await;
    assert_eq!(whole["truncated"], false);
    assert!(!whole.to_string().contains(SECRET));
    // The body is about 1.6 KiB with the secret near its end: the cuts fall before
    // it, through it and after it.
    let size = whole["size_bytes"].as_u64().expect("a size");
    for budget in (size - 260..size - 4).step_by(7) {
        let first = call(&a, echo(budget)).await;
        assert_eq!(first["truncated"], true, "{first}");
        let mut pages = vec![first["body"].as_str().expect("text").to_owned()];
        let mut next = first["cursor"].as_str().map(str::to_owned);
        while let Some(cursor) = next {
            let page = call(
                &b,
                json!({"connection": "keyed", "cursor": cursor, "max_result_bytes": budget}),
            )
            .await;
            assert_eq!(page["status"], 200);
            pages.push(page["body"].as_str().expect("text").to_owned());
            next = page["cursor"].as_str().map(str::to_owned);
        }
        for page in &pages {
            for window in SECRET.as_bytes().windows(4) {
                let window = std::str::from_utf8(window).expect("ascii");
                assert!(!page.contains(window), "a piece of the secret in {page}");
            }
        }
        let body: Value = serde_json::from_str(&pages.concat()).expect("the pages are the body");
        assert_eq!(body, whole["body"], "budget {budget}");
    }
    let _ = std::fs::remove_dir_all(&files);
}
