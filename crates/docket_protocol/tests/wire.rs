//! Round-trip tests: every example JSON the MCP 2026-07-28 specification ships for a
//! type Docket uses parses into this crate's type and serializes back to the same JSON,
//! and the tasks-extension shapes serialize exactly as the extension's schema says.

use std::path::Path;

use docket_protocol::error::{self, ErrorObject};
use docket_protocol::jsonrpc::{
    ClientMessage, MessageError, OutgoingNotification, RequestId, Response,
};
use docket_protocol::meta::{ClientCapabilities, Implementation, RequestMeta};
use docket_protocol::mrtr::{
    ElicitRequestParams, ElicitResult, InputRequest, InputRequests, InputRequiredResult,
    InputResponses,
};
use docket_protocol::progress::ProgressParams;
use docket_protocol::result::{ResultType, stamp_server_info};
use docket_protocol::server::{DiscoverResult, ServerCapabilities};
use docket_protocol::tasks::{
    CreateTaskResult, GetTaskResult, Task, TaskDetail, TaskStatus, UpdateTaskParams,
};
use docket_protocol::tools::{CallToolParams, CallToolResult, ContentBlock, ListToolsResult, Tool};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

fn round_trip<T: DeserializeOwned + Serialize>(name: &str, value: &Value) {
    let typed: T = serde_json::from_value(value.clone()).unwrap_or_else(|err| {
        panic!(
            "{name} does not parse as {}: {err}",
            std::any::type_name::<T>()
        )
    });
    let back = serde_json::to_value(&typed).expect("serializes");
    assert_eq!(
        &back,
        value,
        "{name} changed in a round trip through {}",
        std::any::type_name::<T>()
    );
}

/// Checks one example file by the type its folder names; false when no type is mapped.
fn check_example(name: &str, value: &Value) -> bool {
    let kind = name.split("__").next().unwrap_or_default();
    match kind {
        "CallToolResult" => round_trip::<CallToolResult>(name, value),
        "CallToolRequestParams" => {
            round_trip::<CallToolParams>(name, value);
            RequestMeta::from_params(Some(value)).expect("the example's _meta is valid");
        }
        "ClientCapabilities" => round_trip::<ClientCapabilities>(name, value),
        "DiscoverResult" => round_trip::<DiscoverResult>(name, value),
        "ServerCapabilities" => round_trip::<ServerCapabilities>(name, value),
        "ElicitRequestFormParams" | "ElicitRequestURLParams" => {
            round_trip::<ElicitRequestParams>(name, value);
            let parsed: ElicitRequestParams =
                serde_json::from_value(value.clone()).expect("parses");
            let is_url = matches!(parsed, ElicitRequestParams::Url(_));
            assert_eq!(
                is_url,
                kind == "ElicitRequestURLParams",
                "{name} parsed as the wrong mode"
            );
        }
        "ElicitResult" => round_trip::<ElicitResult>(name, value),
        "AudioContent" | "EmbeddedResource" | "ImageContent" | "ResourceLink" | "TextContent" => {
            round_trip::<ContentBlock>(name, value)
        }
        "InputRequests" => round_trip::<InputRequests>(name, value),
        "InputResponses" => round_trip::<InputResponses>(name, value),
        "InputRequiredResult" => round_trip::<InputRequiredResult>(name, value),
        "ListToolsResult" => round_trip::<ListToolsResult>(name, value),
        "Tool" => round_trip::<Tool>(name, value),
        "ProgressNotification" => {
            round_trip::<OutgoingNotification>(name, value);
            round_trip::<ProgressParams>(name, &value["params"]);
        }
        "HeaderMismatchError"
        | "InternalError"
        | "InvalidParamsError"
        | "MethodNotFoundError"
        | "MissingRequiredClientCapabilityError"
        | "ParseError"
        | "UnsupportedProtocolVersionError" => {
            if value.get("jsonrpc").is_some() {
                round_trip::<Response>(name, value);
            } else {
                round_trip::<ErrorObject>(name, value);
            }
        }
        "CallToolResultResponse" | "DiscoverResultResponse" | "ListToolsResultResponse" => {
            round_trip::<Response>(name, value);
            let result = &value["result"];
            match kind {
                "CallToolResultResponse" => round_trip::<CallToolResult>(name, result),
                "DiscoverResultResponse" => round_trip::<DiscoverResult>(name, result),
                _ => round_trip::<ListToolsResult>(name, result),
            }
        }
        "CallToolRequest" | "DiscoverRequest" | "ListToolsRequest" => {
            let bytes = serde_json::to_vec(value).expect("serializes");
            let ClientMessage::Request(request) = ClientMessage::parse(&bytes).expect("parses")
            else {
                panic!("{name} is a request");
            };
            assert_eq!(Some(request.method.as_str()), value["method"].as_str());
            let meta = RequestMeta::from_params(request.params.as_ref()).expect("valid _meta");
            assert_eq!(meta.protocol_version, docket_protocol::PROTOCOL_VERSION);
            if kind == "CallToolRequest" {
                round_trip::<CallToolParams>(name, &value["params"]);
            }
        }
        _ => return false,
    }
    true
}

