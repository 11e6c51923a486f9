//! The tasks extension through the server: per-request opt-in, `CreateTaskResult`,
//! `tasks/get|update|cancel`, who may follow, audit, and the shutdown drain — on the
//! in-memory store (the database-backed replica tests live with the binary).

use std::sync::Arc;
use std::time::Duration;

use docket_protocol::mrtr::{ElicitRequestParams, InputRequest, InputRequests};
use docket_protocol::tools::CallToolResult;
use docket_server::auth::{ApiKeyConfig, AuthConfig};
use docket_server::config::Config;
use docket_server::{App, AppBuilder, TaskSupport, ToolCall, ToolError, ToolOutcome, ToolSpec};
use docket_task::TaskStore;
use docket_task::memory::MemoryStore;
use serde_json::{Value, json};

use crate::support::TestServer;

const TASKS: &str = "io.modelcontextprotocol/tasks";

fn tasks_caps() -> Value {
    json!({"extensions": {TASKS: {}}})
}

fn schema(properties: Value) -> Value {
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

/// The task tools these tests use.
fn with_task_tools(builder: AppBuilder) -> AppBuilder {
    builder
        .tool(
            ToolSpec::new("slow", "Waits, then answers.", schema(json!({"millis": {"type": "integer"}, "password": {"type": "string"}})))
                .with_task_support(TaskSupport::Optional),
            |call: ToolCall| async move {
                let millis = call.arguments.get("millis").and_then(Value::as_u64).unwrap_or(0);
                call.progress.report(1, Some(2), Some("half way".into()));
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(millis)) => {}
                    () = call.cancel.cancelled() => return ToolOutcome::Result(CallToolResult::error("stopped")),
                }
                ToolOutcome::Result(CallToolResult::text(format!("slept {millis} ms")))
            },
        )
        .expect("registered")
        .tool(
            ToolSpec::new("tool_error", "Fails as a tool.", schema(json!({}))).with_task_support(TaskSupport::Required),
            |_call: ToolCall| async move { ToolOutcome::Result(CallToolResult::error("the upstream said no")) },
        )
        .expect("registered")
        .tool(
            ToolSpec::new("protocol_error", "Fails with a JSON-RPC error.", schema(json!({}))).with_task_support(TaskSupport::Optional),
            |_call: ToolCall| async move { ToolOutcome::Error(ToolError::InvalidParams("the input cannot be used".into())) },
        )
        .expect("registered")
        .tool(
            ToolSpec::new("ask_two", "Asks two questions inside the task.", schema(json!({}))).with_task_support(TaskSupport::Optional),
            |call: ToolCall| async move {
                let form = |message: &str| {
                    InputRequest::Elicit(ElicitRequestParams::form(message, json!({"type": "object", "properties": {"name": {"type": "string"}}})))
                };
                let mut requests = InputRequests::new();
                requests.insert("first".into(), form("First?"));
                requests.insert("second".into(), form("Second?"));
                match call.request_input(requests).await {
                    Ok(answers) => ToolOutcome::Result(CallToolResult::text(format!(
                        "{} and {}",
                        answers["first"]["content"]["name"].as_str().unwrap_or("?"),
                        answers["second"]["content"]["name"].as_str().unwrap_or("?")
                    ))),
                    Err(error) => ToolOutcome::Error(error),
                }
            },
        )
        .expect("registered")
}

fn fast_tasks(mut config: Config) -> Config {
    config.tasks.heartbeat_interval = Duration::from_millis(50);
    config.tasks.stale_after = Duration::from_secs(30);
    config
}

async fn task_server(config: Config) -> (TestServer, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::new());
    let app = with_task_tools(App::builder(fast_tasks(config)))
        .task_store(Arc::clone(&store) as Arc<dyn TaskStore>)
        .build()
        .expect("app");
    (TestServer::start(app).await, store)
}

