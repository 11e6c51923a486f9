//! The names the OpenTelemetry semantic conventions for MCP give spans' attributes and
//! metrics (<https://github.com/open-telemetry/semantic-conventions-genai/blob/main/docs/gen-ai/mcp.md>),
//! and the `tracing` field names that set a span's OpenTelemetry name, kind and status.
//!
//! A server span is named `{mcp.method.name} {target}`, where the target is the tool's or the
//! prompt's name (`tools/call trino_export`), or `{mcp.method.name}` alone when there is no
//! low-cardinality target; its kind is SERVER.

/// The request's or notification's method (`tools/call`). Required.
pub const MCP_METHOD_NAME: &str = "mcp.method.name";
/// The MCP session, when the request is part of one (the earlier protocol era).
pub const MCP_SESSION_ID: &str = "mcp.session.id";
/// The protocol revision (`2026-07-28`).
pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
/// The resource's URI on `resources/read`, `resources/subscribe` and `resources/unsubscribe`.
pub const MCP_RESOURCE_URI: &str = "mcp.resource.uri";
/// The tool's name on `tools/call`.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// `execute_tool` on `tools/call`, and unset otherwise.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// The value of [`GEN_AI_OPERATION_NAME`] for a tool call.
pub const GEN_AI_OPERATION_EXECUTE_TOOL: &str = "execute_tool";
/// The prompt's name on `prompts/get`.
pub const GEN_AI_PROMPT_NAME: &str = "gen_ai.prompt.name";
/// The JSON-RPC request id as a string; not set for notifications or a `null` id.
pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
/// The class of error the operation ended with: the JSON-RPC error code as a string, or
/// [`ERROR_TYPE_TOOL_ERROR`] for a tool result with `isError: true`. Set only on failure.
pub const ERROR_TYPE: &str = "error.type";
/// [`ERROR_TYPE`] of a `tools/call` whose result has `isError: true`.
pub const ERROR_TYPE_TOOL_ERROR: &str = "tool_error";
/// [`ERROR_TYPE`] when no more specific value applies.
pub const ERROR_TYPE_OTHER: &str = "_OTHER";
/// The JSON-RPC error code of the response, when it carries one (`-32602`).
pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
/// The transport under MCP: `tcp` for Streamable HTTP, `pipe` for stdio.
pub const NETWORK_TRANSPORT: &str = "network.transport";
/// The application protocol under MCP, lower-case (`http`).
pub const NETWORK_PROTOCOL_NAME: &str = "network.protocol.name";
/// Its version (`1.1`, `2`).
pub const NETWORK_PROTOCOL_VERSION: &str = "network.protocol.version";
/// The server's address (on client spans: the upstream's host).
pub const SERVER_ADDRESS: &str = "server.address";
/// The server's port.
pub const SERVER_PORT: &str = "server.port";
/// The client's address as the server saw it.
pub const CLIENT_ADDRESS: &str = "client.address";
/// The client's port.
pub const CLIENT_PORT: &str = "client.port";

/// Histogram, seconds: an MCP request or notification from its receipt to its answer.
pub const MCP_SERVER_OPERATION_DURATION: &str = "mcp.server.operation.duration";
/// Histogram, seconds: an MCP session from its start to its end.
pub const MCP_SERVER_SESSION_DURATION: &str = "mcp.server.session.duration";
/// The unit of both durations (UCUM seconds).
pub const DURATION_UNIT: &str = "s";
/// The explicit bucket boundaries the conventions give both durations, in seconds.
pub const DURATION_BUCKETS_SECONDS: [f64; 14] = [
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
];

/// The `tracing` field whose value becomes the OpenTelemetry span's name
/// (`tracing::info_span!("mcp", otel.name = %name)`).
pub const OTEL_NAME: &str = "otel.name";
/// The `tracing` field that sets the span's kind (`"server"`, `"client"`, `"internal"`).
pub const OTEL_KIND: &str = "otel.kind";
/// The `tracing` field that sets the span's status (`"error"`, `"ok"`).
pub const OTEL_STATUS_CODE: &str = "otel.status_code";
/// The `tracing` field that carries the status description (the JSON-RPC error message).
pub const OTEL_STATUS_DESCRIPTION: &str = "otel.status_description";

/// The span name the conventions give a server span: `{method} {target}`, or the method
/// alone when there is no target.
pub fn span_name(method: &str, target: Option<&str>) -> String {
    match target {
        Some(target) if !target.is_empty() => format!("{method} {target}"),
        _ => method.to_owned(),
    }
}
