//! The `tools/call` pipeline: personas, connections, gates, argument validation,
//! multi round-trip input with a sealed `requestState`, progress over SSE, and
//! cancellation when the client goes away.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use docket_protocol::mrtr::{ElicitRequestParams, InputRequest, InputRequests};
use docket_protocol::tools::CallToolResult;
use docket_server::auth::{ApiKeyConfig, AuthConfig};
use docket_server::config::Config;
use docket_server::persona::{AllowDeny, PersonaConfig};
use docket_server::{App, AppBuilder, TaskSupport, ToolCall, ToolError, ToolOutcome, ToolSpec};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::{TestServer, meta, sse_messages};

fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false})
}

/// A tool that echoes `text`.
fn with_echo(builder: AppBuilder) -> AppBuilder {
    builder
        .tool(
            ToolSpec::new(
                "echo",
                "Echoes its text.",
                object_schema(
                    json!({"text": {"type": "string"}, "connection": {"type": "string"}}),
                    &["text"],
                ),
            ),
            |call: ToolCall| async move {
                let text = call
                    .arguments
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                ToolOutcome::Result(CallToolResult::text(text))
            },
        )
        .expect("registered")
}

/// A tool that asks for a confirmation, then answers with the state it kept.
fn with_confirm(builder: AppBuilder) -> AppBuilder {
    builder
        .tool(
            ToolSpec::new("confirm", "Asks before it acts.", object_schema(json!({"target": {"type": "string"}}), &["target"])),
            |call: ToolCall| async move {
                match call.input {
                    None => {
                        let mut requests = InputRequests::new();
                        let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
                        requests.insert("consent".into(), InputRequest::Elicit(ElicitRequestParams::form("Proceed?", schema)));
                        ToolOutcome::InputRequired { requests, state: json!({"asked_for": call.arguments["target"]}) }
                    }
                    Some(round) => match round.responses.get("consent") {
                        Some(answer) if answer["action"] == "accept" => {
                            ToolOutcome::Result(CallToolResult::text(format!("confirmed {}", round.state["asked_for"])))
                        }
                        Some(_) => ToolOutcome::Result(CallToolResult::error("declined")),
                        None => ToolOutcome::Error(ToolError::InvalidParams("consent is missing".into())),
                    },
                }
            },
        )
        .expect("registered")
}

fn keyed_config(personas: &[(&str, PersonaConfig)], keys: &[(&str, &str, &[&str])]) -> Config {
    let auth = AuthConfig {
        api_keys: keys
            .iter()
            .map(|(name, key, roles)| ApiKeyConfig {
                name: (*name).into(),
                key: Some((*key).into()),
                key_sha256: None,
                email: None,
                roles: roles.iter().map(|r| (*r).to_owned()).collect(),
                user: None,
            })
            .collect(),
        ..AuthConfig::default()
    };
    let mut config = Config {
        auth,
        ..Config::default()
    };
    for (name, persona) in personas {
        config.personas.insert((*name).into(), persona.clone());
    }
    config
}

fn persona(
    roles: &[&str],
    tools_allow: &[&str],
    tools_deny: &[&str],
    connections_allow: &[&str],
) -> PersonaConfig {
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect();
    PersonaConfig {
        roles: strings(roles),
        priority: 10,
        tools: AllowDeny {
            allow: strings(tools_allow),
            deny: strings(tools_deny),
        },
        connections: AllowDeny {
            allow: strings(connections_allow),
            deny: vec![],
        },
        ..PersonaConfig::default()
    }
}

#[tokio::test]
async fn tools_list_shows_only_what_the_persona_may_call() {
    let config = keyed_config(
        &[(
            "analyst",
            persona(&["analyst"], &["*"], &["list_*"], &["warehouse"]),
        )],
        &[
            ("alice", "alice-key-0123456789", &["analyst"]),
            ("mallory", "mallory-key-0123456789", &["nobody"]),
        ],
    );
    let server = TestServer::start(with_echo(App::builder(config)).build().expect("app")).await;

    let (status, body) = server
        .rpc("tools/list", json!({}))
        .header("authorization", "Bearer alice-key-0123456789")
        .send()
        .await;
    assert_eq!(status, 200);
    let names: Vec<&str> = body["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(
        names,
        ["echo", "platform_info"],
        "sorted, and list_connections is denied"
    );
    assert_eq!(
        body["result"]["cacheScope"], "private",
        "the list depends on the caller"
    );
    for tool in body["result"]["tools"].as_array().expect("tools") {
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()));
    }

    let (_, body) = server
        .rpc("tools/list", json!({}))
        .header("x-api-key", "mallory-key-0123456789")
        .send()
        .await;
    assert_eq!(
        body["result"]["tools"],
        json!([]),
        "no persona means nothing is listed"
    );
}