impl TestServer {
    async fn start_task(&self, tool: &str, arguments: Value) -> String {
        let (status, body) = self
            .rpc("tools/call", json!({"name": tool, "arguments": arguments}))
            .capabilities(tasks_caps())
            .send()
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["result"]["resultType"], "task", "{body}");
        body["result"]["taskId"]
            .as_str()
            .expect("taskId")
            .to_owned()
    }

    async fn task_request(&self, method: &str, task_id: &str, extra: Value) -> (u16, Value) {
        let mut params = json!({"taskId": task_id});
        if let (Some(params), Some(extra)) = (params.as_object_mut(), extra.as_object()) {
            params.extend(extra.clone());
        }
        self.rpc(method, params)
            .capabilities(tasks_caps())
            .send()
            .await
    }

    async fn get_task(&self, task_id: &str) -> Value {
        let (status, body) = self.task_request("tasks/get", task_id, json!({})).await;
        assert_eq!(status, 200, "{body}");
        body["result"].clone()
    }

    /// Polls until the task reaches `status`; the minute is a guard, not a deadline.
    async fn wait_for(&self, task_id: &str, status: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let task = self.get_task(task_id).await;
            if task["status"] == status {
                return task;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task stayed {}",
                task["status"]
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn the_extension_is_advertised_exactly_when_tasks_are_on() {
    let (with_store, _) = task_server(Config::embedded_default()).await;
    let (_, body) = with_store.rpc("server/discover", json!({})).send().await;
    assert_eq!(
        body["result"]["capabilities"]["extensions"],
        json!({TASKS: {}})
    );

    let without_store = TestServer::start(
        with_task_tools(App::builder(Config::embedded_default()))
            .build()
            .expect("app"),
    )
    .await;
    let (_, body) = without_store.rpc("server/discover", json!({})).send().await;
    assert!(
        body["result"]["capabilities"].get("extensions").is_none(),
        "{body}"
    );
    let (status, body) = without_store
        .task_request("tasks/get", "x", json!({}))
        .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (404, json!(-32601)),
        "tasks/* is not offered"
    );

    let mut disabled = Config::embedded_default();
    disabled.tasks.enabled = false;
    let (disabled, _) = task_server(disabled).await;
    let (_, body) = disabled.rpc("server/discover", json!({})).send().await;
    assert!(
        body["result"]["capabilities"].get("extensions").is_none(),
        "{body}"
    );
    let (_, body) = disabled
        .rpc("tools/call", json!({"name": "slow", "arguments": {}}))
        .capabilities(tasks_caps())
        .send()
        .await;
    assert_eq!(
        body["result"]["resultType"], "complete",
        "tasks.enabled: false answers directly: {body}"
    );
}

#[tokio::test]
async fn a_call_becomes_a_task_only_when_that_request_declares_the_extension() {
    let (server, _) = task_server(Config::embedded_default()).await;
    let (_, direct) = server.call_tool("slow", json!({"millis": 1})).await;
    assert_eq!(direct["result"]["resultType"], "complete");
    assert_eq!(direct["result"]["content"][0]["text"], "slept 1 ms");

    let (_, created) = server
        .rpc(
            "tools/call",
            json!({"name": "slow", "arguments": {"millis": 1}}),
        )
        .capabilities(tasks_caps())
        .send()
        .await;
    let task = &created["result"];
    assert_eq!(task["resultType"], "task");
    assert_eq!(task["status"], "working");
    let id = task["taskId"].as_str().expect("taskId");
    // A call's task id names the task table: `task_` and 32 hex digits.
    assert!(
        id.strip_prefix("task_").is_some_and(
            |digits| digits.len() == 32 && digits.chars().all(|c| c.is_ascii_hexdigit())
        ),
        "{id}"
    );
    assert!(
        task["createdAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z') && t.contains('T')),
        "{task}"
    );
    assert!(task["lastUpdatedAt"].is_string());
    assert_eq!(task["ttlMs"], 7 * 86_400_000_u64);
    assert_eq!(task["pollIntervalMs"], 1000);
    for absent in ["result", "error", "inputRequests", "requestState", "task"] {
        assert!(
            task.get(absent).is_none(),
            "{absent} must not be on a CreateTaskResult"
        );
    }

    let (_, again) = server.call_tool("slow", json!({"millis": 1})).await;
    assert_eq!(
        again["result"]["resultType"], "complete",
        "an earlier declaration is not remembered"
    );
}

#[tokio::test]
async fn a_task_is_readable_at_once_and_ends_with_its_result() {
    let (server, _) = task_server(Config::embedded_default()).await;
    let id = server.start_task("slow", json!({"millis": 100})).await;
    let first = server.get_task(&id).await;
    assert_eq!(first["resultType"], "complete");
    assert_eq!(first["taskId"], id.as_str());
    let done = server.wait_for(&id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "slept 100 ms");
    assert_eq!(done["result"]["resultType"], "complete");
    assert!(done.get("error").is_none());
    assert!(
        done["result"]["_meta"]
            .get("io.modelcontextprotocol/related-task")
            .is_none()
    );
}

#[tokio::test]
async fn tool_errors_complete_and_protocol_errors_fail() {
    let (server, _) = task_server(Config::embedded_default()).await;
    let id = server.start_task("tool_error", json!({})).await;
    let done = server.wait_for(&id, "completed").await;
    assert_eq!(done["result"]["isError"], true);

    let id = server.start_task("protocol_error", json!({})).await;
    let failed = server.wait_for(&id, "failed").await;
    assert_eq!(failed["error"]["code"], -32602);
    assert!(
        failed["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("cannot be used"))
    );
    assert!(failed.get("result").is_none());
}

#[tokio::test]
async fn cancel_acknowledges_at_once_and_stops_the_work() {
    let (server, _) = task_server(Config::embedded_default()).await;
    let id = server.start_task("slow", json!({"millis": 600_000})).await;
    let (status, ack) = server.task_request("tasks/cancel", &id, json!({})).await;
    assert_eq!(status, 200);
    let ack = ack["result"].as_object().expect("result").clone();
    let keys: Vec<&str> = ack.keys().map(String::as_str).collect();
    assert_eq!(keys, ["_meta", "resultType"], "an empty acknowledgement");
    assert_eq!(ack["resultType"], "complete");
    let cancelled = server.wait_for(&id, "cancelled").await;
    assert!(cancelled.get("result").is_none() && cancelled.get("error").is_none());
    let (status, again) = server.task_request("tasks/cancel", &id, json!({})).await;
    assert_eq!(
        (status, again["result"]["resultType"].clone()),
        (200, json!("complete")),
        "cancelling an ended task is acknowledged"
    );
}

#[tokio::test]
async fn the_status_message_carries_progress() {
    let (server, _) = task_server(Config::embedded_default()).await;
    let id = server.start_task("slow", json!({"millis": 600_000})).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let task = server.get_task(&id).await;
        if task["statusMessage"] == "half way" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "progress never reached the status message: {task}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.task_request("tasks/cancel", &id, json!({})).await;
}

#[tokio::test]
async fn tasks_methods_need_the_extension_before_any_lookup() {
    let (server, _) = task_server(Config::embedded_default()).await;
    for (method, extra) in [
        ("tasks/get", json!({})),
        ("tasks/cancel", json!({})),
        ("tasks/update", json!({"inputResponses": {}})),
    ] {
        let mut params = json!({"taskId": "gate-test"});
        params
            .as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        let (status, body) = server.rpc(method, params).send().await;
        assert_eq!(status, 400, "{method}");
        assert_eq!(body["error"]["code"], -32021, "{method}");
        assert_eq!(
            body["error"]["data"]["requiredCapabilities"],
            json!({"extensions": {TASKS: {}}})
        );
    }
    let (status, body) = server.call_tool("tool_error", json!({})).await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!(-32021)),
        "a task-only tool needs the extension"
    );
}

#[tokio::test]
async fn list_and_result_are_not_offered() {
    let (server, _) = task_server(Config::embedded_default()).await;
    for method in ["tasks/list", "tasks/result"] {
        let (status, body) = server
            .rpc(method, json!({}))
            .capabilities(tasks_caps())
            .send()
            .await;
        assert_eq!(
            (status, body["error"]["code"].clone()),
            (404, json!(-32601)),
            "{method}"
        );
    }
}

#[tokio::test]
async fn the_name_header_must_carry_the_task_id() {
    let (server, _) = task_server(Config::embedded_default()).await;
    let id = server.start_task("slow", json!({"millis": 1})).await;
    let (status, body) = server
        .rpc("tasks/get", json!({"taskId": id}))
        .capabilities(tasks_caps())
        .header("mcp-name", "another-id")
        .send()
        .await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!(-32020))
    );
}

