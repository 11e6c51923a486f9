//! What the earlier era's answers look like, shared by the session handling and its
//! parts: refusals with their HTTP status, and results without the current era's
//! discriminator.

use docket_catalog::CatalogError;
use docket_protocol::error::ErrorObject;
use docket_protocol::legacy::SESSION_NOT_FOUND;
use http::StatusCode;
use serde_json::Value;

use crate::error::McpError;

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
