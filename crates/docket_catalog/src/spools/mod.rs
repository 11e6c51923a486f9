//! Result spools (issue 39): where the rest of a cut answer goes, so the caller
//! reads on with a cursor instead of running the query again. A spool is a row
//! here (who owns it, how far it is written, whether it is whole) and chunks of
//! rows in the object store, written by the replica that ran the query and read
//! by any replica. Times are the caller's, as for links: the replica's clock
//! decides expiry and staleness, and every backend compares them the same way.

use async_trait::async_trait;
use serde_json::Value;
use time::OffsetDateTime;

use crate::error::{CatalogError, require};

#[cfg(feature = "testing")]
pub mod testing;

/// The longest owner subject a spool keeps.
pub const MAX_SPOOL_OWNER_BYTES: usize = 512;
/// The longest tool or connection name a spool keeps.
pub const MAX_SPOOL_NAME_BYTES: usize = 128;
/// The longest column description (JSON text) a spool keeps.
pub const MAX_SPOOL_COLUMNS_BYTES: usize = 256 * 1024;
/// The longest upstream id a spool keeps.
pub const MAX_SPOOL_SOURCE_ID_BYTES: usize = 256;
/// The longest error message a spool keeps.
pub const MAX_SPOOL_ERROR_BYTES: usize = 1024;

/// A spool about to be filled.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSpool {
    /// Its id ([`generate_id`](crate::generate_id)).
    pub id: String,
    /// Who may read it: the caller whose answer was cut.
    pub owner: String,
    /// The tool whose answer it continues; a cursor works with that tool only.
    pub tool: String,
    /// The connection the query ran on.
    pub connection: String,
    /// The result's columns (a JSON array), as the first page named them.
    pub columns: Value,
    /// The upstream's id of what it reads (Trino's query id), for every page to
    /// name, when the upstream gave one (at most 256 bytes).
    pub source_id: Option<String>,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it is deleted, read or not.
    pub expires_at: OffsetDateTime,
}

impl NewSpool {
    /// Checks the bounds every backend enforces.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] naming the rule the spool breaks.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(
            self.id.len() == 32 && self.id.bytes().all(|byte| byte.is_ascii_hexdigit()),
            "a spool id is 32 hex digits",
        )?;
        require(
            !self.owner.is_empty() && self.owner.len() <= MAX_SPOOL_OWNER_BYTES,
            "a spool's owner must be 1 to 512 bytes",
        )?;
        require(
            !self.tool.is_empty()
                && self.tool.len() <= MAX_SPOOL_NAME_BYTES
                && self.connection.len() <= MAX_SPOOL_NAME_BYTES,
            "a spool's tool and connection must be at most 128 bytes",
        )?;
        require(
            self.columns.is_array() && self.columns.to_string().len() <= MAX_SPOOL_COLUMNS_BYTES,
            "a spool's columns are a JSON array of at most 256 KiB",
        )?;
        require(
            self.source_id
                .as_ref()
                .is_none_or(|id| id.len() <= MAX_SPOOL_SOURCE_ID_BYTES),
            "a spool's source id must be at most 256 bytes",
        )?;
        require(
            self.expires_at > self.created_at,
            "a spool expires after it is made",
        )
    }
}

/// How far a spool is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpoolState {
    /// Its replica is still writing it.
    Filling,
    /// It holds the rest of the result.
    Complete,
    /// It stopped at the export limits: the rest of the result is not in it.
    Cut,
    /// Writing it failed; it holds what was written before.
    Failed,
}

impl SpoolState {
    /// The stored word.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Filling => "filling",
            Self::Complete => "complete",
            Self::Cut => "cut",
            Self::Failed => "failed",
        }
    }

    /// The state of a stored word.
    ///
    /// # Errors
    /// [`CatalogError::Corrupt`] for a word no version wrote.
    pub fn parse(word: &str) -> Result<Self, CatalogError> {
        match word {
            "filling" => Ok(Self::Filling),
            "complete" => Ok(Self::Complete),
            "cut" => Ok(Self::Cut),
            "failed" => Ok(Self::Failed),
            other => Err(CatalogError::Corrupt(format!(
                "{other:?} is not a spool state"
            ))),
        }
    }
}

/// What has been written of a spool, as its writer records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpoolProgress {
    /// Chunks written, numbered from 0.
    pub chunks: u32,
    /// Rows in them.
    pub rows: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Whether the writer is done, and how.
    pub state: SpoolState,
    /// Why it failed, when it did (at most 1 KiB).
    pub error: Option<String>,
    /// When this was written: a filling spool not updated for long is an
    /// abandoned one (its replica went away).
    pub updated_at: OffsetDateTime,
}

/// A spool as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Spool {
    /// Its id.
    pub id: String,
    /// Who may read it.
    pub owner: String,
    /// The tool it continues.
    pub tool: String,
    /// The connection the query ran on.
    pub connection: String,
    /// The result's columns.
    pub columns: Value,
    /// The upstream's id of what it reads.
    pub source_id: Option<String>,
    /// How far it is.
    pub progress: SpoolProgress,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it is deleted.
    pub expires_at: OffsetDateTime,
}

/// Where spools are kept. Every backend runs the behaviour suite in
/// [`testing`] (`spool_store_suite!`).
#[async_trait]
pub trait SpoolStore: Send + Sync {
    /// Stores a new spool, unless its owner already holds `per_owner` spools
    /// that have not expired at `spool.created_at`.
    ///
    /// # Errors
    /// [`CatalogError::LimitReached`] at the cap, [`CatalogError::Invalid`] for a
    /// spool out of bounds, [`CatalogError::Duplicate`] for a used id,
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn create_spool(&self, spool: NewSpool, per_owner: u32) -> Result<(), CatalogError>;

    /// Records how far the spool `id` is written; false when it is gone.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn record_spool_progress(
        &self,
        id: &str,
        progress: &SpoolProgress,
    ) -> Result<bool, CatalogError>;

    /// The spool `id`, unless it expired before `now` or is gone.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn spool(&self, id: &str, now: OffsetDateTime) -> Result<Option<Spool>, CatalogError>;

    /// Deletes the spool `id`; what it was, so its chunks can be deleted too.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn delete_spool(&self, id: &str) -> Result<Option<Spool>, CatalogError>;

    /// Deletes up to `limit` spools that expired before `now`; what they were,
    /// each returned by one caller however many replicas sweep at once.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn take_expired_spools(
        &self,
        now: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<Spool>, CatalogError>;
}
