#![doc = include_str!("../README.md")]

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
