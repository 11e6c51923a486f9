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

#[cfg(test)]
mod tests {
    use diesel::sql_types::Text;

    use super::*;
    use crate::test_db::{PostgresServer, TestDatabase};

    #[derive(diesel::QueryableByName, Debug, PartialEq)]
    struct Stamp {
        #[diesel(sql_type = Text)]
        id: String,
        #[diesel(sql_type = Text)]
        at: String,
    }

    type Connection = AsyncConnectionWrapper<AsyncPgConnection>;

    fn running_task(conn: &mut Connection, id: &str, replica: &str, stamp: &str) {
        statement(
            "INSERT INTO call_tasks (task_id, tool, arguments, owner, replica_id, status, \
             heartbeat_at, poll_interval_ms) \
             VALUES ($1, 'probe', '{}', 'alice', $2, 'working', $3::timestamptz, 1000)",
        )
        .bind::<Text, _>(id)
        .bind::<Text, _>(replica)
        .bind::<Text, _>(stamp)
        .execute(conn)
        .expect("insert a task");
    }

    fn stamps(conn: &mut Connection, sql: &'static str) -> Vec<Stamp> {
        statement(sql).load(conn).expect("read stamps")
    }

    /// The migration to liveness per replica carries running tasks over: each
    /// replica gets the newest stamp of its running tasks (an ended task's does
    /// not count), and reverting it gives the tasks their replica's stamp back.
    /// The migration to liveness per replica.
    const REPLICAS_MIGRATION: &str = "2026-12-06-000000";

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_replicas_migration_carries_running_tasks_over_on_postgres() {
        let server = PostgresServer::from_lookup(|name| std::env::var(name).ok());
        let Some(database) = TestDatabase::postgres(&server).await else {
            return;
        };
        let url = database.url().to_owned();
        tokio::task::spawn_blocking(move || {
            let conn = tokio::runtime::Handle::current()
                .block_on(establish(url))
                .expect("connect");
            let mut conn = Connection::from(conn);
            statement("SET TIME ZONE 'UTC'")
                .execute(&mut conn)
                .expect("time zone");
            crate::shared::revert_through(&mut conn, || MIGRATIONS, REPLICAS_MIGRATION);
            running_task(&mut conn, "t1", "r1", "2026-12-01T10:00:00Z");
            running_task(&mut conn, "t2", "r1", "2026-12-01T10:00:05Z");
            running_task(&mut conn, "t3", "r2", "2026-12-01T09:00:00Z");
            running_task(&mut conn, "t4", "r3", "2026-12-01T11:00:00Z");
            statement("UPDATE call_tasks SET status = 'completed' WHERE task_id = 't4'")
                .execute(&mut conn)
                .expect("end t4");
            conn.run_pending_migrations(MIGRATIONS)
                .expect("migrate again");
            assert_eq!(
                stamps(
                    &mut conn,
                    "SELECT id, last_beat_at::text AS at FROM replicas ORDER BY id"
                ),
                vec![
                    Stamp {
                        id: "r1".into(),
                        at: "2026-12-01 10:00:05+00".into()
                    },
                    Stamp {
                        id: "r2".into(),
                        at: "2026-12-01 09:00:00+00".into()
                    },
                ]
            );
            statement("UPDATE replicas SET last_beat_at = '2026-12-01T12:00:00Z' WHERE id = 'r1'")
                .execute(&mut conn)
                .expect("beat");
            crate::shared::revert_through(&mut conn, || MIGRATIONS, REPLICAS_MIGRATION);
            let tasks = stamps(
                &mut conn,
                "SELECT task_id AS id, heartbeat_at::text AS at FROM call_tasks ORDER BY task_id",
            );
            assert_eq!(
                tasks
                    .iter()
                    .map(|task| task.at.as_str())
                    .collect::<Vec<_>>(),
                vec![
                    "2026-12-01 12:00:00+00",
                    "2026-12-01 12:00:00+00",
                    "2026-12-01 09:00:00+00",
                    "2026-12-01 11:00:00+00",
                ]
            );
        })
        .await
        .expect("the migration test");
    }

    /// The migration to upstream attribution.
    const ATTRIBUTION_MIGRATION: &str = "2026-12-15-000000";

    /// Rows written before the migration to upstream attribution read back
    /// naming no call, no engine user and no query ids; reverting it leaves the
    /// rows, and it applies again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rows_from_before_upstream_attribution_read_back_unattributed_on_postgres() {
        let server = PostgresServer::from_lookup(|name| std::env::var(name).ok());
        let Some(database) = TestDatabase::postgres(&server).await else {
            return;
        };
        let url = database.url().to_owned();
        let migrate_url = url.clone();
        tokio::task::spawn_blocking(move || {
            let conn = tokio::runtime::Handle::current()
                .block_on(establish(migrate_url))
                .expect("connect");
            let mut conn = Connection::from(conn);
            crate::shared::revert_through(&mut conn, || MIGRATIONS, ATTRIBUTION_MIGRATION);
            statement(
                "INSERT INTO audit_logs (tool, subject, arguments, success, outcome, \
                 duration_ms) VALUES ('probe', 'alice', '{}', true, 'completed', 3)",
            )
            .execute(&mut conn)
            .expect("an audit row");
            statement(
                "INSERT INTO call_records (id, kind, tool, statement, subject, success, \
                 outcome, duration_ms) VALUES ('c1', 'sql', 'trino_query', 'SELECT 1', \
                 'alice', true, 'completed', 3)",
            )
            .execute(&mut conn)
            .expect("a call record");
            conn.run_pending_migrations(MIGRATIONS)
                .expect("migrate again");
        })
        .await
        .expect("the migration");
        let mut conn = establish(url.clone()).await.expect("connect");
        let audit = super::super::audit::for_tool(&mut conn, "probe", 10)
            .await
            .expect("audit rows");
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
            .await
            .expect("get")
            .expect("present");
        assert_eq!((record.engine_user, record.upstream_ids.len()), (None, 0));
        drop(conn);
        tokio::task::spawn_blocking(move || {
            let conn = tokio::runtime::Handle::current()
                .block_on(establish(url))
                .expect("connect");
            let mut conn = Connection::from(conn);
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
        })
        .await
        .expect("the revert");
    }
}
