//! Audit rows of calls that did not become tasks (a task's row is written with
//! its ending, in the same statement): written in the background so an audit
//! failure never fails a call, tried again while the store is away as an ending
//! is, and flushed at shutdown so a replica that stops loses none it still holds.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::task::TaskTracker;

use crate::store::{AuditEntry, StoreError, TaskStore};

/// The first pause before an audit row is tried again; it doubles up to
/// [`LONGEST_AUDIT_RETRY`].
const FIRST_AUDIT_RETRY: Duration = Duration::from_millis(100);

/// The longest pause between attempts to write an audit row.
const LONGEST_AUDIT_RETRY: Duration = Duration::from_secs(2);

/// Writes one audit row, as an ending is written: a store that is briefly away is
/// tried again with a growing pause for up to `patience` (`tasks.stale_after`),
/// so an outage shorter than that loses no audit row. Whether it was written; the
/// last failure is logged.
pub async fn record_audit_patiently(
    store: &dyn TaskStore,
    entry: AuditEntry,
    patience: Duration,
) -> bool {
    let give_up_at = tokio::time::Instant::now() + patience;
    let mut delay = FIRST_AUDIT_RETRY;
    loop {
        match store.record_audit(entry.clone()).await {
            Ok(()) => return true,
            Err(StoreError::Unavailable(error))
                if tokio::time::Instant::now() + delay <= give_up_at =>
            {
                tracing::warn!(tool = entry.tool, %error, retry_in = ?delay, "could not write an audit row yet; trying again");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(LONGEST_AUDIT_RETRY);
            }
            Err(error) => {
                tracing::error!(tool = entry.tool, %error, "could not write an audit row");
                return false;
            }
        }
    }
}

/// How many rows may wait for the store at once; past it a row is tried once, so
/// a long outage under load costs a bounded amount of memory.
pub const MAX_PENDING_AUDIT_ROWS: usize = 10_000;

/// Writes audit rows in the background ([`record_audit_patiently`] each, at most
/// [`MAX_PENDING_AUDIT_ROWS`] waiting at once), and keeps count of those still
/// being written so a shutdown can wait for them ([`AuditWriter::flush`]).
pub struct AuditWriter {
    store: Arc<dyn TaskStore>,
    patience: Duration,
    max_pending: usize,
    writes: TaskTracker,
}

impl std::fmt::Debug for AuditWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditWriter")
            .field("patience", &self.patience)
            .field("writing", &self.writes.len())
            .finish_non_exhaustive()
    }
}

impl AuditWriter {
    /// A writer into `store` that tries each row for `patience`.
    pub fn new(store: Arc<dyn TaskStore>, patience: Duration) -> Self {
        Self {
            store,
            patience,
            max_pending: MAX_PENDING_AUDIT_ROWS,
            writes: TaskTracker::new(),
        }
    }

    /// At most `max_pending` rows wait for the store at once (default
    /// [`MAX_PENDING_AUDIT_ROWS`]); past it a row is tried once.
    #[must_use]
    pub fn with_max_pending(mut self, max_pending: usize) -> Self {
        self.max_pending = max_pending;
        self
    }

    /// The store the rows go to.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.store
    }

    /// Writes `entry` in the background. Must be called within a tokio runtime.
    pub fn write(&self, entry: AuditEntry) {
        let patience = if self.writes.len() < self.max_pending {
            self.patience
        } else {
            Duration::ZERO
        };
        let store = Arc::clone(&self.store);
        self.writes.spawn(async move {
            record_audit_patiently(store.as_ref(), entry, patience).await;
        });
    }

    /// Waits up to `bound` for the rows still being written (a shutdown calls it
    /// once the work that writes them has stopped); whether all were. Rows
    /// written after it are still written in the background.
    pub async fn flush(&self, bound: Duration) -> bool {
        self.writes.close();
        let flushed = tokio::time::timeout(bound, self.writes.wait())
            .await
            .is_ok();
        if !flushed {
            tracing::error!(
                unwritten = self.writes.len(),
                "stopping with audit rows the database did not take in time"
            );
        }
        self.writes.reopen();
        flushed
    }
}
