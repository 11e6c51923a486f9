//! End-to-end checks of the conformance fixture: `fixture_app()` served in-process
//! on a loopback port, called over HTTP the way the conformance suite calls it,
//! and through the `rmcp` crate as an independent client.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use docket_fixture::{FIXTURE_TOOLS, FixtureDatabase, FixtureStore, fixture_app, fixture_store};
use docket_storage::Backend;
use docket_storage::test_db::{PostgresServer, TestDatabase};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// Everything a well-behaved client declares: the suite's default capabilities.
fn all_capabilities() -> Value {
    json!({ "sampling": {}, "elicitation": {}, "roots": { "listChanged": true } })
}

/// The suite's default capabilities plus the tasks extension.
fn task_capabilities() -> Value {
    json!({
        "sampling": {},
        "elicitation": {},
        "roots": { "listChanged": true },
        "extensions": { "io.modelcontextprotocol/tasks": {} }
    })
}

/// A guard against a hung server or a task that never settles: generous, so it
/// only ever fires when something is stuck, never on a slow machine.
const HANG_GUARD: Duration = Duration::from_secs(60);

/// Runs `future`, panicking with `what` if it outlives [`HANG_GUARD`].
async fn guarded<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(HANG_GUARD, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {HANG_GUARD:?}"))
}

/// How often the tests poll `tasks/get`.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The fixture on an ephemeral loopback port, over a database of its own: a fresh
/// schema on the test PostgreSQL (`DOCKET_TEST_DATABASE_URL`) when it answers, else
/// a temporary SQLite file — said on the terminal, and a failure with
/// `DOCKET_REQUIRE_POSTGRES=1`. Dropping it shuts the server down and removes the
/// database.
struct Fixture {
    addr: SocketAddr,
    http: reqwest::Client,
    // Dropped in this order: the server is told to stop before its store goes.
    _shutdown: oneshot::Sender<()>,
    _store: FixtureStore,
    _database: Option<TestDatabase>,
}

impl Fixture {
    async fn start() -> Self {
        // The fixture opens SQLite itself (a file it removes when it stops), so a
        // SQLite test database only says that PostgreSQL was not there.
        let database = Some(
            TestDatabase::postgres_or_sqlite(&PostgresServer::from_lookup(|name| {
                std::env::var(name).ok()
            }))
            .await,
        )
        .filter(|database| database.backend() == Backend::Postgres);
        let target = match &database {
            Some(database) => FixtureDatabase::Postgres(database.url().to_owned()),
            None => FixtureDatabase::TemporarySqlite {
                parent: std::env::temp_dir(),
            },
        };
        let store = fixture_store(target)
            .await
            .expect("the fixture's store opens");
        let app =
            fixture_app(store.task_store(), store.session_store()).expect("the fixture app builds");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (shutdown, signal) = oneshot::channel::<()>();
        tokio::spawn(docket_server::serve(listener, app, async {
            let _ = signal.await;
        }));
        Self {
            addr,
            http: reqwest::Client::new(),
            _shutdown: shutdown,
            _store: store,
            _database: database,
        }
    }

    /// Posts `method` with every required header and `_meta` field; `params` gets a
    /// `_meta` declaring `capabilities` (plus any `_meta` keys it already has).
    async fn post(
        &self,
        method: &str,
        mut params: Value,
        capabilities: Value,
    ) -> reqwest::Response {
        let mut meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "io.modelcontextprotocol/clientInfo": { "name": "docket-fixture-tests", "version": "0" }
        });
        if let Some(Value::Object(extra)) = params.get("_meta") {
            for (key, value) in extra {
                meta[key] = value.clone();
            }
        }
        params["_meta"] = meta;
        let mut request = self
            .http
            .post(format!("http://{}/mcp", self.addr))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if method == "tools/call" {
            let name = params["name"]
                .as_str()
                .expect("tools/call has a name")
                .to_owned();
            request = request.header("mcp-name", name);
        }
        if method.starts_with("tasks/") {
            let task_id = params["taskId"]
                .as_str()
                .expect("tasks/* has a taskId")
                .to_owned();
            request = request.header("mcp-name", task_id);
        }
        let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params });
        request.json(&body).send().await.expect("request sent")
    }

    /// Posts and returns the HTTP status and the JSON-RPC response.
    async fn rpc(&self, method: &str, params: Value, capabilities: Value) -> (u16, Value) {
        let response = self.post(method, params, capabilities).await;
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("a JSON body, got {text:?}")),
        )
    }

    /// Calls a tool with `extra` merged into the params, declaring every capability.
    async fn call(&self, name: &str, extra: Value) -> Value {
        self.call_with(name, extra, all_capabilities()).await.1
    }

    async fn call_with(&self, name: &str, extra: Value, capabilities: Value) -> (u16, Value) {
        let mut params = json!({ "name": name, "arguments": {} });
        if let Value::Object(extra) = extra {
            for (key, value) in extra {
                params[key] = value;
            }
        }
        self.rpc("tools/call", params, capabilities).await
    }

    /// Calls a tool with `arguments`, declaring the tasks extension, and returns the
    /// id of the task it became.
    async fn start_task(&self, name: &str, arguments: Value) -> String {
        let (_, response) = self
            .call_with(name, json!({ "arguments": arguments }), task_capabilities())
            .await;
        assert_eq!(result_type(&response), "task", "{response}");
        response["result"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("a taskId: {response}"))
            .to_owned()
    }

    /// Sends a `tasks/*` request declaring the extension; returns the result.
    async fn task_request(&self, method: &str, params: Value) -> Value {
        let (status, response) = self.rpc(method, params, task_capabilities()).await;
        assert_eq!(status, 200, "{response}");
        response["result"].clone()
    }

    /// Polls `tasks/get` until the task's status is one of `statuses`.
    async fn wait_for(&self, task_id: &str, statuses: &[&str]) -> Value {
        guarded(&format!("task {task_id} reaching {statuses:?}"), async {
            loop {
                let task = self
                    .task_request("tasks/get", json!({ "taskId": task_id }))
                    .await;
                if statuses.iter().any(|status| task["status"] == *status) {
                    return task;
                }
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        })
        .await
    }

    /// Polls `tasks/get` until the task has ended.
    async fn wait_for_end(&self, task_id: &str) -> Value {
        self.wait_for(task_id, &["completed", "failed", "cancelled"])
            .await
    }
}

