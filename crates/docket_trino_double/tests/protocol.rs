//! The double's wire protocol, checked with a plain HTTP client against what a Trino
//! coordinator does: document shapes, states, Trino's token rules, cancellation,
//! faults, and the binary's start-up line. (The Rust client's tests in
//! docket_export and CI's run of the official Python client check the rest.)

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use docket_trino_double::TrinoDouble;
use reqwest::StatusCode;
use serde_json::{Value, json};

async fn double() -> TrinoDouble {
    TrinoDouble::start().await.expect("the double starts")
}

async fn submit(double: &TrinoDouble, sql: &str) -> Value {
    reqwest::Client::new()
        .post(format!("{}/v1/statement", double.url()))
        .header("X-Trino-User", "tester")
        .header("X-Trino-Catalog", "memory")
        .header("X-Trino-Schema", "default")
        // What the Python client sends by default; a server without spooling
        // ignores it and answers with inline data.
        .header("X-Trino-Query-Data-Encoding", "json+zstd,json+lz4,json")
        .body(sql.to_owned())
        .send()
        .await
        .expect("answered")
        .json()
        .await
        .expect("a QueryResults document")
}

async fn get(url: &str) -> (StatusCode, String) {
    let response = reqwest::get(url).await.expect("answered");
    let status = response.status();
    (status, response.text().await.expect("a body"))
}

fn document(body: &str) -> Value {
    serde_json::from_str(body).expect("a QueryResults document")
}

fn next_uri(document: &Value) -> Option<String> {
    document["nextUri"].as_str().map(str::to_owned)
}

#[tokio::test]
async fn info_answers_like_a_coordinator() {
    let double = double().await;
    let (status, body) = get(&format!("{}/v1/info", double.url())).await;
    assert_eq!(status, StatusCode::OK);
    let info = document(&body);
    assert_eq!(info["coordinator"], json!(true));
    assert_eq!(info["starting"], json!(false));
    assert!(info["nodeVersion"]["version"].is_string());
    assert!(
        info["environment"].is_string() && info["uptime"].is_string(),
        "{info}"
    );
}

#[tokio::test]
async fn a_query_goes_queued_running_finished_under_trinos_token_rules() {
    let double = double().await;
    double.set_page_rows(2);
    let queued = submit(
        &double,
        "SELECT custkey, name FROM customers ORDER BY custkey LIMIT 3",
    )
    .await;
    assert_eq!(queued["stats"]["state"], "QUEUED");
    assert!(queued.get("columns").is_none() && queued.get("data").is_none());
    let id = queued["id"].as_str().expect("an id");
    // Shaped like 20261130_142501_00001_abcde.
    let parts: Vec<&str> = id.split('_').collect();
    assert_eq!(
        parts.iter().map(|part| part.len()).collect::<Vec<_>>(),
        [8, 6, 5, 5],
        "{id}"
    );
    assert!(queued["infoUri"].as_str().expect("infoUri").contains(id));
    let next = next_uri(&queued).expect("a next URI");
    assert!(
        next.contains("/v1/statement/queued/") && next.ends_with("/1"),
        "{next}"
    );

    let (_, body) = get(&next).await;
    let dispatched = document(&body);
    let mut next = next_uri(&dispatched).expect("a next URI");
    assert!(
        next.contains("/v1/statement/executing/") && next.ends_with("/0"),
        "{next}"
    );

    let (status, first_body) = get(&next).await;
    assert_eq!(status, StatusCode::OK);
    let first = document(&first_body);
    assert_eq!(first["stats"]["state"], "RUNNING");
    assert_eq!(
        first["columns"][1],
        json!({
            "name": "name",
            "type": "varchar",
            "typeSignature": {"rawType": "varchar", "arguments": [{"kind": "LONG", "value": 2_147_483_647}]},
        })
    );
    assert_eq!(
        first["data"],
        json!([[1, "Ada Lovelace"], [2, "Grace Hopper"]])
    );
    for field in [
        "queued",
        "scheduled",
        "nodes",
        "totalSplits",
        "queuedSplits",
        "runningSplits",
        "completedSplits",
        "cpuTimeMillis",
        "wallTimeMillis",
        "queuedTimeMillis",
        "elapsedTimeMillis",
        "processedRows",
        "processedBytes",
        "physicalInputBytes",
        "peakMemoryBytes",
        "spilledBytes",
        "progressPercentage",
        "rootStage",
    ] {
        assert!(
            first["stats"].get(field).is_some(),
            "stats.{field} missing: {}",
            first["stats"]
        );
    }
    // Asking again for the same token gets the same document.
    let (_, again) = get(&next).await;
    assert_eq!(again, first_body);

    let previous = next.clone();
    next = next_uri(&first).expect("more pages");
    let (_, body) = get(&next).await;
    let second = document(&body);
    assert_eq!(second["data"], json!([[3, "Edsger Dijkstra"]]));
    // Older tokens are gone; tokens from the future are unknown.
    assert_eq!(get(&previous).await.0, StatusCode::GONE);
    let ahead = format!("{}9", &next[..next.len() - 1]);
    assert_eq!(get(&ahead).await.0, StatusCode::NOT_FOUND);

    let mut last = second;
    while let Some(next) = next_uri(&last) {
        last = document(&get(&next).await.1);
    }
    assert_eq!(last["stats"]["state"], "FINISHED");
    assert_eq!(last["stats"]["processedRows"], 3);
    assert_eq!(last["stats"]["progressPercentage"], json!(100.0));
    assert!(last.get("error").is_none());
}

