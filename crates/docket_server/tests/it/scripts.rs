//! Managed scripts through the server, on SQLite and PostgreSQL, with the Trino
//! double and files in a temporary folder: a script in the original
//! platform's documentation style (query, loop over rows, export) runs
//! unchanged; its tool calls go through the pipeline as `script:<id>` with
//! its source author's roles and are audited with the run id, and the run gets one
//! audit row; owners and administrators only (others learn nothing);
//! syntax errors refused at save with their line; script errors; cancel by
//! `cancel_run` and by `tasks/cancel`; `run_script` refused inside a run; and a
//! run read as its task (`CreateTaskResult` with the run id, `working` with its
//! status message, the same result as a direct run, `ttlMs` null until it
//! ends, the one "Unknown task" answer for others).

use std::sync::Arc;
use std::time::Duration;

use docket_server::config::Config;
use docket_storage::test_db::TestDatabase;
use docket_task::TaskStore;
use docket_trino_double::TrinoDouble;
use serde_json::{Value, json};

use crate::support::{Backend, StoredServer, TASKS, TestServer, key_of, on_both_backends, users};

/// The original documentation's kind of script: query, loop over the rows,
/// print, export.
const REPORT: &str = r#"
result = platform.query(
    "SELECT orderstatus, count(*) AS orders FROM memory.default.orders WHERE orderstatus <> :skip GROUP BY orderstatus ORDER BY orderstatus",
    params={"skip": run.params["skip"]},
)
summary = []
for row in result["rows"]:
    print(row["orderstatus"], row["orders"])
    summary.append({"status": row["orderstatus"], "orders": row["orders"]})
platform.export("order-status", summary, "csv")
"#;

/// Loops until cancelled: each of its ten million steps scans a list of 1 000, so the run
/// lasts minutes on its step budget while its heap stays flat. (A growing sum would not:
/// past 2^31 every step allocates an integer, and the run ends on the 256 MiB heap limit
/// within a second, racing whatever the test does next.)
const BUSY: &str =
    "a = list(range(1000))\nfor i in range(10000000):\n    if -1 in a:\n        pass\n";

struct Fixture {
    server: TestServer,
    audit: Arc<dyn TaskStore>,
    _double: TrinoDouble,
    _database: TestDatabase,
    _files: std::path::PathBuf,
}

on_both_backends!(
    a_documentation_style_script_runs_unchanged_through_the_pipeline,
    scripts_belong_to_their_owner_and_administrators,
    a_script_that_does_not_parse_is_refused_with_its_line,
    script_errors_end_the_run_failed_and_are_not_retried,
    cancel_run_stops_a_busy_script,
    run_script_is_refused_inside_a_run,
    a_run_is_its_task,
    a_draft_runs_as_its_caller_and_saves_nothing,
    an_administrators_metadata_edit_keeps_the_owners_roles,
    same_named_scripts_of_two_owners_share_nothing,
    text_that_is_no_id_reads_as_an_unknown_id,
    platform_info_lists_the_script_tools,
    a_draining_replica_refuses_every_task_capable_tool_alike,
    every_script_tool_answers_unavailable_while_the_run_store_is_down,
    a_task_that_is_not_yours_takes_the_path_of_one_that_does_not_exist,
    a_run_of_an_owner_who_is_gone_does_not_start,
    a_prompt_made_by_a_run_is_its_owners_and_counts_against_their_cap,
    owners_are_capped_and_share_the_workers,
);

async fn fixture(backend: Backend) -> Option<Fixture> {
    let double = TrinoDouble::start().await.expect("double");
    let yaml = format!(
        "connections:\n  warehouse: {{ kind: trino, url: \"{}\", user: docket, catalog: memory, schema: default }}\n\
         tasks: {{ heartbeat_interval: 100ms }}\n\
         scripts: {{ heartbeat_interval: 100ms, lease: 5s }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n",
        double.url()
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[
        ("alice", &["analyst"]),
        ("bob", &["analyst"]),
        ("root", &["admin"]),
    ]);
    let database = backend.database().await?;
    let stored = StoredServer::start(config, &database, true).await;
    Some(Fixture {
        server: stored.server,
        audit: stored.store.task_store(),
        _double: double,
        _database: database,
        _files: stored.files,
    })
}

impl Fixture {
    async fn request(&self, user: &str, method: &str, params: Value, tasks: bool) -> Value {
        let capabilities = if tasks {
            json!({"extensions": {TASKS: {}}})
        } else {
            json!({})
        };
        let (_, body) = self
            .server
            .rpc(method, params)
            .capabilities(capabilities)
            .header("x-api-key", &key_of(user))
            .send()
            .await;
        body
    }

    /// A direct call's `CallToolResult`.
    async fn call(&self, user: &str, tool: &str, arguments: Value) -> Value {
        let body = self
            .request(
                user,
                "tools/call",
                json!({"name": tool, "arguments": arguments}),
                false,
            )
            .await;
        body.get("result").cloned().unwrap_or(body)
    }

    async fn create(&self, user: &str, name: &str, source: &str) -> Value {
        self.call(
            user,
            "manage_script",
            json!({"command": "create", "name": name, "source": source,
                   "params": [{"name": "skip", "type": "string", "default": "X"}]}),
        )
        .await
    }