fn result_type(response: &Value) -> &str {
    response["result"]["resultType"]
        .as_str()
        .unwrap_or_else(|| panic!("a result with resultType: {response}"))
}

fn first_text(response: &Value) -> &str {
    response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a text block: {response}"))
}

#[tokio::test]
async fn tools_list_names_every_fixture_tool_with_a_description() {
    let fixture = Fixture::start().await;
    let (status, response) = fixture.rpc("tools/list", json!({}), json!({})).await;
    assert_eq!(status, 200, "{response}");
    let tools = response["result"]["tools"].as_array().expect("tools array");
    for name in FIXTURE_TOOLS {
        let tool = tools
            .iter()
            .find(|tool| tool["name"] == *name)
            .unwrap_or_else(|| panic!("{name} is listed"));
        assert!(
            tool["description"]
                .as_str()
                .is_some_and(|text| !text.is_empty()),
            "{name} has a description"
        );
        assert_eq!(tool["inputSchema"]["type"], "object", "{name}");
    }

    // The 2020-12 schema is published verbatim, keywords and all.
    let schema_tool = tools
        .iter()
        .find(|tool| tool["name"] == "json_schema_2020_12_tool")
        .expect("listed");
    let schema = &schema_tool["inputSchema"];
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
    assert_eq!(schema["properties"]["address"]["$ref"], "#/$defs/address");
    assert_eq!(schema["additionalProperties"], false);
    assert!(schema["allOf"][0]["anyOf"].is_array() && schema["if"].is_object());
    assert!(schema["then"].is_object() && schema["else"].is_object());
}

#[tokio::test]
async fn the_2020_12_schema_validates_arguments_through_its_local_ref() {
    let fixture = Fixture::start().await;
    let valid = json!({ "arguments": { "name": "Ada", "email": "ada@example.com", "address": { "city": "London" } } });
    let response = fixture.call("json_schema_2020_12_tool", valid).await;
    assert_eq!(result_type(&response), "complete", "{response}");

    // `address.city` must be a string by way of `$ref: #/$defs/address`.
    let invalid = json!({ "arguments": { "email": "ada@example.com", "address": { "city": 7 } } });
    let response = fixture.call("json_schema_2020_12_tool", invalid).await;
    assert_eq!(response["error"]["code"], -32602, "{response}");
}

#[tokio::test]
async fn elicitation_completes_with_the_name_on_the_retry() {
    let fixture = Fixture::start().await;
    let tool = "test_input_required_result_elicitation";
    let round_1 = fixture.call(tool, json!({})).await;
    assert_eq!(result_type(&round_1), "input_required", "{round_1}");
    let request = &round_1["result"]["inputRequests"]["user_name"];
    assert_eq!(request["method"], "elicitation/create", "{round_1}");
    assert_eq!(
        request["params"]["requestedSchema"]["required"],
        json!(["name"])
    );
    let state = round_1["result"]["requestState"]
        .as_str()
        .expect("a requestState");

    let answer = json!({ "user_name": { "action": "accept", "content": { "name": "Alice" } } });
    let round_2 = fixture
        .call(
            tool,
            json!({ "inputResponses": answer, "requestState": state }),
        )
        .await;
    assert_eq!(result_type(&round_2), "complete", "{round_2}");
    assert!(first_text(&round_2).contains("Alice"), "{round_2}");
}

