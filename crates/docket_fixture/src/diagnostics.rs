//! The diagnostic tools the suite probes the server with: a tool that needs a
//! client capability, a tool the logging check calls, a tool whose input schema
//! uses the JSON Schema 2020-12 vocabulary, a tool with an `x-mcp-header`
//! argument for the custom-header checks, and a no-argument tool that sorts first.

use docket_protocol::logging::LogLevel;
use docket_protocol::meta::ClientCapabilities;
use docket_protocol::tools::CallToolResult;
use docket_server::{AppBuilder, ToolCall, ToolError, ToolOutcome, ToolSpec};
use serde_json::{Value, json};

use crate::{Registered, no_arguments};

/// Describes the fixture. Named to sort first in `tools/list` (which Docket orders
/// by name): the suite's `http-header-validation` scenario calls the *first* listed
/// tool with `arguments: {}` and expects success, which the 2020-12 schema tool
/// (next in order) refuses because its verbatim schema requires `email` or `phone`.
pub(crate) const ABOUT: &str = "about_fixture";
/// Needs the client to declare sampling; -32021 otherwise.
pub(crate) const MISSING_CAPABILITY: &str = "test_missing_capability";
/// Answers with text and never logs.
pub(crate) const LOGGING_TOOL: &str = "test_logging_tool";
/// Sends three info log messages ~50 ms apart (the 2025-era logging scenario).
pub(crate) const TOOL_WITH_LOGGING: &str = "test_tool_with_logging";
/// The pause between `test_tool_with_logging`'s messages.
const LOG_STEP_DELAY: std::time::Duration = std::time::Duration::from_millis(50);
/// Publishes a JSON Schema 2020-12 input schema verbatim.
pub(crate) const JSON_SCHEMA_2020_12: &str = "json_schema_2020_12_tool";
/// Takes a string argument mirrored in the `Mcp-Param-Region` header.
pub(crate) const CUSTOM_HEADER: &str = "test_custom_header";

/// Registers the diagnostic tools.
pub(crate) fn register(builder: AppBuilder) -> Registered {
    builder
        .tool(
            ToolSpec::new(
                ABOUT,
                "Describes this conformance fixture and lists its tools. Takes no arguments.",
                no_arguments(),
            ),
            about,
        )?
        .tool(
            ToolSpec::new(
                MISSING_CAPABILITY,
                "Needs the sampling client capability: a request that does not declare it is refused with -32021.",
                no_arguments(),
            ),
            missing_capability,
        )?
        .tool(
            ToolSpec::new(
                LOGGING_TOOL,
                "Returns text and logs one info message, which reaches only callers that asked for logs.",
                no_arguments(),
            ),
            logging_tool,
        )?
        .tool(
            ToolSpec::new(
                TOOL_WITH_LOGGING,
                "Sends three info log messages about 50 ms apart, then returns text.",
                no_arguments(),
            ),
            tool_with_logging,
        )?
        .tool(
            ToolSpec::new(
                JSON_SCHEMA_2020_12,
                "Tool with JSON Schema 2020-12 features",
                json_schema_2020_12(),
            ),
            json_schema_tool,
        )?
        .tool(
            ToolSpec::new(
                CUSTOM_HEADER,
                "Echoes the region argument, which clients mirror in the Mcp-Param-Region header.",
                custom_header_schema(),
            ),
            custom_header,
        )
}

async fn about(_call: ToolCall) -> ToolOutcome {
    CallToolResult::text(format!(
        "Docket conformance fixture. Tools: {}.",
        crate::FIXTURE_TOOLS.join(", ")
    ))
    .into()
}

async fn missing_capability(call: ToolCall) -> ToolOutcome {
    if !call.client_capabilities.supports_sampling() {
        return ToolOutcome::Error(ToolError::MissingCapability {
            message: format!(
                "{MISSING_CAPABILITY} needs the client to declare the sampling capability"
            ),
            required: Box::new(ClientCapabilities::with_sampling()),
        });
    }
    CallToolResult::text("Success: the request declared the sampling capability.").into()
}

async fn logging_tool(call: ToolCall) -> ToolOutcome {
    // Sent only when the request asked for logs (`_meta` logLevel, or a session's
    // logging/setLevel); without that the logger drops it.
    call.log.log(
        LogLevel::Info,
        Some(LOGGING_TOOL),
        Value::String("the logging tool ran".into()),
    );
    CallToolResult::text("The logging tool ran; it logs only to callers that ask for logs.").into()
}

async fn tool_with_logging(call: ToolCall) -> ToolOutcome {
    let messages = [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ];
    for (step, message) in messages.into_iter().enumerate() {
        if step > 0 {
            tokio::select! {
                () = tokio::time::sleep(LOG_STEP_DELAY) => {}
                () = call.cancel.cancelled() => {
                    return ToolOutcome::Error(ToolError::Internal("the call was cancelled".into()));
                }
            }
        }
        call.log.log(
            LogLevel::Info,
            Some(TOOL_WITH_LOGGING),
            Value::String(message.into()),
        );
    }
    CallToolResult::text("Logging test completed: sent three log messages at info level.").into()
}

async fn json_schema_tool(call: ToolCall) -> ToolOutcome {
    let arguments = Value::Object(call.arguments);
    CallToolResult::text(format!("Received valid arguments: {arguments}")).into()
}

async fn custom_header(call: ToolCall) -> ToolOutcome {
    let text = match call.arguments.get("region").and_then(Value::as_str) {
        Some(region) => format!("Region: {region}"),
        None => "No region was given.".to_owned(),
    };
    CallToolResult::text(text).into()
}

/// The suite's canonical JSON Schema 2020-12 fixture (`JSON_SCHEMA_2020_12_FIXTURE`
/// in its `json-schema-2020-12` scenario), key for key: the scenario checks that
/// `tools/list` publishes `$schema`, `$defs` with `$anchor`, `$ref`, `allOf`/`anyOf`,
/// `if`/`then`/`else` and `additionalProperties` unchanged. The `$ref` is local, so
/// compiling it needs no network.
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {
                    "street": { "type": "string" },
                    "city": { "type": "string" }
                }
            }
        },
        "properties": {
            "name": { "type": "string" },
            "address": { "$ref": "#/$defs/address" },
            "contactMethod": { "type": "string", "enum": ["phone", "email"] },
            "phone": { "type": "string" },
            "email": { "type": "string" }
        },
        "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
        "if": {
            "properties": { "contactMethod": { "const": "phone" } },
            "required": ["contactMethod"]
        },
        "then": { "required": ["phone"] },
        "else": { "required": ["email"] },
        "additionalProperties": false
    })
}

/// One optional string argument marked `x-mcp-header`. It has no format or length
/// constraint, because the suite's header checks send values such as `Hello`,
/// `SGVsbG8=` and `=?base64?SGVsbG8=` in the body and must not be refused by
/// argument validation before the header comparison runs.
fn custom_header_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "region": {
                "type": "string",
                "description": "A region name; clients send it in the Mcp-Param-Region header as well.",
                "x-mcp-header": "Region"
            }
        },
        "additionalProperties": false
    })
}
