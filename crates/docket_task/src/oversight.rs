//! [`Oversight`]: what administrators read across everyone — the audit log,
//! searched by person, tool and time, and the replicas with their last
//! beats. Kept apart from [`TaskStore`](crate::TaskStore), whose methods
//! serve the task path: these are reads for people, bounded by a limit.

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::store::{AuditEntry, StoreError};

/// The most rows one search returns.
pub const MAX_AUDIT_ROWS: u32 = 500;

/// An audit search; every field narrows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditQuery {
    /// Rows of this subject only.
    pub subject: Option<String>,
    /// Rows of this tool only.
    pub tool: Option<String>,
    /// Rows written at or after this time.
    pub since: Option<OffsetDateTime>,
    /// Rows written before this time.
    pub until: Option<OffsetDateTime>,
    /// At most this many rows (capped at [`MAX_AUDIT_ROWS`]).
    pub limit: u32,
}

/// One audit row, with when it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditRecord {
    /// When the row was written (the database's clock).
    pub at: OffsetDateTime,
    /// The row.
    pub entry: AuditEntry,
}

/// One replica as its row says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaBeat {
    /// Its id.
    pub id: String,
    /// When it first beat.
    pub started_at: OffsetDateTime,
    /// Its last beat.
    pub last_beat_at: OffsetDateTime,
    /// Whether it began a graceful shutdown.
    pub draining: bool,
}

/// Administrators' reads across everyone.
#[async_trait]
pub trait Oversight: Send + Sync + 'static {
    /// The audit rows that match `query`, newest first.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read.
    async fn search_audit(&self, query: &AuditQuery) -> Result<Vec<AuditRecord>, StoreError>;

    /// The replicas, the most recently beating first, at most `limit`, with
    /// the database clock's current time.
    ///
    /// # Errors
    /// [`StoreError`] when the store cannot be read.
    async fn replicas(&self, limit: u32) -> Result<(Vec<ReplicaBeat>, OffsetDateTime), StoreError>;
}
