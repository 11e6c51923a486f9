//! The SQLite migrations (`migrations/sqlite/` at the workspace root, read
//! through the crate's `migrations` link so that a packaged crate carries them),
//! applied with diesel's sync migration harness on a blocking thread so the
//! async runtime is never blocked.

use std::path::PathBuf;

use diesel::connection::SimpleConnection;
use diesel::{Connection, SqliteConnection};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use super::sql::BUSY_TIMEOUT;
use crate::error::{Cause, StorageError};
use crate::url::Backend;

/// The SQLite schema's migrations, in their own dialect (`TEXT` times and JSON).
pub(crate) const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/sqlite");

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Applies pending SQLite migrations to the file at `path`, creating it.
pub(crate) async fn run(path: PathBuf) -> Result<(), StorageError> {
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
            connection.batch_execute(BUSY_TIMEOUT)?;
            connection.run_pending_migrations(MIGRATIONS).map(drop)
        })();
        migrated.map_err(|error| StorageError::Migrate {
            backend,
            source: Cause::scrubbed(&*error, ""),
        })
    })
    .await
    .map_err(|_| StorageError::MigrationThread { backend })?
}
