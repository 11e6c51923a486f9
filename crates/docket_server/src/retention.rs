//! The retention pass for what grows besides tasks and runs (their own passes live
//! with them): audit rows after `audit.retention_days`, call records after
//! `calls.retention_days`, assets after `storage.retention_days` and, with
//! `storage.delete_with_task`, once their task is gone. An asset's bytes are
//! deleted before its row, so a crash in between leaves a row whose download is
//! gone (and is deleted again next pass), never bytes nobody can find.
//!
//! Principals (what signed-in callers' tokens said about them, for their script
//! runs) are forgotten once not seen for `audit.retention_days`, or
//! [`PRINCIPALS_KEPT_WHEN_AUDIT_IS`] when audit rows are kept forever: a person
//! kept that long without signing in is, for their runs, as if never seen.
//!
//! It runs on every replica, hourly, in batches of [`BATCH`]; the store makes
//! concurrent passes take disjoint rows.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use docket_catalog::retention::{DueAsset, Retention};

use crate::assets::Assets;
use crate::state::App;

/// Rows one statement deletes or names at most.
const BATCH: u32 = 200;

/// How often the pass runs.
pub(crate) const INTERVAL: Duration = Duration::from_secs(3600);

/// How long after start-up the first pass runs.
pub(crate) const FIRST_PASS_AFTER: Duration = Duration::from_secs(60);

/// How long a principal not seen is remembered when `audit.retention_days` is 0
/// (audit rows kept forever): 90 days. Unlike an audit row, a principal's row
/// is personal data kept for acting as them, so it is never kept forever.
pub(crate) const PRINCIPALS_KEPT_WHEN_AUDIT_IS: Duration = Duration::from_secs(90 * 86_400);

/// How long a principal not seen is remembered under `config`: as long as audit
/// rows are kept, or [`PRINCIPALS_KEPT_WHEN_AUDIT_IS`] when those are kept forever.
pub(crate) fn principal_retention(config: &crate::Config) -> Duration {
    days(config.audit.retention_days).unwrap_or(PRINCIPALS_KEPT_WHEN_AUDIT_IS)
}

/// How long each kind of row is kept; `None` keeps it forever.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionAges {
    /// Audit rows.
    pub audit: Option<Duration>,
    /// Call records.
    pub calls: Option<Duration>,
    /// Assets.
    pub assets: Option<Duration>,
    /// Whether assets whose task (or run) is gone are deleted.
    pub assets_with_their_task: bool,
}

/// What one pass deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// Audit rows.
    pub audit: u64,
    /// Call records.
    pub calls: u64,
    /// Assets, bytes and row.
    pub assets: u64,
}

fn days(days: u32) -> Option<Duration> {
    (days > 0).then(|| Duration::from_secs(u64::from(days) * 86_400))
}

impl RetentionAges {
    /// The ages the configuration gives.
    pub fn from_config(config: &crate::Config) -> Self {
        Self {
            audit: days(config.audit.retention_days),
            calls: days(config.calls.retention_days),
            assets: days(config.storage.retention_days),
            assets_with_their_task: config.storage.delete_with_task,
        }
    }
}

/// After a full batch of a backlog, rests twice as long as the batch took, so a pass never
/// holds more than a third of a connection's time from the callers meanwhile.
async fn rest_after(started: tokio::time::Instant) {
    tokio::time::sleep(started.elapsed() * 2).await;
}

/// Deletes batch after batch until one comes back short; the total.
async fn drain_batches<F, Fut>(what: &str, mut batch: F) -> u64
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<u64, docket_catalog::CatalogError>>,
{
    let mut total = 0;
    loop {
        let started = tokio::time::Instant::now();
        match batch().await {
            Ok(deleted) => {
                total += deleted;
                if deleted < u64::from(BATCH) {
                    return total;
                }
                rest_after(started).await;
            }
            Err(error) => {
                tracing::warn!(%error, what, "retention pass failed");
                return total;
            }
        }
    }
}

/// Assets deleted at once: each is a delete in the object store (a round trip to S3)
/// and a statement, so a backlog drains several times faster than one by one, while
/// most of the pool stays with the callers.
const ASSETS_AT_ONCE: usize = 4;

/// Deletes `due` assets: bytes first, then the row. Bytes already gone are fine.
/// Each owner whose assets went is told once, on every replica, that their resource
/// list changed.
async fn delete_assets(assets: &Assets, due: Vec<DueAsset>) -> u64 {
    use futures_util::StreamExt as _;

    let deleted_owners: Vec<String> = futures_util::stream::iter(due)
        .map(|asset| delete_asset(assets, asset))
        .buffer_unordered(ASSETS_AT_ONCE)
        .filter_map(std::future::ready)
        .collect()
        .await;
    let deleted = u64::try_from(deleted_owners.len()).unwrap_or(u64::MAX);
    let owners: std::collections::BTreeSet<String> = deleted_owners.into_iter().collect();
    for owner in owners {
        if let Err(error) = assets
            .changes
            .publish(docket_catalog::CatalogChange::Assets { owner })
            .await
        {
            tracing::warn!(%error, "could not announce that assets were deleted");
        }
    }
    deleted
}