#[test]
fn every_specification_example_round_trips() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/spec_examples");
    let mut checked = 0;
    let mut unmapped = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("examples folder") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_owned();
        let text = std::fs::read_to_string(&path).expect("readable");
        let value: Value = serde_json::from_str(&text).expect("example is JSON");
        if check_example(&name, &value) {
            checked += 1;
        } else {
            unmapped.push(name);
        }
    }
    assert!(
        unmapped.is_empty(),
        "examples without a type to check them against: {unmapped:?}"
    );
    assert!(checked >= 60, "only {checked} examples were checked");
}

#[test]
fn input_requests_name_their_method() {
    let value = json!({
        "a": {"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {"type": "object"}}},
        "b": {"method": "roots/list", "params": {}},
        "c": {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    });
    let requests: InputRequests = serde_json::from_value(value).expect("parses");
    let methods: Vec<_> = requests.values().map(InputRequest::method).collect();
    assert_eq!(
        methods,
        ["elicitation/create", "roots/list", "sampling/createMessage"]
    );
}

fn sample_task(status: TaskStatus, ttl_ms: Option<u64>) -> Task {
    Task {
        task_id: "4f2c0a8e9b7d6c5e4f3a2b1c0d9e8f7a".into(),
        status,
        status_message: Some("412 000 rows written, 38 MB".into()),
        created_at: "2026-11-30T10:00:00Z".into(),
        last_updated_at: "2026-11-30T10:00:02Z".into(),
        ttl_ms,
        poll_interval_ms: Some(1000),
    }
}

#[test]
fn create_task_result_is_flat_with_result_type_task() {
    let created = CreateTaskResult::new(sample_task(TaskStatus::Working, Some(604_800_000)));
    let value = serde_json::to_value(&created).expect("serializes");
    assert_eq!(
        value,
        json!({
            "resultType": "task",
            "taskId": "4f2c0a8e9b7d6c5e4f3a2b1c0d9e8f7a",
            "status": "working",
            "statusMessage": "412 000 rows written, 38 MB",
            "createdAt": "2026-11-30T10:00:00Z",
            "lastUpdatedAt": "2026-11-30T10:00:02Z",
            "ttlMs": 604800000,
            "pollIntervalMs": 1000
        })
    );
    round_trip::<CreateTaskResult>("create", &value);
}

#[test]
fn unlimited_ttl_is_an_explicit_null() {
    let value = serde_json::to_value(sample_task(TaskStatus::Working, None)).expect("serializes");
    assert_eq!(value.get("ttlMs"), Some(&Value::Null));
}

#[test]
fn detailed_task_variants_inline_their_fields() {
    let completed = GetTaskResult {
        result_type: ResultType::Complete,
        task: sample_task(TaskStatus::Completed, Some(1)),
        detail: TaskDetail {
            result: Some(serde_json::to_value(CallToolResult::text("done")).expect("serializes")),
            error: None,
            input_requests: None,
        },
    };
    let value = serde_json::to_value(&completed).expect("serializes");
    assert_eq!(value["resultType"], "complete");
    assert_eq!(value["status"], "completed");
    assert_eq!(value["result"]["content"][0]["text"], "done");
    assert!(value.get("error").is_none() && value.get("inputRequests").is_none());
    round_trip::<GetTaskResult>("completed", &value);

    let failed = GetTaskResult {
        result_type: ResultType::Complete,
        task: sample_task(TaskStatus::Failed, Some(1)),
        detail: TaskDetail {
            result: None,
            error: Some(ErrorObject::internal(
                "the replica running this task is gone",
            )),
            input_requests: None,
        },
    };
    let value = serde_json::to_value(&failed).expect("serializes");
    assert_eq!(value["error"]["code"], error::INTERNAL_ERROR);
    assert!(value.get("result").is_none());
    round_trip::<GetTaskResult>("failed", &value);

    let mut requests = InputRequests::new();
    requests.insert(
        "confirm".into(),
        InputRequest::Elicit(ElicitRequestParams::form(
            "Delete?",
            json!({"type": "object"}),
        )),
    );
    let waiting = GetTaskResult {
        result_type: ResultType::Complete,
        task: sample_task(TaskStatus::InputRequired, None),
        detail: TaskDetail {
            result: None,
            error: None,
            input_requests: Some(requests),
        },
    };
    let value = serde_json::to_value(&waiting).expect("serializes");
    assert_eq!(value["status"], "input_required");
    assert_eq!(
        value["inputRequests"]["confirm"]["method"],
        "elicitation/create"
    );
    round_trip::<GetTaskResult>("input_required", &value);
}

#[test]
fn update_params_carry_input_responses() {
    let value = json!({"taskId": "t", "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}});
    round_trip::<UpdateTaskParams>("update", &value);
}

#[test]
fn error_codes_carry_the_data_the_schema_requires() {
    let unsupported =
        serde_json::to_value(ErrorObject::unsupported_version("v999.0.0")).expect("serializes");
    assert_eq!(unsupported["code"], -32022);
    assert_eq!(unsupported["data"]["requested"], "v999.0.0");
    assert_eq!(unsupported["data"]["supported"], json!(["2026-07-28"]));

    let missing = serde_json::to_value(ErrorObject::tasks_extension_required("needs tasks"))
        .expect("serializes");
    assert_eq!(missing["code"], -32021);
    assert_eq!(
        missing["data"],
        json!({"requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
    );

    let sampling =
        ErrorObject::missing_capability("needs sampling", ClientCapabilities::with_sampling());
    assert_eq!(
        serde_json::to_value(sampling).expect("serializes")["data"],
        json!({"requiredCapabilities": {"sampling": {}}})
    );

    let codes = [
        (ErrorObject::parse_error("x").code, -32700),
        (ErrorObject::invalid_request("x").code, -32600),
        (ErrorObject::method_not_found("initialize").code, -32601),
        (ErrorObject::invalid_params("x").code, -32602),
        (ErrorObject::internal("x").code, -32603),
        (ErrorObject::header_mismatch("x").code, -32020),
    ];
    for (actual, expected) in codes {
        assert_eq!(actual, expected);
    }
}

#[test]
fn responses_echo_the_id_or_null() {
    let ok = Response::result(
        RequestId::String("a".into()),
        json!({"resultType": "complete"}),
    );
    assert_eq!(
        serde_json::to_value(ok).expect("serializes"),
        json!({"jsonrpc": "2.0", "id": "a", "result": {"resultType": "complete"}})
    );
    let unreadable = Response::error(None, ErrorObject::parse_error("eof"));
    let value = serde_json::to_value(unreadable).expect("serializes");
    assert_eq!(value["id"], Value::Null);
    assert_eq!(value["error"]["code"], -32700);
}

#[test]
fn server_info_is_stamped_into_meta_without_losing_fields() {
    let info = Implementation::new("docket", "0.1.0");
    let stamped = stamp_server_info(json!({"content": [], "_meta": {"x": 1}}), &info);
    assert_eq!(stamped["resultType"], "complete");
    assert_eq!(stamped["_meta"]["x"], 1);
    assert_eq!(
        stamped["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "docket"
    );
    let task = stamp_server_info(json!({"resultType": "task"}), &info);
    assert_eq!(task["resultType"], "task", "an existing resultType is kept");
}

#[test]
fn malformed_messages_are_classified() {
    assert!(matches!(
        ClientMessage::parse(b"{not json"),
        Err(MessageError::Parse(_))
    ));
    assert!(matches!(
        ClientMessage::parse(b"[]"),
        Err(MessageError::Invalid { id: None, .. })
    ));
    assert!(matches!(
        ClientMessage::parse(br#"{"jsonrpc":"1.0","id":7,"method":"x"}"#),
        Err(MessageError::Invalid {
            id: Some(RequestId::Number(7)),
            ..
        })
    ));
    assert!(matches!(
        ClientMessage::parse(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
        Err(MessageError::Invalid { id: None, .. })
    ));
    assert!(matches!(
        ClientMessage::parse(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
        Err(MessageError::Invalid { .. })
    ));
    assert!(matches!(
        ClientMessage::parse(br#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#),
        Err(MessageError::Invalid { .. })
    ));
    assert!(matches!(
        ClientMessage::parse(br#"{"jsonrpc":"2.0","method":"notifications/x"}"#),
        Ok(ClientMessage::Notification(_))
    ));
}

#[test]
fn request_meta_requires_version_and_capabilities_but_not_client_info() {
    let ok = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
        "progressToken": 5
    }});
    let meta = RequestMeta::from_params(Some(&ok)).expect("valid");
    assert!(meta.client_capabilities.declares_tasks());
    assert!(meta.client_info.is_none());
    assert!(meta.progress_token.is_some());

    for bad in [
        json!({}),
        json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": 3, "io.modelcontextprotocol/clientCapabilities": {}}}),
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": []}}),
    ] {
        assert!(
            RequestMeta::from_params(Some(&bad)).is_err(),
            "{bad} should be refused"
        );
    }
    assert!(RequestMeta::from_params(None).is_err());
}

#[test]
fn elicitation_capability_defaults_to_form() {
    let implicit: ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {}})).expect("parses");
    assert!(implicit.supports_form_elicitation() && !implicit.supports_url_elicitation());
    let url_only: ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {"url": {}}})).expect("parses");
    assert!(!url_only.supports_form_elicitation() && url_only.supports_url_elicitation());
    let none = ClientCapabilities::default();
    assert!(!none.supports_form_elicitation() && !none.declares_tasks());
}