#[tokio::test]
async fn a_denied_tool_or_connection_is_refused_before_the_handler() {
    let config = keyed_config(
        &[(
            "analyst",
            persona(
                &["analyst"],
                &["echo", "platform_info"],
                &[],
                &["warehouse"],
            ),
        )],
        &[
            ("alice", "alice-key-0123456789", &["analyst"]),
            ("mallory", "mallory-key-0123456789", &["nobody"]),
        ],
    );
    let server = TestServer::start(with_echo(App::builder(config)).build().expect("app")).await;
    let alice = "Bearer alice-key-0123456789";

    let (_, body) = server
        .rpc(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        )
        .header("authorization", alice)
        .send()
        .await;
    assert_eq!(body["result"]["content"][0]["text"], "hi");

    let (_, body) = server
        .rpc(
            "tools/call",
            json!({"name": "list_connections", "arguments": {}}),
        )
        .header("authorization", alice)
        .send()
        .await;
    assert_eq!(body["result"]["isError"], true);
    assert_eq!(
        body["result"]["structuredContent"]["error"]["category"],
        "authorization_denied"
    );

    let (_, body) = server
        .rpc(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi", "connection": "secret_db"}}),
        )
        .header("authorization", alice)
        .send()
        .await;
    assert_eq!(body["result"]["isError"], true);
    assert!(
        body["result"]["structuredContent"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("connection"))
    );

    let (_, body) = server
        .rpc(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        )
        .header("x-api-key", "mallory-key-0123456789")
        .send()
        .await;
    assert_eq!(
        body["result"]["structuredContent"]["error"]["code"],
        "unauthorized"
    );
}

#[tokio::test]
async fn credentials_are_required_unless_anonymous_access_is_on() {
    let config = keyed_config(&[], &[("alice", "alice-key-0123456789", &["admin"])]);
    let server = TestServer::start(App::builder(config).build().expect("app")).await;

    let response = server.rpc("server/discover", json!({})).response().await;
    assert_eq!(response.status().as_u16(), 401);
    // Answered before the body was read, so the connection ends, and says so:
    // a client's pool must not send its next request into it.
    assert_eq!(response.headers()["connection"], "close");
    let challenge = response.headers()["www-authenticate"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains(
            "resource_metadata=\"http://127.0.0.1:8080/.well-known/oauth-protected-resource/mcp\""
        ),
        "{challenge}"
    );

    let response = server
        .rpc("server/discover", json!({}))
        .header("authorization", "Bearer wrong-key")
        .response()
        .await;
    assert_eq!(response.status().as_u16(), 401);
    assert!(
        response.headers()["www-authenticate"]
            .to_str()
            .expect("ascii")
            .contains("invalid_token")
    );
    let text = response.text().await.expect("body");
    assert!(
        !text.contains("wrong-key"),
        "the credential is not echoed: {text}"
    );

    let (status, body) = server
        .rpc(
            "tools/call",
            json!({"name": "platform_info", "arguments": {}}),
        )
        .header("x-api-key", "alice-key-0123456789")
        .send()
        .await;
    assert_eq!(status, 200);
    assert_eq!(
        body["result"]["structuredContent"]["identity"]["subject"],
        "apikey:alice"
    );
    assert_eq!(body["result"]["structuredContent"]["persona"], "admin");

    let metadata: Value = server
        .http
        .get(server.url("/.well-known/oauth-protected-resource/mcp"))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert_eq!(metadata["resource"], "http://127.0.0.1:8080/mcp");
}

#[tokio::test]
async fn arguments_are_validated_against_the_schema_and_unknown_ones_refused() {
    let server = TestServer::start(
        with_echo(App::builder(Config::embedded_default()))
            .build()
            .expect("app"),
    )
    .await;
    for (arguments, expected) in [
        (json!({}), "text"),
        (json!({"text": 5}), "string"),
        (json!({"text": "hi", "extra": true}), "extra"),
    ] {
        let (status, body) = server.call_tool("echo", arguments.clone()).await;
        assert_eq!(status, 200);
        assert_eq!(body["error"]["code"], -32602, "{arguments}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(expected), "{arguments}: {message}");
    }
}

#[tokio::test]
async fn the_rate_limit_refuses_the_call_after_the_burst() {
    let mut config = Config::embedded_default();
    config.rate_limit = serde_json::from_value(json!({"requests_per_minute": 1, "burst": 2}))
        .expect("rate limit config");
    let server = TestServer::start(with_echo(App::builder(config)).build().expect("app")).await;
    let mut refused = 0;
    for _ in 0..4 {
        let (_, body) = server.call_tool("echo", json!({"text": "x"})).await;
        if body["result"]["structuredContent"]["error"]["code"] == "rate_limited" {
            refused += 1;
        }
    }
    assert_eq!(refused, 2, "two calls fit the burst, the rest are refused");
    let (_, body) = server.call_tool("platform_info", json!({})).await;
    assert!(
        body["result"]["isError"].is_null(),
        "platform_info stays callable: {body}"
    );
}

#[tokio::test]
async fn a_task_only_tool_needs_the_extension_on_that_very_request() {
    let builder = App::builder(Config::embedded_default())
        .tool(
            ToolSpec::new(
                "long_job",
                "Runs only as a task.",
                object_schema(json!({}), &[]),
            )
            .with_task_support(TaskSupport::Required),
            |_call: ToolCall| async move { ToolOutcome::Result(CallToolResult::text("ran")) },
        )
        .expect("registered");
    let server = TestServer::start(builder.build().expect("app")).await;
    let (status, body) = server.call_tool("long_job", json!({})).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], -32021);
    assert_eq!(
        body["error"]["data"]["requiredCapabilities"],
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
}