/// Deletes one asset, bytes first; its owner when its row went.
async fn delete_asset(assets: &Assets, asset: DueAsset) -> Option<String> {
    match assets.sink.delete(&asset.storage_key).await {
        Ok(()) | Err(docket_export::sink::SinkError::NotFound { .. }) => {}
        Err(error) => {
            tracing::warn!(%error, asset = asset.id, "could not delete an asset's bytes");
            return None;
        }
    }
    match assets.store.delete(&asset.id).await {
        Ok(_) => Some(asset.owner),
        Err(error) => {
            tracing::warn!(%error, asset = asset.id, "could not delete an asset");
            None
        }
    }
}

/// One pass over everything `retention` holds, with `ages`.
pub(crate) async fn pass(
    retention: &Arc<dyn Retention>,
    assets: Option<&Assets>,
    ages: RetentionAges,
) -> RetentionReport {
    let mut report = RetentionReport::default();
    if let Some(age) = ages.audit {
        report.audit = drain_batches("audit rows", || {
            retention.delete_audit_older_than(age, BATCH)
        })
        .await;
    }
    if let Some(age) = ages.calls {
        report.calls = drain_batches("call records", || {
            retention.delete_calls_older_than(age, BATCH)
        })
        .await;
    }
    let Some(assets) = assets else {
        return report;
    };
    loop {
        let started = tokio::time::Instant::now();
        let mut due = Vec::new();
        if let Some(age) = ages.assets {
            match retention.assets_older_than(age, BATCH).await {
                Ok(found) => due.extend(found),
                Err(error) => tracing::warn!(%error, "retention pass failed: assets"),
            }
        }
        if ages.assets_with_their_task {
            match retention.assets_without_their_task(BATCH).await {
                Ok(found) => due.extend(found),
                Err(error) => {
                    tracing::warn!(%error, "retention pass failed: assets of deleted tasks")
                }
            }
        }
        due.sort_by(|a, b| a.id.cmp(&b.id));
        due.dedup_by(|a, b| a.id == b.id);
        let found = due.len();
        let deleted = delete_assets(assets, due).await;
        report.assets += deleted;
        // A short batch, or one whose rows could not be deleted, ends the pass.
        if found < BATCH as usize || deleted == 0 {
            return report;
        }
        rest_after(started).await;
    }
}

impl App {
    /// Runs the retention pass of audit rows, call records and assets once with
    /// `ages` (the server runs it hourly with [`RetentionAges::from_config`]); what
    /// it deleted. Without a store for it (no database), nothing.
    pub async fn delete_expired(&self, ages: RetentionAges) -> RetentionReport {
        match &self.state.retention {
            Some(retention) => pass(retention, self.state.assets.as_ref(), ages).await,
            None => RetentionReport::default(),
        }
    }

    /// Forgets the principals not seen for `age` (the server does it hourly,
    /// with `audit.retention_days`, or 90 days when audit rows are kept
    /// forever); how many. Their script runs then act as if they had never
    /// signed in, until they sign in again.
    pub async fn forget_unseen_principals(&self, age: Duration) -> u64 {
        let cutoff = time::OffsetDateTime::now_utc()
            .saturating_sub(time::Duration::try_from(age).unwrap_or(time::Duration::MAX));
        let store = &self.state.principals.store;
        drain_batches("principals", || store.forget_unseen_before(cutoff, BATCH)).await
    }

    /// Deletes the spools of cut answers past `results.continuation_ttl`, with
    /// their rows (the server does it hourly; an expired spool already reads as
    /// gone); how many.
    pub async fn delete_expired_spools(&self) -> u64 {
        let Some(continuation) = &self.state.continuation else {
            return 0;
        };
        drain_batches("spools", || continuation.delete_expired(BATCH)).await
    }

    /// Ends the earlier era's sessions idle for longer than
    /// `server.session_idle_timeout` (the server does it hourly), recording each
    /// one's `mcp.server.session.duration` as a client's `DELETE` does; how many.
    pub async fn end_idle_sessions(&self) -> u64 {
        let idle = self.config().server.session_idle_timeout;
        let sessions = &self.state.sessions;
        drain_batches("idle sessions", || async move {
            let ended = sessions.delete_idle_sessions(idle, BATCH as usize).await?;
            for session in &ended {
                crate::telemetry::session_ended(
                    &session.protocol_version,
                    session.lasted.as_secs_f64(),
                );
            }
            Ok(u64::try_from(ended.len()).unwrap_or(u64::MAX))
        })
        .await
    }
}
