//! Docket's own tools: the platform tools, assets, Trino, HTTP APIs and GraphQL;
//! the script tools arrive with their crates.

mod api;
mod assets;
mod diagnostics;
mod exporting;
mod graphql;
mod platform;
pub(crate) mod prompts;
pub(crate) mod script_host;
pub(crate) mod scripts;
mod trino;

use std::sync::Arc;

use crate::assets::Assets;
use crate::config::Config;
use crate::registry::{RegistryError, ToolRegistry};

/// Registers the platform's tools: `platform_info`, `list_connections`, the Trino
/// tools when Trino connections exist, the API and GraphQL tools when connections
/// of those kinds exist, the asset tools when assets are configured, and
/// `diagnostics_sleep` when `diagnostics.enabled`. `platform_info` lists the
/// tools in `tool_names`, which the app fills once every tool is registered.
///
/// # Errors
/// When an embedder already registered a tool with one of these names.
pub(crate) fn register_platform_tools(
    registry: &mut ToolRegistry,
    config: &Config,
    tool_names: Arc<std::sync::OnceLock<Vec<String>>>,
    tasks_enabled: bool,
    trino_connections: Vec<crate::connections::TrinoConnection>,
    http_connections: Vec<crate::connections::HttpConnection>,
    assets: Option<Assets>,
    sessions: Arc<dyn docket_catalog::SessionStore>,
) -> Result<(), RegistryError> {
    if !http_connections.is_empty() {
        let deps = Arc::new(api::HttpDeps {
            connections: http_connections,
            exports: config.exports.clone(),
            assets: assets.clone(),
        });
        api::register(registry, Arc::clone(&deps))?;
        graphql::register(registry, deps)?;
    }
    if config.diagnostics.enabled {
        diagnostics::register(registry)?;
    }
    if let Some(assets) = &assets {
        assets::register(registry, assets.clone())?;
    }
    if !trino_connections.is_empty() {
        let deps = trino::TrinoDeps {
            connections: trino_connections,
            row_threshold: config.consent.trino.row_threshold,
            exports: config.exports.clone(),
            assets,
            used_answers: sessions,
        };
        trino::register(registry, Arc::new(deps))?;
    }
    platform::register(
        registry,
        Arc::new(config.connections.clone()),
        tool_names,
        tasks_enabled,
    )
}