fn two_users() -> Config {
    let key = |name: &str, roles: &[&str]| ApiKeyConfig {
        name: name.into(),
        key: Some(format!("{name}-key-0123456789abcdef")),
        key_sha256: None,
        email: None,
        roles: roles.iter().map(|r| (*r).to_owned()).collect(),
        user: None,
    };
    let mut config = Config {
        auth: AuthConfig {
            api_keys: vec![
                key("alice", &["analyst"]),
                key("bob", &["analyst"]),
                key("root", &["admin"]),
            ],
            ..AuthConfig::default()
        },
        ..Config::default()
    };
    config.personas.insert(
        "analyst".into(),
        serde_json::from_value(json!({"roles": ["analyst"], "tools": {"allow": ["*"]}}))
            .expect("persona"),
    );
    config
}

#[tokio::test]
async fn only_the_starter_and_administrators_may_follow_and_others_learn_nothing() {
    let (server, _) = task_server(two_users()).await;
    let as_user = |name: &str| format!("{name}-key-0123456789abcdef");
    let (_, created) = server
        .rpc(
            "tools/call",
            json!({"name": "slow", "arguments": {"millis": 600000}}),
        )
        .capabilities(tasks_caps())
        .header("x-api-key", &as_user("alice"))
        .send()
        .await;
    let id = created["result"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();

    let ask = |user: String, method: &'static str, task_id: String| {
        let extra = if method == "tasks/update" {
            json!({"inputResponses": {}})
        } else {
            json!({})
        };
        let mut params = json!({"taskId": task_id});
        params
            .as_object_mut()
            .expect("object")
            .extend(extra.as_object().expect("object").clone());
        server
            .rpc(method, params)
            .capabilities(tasks_caps())
            .header("x-api-key", &user)
    };
    let (status, own) = ask(as_user("alice"), "tasks/get", id.clone()).send().await;
    assert_eq!(
        (status, own["result"]["status"].clone()),
        (200, json!("working"))
    );
    let (status, admin) = ask(as_user("root"), "tasks/get", id.clone()).send().await;
    assert_eq!(
        (status, admin["result"]["taskId"].clone()),
        (200, json!(id.clone()))
    );

    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let foreign = ask(as_user("bob"), method, id.clone()).response().await;
        let foreign_status = foreign.status().as_u16();
        let foreign_bytes = foreign.bytes().await.expect("body");
        let missing = ask(as_user("bob"), method, "0".repeat(id.len()))
            .response()
            .await;
        assert_eq!(foreign_status, missing.status().as_u16(), "{method}");
        assert_eq!(
            foreign_bytes,
            missing.bytes().await.expect("body"),
            "{method}: not yours and unknown must be the same bytes"
        );
        let parsed: Value = serde_json::from_slice(&foreign_bytes).expect("json");
        assert_eq!(parsed["error"]["code"], -32602, "{method}");
    }
    let (_, still) = ask(as_user("alice"), "tasks/get", id.clone()).send().await;
    assert_eq!(
        still["result"]["status"], "working",
        "bob's cancel did nothing"
    );
    ask(as_user("alice"), "tasks/cancel", id).send().await;
}

