//! JSON-RPC error objects and every error code MCP 2026-07-28 defines, with the
//! `data` shape each code requires.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::meta::ClientCapabilities;

/// Invalid JSON was received.
pub const PARSE_ERROR: i64 = -32700;
/// The JSON sent is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// The method does not exist (HTTP 404 on Streamable HTTP).
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Invalid params: unknown tool or task, bad arguments, missing required `_meta`.
pub const INVALID_PARAMS: i64 = -32602;
/// An unexpected server failure.
pub const INTERNAL_ERROR: i64 = -32603;
/// An HTTP header is missing, malformed or disagrees with the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// The request needs a client capability it did not declare.
pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
/// The requested protocol version is not supported.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// A per-caller limit refused the request (its rate, its share of the server's
/// connections, its open streams); the message names the limit. Not an MCP code:
/// one of the JSON-RPC range left to implementations, answered with HTTP 429.
pub const LIMIT_REACHED: i64 = -32029;

/// A JSON-RPC error object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code.
    pub code: i64,
    /// A short, human-readable description.
    pub message: String,
    /// Structured detail; its shape depends on the code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// The `data` of a -32022 error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UnsupportedVersionData {
    /// The versions the server supports.
    pub supported: Vec<String>,
    /// The version the client asked for, echoed exactly.
    pub requested: String,
    /// The earlier era's versions, served after `initialize`.
    #[serde(default)]
    pub legacy: Vec<String>,
}

/// The `data` of a -32021 error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MissingCapabilityData {
    /// The capabilities the request needed, shaped like `ClientCapabilities`.
    pub required_capabilities: ClientCapabilities,
}

impl ErrorObject {
    /// An error with a code and message and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// -32700: the body is not JSON.
    pub fn parse_error(detail: impl std::fmt::Display) -> Self {
        Self::new(PARSE_ERROR, format!("Parse error: {detail}"))
    }

    /// -32600: the body is not a valid request.
    pub fn invalid_request(detail: impl std::fmt::Display) -> Self {
        Self::new(INVALID_REQUEST, format!("Invalid request: {detail}"))
    }

    /// -32601, naming the method and the versions this server speaks, so a client of an
    /// older revision (which would send `initialize`) learns what to use instead.
    pub fn method_not_found(method: &str) -> Self {
        Self {
            code: METHOD_NOT_FOUND,
            message: format!("Method not found: {method}"),
            data: Some(json!({ "method": method, "supportedVersions": crate::SUPPORTED_VERSIONS })),
        }
    }

    /// -32602 with a message.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(INVALID_PARAMS, message)
    }

    /// -32603 with a message that must not leak internals.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(INTERNAL_ERROR, message)
    }

    /// -32020 with a message naming the header.
    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(HEADER_MISMATCH, message)
    }

    /// -32021 naming the capabilities the request needed.
    pub fn missing_capability(
        message: impl Into<String>,
        required_capabilities: ClientCapabilities,
    ) -> Self {
        let data = MissingCapabilityData {
            required_capabilities,
        };
        Self {
            code: MISSING_REQUIRED_CLIENT_CAPABILITY,
            message: message.into(),
            data: serde_json::to_value(data).ok(),
        }
    }

    /// -32021 for a request that needs the tasks extension.
    pub fn tasks_extension_required(message: impl Into<String>) -> Self {
        Self::missing_capability(
            message,
            ClientCapabilities::with_extension(crate::TASKS_EXTENSION),
        )
    }

    /// -32022 with the supported versions and the requested one.
    pub fn unsupported_version(requested: &str) -> Self {
        let data = UnsupportedVersionData {
            supported: crate::SUPPORTED_VERSIONS
                .iter()
                .map(|v| (*v).to_owned())
                .collect(),
            requested: requested.to_owned(),
            legacy: crate::legacy::LEGACY_VERSIONS
                .iter()
                .map(|v| (*v).to_owned())
                .collect(),
        };
        Self {
            code: UNSUPPORTED_PROTOCOL_VERSION,
            message: format!(
                "Unsupported protocol version {requested:?}: {}",
                crate::legacy::versions_sentence()
            ),
            data: serde_json::to_value(data).ok(),
        }
    }
}