#[tokio::test]
async fn a_tampered_request_state_is_refused_with_an_error() {
    let fixture = Fixture::start().await;
    let tool = "test_input_required_result_elicitation";
    let round_1 = fixture.call(tool, json!({})).await;
    let state = round_1["result"]["requestState"]
        .as_str()
        .expect("a requestState");
    // Flip one character in the middle, where the sealed payload or its MAC lives.
    let mut tampered: Vec<char> = state.chars().collect();
    let middle = tampered.len() / 2;
    tampered[middle] = if tampered[middle] == 'A' { 'B' } else { 'A' };
    let tampered: String = tampered.into_iter().collect();

    let answer = json!({ "user_name": { "action": "accept", "content": { "name": "Mallory" } } });
    let response = fixture
        .call(
            tool,
            json!({ "inputResponses": answer, "requestState": tampered }),
        )
        .await;
    assert!(response.get("result").is_none(), "{response}");
    assert!(response["error"]["code"].is_i64(), "{response}");
}

#[tokio::test]
async fn missing_and_malformed_answers_are_asked_again_or_refused() {
    let fixture = Fixture::start().await;
    let tool = "test_input_required_result_elicitation";
    // An answer under the wrong key: ask again rather than fail.
    let wrong_key = json!({ "inputResponses": { "wrong_key": { "action": "accept", "content": { "data": "x" } } } });
    let response = fixture.call(tool, wrong_key).await;
    assert_eq!(result_type(&response), "input_required", "{response}");

    // Extra keys next to the right one are ignored.
    let extra = json!({ "inputResponses": {
        "user_name": { "action": "accept", "content": { "name": "Alice" } },
        "unknown_extra_key": { "action": "accept", "content": { "foo": "bar" } }
    } });
    let response = fixture.call(tool, extra).await;
    assert_eq!(result_type(&response), "complete", "{response}");

    // An answer that is not an elicitation result is a protocol error.
    for malformed in [
        json!(12345),
        json!(null),
        json!({ "action": "accept", "content": { "name": 5 } }),
    ] {
        let response = fixture
            .call(
                tool,
                json!({ "inputResponses": { "user_name": malformed } }),
            )
            .await;
        assert_eq!(response["error"]["code"], -32602, "{response}");
    }
}

#[tokio::test]
async fn multi_round_issues_a_new_state_each_round() {
    let fixture = Fixture::start().await;
    let tool = "test_input_required_result_multi_round";
    let round_1 = fixture.call(tool, json!({})).await;
    assert!(
        round_1["result"]["inputRequests"]["step1"].is_object(),
        "{round_1}"
    );
    let state_1 = round_1["result"]["requestState"].clone();

    let name = json!({ "step1": { "action": "accept", "content": { "name": "Alice" } } });
    let round_2 = fixture
        .call(
            tool,
            json!({ "inputResponses": name, "requestState": state_1 }),
        )
        .await;
    assert_eq!(result_type(&round_2), "input_required", "{round_2}");
    assert!(
        round_2["result"]["inputRequests"]["step2"].is_object(),
        "{round_2}"
    );
    let state_2 = round_2["result"]["requestState"].clone();
    assert_ne!(state_1, state_2);

    let color = json!({ "step2": { "action": "accept", "content": { "color": "blue" } } });
    let round_3 = fixture
        .call(
            tool,
            json!({ "inputResponses": color, "requestState": state_2 }),
        )
        .await;
    assert_eq!(result_type(&round_3), "complete", "{round_3}");
    assert!(
        first_text(&round_3).contains("Alice") && first_text(&round_3).contains("blue"),
        "{round_3}"
    );
}

#[tokio::test]
async fn input_requests_follow_the_declared_capabilities() {
    let fixture = Fixture::start().await;
    // Sampling only: one sampling request and no elicitation.
    let (_, response) = fixture
        .call_with(
            "test_input_required_result_capabilities",
            json!({}),
            json!({ "sampling": {} }),
        )
        .await;
    let requests = response["result"]["inputRequests"]
        .as_object()
        .expect("input requests");
    let methods: Vec<&str> = requests
        .values()
        .filter_map(|request| request["method"].as_str())
        .collect();
    assert_eq!(methods, ["sampling/createMessage"], "{response}");

    // Nothing declared: nothing can be asked, and the tool says so.
    let (_, response) = fixture
        .call_with(
            "test_input_required_result_capabilities",
            json!({}),
            json!({}),
        )
        .await;
    assert_eq!(result_type(&response), "complete", "{response}");

    // Multiple inputs with only roots declared: only the roots request.
    let (_, response) = fixture
        .call_with(
            "test_input_required_result_multiple_inputs",
            json!({}),
            json!({ "roots": {} }),
        )
        .await;
    let requests = response["result"]["inputRequests"]
        .as_object()
        .expect("input requests");
    assert_eq!(
        requests.keys().collect::<Vec<_>>(),
        ["client_roots"],
        "{response}"
    );

    // A tool that needs elicitation, asked without it: -32021 naming elicitation.
    let (status, response) = fixture
        .call_with("test_streaming_elicitation", json!({}), json!({}))
        .await;
    assert_eq!(status, 400, "{response}");
    assert_eq!(response["error"]["code"], -32021, "{response}");
    assert!(
        response["error"]["data"]["requiredCapabilities"]["elicitation"].is_object(),
        "{response}"
    );
}

