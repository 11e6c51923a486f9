//! Docket's own tools. This issue brings the platform tools; the Trino, API,
//! GraphQL and script tools arrive with their crates.

mod diagnostics;
mod platform;

use std::sync::Arc;

use docket_protocol::tools::{CallToolResult, ContentBlock};
use serde_json::json;

use crate::config::Config;
use crate::registry::{RegistryError, ToolRegistry};

pub use diagnostics::DIAGNOSTICS_SLEEP;
pub use platform::{LIST_CONNECTIONS, PLATFORM_INFO};

/// Registers `platform_info` and `list_connections`, and `diagnostics_sleep` when
/// `diagnostics.enabled`.
///
/// # Errors
/// When an embedder already registered a tool with one of these names.
pub fn register_platform_tools(
    registry: &mut ToolRegistry,
    config: &Config,
    tasks_enabled: bool,
) -> Result<(), RegistryError> {
    if config.diagnostics.enabled {
        diagnostics::register(registry)?;
    }
    platform::register(
        registry,
        Arc::new(config.connections.clone()),
        tasks_enabled,
    )
}

/// A tool-level failure in the platform's error contract: `isError: true`, a text
/// block `"<message> (code: <code>) Hint: <hint>"`, and
/// `structuredContent: {error: {code, category, message, hint}}`.
pub fn error_result(code: &str, category: &str, message: &str, hint: &str) -> CallToolResult {
    let mut result = CallToolResult::from_content(vec![ContentBlock::text(format!(
        "{message} (code: {code}) Hint: {hint}"
    ))]);
    result.is_error = Some(true);
    result.structured_content = Some(
        json!({ "error": { "code": code, "category": category, "message": message, "hint": hint } }),
    );
    result
}
