//! Assets: the row that describes one exported object (its name, format, size,
//! where its bytes are stored, and which call and task made it), and the
//! [`AssetStore`] trait the backends implement.

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::error::{CatalogError, require};
use crate::page::PageCursor;

/// An asset to record. Its bytes are already in the object store under
/// `storage_key`: a row is only written for a complete object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewAsset {
    /// Its id (from [`generate_id`](crate::generate_id)).
    pub id: String,
    /// The subject it belongs to; only they (and administrators) may read it.
    pub owner: String,
    /// Its name, also the download file name.
    pub name: String,
    /// What it holds, in the caller's words.
    pub description: Option<String>,
    /// The caller's tags.
    pub tags: Vec<String>,
    /// How its bytes are written: `csv`, `json`, `jsonl`, `parquet`, or what
    /// else an exporter produces.
    pub format: String,
    /// The media type it is served with.
    pub content_type: String,
    /// Where the object store keeps its bytes.
    pub storage_key: String,
    /// Its size in bytes.
    pub size_bytes: i64,
    /// How many rows it holds, when its format has rows.
    pub row_count: Option<i64>,
    /// The connection the export read from.
    pub connection: Option<String>,
    /// The tool that made it.
    pub tool: String,
    /// The caller's idempotency key: one asset per owner and key.
    pub idempotency_key: Option<String>,
    /// The task that made it, when the export ran as a task.
    pub task_id: Option<String>,
    /// The call record of the export that made it.
    pub call_id: Option<String>,
}

impl NewAsset {
    /// Checks what every store refuses (the tables too, as a backstop), with a
    /// message that says why. Stores call it before they write.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] naming the rule the value breaks.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(!self.id.is_empty(), "an asset id must not be empty")?;
        require(!self.owner.is_empty(), "an asset owner must not be empty")?;
        require(self.size_bytes >= 0, "size_bytes must not be negative")?;
        require(
            self.row_count.is_none_or(|rows| rows >= 0),
            "row_count must not be negative",
        )?;
        require(
            self.idempotency_key
                .as_deref()
                .is_none_or(|key| !key.is_empty()),
            "an idempotency key must not be empty (leave it out instead)",
        )
    }
}

/// A recorded asset: what was recorded, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Asset {
    /// Its id.
    pub id: String,
    /// The subject it belongs to.
    pub owner: String,
    /// Its name, also the download file name.
    pub name: String,
    /// What it holds.
    pub description: Option<String>,
    /// Its tags.
    pub tags: Vec<String>,
    /// How its bytes are written (`csv`, `json`, `jsonl`, `parquet`, …).
    pub format: String,
    /// The media type it is served with.
    pub content_type: String,
    /// Where the object store keeps its bytes.
    pub storage_key: String,
    /// Its size in bytes.
    pub size_bytes: i64,
    /// How many rows it holds, when its format has rows.
    pub row_count: Option<i64>,
    /// The connection the export read from.
    pub connection: Option<String>,
    /// The tool that made it.
    pub tool: String,
    /// The idempotency key it was recorded with.
    pub idempotency_key: Option<String>,
    /// The task that made it.
    pub task_id: Option<String>,
    /// The call record of the export that made it.
    pub call_id: Option<String>,
    /// When it was recorded (database clock).
    pub created_at: OffsetDateTime,
}

impl Asset {
    /// The cursor that lists the assets after this one (older, or as old with a
    /// smaller id).
    pub fn cursor(&self) -> PageCursor {
        PageCursor {
            created_at: self.created_at,
            id: self.id.clone(),
        }
    }
}

/// What [`AssetStore::create_or_get`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CreateOutcome {
    /// The asset was recorded.
    Created(Asset),
    /// The owner already has an asset with this idempotency key; it is returned
    /// unchanged and nothing was recorded. The object the caller wrote for the
    /// new asset is not referenced by any row and is the caller's to delete.
    Existing(Asset),
}

impl CreateOutcome {
    /// The asset, new or existing.
    pub fn asset(&self) -> &Asset {
        match self {
            CreateOutcome::Created(asset) | CreateOutcome::Existing(asset) => asset,
        }
    }

    /// The asset, new or existing.
    pub fn into_asset(self) -> Asset {
        match self {
            CreateOutcome::Created(asset) | CreateOutcome::Existing(asset) => asset,
        }
    }

    /// Whether this call recorded it.
    pub fn is_created(&self) -> bool {
        matches!(self, CreateOutcome::Created(_))
    }
}

/// What the export tools and the asset tools need from a database.
///
/// Every method is one short statement or transaction, committed before it
/// returns, so any replica reads what another wrote.
#[async_trait]
pub trait AssetStore: Send + Sync + 'static {
    /// Records `asset`, or, when its owner already has an asset with its
    /// idempotency key, returns that one instead. Race-safe: of concurrent calls
    /// with one owner and key, exactly one creates. Without a key it always
    /// creates.
    ///
    /// # Errors
    /// [`CatalogError::Duplicate`] when an asset with this id exists (and does
    /// not answer for the same key), [`CatalogError::Invalid`] for out-of-range
    /// values, [`CatalogError::Unavailable`] when the database fails.
    async fn create_or_get(&self, asset: NewAsset) -> Result<CreateOutcome, CatalogError>;

    /// The owner's asset recorded with `key`, if any.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn find_by_idempotency_key(
        &self,
        owner: &str,
        key: &str,
    ) -> Result<Option<Asset>, CatalogError>;

    /// The asset with this id, whoever owns it.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn get(&self, id: &str) -> Result<Option<Asset>, CatalogError>;

    /// At most `limit` assets of `owner` (every owner's with `None`, for
    /// administrators), newest first, starting after `before` when given.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn list(
        &self,
        owner: Option<&str>,
        limit: u32,
        before: Option<&PageCursor>,
    ) -> Result<Vec<Asset>, CatalogError>;

    /// Deletes the asset's row (not its bytes: the caller deletes the object).
    /// Its idempotency key is free again afterwards. Returns whether it existed.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`].
    async fn delete(&self, id: &str) -> Result<bool, CatalogError>;
}
