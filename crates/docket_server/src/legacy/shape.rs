//! What the earlier era's answers look like, shared by the session handling and its
//! parts: refusals with their HTTP status, and results without the current era's
//! discriminator.

use docket_catalog::CatalogError;
use docket_protocol::error::ErrorObject;
use docket_protocol::legacy::SESSION_NOT_FOUND;
use futures_util::StreamExt;
use http::StatusCode;
use serde_json::Value;

use crate::error::McpError;
use crate::reply::{Reply, StreamItem};

/// The revision whose tools have no typed output: `Tool` has no `outputSchema`
/// and `CallToolResult` no `structuredContent` (both came with 2025-06-18).
const UNTYPED_REVISION: &str = "2025-03-26";

/// Why an earlier-era request gets no answer of its method: an HTTP status with
/// the JSON-RPC error to send.
pub(crate) struct Refusal {
    /// The HTTP status.
    pub(crate) status: StatusCode,
    /// The JSON-RPC error.
    pub(crate) error: ErrorObject,
}

impl Refusal {
    pub(super) fn new(status: StatusCode, code: i64, message: impl Into<String>) -> Self {
        Self {
            status,
            error: ErrorObject {
                code,
                message: message.into(),
                data: None,
            },
        }
    }

    /// The answer for a session that does not exist, has expired, or is not the
    /// caller's: 404, which tells the client to initialize again.
    pub(super) fn no_session() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            SESSION_NOT_FOUND,
            "Session not found: it ended or expired; send initialize to start a new one",
        )
    }

    /// The store could not be reached.
    pub(super) fn unavailable(error: &CatalogError) -> Self {
        tracing::warn!(error = %error, "the session store is unavailable");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            docket_protocol::error::INTERNAL_ERROR,
            "the session store is unavailable; try again",
        )
    }

    /// A method's own failure. Served inside a session, errors keep HTTP 200: a 404
    /// would tell the client its session is gone.
    pub(super) fn from_error(error: &McpError) -> Self {
        let (_, error) = error.to_wire();
        Self {
            status: StatusCode::OK,
            error,
        }
    }
}

/// A result in this era's shape: no `resultType` (the current era's discriminator);
/// an interim `input_required` result cannot be expressed and never reaches here.
pub(crate) fn result_shape(mut result: Value) -> Value {
    if let Value::Object(object) = &mut result {
        object.remove("resultType");
    }
    result
}

/// A `tools/list` or `tools/call` answer for a session of `version`: in revision
/// 2025-03-26, which has no typed tool output, without the tools' `outputSchema`
/// and the results' `structuredContent` (the text block carries the same JSON);
/// later revisions keep both. A streamed answer is reshaped as it passes; a client
/// that goes away drops the stream, and with it the call's.
pub(crate) fn typed_output_for(version: &str, reply: Reply) -> Result<Reply, McpError> {
    if version != UNTYPED_REVISION {
        return Ok(reply);
    }
    match reply {
        Reply::Json(result) => Ok(Reply::Json(untyped(result))),
        Reply::Encoded(bytes) => serde_json::from_slice(&bytes)
            .map(|result| Reply::Json(untyped(result)))
            .map_err(|err| McpError::Internal(format!("could not read back a result: {err}"))),
        Reply::Stream(items) => Ok(Reply::Stream(Box::pin(items.map(|item| match item {
            StreamItem::Result(result) => StreamItem::Result(untyped(result)),
            other => other,
        })))),
    }
}

/// `result` without typed output (see [`typed_output_for`]).
fn untyped(mut result: Value) -> Value {
    if let Value::Object(object) = &mut result {
        object.remove("structuredContent");
        if let Some(Value::Array(tools)) = object.get_mut("tools") {
            for tool in tools {
                if let Value::Object(tool) = tool {
                    tool.remove("outputSchema");
                }
            }
        }
    }
    result
}