#[tokio::test]
async fn input_required_tasks_take_partial_answers_synchronously() {
    let (server, _) = task_server(Config::embedded_default()).await;
    let id = server.start_task("ask_two", json!({})).await;
    let waiting = server.wait_for(&id, "input_required").await;
    assert_eq!(
        waiting["inputRequests"]["first"]["method"],
        "elicitation/create"
    );
    assert!(waiting["inputRequests"]["second"].is_object());

    let first = json!({"inputResponses": {"first": {"action": "accept", "content": {"name": "partial-1"}}, "unknown-key": {"ignored": true}}});
    let (status, ack) = server.task_request("tasks/update", &id, first).await;
    assert_eq!(
        (status, ack["result"]["resultType"].clone()),
        (200, json!("complete"))
    );
    let after = server.get_task(&id).await;
    assert_eq!(after["status"], "input_required", "{after}");
    assert!(
        after["inputRequests"].get("first").is_none()
            && after["inputRequests"].get("second").is_some(),
        "{after}"
    );

    let second = json!({"inputResponses": {"second": {"action": "accept", "content": {"name": "partial-2"}}}});
    server.task_request("tasks/update", &id, second).await;
    let done = server.wait_for(&id, "completed").await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        "partial-1 and partial-2"
    );

    let (status, malformed) = server
        .task_request("tasks/update", &id, json!({"inputResponses": "nope"}))
        .await;
    assert_eq!(
        (status, malformed["error"]["code"].clone()),
        (200, json!(-32602))
    );
}