#[tokio::test]
async fn input_required_round_trips_with_a_sealed_request_state() {
    let server = TestServer::start(
        with_confirm(App::builder(Config::embedded_default()))
            .build()
            .expect("app"),
    )
    .await;
    let arguments = json!({"target": "orders"});
    let (status, first) = server.call_tool("confirm", arguments.clone()).await;
    assert_eq!(status, 200);
    let first = &first["result"];
    assert_eq!(first["resultType"], "input_required");
    assert_eq!(
        first["inputRequests"]["consent"]["method"],
        "elicitation/create"
    );
    let state = first["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned();
    assert!(
        !state.contains("orders"),
        "the state is opaque enough not to carry arguments in clear: {state}"
    );

    let accept = json!({"consent": {"action": "accept", "content": {"ok": true}}});
    let retry = |state: &str, arguments: Value| {
        server.rpc("tools/call", json!({"name": "confirm", "arguments": arguments, "inputResponses": accept, "requestState": state}))
    };
    let (_, done) = retry(&state, arguments.clone()).send().await;
    assert_eq!(done["result"]["resultType"], "complete");
    assert_eq!(done["result"]["content"][0]["text"], "confirmed \"orders\"");

    let mut tampered = state.clone().into_bytes();
    let middle = tampered.len() / 3;
    tampered[middle] = if tampered[middle] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    let (_, refused) = retry(&tampered, arguments.clone()).send().await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused.get("result").is_none());

    let (_, foreign) = retry(&state, json!({"target": "customers"})).send().await;
    assert_eq!(
        foreign["error"]["code"], -32602,
        "a state sealed for other arguments is refused: {foreign}"
    );
}

#[tokio::test]
async fn a_request_state_is_bound_to_the_caller() {
    let config = keyed_config(
        &[],
        &[
            ("alice", "alice-key-0123456789", &["admin"]),
            ("bob", "bob-key-0123456789abc", &["admin"]),
        ],
    );
    let server = TestServer::start(with_confirm(App::builder(config)).build().expect("app")).await;
    let arguments = json!({"target": "orders"});
    let (_, first) = server
        .rpc(
            "tools/call",
            json!({"name": "confirm", "arguments": arguments}),
        )
        .header("x-api-key", "alice-key-0123456789")
        .send()
        .await;
    let state = first["result"]["requestState"]
        .as_str()
        .expect("requestState")
        .to_owned();
    let retry = json!({"name": "confirm", "arguments": arguments, "requestState": state,
        "inputResponses": {"consent": {"action": "accept", "content": {"ok": true}}}});
    let (_, stolen) = server
        .rpc("tools/call", retry.clone())
        .header("x-api-key", "bob-key-0123456789abc")
        .send()
        .await;
    assert_eq!(stolen["error"]["code"], -32602, "{stolen}");
    let (_, own) = server
        .rpc("tools/call", retry)
        .header("x-api-key", "alice-key-0123456789")
        .send()
        .await;
    assert_eq!(own["result"]["content"][0]["text"], "confirmed \"orders\"");
}

/// A tool that reports progress, then waits until it is cancelled and records that.
fn with_waiter(
    builder: AppBuilder,
    cancelled: Arc<AtomicBool>,
    started: Arc<Notify>,
) -> AppBuilder {
    builder
        .tool(
            ToolSpec::new(
                "waiter",
                "Reports progress and waits.",
                object_schema(json!({"finish": {"type": "boolean"}}), &[]),
            ),
            move |call: ToolCall| {
                let cancelled = Arc::clone(&cancelled);
                let started = Arc::clone(&started);
                async move {
                    call.progress.report(1, Some(3), Some("first".into()));
                    call.progress.report(2, Some(3), Some("second".into()));
                    if call.arguments.get("finish") == Some(&json!(true)) {
                        return ToolOutcome::Result(CallToolResult::text("finished"));
                    }
                    started.notify_one();
                    // Only cancellation ends this call; the drop guard marks it.
                    struct MarkOnDrop(Arc<AtomicBool>);
                    impl Drop for MarkOnDrop {
                        fn drop(&mut self) {
                            self.0.store(true, Ordering::SeqCst);
                        }
                    }
                    let _mark = MarkOnDrop(cancelled);
                    call.cancel.cancelled().await;
                    ToolOutcome::Result(CallToolResult::text("cancelled"))
                }
            },
        )
        .expect("registered")
}

