//! Retention for what grows besides tasks and runs: audit rows, call records and
//! assets. Every operation works in bounded batches (the caller loops until a batch
//! comes back short) and holds no lock longer than one batch's statement; on
//! PostgreSQL, replicas running it at once take disjoint rows (`SKIP LOCKED`).
//!
//! An asset's bytes live in the object sink, which this crate does not know: the
//! store names the assets that are due ([`Retention::assets_older_than`],
//! [`Retention::assets_without_their_task`]), the caller deletes their bytes, then
//! their rows ([`crate::AssetStore::delete`]).

use std::time::Duration;

use async_trait::async_trait;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
use diesel_async::RunQueryDsl as _;

use crate::catalog::CatalogError;
use crate::error::query_error;
use crate::pg::PgStore;
use crate::sqlite::SqliteStore;

/// An asset that is due for deletion: its row id and where its bytes are.
#[derive(Clone, Debug, PartialEq, Eq, QueryableByName)]
pub struct DueAsset {
    /// The asset's id.
    #[diesel(sql_type = Text)]
    pub id: String,
    /// Its key in the object sink.
    #[diesel(sql_type = Text)]
    pub storage_key: String,
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

/// `age` in whole seconds, as the queries bind it.
fn seconds(age: Duration) -> i64 {
    i64::try_from(age.as_secs()).unwrap_or(i64::MAX)
}

fn count(deleted: usize) -> u64 {
    u64::try_from(deleted).unwrap_or(u64::MAX)
}

fn unavailable(error: diesel::result::Error) -> CatalogError {
    CatalogError::from_store(query_error(error))
}

/// Deletes up to `limit` rows of `table` (one of this module's own names, never
/// input) written more than `age` ago, oldest first; how many.
async fn pg_delete_older_than(
    store: &PgStore,
    table: &'static str,
    age: Duration,
    limit: u32,
) -> Result<u64, CatalogError> {
    let mut conn = store.catalog_conn().await?;
    diesel::sql_query(format!(
        "DELETE FROM {table} WHERE id IN (\
             SELECT id FROM {table} \
              WHERE created_at < now() - $1 * interval '1 second' \
              ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
    ))
    .bind::<BigInt, _>(seconds(age))
    .bind::<BigInt, _>(i64::from(limit))
    .execute(&mut *conn)
    .await
    .map(count)
    .map_err(unavailable)
}

/// [`pg_delete_older_than`] on SQLite.
async fn sqlite_delete_older_than(
    store: &SqliteStore,
    table: &'static str,
    age: Duration,
    limit: u32,
) -> Result<u64, CatalogError> {
    let age = sqlite_age(age);
    store
        .write(move |conn| {
            diesel::RunQueryDsl::execute(
                diesel::sql_query(format!(
                    "DELETE FROM {table} WHERE id IN (\
                         SELECT id FROM {table} \
                          WHERE created_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1) \
                          ORDER BY created_at LIMIT ?2)"
                ))
                .bind::<Text, _>(age)
                .bind::<BigInt, _>(i64::from(limit)),
                conn,
            )
        })
        .await
        .map(count)
        .map_err(CatalogError::from_store)
}

#[async_trait]
impl Retention for PgStore {
    async fn delete_audit_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        pg_delete_older_than(self, "audit_logs", age, limit).await
    }

    async fn delete_calls_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        pg_delete_older_than(self, "call_records", age, limit).await
    }

    async fn assets_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<Vec<DueAsset>, CatalogError> {
        let mut conn = self.catalog_conn().await?;
        diesel::sql_query(
            "SELECT id, storage_key FROM assets \
              WHERE created_at < now() - $1 * interval '1 second' \
              ORDER BY created_at LIMIT $2",
        )
        .bind::<BigInt, _>(seconds(age))
        .bind::<BigInt, _>(i64::from(limit))
        .load(&mut *conn)
        .await
        .map_err(unavailable)
    }

    async fn assets_without_their_task(&self, limit: u32) -> Result<Vec<DueAsset>, CatalogError> {
        let mut conn = self.catalog_conn().await?;
        diesel::sql_query(
            "SELECT id, storage_key FROM assets a \
              WHERE a.task_id IS NOT NULL \
                AND NOT EXISTS (SELECT 1 FROM call_tasks t WHERE t.task_id = a.task_id) \
                AND NOT EXISTS (SELECT 1 FROM script_runs r WHERE r.id = a.task_id) \
              ORDER BY created_at LIMIT $1",
        )
        .bind::<BigInt, _>(i64::from(limit))
        .load(&mut *conn)
        .await
        .map_err(unavailable)
    }
}

/// SQLite's `created_at` text for `age` ago, as `strftime` modifiers take it.
fn sqlite_age(age: Duration) -> String {
    format!("-{} seconds", seconds(age))
}

#[async_trait]
impl Retention for SqliteStore {
    async fn delete_audit_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        sqlite_delete_older_than(self, "audit_logs", age, limit).await
    }

    async fn delete_calls_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        sqlite_delete_older_than(self, "call_records", age, limit).await
    }

    async fn assets_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<Vec<DueAsset>, CatalogError> {
        let age = sqlite_age(age);
        self.read(move |conn| {
            diesel::RunQueryDsl::load(
                diesel::sql_query(
                    "SELECT id, storage_key FROM assets \
                      WHERE created_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1) \
                      ORDER BY created_at LIMIT ?2",
                )
                .bind::<Text, _>(age)
                .bind::<BigInt, _>(i64::from(limit)),
                conn,
            )
        })
        .await
        .map_err(CatalogError::from_store)
    }

    async fn assets_without_their_task(&self, limit: u32) -> Result<Vec<DueAsset>, CatalogError> {
        self.read(move |conn| {
            diesel::RunQueryDsl::load(
                diesel::sql_query(
                    "SELECT id, storage_key FROM assets a \
                      WHERE a.task_id IS NOT NULL \
                        AND NOT EXISTS (SELECT 1 FROM call_tasks t WHERE t.task_id = a.task_id) \
                        AND NOT EXISTS (SELECT 1 FROM script_runs r WHERE r.id = a.task_id) \
                      ORDER BY created_at LIMIT ?1",
                )
                .bind::<BigInt, _>(i64::from(limit)),
                conn,
            )
        })
        .await
        .map_err(CatalogError::from_store)
    }
}