#[tokio::test]
async fn every_call_is_audited_once_when_it_ends() {
    let (server, store) = task_server(Config::embedded_default()).await;
    server
        .call_tool("slow", json!({"millis": 1, "password": "hunter2"}))
        .await;
    let id = server
        .start_task("slow", json!({"millis": 600000, "password": "hunter3"}))
        .await;
    // The task row keeps its arguments as the audit row does: redacted at rest.
    let (record, _) = store
        .get(&docket_task::TaskId::from_stored(id.clone()))
        .await
        .expect("get")
        .expect("present");
    assert_eq!(
        record.arguments["password"], "[REDACTED]",
        "{:?}",
        record.arguments
    );
    assert_eq!(record.arguments["millis"], 600000);
    server.task_request("tasks/cancel", &id, json!({})).await;
    server.wait_for(&id, "cancelled").await;
    server.call_tool("no_such_tool", json!({})).await;

    // The direct call's row is written in the background; wait for it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let rows = loop {
        let rows = store.audit_for_tool("slow", 10).await.expect("audit");
        if rows.len() >= 2 || tokio::time::Instant::now() > deadline {
            break rows;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(rows.len(), 2, "{rows:?}");
    let outcomes: Vec<&str> = rows.iter().map(|row| row.outcome.as_str()).collect();
    assert!(
        outcomes.contains(&"completed") && outcomes.contains(&"cancelled"),
        "{outcomes:?}"
    );
    assert!(
        rows.iter()
            .all(|row| row.context.persona.as_deref() == Some("admin"))
    );
    let direct = rows
        .iter()
        .find(|row| row.outcome == "completed")
        .expect("direct row");
    assert_eq!(direct.context.arguments["password"], "[REDACTED]");
    assert!(
        store
            .audit_for_tool("no_such_tool", 10)
            .await
            .expect("audit")
            .is_empty(),
        "refused calls are not audited"
    );
}

/// What a gated task and the test say to each other: the work says it started, and
/// ends when the test releases it.
#[derive(Default)]
struct Gate {
    started: tokio::sync::Notify,
    release: tokio::sync::Notify,
}

/// Adds `gated`, a task-capable tool whose work signals `gate.started` and answers
/// once `gate.release` is signalled.
fn with_gated_tool(builder: AppBuilder, gate: &Arc<Gate>) -> AppBuilder {
    let gate = Arc::clone(gate);
    builder
        .tool(
            ToolSpec::new("gated", "Answers when the test says so.", schema(json!({})))
                .with_task_support(TaskSupport::Optional),
            move |_call: ToolCall| {
                let gate = Arc::clone(&gate);
                async move {
                    gate.started.notify_one();
                    gate.release.notified().await;
                    ToolOutcome::Result(CallToolResult::text("released"))
                }
            },
        )
        .expect("registered")
}

/// [`task_server`] plus the `gated` tool.
async fn gated_task_server(config: Config, gate: &Arc<Gate>) -> (TestServer, Arc<MemoryStore>) {
    let store = Arc::new(MemoryStore::new());
    let app = with_gated_tool(with_task_tools(App::builder(fast_tasks(config))), gate)
        .task_store(Arc::clone(&store) as Arc<dyn TaskStore>)
        .build()
        .expect("app");
    (TestServer::start(app).await, store)
}

/// The stored task `id`.
async fn stored(store: &MemoryStore, id: String) -> docket_task::TaskRecord {
    store
        .get(&docket_task::TaskId::from_stored(id))
        .await
        .expect("get")
        .expect("present")
        .0
}

/// Work still running when the replica starts draining may finish within the grace
/// period and keeps its result; work still running when the grace period is over is
/// recorded as failed. Nothing here races the clock: the short work ends when the
/// test releases it, once draining has begun, under a grace period far longer than
/// that takes; the long work never ends, under a grace period the test waits out.
#[tokio::test]
async fn shutdown_lets_short_tasks_finish_and_records_long_ones_as_failed() {
    let gate = Arc::new(Gate::default());
    let mut config = Config::embedded_default();
    config.server.shutdown.grace_period = Duration::from_secs(60);
    let (mut server, store) = gated_task_server(config, &gate).await;
    let short = server.start_task("gated", json!({})).await;
    gate.started.notified().await;
    server.begin_shutdown();
    let stopped = server.stopped.take().expect("running");
    let draining = tokio::time::timeout(Duration::from_secs(60), async {
        while !server.app.is_draining() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    draining.await.expect("the server began draining");
    assert!(
        !stopped.is_finished(),
        "the server stopped while a task was still running"
    );
    gate.release.notify_one();
    stopped.await.expect("joined").expect("served");
    let short = stored(&store, short).await;
    assert_eq!(short.status, docket_task::TaskStatus::Completed);
    assert_eq!(
        short.result.expect("result")["content"][0]["text"],
        "released"
    );

    let mut config = Config::embedded_default();
    config.server.shutdown.grace_period = Duration::from_millis(100);
    let (mut server, store) = task_server(config).await;
    let long = server.start_task("slow", json!({"millis": 600_000})).await;
    server.begin_shutdown();
    let stopped = server.stopped.take().expect("running");
    stopped.await.expect("joined").expect("served");
    let long = stored(&store, long).await;
    assert_eq!(long.status, docket_task::TaskStatus::Failed);
    assert!(
        long.error
            .expect("error")
            .message
            .contains("call the tool again")
    );
}

#[tokio::test]
async fn an_expired_task_reads_exactly_like_an_unknown_one() {
    // retention_days: 0 puts the expiry at creation, so the task is past it at once.
    let mut config = Config::embedded_default();
    config.tasks.retention_days = 0;
    let (server, _) = task_server(config).await;
    let id = server.start_task("slow", json!({"millis": 1})).await;
    let expired = server.task_request("tasks/get", &id, json!({})).await;
    let unknown = server
        .task_request("tasks/get", &"0".repeat(id.len()), json!({}))
        .await;
    assert_eq!(expired.0, unknown.0);
    assert_eq!(expired.1, unknown.1, "expired and unknown answer the same");
    assert_eq!(expired.1["error"]["code"], -32602);
}

/// Callers without credentials share one subject, so they get no tasks: a
/// task-capable call is answered directly, a task-only tool says why it
/// refuses, and `tasks/*` reads every id as unknown. The embedded default's
/// anonymous administrator keeps its tasks (the other tests here).
#[tokio::test]
async fn anonymous_callers_who_are_not_administrators_get_no_tasks() {
    let mut config = Config::from_yaml(
        "personas:\n  guest: { roles: [guest], tools: { allow: [\"*\"] } }\n",
        &|_| None,
    )
    .expect("config");
    config.auth.allow_anonymous = true;
    config.auth.anonymous_roles = vec!["guest".into()];
    let (server, store) = task_server(config).await;
    let (status, body) = server
        .rpc(
            "tools/call",
            json!({"name": "slow", "arguments": {"millis": 1}}),
        )
        .capabilities(tasks_caps())
        .send()
        .await;
    assert_eq!(status, 200, "{body}");
    assert_ne!(body["result"]["resultType"], "task", "{body}");
    assert_eq!(body["result"]["content"][0]["text"], "slept 1 ms");
    let (_, refused) = server
        .rpc("tools/call", json!({"name": "tool_error", "arguments": {}}))
        .capabilities(tasks_caps())
        .send()
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("callers without credentials get no tasks")),
        "{refused}"
    );
    // A task stored under the anonymous subject (as one was before) is no
    // anonymous caller's to follow.
    let id = docket_task::TaskId::generate().expect("id");
    store
        .create(docket_task::NewTask {
            id: id.clone(),
            tool: "slow".into(),
            arguments: json!({}),
            owner: "anonymous".into(),
            extra_follower: None,
            replica_id: "elsewhere".into(),
            status_message: None,
            retention: None,
            poll_interval_ms: 1000,
            audit: docket_task::store::AuditContext::default(),
            trace_context: None,
        })
        .await
        .expect("created");
    let (_, unknown) = server
        .task_request("tasks/get", id.as_str(), json!({}))
        .await;
    assert_eq!(unknown["error"]["message"], "Unknown task", "{unknown}");
}

/// A fresh PostgreSQL database, a fault proxy in front of its server, and a store
/// that reaches it through the proxy; `None` when PostgreSQL is absent and not
/// required.
async fn behind_a_proxy() -> Option<(
    docket_storage::test_db::TestDatabase,
    docket_storage::test_db::FaultProxy,
    docket_storage::Store,
)> {
    let database =
        docket_storage::test_db::TestDatabase::postgres(&crate::support::postgres_server()).await?;
    let proxy =
        docket_storage::test_db::FaultProxy::start(database.server_authority().expect("postgres"))
            .await;
    let store = docket_storage::connect(
        &database.url_through(&proxy).expect("url"),
        docket_storage::ConnectOptions {
            max_connections: 4,
            migrate: false,
        },
    )
    .await
    .expect("connect through the proxy");
    Some((database, proxy, store))
}

/// A task that ends while PostgreSQL is out of reach (every connection dropped,
/// new ones refused for 3 s, through a proxy so the shared server is never
/// stopped) keeps its outcome: it reads completed with its result afterwards,
/// never failed. The work ends when the test releases it, right after the cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_ends_during_a_database_outage_keeps_its_outcome_on_postgres() {
    let Some((_database, proxy, store)) = behind_a_proxy().await else {
        return;
    };
    let mut config = fast_tasks(Config::embedded_default());
    config.tasks.stale_after = Duration::from_secs(5);
    let gate = Arc::new(Gate::default());
    let app = with_gated_tool(App::builder(config), &gate)
        .task_store(store.task_store())
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    let id = server.start_task("gated", json!({})).await;
    gate.started.notified().await;
    proxy.cut(Duration::from_secs(3));
    gate.release.notify_one();
    // Reads fail while the database is away; poll until the task has ended.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let ended = loop {
        let (_, body) = server.task_request("tasks/get", &id, json!({})).await;
        let status = body["result"]["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if ["completed", "failed", "cancelled"].contains(&status.as_str()) {
            break body["result"].clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "{body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["result"]["content"][0]["text"], "released", "{ended}");
}

/// A status a reader is told is final stays final. Replica A runs a task through a
/// proxy that then cuts it from PostgreSQL for longer than `stale_after`; replica B
/// (straight on the database) reads the task failed ("call the tool again") and
/// records that before answering. When A's work ends and its store comes back, its
/// ending is refused by the compare-and-set: the task reads failed on both replicas,
/// never completed, so a client that followed the advice runs the work once more,
/// not twice. (Without the record, B's "failed" was computed at read time and the
/// task read completed once A's retried ending landed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_read_failed_from_a_stale_replica_stays_failed_on_postgres() {
    let Some((database, proxy, through_proxy)) = behind_a_proxy().await else {
        return;
    };
    let direct = database.connect().await;
    // B calls a replica gone after 1 s without a beat; A keeps retrying its ending
    // for its own 30 s, so its ending lands once the 3 s cut is over.
    let config = |stale_after| {
        let mut config = fast_tasks(Config::embedded_default());
        config.tasks.stale_after = stale_after;
        config
    };
    let gate = Arc::new(Gate::default());
    let running = with_gated_tool(App::builder(config(Duration::from_secs(30))), &gate)
        .task_store(through_proxy.task_store())
        .build()
        .expect("app");
    let runtime = Arc::clone(running.task_runtime().expect("tasks"));
    let a = TestServer::start(running).await;
    // B only reads: no maintenance pass of its own records the failure for it.
    let b = TestServer::start_without_background(
        with_gated_tool(
            App::builder(config(Duration::from_secs(1))),
            &Arc::new(Gate::default()),
        )
        .task_store(direct.task_store())
        .build()
        .expect("app"),
    )
    .await;
    let id = a.start_task("gated", json!({})).await;
    gate.started.notified().await;
    proxy.cut(Duration::from_secs(3));
    let told = b.wait_for(&id, "failed").await;
    assert!(
        told["statusMessage"]
            .as_str()
            .is_some_and(|message| message.contains("call the tool again")),
        "{told}"
    );
    gate.release.notify_one();
    // A keeps trying to record its ending until the store answers again; the test
    // waits for it to be done, however long that takes.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while runtime.running_count() > 0 {
        assert!(tokio::time::Instant::now() < deadline, "A never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for replica in [&b, &a] {
        let read = replica.get_task(&id).await;
        assert_eq!(read["status"], "failed", "{read}");
        assert!(read.get("result").is_none(), "{read}");
    }
}

