//! The earlier protocol era (2025-03-26 to 2025-11-25) on the same endpoint:
//! `initialize` opens a session in the database that any replica serves, only to
//! the identity that opened it, until it ends or sits idle too long; the tools are
//! the same; every version error names the versions Docket speaks.

use docket_server::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{
    Backend, StoredServer, TestServer, key_of, on_both_backends, read_until, users,
};

on_both_backends!(
    a_session_opened_on_one_replica_is_served_by_another_and_only_to_its_opener,
    sessions_end_on_delete_and_after_sitting_idle,
);

/// Every revision Docket speaks, as its errors must name them.
const ALL_VERSIONS: &[&str] = &["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"];

/// Sessions that end after `idle` unused.
fn config(idle: std::time::Duration) -> Config {
    let yaml = "server: { max_sessions_per_identity: 3 }\n\
                personas:\n\
                \x20 analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.server.session_idle_timeout = idle;
    config.auth = users(&[("alice", &["analyst"]), ("bob", &["analyst"])]);
    config
}

const AN_HOUR: std::time::Duration = std::time::Duration::from_secs(3600);

/// An earlier-era client: no `_meta`, no `Mcp-Method`, a session once it has one.
struct LegacyClient<'a> {
    server: &'a TestServer,
    user: &'a str,
    session: Option<String>,
    version: Option<&'a str>,
    /// What `initialize` declares.
    capabilities: Value,
}

impl<'a> LegacyClient<'a> {
    fn new(server: &'a TestServer, user: &'a str) -> Self {
        Self {
            server,
            user,
            session: None,
            version: None,
            capabilities: json!({"elicitation": {}}),
        }
    }

    /// Posts one message; returns the status, the session header and the body.
    async fn post(&self, message: Value) -> (StatusCode, Option<String>, Value) {
        let mut request = self
            .server
            .http
            .post(self.server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("x-api-key", key_of(self.user))
            .json(&message);
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        if let Some(version) = self.version {
            request = request.header("mcp-protocol-version", version);
        }
        let response = request.send().await.expect("request sent");
        let status = response.status();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let streamed = response
            .headers()
            .get("content-type")
            .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
        let text = response.text().await.expect("body");
        // A streamed answer ends with the response; what came before it is dropped.
        let body = if streamed {
            crate::support::sse_messages(&text)
                .pop()
                .unwrap_or(Value::Null)
        } else {
            serde_json::from_str(&text).unwrap_or(Value::Null)
        };
        (status, session, body)
    }

    async fn request(&self, method: &str, params: Value) -> (StatusCode, Value) {
        let (status, _, body) = self
            .post(json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}))
            .await;
        (status, body)
    }

    /// `initialize` for `version`; keeps the session and the negotiated version.
    async fn initialize(&mut self, version: &'a str) -> Value {
        let (status, session, body) = self
            .post(json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": self.capabilities,
                    "clientInfo": {"name": "legacy-tests", "version": "1.0.0"}
                }
            }))
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let session = session.expect("initialize names a session");
        assert_eq!(session.len(), 32, "{session}");
        assert!(session.bytes().all(|byte| byte.is_ascii_hexdigit()));
        self.session = Some(session);
        body["result"].clone()
    }
}

/// Posts `message` as a current-era `tools/list` with the header `version`, as alice.
async fn post_current_era(
    server: &TestServer,
    version: &str,
    message: Value,
) -> (StatusCode, Value) {
    let response = server
        .http
        .post(server.url("/mcp"))
        .header("content-type", "application/json")
        .header("x-api-key", key_of("alice"))
        .header("mcp-protocol-version", version)
        .header("mcp-method", "tools/list")
        .json(&message)
        .send()
        .await
        .expect("sent");
    let status = response.status();
    (status, response.json().await.expect("json"))
}

/// Asserts that `message` names every version Docket speaks.
fn names_every_version(message: &str) {
    for version in ALL_VERSIONS {
        assert!(
            message.contains(version),
            "{version} missing in {message:?}"
        );
    }
}

