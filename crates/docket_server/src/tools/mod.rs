//! Docket's own tools: the platform tools, assets, Trino, HTTP APIs and GraphQL;
//! the script tools arrive with their crates.

mod api;
mod assets;
mod diagnostics;
mod endpoints;
mod exporting;
mod graphql;
mod http_deps;
mod output;
mod platform;
pub(crate) mod prompts;
pub(crate) mod script_host;
pub(crate) mod scripts;
mod shares;
mod trino;

use std::sync::Arc;

use crate::assets::Assets;
use crate::config::Config;
use crate::registry::{RegistryError, ToolRegistry};

/// The connections the platform's tools reach, by kind.
pub(crate) struct Connections {
    /// Trino connections.
    pub(crate) trino: Vec<crate::connections::TrinoConnection>,
    /// API and GraphQL connections.
    pub(crate) http: Vec<crate::connections::HttpConnection>,
    /// The OpenAPI catalogs of the api connections.
    pub(crate) catalogs: Arc<crate::catalogs::Catalogs>,
}

/// The stores the platform's tools write to.
pub(crate) struct Stores {
    /// Asset rows and bytes, when configured.
    pub(crate) assets: Option<Assets>,
    /// Sessions, and the answers marked used (consents run once).
    pub(crate) sessions: Arc<dyn docket_catalog::SessionStore>,
    /// Where the rest of a cut answer is kept, when spools are configured.
    pub(crate) continuation: Option<Arc<crate::continuation::Continuation>>,
}

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
    connections: Connections,
    stores: Stores,
) -> Result<(), RegistryError> {
    let Connections {
        trino: trino_connections,
        http: http_connections,
        catalogs,
    } = connections;
    let Stores {
        assets,
        sessions,
        continuation,
    } = stores;
    let certificates: Vec<platform::Certificate> = http_connections
        .iter()
        .filter_map(|connection| {
            connection
                .client
                .certificate_expires()
                .map(|expires| platform::Certificate {
                    connection: connection.name.clone(),
                    expires,
                })
        })
        .collect();
    if !http_connections.is_empty() {
        let deps = Arc::new(http_deps::HttpDeps {
            connections: http_connections,
            exports: config.exports.clone(),
            assets: assets.clone(),
            results: config.results.clone(),
            continuation: continuation.clone(),
            catalogs,
        });
        api::register(registry, Arc::clone(&deps))?;
        endpoints::register(registry, Arc::clone(&deps))?;
        graphql::register(registry, deps)?;
    }
    if config.diagnostics.enabled {
        diagnostics::register(registry)?;
    }
    if let Some(assets) = &assets {
        assets::register(registry, assets.clone())?;
        shares::register(registry, assets.clone())?;
    }
    if !trino_connections.is_empty() {
        let deps = trino::TrinoDeps {
            connections: trino_connections,
            row_threshold: config.consent.trino.row_threshold,
            exports: config.exports.clone(),
            assets,
            used_answers: sessions,
            results: config.results.clone(),
            continuation,
        };
        trino::register(registry, Arc::new(deps))?;
    }
    platform::register(
        registry,
        Arc::new(config.connections.clone()),
        tool_names,
        tasks_enabled,
        Arc::new(certificates),
    )
}
