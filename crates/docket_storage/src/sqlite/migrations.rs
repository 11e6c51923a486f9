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

#[cfg(test)]
mod tests {
    use diesel::RunQueryDsl;
    use diesel::sql_types::Text;

    use super::*;
    use crate::statement::statement;

    #[derive(diesel::QueryableByName, Debug, PartialEq)]
    struct Stamp {
        #[diesel(sql_type = Text)]
        id: String,
        #[diesel(sql_type = Text)]
        at: String,
    }

    /// The migration to liveness per replica.
    const REPLICAS_MIGRATION: &str = "2026-12-06-000000";

    fn running_task(conn: &mut SqliteConnection, id: &str, replica: &str, stamp: &str) {
        statement(
            "INSERT INTO call_tasks (task_id, tool, arguments, owner, replica_id, status, \
             heartbeat_at, poll_interval_ms) \
             VALUES (?1, 'probe', '{}', 'alice', ?2, 'working', ?3, 1000)",
        )
        .bind::<Text, _>(id)
        .bind::<Text, _>(replica)
        .bind::<Text, _>(stamp)
        .execute(conn)
        .expect("insert a task");
    }

    /// The migration to liveness per replica carries running tasks over: each
    /// replica gets the newest stamp of its running tasks (an ended task's does
    /// not count), and reverting it gives the tasks their replica's stamp back.
    #[test]
    fn the_replicas_migration_carries_running_tasks_over() {
        let mut conn = SqliteConnection::establish(":memory:").expect("open");
        conn.run_pending_migrations(MIGRATIONS).expect("migrate");
        crate::shared::revert_through(&mut conn, || MIGRATIONS, REPLICAS_MIGRATION);
        running_task(&mut conn, "t1", "r1", "2026-12-01T10:00:00.000Z");
        running_task(&mut conn, "t2", "r1", "2026-12-01T10:00:05.000Z");
        running_task(&mut conn, "t3", "r2", "2026-12-01T09:00:00.000Z");
        running_task(&mut conn, "t4", "r3", "2026-12-01T11:00:00.000Z");
        statement("UPDATE call_tasks SET status = 'completed' WHERE task_id = 't4'")
            .execute(&mut conn)
            .expect("end t4");
        conn.run_pending_migrations(MIGRATIONS)
            .expect("migrate again");
        let replicas: Vec<Stamp> =
            statement("SELECT id, last_beat_at AS at FROM replicas ORDER BY id")
                .load(&mut conn)
                .expect("replicas");
        assert_eq!(
            replicas,
            vec![
                Stamp {
                    id: "r1".into(),
                    at: "2026-12-01T10:00:05.000Z".into()
                },
                Stamp {
                    id: "r2".into(),
                    at: "2026-12-01T09:00:00.000Z".into()
                },
            ]
        );
        // The replica beats later; reverting hands its stamp to its tasks.
        statement("UPDATE replicas SET last_beat_at = '2026-12-01T12:00:00.000Z' WHERE id = 'r1'")
            .execute(&mut conn)
            .expect("beat");
        crate::shared::revert_through(&mut conn, || MIGRATIONS, REPLICAS_MIGRATION);
        let tasks: Vec<Stamp> =
            statement("SELECT task_id AS id, heartbeat_at AS at FROM call_tasks ORDER BY task_id")
                .load(&mut conn)
                .expect("tasks");
        assert_eq!(
            tasks
                .iter()
                .map(|task| task.at.as_str())
                .collect::<Vec<_>>(),
            vec![
                "2026-12-01T12:00:00.000Z",
                "2026-12-01T12:00:00.000Z",
                "2026-12-01T09:00:00.000Z",
                "2026-12-01T11:00:00.000Z",
            ]
        );
    }

    /// The migration to upstream attribution.
    const ATTRIBUTION_MIGRATION: &str = "2026-12-15-000000";

    /// Rows written before the migration to upstream attribution read back
    /// naming no call, no engine user and no query ids; reverting it leaves the
    /// rows, and it applies again.
    #[test]
    fn rows_from_before_upstream_attribution_read_back_unattributed() {
        let mut conn = SqliteConnection::establish(":memory:").expect("open");
        conn.run_pending_migrations(MIGRATIONS).expect("migrate");
        crate::shared::revert_through(&mut conn, || MIGRATIONS, ATTRIBUTION_MIGRATION);
        statement(
            "INSERT INTO audit_logs (tool, subject, arguments, success, outcome, duration_ms) \
             VALUES ('probe', 'alice', '{}', 1, 'completed', 3)",
        )
        .execute(&mut conn)
        .expect("an audit row");
        statement(
            "INSERT INTO call_records (id, kind, tool, statement, subject, success, outcome, \
             duration_ms) VALUES ('c1', 'sql', 'trino_query', 'SELECT 1', 'alice', 1, \
             'completed', 3)",
        )
        .execute(&mut conn)
        .expect("a call record");
        conn.run_pending_migrations(MIGRATIONS)
            .expect("migrate again");
        let audit = crate::rows::audit_entries(
            super::super::audit::for_tool(&mut conn, "probe", 10).expect("audit rows"),
        )
        .expect("read");
        assert_eq!(audit.len(), 1);
        assert_eq!(
            (
                &audit[0].call_id,
                &audit[0].engine_user,
                audit[0].upstream_ids.len()
            ),
            (&None, &None, 0)
        );
        let record = super::super::calls::get(&mut conn, "c1")
            .expect("get")
            .map(docket_catalog::CallRecord::try_from)
            .expect("present")
            .expect("read");
        assert_eq!((record.engine_user, record.upstream_ids.len()), (None, 0));
        crate::shared::revert_through(&mut conn, || MIGRATIONS, ATTRIBUTION_MIGRATION);
        let kept: Vec<Stamp> = statement(
            "SELECT tool AS id, subject AS at FROM audit_logs \
             UNION ALL SELECT id, subject AS at FROM call_records",
        )
        .load(&mut conn)
        .expect("rows");
        assert_eq!(kept.len(), 2, "reverting keeps the rows");
        conn.run_pending_migrations(MIGRATIONS)
            .expect("migrate once more");
    }
}
