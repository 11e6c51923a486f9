//! End-to-end checks of the conformance fixture: `fixture_app()` served in-process
//! on a loopback port, called over HTTP the way the conformance suite calls it.

use std::net::SocketAddr;

use docket_fixture::{FIXTURE_TOOLS, fixture_app};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// Everything a well-behaved client declares: the suite's default capabilities.
fn all_capabilities() -> Value {
    json!({ "sampling": {}, "elicitation": {}, "roots": { "listChanged": true } })
}

/// The fixture on an ephemeral loopback port; dropping it shuts the server down.
struct Fixture {
    addr: SocketAddr,
    http: reqwest::Client,
    _shutdown: oneshot::Sender<()>,
}

impl Fixture {
    async fn start() -> Self {
        let app = fixture_app().expect("the fixture app builds");
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
