//! The double's wire protocol, checked with a plain HTTP client against what a Trino
//! coordinator does: document shapes, states, Trino's token rules, cancellation,
//! faults, impersonation rules and what is recorded of each query, and the binary's
//! start-up line and flags. (The rules' semantics are unit-tested with the rules
//! parser in src/access.rs; the Rust client's tests in docket_export and CI's run of
//! the official Python client check the rest.)

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};

use docket_trino_double::{
    AccessControlRules, ImpersonationRule, QueryState, RecordedError, TrinoDouble,
};
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

/// A statement request as a client sends it: user `user`, session `memory.default`.
fn statement(double: &TrinoDouble, user: &str, sql: &str) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("{}/v1/statement", double.url()))
        .header("X-Trino-User", user)
        .header("X-Trino-Catalog", "memory")
        .header("X-Trino-Schema", "default")
        .body(sql.to_owned())
}

async fn send(request: reqwest::RequestBuilder) -> (StatusCode, String) {
    let response = request.send().await.expect("answered");
    let status = response.status();
    (status, response.text().await.expect("a body"))
}

/// Follows `nextUri` from `document` to the last document.
async fn last_document(mut document: Value) -> Value {
    while let Some(next) = next_uri(&document) {
        document = self::document(&get(&next).await.1);
    }
    document
}

/// Submits `request` and follows it to its last document.
async fn run(request: reqwest::RequestBuilder) -> Value {
    let (status, body) = send(request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    last_document(document(&body)).await
}

/// Every row of a finished result, across pages.
async fn rows(request: reqwest::RequestBuilder) -> (Value, Vec<Value>) {
    let (status, body) = send(request).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut document = self::document(&body);
    let mut columns = Value::Null;
    let mut rows = Vec::new();
    loop {
        if let Some(found) = document.get("columns") {
            columns = found.clone();
        }
        if let Some(data) = document["data"].as_array() {
            rows.extend(data.iter().cloned());
        }
        let Some(next) = next_uri(&document) else {
            break;
        };
        document = self::document(&get(&next).await.1);
    }
    assert_eq!(document["stats"]["state"], "FINISHED", "{document}");
    (columns, rows)
}

const RULES: &str = r#"{"impersonation": [
    {"original_user": "svc", "new_user": "root", "allow": false},
    {"original_user": "svc", "new_user": "analyst-.*"},
    {"original_user": "(.*)-admin", "new_user": "$1"}
]}"#;

