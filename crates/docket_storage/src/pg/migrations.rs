//! The PostgreSQL migrations (`migrations/postgres/` at the workspace root, read
//! through the crate's `migrations` link so that a packaged crate carries them),
//! applied with diesel's sync migration harness on a blocking thread so the
//! async runtime is never blocked.

use crate::statement::statement;
use diesel::RunQueryDsl;
use diesel_async::AsyncPgConnection;
use diesel_async::async_connection_wrapper::AsyncConnectionWrapper;
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};

use super::connection::establish;
use crate::error::{Cause, StorageError};
use crate::url::Backend;

/// The PostgreSQL schema's migrations, in their own dialect (`jsonb`, `timestamptz`).
const MIGRATIONS: EmbeddedMigrations = embed_migrations!("migrations/postgres");

/// Takes this session's migration lock: replicas starting together on one
/// database take turns instead of racing to create the same tables. The key is
/// per schema, so per-test schemas migrate in parallel.
const LOCK: &str = "SELECT pg_advisory_lock(1685416820, hashtext(current_schema()))";
const UNLOCK: &str = "SELECT pg_advisory_unlock(1685416820, hashtext(current_schema()))";

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Applies pending PostgreSQL migrations. diesel's harness is synchronous, so it
/// runs on a blocking thread over diesel-async's connection (no libpq).
pub(crate) async fn run(url: String) -> Result<(), StorageError> {
    let backend = Backend::Postgres;
    tokio::task::spawn_blocking(move || {
        let connection = tokio::runtime::Handle::current()
            .block_on(establish(url.clone()))
            .map_err(|error| StorageError::Connect {
                backend,
                source: Cause::scrubbed(&error, &url),
            })?;
        let mut connection = AsyncConnectionWrapper::<AsyncPgConnection>::from(connection);
        let migrated = (|| -> Result<(), BoxError> {
            statement(LOCK).execute(&mut connection)?;
            let applied = connection.run_pending_migrations(MIGRATIONS).map(drop);
            // The lock also ends with the session; unlocking early only lets a
            // waiting replica go on sooner.
            let unlocked = statement(UNLOCK).execute(&mut connection);
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