#[tokio::test]
async fn progress_is_streamed_as_sse_before_the_result() {
    let builder = with_waiter(
        App::builder(Config::embedded_default()),
        Arc::default(),
        Arc::default(),
    );
    let server = TestServer::start(builder.build().expect("app")).await;
    let mut meta = meta(json!({}));
    meta["progressToken"] = json!("tok-1");
    let response = server
        .rpc(
            "tools/call",
            json!({"name": "waiter", "arguments": {"finish": true}, "_meta": meta}),
        )
        .response()
        .await;
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let messages = sse_messages(&response.text().await.expect("body"));
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[0]["method"], "notifications/progress");
    assert_eq!(messages[0]["params"]["progressToken"], "tok-1");
    assert_eq!(messages[1]["params"]["progress"], 2);
    assert_eq!(messages[2]["id"], 1);
    assert_eq!(messages[2]["result"]["content"][0]["text"], "finished");
    assert_eq!(messages[2]["result"]["resultType"], "complete");
    assert_eq!(
        messages[2]["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "docket"
    );
}

#[tokio::test]
async fn closing_the_stream_cancels_the_call() {
    let cancelled = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Notify::new());
    let builder = with_waiter(
        App::builder(Config::embedded_default()),
        Arc::clone(&cancelled),
        Arc::clone(&started),
    )
    .sse_keepalive(Duration::from_millis(50));
    let server = TestServer::start(builder.build().expect("app")).await;
    let mut meta = meta(json!({}));
    meta["progressToken"] = json!(7);
    let response = server
        .rpc(
            "tools/call",
            json!({"name": "waiter", "arguments": {}, "_meta": meta}),
        )
        .response()
        .await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    started.notified().await;
    drop(response);
    // Wait until the server notices the closed stream and the handler is dropped.
    // The minute is a guard against hanging the suite, not a speed assertion.
    let noticed = tokio::time::timeout(Duration::from_secs(60), async {
        while !cancelled.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert!(
        noticed.await.is_ok(),
        "the call kept running after its stream closed"
    );
}

#[tokio::test]
async fn a_handler_can_ask_for_a_capability_the_client_lacks() {
    let builder = App::builder(Config::embedded_default())
        .tool(
            ToolSpec::new(
                "needs_sampling",
                "Needs sampling.",
                object_schema(json!({}), &[]),
            ),
            |call: ToolCall| async move {
                if call.client_capabilities.supports_sampling() {
                    ToolOutcome::Result(CallToolResult::text("sampling available"))
                } else {
                    ToolOutcome::Error(ToolError::MissingCapability {
                        message: "this tool needs sampling".into(),
                        required: Box::new(
                            docket_protocol::meta::ClientCapabilities::with_sampling(),
                        ),
                    })
                }
            },
        )
        .expect("registered");
    let server = TestServer::start(builder.build().expect("app")).await;
    let (status, body) = server.call_tool("needs_sampling", json!({})).await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], -32021);
    assert_eq!(
        body["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    let (status, body) = server
        .rpc(
            "tools/call",
            json!({"name": "needs_sampling", "arguments": {}}),
        )
        .capabilities(json!({"sampling": {}}))
        .send()
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["result"]["content"][0]["text"], "sampling available");
}

#[tokio::test]
async fn a_handler_that_panics_is_an_internal_error_and_the_server_keeps_serving() {
    let builder = App::builder(Config::embedded_default())
        .tool(
            ToolSpec::new("broken", "Panics.", object_schema(json!({}), &[])),
            |_call: ToolCall| async move {
                let items: Vec<u8> = Vec::new();
                // An out-of-bounds index: a bug in a tool, not in the caller's input.
                ToolOutcome::Result(CallToolResult::text(format!(
                    "{}",
                    items[usize::from(items.is_empty())]
                )))
            },
        )
        .expect("registered");
    let server = TestServer::start(builder.build().expect("app")).await;
    let (status, body) = server.call_tool("broken", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(body["error"]["code"], -32603);
    assert_eq!(
        body["error"]["message"], "internal error; see the server log",
        "no internals leak"
    );
    let (status, _) = server.call_tool("platform_info", json!({})).await;
    assert_eq!(status, 200, "the server keeps serving");
}