/// While the task store is unavailable every task method answers a clear
/// "unavailable" error (and nothing is lost or half-written); once it is back, the
/// same task reads and cancels as before.
#[tokio::test]
async fn every_task_method_answers_unavailable_while_the_store_is_down() {
    let store = Arc::new(docket_task::memory::FlakyStore::default());
    let app = with_task_tools(App::builder(fast_tasks(Config::embedded_default())))
        .task_store(Arc::clone(&store) as Arc<dyn TaskStore>)
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    let id = server.start_task("slow", json!({"millis": 600000})).await;
    store.set_failing(true);
    let unavailable = |body: &Value| {
        body["error"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("unavailable"))
    };
    for (method, extra) in [
        ("tasks/get", json!({})),
        ("tasks/cancel", json!({})),
        (
            "tasks/update",
            json!({"inputResponses": {"x": {"action": "accept", "content": {}}}}),
        ),
    ] {
        let (_, body) = server.task_request(method, &id, extra).await;
        assert!(unavailable(&body), "{method}: {body}");
    }
    let (_, created) = server
        .rpc(
            "tools/call",
            json!({"name": "slow", "arguments": {"millis": 1}}),
        )
        .capabilities(tasks_caps())
        .send()
        .await;
    assert!(unavailable(&created), "{created}");
    store.set_failing(false);
    let (_, read) = server.task_request("tasks/get", &id, json!({})).await;
    assert_eq!(read["result"]["status"], "working", "{read}");
    server.task_request("tasks/cancel", &id, json!({})).await;
    server.wait_for(&id, "cancelled").await;
}

