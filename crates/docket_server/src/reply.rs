//! What a method answers with, as the transport sends it: one JSON result, or a
//! stream of messages that the HTTP layer writes as server-sent events.

use docket_protocol::error::ErrorObject;
use docket_protocol::jsonrpc::OutgoingNotification;
use docket_protocol::meta::Implementation;
use docket_protocol::result::WithServerInfo;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::error::McpError;

/// How a method answers.
pub(crate) enum Reply {
    /// One JSON result; the transport stamps it with the server's info.
    Json(Value),
    /// One result already encoded, the server's info included (see [`encode`]): the
    /// transport writes these bytes as they are.
    Encoded(Vec<u8>),
    /// An SSE stream of notifications ending with the result.
    Stream(mpsc::Receiver<StreamItem>),
}

/// One message on an SSE response stream.
pub(crate) enum StreamItem {
    /// A notification related to the request (progress, log messages).
    Notification(OutgoingNotification),
    /// A JSON-RPC request from the server to the client, related to the request
    /// (`elicitation/create` in a session of the earlier era), written as it is.
    Message(Value),
    /// The final result; ends the stream.
    Result(Value),
    /// The final error; ends the stream.
    Error(ErrorObject),
}

/// Serializes a result.
pub(crate) fn to_value(result: &impl serde::Serialize) -> Result<Value, McpError> {
    serde_json::to_value(result)
        .map_err(|err| McpError::Internal(format!("could not encode a result: {err}")))
}

/// Encodes a typed result with the server's info in one pass, for the answers that
/// are sent most (`tasks/get`, a created task): no `Value` is built in between. Only
/// for result types without a `_meta` of their own.
pub(crate) fn encode(
    result: &impl serde::Serialize,
    server_info: &Implementation,
) -> Result<Reply, McpError> {
    serde_json::to_vec(&WithServerInfo::new(result, server_info))
        .map(Reply::Encoded)
        .map_err(|err| McpError::Internal(format!("could not encode a result: {err}")))
}