fn rules() -> AccessControlRules {
    AccessControlRules::from_json(RULES).expect("valid rules")
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
    assert_eq!(double.cancelled_queries(), vec![id.clone()]);

    let failed = document(&get(&next).await.1);
    assert_eq!(failed["stats"]["state"], "FAILED");
    assert_eq!(failed["error"]["errorName"], "USER_CANCELED");
    let recorded = double.query(&id).expect("recorded");
    assert_eq!(recorded.state, QueryState::Failed);
    assert_eq!(
        recorded.error.map(|error| error.name),
        Some("USER_CANCELED".to_owned())
    );
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

#[tokio::test]
async fn a_denied_impersonation_is_accepted_then_fails_at_dispatch_like_trino() {
    let double = double().await;
    double.set_access_control(Some(rules()));
    let (status, body) =
        send(statement(&double, "root", "SELECT 1").basic_auth("svc", Some("any password"))).await;
    // Trino checks impersonation when it dispatches the query, after the POST.
    assert_eq!(status, StatusCode::OK, "{body}");
    let queued = document(&body);
    assert_eq!(queued["stats"]["state"], "QUEUED");
    let id = queued["id"].as_str().expect("an id").to_owned();
    let next = next_uri(&queued).expect("a next URI");
    let failed = document(&get(&next).await.1);
    assert_eq!(failed["stats"]["state"], "FAILED", "{failed}");
    assert!(failed.get("nextUri").is_none(), "{failed}");
    assert_eq!(failed["stats"]["scheduled"], false);
    let error = &failed["error"];
    assert_eq!(error["errorName"], "PERMISSION_DENIED");
    assert_eq!(error["errorCode"], 4);
    assert_eq!(error["errorType"], "USER_ERROR");
    assert_eq!(
        error["message"],
        "Access Denied: User svc cannot impersonate user root"
    );
    assert_eq!(
        error["failureInfo"]["type"],
        "io.trino.spi.security.AccessDeniedException"
    );
    // Asking again gets the same answer.
    assert_eq!(document(&get(&next).await.1)["error"], failed["error"]);

    let recorded = double.query(&id).expect("recorded");
    assert_eq!(recorded.state, QueryState::Failed);
    assert_eq!(recorded.user, "root");
    assert_eq!(recorded.principal.as_deref(), Some("svc"));
    assert!(recorded.is_impersonation());
    assert_eq!(recorded.started, None, "it never ran");
    assert_eq!(
        recorded.error,
        Some(RecordedError {
            name: "PERMISSION_DENIED".to_owned(),
            code: 4,
            error_type: "USER_ERROR".to_owned(),
            message: "Access Denied: User svc cannot impersonate user root".to_owned(),
        })
    );
}

#[tokio::test]
async fn impersonation_follows_the_rules_and_needs_a_differing_principal() {
    let double = double().await;
    double.set_access_control(Some(rules()));
    let outcome = |principal: Option<&'static str>, user: &'static str| {
        let mut request = statement(&double, user, "SELECT 1");
        if let Some(principal) = principal {
            request = request.basic_auth(principal, Some("secret"));
        }
        async move {
            let last = run(request).await;
            (
                last["stats"]["state"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                last["error"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        }
    };
    let finished = ("FINISHED".to_owned(), String::new());
    let denied = |principal: &str, user: &str| {
        (
            "FAILED".to_owned(),
            format!("Access Denied: User {principal} cannot impersonate user {user}"),
        )
    };
    assert_eq!(outcome(Some("svc"), "analyst-ada").await, finished);
    assert_eq!(outcome(Some("svc"), "root").await, denied("svc", "root"));
    assert_eq!(outcome(Some("svc"), "ada").await, denied("svc", "ada"));
    // `$1` is what `(.*)-admin` captured.
    assert_eq!(outcome(Some("ada-admin"), "ada").await, finished);
    assert_eq!(
        outcome(Some("ada-admin"), "grace").await,
        denied("ada-admin", "grace")
    );
    // No rule matches mallory.
    assert_eq!(
        outcome(Some("mallory"), "ada").await,
        denied("mallory", "ada")
    );
    // Running as oneself is no impersonation; nor is a request without credentials.
    assert_eq!(outcome(Some("mallory"), "mallory").await, finished);
    assert_eq!(outcome(None, "root").await, finished);

    // Typed rules behave the same; an empty list denies every impersonation.
    double.set_impersonation_rules(vec![
        ImpersonationRule::new("svc", "ada", true).expect("a valid rule"),
    ]);
    assert_eq!(outcome(Some("svc"), "ada").await, finished);
    assert_eq!(
        outcome(Some("svc"), "analyst-ada").await,
        denied("svc", "analyst-ada")
    );
    double.set_impersonation_rules(Vec::new());
    assert_eq!(outcome(Some("svc"), "ada").await, denied("svc", "ada"));
    // Without access control (the default), anyone runs as anyone.
    double.set_access_control(None);
    assert_eq!(outcome(Some("svc"), "root").await, finished);
}

#[tokio::test]
async fn bearer_tokens_authenticate_as_their_configured_principal() {
    let double = double().await;
    double.set_bearer_principal("token-1", "svc");
    // Without access control, an unknown token is no principal and no obstacle.
    let last = run(statement(&double, "root", "SELECT 1").bearer_auth("token-unknown")).await;
    assert_eq!(last["stats"]["state"], "FINISHED");

    double.set_access_control(Some(rules()));
    let last = run(statement(&double, "analyst-bo", "SELECT 1").bearer_auth("token-1")).await;
    assert_eq!(last["stats"]["state"], "FINISHED");
    let last = run(statement(&double, "root", "SELECT 1").bearer_auth("token-1")).await;
    assert_eq!(
        last["error"]["message"],
        "Access Denied: User svc cannot impersonate user root"
    );
    let recorded = double.queries();
    assert_eq!(
        recorded
            .iter()
            .map(|query| query.principal.as_deref())
            .collect::<Vec<_>>(),
        [None, Some("svc"), Some("svc")]
    );

    // With access control in force, credentials the double cannot read are refused
    // as by a Trino with an authenticator.
    let response = statement(&double, "root", "SELECT 1")
        .bearer_auth("token-unknown")
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        response
            .headers()
            .get("www-authenticate")
            .and_then(|value| value.to_str().ok()),
        Some("Bearer realm=\"Trino\"")
    );
    let body = response.text().await.expect("a body");
    assert!(body.contains("set_bearer_principal"), "{body}");
    let (status, _) =
        send(statement(&double, "root", "SELECT 1").header("Authorization", "Basic !!")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(double.queries().len(), 3, "refused requests are no queries");
}

#[tokio::test]
async fn every_query_records_who_ran_it_and_how_the_client_labelled_it() {
    let double = double().await;
    let last = run(
        statement(&double, "analyst-ada", "SELECT count(*) FROM orders")
            .basic_auth("svc", Some("pw"))
            .header("X-Trino-Source", "docket-tests")
            .header("X-Trino-Client-Tags", " nightly, export ,,docket")
            .header("X-Trino-Client-Info", "export 42 for ada, café")
            .header("X-Trino-Trace-Token", "trace-7"),
    )
    .await;
    let id = last["id"].as_str().expect("an id");
    let recorded = double.query(id).expect("recorded");
    assert_eq!(recorded.query_id, id);
    assert_eq!(recorded.sql, "SELECT count(*) FROM orders");
    assert_eq!(recorded.user, "analyst-ada");
    assert_eq!(recorded.principal.as_deref(), Some("svc"));
    assert_eq!(recorded.original_user(), "svc");
    assert_eq!(recorded.source.as_deref(), Some("docket-tests"));
    assert_eq!(recorded.client_tags, ["nightly", "export", "docket"]);
    assert_eq!(
        recorded.client_info.as_deref(),
        Some("export 42 for ada, café")
    );
    assert_eq!(recorded.trace_token.as_deref(), Some("trace-7"));
    assert_eq!(recorded.catalog.as_deref(), Some("memory"));
    assert_eq!(recorded.schema.as_deref(), Some("default"));
    assert_eq!(recorded.state, QueryState::Finished);
    assert_eq!(recorded.error, None);
    let started = recorded.started.expect("it ran");
    let ended = recorded.ended.expect("it ended");
    assert!(recorded.created <= started && started <= ended);

    // A failed query records its error; a bare one records no attribution.
    let last = run(statement(&double, "bo", "SELECT * FROM nope")).await;
    let failed = double
        .query(last["id"].as_str().expect("an id"))
        .expect("recorded");
    assert_eq!(failed.state, QueryState::Failed);
    assert_eq!(
        failed.error.as_ref().map(|error| error.name.as_str()),
        Some("TABLE_NOT_FOUND")
    );
    assert_eq!(
        (
            failed.principal,
            failed.source,
            failed.client_tags,
            failed.client_info
        ),
        (None, None, Vec::<String>::new(), None)
    );
    assert!(!double.query(id).expect("recorded").client_tags.is_empty());
    assert_eq!(
        double
            .queries()
            .iter()
            .map(|query| query.user.as_str())
            .collect::<Vec<_>>(),
        ["analyst-ada", "bo"],
        "in the order submitted"
    );
}

#[tokio::test]
async fn system_runtime_queries_shows_the_recorded_queries_as_trino_does() {
    let double = double().await;
    double.set_access_control(Some(rules()));
    let allowed = run(statement(&double, "analyst-ada", "SELECT 1")
        .basic_auth("svc", Some("pw"))
        .header("X-Trino-Source", "docket-tests"))
    .await;
    let allowed = allowed["id"].as_str().expect("an id").to_owned();
    let denied = run(statement(&double, "root", "SELECT 2").basic_auth("svc", Some("pw"))).await;
    let denied = denied["id"].as_str().expect("an id").to_owned();

    let (_, described) = rows(statement(&double, "bo", "DESCRIBE system.runtime.queries")).await;
    let described: Vec<(String, String)> = described
        .iter()
        .map(|row| {
            (
                row[0].as_str().unwrap_or_default().to_owned(),
                row[1].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let timestamp = "timestamp(3) with time zone";
    let expected = [
        ("query_id", "varchar"),
        ("state", "varchar"),
        ("user", "varchar"),
        ("source", "varchar"),
        ("query", "varchar"),
        ("resource_group_id", "array(varchar)"),
        ("queued_time_ms", "bigint"),
        ("analysis_time_ms", "bigint"),
        ("planning_time_ms", "bigint"),
        ("created", timestamp),
        ("started", timestamp),
        ("last_heartbeat", timestamp),
        ("end", timestamp),
        ("error_type", "varchar"),
        ("error_code", "varchar"),
    ];
    assert_eq!(
        described,
        expected
            .iter()
            .map(|(name, kind)| ((*name).to_owned(), (*kind).to_owned()))
            .collect::<Vec<_>>()
    );

    let (columns, found) = rows(statement(
        &double,
        "bo",
        &format!(
            "SELECT query_id, state, user, source, query, resource_group_id, error_type, \
             error_code, created, \"end\" FROM system.runtime.queries \
             WHERE query_id IN ('{allowed}', '{denied}') ORDER BY query_id"
        ),
    ))
    .await;
    assert_eq!(columns[5]["type"], "array(varchar)");
    assert_eq!(columns[5]["typeSignature"]["rawType"], "array");
    assert_eq!(columns[8]["type"], timestamp);
    assert_eq!(
        found
            .iter()
            .map(|row| row.as_array().map(|row| row[..8].to_vec()))
            .collect::<Vec<_>>(),
        [
            Some(vec![
                json!(allowed),
                json!("FINISHED"),
                json!("analyst-ada"),
                json!("docket-tests"),
                json!("SELECT 1"),
                json!(["global"]),
                Value::Null,
                Value::Null,
            ]),
            // Failed at dispatch: never put in a resource group.
            Some(vec![
                json!(denied),
                json!("FAILED"),
                json!("root"),
                Value::Null,
                json!("SELECT 2"),
                Value::Null,
                json!("USER_ERROR"),
                json!("PERMISSION_DENIED"),
            ]),
        ]
    );
    for row in &found {
        for at in [8, 9] {
            let text = row[at].as_str().expect("a timestamp");
            assert!(text.ends_with(" UTC") && text.len() == 27, "{text}");
        }
    }

    // The statement reading the table sees itself running.
    let (_, own) = rows(statement(
        &double,
        "bo",
        "SELECT state, user, query FROM system.runtime.queries WHERE query LIKE '%own-marker%'",
    ))
    .await;
    assert_eq!(
        own,
        [json!([
            "RUNNING",
            "bo",
            "SELECT state, user, query FROM system.runtime.queries WHERE query LIKE '%own-marker%'"
        ])]
    );
    // The session's catalog and schema resolve it by its bare name too.
    let (_, counted) = rows(
        reqwest::Client::new()
            .post(format!("{}/v1/statement", double.url()))
            .header("X-Trino-User", "bo")
            .header("X-Trino-Catalog", "system")
            .header("X-Trino-Schema", "runtime")
            .body("SELECT count(*) FROM queries WHERE state = 'FINISHED'"),
    )
    .await;
    assert_eq!(counted, [json!([4])]);
}

#[tokio::test]
async fn get_v1_query_serves_the_session_as_trinos_query_info() {
    let double = double().await;
    let last = run(statement(&double, "analyst-ada", "SELECT 1")
        .basic_auth("svc", Some("pw"))
        .header("X-Trino-Source", "docket-tests")
        .header("X-Trino-Client-Tags", "a,b")
        .header("X-Trino-Client-Info", "info")
        .header("X-Trino-Trace-Token", "trace"))
    .await;
    let id = last["id"].as_str().expect("an id");
    let (status, body) = get(&format!("{}/v1/query/{id}", double.url())).await;
    assert_eq!(status, StatusCode::OK);
    let info = document(&body);
    assert_eq!(info["queryId"], id);
    assert_eq!(info["state"], "FINISHED");
    assert_eq!(info["query"], "SELECT 1");
    assert_eq!(
        info["session"],
        json!({
            "queryId": id,
            "user": "analyst-ada",
            "originalUser": "svc",
            "principal": "svc",
            "source": "docket-tests",
            "catalog": "memory",
            "schema": "default",
            "traceToken": "trace",
            "clientInfo": "info",
            "clientTags": ["a", "b"],
        })
    );
    assert!(info.get("errorCode").is_none(), "{info}");
    let (status, _) = get(&format!(
        "{}/v1/query/20260101_000000_99999_zzzzz",
        double.url()
    ))
    .await;
    assert_eq!(status, StatusCode::GONE);
}

/// `--access-control-rules FILE` makes the binary enforce the file; a file it
/// cannot use stops it with the reason.
#[tokio::test]
async fn the_binary_enforces_an_access_control_rules_file() {
    let directory = std::env::temp_dir().join(format!(
        "docket-trino-double-rules-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&directory).expect("a directory");
    let rules = directory.join("rules.json");
    std::fs::write(&rules, RULES).expect("written");
    let bad = directory.join("bad.json");
    std::fs::write(&bad, r#"{"impersonation": [{"original_user": "("}]}"#).expect("written");

    let refused = Command::new(env!("CARGO_BIN_EXE_docket_trino_double"))
        .arg("--access-control-rules")
        .arg(&bad)
        .output()
        .expect("the binary runs");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("`new_user` is required"), "{stderr}");

    let mut child = Command::new(env!("CARGO_BIN_EXE_docket_trino_double"))
        .args(["--listen", "127.0.0.1:0", "--access-control-rules"])
        .arg(&rules)
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
    let url = line.trim().strip_prefix("listening on ").map(str::to_owned);
    let outcome = match &url {
        Some(url) => {
            let client = reqwest::Client::new();
            let request = |user: &str| {
                client
                    .post(format!("{url}/v1/statement"))
                    .header("X-Trino-User", user)
                    .basic_auth("svc", Some("pw"))
                    .body("SELECT 1")
            };
            Some((
                run(request("analyst-bo")).await["stats"]["state"].clone(),
                run(request("root")).await["error"]["errorName"].clone(),
            ))
        }
        None => None,
    };
    child.kill().expect("the double stops");
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&directory);
    assert_eq!(
        outcome,
        Some((json!("FINISHED"), json!("PERMISSION_DENIED"))),
        "{line:?}"
    );
}