async fn a_session_opened_on_one_replica_is_served_by_another_and_only_to_its_opener(
    backend: Backend,
) {
    let Some(database) = backend.database().await else {
        return;
    };
    let first = StoredServer::start(config(AN_HOUR), &database, false).await;
    let second = StoredServer::start(config(AN_HOUR), &database, false).await;

    // Negotiation: a version Docket speaks is kept; any other gets its newest.
    for (asked, answered) in [
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2024-11-05", "2025-11-25"),
    ] {
        let mut client = LegacyClient::new(&first.server, "alice");
        let result = client.initialize(asked).await;
        assert_eq!(result["protocolVersion"], answered, "{result}");
    }
    let mut alice = LegacyClient::new(&first.server, "alice");
    let result = alice.initialize("2025-11-25").await;
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(result["serverInfo"]["name"], "docket");
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    assert!(result["capabilities"]["logging"].is_object(), "{result}");
    assert!(result["instructions"].is_string());
    assert!(result.get("resultType").is_none(), "{result}");
    alice.version = Some("2025-11-25");

    let (status, _, body) = alice
        .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let (status, body) = alice.request("ping", json!({})).await;
    assert_eq!((status, &body["result"]), (StatusCode::OK, &json!({})));

    // The same tools, in this era's shape.
    let (status, body) = alice.request("tools/list", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let tools = body["result"]["tools"].as_array().expect("tools");
    assert!(tools.iter().any(|tool| tool["name"] == "platform_info"));
    assert!(body["result"].get("resultType").is_none(), "{body}");
    let (status, body) = alice
        .request(
            "tools/call",
            json!({"name": "platform_info", "arguments": {}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["result"]["content"].is_array(), "{body}");
    assert!(body["result"].get("resultType").is_none(), "{body}");
    assert!(
        body["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|text| text.contains("apikey:alice")),
        "{body}"
    );

    // Any replica serves the session: it lives in the database.
    let mut elsewhere = LegacyClient::new(&second.server, "alice");
    elsewhere.session = alice.session.clone();
    let (status, body) = elsewhere.request("ping", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The log level chosen on one replica is the session's.
    let (status, body) = elsewhere
        .request("logging/setLevel", json!({"level": "warning"}))
        .await;
    assert_eq!((status, &body["result"]), (StatusCode::OK, &json!({})));
    let (status, body) = elsewhere
        .request("logging/setLevel", json!({"level": "loud"}))
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a session's errors keep 200: {body}"
    );
    assert_eq!(body["error"]["code"], -32602, "{body}");

    // To anyone else the session does not exist: the same 404 as an unknown one.
    let mut bob = LegacyClient::new(&first.server, "bob");
    bob.session = alice.session.clone();
    let (status, not_yours) = bob.request("ping", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{not_yours}");
    bob.session = Some("0".repeat(32));
    let (status, unknown) = bob.request("ping", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(not_yours["error"], unknown["error"]);
    assert_eq!(unknown["error"]["code"], -32001);

    // A method this server does not serve: an error inside the session, not a 404.
    let (status, body) = alice.request("prompts/list", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["error"]["code"], -32601, "{body}");

    // The header must name the session's revision, and a revision Docket speaks.
    alice.version = Some("2025-06-18");
    let (status, body) = alice.request("ping", json!({})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    alice.version = Some("1999-01-01");
    let (status, body) = alice.request("ping", json!({})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    names_every_version(body["error"]["message"].as_str().unwrap_or_default());
    assert_eq!(body["error"]["data"]["requested"], "1999-01-01");

    // Without a session, a request of this era is told to initialize first.
    let mut stranger = LegacyClient::new(&first.server, "alice");
    stranger.version = Some("2025-11-25");
    let (status, body) = stranger.request("tools/list", json!({})).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("initialize"), "{message}");
    names_every_version(message);

    // The current era is unchanged beside it, and its version errors name both eras.
    let (status, body) = first
        .server
        .rpc("tools/list", json!({}))
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["resultType"], "complete");
    let (status, body) = post_current_era(
        &first.server,
        "1999-01-01",
        json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/list",
            "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "1999-01-01",
                "io.modelcontextprotocol/clientCapabilities": {}
            }}
        }),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32022, "{body}");
    names_every_version(body["error"]["message"].as_str().unwrap_or_default());
    let (status, body) = post_current_era(
        &first.server,
        "2026-07-28",
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], -32602);
    names_every_version(body["error"]["message"].as_str().unwrap_or_default());
}

async fn sessions_end_on_delete_and_after_sitting_idle(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let stored =
        StoredServer::start(config(std::time::Duration::from_secs(1)), &database, false).await;
    let server = &stored.server;
    let delete = |user: &str, session: Option<&str>| {
        let mut request = server
            .http
            .delete(server.url("/mcp"))
            .header("x-api-key", key_of(user));
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };

    let mut alice = LegacyClient::new(server, "alice");
    alice.initialize("2025-11-25").await;
    let session = alice.session.clone().expect("session");
    let status =
        |response: Result<reqwest::Response, reqwest::Error>| response.expect("sent").status();
    assert_eq!(
        status(delete("alice", None).await),
        StatusCode::METHOD_NOT_ALLOWED
    );
    assert_eq!(
        status(delete("bob", Some(&session)).await),
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        status(delete("alice", Some(&session)).await),
        StatusCode::OK
    );
    let (status_after, body) = alice.request("ping", json!({})).await;
    assert_eq!(status_after, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(
        status(delete("alice", Some(&session)).await),
        StatusCode::NOT_FOUND
    );
    // Notifications inside an ended session are refused too.
    let (status_after, _, _) = alice
        .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    assert_eq!(status_after, StatusCode::NOT_FOUND);

    // A session unused for longer than the idle timeout is gone; one in use is not.
    let mut idle = LegacyClient::new(server, "alice");
    idle.initialize("2025-11-25").await;
    let (status_now, _) = idle.request("ping", json!({})).await;
    assert_eq!(status_now, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let (status_later, body) = idle.request("ping", json!({})).await;
    assert_eq!(status_later, StatusCode::NOT_FOUND, "{body}");

    // One identity holds at most three sessions: a fourth ends its least recently
    // used one; another identity's session is untouched.
    let mut bob = LegacyClient::new(server, "bob");
    bob.initialize("2025-11-25").await;
    let mut opened = Vec::new();
    for _ in 0..4 {
        let mut client = LegacyClient::new(server, "alice");
        client.initialize("2025-11-25").await;
        opened.push(client);
    }
    let (oldest, _) = opened[0].request("ping", json!({})).await;
    assert_eq!(
        oldest,
        StatusCode::NOT_FOUND,
        "the least recently used ended"
    );
    for client in &opened[1..] {
        assert_eq!(client.request("ping", json!({})).await.0, StatusCode::OK);
    }
    assert_eq!(bob.request("ping", json!({})).await.0, StatusCode::OK);
}

/// A tool that logs at three levels, and one that needs consent (as the Trino tools
/// ask for it) or sampling.
fn app_with_logging_and_consent_tools() -> docket_server::App {
    use docket_protocol::logging::LogLevel;
    use docket_protocol::meta::ClientCapabilities;
    use docket_protocol::tools::CallToolResult;
    use docket_server::{ToolCall, ToolError, ToolOutcome, ToolSpec};

    let no_arguments = || json!({"type": "object", "properties": {}});
    let mut config = Config::embedded_default();
    config.auth = users(&[("alice", &["admin"])]);
    docket_server::App::builder(config)
        .tool(
            ToolSpec::new(
                "log_thrice",
                "Logs at debug, info and error.",
                no_arguments(),
            ),
            |call: ToolCall| async move {
                for (level, text) in [
                    (LogLevel::Debug, "looking"),
                    (LogLevel::Info, "found"),
                    (LogLevel::Error, "broke"),
                ] {
                    call.log.log(level, Some("log_thrice"), json!(text));
                }
                ToolOutcome::from(CallToolResult::text("logged"))
            },
        )
        .and_then(|builder| {
            builder.tool(
                ToolSpec::new("needs_consent", "Asks before it runs.", no_arguments()),
                |_call: ToolCall| async move {
                    ToolOutcome::Error(ToolError::MissingCapability {
                        message: "Dropping table t needs your consent.".to_owned(),
                        required: Box::new(ClientCapabilities::with_elicitation()),
                    })
                },
            )
        })
        .and_then(|builder| {
            builder.tool(
                ToolSpec::new("needs_sampling", "Asks a model.", no_arguments()),
                |_call: ToolCall| async move {
                    ToolOutcome::Error(ToolError::MissingCapability {
                        message: "This tool asks the client's model.".to_owned(),
                        required: Box::new(ClientCapabilities::with_sampling()),
                    })
                },
            )
        })
        .expect("tools")
        .build()
        .expect("app")
}

/// Log messages reach a session that chose a level, at and above it, on the call's
/// stream; a session that chose none, and a current-era request without logLevel,
/// get a plain answer without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_messages_reach_only_callers_that_asked_at_their_level() {
    let server = TestServer::start(app_with_logging_and_consent_tools()).await;
    let call = json!({"name": "log_thrice", "arguments": {}});

    let mut quiet = LegacyClient::new(&server, "alice");
    quiet.initialize("2025-11-25").await;
    let (status, body) = quiet.request("tools/call", call.clone()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["result"]["content"][0]["text"], "logged", "{body}");

    let mut listening = LegacyClient::new(&server, "alice");
    listening.initialize("2025-11-25").await;
    let (status, _) = listening
        .request("logging/setLevel", json!({"level": "info"}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let response = server
        .http
        .post(server.url("/mcp"))
        .header("content-type", "application/json")
        .header("x-api-key", key_of("alice"))
        .header(
            "mcp-session-id",
            listening.session.as_deref().unwrap_or_default(),
        )
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call}))
        .send()
        .await
        .expect("sent");
    let text = response.text().await.expect("body");
    let messages = crate::support::sse_messages(&text);
    let logged: Vec<(&str, &str)> = messages
        .iter()
        .filter(|message| message["method"] == "notifications/message")
        .map(|message| {
            (
                message["params"]["level"].as_str().unwrap_or_default(),
                message["params"]["data"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(logged, [("info", "found"), ("error", "broke")], "{text}");
    let last = messages.last().expect("the answer");
    assert_eq!(last["id"], 9);
    assert_eq!(last["result"]["content"][0]["text"], "logged");
    assert!(last["result"].get("resultType").is_none(), "{last}");

    // The current era: only with `_meta` logLevel, at that level.
    let mut rpc = server
        .rpc("tools/call", call.clone())
        .header("x-api-key", &key_of("alice"));
    rpc.body["params"]["_meta"]["io.modelcontextprotocol/logLevel"] = json!("error");
    let text = rpc.response().await.text().await.expect("body");
    let levels: Vec<Value> = crate::support::sse_messages(&text)
        .into_iter()
        .filter(|message| message["method"] == "notifications/message")
        .map(|message| message["params"]["level"].clone())
        .collect();
    assert_eq!(levels, [json!("error")], "{text}");
    let (status, body) = server
        .rpc("tools/call", call)
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["result"]["content"][0]["text"], "logged", "{body}");
}

/// A call that needs consent is refused inside a session, never made silently, with
/// a message that says how to proceed; another missing capability is invalid params.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consent_inside_a_session_is_refused_with_a_way_forward() {
    let server = TestServer::start(app_with_logging_and_consent_tools()).await;
    let mut alice = LegacyClient::new(&server, "alice");
    alice.initialize("2025-06-18").await;
    let (status, body) = alice
        .request(
            "tools/call",
            json!({"name": "needs_consent", "arguments": {}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["isError"], true, "{body}");
    let text = body["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("Dropping table t needs your consent."),
        "{text}"
    );
    assert!(
        text.contains("2025-06-18") && text.contains("2026-07-28"),
        "{text}"
    );

    let (status, body) = alice
        .request(
            "tools/call",
            json!({"name": "needs_sampling", "arguments": {}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["error"]["code"], -32602, "{body}");
}

on_both_backends!(
    sessions_of_2025_11_25_run_durable_tasks_the_other_era_can_follow,
    a_stale_task_a_listing_tells_as_failed_is_recorded_failed,
);

/// A status a listing tells as final is recorded before it is told, as a
/// `tasks/get` does: a task whose replica went silent (it never beat) lists as
/// failed, and the row itself now says so, so the replica's ending that arrives
/// later is refused. No maintenance pass runs here to record it instead.
async fn a_stale_task_a_listing_tells_as_failed_is_recorded_failed(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let store = database.connect().await;
    let yaml = "tasks: { heartbeat_interval: 100ms, stale_after: 1s }\n\
                personas:\n\
                \x20 analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"])]);
    let app = docket_server::App::builder(config)
        .task_store(store.task_store())
        .sessions(store.session_store())
        .build()
        .expect("app");
    let server = TestServer::start_without_background(app).await;
    let tasks = store.task_store();
    // Alice's task on a replica that never beats.
    let task = docket_task::testing::new_task("silent_job");
    let created = tasks.create(task.clone()).await.expect("create");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, now) = tasks.get(&task.id).await.expect("get").expect("present");
        if now > created.heartbeat_at + std::time::Duration::from_secs(1) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the clock stood still"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let mut alice = LegacyClient::new(&server, "alice");
    alice.initialize("2025-11-25").await;
    let (status, body) = alice.request("tasks/list", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let listed = body["result"]["tasks"]
        .as_array()
        .and_then(|listed| listed.iter().find(|t| t["taskId"] == task.id.as_str()))
        .cloned()
        .unwrap_or_else(|| panic!("alice's task is listed: {body}"));
    assert_eq!(listed["status"], "failed", "{listed}");
    let (row, _) = tasks.get(&task.id).await.expect("get").expect("present");
    assert_eq!(
        row.status,
        docket_task::TaskStatus::Failed,
        "recorded, not only told"
    );
    assert_eq!(
        tasks
            .finish(
                &task.id,
                docket_task::Outcome::Completed(json!({"content": []}))
            )
            .await
            .expect("finish"),
        None,
        "the late ending is refused"
    );
}

/// An app over `database` with task tools: one that ends at once, one that runs until
/// cancelled, and one that runs only as a task.
async fn task_app(database: &docket_storage::test_db::TestDatabase) -> docket_server::App {
    use docket_protocol::tools::CallToolResult;
    use docket_server::{TaskSupport, ToolCall, ToolOutcome, ToolSpec};

    let store = database.connect().await;
    let no_arguments = || json!({"type": "object", "properties": {}});
    let yaml = "tasks: { heartbeat_interval: 100ms }\n\
                personas:\n\
                \x20 analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"]), ("bob", &["analyst"])]);
    docket_server::App::builder(config)
        .task_store(store.task_store())
        .sessions(store.session_store())
        .tool(
            ToolSpec::new("quick_job", "Ends at once.", no_arguments())
                .with_task_support(TaskSupport::Optional),
            |_call: ToolCall| async move { ToolOutcome::from(CallToolResult::text("done")) },
        )
        .and_then(|builder| {
            builder.tool(
                ToolSpec::new("held_job", "Runs until cancelled.", no_arguments())
                    .with_task_support(TaskSupport::Optional),
                |call: ToolCall| async move {
                    call.cancel.cancelled().await;
                    ToolOutcome::from(CallToolResult::text("stopped"))
                },
            )
        })
        .and_then(|builder| {
            builder.tool(
                ToolSpec::new("task_only", "Runs only as a task.", no_arguments())
                    .with_task_support(TaskSupport::Required),
                |_call: ToolCall| async move { ToolOutcome::from(CallToolResult::text("ran")) },
            )
        })
        .expect("tools")
        .build()
        .expect("app")
}

