#![doc = include_str!("../README.md")]

#[cfg(test)]
mod arbitrary;
pub mod completion;
pub mod error;
pub mod jsonrpc;
pub mod legacy;
pub mod logging;
pub mod meta;
pub mod mrtr;
pub mod progress;
pub mod prompts;
pub mod resources;
pub mod result;
pub mod server;
pub mod tasks;
pub mod tools;
pub mod ui;

/// The protocol revision of the current era (requests carry `_meta`); the earlier
/// era's revisions are [`legacy::LEGACY_VERSIONS`].
pub const PROTOCOL_VERSION: &str = "2026-07-28";

/// Every revision of the current era this crate can answer, newest first.
pub const SUPPORTED_VERSIONS: &[&str] = &[PROTOCOL_VERSION];

/// The identifier of the tasks extension, as declared in capabilities.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// The identifier of the MCP Apps extension (interactive views in the host), as
/// declared in capabilities.
pub const UI_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The media type of an MCP Apps view: an HTML document the host frames.
pub const UI_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// A JSON object: the shape of `_meta`, `params` and free-form fields.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