#[tokio::test]
async fn delete_answers_204_and_later_gets_report_user_canceled() {
    let double = double().await;
    let queued = submit(&double, "SELECT * FROM synthetic.big.rows_1m").await;
    let id = queued["id"].as_str().expect("an id").to_owned();
    let next = next_uri(&queued).expect("a next URI");
    let client = reqwest::Client::new();
    let deleted = client.delete(&next).send().await.expect("answered");
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert_eq!(double.cancelled_queries(), vec![id]);

    let failed = document(&get(&next).await.1);
    assert_eq!(failed["stats"]["state"], "FAILED");
    assert_eq!(failed["error"]["errorName"], "USER_CANCELED");
    assert_eq!(failed["error"]["errorType"], "USER_ERROR");
    assert!(failed.get("nextUri").is_none());

    let unknown = next.replace("/queued/", "/queued/x");
    let response = client.delete(&unknown).send().await.expect("answered");
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn failures_name_the_error_and_where_it_is() {
    let double = double().await;
    let mut results = submit(&double, "SELECT *\n  FROM orders WHERE").await;
    while let Some(next) = next_uri(&results) {
        results = document(&get(&next).await.1);
    }
    let error = &results["error"];
    assert_eq!(results["stats"]["state"], "FAILED");
    assert_eq!(error["errorName"], "SYNTAX_ERROR");
    assert_eq!(error["errorCode"], 1);
    assert_eq!(error["errorType"], "USER_ERROR");
    assert_eq!(
        error["errorLocation"],
        json!({"lineNumber": 2, "columnNumber": 20})
    );
    assert!(
        error["message"]
            .as_str()
            .expect("a message")
            .starts_with("line 2:20: ")
    );
    assert!(error["failureInfo"]["type"].is_string());
}

#[tokio::test]
async fn injected_faults_answer_instead_of_the_query() {
    let double = double().await;
    let queued = submit(&double, "SELECT 1").await;
    let next = next_uri(&queued).expect("a next URI");
    double.fail_next_requests(503, 1);
    double.send_empty_body_next(1);
    assert_eq!(get(&next).await.0, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(get(&next).await, (StatusCode::OK, String::new()));
    // The faults did not move the query on.
    let dispatched = document(&get(&next).await.1);
    assert!(next_uri(&dispatched).expect("a next URI").ends_with("/0"));
}

#[tokio::test]
async fn submissions_need_a_user_and_a_statement() {
    let double = double().await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/statement", double.url());
    let no_user = client
        .post(&url)
        .body("SELECT 1")
        .send()
        .await
        .expect("answered");
    assert_eq!(no_user.status(), StatusCode::BAD_REQUEST);
    let empty = client
        .post(&url)
        .header("X-Trino-User", "tester")
        .send()
        .await
        .expect("answered");
    assert_eq!(empty.status(), StatusCode::BAD_REQUEST);
    let recorded = double.submitted();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].body, "SELECT 1");
}

/// The contract `cargo xtask trino-double` and CI rely on: `--listen ADDR` with
/// port 0, then `listening on http://ADDR` on stdout.
#[tokio::test]
async fn the_binary_announces_where_it_listens() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_docket_trino_double"))
        .args(["--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let stdout = child.stdout.take().expect("piped stdout");
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    })
    .await
    .expect("the reader ran")
    .expect("a line");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    let (status, body) = get(&format!("{url}/v1/info")).await;
    child.kill().expect("the double stops");
    let _ = child.wait();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(document(&body)["coordinator"], json!(true));
}