#[tokio::test]
async fn missing_capability_needs_sampling() {
    let fixture = Fixture::start().await;
    let (status, response) = fixture
        .call_with("test_missing_capability", json!({}), json!({}))
        .await;
    assert_eq!(status, 400, "{response}");
    assert_eq!(response["error"]["code"], -32021, "{response}");
    assert_eq!(
        response["error"]["data"]["requiredCapabilities"],
        json!({ "sampling": {} }),
        "{response}"
    );

    let (status, response) = fixture
        .call_with(
            "test_missing_capability",
            json!({}),
            json!({ "sampling": {} }),
        )
        .await;
    assert_eq!(status, 200, "{response}");
    assert_eq!(result_type(&response), "complete", "{response}");
}

#[tokio::test]
async fn progress_is_streamed_before_the_result() {
    let fixture = Fixture::start().await;
    let params = json!({
        "name": "test_tool_with_progress",
        "arguments": {},
        "_meta": { "progressToken": "progress-test-1" }
    });
    let response = fixture.post("tools/call", params, json!({})).await;
    assert_eq!(response.status().as_u16(), 200);
    let content_type = response.headers()["content-type"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let body = response.text().await.expect("body");
    let messages: Vec<Value> = body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| serde_json::from_str(data.trim()).expect("one JSON message per data line"))
        .collect();

    let progress: Vec<f64> = messages
        .iter()
        .filter(|message| message["method"] == "notifications/progress")
        .inspect(|message| assert_eq!(message["params"]["progressToken"], "progress-test-1"))
        .map(|message| {
            message["params"]["progress"]
                .as_f64()
                .expect("numeric progress")
        })
        .collect();
    assert!(progress.len() >= 3, "{body}");
    assert!(
        progress.windows(2).all(|pair| pair[0] <= pair[1]),
        "{progress:?}"
    );

    let last = messages.last().expect("at least one message");
    assert_eq!(last["id"], 7, "the result comes last: {body}");
    assert_eq!(result_type(last), "complete", "{body}");
}

#[tokio::test]
async fn content_tools_return_their_blocks() {
    let fixture = Fixture::start().await;
    let image = fixture.call("test_image_content", json!({})).await;
    assert_eq!(image["result"]["content"][0]["type"], "image", "{image}");
    assert_eq!(
        image["result"]["content"][0]["mimeType"], "image/png",
        "{image}"
    );

    let audio = fixture.call("test_audio_content", json!({})).await;
    assert_eq!(
        audio["result"]["content"][0]["mimeType"], "audio/wav",
        "{audio}"
    );

    let resource = fixture.call("test_embedded_resource", json!({})).await;
    assert_eq!(
        resource["result"]["content"][0]["resource"]["uri"], "test://embedded-resource",
        "{resource}"
    );

    let mixed = fixture.call("test_multiple_content_types", json!({})).await;
    let types: Vec<&str> = mixed["result"]["content"]
        .as_array()
        .expect("content")
        .iter()
        .filter_map(|block| block["type"].as_str())
        .collect();
    assert_eq!(types, ["text", "image", "resource"], "{mixed}");

    let error = fixture.call("test_error_handling", json!({})).await;
    assert_eq!(error["result"]["isError"], true, "{error}");
}

#[tokio::test]
async fn the_first_listed_tool_takes_no_arguments() {
    // The suite's http-header-validation scenario calls the first tool of
    // tools/list with `arguments: {}` and expects it to succeed.
    let fixture = Fixture::start().await;
    let (_, response) = fixture.rpc("tools/list", json!({}), json!({})).await;
    let first = response["result"]["tools"][0]["name"]
        .as_str()
        .expect("a first tool")
        .to_owned();
    assert_eq!(first, "about_fixture", "{response}");
    let response = fixture.call(&first, json!({})).await;
    assert_eq!(result_type(&response), "complete", "{response}");
}

#[tokio::test]
async fn greet_ignores_a_legacy_task_param_and_never_becomes_a_task() {
    let fixture = Fixture::start().await;
    // Where the suite puts it: a top-level `task` param, beside `arguments`.
    let legacy = json!({
        "arguments": { "name": "legacy-hint" },
        "task": { "ttl": 60000, "pollInterval": 100 }
    });
    let (status, response) = fixture
        .call_with("greet", legacy, task_capabilities())
        .await;
    assert_eq!(status, 200, "{response}");
    assert_eq!(result_type(&response), "complete", "{response}");
    assert!(response["result"].get("taskId").is_none(), "{response}");
    assert_eq!(first_text(&response), "Hello, legacy-hint!");
}

