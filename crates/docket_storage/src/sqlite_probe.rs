//! Bare SQL on SQLite for benchmarks: the embedded default's floor. [`SqliteProbe`]
//! opens its connection exactly as [`SqliteStore`](crate::SqliteStore)'s writer
//! (the same pool, the same `PRAGMA`s: WAL, `synchronous = FULL`, the busy
//! timeout) on the same file, and runs each statement the way the store does, on
//! a blocking thread: a bare `INSERT` of a task-shaped row that commits on its
//! own, and a bare primary-key `SELECT`. Both are prepared once per connection.
//!
//! Rows it writes carry the tool name [`PROBE_TOOL`](crate::probe::PROBE_TOOL)'s
//! value. Not for production code.

use diesel::prelude::*;
use diesel::sql_types::{Integer, Text};
use diesel_async::pooled_connection::deadpool::Pool;
use diesel_async::sync_connection_wrapper::SyncConnectionWrapper;
use docket_task::{StoreError, TaskId};

use crate::error::{StorageError, pool_error, query_error};
use crate::statement::statement;

/// The tool name of the probe's rows.
const PROBE_TOOL: &str = "docket_probe";

/// Bare statements on a connection set up like the SQLite store's writer.
pub struct SqliteProbe {
    writer: Pool<SyncConnectionWrapper<SqliteConnection>>,
}

impl std::fmt::Debug for SqliteProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteProbe").finish_non_exhaustive()
    }
}

#[derive(QueryableByName)]
struct Found {
    #[diesel(sql_type = Integer)]
    #[expect(dead_code, reason = "read only to make the SELECT return its row")]
    found: i32,
}

impl SqliteProbe {
    /// Opens one connection to the (migrated) SQLite database file at `path`.
    ///
    /// # Errors
    /// [`StorageError::Connect`] when the file cannot be opened.
    pub async fn connect(path: &std::path::Path) -> Result<Self, StorageError> {
        let writer = crate::sqlite::pool(&path.to_string_lossy(), 1)?;
        drop(writer.get().await.map_err(|error| StorageError::Connect {
            backend: crate::Backend::Sqlite,
            source: crate::error::Cause::scrubbed(&error, ""),
        })?);
        Ok(Self { writer })
    }

    /// Inserts one task-shaped row with a fresh id (autocommit) and returns the id.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the statement fails.
    pub async fn insert_row(&self) -> Result<TaskId, StoreError> {
        let id = TaskId::generate().map_err(|error| StoreError::Unavailable(error.to_string()))?;
        let task_id = id.as_str().to_owned();
        let mut conn = self.writer.get().await.map_err(pool_error)?;
        conn.spawn_blocking(move |conn| {
            statement(
                "INSERT INTO call_tasks (task_id, tool, arguments, owner, replica_id, status, \
                 status_message, expires_at, poll_interval_ms, audit_persona, audit_arguments) \
                 VALUES (?1, ?2, '{}', 'anonymous', 'probe', 'working', 'working', \
                 strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+7 days'), 1000, 'admin', '{}')",
            )
            .bind::<Text, _>(&task_id)
            .bind::<Text, _>(PROBE_TOOL)
            .execute(conn)
        })
        .await
        .map_err(query_error)?;
        Ok(id)
    }

    /// Reads one row by primary key; whether it was there.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the statement fails.
    pub async fn select_by_id(&self, id: &TaskId) -> Result<bool, StoreError> {
        let task_id = id.as_str().to_owned();
        let mut conn = self.writer.get().await.map_err(pool_error)?;
        let found = conn
            .spawn_blocking(move |conn| {
                statement(
                    "SELECT 1 AS found, task_id, tool, arguments, owner, extra_follower, \
                     replica_id, status, status_message, created_at, last_updated_at, \
                     heartbeat_at, cancel_requested_at, result, error, input_requests, \
                     expires_at, poll_interval_ms FROM call_tasks WHERE task_id = ?1",
                )
                .bind::<Text, _>(&task_id)
                .get_result::<Found>(conn)
                .optional()
            })
            .await
            .map_err(query_error)?;
        Ok(found.is_some())
    }
}
