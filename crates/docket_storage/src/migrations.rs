//! The embedded migrations, one set per backend (their SQL dialects differ:
//! `jsonb`/`timestamptz` against `TEXT`), applied with diesel's sync migration
//! harness on a blocking thread so the async runtime is never blocked.

use std::path::PathBuf;

use diesel::connection::SimpleConnection;
use diesel::{Connection, RunQueryDsl, SqliteConnection};
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use crate::error::{Cause, StorageError};
use crate::url::Backend;

/// `migrations/postgres/` at the workspace root, read through the crate's `migrations`
/// link so that a packaged crate carries them.
const POSTGRES: EmbeddedMigrations = embed_migrations!("migrations/postgres");

/// `migrations/sqlite/` at the workspace root, read through the same link.
const SQLITE: EmbeddedMigrations = embed_migrations!("migrations/sqlite");

/// Takes this session's migration lock: replicas starting together on one
/// database take turns instead of racing to create the same tables. The key is
/// per schema, so per-test schemas migrate in parallel.
const LOCK: &str = "SELECT pg_advisory_lock(1685416820, hashtext(current_schema()))";
const UNLOCK: &str = "SELECT pg_advisory_unlock(1685416820, hashtext(current_schema()))";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Applies pending PostgreSQL migrations. diesel's harness is synchronous, so it
/// runs on a blocking thread over diesel-async's connection (no libpq).
pub(crate) async fn postgres(url: String) -> Result<(), StorageError> {
    let backend = Backend::Postgres;
    tokio::task::spawn_blocking(move || {
        let connection = tokio::runtime::Handle::current()
            .block_on(crate::pg::establish(url.clone()))
            .map_err(|error| StorageError::Connect {
                backend,
                source: Cause::scrubbed(&error, &url),
            })?;
        let mut connection = AsyncConnectionWrapper::<AsyncPgConnection>::from(connection);
        let migrated = (|| -> Result<(), BoxError> {
            diesel::sql_query(LOCK).execute(&mut connection)?;
            let applied = connection.run_pending_migrations(POSTGRES).map(drop);
            // The lock also ends with the session; unlocking early only lets a
            // waiting replica go on sooner.
            let unlocked = diesel::sql_query(UNLOCK).execute(&mut connection);
            applied?;
            unlocked?;
            Ok(())
        })();
        migrated.map_err(|error| StorageError::Migrate {
            backend,
            source: Cause::scrubbed(&*error, &url),
        })
    })
    .await
    .map_err(|_| StorageError::MigrationThread { backend })?
}

/// Applies pending SQLite migrations to the file at `path`, creating it.
pub(crate) async fn sqlite(path: PathBuf) -> Result<(), StorageError> {
    let backend = Backend::Sqlite;
    tokio::task::spawn_blocking(move || {
        let location = path.to_string_lossy().into_owned();
        let mut connection =
            SqliteConnection::establish(&location).map_err(|error| StorageError::Connect {
                backend,
                source: Cause::scrubbed(&error, ""),
            })?;
        let migrated = (|| -> Result<(), BoxError> {
            // Another process (a running server) may hold the write lock briefly.
            connection.batch_execute(crate::sqlite::BUSY_TIMEOUT)?;
            connection.run_pending_migrations(SQLITE).map(drop)
        })();
        migrated.map_err(|error| StorageError::Migrate {
            backend,
            source: Cause::scrubbed(&*error, ""),
        })
    })
    .await
    .map_err(|_| StorageError::MigrationThread { backend })?
}