/// A tool whose work is durable on its own, as an embedder would write one: its
/// records live in its own ledger, it answers its own task, and the ledger is
/// registered as a task source.
mod own_task {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use docket_protocol::JsonObject;
    use docket_server::registry::{OwnTaskFuture, ToolFuture, ToolHandler};
    use docket_server::{FoundTask, McpError, TaskSource};
    use docket_task::{TaskId, TaskRecord, TaskStatus};
    use time::OffsetDateTime;

    use super::*;

    #[derive(Default)]
    struct Ledger {
        records: Mutex<HashMap<TaskId, TaskRecord>>,
    }

    struct LedgerTool(Arc<Ledger>);

    impl ToolHandler for LedgerTool {
        fn call(&self, _call: ToolCall) -> ToolFuture {
            Box::pin(async { ToolOutcome::Error(ToolError::Internal("only as a task".into())) })
        }

        fn start_own_task<'a>(&'a self, call: &'a ToolCall) -> Option<OwnTaskFuture<'a>> {
            Some(Box::pin(async move {
                let now = OffsetDateTime::now_utc();
                let record = TaskRecord {
                    id: TaskId::generate().expect("an id"),
                    tool: "ledger".into(),
                    arguments: json!({}),
                    owner: call.identity.subject.clone(),
                    extra_follower: None,
                    replica_id: "ledger".into(),
                    status: TaskStatus::Working,
                    status_message: Some("in the ledger".into()),
                    created_at: now,
                    last_updated_at: now,
                    heartbeat_at: now,
                    cancel_requested_at: None,
                    result: None,
                    error: None,
                    input_requests: None,
                    expires_at: None,
                    poll_interval_ms: 100,
                    replica_draining: false,
                    trace_context: None,
                };
                let mut records = self.0.records.lock().expect("ledger");
                records.insert(record.id.clone(), record.clone());
                Ok(record)
            }))
        }
    }

