//! Bare SQL for benchmarks: the cheapest way to write and read a task row, so
//! `cargo xtask bench` can report what Docket's task paths cost relative to the
//! database work they cannot avoid (docs/design.md, Testing and Performance).
//!
//! [`PgProbe`] opens its own connection pool through the function that opens
//! [`PgStore`]'s (same manager, connection setup, recycling, queue order and
//! size), on the same database, because `PgStore` keeps its pool to itself.
//! Its statements go through the store's own `Statement`, which diesel
//! prepares once per connection and caches, so each one is a single round
//! trip: a bare `INSERT` that commits on its own, and a bare
//! primary-key `SELECT` of every column a task read needs, decoded into the
//! store's own row type.
//! [`PgProbe::insert_row_unprepared`] sends the same `INSERT` the way
//! `diesel::sql_query` sends hand-written SQL, prepared again on every call, to
//! show what that costs; [`PgProbe::backend_pids`] finds the server processes
//! serving a client, whose CPU time the benchmark reads.
//!
//! Rows the probe writes carry the tool name [`PROBE_TOOL`] and are otherwise
//! shaped like a freshly created task (status `working`, so the partial indexes
//! on running tasks are maintained as for a real task); [`PgProbe::delete_rows`]
//! removes them before the stale-task sweep would take them for a vanished
//! replica's work.
//!
//! Not for production code: nothing here is part of the task store's contract.
//!
//! [`PgStore`]: crate::PgStore

use std::time::Duration;

use diesel::pg::Pg;
use diesel::prelude::*;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Nullable, Text, Timestamptz};
use diesel_async::AsyncPgConnection;
use diesel_async::RunQueryDsl;
use diesel_async::pooled_connection::deadpool::{Object, Pool};
use docket_task::{StoreError, TaskId};
use time::OffsetDateTime;

use crate::ConnectOptions;
use crate::columns::PgColumns;
use crate::error::{StorageError, pool_error, query_error};
use crate::rows::{TaskRow, task_columns_but_stamp};
use crate::statement::statement;

/// The tool name on every row the probe writes.
pub const PROBE_TOOL: &str = "docket_probe";

/// The channel [`PgProbe::notify_latencies`] sends on.
const PROBE_CHANNEL: &str = "docket_probe";

/// How long a probe row would be kept: the server's default retention (7 days),
/// so the row has an expiry like a real task's.
const RETENTION: time::Duration = time::Duration::days(7);

/// The probe's row: a freshly created task's shape (status `working`, so the
/// partial indexes on running tasks are maintained as for a real task).
/// $1 task_id, $2 expires_at.
const INSERT: &str = "INSERT INTO call_tasks (task_id, tool, arguments, owner, replica_id, \
     status, status_message, expires_at, poll_interval_ms, audit_persona, audit_arguments) \
     VALUES ($1, 'docket_probe', '{}', 'anonymous', 'probe', 'working', 'working', $2, 1000, \
     'admin', '{}')";

/// [`INSERT`] with its values bound.
fn insert(id: &TaskId) -> impl QueryFragment<Pg> + QueryId + Send + '_ {
    statement(INSERT)
        .bind::<Text, _>(id.as_str())
        .bind::<Nullable<Timestamptz>, _>(Some(OffsetDateTime::now_utc() + RETENTION))
}

/// A statement sent the way `diesel::sql_query` sends hand-written SQL: marked
/// unsafe to cache, so diesel prepares it again on every call.
struct Uncached<Q>(Q);

impl<Q: QueryFragment<Pg>> QueryFragment<Pg> for Uncached<Q> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.unsafe_to_cache_prepared();
        self.0.walk_ast(out)
    }
}

impl<Q> QueryId for Uncached<Q> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

/// One backend's process id.
#[derive(QueryableByName)]
struct PidRow {
    #[diesel(sql_type = diesel::sql_types::Integer)]
    pid: i32,
}

/// The server version as `SELECT version()` reports it.
#[derive(QueryableByName)]
struct VersionRow {
    #[diesel(sql_type = Text)]
    version: String,
}

/// Bare statements on `call_tasks`, over a pool set up as [`crate::PgStore`]'s.
pub struct PgProbe {
    pool: Pool<AsyncPgConnection>,
    url: String,
}

impl std::fmt::Debug for PgProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the URL: it may hold a password.
        f.debug_struct("PgProbe")
            .field("pool", &self.pool.status())
            .finish()
    }
}

impl PgProbe {
    /// Opens a pool of `options.max_connections` connections to the migrated
    /// PostgreSQL database `url` names (never migrates), and checks that a
    /// connection can be opened.
    ///
    /// # Errors
    /// [`StorageError::Connect`] when the database cannot be reached.
    pub async fn connect(url: &str, options: &ConnectOptions) -> Result<Self, StorageError> {
        let pool = crate::pg::pool(url, options.max_connections).await?;
        Ok(Self {
            pool,
            url: url.to_owned(),
        })
    }