#[tokio::test]
async fn task_tools_answer_directly_without_the_extension_unless_they_require_it() {
    let fixture = Fixture::start().await;
    let (_, response) = fixture
        .call_with(
            "slow_compute",
            json!({ "arguments": { "seconds": 0 } }),
            all_capabilities(),
        )
        .await;
    assert_eq!(result_type(&response), "complete", "{response}");
    assert!(!first_text(&response).is_empty(), "{response}");

    for required in ["failing_job", "test_tool_with_task"] {
        let (status, response) = fixture
            .call_with(required, json!({}), all_capabilities())
            .await;
        assert_eq!(status, 400, "{response}");
        assert_eq!(response["error"]["code"], -32021, "{response}");
        assert!(
            response["error"]["data"]["requiredCapabilities"]["extensions"]
                ["io.modelcontextprotocol/tasks"]
                .is_object(),
            "{response}"
        );
    }
}

#[tokio::test]
async fn task_outcomes_end_in_the_statuses_the_suite_expects() {
    let fixture = Fixture::start().await;
    let done = fixture
        .start_task("slow_compute", json!({ "seconds": 0.2, "label": "quick" }))
        .await;
    let tool_error = fixture.start_task("failing_job", json!({})).await;
    let protocol_error = fixture.start_task("protocol_error_job", json!({})).await;

    let task = fixture.wait_for_end(&done).await;
    assert_eq!(task["status"], "completed", "{task}");
    assert!(
        task["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("quick")),
        "{task}"
    );

    // A tool error is still a completed task; the error is in the result.
    let task = fixture.wait_for_end(&tool_error).await;
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["result"]["isError"], true, "{task}");

    // A JSON-RPC error fails the task, with the error and no result.
    let task = fixture.wait_for_end(&protocol_error).await;
    assert_eq!(task["status"], "failed", "{task}");
    assert!(task["error"]["code"].is_i64(), "{task}");
    assert!(task.get("result").is_none(), "{task}");
}

