//! The one place that turns failures into JSON-RPC errors and HTTP statuses, and
//! the one place that logs them.

use docket_protocol::error::ErrorObject;
use docket_protocol::meta::ClientCapabilities;
use http::StatusCode;

use crate::registry::ToolError;

/// A request that failed at the protocol level.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The body is not JSON.
    #[error("parse error: {0}")]
    Parse(String),
    /// The body is not one JSON-RPC request or notification.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// `params._meta` is missing or malformed.
    #[error("invalid _meta: {0}")]
    InvalidMeta(String),
    /// A header is missing, malformed or disagrees with the body.
    #[error("header mismatch: {0}")]
    HeaderMismatch(String),
    /// The protocol version is not one this server speaks.
    #[error("unsupported protocol version {0:?}")]
    UnsupportedVersion(String),
    /// The method does not exist here.
    #[error("method not found: {0}")]
    MethodNotFound(String),
    /// The request needs a client capability it did not declare.
    #[error("missing client capability: {message}")]
    MissingCapability {
        /// What to tell the client.
        message: String,
        /// What it needed (boxed: it is large and rare).
        required: Box<ClientCapabilities>,
    },
    /// The params are unusable: unknown tool, bad arguments, bad `requestState`.
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// `resources/read` of a URI that names no resource the caller may read.
    #[error("resource not found: {0}")]
    ResourceNotFound(String),
    /// A dependency (the database) or the server's state (shutting down) keeps the
    /// request from being served now; the message says what to do and is sent.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// A per-caller limit (its rate, its share of connections, its streams) refuses
    /// the request now; the message names the limit and is sent.
    #[error("limit reached: {0}")]
    Limited(String),
    /// Something failed inside the server; the detail is logged, not sent.
    #[error("internal error: {0}")]
    Internal(String),
    /// A task's own failure, answered as it was recorded (a 2025-11-25 `tasks/result`
    /// returns exactly what the call would have).
    #[error("the task failed: {}", .0.message)]
    TaskFailed(ErrorObject),
}

impl From<ToolError> for McpError {
    fn from(error: ToolError) -> Self {
        match error {
            ToolError::InvalidParams(message) => McpError::InvalidParams(message),
            ToolError::MissingCapability { message, required } => {
                McpError::MissingCapability { message, required }
            }
            ToolError::Internal(message) => McpError::Internal(message),
        }
    }
}

impl McpError {
    /// The HTTP status and JSON-RPC error object for this failure. Logs it: client
    /// mistakes at debug level, server failures at error level.
    pub fn to_wire(&self) -> (StatusCode, ErrorObject) {
        match self {
            McpError::Internal(detail) => tracing::error!(error = %detail, "request failed"),
            McpError::Unavailable(detail) => {
                tracing::warn!(error = %detail, "request could not be served now")
            }
            other => tracing::debug!(error = %other, "request refused"),
        }
        match self {
            McpError::Parse(detail) => (StatusCode::BAD_REQUEST, ErrorObject::parse_error(detail)),
            McpError::InvalidRequest(detail) => (
                StatusCode::BAD_REQUEST,
                ErrorObject::invalid_request(detail),
            ),
            McpError::InvalidMeta(detail) => (
                StatusCode::BAD_REQUEST,
                ErrorObject::invalid_params(detail.clone()),
            ),
            McpError::HeaderMismatch(detail) => (
                StatusCode::BAD_REQUEST,
                ErrorObject::header_mismatch(detail.clone()),
            ),
            McpError::UnsupportedVersion(requested) => (
                StatusCode::BAD_REQUEST,
                ErrorObject::unsupported_version(requested),
            ),
            McpError::MethodNotFound(method) => {
                (StatusCode::NOT_FOUND, ErrorObject::method_not_found(method))
            }
            McpError::MissingCapability { message, required } => (
                StatusCode::BAD_REQUEST,
                ErrorObject::missing_capability(message.clone(), (**required).clone()),
            ),
            McpError::InvalidParams(detail) => {
                (StatusCode::OK, ErrorObject::invalid_params(detail.clone()))
            }
            // The same bytes for a URI that exists but is not the caller's.
            McpError::ResourceNotFound(uri) => (
                StatusCode::OK,
                ErrorObject {
                    code: docket_protocol::error::INVALID_PARAMS,
                    message: "Resource not found".to_owned(),
                    data: Some(serde_json::json!({ "uri": uri })),
                },
            ),
            McpError::Unavailable(message) => {
                (StatusCode::OK, ErrorObject::internal(message.clone()))
            }
            McpError::Limited(message) => (
                StatusCode::TOO_MANY_REQUESTS,
                ErrorObject::new(docket_protocol::error::LIMIT_REACHED, message.clone()),
            ),
            McpError::Internal(_) => (
                StatusCode::OK,
                ErrorObject::internal("internal error; see the server log"),
            ),
            McpError::TaskFailed(error) => (StatusCode::OK, error.clone()),
        }
    }
}