    async fn conn(&self) -> Result<Object<AsyncPgConnection>, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }

    /// Inserts one task-shaped row with a fresh id in a single statement that
    /// commits on its own (autocommit: the `INSERT` is its own transaction), and
    /// returns the id.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the statement fails.
    pub async fn insert_row(&self) -> Result<TaskId, StoreError> {
        let id = TaskId::generate().map_err(|error| StoreError::Unavailable(error.to_string()))?;
        insert(&id)
            .execute(&mut *self.conn().await?)
            .await
            .map_err(query_error)?;
        Ok(id)
    }

    /// [`PgProbe::insert_row`]'s statement sent the way `diesel::sql_query` sends
    /// hand-written SQL: not cached, so every call prepares it again (a parse
    /// round trip, and planning, before the execute round trip).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the statement fails.
    pub async fn insert_row_unprepared(&self) -> Result<TaskId, StoreError> {
        let id = TaskId::generate().map_err(|error| StoreError::Unavailable(error.to_string()))?;
        Uncached(insert(&id))
            .execute(&mut *self.conn().await?)
            .await
            .map_err(query_error)?;
        Ok(id)
    }

    /// Reads one row by primary key, decoding every column a task read needs.
    /// Returns whether the row exists.
    ///
    /// # Errors
    /// [`StoreError`] when the statement fails or a value cannot be decoded.
    pub async fn select_by_id(&self, id: &TaskId) -> Result<bool, StoreError> {
        let row = statement(concat!(
            "SELECT ",
            task_columns_but_stamp!(),
            ", heartbeat_at, false AS replica_draining FROM call_tasks WHERE task_id = $1"
        ))
        .bind::<Text, _>(id.as_str())
        .get_result::<TaskRow<PgColumns>>(&mut *self.conn().await?)
        .await
        .optional()
        .map_err(query_error)?;
        Ok(row.is_some())
    }

    /// Deletes every row the probe wrote; returns how many.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the statement fails.
    pub async fn delete_rows(&self) -> Result<usize, StoreError> {
        statement("DELETE FROM call_tasks WHERE tool = $1")
            .bind::<Text, _>(PROBE_TOOL)
            .execute(&mut *self.conn().await?)
            .await
            .map_err(query_error)
    }

    /// The process ids of the server backends whose connections carry
    /// `application_name`, so a benchmark can read their CPU time from the
    /// operating system without counting other clients' work.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the statement fails.
    pub async fn backend_pids(&self, application_name: &str) -> Result<Vec<u32>, StoreError> {
        let rows = statement("SELECT pid FROM pg_stat_activity WHERE application_name = $1")
            .bind::<Text, _>(application_name)
            .load::<PidRow>(&mut *self.conn().await?)
            .await
            .map_err(query_error)?;
        Ok(rows
            .into_iter()
            .filter_map(|row| u32::try_from(row.pid).ok())
            .collect())
    }

    /// The server's `version()` string, for the benchmark report.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when the statement fails.
    pub async fn server_version(&self) -> Result<String, StoreError> {
        let row = statement("SELECT version() AS version")
            .get_result::<VersionRow>(&mut *self.conn().await?)
            .await
            .map_err(query_error)?;
        Ok(row.version)
    }

    /// How long a notification takes from `pg_notify` on one of the probe's
    /// connections to a listener on a connection of its own (`LISTEN`), once per
    /// sample: the floor under anything that crosses replicas by NOTIFY.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`] when a connection or a statement fails, or a
    /// notification does not arrive within ten seconds.
    pub async fn notify_latencies(&self, samples: usize) -> Result<Vec<Duration>, StoreError> {
        use std::future::poll_fn;

        use tokio_postgres::{AsyncMessage, NoTls};

        let unavailable = |error: tokio_postgres::Error| StoreError::Unavailable(error.to_string());
        let (client, mut connection) = tokio_postgres::connect(&self.url, NoTls)
            .await
            .map_err(unavailable)?;
        let (sender, mut received) = tokio::sync::mpsc::unbounded_channel();
        let listening = tokio::spawn(async move {
            while let Some(Ok(message)) = poll_fn(|cx| connection.poll_message(cx)).await {
                if let AsyncMessage::Notification(notification) = message
                    && sender
                        .send((notification.payload().to_owned(), std::time::Instant::now()))
                        .is_err()
                {
                    return;
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN {PROBE_CHANNEL}"))
            .await
            .map_err(unavailable)?;
        let mut conn = self.conn().await?;
        let mut latencies = Vec::with_capacity(samples);
        for sample in 0..samples {
            let payload = sample.to_string();
            let sent = std::time::Instant::now();
            crate::statement::statement("SELECT pg_notify($1, $2)")
                .bind::<Text, _>(PROBE_CHANNEL)
                .bind::<Text, _>(&payload)
                .execute(&mut *conn)
                .await
                .map_err(query_error)?;
            loop {
                let arrived = tokio::time::timeout(Duration::from_secs(10), received.recv())
                    .await
                    .ok()
                    .flatten()
                    .ok_or_else(|| {
                        StoreError::Unavailable("a probe notification did not arrive".into())
                    })?;
                if arrived.0 == payload {
                    latencies.push(arrived.1.duration_since(sent));
                    break;
                }
            }
        }
        listening.abort();
        Ok(latencies)
    }
}
