//! What a method answers with, as the transport sends it: one JSON result, or a
//! stream of messages that the HTTP layer writes as server-sent events.

use docket_protocol::error::ErrorObject;
use docket_protocol::jsonrpc::OutgoingNotification;
use docket_protocol::meta::Implementation;
use docket_protocol::result::WithServerInfo;
use std::pin::Pin;

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
    Stream(Items),
}

/// A streamed answer's messages, polled by the connection that writes them: a
/// long-lived stream costs no task or channel of its own. Dropping it (the client
/// went away) is how its producer learns so.
pub(crate) type Items = Pin<Box<dyn futures_util::Stream<Item = StreamItem> + Send>>;

impl Reply {
    /// A stream whose messages a task sends through `receiver`'s channel.
    pub(crate) fn channel(mut receiver: mpsc::Receiver<StreamItem>) -> Self {
        Self::Stream(Box::pin(futures_util::stream::poll_fn(move |cx| {
            receiver.poll_recv(cx)
        })))
    }
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
