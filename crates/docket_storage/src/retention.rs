//! [`Retention`] on PostgreSQL and SQLite: audit rows and call records deleted,
//! and due assets named, in bounded batches; on PostgreSQL, replicas running it
//! at once take disjoint rows (`SKIP LOCKED`). The trait and what it promises are
//! `docket_catalog::retention`'s.

use std::time::Duration;

use async_trait::async_trait;
use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Text};
#[cfg(feature = "postgres")]
use diesel_async::RunQueryDsl as _;
use docket_catalog::CatalogError;
use docket_catalog::retention::{DueAsset, Retention};

use crate::statement::statement;

#[cfg(feature = "sqlite")]
use crate::error::catalog_error;
#[cfg(feature = "postgres")]
use crate::error::catalog_query_error;
#[cfg(feature = "postgres")]
use crate::pg::PgStore;
#[cfg(feature = "sqlite")]
use crate::sqlite::SqliteStore;

/// A due asset as both backends' statements return it.
#[derive(QueryableByName)]
struct DueAssetRow {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    storage_key: String,
    #[diesel(sql_type = Text)]
    owner: String,
}

/// The rows as the trait returns them.
fn due(rows: Vec<DueAssetRow>) -> Vec<DueAsset> {
    rows.into_iter()
        .map(|row| DueAsset {
            id: row.id,
            storage_key: row.storage_key,
            owner: row.owner,
        })
        .collect()
}

/// `age` in whole seconds, as the queries bind it.
fn seconds(age: Duration) -> i64 {
    i64::try_from(age.as_secs()).unwrap_or(i64::MAX)
}

fn count(deleted: usize) -> u64 {
    u64::try_from(deleted).unwrap_or(u64::MAX)
}

/// The statement that deletes one batch of `table`'s rows written more than
/// `$1` seconds ago, oldest first, at most `$2`: on PostgreSQL with
/// `SKIP LOCKED`, so replicas running it at once take disjoint batches.
#[cfg(feature = "postgres")]
macro_rules! pg_delete_older_than {
    ($table:literal) => {
        concat!(
            "DELETE FROM ",
            $table,
            " WHERE id IN (\
                 SELECT id FROM ",
            $table,
            " \
                  WHERE created_at < now() - $1 * interval '1 second' \
                  ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)"
        )
    };
}

/// The same on SQLite, whose one writer needs no locking clause.
#[cfg(feature = "sqlite")]
macro_rules! sqlite_delete_older_than {
    ($table:literal) => {
        concat!(
            "DELETE FROM ",
            $table,
            " WHERE id IN (\
                 SELECT id FROM ",
            $table,
            " \
                  WHERE created_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1) \
                  ORDER BY created_at LIMIT ?2)"
        )
    };
}

/// Runs one of `pg_delete_older_than!`'s statements; how many rows went.
#[cfg(feature = "postgres")]
async fn pg_delete_older_than(
    store: &PgStore,
    sql: &'static str,
    age: Duration,
    limit: u32,
) -> Result<u64, CatalogError> {
    let mut conn = store.catalog_conn().await?;
    statement(sql)
        .bind::<BigInt, _>(seconds(age))
        .bind::<BigInt, _>(i64::from(limit))
        .execute(&mut *conn)
        .await
        .map(count)
        .map_err(catalog_query_error)
}

/// `pg_delete_older_than` on SQLite.
#[cfg(feature = "sqlite")]
async fn sqlite_delete_older_than(
    store: &SqliteStore,
    sql: &'static str,
    age: Duration,
    limit: u32,
) -> Result<u64, CatalogError> {
    let age = sqlite_age(age);
    store
        .write(move |conn| {
            diesel::RunQueryDsl::execute(
                statement(sql)
                    .bind::<Text, _>(age)
                    .bind::<BigInt, _>(i64::from(limit)),
                conn,
            )
        })
        .await
        .map(count)
        .map_err(catalog_error)
}

#[cfg(feature = "postgres")]
#[async_trait]
impl Retention for PgStore {
    async fn delete_audit_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        pg_delete_older_than(self, pg_delete_older_than!("audit_logs"), age, limit).await
    }

    async fn delete_calls_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        pg_delete_older_than(self, pg_delete_older_than!("call_records"), age, limit).await
    }

    async fn assets_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<Vec<DueAsset>, CatalogError> {
        let mut conn = self.catalog_conn().await?;
        statement(
            "SELECT id, storage_key, owner FROM assets \
              WHERE created_at < now() - $1 * interval '1 second' \
              ORDER BY created_at LIMIT $2",
        )
        .bind::<BigInt, _>(seconds(age))
        .bind::<BigInt, _>(i64::from(limit))
        .load::<DueAssetRow>(&mut *conn)
        .await
        .map(due)
        .map_err(catalog_query_error)
    }

    async fn assets_without_their_task(&self, limit: u32) -> Result<Vec<DueAsset>, CatalogError> {
        let mut conn = self.catalog_conn().await?;
        statement(
            "SELECT id, storage_key, owner FROM assets a \
              WHERE a.task_id IS NOT NULL \
                AND NOT EXISTS (SELECT 1 FROM call_tasks t WHERE t.task_id = a.task_id) \
                AND NOT EXISTS (SELECT 1 FROM script_runs r WHERE r.id = a.task_id) \
              ORDER BY created_at LIMIT $1",
        )
        .bind::<BigInt, _>(i64::from(limit))
        .load::<DueAssetRow>(&mut *conn)
        .await
        .map(due)
        .map_err(catalog_query_error)
    }
}

#[cfg(feature = "sqlite")]
/// SQLite's `created_at` text for `age` ago, as `strftime` modifiers take it.
fn sqlite_age(age: Duration) -> String {
    format!("-{} seconds", seconds(age))
}

#[cfg(feature = "sqlite")]
#[async_trait]
impl Retention for SqliteStore {
    async fn delete_audit_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        sqlite_delete_older_than(self, sqlite_delete_older_than!("audit_logs"), age, limit).await
    }

    async fn delete_calls_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        sqlite_delete_older_than(self, sqlite_delete_older_than!("call_records"), age, limit).await
    }

    async fn assets_older_than(
        &self,
        age: Duration,
        limit: u32,
    ) -> Result<Vec<DueAsset>, CatalogError> {
        let age = sqlite_age(age);
        self.read(move |conn| {
            diesel::RunQueryDsl::load::<DueAssetRow>(
                statement(
                    "SELECT id, storage_key, owner FROM assets \
                      WHERE created_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1) \
                      ORDER BY created_at LIMIT ?2",
                )
                .bind::<Text, _>(age)
                .bind::<BigInt, _>(i64::from(limit)),
                conn,
            )
        })
        .await
        .map(due)
        .map_err(catalog_error)
    }

    async fn assets_without_their_task(&self, limit: u32) -> Result<Vec<DueAsset>, CatalogError> {
        self.read(move |conn| {
            diesel::RunQueryDsl::load::<DueAssetRow>(
                statement(
                    "SELECT id, storage_key, owner FROM assets a \
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
        .map(due)
        .map_err(catalog_error)
    }
}