    #[async_trait::async_trait]
    impl TaskSource for Ledger {
        async fn find(self: Arc<Self>, id: &TaskId) -> Result<Option<FoundTask>, McpError> {
            let record = self.records.lock().expect("ledger").get(id).cloned();
            Ok(record.map(|record| FoundTask {
                record,
                // The ledger's clock: the record is always fresh.
                now: OffsetDateTime::now_utc(),
                source: self,
            }))
        }

        async fn list_followed(
            &self,
            subject: &str,
            before: Option<&docket_catalog::PageCursor>,
            limit: u32,
        ) -> Result<Vec<(TaskRecord, OffsetDateTime)>, McpError> {
            let mut records: Vec<TaskRecord> = self
                .records
                .lock()
                .expect("ledger")
                .values()
                .filter(|record| record.owner == subject)
                .filter(|record| {
                    before.is_none_or(|cursor| {
                        (record.created_at, record.id.as_str())
                            < (cursor.created_at, cursor.id.as_str())
                    })
                })
                .cloned()
                .collect();
            records
                .sort_by(|a, b| (b.created_at, b.id.as_str()).cmp(&(a.created_at, a.id.as_str())));
            records.truncate(usize::try_from(limit).expect("a small limit"));
            let now = OffsetDateTime::now_utc();
            Ok(records.into_iter().map(|record| (record, now)).collect())
        }

        async fn cancel(&self, id: &TaskId) -> Result<(), McpError> {
            if let Some(record) = self.records.lock().expect("ledger").get_mut(id) {
                record.status = TaskStatus::Cancelled;
            }
            Ok(())
        }

        async fn answer_input(
            &self,
            _id: &TaskId,
            _responses: &JsonObject,
        ) -> Result<(), McpError> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_tool_answering_its_own_task_is_followed_through_its_registered_source() {
        let store = Arc::new(MemoryStore::new());
        let ledger = Arc::new(Ledger::default());
        let app = App::builder(fast_tasks(Config::embedded_default()))
            .tool(
                ToolSpec::new("ledger", "Keeps its own tasks.", schema(json!({})))
                    .with_task_support(TaskSupport::Required),
                LedgerTool(Arc::clone(&ledger)),
            )
            .expect("tool")
            .task_store(Arc::clone(&store) as Arc<dyn TaskStore>)
            .task_source(Arc::clone(&ledger) as Arc<dyn TaskSource>)
            .build()
            .expect("app");
        let server = TestServer::start(app).await;
        let task_id = server.start_task("ledger", json!({})).await;
        let task = server.get_task(&task_id).await;
        assert_eq!(task["status"], "working", "{task}");
        assert_eq!(task["statusMessage"], "in the ledger", "{task}");
        // Nothing was written to the task table: the ledger holds the task.
        let id = TaskId::from_client(&task_id).expect("a task id");
        assert!(store.get(&id).await.expect("store").is_none());
        let (status, body) = server
            .task_request("tasks/cancel", &task_id, json!({}))
            .await;
        assert_eq!(status, 200, "{body}");
        let task = server.get_task(&task_id).await;
        assert_eq!(task["status"], "cancelled", "{task}");
    }
}