#[tokio::test]
async fn confirm_delete_waits_in_its_task_for_tasks_update() {
    let fixture = Fixture::start().await;
    let task_id = fixture
        .start_task("confirm_delete", json!({ "filename": "report.csv" }))
        .await;
    let task = fixture.wait_for(&task_id, &["input_required"]).await;
    let requests = task["inputRequests"].as_object().expect("input requests");
    assert_eq!(requests.len(), 1, "{task}");
    let (key, request) = requests.iter().next().expect("one request");
    assert_eq!(request["method"], "elicitation/create", "{task}");
    assert_eq!(
        request["params"]["requestedSchema"]["properties"]["confirm"]["type"], "boolean",
        "{task}"
    );

    // An answer under an unknown key is acknowledged and changes nothing.
    let ack = fixture
        .task_request(
            "tasks/update",
            json!({ "taskId": task_id, "inputResponses": { "unknown-key": { "ignored": true } } }),
        )
        .await;
    assert_eq!(ack["resultType"], "complete", "{ack}");
    for envelope_field in ["taskId", "status", "result", "error", "inputRequests"] {
        assert!(ack.get(envelope_field).is_none(), "{ack}");
    }
    let task = fixture
        .task_request("tasks/get", json!({ "taskId": task_id }))
        .await;
    assert_eq!(task["status"], "input_required", "{task}");

    let answer = json!({ key: { "action": "accept", "content": { "confirm": true } } });
    fixture
        .task_request(
            "tasks/update",
            json!({ "taskId": task_id, "inputResponses": answer }),
        )
        .await;
    let task = fixture.wait_for_end(&task_id).await;
    assert_eq!(task["status"], "completed", "{task}");
    assert!(
        task["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.starts_with("Deleted report.csv")),
        "{task}"
    );
}

#[tokio::test]
async fn confirm_delete_asks_by_input_required_without_the_extension() {
    let fixture = Fixture::start().await;
    let arguments = json!({ "filename": "report.csv" });
    let round_1 = fixture
        .call("confirm_delete", json!({ "arguments": arguments }))
        .await;
    assert_eq!(result_type(&round_1), "input_required", "{round_1}");
    let state = round_1["result"]["requestState"].clone();
    let answer = json!({ "confirm": { "action": "decline" } });
    let round_2 = fixture
        .call(
            "confirm_delete",
            json!({ "arguments": arguments, "inputResponses": answer, "requestState": state }),
        )
        .await;
    assert_eq!(result_type(&round_2), "complete", "{round_2}");
    assert!(
        first_text(&round_2).starts_with("Kept report.csv"),
        "{round_2}"
    );
}

#[tokio::test]
async fn multi_input_keeps_the_unanswered_request_pending() {
    let fixture = Fixture::start().await;
    let task_id = fixture.start_task("multi_input", json!({})).await;
    let task = fixture.wait_for(&task_id, &["input_required"]).await;
    let keys: Vec<String> = task["inputRequests"]
        .as_object()
        .expect("input requests")
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys.len(), 2, "{task}");

    // The suite answers each key with both fields; each request reads its own.
    let content = json!({ "name": "partial-1", "confirm": true });
    fixture
        .task_request(
            "tasks/update",
            json!({ "taskId": task_id, "inputResponses": { &keys[0]: { "action": "accept", "content": content } } }),
        )
        .await;
    let task = fixture
        .task_request("tasks/get", json!({ "taskId": task_id }))
        .await;
    assert_eq!(task["status"], "input_required", "{task}");
    let pending: Vec<&String> = task["inputRequests"]
        .as_object()
        .expect("input requests")
        .keys()
        .collect();
    assert_eq!(pending, [&keys[1]], "{task}");

    fixture
        .task_request(
            "tasks/update",
            json!({ "taskId": task_id, "inputResponses": { &keys[1]: { "action": "accept", "content": content } } }),
        )
        .await;
    let task = fixture.wait_for_end(&task_id).await;
    assert_eq!(task["status"], "completed", "{task}");
    assert!(
        task["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("partial-1")),
        "{task}"
    );
}

#[tokio::test]
async fn test_tool_with_task_asks_before_the_task_exists() {
    let fixture = Fixture::start().await;
    let (_, round_1) = fixture
        .call_with("test_tool_with_task", json!({}), task_capabilities())
        .await;
    assert_eq!(result_type(&round_1), "input_required", "{round_1}");
    assert!(round_1["result"].get("taskId").is_none(), "{round_1}");
    assert_eq!(
        round_1["result"]["inputRequests"]["user_name"]["method"], "elicitation/create",
        "{round_1}"
    );
    let state = round_1["result"]["requestState"].clone();

    let answer = json!({ "user_name": { "action": "accept", "content": { "name": "Alice" } } });
    let (_, round_2) = fixture
        .call_with(
            "test_tool_with_task",
            json!({ "inputResponses": answer, "requestState": state }),
            task_capabilities(),
        )
        .await;
    assert_eq!(result_type(&round_2), "task", "{round_2}");
    assert!(round_2["result"].get("requestState").is_none(), "{round_2}");
    let task_id = round_2["result"]["taskId"].as_str().expect("a taskId");

    let task = fixture.wait_for_end(task_id).await;
    assert_eq!(task["status"], "completed", "{task}");
    assert!(
        task["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("Alice")),
        "{task}"
    );
}

/// The fixture through `rmcp`, the official Rust SDK, as a client that shares no
/// code with Docket: it negotiates by `server/discover` and speaks the tasks
/// extension by its own reading of the spec.
mod rmcp_client {
    use rmcp::model::{
        CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
        ClientConfig, ExtensionCapabilities, GetTaskParams, GetTaskResult, Implementation,
        JsonObject, ProtocolVersion, TASKS_EXTENSION_ID, TaskPayload, TaskStatus,
    };
    use rmcp::service::RunningService;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::{ClientLifecycleMode, ClientServiceExt as _, RoleClient};

    use super::*;

    type Client = RunningService<RoleClient, ClientConfig>;

    /// Connects at 2026-07-28 by `server/discover`, declaring the tasks extension.
    async fn connect(fixture: &Fixture) -> Client {
        // rmcp's capability builders are compiled only with its server feature, so
        // the extension is declared on the struct directly.
        let mut capabilities = ClientCapabilities::default();
        capabilities.extensions = Some(ExtensionCapabilities::from([(
            TASKS_EXTENSION_ID.to_owned(),
            JsonObject::new(),
        )]));
        let info = ClientConfig::new(
            capabilities,
            Implementation::new("docket-fixture-rmcp-tests", "0"),
        );
        let transport =
            StreamableHttpClientTransport::from_uri(format!("http://{}/mcp", fixture.addr));
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let client = guarded(
            "connecting",
            info.serve_with_lifecycle(transport, lifecycle),
        )
        .await
        .expect("rmcp connects by server/discover");
        let server = client.peer_info().expect("the discover result");
        assert_eq!(server.protocol_version, ProtocolVersion::V_2026_07_28);
        assert!(server.capabilities.supports_tasks(), "{server:?}");
        client
    }

    /// Calls `slow_compute` for `seconds` and returns the id of the task it became.
    async fn start_slow_compute(client: &Client, seconds: u64) -> String {
        let arguments = json!({ "seconds": seconds, "label": "rmcp" });
        let params = CallToolRequestParams::new("slow_compute").with_arguments(
            arguments
                .as_object()
                .expect("arguments are an object")
                .clone(),
        );
        let response = guarded("tools/call", client.call_tool_once(params))
            .await
            .expect("tools/call");
        match response {
            CallToolResponse::Task(created) => {
                assert!(!created.task.status.is_terminal(), "{created:?}");
                created.task.task_id
            }
            other => panic!("slow_compute should have become a task: {other:?}"),
        }
    }

    /// Polls `tasks/get` until the task has ended.
    async fn wait_for_end(client: &Client, task_id: &str) -> GetTaskResult {
        guarded(&format!("task {task_id} ending"), async {
            loop {
                let result = client
                    .peer()
                    .get_task(GetTaskParams::new(task_id))
                    .await
                    .expect("tasks/get");
                if result.task.status().is_terminal() {
                    return result;
                }
                tokio::time::sleep(POLL_INTERVAL).await;
            }
        })
        .await
    }

    #[tokio::test]
    async fn rmcp_follows_a_task_to_its_result() {
        let fixture = Fixture::start().await;
        let client = connect(&fixture).await;
        let task_id = start_slow_compute(&client, 1).await;

        let ended = wait_for_end(&client, &task_id).await;
        assert_eq!(ended.task.task.task_id, task_id);
        match &ended.task.payload {
            TaskPayload::Completed { result } => {
                let text = result["content"][0]["text"].as_str().unwrap_or_default();
                assert!(text.contains("rmcp"), "{result:?}");
            }
            other => panic!("the task should have completed: {other:?}"),
        }
        guarded("closing", client.cancel())
            .await
            .expect("the client closes");
    }

    #[tokio::test]
    async fn rmcp_cancels_a_running_task() {
        let fixture = Fixture::start().await;
        let client = connect(&fixture).await;
        let task_id = start_slow_compute(&client, 60).await;

        guarded(
            "tasks/cancel",
            client.peer().cancel_task(CancelTaskParams::new(&task_id)),
        )
        .await
        .expect("tasks/cancel is acknowledged");
        let ended = wait_for_end(&client, &task_id).await;
        assert_eq!(ended.task.status(), TaskStatus::Cancelled, "{ended:?}");
        guarded("closing", client.cancel())
            .await
            .expect("the client closes");
    }
}

#[tokio::test]
async fn a_temporary_sqlite_store_is_removed_with_the_fixture_store() {
    let parent = std::env::temp_dir();
    let store = fixture_store(FixtureDatabase::TemporarySqlite { parent })
        .await
        .expect("the store opens");
    assert_eq!(store.backend(), docket_storage::Backend::Sqlite);
    let folder = store
        .temporary_folder()
        .expect("a temporary folder")
        .to_owned();
    assert!(folder.join("tasks.db").is_file(), "{}", folder.display());
    drop(store);
    assert!(!folder.exists(), "{} is removed", folder.display());
}

#[tokio::test]
async fn a_database_url_of_another_kind_is_refused() {
    let result = fixture_store(FixtureDatabase::Postgres("sqlite:///tmp/x.db".into())).await;
    assert!(
        matches!(result, Err(docket_fixture::FixtureStoreError::NotPostgres)),
        "a sqlite url is not taken for PostgreSQL"
    );
}

/// The fixture through `rmcp` in its session mode: it opens with `initialize`
/// (revision 2025-11-25), keeps the `Mcp-Session-Id`, and answers the server's
/// question by its own elicitation handler. rmcp speaks tasks only as the current
/// era's extension, so no 2025-11-25 task is asked of it here.
mod rmcp_session {
    use rmcp::model::{
        CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
        ElicitationAction, ElicitationCapability, Implementation, ProtocolVersion,
    };
    use rmcp::service::RequestContext;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt as _, ErrorData, RoleClient};

    use super::*;

    /// A client that declares form elicitation and answers as a person would.
    struct Answering;

    /// The consent prompts `Answering` accepted.
    static CONSENTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    impl ClientHandler for Answering {
        fn get_info(&self) -> ClientConfig {
            let mut capabilities = ClientCapabilities::default();
            let mut elicitation = ElicitationCapability::default();
            elicitation.form = Some(Default::default());
            capabilities.elicitation = Some(elicitation);
            ClientConfig::new(
                capabilities,
                Implementation::new("docket-fixture-rmcp-session", "0"),
            )
        }

        async fn create_elicitation(
            &self,
            request: ElicitRequestParams,
            _context: RequestContext<RoleClient>,
        ) -> Result<ElicitResult, ErrorData> {
            let consent = serde_json::to_value(&request)
                .ok()
                .and_then(|params| params["message"].as_str().map(str::to_owned))
                .is_some_and(|message| message.starts_with("Run this statement on warehouse?"));
            let content = if consent {
                CONSENTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                json!({"proceed": true})
            } else {
                json!({"username": "ferris", "email": "ferris@example.com"})
            };
            Ok(ElicitResult::new(ElicitationAction::Accept).with_content(content))
        }
    }

    fn call(name: &str, arguments: Value) -> CallToolRequestParams {
        CallToolRequestParams::new(name.to_owned()).with_arguments(
            arguments
                .as_object()
                .expect("arguments are an object")
                .clone(),
        )
    }

    #[tokio::test]
    async fn rmcp_in_session_mode_lists_calls_and_answers_a_question() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("rmcp=trace")
            .with_test_writer()
            .try_init();
        let fixture = Fixture::start().await;
        let transport =
            StreamableHttpClientTransport::from_uri(format!("http://{}/mcp", fixture.addr));
        let client = guarded(
            "connecting",
            Answering.serve_with_lifecycle(transport, ClientLifecycleMode::Initialize),
        )
        .await
        .expect("rmcp connects by initialize");
        let server = client.peer_info().expect("the initialize result");
        assert_eq!(server.protocol_version, ProtocolVersion::V_2025_11_25);
        assert_eq!(
            server.server_info.as_ref().map(|info| info.name.as_str()),
            Some("docket")
        );

        let tools = guarded("tools/list", client.list_all_tools())
            .await
            .expect("tools/list");
        for name in ["platform_info", "test_simple_text", "test_elicitation"] {
            assert!(
                tools.iter().any(|tool| tool.name == name),
                "{name} is listed"
            );
        }
        let me = guarded(
            "platform_info",
            client.call_tool(call("platform_info", json!({}))),
        )
        .await
        .expect("platform_info");
        assert_ne!(me.is_error, Some(true), "{me:?}");
        let text = guarded(
            "test_simple_text",
            client.call_tool(call("test_simple_text", json!({}))),
        )
        .await
        .expect("test_simple_text");
        assert_ne!(text.is_error, Some(true), "{text:?}");

        // The question arrives as elicitation/create on the call's stream; rmcp
        // answers it in a POST of its own and the call goes on with the answer.
        let asked = guarded(
            "test_elicitation",
            client.call_tool(call("test_elicitation", json!({"message": "Who are you?"}))),
        )
        .await
        .expect("test_elicitation");
        let said = match asked.content.first() {
            Some(rmcp::model::ContentBlock::Text(text)) => text.text.clone(),
            other => panic!("a text answer: {other:?}"),
        };
        assert!(said.contains("accept") && said.contains("ferris"), "{said}");
        guarded("closing", client.cancel())
            .await
            .expect("the client closes");
    }

    /// What a test of Docket's own tools holds while it runs.
    struct Served {
        addr: SocketAddr,
        _database: TestDatabase,
        _double: docket_trino_double::TrinoDouble,
        _shutdown: oneshot::Sender<()>,
    }

    /// Docket with its script tools (runs evaluated in process, as tests do) on the
    /// test database, and a Trino connection that asks before every statement.
    async fn docket_with_scripts() -> Served {
        let database = TestDatabase::postgres_or_sqlite(&PostgresServer::from_lookup(|name| {
            std::env::var(name).ok()
        }))
        .await;
        let store = database.connect().await;
        let double = docket_trino_double::TrinoDouble::start()
            .await
            .expect("the Trino double starts");
        let yaml = format!(
            "auth: {{ allow_anonymous: true, anonymous_roles: [admin] }}\n\
             connections:\n  warehouse: {{ kind: trino, url: \"{}\", user: docket, catalog: memory, \
             schema: default, consent: always }}\n",
            double.url()
        );
        let config =
            docket_server::config::Config::from_yaml(&yaml, &|_| None).expect("the configuration");
        let app = docket_server::App::builder(config)
            .task_store(store.task_store())
            .sessions(store.session_store())
            .scripts(store.script_store())
            .build()
            .expect("the app builds");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (shutdown, signal) = oneshot::channel::<()>();
        tokio::spawn(docket_server::serve(listener, app, async {
            let _ = signal.await;
        }));
        Served {
            addr,
            _database: database,
            _double: double,
            _shutdown: shutdown,
        }
    }

    #[tokio::test]
    async fn rmcp_in_session_mode_runs_a_script_and_answers_a_consent_prompt() {
        let served = docket_with_scripts().await;
        let transport =
            StreamableHttpClientTransport::from_uri(format!("http://{}/mcp", served.addr));
        let client = guarded(
            "connecting",
            Answering.serve_with_lifecycle(transport, ClientLifecycleMode::Initialize),
        )
        .await
        .expect("rmcp connects by initialize");
        let source = "total = 0\nfor i in range(1000):\n    total += i\nprint('total', total)\n";
        let saved = guarded(
            "manage_script",
            client.call_tool(call(
                "manage_script",
                json!({"command": "create", "name": "rmcp-count", "source": source}),
            )),
        )
        .await
        .expect("manage_script");
        assert_ne!(saved.is_error, Some(true), "{saved:?}");
        let ran = guarded(
            "run_script",
            client.call_tool(call("run_script", json!({"name": "rmcp-count"}))),
        )
        .await
        .expect("run_script");
        assert_ne!(ran.is_error, Some(true), "{ran:?}");
        let structured = ran.structured_content.clone().unwrap_or_default();
        assert_eq!(structured["status"], "succeeded", "{structured}");
        assert!(
            structured.to_string().contains("total 499500"),
            "{structured}"
        );
        guarded("closing", client.cancel())
            .await
            .expect("the client closes");
    }
}