async fn sessions_of_2025_11_25_run_durable_tasks_the_other_era_can_follow(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let server = TestServer::start(task_app(&database).await).await;

    // Tasks are offered to 2025-11-25 sessions only.
    let mut older = LegacyClient::new(&server, "alice");
    let result = older.initialize("2025-06-18").await;
    assert!(result["capabilities"].get("tasks").is_none(), "{result}");
    let (_, body) = older.request("tasks/get", json!({"taskId": "0"})).await;
    assert_eq!(body["error"]["code"], -32601, "{body}");

    // alice's client declares no `tasks` of its own: in 2025-11-25 the receiver's
    // declaration (the server's, below) is what a task-augmented call needs.
    let mut alice = LegacyClient::new(&server, "alice");
    assert!(alice.capabilities.get("tasks").is_none());
    let result = alice.initialize("2025-11-25").await;
    assert_eq!(
        result["capabilities"]["tasks"]["requests"]["tools"]["call"],
        json!({}),
        "{result}"
    );
    let (_, body) = alice.request("tools/list", json!({})).await;
    let support = |name: &str| {
        body["result"]["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|tool| tool["name"] == name))
            .map(|tool| tool["execution"]["taskSupport"].clone())
    };
    assert_eq!(support("quick_job"), Some(json!("optional")));
    assert_eq!(support("task_only"), Some(json!("required")));
    assert_eq!(support("platform_info"), Some(Value::Null));

    // A task-augmented call answers with the task in this revision's names...
    let (status, body) = alice
        .request(
            "tools/call",
            json!({"name": "quick_job", "arguments": {}, "task": {"ttl": 60000}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let task = &body["result"]["task"];
    let task_id = task["taskId"].as_str().expect("a task id").to_owned();
    assert_eq!(task["status"], "working", "{body}");
    for field in ["createdAt", "lastUpdatedAt", "pollInterval"] {
        assert!(!task[field].is_null(), "{field} in {body}");
    }
    assert!(
        task.get("ttl").is_some() && task.get("ttlMs").is_none(),
        "{body}"
    );
    assert!(body["result"].get("resultType").is_none(), "{body}");

    // ...tasks/result waits for the end and returns the call's result itself...
    let (status, body) = alice
        .request("tasks/result", json!({"taskId": task_id, "task": {}}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["content"][0]["text"], "done", "{body}");
    assert_eq!(
        body["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id.as_str()
    );
    let (_, body) = alice.request("tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(body["result"]["status"], "completed", "{body}");
    assert_eq!(body["result"]["taskId"], task_id.as_str());

    // ...and the same identity follows the same row from the current era.
    let (status, body) = server
        .rpc("tasks/get", json!({"taskId": task_id}))
        .capabilities(json!({"extensions": {crate::support::TASKS: {}}}))
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["status"], "completed", "{body}");
    // Anyone else: the same answer as an unknown id.
    let mut bob = LegacyClient::new(&server, "bob");
    bob.initialize("2025-11-25").await;
    let (_, not_yours) = bob.request("tasks/get", json!({"taskId": task_id})).await;
    let (_, unknown) = bob
        .request("tasks/get", json!({"taskId": "0".repeat(32)}))
        .await;
    assert_eq!(not_yours["error"], unknown["error"]);
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    // tasks/cancel answers the task already cancelled; a second cancel is refused.
    let (_, body) = alice
        .request(
            "tools/call",
            json!({"name": "held_job", "arguments": {}, "task": {}}),
        )
        .await;
    let held = body["result"]["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let (status, body) = alice.request("tasks/cancel", json!({"taskId": held})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["status"], "cancelled", "{body}");
    let (_, body) = alice.request("tasks/cancel", json!({"taskId": held})).await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let (_, body) = alice.request("tasks/result", json!({"taskId": held})).await;
    assert!(body["error"].is_object(), "{body}");

    // A tasks/result that waits streams each status change as
    // notifications/tasks/status, then its answer.
    let (_, body) = alice
        .request(
            "tools/call",
            json!({"name": "held_job", "arguments": {}, "task": {}}),
        )
        .await;
    let waited = body["result"]["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let mut waiting = server
        .http
        .post(server.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("x-api-key", key_of("alice"))
        .header("mcp-session-id", alice.session.as_deref().expect("session"))
        .json(&json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/result",
                      "params": {"taskId": waited}}))
        .send()
        .await
        .expect("sent");
    assert_eq!(waiting.headers()["content-type"], "text/event-stream");
    let (status, body) = alice
        .request("tasks/cancel", json!({"taskId": waited}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let messages = read_until(&mut waiting, |message| message["id"] == 9).await;
    let notified = messages
        .iter()
        .find(|message| message["method"] == "notifications/tasks/status")
        .unwrap_or_else(|| panic!("a status notification in {messages:?}"));
    assert_eq!(notified["params"]["taskId"], waited.as_str(), "{notified}");
    assert_eq!(notified["params"]["status"], "cancelled", "{notified}");
    assert!(notified["params"].get("ttl").is_some(), "{notified}");
    let last = messages.last().expect("the answer");
    assert!(last["error"].is_object(), "{last}");

    // A tool that never runs as a task refuses `task`; one that only does needs it.
    let (_, body) = alice
        .request(
            "tools/call",
            json!({"name": "platform_info", "arguments": {}, "task": {}}),
        )
        .await;
    assert_eq!(body["error"]["code"], -32601, "{body}");
    let (_, body) = alice
        .request("tools/call", json!({"name": "task_only", "arguments": {}}))
        .await;
    assert_eq!(body["error"]["code"], -32601, "{body}");
    // Without `task`, an optional tool answers directly.
    let (_, body) = alice
        .request("tools/call", json!({"name": "quick_job", "arguments": {}}))
        .await;
    assert_eq!(body["result"]["content"][0]["text"], "done", "{body}");
}

on_both_backends!(a_session_lists_its_callers_own_tasks_page_by_page);

/// Starts `quick_job` as a task; its id.
async fn start(client: &LegacyClient<'_>) -> String {
    let (_, body) = client
        .request(
            "tools/call",
            json!({"name": "quick_job", "arguments": {}, "task": {}}),
        )
        .await;
    body["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {body}"))
        .to_owned()
}

async fn a_session_lists_its_callers_own_tasks_page_by_page(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let server = TestServer::start(task_app(&database).await).await;
    let mut alice = LegacyClient::new(&server, "alice");
    let result = alice.initialize("2025-11-25").await;
    assert_eq!(
        result["capabilities"]["tasks"]["list"],
        json!({}),
        "{result}"
    );
    let mut bob = LegacyClient::new(&server, "bob");
    bob.initialize("2025-11-25").await;

    // More than one page (50) of alice's, and one of bob's.
    let mut started = Vec::new();
    for _ in 0..53 {
        started.push(start(&alice).await);
    }
    let bobs = start(&bob).await;

    let mut listed = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let params = match &cursor {
            Some(cursor) => json!({"cursor": cursor}),
            None => json!({}),
        };
        let (status, body) = alice.request("tasks/list", params).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        pages += 1;
        let tasks = body["result"]["tasks"].as_array().expect("tasks").clone();
        for task in &tasks {
            assert!(
                task.get("ttl").is_some() && task.get("ttlMs").is_none(),
                "{task}"
            );
            assert!(task["createdAt"].is_string(), "{task}");
        }
        listed.extend(
            tasks
                .iter()
                .map(|task| task["taskId"].as_str().expect("id").to_owned()),
        );
        match body["result"].get("nextCursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(pages < 10, "the listing ends");
    }
    assert_eq!(pages, 2, "53 tasks are two pages of 50");
    let mut expected = started.clone();
    let mut sorted = listed.clone();
    expected.sort();
    sorted.sort();
    assert_eq!(
        sorted, expected,
        "each of alice's tasks once, none of bob's"
    );
    assert!(!listed.contains(&bobs));
    // Newest first: the last task started is listed first.
    assert_eq!(listed.first(), started.last());

    let (_, body) = bob.request("tasks/list", json!({})).await;
    assert_eq!(
        body["result"]["tasks"].as_array().map(Vec::len),
        Some(1),
        "{body}"
    );
    assert_eq!(body["result"]["tasks"][0]["taskId"], bobs.as_str());
    assert!(body["result"].get("nextCursor").is_none(), "{body}");

    let (_, body) = alice
        .request("tasks/list", json!({"cursor": "not a cursor"}))
        .await;
    assert_eq!(body["error"]["code"], -32602, "{body}");
}

on_both_backends!(consent_is_asked_on_the_call_stream_and_answered_on_any_replica);

/// An app over `database` with a tool that asks before it runs.
async fn asking_app(database: &docket_storage::test_db::TestDatabase) -> docket_server::App {
    use docket_protocol::mrtr::{ElicitRequestParams, InputRequest};
    use docket_protocol::tools::CallToolResult;
    use docket_server::{ToolCall, ToolOutcome, ToolSpec};

    let store = database.connect().await;
    docket_server::App::builder(config(AN_HOUR))
        .task_store(store.task_store())
        .sessions(store.session_store())
        .tool(
            ToolSpec::new(
                "guarded",
                "Asks before it runs.",
                json!({"type": "object", "properties": {}}),
            ),
            |call: ToolCall| async move {
                let Some(round) = call.input else {
                    let question = InputRequest::Elicit(ElicitRequestParams::form(
                        "Run guarded?",
                        json!({"type": "object", "properties": {"confirm": {"type": "boolean"}}}),
                    ));
                    return ToolOutcome::InputRequired {
                        requests: [("confirm".to_owned(), question)].into_iter().collect(),
                        state: json!({"asked": true}),
                    };
                };
                let accepted = round.responses.get("confirm").is_some_and(|answer| {
                    answer["action"] == "accept" && answer["content"]["confirm"] == true
                });
                ToolOutcome::from(CallToolResult::text(if accepted {
                    "ran"
                } else {
                    "declined"
                }))
            },
        )
        .and_then(|builder| {
            builder.tool(
                ToolSpec::new(
                    "summarize",
                    "Asks the client's model.",
                    json!({"type": "object", "properties": {}}),
                ),
                |call: ToolCall| async move {
                    let Some(round) = call.input else {
                        let question = InputRequest::CreateMessage(json!({
                            "messages": [{"role": "user",
                                          "content": {"type": "text", "text": "Capital of France?"}}],
                            "maxTokens": 20
                        }));
                        return ToolOutcome::InputRequired {
                            requests: [("capital".to_owned(), question)].into_iter().collect(),
                            state: Value::Null,
                        };
                    };
                    let said = round
                        .responses
                        .get("capital")
                        .and_then(|answer| answer["content"]["text"].as_str())
                        .unwrap_or("nothing");
                    ToolOutcome::from(CallToolResult::text(format!("the model said {said}")))
                },
            )
        })
        .expect("tool")
        .build()
        .expect("app")
}

on_both_backends!(sampling_is_asked_of_a_session_that_declared_it);

async fn sampling_is_asked_of_a_session_that_declared_it(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let replica_a = TestServer::start(asking_app(&database).await).await;
    let replica_b = TestServer::start(asking_app(&database).await).await;

    // Declared at initialize: the call asks sampling/createMessage on its stream and
    // goes on with the model's answer, POSTed to the other replica.
    let mut alice = LegacyClient::new(&replica_a, "alice");
    alice.capabilities = json!({"sampling": {}});
    alice.initialize("2025-11-25").await;
    let session = alice.session.clone().expect("session");
    let summarize = || {
        replica_a
            .http
            .post(replica_a.url("/mcp"))
            .header("content-type", "application/json")
            .header("x-api-key", key_of("alice"))
            .header("mcp-session-id", &session)
            .json(&json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                          "params": {"name": "summarize", "arguments": {}}}))
            .send()
    };
    let mut elsewhere = LegacyClient::new(&replica_b, "alice");
    elsewhere.session = Some(session.clone());
    for (response, expected) in [
        (
            json!({"result": {"role": "assistant", "model": "test",
                              "content": {"type": "text", "text": "Paris"}}}),
            json!({"result": {"content": [{"type": "text", "text": "the model said Paris"}]}}),
        ),
        (
            json!({"error": {"code": -1, "message": "the user refused"}}),
            json!({"error": {"code": -32602}}),
        ),
    ] {
        let mut call = summarize().await.expect("sent");
        let messages = read_until(&mut call, |message| {
            message["method"] == "sampling/createMessage"
        })
        .await;
        let question = messages
            .iter()
            .find(|message| message["method"] == "sampling/createMessage")
            .expect("the question");
        assert_eq!(question["params"]["maxTokens"], 20, "{question}");
        let mut answer = json!({"jsonrpc": "2.0", "id": question["id"]});
        if let (Value::Object(answer), Value::Object(response)) = (&mut answer, response) {
            answer.extend(response);
        }
        let (status, _, body) = elsewhere.post(answer).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        let messages = read_until(&mut call, |message| message["id"] == 6).await;
        let last = messages.last().expect("the answer");
        match expected.get("result") {
            Some(result) => assert_eq!(last["result"]["content"], result["content"], "{last}"),
            None => {
                assert_eq!(last["error"]["code"], -32602, "{last}");
                let said = last["error"]["message"].as_str().unwrap_or_default();
                assert!(said.contains("the user refused"), "{said}");
            }
        }
    }

    // Not declared: the call is refused with what to declare, and never asks.
    let mut bob = LegacyClient::new(&replica_a, "bob");
    bob.capabilities = json!({"elicitation": {}});
    bob.initialize("2025-11-25").await;
    let (status, body) = bob
        .request("tools/call", json!({"name": "summarize", "arguments": {}}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["error"]["code"], -32602, "{body}");
    let said = body["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("sampling/createMessage"), "{said}");
}

async fn consent_is_asked_on_the_call_stream_and_answered_on_any_replica(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let replica_a = TestServer::start(asking_app(&database).await).await;
    let replica_b = TestServer::start(asking_app(&database).await).await;
    let mut alice = LegacyClient::new(&replica_a, "alice");
    alice.initialize("2025-11-25").await;
    let session = alice.session.clone().expect("session");
    let call_guarded = || {
        replica_a
            .http
            .post(replica_a.url("/mcp"))
            .header("content-type", "application/json")
            .header("x-api-key", key_of("alice"))
            .header("mcp-session-id", &session)
            .json(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                          "params": {"name": "guarded", "arguments": {}}}))
            .send()
    };

    // An answer to a question the server never asked is refused: nothing is kept.
    let (status, _, body) = alice
        .post(json!({"jsonrpc": "2.0", "id": "elicit-never-asked", "result": {"action": "accept"}}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // A question whose call's stream closed is forgotten: its late answer is refused.
    // The server learns of the close when it next writes or polls, so each try asks
    // afresh and waits a little before answering; an answer that still found its
    // question waiting (202) only means the server had not noticed yet.
    let hang_guard = std::time::Instant::now();
    loop {
        let mut abandoned = call_guarded().await.expect("sent");
        let messages = read_until(&mut abandoned, |message| {
            message["method"] == "elicitation/create"
        })
        .await;
        let abandoned_id = messages
            .iter()
            .find_map(|message| message["id"].as_str().map(str::to_owned))
            .expect("the question");
        drop(abandoned);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let (status, _, body) = alice
            .post(json!({"jsonrpc": "2.0", "id": abandoned_id, "result": {"action": "decline"}}))
            .await;
        if status == StatusCode::BAD_REQUEST {
            break;
        }
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        assert!(
            hang_guard.elapsed() < std::time::Duration::from_secs(60),
            "a closed stream's question is forgotten"
        );
    }

    for (answer, expected) in [
        (
            json!({"action": "accept", "content": {"confirm": true}}),
            "ran",
        ),
        (json!({"action": "decline"}), "declined"),
    ] {
        let mut call = call_guarded().await.expect("sent");
        assert_eq!(
            call.headers()["content-type"],
            "text/event-stream",
            "the call's answer streams"
        );
        let messages = read_until(&mut call, |message| {
            message["method"] == "elicitation/create"
        })
        .await;
        let question = messages
            .iter()
            .find(|message| message["method"] == "elicitation/create")
            .expect("the question");
        assert_eq!(question["params"]["message"], "Run guarded?", "{question}");
        let question_id = question["id"].as_str().expect("a string id").to_owned();

        // Nobody else can answer it, in any session.
        let mut bob = LegacyClient::new(&replica_b, "bob");
        bob.session = Some(session.clone());
        let (status, _, _) = bob
            .post(json!({"jsonrpc": "2.0", "id": question_id, "result": answer}))
            .await;
        assert_eq!(status, StatusCode::NOT_FOUND);

        // The answer goes to the other replica; the call on the first one takes it.
        let mut elsewhere = LegacyClient::new(&replica_b, "alice");
        elsewhere.session = Some(session.clone());
        let (status, _, body) = elsewhere
            .post(json!({"jsonrpc": "2.0", "id": question_id, "result": answer}))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        let messages = read_until(&mut call, |message| message["id"] == 5).await;
        let last = messages.last().expect("the answer");
        assert_eq!(last["result"]["content"][0]["text"], expected, "{last}");
        assert!(last["result"].get("resultType").is_none(), "{last}");

        // An answer is taken once.
        let (status, _, _) = elsewhere
            .post(json!({"jsonrpc": "2.0", "id": question_id, "result": answer}))
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
    }

    // A session that asked for log messages gets every call's answer as a stream;
    // a question at the end of that stream is asked all the same (rmcp found this).
    let (status, body) = alice
        .request("logging/setLevel", json!({"level": "debug"}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let mut call = call_guarded().await.expect("sent");
    let messages = read_until(&mut call, |message| {
        message["method"] == "elicitation/create" || message["id"] == 5
    })
    .await;
    let question_id = messages
        .iter()
        .find(|message| message["method"] == "elicitation/create")
        .and_then(|message| message["id"].as_str())
        .unwrap_or_else(|| panic!("a question, not {messages:?}"))
        .to_owned();
    let (status, _, _) = alice
        .post(json!({"jsonrpc": "2.0", "id": question_id,
                     "result": {"action": "accept", "content": {"confirm": true}}}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let messages = read_until(&mut call, |message| message["id"] == 5).await;
    let last = messages.last().expect("the answer");
    assert_eq!(last["result"]["content"][0]["text"], "ran", "{last}");
}