    /// `tasks/list` in a 2025-11-25 session of `user`: each task's id and status.
    async fn legacy_task_list(&self, user: &str) -> Vec<(String, String)> {
        let post = |session: Option<&str>, message: Value| {
            let mut request = self
                .server
                .http
                .post(self.server.url("/mcp"))
                .header("accept", "application/json, text/event-stream")
                .header("x-api-key", key_of(user))
                .json(&message);
            if let Some(session) = session {
                request = request
                    .header("mcp-session-id", session)
                    .header("mcp-protocol-version", "2025-11-25");
            }
            request.send()
        };
        let opened = post(
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {"tasks": {}},
                "clientInfo": {"name": "scripts-tests", "version": "0"}}}),
        )
        .await
        .expect("initialize");
        let session = opened
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .expect("a session")
            .to_owned();
        let listed: Value = post(
            Some(&session),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/list"}),
        )
        .await
        .expect("tasks/list")
        .json()
        .await
        .expect("json");
        listed["result"]["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("tasks: {listed}"))
            .iter()
            .map(|task| {
                (
                    task["taskId"].as_str().unwrap_or_default().to_owned(),
                    task["status"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    async fn task(&self, user: &str, task_id: &str) -> Value {
        self.request(user, "tasks/get", json!({"taskId": task_id}), true)
            .await
    }

    async fn wait_task(&self, user: &str, task_id: &str, status: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let task = self.task(user, task_id).await;
            if task["result"]["status"] == status {
                return task["result"].clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the task never became {status}: {task}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn wait_run(&self, user: &str, run_id: &str, status: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let run = self.call(user, "get_run", json!({"run_id": run_id})).await;
            if run["structuredContent"]["status"] == status {
                return run;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the run never became {status}: {run}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The audit rows of `tool` that carry `run_id`, once there is one (they
    /// are written in the background when the call or the run ends).
    async fn audit_rows(&self, tool: &str, run_id: &str) -> Vec<docket_task::store::AuditEntry> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let rows: Vec<_> = self
                .audit
                .audit_for_tool(tool, 100)
                .await
                .expect("audit")
                .into_iter()
                .filter(|row| row.context.arguments.get("run_id") == Some(&json!(run_id)))
                .collect();
            if !rows.is_empty() {
                return rows;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no audit rows for {tool}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn a_documentation_style_script_runs_unchanged_through_the_pipeline(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let saved = f.create("alice", "order-report", REPORT).await;
    assert_eq!(saved["isError"], Value::Null, "{saved}");
    let result = f
        .call(
            "alice",
            "run_script",
            json!({"name": "order-report", "args": {"skip": "P"}}),
        )
        .await;
    let run = &result["structuredContent"];
    assert_eq!(run["status"], "succeeded", "{result}");
    assert_eq!(
        result["content"][0]["text"]
            .as_str()
            .map(|text| serde_json::from_str::<Value>(text).expect("json")),
        Some(run.clone())
    );
    assert_eq!(run["queries"], 1);
    assert_eq!(run["outputs"].as_array().map(Vec::len), Some(1));
    assert_eq!(run["outputs"][0]["name"], "order-status");
    // What the run made belongs to the script's owner, who ran it.
    assert_eq!(run["outputs"][0]["owner"], "apikey:alice");
    let script_id = saved["structuredContent"]["script"]["id"]
        .as_str()
        .expect("script id");
    assert_eq!(run["script_id"], script_id);
    let log = run["log"].as_str().expect("log");
    assert!(log.contains('F') && log.contains('O'), "{log}");
    assert!(!log.contains("P "), "the parameter was bound: {log}");
    let run_id = run["run_id"].as_str().expect("run id");

    // The query went through the pipeline as the script, audited with the run id.
    let queries = f.audit_rows("trino_query", run_id).await;
    assert_eq!(queries[0].subject, format!("script:{script_id}"));
    assert_eq!(queries[0].context.persona.as_deref(), Some("analyst"));
    assert_eq!(queries[0].context.arguments["run_id"], json!(run_id));
    // And the run itself has one row.
    let mine = f.audit_rows("run_script", run_id).await;
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].outcome, "completed");

    // Its export is reachable by whoever may follow the run: the download URL
    // works for alice, list_assets and get_asset show it; to bob it does not
    // exist; an administrator sees it.
    let asset_id = run["outputs"][0]["asset_id"].as_str().expect("asset id");
    assert!(
        run["outputs"][0]["download_url"]
            .as_str()
            .is_some_and(|url| url.contains(&format!("/assets/{asset_id}/content?expires=")))
    );
    let download = f.server.download_as("alice", asset_id).await;
    assert_eq!(download.status(), 200);
    assert!(download.text().await.expect("body").contains("status"));
    let listed = f.call("alice", "list_assets", json!({})).await;
    let ids: Vec<&Value> = listed["structuredContent"]["assets"]
        .as_array()
        .expect("assets")
        .iter()
        .map(|asset| &asset["asset_id"])
        .collect();
    assert_eq!(ids, vec![&json!(asset_id)]);
    let got = f
        .call("alice", "get_asset", json!({"asset_id": asset_id}))
        .await;
    assert_eq!(got["structuredContent"]["asset_id"], asset_id, "{got}");
    assert!(
        got["structuredContent"]["description"]
            .as_str()
            .is_some_and(|text| text.contains(run_id) && text.contains("order-report")),
        "{got}"
    );
    assert_eq!(f.server.download_as("bob", asset_id).await.status(), 404);
    let hidden = f
        .call("bob", "get_asset", json!({"asset_id": asset_id}))
        .await;
    let unknown = f
        .call("bob", "get_asset", json!({"asset_id": "no-such-asset"}))
        .await;
    assert_eq!(hidden["isError"], true);
    assert_eq!(
        hidden["content"][0]["text"]
            .as_str()
            .map(|text| text.replace(asset_id, "no-such-asset")),
        unknown["content"][0]["text"].as_str().map(str::to_owned)
    );
    assert_eq!(f.server.download_as("root", asset_id).await.status(), 200);
}

/// Prints who the run is, as `platform_info` tells it.
const WHO: &str = r#"
info = platform.call("platform_info", {})
print(info["identity"]["subject"], info["identity"]["name"], info["persona"], info["is_admin"])
"#;

/// The log of a direct run of `name` by `user` (an administrator names the owner).
async fn run_log(f: &Fixture, user: &str, arguments: Value) -> String {
    let result = f.call(user, "run_script", arguments).await;
    assert_eq!(
        result["structuredContent"]["status"], "succeeded",
        "{result}"
    );
    result["structuredContent"]["log"]
        .as_str()
        .expect("log")
        .trim()
        .to_owned()
}

async fn an_administrators_metadata_edit_keeps_the_owners_roles(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let saved = f.create("alice", "who", WHO).await;
    let id = saved["structuredContent"]["script"]["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let as_alice = format!("script:{id} script:apikey:alice/who analyst False");
    assert_eq!(run_log(&f, "alice", json!({"name": "who"})).await, as_alice);

    // An administrator changes only the description and enabled flag: a new
    // version whose author (and roles) are still alice's.
    for change in [
        json!({"description": "described by root", "enabled": false}),
        json!({"enabled": true, "source": WHO}),
    ] {
        let mut arguments = json!({"command": "update", "name": "who", "owner": "apikey:alice"});
        arguments
            .as_object_mut()
            .expect("object")
            .extend(change.as_object().expect("object").clone());
        let updated = f.call("root", "manage_script", arguments).await;
        assert_eq!(
            updated["structuredContent"]["author"], "apikey:alice",
            "{updated}"
        );
        assert!(
            updated["structuredContent"]["message"]
                .as_str()
                .is_some_and(
                    |text| text.starts_with("Saved as version") && !text.contains("author")
                ),
            "{updated}"
        );
    }
    assert_eq!(run_log(&f, "alice", json!({"name": "who"})).await, as_alice);
    assert_eq!(
        run_log(&f, "root", json!({"name": "who", "owner": "apikey:alice"})).await,
        as_alice,
        "whoever starts it, the run acts with its source author's roles"
    );

    // Editing the source makes the administrator its author, and says so.
    let edited = f
        .call(
            "root",
            "manage_script",
            json!({"command": "update", "name": "who", "owner": "apikey:alice",
                   "source": format!("{WHO}\nprint('edited')")}),
        )
        .await;
    assert_eq!(
        edited["structuredContent"]["author"], "apikey:root",
        "{edited}"
    );
    assert!(
        edited["structuredContent"]["message"]
            .as_str()
            .is_some_and(|text| text.contains("You are now the author of version 4")),
        "{edited}"
    );
    // Its runs act with the roles root and alice both hold: none, so the
    // administrator's tools are not handed to alice's script.
    let narrowed = f.call("alice", "run_script", json!({"name": "who"})).await;
    assert_eq!(
        narrowed["structuredContent"]["status"], "failed",
        "{narrowed}"
    );
    assert!(
        narrowed["structuredContent"]["error"]
            .as_str()
            .is_some_and(|error| error.contains("platform_info")),
        "{narrowed}"
    );

    // A patch is a save like any other and says the same.
    let patched = f
        .call(
            "root",
            "manage_script",
            json!({"command": "patch", "name": "who", "owner": "apikey:alice",
                   "edits": [{"op": "append", "text": "# reviewed\n"}]}),
        )
        .await;
    assert_eq!(
        patched["structuredContent"]["author"], "apikey:root",
        "{patched}"
    );
    assert!(
        patched["structuredContent"]["message"]
            .as_str()
            .is_some_and(|text| text.contains("You are now the author of version 5")),
        "{patched}"
    );
}

/// Exports one row, then counts the assets the run can see.
const SAME_NAME: &str = r#"
platform.export("made-by-" + run.params["skip"], [{"a": 1}], "csv")
print(platform.call("platform_info", {})["identity"]["subject"], len(platform.call("list_assets", {})["assets"]))
"#;

async fn same_named_scripts_of_two_owners_share_nothing(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let mut subjects = Vec::new();
    for user in ["alice", "bob"] {
        let saved = f.create(user, "report", SAME_NAME).await;
        let id = saved["structuredContent"]["script"]["id"]
            .as_str()
            .expect("id");
        let log = run_log(&f, user, json!({"name": "report", "args": {"skip": user}})).await;
        assert_eq!(
            log,
            format!("script:{id} 1"),
            "{user}'s run sees only its own asset"
        );
        subjects.push(log);
    }
    assert_ne!(subjects[0], subjects[1]);
    for user in ["alice", "bob"] {
        let listed = f.call(user, "list_assets", json!({})).await;
        let names: Vec<&Value> = listed["structuredContent"]["assets"]
            .as_array()
            .expect("assets")
            .iter()
            .map(|asset| &asset["name"])
            .collect();
        assert_eq!(names, vec![&json!(format!("made-by-{user}"))]);
    }
}

async fn scripts_belong_to_their_owner_and_administrators(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    f.create("alice", "mine", "print('hi')").await;
    let not_found = f
        .call(
            "bob",
            "manage_script",
            json!({"command": "get", "name": "mine"}),
        )
        .await;
    assert_eq!(not_found["isError"], true);
    assert!(
        not_found["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("script \"mine\" not found"))
    );
    let by_owner = f
        .call(
            "bob",
            "manage_script",
            json!({"command": "get", "name": "mine", "owner": "apikey:alice"}),
        )
        .await;
    assert_eq!(
        by_owner["content"], not_found["content"],
        "others learn nothing"
    );
    let refused = f.call("bob", "run_script", json!({"name": "mine"})).await;
    assert_eq!(refused["content"], not_found["content"]);
    let admin = f
        .call(
            "root",
            "manage_script",
            json!({"command": "get", "name": "mine", "owner": "apikey:alice"}),
        )
        .await;
    assert_eq!(admin["structuredContent"]["source"], "print('hi')");

    let run = f.call("alice", "run_script", json!({"name": "mine"})).await;
    let run_id = run["structuredContent"]["run_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let hidden = f.call("bob", "get_run", json!({"run_id": run_id})).await;
    let unknown = f
        .call(
            "bob",
            "get_run",
            json!({"run_id": "0123456789abcdef0123456789abcdef"}),
        )
        .await;
    assert_eq!(
        hidden, unknown,
        "a run that is not yours reads like one that does not exist"
    );
    assert_eq!(
        f.call("bob", "cancel_run", json!({"run_id": run_id})).await,
        unknown
    );
    let read = f.call("root", "get_run", json!({"run_id": run_id})).await;
    assert_eq!(read["structuredContent"]["requested_by"], "apikey:alice");
    let listed = f.call("bob", "list_runs", json!({})).await;
    assert_eq!(listed["structuredContent"]["count"], 0);
    let listed = f.call("alice", "list_runs", json!({"name": "mine"})).await;
    assert_eq!(listed["structuredContent"]["count"], 1);
    let scripts = f
        .call("bob", "manage_script", json!({"command": "list"}))
        .await;
    assert_eq!(scripts["structuredContent"]["count"], 0);
}

async fn a_script_that_does_not_parse_is_refused_with_its_line(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let refused = f.create("alice", "broken", "x = 1\ny = (\n").await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused["structuredContent"]["error"]["line"].is_u64(),
        "{refused}"
    );
    let gone = f
        .call(
            "alice",
            "manage_script",
            json!({"command": "get", "name": "broken"}),
        )
        .await;
    assert_eq!(gone["isError"], true, "nothing was saved");
    f.create("alice", "fine", "print(1)").await;
    let update = f
        .call(
            "alice",
            "manage_script",
            json!({"command": "update", "name": "fine", "source": "for x in"}),
        )
        .await;
    assert_eq!(update["isError"], true);
    let valid = f
        .call(
            "alice",
            "manage_script",
            json!({"command": "validate", "source": "print(2)"}),
        )
        .await;
    assert_eq!(valid["structuredContent"]["valid"], true);
}

async fn script_errors_end_the_run_failed_and_are_not_retried(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    f.create("alice", "fails", "print('before')\nx = 1 // 0\n")
        .await;
    let result = f
        .call("alice", "run_script", json!({"name": "fails"}))
        .await;
    assert_eq!(result["isError"], true, "{result}");
    let run = &result["structuredContent"];
    assert_eq!(run["status"], "failed");
    assert_eq!(run["retryable"], false);
    assert_eq!(run["attempt"], 1);
    assert!(
        run["log"]
            .as_str()
            .is_some_and(|log| log.contains("before"))
    );
    assert!(run["error"].as_str().is_some_and(|error| !error.is_empty()));
}

async fn cancel_run_stops_a_busy_script(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    f.create("alice", "busy", BUSY).await;
    let started = f
        .call(
            "alice",
            "run_script",
            json!({"name": "busy", "wait_seconds": -1}),
        )
        .await;
    let run_id = started["structuredContent"]["run_id"]
        .as_str()
        .expect("id")
        .to_owned();
    f.wait_run("alice", &run_id, "running").await;
    let pending = f
        .call(
            "alice",
            "run_script",
            json!({"name": "busy", "wait_seconds": 1}),
        )
        .await;
    assert_eq!(pending["isError"], Value::Null, "{pending}");
    assert!(
        pending["structuredContent"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("continues in the background")),
        "a run still going after wait_seconds answers its pending state: {pending}"
    );
    let second = pending["structuredContent"]["run_id"]
        .as_str()
        .expect("id")
        .to_owned();
    f.call("alice", "cancel_run", json!({"run_id": second}))
        .await;
    let cancelled = f
        .call("alice", "cancel_run", json!({"run_id": run_id}))
        .await;
    assert_eq!(cancelled["isError"], Value::Null, "{cancelled}");
    let ended = f.wait_run("alice", &run_id, "cancelled").await;
    assert_eq!(ended["structuredContent"]["status"], "cancelled");
    let again = f
        .call("alice", "cancel_run", json!({"run_id": run_id}))
        .await;
    assert_eq!(
        again["structuredContent"]["status"], "cancelled",
        "an ended run keeps its outcome"
    );
    let rows = f.audit_rows("run_script", &run_id).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].outcome, "cancelled");
}

async fn run_script_is_refused_inside_a_run(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    f.create("alice", "target", "print(1)").await;
    f.create(
        "alice",
        "nested",
        "platform.call('run_script', {'name': 'target'})",
    )
    .await;
    let result = f
        .call("alice", "run_script", json!({"name": "nested"}))
        .await;
    let run = &result["structuredContent"];
    assert_eq!(run["status"], "failed", "{result}");
    assert!(
        run["error"]
            .as_str()
            .is_some_and(|error| error.contains("cannot be called from inside a script run")),
        "{result}"
    );
    f.create(
        "alice",
        "author",
        "platform.call('manage_script', {'command': 'create', 'name': 'x', 'source': 'print(1)'})",
    )
    .await;
    let result = f
        .call("alice", "run_script", json!({"name": "author"}))
        .await;
    assert!(
        result["structuredContent"]["error"]
            .as_str()
            .is_some_and(|error| error.contains("never change what exists")),
        "{result}"
    );
    // Patching and scheduling change what will execute: refused too; reading is not.
    for (name, call) in [
        (
            "patcher",
            "platform.call('manage_script', {'command': 'patch', 'name': 'target', 'edits': [{'op': 'append', 'text': 'print(2)'}]})",
        ),
        (
            "scheduler",
            "platform.call('manage_script', {'command': 'schedule_set', 'name': 'target', 'cron': '* * * * *'})",
        ),
        (
            "unscheduler",
            "platform.call('manage_script', {'command': 'schedule_disable', 'name': 'target'})",
        ),
    ] {
        f.create("alice", name, call).await;
        let result = f.call("alice", "run_script", json!({"name": name})).await;
        assert!(
            result["structuredContent"]["error"]
                .as_str()
                .is_some_and(|error| error.contains("never change what exists")),
            "{name}: {result}"
        );
    }
    f.create(
        "alice",
        "reader",
        "print(len(platform.call('manage_script', {'command': 'help'})['commands']))",
    )
    .await;
    let result = f
        .call("alice", "run_script", json!({"name": "reader"}))
        .await;
    assert_eq!(
        result["structuredContent"]["status"], "succeeded",
        "{result}"
    );
}

async fn a_run_is_its_task(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    f.create("alice", "report", REPORT).await;
    let created = f
        .request(
            "alice",
            "tools/call",
            json!({"name": "run_script", "arguments": {"name": "report"}}),
            true,
        )
        .await;
    let task = &created["result"];
    assert_eq!(task["resultType"], "task", "{created}");
    let task_id = task["taskId"].as_str().expect("task id").to_owned();
    // A run's task id is its run id, which names the runs: `run_` and 32 hex digits.
    assert!(
        task_id
            .strip_prefix("run_")
            .is_some_and(|digits| digits.len() == 32),
        "{task_id}"
    );
    assert_eq!(task["status"], "working");
    assert_eq!(
        task["ttlMs"],
        Value::Null,
        "unlimited while the run is unfinished"
    );
    let completed = f.wait_task("alice", &task_id, "completed").await;
    assert!(completed["ttlMs"].is_u64(), "{completed}");
    let result = &completed["result"];
    assert_eq!(
        result["structuredContent"]["run_id"],
        json!(task_id),
        "the task id is the run id"
    );
    let direct = f.call("alice", "get_run", json!({"run_id": task_id})).await;
    assert_eq!(
        result["structuredContent"]["status"],
        direct["structuredContent"]["status"]
    );
    assert_eq!(
        result["structuredContent"]["outputs"],
        direct["structuredContent"]["outputs"]
    );

    // Nothing is stored in the task table for a run: the id is only a run.
    // Others get exactly the unknown-task answer.
    let bob = f.task("bob", &task_id).await;
    let unknown = f.task("bob", "0123456789abcdef0123456789abcdef").await;
    assert_eq!(bob, unknown);
    assert_eq!(bob["error"]["message"], "Unknown task");
    let root = f.task("root", &task_id).await;
    assert_eq!(root["result"]["status"], "completed");

    // The script's owner follows a run an administrator started.
    let by_admin = f
        .request(
            "root",
            "tools/call",
            json!({"name": "run_script", "arguments": {"name": "report", "owner": "apikey:alice"}}),
            true,
        )
        .await;
    let admin_run = by_admin["result"]["taskId"]
        .as_str()
        .expect("id")
        .to_owned();
    f.wait_task("alice", &admin_run, "completed").await;
    assert_eq!(f.task("bob", &admin_run).await, unknown);

    // A script error completes with isError; a cancel ends cancelled.
    f.create("alice", "fails", "x = 1 // 0").await;
    let created = f
        .request(
            "alice",
            "tools/call",
            json!({"name": "run_script", "arguments": {"name": "fails"}}),
            true,
        )
        .await;
    let failed_id = created["result"]["taskId"].as_str().expect("id").to_owned();
    let failed = f.wait_task("alice", &failed_id, "completed").await;
    assert_eq!(failed["result"]["isError"], true);

    f.create("alice", "busy", BUSY).await;
    let created = f
        .request(
            "alice",
            "tools/call",
            json!({"name": "run_script", "arguments": {"name": "busy"}}),
            true,
        )
        .await;
    let busy_id = created["result"]["taskId"].as_str().expect("id").to_owned();
    let working = f.wait_task("alice", &busy_id, "working").await;
    assert!(working["statusMessage"].is_string());
    let updated = f
        .request(
            "alice",
            "tasks/update",
            json!({"taskId": busy_id, "inputResponses": {}}),
            true,
        )
        .await;
    assert_eq!(
        updated["result"]["resultType"], "complete",
        "a run's task acknowledges updates: {updated}"
    );
    let acknowledged = f
        .request("alice", "tasks/cancel", json!({"taskId": busy_id}), true)
        .await;
    assert_eq!(
        acknowledged["result"]["resultType"], "complete",
        "{acknowledged}"
    );
    let cancelled = f.wait_task("alice", &busy_id, "cancelled").await;
    assert!(cancelled.get("result").is_none());
    let run = f.call("alice", "get_run", json!({"run_id": busy_id})).await;
    assert_eq!(run["structuredContent"]["status"], "cancelled");

    // A 2025-11-25 session lists runs as tasks: the caller's, and those of
    // scripts it owns that others started; nobody else's.
    let listed = f.legacy_task_list("alice").await;
    for id in [&task_id, &admin_run, &failed_id, &busy_id] {
        assert!(
            listed.iter().any(|(listed, _)| listed == id),
            "{id} in {listed:?}"
        );
    }
    assert!(
        listed
            .iter()
            .any(|(id, status)| id == &busy_id && status == "cancelled")
    );
    assert!(
        listed
            .iter()
            .any(|(id, status)| id == &task_id && status == "completed")
    );
    let bobs = f.legacy_task_list("bob").await;
    assert!(
        bobs.iter()
            .all(|(id, _)| !listed.iter().any(|(mine, _)| mine == id)),
        "{bobs:?}"
    );

    // A refusal is answered directly and leaves no run behind.
    let refused = f
        .request(
            "bob",
            "tools/call",
            json!({"name": "run_script", "arguments": {"name": "report"}}),
            true,
        )
        .await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
}

async fn a_draft_runs_as_its_caller_and_saves_nothing(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let draft = f
        .call(
            "alice",
            "manage_script",
            json!({"command": "run_draft", "source": "me = platform.call('platform_info', {})\nprint(run.params['n'])",
                   "params": [{"name": "n", "type": "int", "required": true}], "args": {"n": 7}}),
        )
        .await;
    let result = &draft["structuredContent"];
    assert_eq!(result["status"], "succeeded", "{draft}");
    assert_eq!(result["log"], "7\n");
    assert_eq!(result["tool_calls"], 1);
    let listed = f.call("alice", "list_runs", json!({})).await;
    assert_eq!(
        listed["structuredContent"]["count"], 0,
        "a draft is not a run"
    );
    let missing = f
        .call(
            "alice",
            "manage_script",
            json!({"command": "run_draft", "source": "print(run.params['n'])",
                   "params": [{"name": "n", "type": "int", "required": true}]}),
        )
        .await;
    assert_eq!(missing["isError"], true, "{missing}");
}

/// An id with a NUL byte (or any other shape Docket never mints) is answered
/// exactly as an unknown id, without reaching the database.
async fn text_that_is_no_id_reads_as_an_unknown_id(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let unknown = "0123456789abcdef0123456789abcdef";
    for bad in ["\u{0}abc", "0123456789abcdef0123456789abcde\u{0}", "../etc"] {
        let task = f
            .request("alice", "tasks/get", json!({"taskId": bad}), true)
            .await;
        let expected = f
            .request("alice", "tasks/get", json!({"taskId": unknown}), true)
            .await;
        assert_eq!(task["error"], expected["error"], "{bad:?}: {task}");
        assert_eq!(task["error"]["message"], "Unknown task");
        let run = f.call("alice", "get_run", json!({"run_id": bad})).await;
        let expected = f.call("alice", "get_run", json!({"run_id": unknown})).await;
        assert_eq!(run, expected, "{bad:?}");
        let asset = f.call("alice", "get_asset", json!({"asset_id": bad})).await;
        let expected = f
            .call("alice", "get_asset", json!({"asset_id": unknown}))
            .await;
        assert_eq!(asset["isError"], true, "{bad:?}: {asset}");
        assert_eq!(
            asset["structuredContent"]["error"]["code"].clone(),
            expected["structuredContent"]["error"]["code"].clone(),
            "{bad:?}: {asset}"
        );
    }
}

async fn platform_info_lists_the_script_tools(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let info = f.call("alice", "platform_info", json!({})).await;
    let tools = info["structuredContent"]["tools"]
        .as_array()
        .expect("tools");
    for tool in [
        "manage_script",
        "run_script",
        "get_run",
        "list_runs",
        "cancel_run",
        "platform_info",
        "list_connections",
        "trino_query",
    ] {
        assert!(
            tools.contains(&json!(tool)),
            "{tool} missing from {tools:?}"
        );
    }
}

/// While the replica drains, no task-capable tool starts new work, as a task or
/// directly, and each refuses the same way; other tools still answer.
async fn a_draining_replica_refuses_every_task_capable_tool_alike(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    f.create("alice", "mine", "print('hi')").await;
    f.server.app.start_draining();
    let mut refusals = Vec::new();
    for (tool, arguments) in [
        ("run_script", json!({"name": "mine"})),
        (
            "trino_export",
            json!({"sql": "SELECT 1", "format": "csv", "name": "x"}),
        ),
    ] {
        for tasks in [true, false] {
            let body = f
                .request(
                    "alice",
                    "tools/call",
                    json!({"name": tool, "arguments": arguments}),
                    tasks,
                )
                .await;
            assert!(body.get("result").is_none(), "{tool}: {body}");
            refusals.push(body["error"].clone());
        }
    }
    assert!(
        refusals.iter().all(|error| *error == refusals[0]
            && error["message"]
                .as_str()
                .is_some_and(|message| message.contains("shutting down"))),
        "{refusals:?}"
    );
    let listed = f.call("alice", "list_runs", json!({})).await;
    assert_eq!(listed["structuredContent"]["count"], 0, "{listed}");
}

/// While the script store is unavailable, every script tool and a run's task
/// answer a clear "unavailable" (no panic, nothing half-written); once it is back,
/// the same script runs.
async fn every_script_tool_answers_unavailable_while_the_run_store_is_down(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let store = database.connect().await;
    let flaky = Arc::new(docket_catalog::scripts::testing::FlakyScripts::new(
        store.script_store(),
    ));
    let mut config = Config::from_yaml(
        "tasks: { heartbeat_interval: 100ms }\nscripts: { heartbeat_interval: 100ms, lease: 5s }\n",
        &|_| None,
    )
    .expect("config");
    config.auth = users(&[("alice", &["admin"])]);
    let app = docket_server::App::builder(config)
        .task_store(store.task_store())
        .scripts(Arc::clone(&flaky) as Arc<dyn docket_catalog::ScriptStore>)
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    let call = |tool: &'static str, arguments: Value, tasks: bool| {
        let capabilities = if tasks {
            json!({"extensions": {TASKS: {}}})
        } else {
            json!({})
        };
        server.call_as("alice", tool, arguments, capabilities)
    };
    let saved = call(
        "manage_script",
        json!({"command": "create", "name": "mine", "source": "print('hi')"}),
        false,
    )
    .await;
    assert_eq!(saved["result"]["isError"], Value::Null, "{saved}");
    let ran = call("run_script", json!({"name": "mine"}), false).await;
    let run_id = ran["result"]["structuredContent"]["run_id"]
        .as_str()
        .expect("run id")
        .to_owned();

    flaky.set_failing(true);
    let unavailable = |answer: &Value| {
        let text = answer.to_string();
        text.contains("unavailable") && !text.contains("panicked")
    };
    for (tool, arguments, tasks) in [
        (
            "manage_script",
            json!({"command": "get", "name": "mine"}),
            false,
        ),
        ("manage_script", json!({"command": "list"}), false),
        (
            "manage_script",
            json!({"command": "update", "name": "mine", "description": "x"}),
            false,
        ),
        (
            "manage_script",
            json!({"command": "delete", "name": "mine"}),
            false,
        ),
        ("run_script", json!({"name": "mine"}), false),
        ("run_script", json!({"name": "mine"}), true),
        ("get_run", json!({"run_id": run_id}), false),
        ("list_runs", json!({}), false),
        ("cancel_run", json!({"run_id": run_id}), false),
    ] {
        let answer = call(tool, arguments.clone(), tasks).await;
        assert!(unavailable(&answer), "{tool} {arguments}: {answer}");
    }
    let (_, task) = server
        .rpc("tasks/get", json!({"taskId": run_id}))
        .capabilities(json!({"extensions": {TASKS: {}}}))
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert!(unavailable(&task), "{task}");

    flaky.set_failing(false);
    let again = call("run_script", json!({"name": "mine"}), false).await;
    assert_eq!(
        again["result"]["structuredContent"]["status"], "succeeded",
        "{again}"
    );
}

/// `tasks/get` of a task that exists but is not yours reads the same tables as one
/// of an id of the same shape that does not exist, and answers the same bytes, so
/// neither the answer nor the work (its time) tells them apart. Which tables are
/// read follows from the id's text: a `task_` id the task table alone, a `run_` id
/// the run table alone, an id without a prefix both.
async fn a_task_that_is_not_yours_takes_the_path_of_one_that_does_not_exist(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let store = database.connect().await;
    let runs = Arc::new(docket_catalog::scripts::testing::FlakyScripts::new(
        store.script_store(),
    ));
    let mut config = Config::from_yaml(
        "diagnostics: { enabled: true }\n\
         personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n",
        &|_| None,
    )
    .expect("config");
    config.auth = users(&[("alice", &["admin"]), ("bob", &["analyst"])]);
    let app = docket_server::App::builder(config)
        .task_store(store.task_store())
        .scripts(Arc::clone(&runs) as Arc<dyn docket_catalog::ScriptStore>)
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    let (_, created) = server
        .rpc(
            "tools/call",
            json!({"name": "diagnostics_sleep", "arguments": {"seconds": 60}}),
        )
        .capabilities(json!({"extensions": {TASKS: {}}}))
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    let alices = created["result"]["taskId"]
        .as_str()
        .expect("task")
        .to_owned();
    let saved = server
        .call_as(
            "alice",
            "manage_script",
            json!({"command": "create", "name": "mine", "source": "print('hi')"}),
            json!({}),
        )
        .await;
    assert_eq!(saved["result"]["isError"], Value::Null, "{saved}");
    let ran = server
        .call_as("alice", "run_script", json!({"name": "mine"}), json!({}))
        .await;
    let alices_run = ran["result"]["structuredContent"]["run_id"]
        .as_str()
        .expect("run id")
        .to_owned();
    let get = |id: String| {
        let server = &server;
        let runs = &runs;
        async move {
            let before = runs.calls();
            let (_, body) = server
                .rpc("tasks/get", json!({"taskId": id}))
                .capabilities(json!({"extensions": {TASKS: {}}}))
                .header("x-api-key", &key_of("bob"))
                .send()
                .await;
            (body, runs.calls() - before)
        }
    };
    let digits = "0123456789abcdef0123456789abcdef";
    let (unknown, run_reads) = get(digits.to_owned()).await;
    assert_eq!(
        run_reads, 1,
        "an id without a prefix is looked up among the runs too"
    );
    for (not_yours, unknown_of_its_shape, run_reads) in [
        (&alices, format!("task_{digits}"), 0),
        (&alices_run, format!("run_{digits}"), 1),
    ] {
        let (answer, reads) = get(not_yours.clone()).await;
        assert_eq!(answer["error"], unknown["error"], "{answer}");
        assert_eq!(reads, run_reads, "{not_yours}");
        let (answer, reads) = get(unknown_of_its_shape.clone()).await;
        assert_eq!(answer["error"], unknown["error"], "{answer}");
        assert_eq!(reads, run_reads, "{unknown_of_its_shape}");
    }
    server.cancel_task_as("alice", &alices).await;
}

/// An id's prefix says where its task lives, and `tasks/get` reads only there: with
/// the task table down a run id is still answered, and with the run table down a
/// task id is; an id without a prefix (minted before prefixes) reads both, and one
/// with a prefix neither holds reads none.
#[tokio::test]
async fn a_task_is_looked_up_only_where_its_id_says_it_lives() {
    let tasks = Arc::new(docket_task::memory::FlakyStore::default());
    let runs = Arc::new(docket_catalog::scripts::testing::FlakyScripts::new(
        Arc::new(docket_catalog::memory::MemoryScripts::default()),
    ));
    let app = docket_server::App::builder(Config::embedded_default())
        .task_store(Arc::clone(&tasks) as Arc<dyn TaskStore>)
        .scripts(Arc::clone(&runs) as Arc<dyn docket_catalog::ScriptStore>)
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    let get = |id: String| {
        let server = &server;
        async move {
            let (_, body) = server
                .rpc("tasks/get", json!({"taskId": id}))
                .capabilities(json!({"extensions": {TASKS: {}}}))
                .send()
                .await;
            body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        }
    };
    let digits = "0123456789abcdef0123456789abcdef";
    let unknown = "Unknown task";
    tasks.set_failing(true);
    assert_eq!(get(format!("run_{digits}")).await, unknown);
    assert!(get(format!("task_{digits}")).await.contains("unavailable"));
    assert!(get(digits.to_owned()).await.contains("unavailable"));
    tasks.set_failing(false);
    runs.set_failing(true);
    assert_eq!(get(format!("task_{digits}")).await, unknown);
    assert!(get(format!("run_{digits}")).await.contains("unavailable"));
    assert!(get(digits.to_owned()).await.contains("unavailable"));
    // A prefix no source holds reads nothing at all, so even with both tables down it
    // is simply unknown.
    tasks.set_failing(true);
    assert_eq!(get(format!("asset_{digits}")).await, unknown);
    tasks.set_failing(false);
    runs.set_failing(false);
    for id in [
        format!("task_{digits}"),
        format!("run_{digits}"),
        digits.to_owned(),
    ] {
        assert_eq!(get(id).await, unknown);
    }
    // A task whose id was minted before prefixes is still found in the task table,
    // with the run table up or down.
    let legacy = tasks
        .create(docket_task::testing::new_task("legacy"))
        .await
        .expect("a task row");
    assert_eq!(legacy.id.prefix(), None);
    assert_eq!(get(legacy.id.as_str().to_owned()).await, "");
    runs.set_failing(true);
    assert_eq!(get(legacy.id.as_str().to_owned()).await, "");
}

/// The configuration of [`fixture`] without its Trino connection, with `yaml`
/// added and these users.
fn config_of(yaml: &str, people: &[(&str, &[&str])]) -> Config {
    let yaml = format!(
        "tasks: {{ heartbeat_interval: 100ms }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n\
         {yaml}"
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(people);
    config
}

/// A tool call's `CallToolResult` on `server` as `user`.
async fn call_on(server: &TestServer, user: &str, tool: &str, arguments: Value) -> Value {
    let (_, body) = server
        .rpc("tools/call", json!({"name": tool, "arguments": arguments}))
        .header("x-api-key", &key_of(user))
        .send()
        .await;
    body.get("result").cloned().unwrap_or(body)
}

/// Access that ends, ends for runs: a run queued while its owner had a key does
/// not start once the key is removed (and the server restarted); it fails with
/// why, and none of its source runs.
async fn a_run_of_an_owner_who_is_gone_does_not_start(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let people: &[(&str, &[&str])] = &[("alice", &["analyst"]), ("root", &["admin"])];
    // A replica that queues and runs nothing: the run waits for a worker.
    let queuing = StoredServer::start(
        config_of(
            "scripts: { heartbeat_interval: 100ms, lease: 5s, worker: { enabled: false } }\n",
            people,
        ),
        &database,
        true,
    )
    .await;
    let created = call_on(
        &queuing.server,
        "alice",
        "manage_script",
        json!({"command": "create", "name": "leaver", "source": "platform.export('left', [{'a': 1}], 'csv')"}),
    )
    .await;
    assert_eq!(created["isError"], Value::Null, "{created}");
    let queued = call_on(
        &queuing.server,
        "alice",
        "run_script",
        json!({"name": "leaver", "wait_seconds": -1}),
    )
    .await;
    let run_id = queued["structuredContent"]["run_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a run id: {queued}"))
        .to_owned();
    assert_eq!(queued["structuredContent"]["status"], "queued", "{queued}");

    // alice's key is removed; a replica with workers starts.
    let working = StoredServer::start(
        config_of(
            "scripts: { heartbeat_interval: 100ms, lease: 5s }\n",
            &people[1..],
        ),
        &database,
        true,
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let ended = loop {
        let run = call_on(
            &working.server,
            "root",
            "get_run",
            json!({"run_id": run_id}),
        )
        .await;
        if run["structuredContent"]["status"] != "queued"
            && run["structuredContent"]["status"] != "running"
        {
            break run;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run never ended: {run}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(ended["structuredContent"]["status"], "failed", "{ended}");
    assert!(
        ended["structuredContent"]["error"]
            .as_str()
            .is_some_and(|error| error.contains("apikey:alice no longer exists")),
        "{ended}"
    );
    let assets = call_on(&working.server, "root", "list_assets", json!({})).await;
    assert_eq!(
        assets["structuredContent"]["assets"],
        json!([]),
        "the source never ran: {assets}"
    );
}

/// Creates a prompt named after the run's `skip` argument.
const MAKES_A_PROMPT: &str = r#"
made = platform.call("manage_prompt", {"command": "create", "name": "made-" + run.params["skip"],
    "description": "made by a run", "template": "Hello.", "shared_with": ["*"]})
print(made["owner"])
"#;

/// A prompt a run creates is its script owner's: the owner lists, changes and
/// deletes it, and it counts against the owner's `server.max_prompts_per_owner`.
async fn a_prompt_made_by_a_run_is_its_owners_and_counts_against_their_cap(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let library = database.connect().await.prompt_library();
    let stored = StoredServer::start_with(
        config_of(
            "server: { max_prompts_per_owner: 2 }\n\
             scripts: { heartbeat_interval: 100ms, lease: 5s }\n",
            &[("alice", &["analyst"])],
        ),
        &database,
        true,
        |builder| builder.prompt_library(library),
    )
    .await;
    let server = &stored.server;
    let mine = call_on(
        server,
        "alice",
        "manage_prompt",
        json!({"command": "create", "name": "by-hand", "description": "mine", "template": "Hi."}),
    )
    .await;
    assert_eq!(mine["isError"], Value::Null, "{mine}");
    call_on(
        server,
        "alice",
        "manage_script",
        json!({"command": "create", "name": "maker", "source": MAKES_A_PROMPT,
               "params": [{"name": "skip", "type": "string", "default": "X"}]}),
    )
    .await;
    let first = call_on(
        server,
        "alice",
        "run_script",
        json!({"name": "maker", "args": {"skip": "one"}}),
    )
    .await;
    assert_eq!(first["structuredContent"]["status"], "succeeded", "{first}");
    assert_eq!(
        first["structuredContent"]["log"].as_str().map(str::trim),
        Some("apikey:alice"),
        "{first}"
    );
    // A second script's run hits the owner's cap, not a fresh one of its own.
    call_on(
        server,
        "alice",
        "manage_script",
        json!({"command": "create", "name": "maker-too", "source": MAKES_A_PROMPT,
               "params": [{"name": "skip", "type": "string", "default": "X"}]}),
    )
    .await;
    let capped = call_on(
        server,
        "alice",
        "run_script",
        json!({"name": "maker-too", "args": {"skip": "two"}}),
    )
    .await;
    assert_eq!(capped["structuredContent"]["status"], "failed", "{capped}");
    assert!(
        capped["structuredContent"]["error"]
            .as_str()
            .is_some_and(|error| error.contains("2 prompts")),
        "{capped}"
    );
    let deleted = call_on(
        server,
        "alice",
        "manage_prompt",
        json!({"command": "delete", "name": "made-one"}),
    )
    .await;
    assert_eq!(
        deleted["isError"],
        Value::Null,
        "the owner deletes it: {deleted}"
    );
}

/// `scripts.max_per_owner` and `scripts.max_schedules_per_owner` refuse the
/// save past them, naming the key; and with two workers, alice's queue of busy
/// runs holds one of them while bob's run starts on the other.
async fn owners_are_capped_and_share_the_workers(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let stored = StoredServer::start(
        config_of(
            "scripts: { heartbeat_interval: 100ms, lease: 5s, max_per_owner: 3, \
             max_schedules_per_owner: 1, worker: { concurrency: 2 } }\n",
            &[("alice", &["analyst"]), ("bob", &["analyst"])],
        ),
        &database,
        true,
    )
    .await;
    let server = &stored.server;
    let create = |user: &'static str, name: &'static str, source: &'static str| {
        call_on(
            server,
            user,
            "manage_script",
            json!({"command": "create", "name": name, "source": source}),
        )
    };
    for name in ["busy", "two", "three"] {
        let created = create("alice", name, BUSY).await;
        assert_eq!(created["isError"], Value::Null, "{created}");
    }
    let refused = create("alice", "four", BUSY).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused["content"][0]["text"].as_str().is_some_and(
            |text| text.contains("3 scripts") && text.contains("scripts.max_per_owner")
        ),
        "{refused}"
    );
    let schedule = |name: &'static str| {
        call_on(
            server,
            "alice",
            "manage_script",
            json!({"command": "schedule_set", "name": name, "cron": "0 6 * * *"}),
        )
    };
    assert_eq!(schedule("two").await["isError"], Value::Null);
    assert_eq!(
        schedule("two").await["isError"],
        Value::Null,
        "replacing a schedule adds none"
    );
    let refused = schedule("three").await;
    assert!(
        refused["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("scripts.max_schedules_per_owner")),
        "{refused}"
    );

    // alice fills the queue; bob's run, queued after, still starts and ends.
    let mut alices = Vec::new();
    for _ in 0..3 {
        let started = call_on(
            server,
            "alice",
            "run_script",
            json!({"name": "busy", "wait_seconds": -1}),
        )
        .await;
        alices.push(
            started["structuredContent"]["run_id"]
                .as_str()
                .unwrap_or_else(|| panic!("a run: {started}"))
                .to_owned(),
        );
    }
    create("bob", "quick", "print('bob')").await;
    let bobs = call_on(server, "bob", "run_script", json!({"name": "quick"})).await;
    assert_eq!(bobs["structuredContent"]["status"], "succeeded", "{bobs}");
    let mut statuses = Vec::new();
    for run_id in &alices {
        let run = call_on(server, "alice", "get_run", json!({"run_id": run_id})).await;
        statuses.push(run["structuredContent"]["status"].clone());
        call_on(server, "alice", "cancel_run", json!({"run_id": run_id})).await;
    }
    assert_eq!(
        statuses
            .iter()
            .filter(|status| **status == "queued")
            .count(),
        2,
        "alice's share is one running run: {statuses:?}"
    );
}
