//! Assets as the server holds them: the rows (`AssetStore`), the call catalog and
//! the object sink for the bytes, the links that open them, and who may see an
//! asset. Exports write through it, the asset tools read through it, and
//! `GET /assets/{id}/content` and shares stream from it.

use std::sync::Arc;

use docket_catalog::{Asset, AssetStore, CallCatalog, NewCallRecord};
use docket_export::sink::ObjectSink;

/// The asset store, the call catalog and the sink, shared by exports, the asset
/// tools and downloads.
#[derive(Clone)]
pub(crate) struct Assets {
    /// Asset rows.
    pub store: Arc<dyn AssetStore>,
    /// The call catalog, when recording calls.
    pub calls: Option<Arc<dyn CallCatalog>>,
    /// Asset bytes.
    pub sink: Arc<dyn ObjectSink>,
    /// Signed download links and shares.
    pub links: Arc<crate::links::Links>,
    /// Where a new asset is announced, so listeners of its owner's resources hear it.
    pub changes: Arc<dyn docket_catalog::ChangeFeed>,
    /// How long an asset row whose bytes are written is tried again while the
    /// database is away (`tasks.stale_after`, as a task's ending is), before the
    /// bytes are given up.
    pub record_patience: std::time::Duration,
}

impl Assets {
    /// Records a call; a failure is logged, never the caller's problem.
    pub(crate) async fn record_call(&self, record: NewCallRecord) {
        if let Some(calls) = &self.calls
            && let Err(err) = calls.record(record).await
        {
            tracing::warn!(error = %err, "could not write a call record");
        }
    }

    /// Where the asset's bytes can be downloaded: a signed link that opens in a
    /// browser with no header until `storage.link_ttl` from now.
    pub(crate) async fn download_url(&self, asset: &Asset) -> String {
        self.links.download_url(&asset.id).await
    }
}

/// The asset `id` if the caller may see it: its owner, or an administrator.
pub(crate) async fn visible_asset(
    deps: &Assets,
    id: &str,
    subject: &str,
    is_admin: bool,
) -> Result<Option<Asset>, String> {
    // Text that is no asset id reads as an unknown asset, without a lookup.
    if !docket_task::id::is_well_formed(id) {
        return Ok(None);
    }
    match deps.store.get(id).await {
        Ok(Some(asset)) if is_admin || asset.owner == subject => Ok(Some(asset)),
        Ok(_) => Ok(None),
        Err(err) => Err(err.to_string()),
    }
}

/// A recorded asset for unit tests: `name` in `format`, owned by `alice`, with
/// a fixed id and nothing else set.
#[cfg(test)]
pub(crate) fn sample_asset(name: &str, format: &str) -> Asset {
    Asset {
        id: "0123456789abcdef0123456789abcdef".into(),
        owner: "alice".into(),
        name: name.into(),
        description: None,
        tags: Vec::new(),
        format: format.into(),
        content_type: "text/csv".into(),
        storage_key: "k".into(),
        size_bytes: 0,
        row_count: None,
        connection: None,
        tool: "trino_export".into(),
        idempotency_key: None,
        task_id: None,
        call_id: None,
        created_at: time::OffsetDateTime::UNIX_EPOCH,
    }
}
