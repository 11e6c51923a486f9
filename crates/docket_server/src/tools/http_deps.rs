//! What the API and GraphQL tools share: their connections, caps, stores and
//! the OpenAPI catalogs, and how a call's `connection` is found.

use std::sync::Arc;

use docket_protocol::JsonObject;
use docket_protocol::tools::CallToolResult;
use serde_json::Value;

use crate::assets::Assets;
use crate::config::{ConnectionKind, ExportsConfig};
use crate::connections::HttpConnection;
use crate::refusal::Refusal;

/// What the API and GraphQL tools share.
pub(crate) struct HttpDeps {
    /// The `api` and `graphql` connections.
    pub(crate) connections: Vec<HttpConnection>,
    /// Export caps.
    pub(crate) exports: ExportsConfig,
    /// Where exports go, when assets are configured.
    pub(crate) assets: Option<Assets>,
    /// The byte budget of inline answers (`max_result_bytes`).
    pub(crate) results: crate::config::ResultsConfig,
    /// Where the rest of a cut body is kept, when spools are configured.
    pub(crate) continuation: Option<Arc<crate::continuation::Continuation>>,
    /// The OpenAPI catalogs of the api connections.
    pub(crate) catalogs: Arc<crate::catalogs::Catalogs>,
}

impl HttpDeps {
    /// The connection of `kind` a call names.
    pub(crate) fn connection(
        &self,
        arguments: &JsonObject,
        kind: ConnectionKind,
    ) -> Result<&HttpConnection, CallToolResult> {
        let name = arguments
            .get("connection")
            .and_then(Value::as_str)
            .unwrap_or_default();
        self.connections
            .iter()
            .find(|connection| connection.name == name && connection.kind == kind)
            .ok_or_else(|| {
                Refusal::NotFound.result(
                    &format!("no {} connection named {name:?}", kind.as_str()),
                    "Call list_connections to see the connections you may use.",
                )
            })
    }

    /// Whether any connection is of `kind`.
    pub(crate) fn has(&self, kind: ConnectionKind) -> bool {
        self.connections.iter().any(|c| c.kind == kind)
    }
}
