//! Wire types for the Model Context Protocol, revision 2026-07-28, over JSON-RPC 2.0,
//! and for the tasks extension (`io.modelcontextprotocol/tasks`).
//!
//! This crate is the only place in Docket that knows the wire shape: field names,
//! `resultType` discriminators, `_meta` keys and error codes. It does no I/O and
//! depends on serde alone, so other Rust services can reuse it as it is.
//!
//! Results are plain structs that serialize with their `resultType`; the
//! [`result::stamp_server_info`] helper adds the `serverInfo` every result carries.

pub mod error;
pub mod jsonrpc;
pub mod meta;
pub mod mrtr;
pub mod progress;
pub mod result;
pub mod server;
pub mod tasks;
pub mod tools;

/// The one protocol revision Docket speaks.
pub const PROTOCOL_VERSION: &str = "2026-07-28";

/// Every protocol revision this crate can answer, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &[PROTOCOL_VERSION];

/// The identifier of the tasks extension, as declared in capabilities.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// A JSON object: the shape of `_meta`, `params` and free-form fields.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
