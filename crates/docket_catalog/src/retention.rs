//! Retention for what grows besides tasks and runs: audit rows, call records and
//! assets. Every operation works in bounded batches (the caller loops until a batch
//! comes back short) and holds no lock longer than one batch's statement; on
//! PostgreSQL, replicas running it at once take disjoint rows (`SKIP LOCKED`).
//!
//! `docket_storage` implements it on PostgreSQL and SQLite; the server's hourly
//! pass drives it.
//!
//! The principal directory is pruned by the same pass, through its own trait
//! ([`PrincipalStore::forget_unseen_before`](crate::PrincipalStore::forget_unseen_before)),
//! in batches as here.
//!
//! An asset's bytes live in the object sink, which no store knows: the
//! store names the assets that are due ([`Retention::assets_older_than`],
//! [`Retention::assets_without_their_task`]), the caller deletes their bytes, then
//! their rows ([`AssetStore::delete`](crate::AssetStore::delete)).

use std::time::Duration;

use async_trait::async_trait;

use crate::CatalogError;

/// An asset that is due for deletion: its row id and where its bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DueAsset {
    /// The asset's id.
    pub id: String,
    /// Its key in the object sink.
    pub storage_key: String,
    /// Whose it is: their resource list changes when it is deleted.
    pub owner: String,
}

/// Deletes, or names for deletion, what outlived its retention.
#[async_trait]
pub trait Retention: Send + Sync + 'static {
    /// Deletes up to `limit` audit rows older than `age`; how many it deleted.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the database cannot be reached.
    async fn delete_audit_older_than(&self, age: Duration, limit: u32)
    -> Result<u64, CatalogError>;

    /// Deletes up to `limit` call records older than `age`; how many it deleted.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the database cannot be reached.
    async fn delete_calls_older_than(&self, age: Duration, limit: u32)
    -> Result<u64, CatalogError>;

    /// Up to `limit` assets created more than `age` ago, oldest first.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the database cannot be reached.
    async fn assets_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<Vec<DueAsset>, CatalogError>;

    /// Up to `limit` assets made by a task (or a script run) that no longer exists:
    /// the retention pass deleted it, and `storage.delete_with_task` deletes its
    /// assets with it.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the database cannot be reached.
    async fn assets_without_their_task(&self, limit: u32) -> Result<Vec<DueAsset>, CatalogError>;
}
