//! The storage tests, in one binary: the shared `TaskStore` behaviour suite from
//! `docket_task` run against PostgreSQL and SQLite from one source, and what only
//! one backend has (notifications, the bulk heartbeat, concurrent sweepers,
//! durability across a reopen, migrations); and the asset and call catalogs'
//! shared suites from `docket_catalog::testing` and `docket_catalog::scripts::testing`,
//! and the authorization server's from `docket_oauth::testing`, on both backends.
//!
//! PostgreSQL tests each get a schema of their own (`TestDatabase::postgres`), so
//! they run in parallel. When PostgreSQL cannot be reached they print
//! "skipped: PostgreSQL not reachable …" and return, unless
//! `DOCKET_REQUIRE_POSTGRES=1`, which makes that a failure. This harness reads
//! those variables (`postgres_server`); the test-database helpers read none.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use docket_storage::test_db::{PostgresServer, TestDatabase};
use docket_storage::{ConnectOptions, StorageError};
use docket_task::model::{Outcome, TaskStatus};
use docket_task::store::{Beat, TaskSignal};
use docket_task::testing::new_task;
use docket_task::{StoreError, TaskId, TaskStore};
use serde_json::{Map, Value, json};
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

/// The PostgreSQL server the environment names (`DOCKET_TEST_DATABASE_URL`,
/// `DOCKET_REQUIRE_POSTGRES`).
fn postgres_server() -> PostgresServer {
    PostgresServer::from_lookup(|name| std::env::var(name).ok())
}

/// Generous bound on anything that waits, so a broken signal path fails the
/// test instead of hanging it. Never an assertion about speed.
const PATIENCE: Duration = Duration::from_secs(60);

async fn patiently<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {PATIENCE:?}"))
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn no_migration(max_connections: usize) -> ConnectOptions {
    ConnectOptions {
        max_connections,
        migrate: false,
    }
}

/// Tests that load the machine (thousands of rows) run alone. The shared suite
/// ages rows by sleeping tens of milliseconds and then sweeps with a threshold
/// just below that; on a two-core machine busy stamping 10 000 rows, a test can
/// stall for longer than its margin. Light tests share the lock; heavy ones take
/// it exclusively.
static LOAD: RwLock<()> = RwLock::const_new(());

async fn light() -> RwLockReadGuard<'static, ()> {
    LOAD.read().await
}

async fn heavy() -> RwLockWriteGuard<'static, ()> {
    LOAD.write().await
}

/// The whole error chain, to check what an error reveals.
fn chain(error: &StorageError) -> String {
    let mut text = format!("{error} / {error:?}");
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(" / {cause}"));
        source = cause.source();
    }
    text
}

/// Creating a task under an id that exists is refused as a duplicate (not as
/// an outage), and leaves the first task as it was.
async fn a_duplicate_id_is_refused_as_such(store: Arc<dyn TaskStore>) {
    let task = new_task("a_duplicate_id_is_refused_as_such");
    let created = store.create(task.clone()).await.expect("create");
    let mut again = task.clone();
    again.tool = "another_tool".into();
    assert!(matches!(
        store.create(again).await,
        Err(StoreError::Duplicate)
    ));
    let (read, _) = store.get(&task.id).await.expect("get").expect("present");
    assert_eq!(read, created);
}

mod postgres {
    use super::*;

    /// The stale sweep forgets replicas silent for `stale_after` that run
    /// nothing, and keeps one whose task was still running (it fails the task).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sweep_forgets_silent_replicas_that_run_nothing() {
        use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

        #[derive(diesel::QueryableByName)]
        struct Id {
            #[diesel(sql_type = diesel::sql_types::Text)]
            id: String,
        }
        let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
            return;
        };
        let store = database.store().await;
        let mut task = new_task("the_sweep_forgets_silent_replicas_that_run_nothing");
        task.replica_id = "busy".into();
        store.create(task).await.expect("create");
        store.heartbeat("busy", &[]).await.expect("beat");
        store.heartbeat("idle", &[]).await.expect("beat");
        // Only to order events: the beats must be older than the 1 ms below.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let mut connection = AsyncPgConnection::establish(database.url())
            .await
            .expect("connect");
        store
            .fail_stale(Duration::from_millis(1))
            .await
            .expect("sweep");
        let ids = |rows: Vec<Id>| rows.into_iter().map(|row| row.id).collect::<Vec<_>>();
        let read = diesel::sql_query("SELECT id FROM replicas ORDER BY id");
        assert_eq!(
            ids(read.clone().load(&mut connection).await.expect("read")),
            vec!["busy".to_owned()],
            "its task ran when it swept"
        );
        store
            .fail_stale(Duration::from_millis(1))
            .await
            .expect("sweep");
        assert!(ids(read.load(&mut connection).await.expect("read")).is_empty());
    }

    /// The benchmarks' bare-SQL probe reads back the row it wrote with every column a
    /// task read decodes (a column the task row gains must reach the probe too), and
    /// deletes only its own rows.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_probe_reads_back_what_it_wrote() {
        let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
            return;
        };
        let probe = docket_storage::probe::PgProbe::connect(
            database.url(),
            &docket_storage::ConnectOptions::default(),
        )
        .await
        .expect("probe");
        let store = database.store().await;
        let task = new_task("the_probe_reads_back_what_it_wrote");
        store.create(task.clone()).await.expect("create");
        let written = probe.insert_row().await.expect("insert");
        assert!(probe.select_by_id(&written).await.expect("select"));
        assert!(probe.select_by_id(&task.id).await.expect("select"));
        assert_eq!(probe.delete_rows().await.expect("delete"), 1);
        assert!(!probe.select_by_id(&written).await.expect("select"));
        assert!(store.get(&task.id).await.expect("get").is_some());
    }

    /// A draining replica says so in its row, and a later beat keeps it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_draining_replica_is_marked_in_its_row() {
        use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

        #[derive(diesel::QueryableByName)]
        struct Draining {
            #[diesel(sql_type = diesel::sql_types::Bool)]
            draining: bool,
        }
        let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
            return;
        };
        let store = database.store().await;
        store.heartbeat("r1", &[]).await.expect("beat");
        store.mark_draining("r1").await.expect("draining");
        store.mark_draining("never-beat").await.expect("draining");
        store.heartbeat("r1", &[]).await.expect("beat");
        let mut connection = AsyncPgConnection::establish(database.url())
            .await
            .expect("connect");
        let rows: Vec<Draining> = diesel::sql_query("SELECT draining FROM replicas ORDER BY id")
            .load(&mut connection)
            .await
            .expect("read");
        assert_eq!(
            rows.iter().map(|row| row.draining).collect::<Vec<_>>(),
            vec![true, true]
        );
    }

    /// A store on a fresh schema and the schema's guard, or `None` when PostgreSQL
    /// is not reachable (the harness printed why; the test then returns).
    async fn store() -> Option<(Arc<dyn TaskStore>, TestDatabase)> {
        let database = TestDatabase::postgres(&postgres_server()).await?;
        let store = database.store().await;
        Some((store, database))
    }

    // The macro awaits the expression it is given; this block either yields a
    // ready store or returns from the test, which is how a test skips.
    docket_task::store_suite!({
        let light = light().await;
        let Some((store, schema)) = store().await else {
            return;
        };
        std::future::ready((store, (schema, light)))
    });

    /// A PostgreSQL store on a fresh schema, as itself (for its read counts),
    /// with the schema's guard.
    async fn pg_store() -> Option<(Arc<docket_storage::PgStore>, TestDatabase)> {
        let database = TestDatabase::postgres(&postgres_server()).await?;
        match database.connect().await {
            docket_storage::Store::Postgres(store) => Some((store, database)),
            _ => panic!("a postgres:// URL opened another backend"),
        }
    }

    /// Creates `count` tasks and returns them with ids that name no task, each
    /// task's id asked twice: what concurrent readers ask for.
    async fn tasks_to_read(store: &docket_storage::PgStore, count: usize) -> Vec<(TaskId, bool)> {
        let mut asked = Vec::new();
        for _ in 0..count {
            let task = new_task("reads");
            store.create(task.clone()).await.expect("create");
            asked.push((task.id.clone(), true));
            asked.push((task.id, true));
            asked.push((TaskId::generate().expect("OS random source"), false));
        }
        asked
    }

    /// Spawns one read per id asked.
    fn spawn_reads(
        store: &Arc<docket_storage::PgStore>,
        asked: &[(TaskId, bool)],
    ) -> Vec<tokio::task::JoinHandle<Option<TaskId>>> {
        asked
            .iter()
            .map(|(id, _)| {
                let store = Arc::clone(store);
                let id = id.clone();
                tokio::spawn(async move {
                    let read = store.get(&id).await.expect("read");
                    read.map(|(record, _)| record.id)
                })
            })
            .collect()
    }

    /// Reads that arrive together share statements, and each still gets its
    /// own task (or none, for an id that names none), also when two ask for the
    /// same task. One thread: the reads queue while the first statements run.
    #[tokio::test]
    async fn concurrent_reads_share_statements_and_each_gets_its_own_task() {
        let _light = light().await;
        let Some((store, _schema)) = pg_store().await else {
            return;
        };
        let asked = tasks_to_read(&store, 30).await;
        let before = store.shared_reads();
        let reads = spawn_reads(&store, &asked);
        for ((id, exists), read) in asked.iter().zip(reads) {
            let read = patiently("a read", read).await.expect("the read ran");
            assert_eq!(read.as_ref(), exists.then_some(id));
        }
        let after = store.shared_reads();
        assert_eq!(after.calls - before.calls, 90);
        let statements = after.statements - before.statements;
        assert!(
            statements * 4 <= 90,
            "90 concurrent reads took {statements} statements"
        );
    }

    /// Reads in a statement led by a read that went away (its caller dropped
    /// it) still get their answers. One thread: with the two leader permits
    /// held, the third read leads the whole queue once the first ends, and is
    /// dropped at once.
    #[tokio::test]
    async fn reads_led_by_a_read_that_went_away_still_get_their_answers() {
        let _light = light().await;
        let Some((store, _schema)) = pg_store().await else {
            return;
        };
        let asked = tasks_to_read(&store, 10).await;
        let before = store.shared_reads();
        // Two lone reads hold the leader permits while their statements run.
        let (first, rest) = asked.split_at(2);
        let first = spawn_reads(&store, first);
        tokio::task::yield_now().await;
        // The rest queue; when the first read ends, the next takes them all.
        let mut rest = spawn_reads(&store, rest);
        let mut first = first.into_iter();
        let one = first.next().expect("two reads");
        assert_eq!(
            patiently("the first read", one)
                .await
                .expect("ran")
                .as_ref(),
            Some(&asked[0].0)
        );
        let leader = rest.remove(0);
        leader.abort();
        for ((id, exists), read) in asked[1..2]
            .iter()
            .zip(first)
            .chain(asked[3..].iter().zip(rest))
        {
            let read = patiently("a read", read).await.expect("the read ran");
            assert_eq!(read.as_ref(), exists.then_some(id));
        }
        // Two lone statements, then one for the rest (with the dropped
        // read's, if it got as far as taking the queue).
        let statements = store.shared_reads().statements - before.statements;
        assert!(statements <= 4, "{statements} statements for 30 reads");
    }

    /// Spawns one create per task.
    fn spawn_creates(
        store: &Arc<docket_storage::PgStore>,
        new: &[docket_task::NewTask],
    ) -> Vec<tokio::task::JoinHandle<Result<docket_task::model::TaskRecord, StoreError>>> {
        new.iter()
            .map(|task| {
                let store = Arc::clone(store);
                let task = task.clone();
                tokio::spawn(async move { store.create(task).await })
            })
            .collect()
    }

    /// Creates that arrive together share statements; each returns its task as
    /// stored (as a read finds it), with what the database decided. One
    /// thread: the creates queue while the first statements run.
    #[tokio::test]
    async fn concurrent_creates_share_statements_and_each_is_stored() {
        let _light = light().await;
        let Some((store, _schema)) = pg_store().await else {
            return;
        };
        let new = (0..40)
            .map(|at| {
                let mut task = new_task("creates");
                // Each field differs between tasks, so a mix-up shows.
                task.tool = format!("tool {at}");
                task.arguments = json!({"at": at});
                task.extra_follower = (at % 2 == 0).then(|| format!("follower {at}"));
                task.status_message = (at % 3 == 0).then(|| format!("message {at}"));
                task.retention = (at % 4 != 0).then(|| Duration::from_secs(60 + at));
                task.poll_interval_ms = 1000 + at;
                task.audit.persona = (at % 5 != 0).then(|| format!("persona {at}"));
                task
            })
            .collect::<Vec<_>>();
        let before = store.shared_creates();
        let created = spawn_creates(&store, &new);
        for (task, created) in new.iter().zip(created) {
            let created = patiently("a create", created)
                .await
                .expect("the create ran")
                .expect("created");
            assert_eq!(created.id, task.id);
            assert_eq!(created.tool, task.tool);
            assert_eq!(created.arguments, task.arguments);
            assert_eq!(created.extra_follower, task.extra_follower);
            assert_eq!(created.expires_at.is_some(), task.retention.is_some());
            let (read, _) = store.get(&task.id).await.expect("read").expect("stored");
            assert_eq!(read, created);
        }
        let after = store.shared_creates();
        assert_eq!(after.calls - before.calls, 40);
        let statements = after.statements - before.statements;
        assert!(
            statements * 4 <= 40,
            "40 concurrent creates took {statements} statements"
        );
    }

    /// A create under an id that exists is refused as a duplicate also when it
    /// arrives with others, and only it: the others are stored.
    #[tokio::test]
    async fn a_duplicate_among_concurrent_creates_is_the_only_one_refused() {
        let _light = light().await;
        let Some((store, _schema)) = pg_store().await else {
            return;
        };
        let existing = new_task("duplicates");
        store.create(existing.clone()).await.expect("create");
        let mut new = (0..20).map(|_| new_task("duplicates")).collect::<Vec<_>>();
        new.insert(10, existing.clone());
        new.push(existing.clone());
        let created = spawn_creates(&store, &new);
        for (task, created) in new.iter().zip(created) {
            let created = patiently("a create", created)
                .await
                .expect("the create ran");
            if task.id == existing.id {
                assert!(matches!(created, Err(StoreError::Duplicate)), "{created:?}");
            } else {
                assert_eq!(created.expect("created").id, task.id);
            }
        }
        let (read, _) = store.get(&existing.id).await.expect("read").expect("kept");
        assert_eq!(read.tool, existing.tool);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_duplicate_id_is_refused() {
        let Some((store, _schema)) = store().await else {
            return;
        };
        a_duplicate_id_is_refused_as_such(store).await;
    }

    /// Asks, through `taking`, to cancel `id` until the listener that feeds
    /// `signals` hears it. LISTEN starts in the background (and restarts after
    /// a dropped connection), and a notification sent while it is not active is
    /// lost by design, so the cancel is asked again until it is heard. The
    /// channel is shared by every schema on the server: other tests' signals are
    /// skipped.
    async fn hear_cancel(
        taking: &dyn TaskStore,
        id: &TaskId,
        signals: &mut tokio::sync::mpsc::UnboundedReceiver<TaskSignal>,
    ) {
        let wanted = TaskSignal::Cancel(id.clone());
        patiently("the cancel signal", async {
            loop {
                taking.request_cancel(id).await.expect("cancel");
                let deadline = tokio::time::Instant::now() + Duration::from_millis(200);
                while let Ok(Some(signal)) = tokio::time::timeout_at(deadline, signals.recv()).await
                {
                    if signal == wanted {
                        return;
                    }
                }
            }
        })
        .await;
    }

    /// A cancel taken through one store reaches the listener of another store
    /// (its own pool, its own LISTEN connection) on the same schema, and so do
    /// input answers; the heartbeat still reports the cancel.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn signals_reach_a_listener_on_another_store_through_notify() {
        let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
            return;
        };
        let taking = database.store().await;
        let running = database.store().await;
        let (sender, mut signals) = tokio::sync::mpsc::unbounded_channel();
        running.set_signal_listener(Arc::new(move |signal| {
            let _ = sender.send(signal);
        }));

        let cancelled = new_task("signals_reach_a_listener_on_another_store_through_notify");
        let waiting = new_task("signals_reach_a_listener_on_another_store_through_notify");
        taking.create(cancelled.clone()).await.expect("create");
        taking.create(waiting.clone()).await.expect("create");

        hear_cancel(&*taking, &cancelled.id, &mut signals).await;

        let requests = object(json!({"confirm": {"method": "elicitation/create"}}));
        assert!(
            taking
                .require_input(&waiting.id, requests)
                .await
                .expect("require")
        );
        taking
            .answer_input(
                &waiting.id,
                &object(json!({"confirm": {"action": "accept"}})),
            )
            .await
            .expect("answer");
        let wanted = TaskSignal::Input(waiting.id.clone());
        patiently("the input signal", async {
            while let Some(signal) = signals.recv().await {
                if signal == wanted {
                    return;
                }
            }
            panic!("the signal channel closed");
        })
        .await;

        let beat = Beat {
            id: cancelled.id.clone(),
            status_message: None,
        };
        assert_eq!(
            running.heartbeat("a", &[beat]).await.expect("heartbeat"),
            vec![cancelled.id.clone()],
            "the row, not the notification, is the truth"
        );
    }

    /// When the listening connection is killed, the listener connects again on
    /// its own and signals flow once more.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_listener_reconnects_after_its_connection_is_killed() {
        use diesel::sql_types::{BigInt, Text};
        use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

        let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
            return;
        };
        // A name of its own, so only this test's listening connection is killed.
        let name = format!(
            "docket_test_{}",
            TaskId::generate().expect("OS random source")
        );
        let listening_url = format!("{}&application_name={name}", database.url());
        let taking = database.store().await;
        let running = docket_storage::connect(&listening_url, no_migration(2))
            .await
            .expect("connect")
            .task_store();
        let (sender, mut signals) = tokio::sync::mpsc::unbounded_channel();
        running.set_signal_listener(Arc::new(move |signal| {
            let _ = sender.send(signal);
        }));
        let before = new_task("the_listener_reconnects_after_its_connection_is_killed");
        let after = new_task("the_listener_reconnects_after_its_connection_is_killed");
        taking.create(before.clone()).await.expect("create");
        taking.create(after.clone()).await.expect("create");
        hear_cancel(&*taking, &before.id, &mut signals).await;

        #[derive(diesel::QueryableByName)]
        struct Killed {
            #[diesel(sql_type = BigInt)]
            killed: i64,
        }
        let mut admin = AsyncPgConnection::establish(database.url())
            .await
            .expect("connect");
        let killed: Killed = diesel::sql_query(
            "SELECT count(*) FILTER (WHERE terminated) AS killed FROM ( \
                 SELECT pg_terminate_backend(pid) AS terminated FROM pg_stat_activity \
                  WHERE application_name = $1 AND query = 'LISTEN docket_tasks') AS listeners",
        )
        .bind::<Text, _>(&name)
        .get_result(&mut admin)
        .await
        .expect("kill the listening connection");
        assert_eq!(killed.killed, 1);

        hear_cancel(&*taking, &after.id, &mut signals).await;
    }

    /// One beat of a replica with 10 000 running tasks stamps the replica's row
    /// and no task row: every task reads the replica's new stamp, only the
    /// messages that changed are written, and the call returns exactly the tasks
    /// with a cancel requested.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_beat_stamps_ten_thousand_tasks_through_their_replica() {
        let _alone = heavy().await;
        use diesel::sql_types::{BigInt, Timestamptz};
        use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};

        const TASKS: usize = 10_000;
        let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
            return;
        };
        let store = database.store().await;
        let mut creators = Vec::new();
        for _ in 0..4 {
            let store = Arc::clone(&store);
            creators.push(tokio::spawn(async move {
                let mut ids = Vec::new();
                for _ in 0..TASKS / 4 {
                    let mut task =
                        new_task("one_beat_stamps_ten_thousand_tasks_through_their_replica");
                    task.replica_id = "bulk".into();
                    ids.push(store.create(task).await.expect("create").id);
                }
                ids
            }));
        }
        let mut ids = Vec::new();
        for creator in creators {
            ids.extend(creator.await.expect("creator"));
        }
        let mut cancelled = vec![ids[3].clone(), ids[4_321].clone(), ids[9_999].clone()];
        for id in &cancelled {
            store.request_cancel(id).await.expect("cancel");
        }
        let (_, before) = store.get(&ids[0]).await.expect("get").expect("present");

        // Three messages changed since the last beat; the runtime sends only those.
        let beats: Vec<Beat> = [0, 5_000, 9_998]
            .iter()
            .map(|&index| Beat {
                id: ids[index].clone(),
                status_message: Some(format!("{index} rows written")),
            })
            .collect();
        let mut reported = store.heartbeat("bulk", &beats).await.expect("heartbeat");
        reported.sort();
        cancelled.sort();
        assert_eq!(reported, cancelled);

        #[derive(diesel::QueryableByName)]
        struct Writes {
            #[diesel(sql_type = BigInt)]
            tasks_written: i64,
            #[diesel(sql_type = BigInt)]
            replica_stamped: i64,
        }
        let mut connection = AsyncPgConnection::establish(database.url())
            .await
            .expect("connect");
        let writes: Writes = diesel::sql_query(
            "SELECT (SELECT count(*) FROM call_tasks \
                      WHERE replica_id = 'bulk' AND last_updated_at > $1) AS tasks_written, \
                    (SELECT count(*) FROM replicas \
                      WHERE id = 'bulk' AND last_beat_at > $1) AS replica_stamped",
        )
        .bind::<Timestamptz, _>(before)
        .get_result(&mut connection)
        .await
        .expect("count writes");
        assert_eq!(writes.tasks_written, 3, "only the changed messages");
        assert_eq!(writes.replica_stamped, 1);
        for index in [1, 4_321, 9_998] {
            let (task, _) = store.get(&ids[index]).await.expect("get").expect("present");
            assert!(task.heartbeat_at > before, "as alive as its replica");
        }
        let (last, _) = store.get(&ids[9_998]).await.expect("get").expect("present");
        assert_eq!(last.status_message.as_deref(), Some("9998 rows written"));
        let (quiet, _) = store.get(&ids[1]).await.expect("get").expect("present");
        assert_eq!(quiet.status_message.as_deref(), Some("starting"));
    }

    /// Two replicas sweeping stale tasks and running retention at the same time
    /// fail each stale task exactly once (one audit row each), delete each
    /// expired task exactly once, and never error.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_sweepers_fail_and_delete_each_task_once() {
        let _alone = heavy().await;
        const STALE_TOOL: &str = "concurrent_sweepers_stale";
        const EXPIRED_TOOL: &str = "concurrent_sweepers_expired";
        const TASKS: usize = 200;
        let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
            return;
        };
        let first = database.store().await;
        let second = database.store().await;

        let mut stale = HashSet::new();
        let mut expired = HashSet::new();
        for _ in 0..TASKS {
            let task = new_task(STALE_TOOL);
            stale.insert(task.id.clone());
            first.create(task).await.expect("create");
            // Expired at once, and ended, so only retention concerns it.
            let mut task = new_task(EXPIRED_TOOL);
            task.retention = Some(Duration::ZERO);
            expired.insert(task.id.clone());
            first.create(task.clone()).await.expect("create");
            first
                .finish(&task.id, Outcome::Completed(json!({"content": []})))
                .await
                .expect("finish");
        }
        // Only to order events: every task's last stamp is now older than 50 ms.
        tokio::time::sleep(Duration::from_millis(100)).await;

        let sweep = |store: Arc<dyn TaskStore>| {
            tokio::spawn(async move {
                let (mut failed, mut deleted) = (Vec::new(), Vec::new());
                loop {
                    let newly_failed = store
                        .fail_stale(Duration::from_millis(50))
                        .await
                        .expect("fail_stale");
                    let newly_deleted = store.delete_expired(7).await.expect("delete_expired");
                    if newly_failed.is_empty() && newly_deleted.is_empty() {
                        return (failed, deleted);
                    }
                    failed.extend(newly_failed.into_iter().map(|task| task.id));
                    deleted.extend(newly_deleted);
                }
            })
        };
        let (first_sweep, second_sweep) = (sweep(Arc::clone(&first)), sweep(Arc::clone(&second)));
        let (failed_first, deleted_first) = patiently("the first sweep", first_sweep)
            .await
            .expect("first sweep");
        let (failed_second, deleted_second) = patiently("the second sweep", second_sweep)
            .await
            .expect("second sweep");

        let failed: Vec<TaskId> = failed_first.into_iter().chain(failed_second).collect();
        assert_eq!(failed.len(), TASKS, "no task failed twice");
        assert_eq!(failed.into_iter().collect::<HashSet<_>>(), stale);
        let deleted: Vec<TaskId> = deleted_first.into_iter().chain(deleted_second).collect();
        assert_eq!(deleted.len(), TASKS, "no task deleted twice");
        assert_eq!(deleted.into_iter().collect::<HashSet<_>>(), expired);

        let audit = first
            .audit_for_tool(STALE_TOOL, 10 * TASKS as u32)
            .await
            .expect("audit");
        assert_eq!(audit.len(), TASKS, "exactly one audit row per stale task");
        assert!(
            audit
                .iter()
                .all(|entry| entry.outcome == "failed" && !entry.success)
        );
        for id in &stale {
            let (task, _) = second.get(id).await.expect("get").expect("present");
            assert_eq!(task.status, TaskStatus::Failed);
        }
    }

    /// Migrating a migrated schema changes nothing and fails nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn migrate_is_idempotent() {
        let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
            return;
        };
        docket_storage::migrate(database.url())
            .await
            .expect("migrate again");
        docket_storage::migrate(database.url())
            .await
            .expect("and again");
        let store = docket_storage::connect(database.url(), ConnectOptions::default())
            .await
            .expect("connect with migrate on start")
            .task_store();
        let task = new_task("migrate_is_idempotent");
        store.create(task.clone()).await.expect("create");
        assert!(store.get(&task.id).await.expect("get").is_some());
    }
}

mod sqlite {
    use super::*;

    /// The stale sweep forgets replicas silent for `stale_after` that run
    /// nothing, and keeps one whose task is still running (it fails the task).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sweep_forgets_silent_replicas_that_run_nothing() {
        use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection};

        #[derive(QueryableByName)]
        struct Id {
            #[diesel(sql_type = diesel::sql_types::Text)]
            id: String,
        }
        let database = TestDatabase::sqlite().await;
        let store = database.store().await;
        let mut task = new_task("the_sweep_forgets_silent_replicas_that_run_nothing");
        task.replica_id = "busy".into();
        store.create(task).await.expect("create");
        store.heartbeat("busy", &[]).await.expect("beat");
        store.heartbeat("idle", &[]).await.expect("beat");
        // Only to order events: SQLite's clock counts milliseconds.
        tokio::time::sleep(Duration::from_millis(5)).await;
        store
            .fail_stale(Duration::from_millis(1))
            .await
            .expect("sweep");
        let path = database.url().trim_start_matches("sqlite://").to_owned();
        let read = move || {
            let path = path.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    let mut conn = SqliteConnection::establish(&path).expect("open");
                    diesel::sql_query("SELECT id FROM replicas ORDER BY id")
                        .load::<Id>(&mut conn)
                        .expect("read")
                        .into_iter()
                        .map(|row| row.id)
                        .collect::<Vec<_>>()
                })
                .await
                .expect("read")
            }
        };
        assert_eq!(
            read().await,
            vec!["busy".to_owned()],
            "its task ran when it swept"
        );
        store
            .fail_stale(Duration::from_millis(1))
            .await
            .expect("sweep");
        assert!(read().await.is_empty(), "its task is failed now");
    }

    /// A draining replica says so in its row, and a later beat keeps it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_draining_replica_is_marked_in_its_row() {
        use diesel::{Connection, QueryableByName, RunQueryDsl, SqliteConnection};

        #[derive(QueryableByName)]
        struct Draining {
            #[diesel(sql_type = diesel::sql_types::Bool)]
            draining: bool,
        }
        let database = TestDatabase::sqlite().await;
        let store = database.store().await;
        store.heartbeat("r1", &[]).await.expect("beat");
        store.mark_draining("r1").await.expect("draining");
        store.mark_draining("never-beat").await.expect("draining");
        store.heartbeat("r1", &[]).await.expect("beat");
        let path = database.url().trim_start_matches("sqlite://").to_owned();
        let rows: Vec<Draining> = tokio::task::spawn_blocking(move || {
            let mut conn = SqliteConnection::establish(&path).expect("open");
            diesel::sql_query("SELECT draining FROM replicas ORDER BY id")
                .load(&mut conn)
                .expect("read")
        })
        .await
        .expect("read");
        assert_eq!(
            rows.iter().map(|row| row.draining).collect::<Vec<_>>(),
            vec![true, true]
        );
    }

    docket_task::store_suite!(async {
        let light = light().await;
        let database = TestDatabase::sqlite().await;
        (database.store().await, (database, light))
    });

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_duplicate_id_is_refused() {
        let database = TestDatabase::sqlite().await;
        a_duplicate_id_is_refused_as_such(database.store().await).await;
    }

    /// Tasks and audit rows written before the store closed are there, unchanged,
    /// when the file is opened again (a restart of a single-node server).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tasks_survive_reopening_the_file() {
        let tool = "tasks_survive_reopening_the_file";
        let database = TestDatabase::sqlite().await;
        let ended = new_task(tool);
        let running = new_task(tool);
        let (ended_before, running_before) = {
            let store = database.store().await;
            store.create(ended.clone()).await.expect("create");
            store.create(running.clone()).await.expect("create");
            store
                .finish(
                    &ended.id,
                    Outcome::Completed(json!({"content": [{"type": "text", "text": "done"}]})),
                )
                .await
                .expect("finish");
            store.request_cancel(&running.id).await.expect("cancel");
            let (ended_before, _) = store.get(&ended.id).await.expect("get").expect("present");
            let (running_before, _) = store.get(&running.id).await.expect("get").expect("present");
            (ended_before, running_before)
        };

        let reopened = docket_storage::connect(database.url(), ConnectOptions::default())
            .await
            .expect("reopen")
            .task_store();
        let (ended_after, _) = reopened
            .get(&ended.id)
            .await
            .expect("get")
            .expect("present");
        let (running_after, _) = reopened
            .get(&running.id)
            .await
            .expect("get")
            .expect("present");
        assert_eq!(ended_after, ended_before);
        assert_eq!(running_after, running_before);
        assert!(running_after.cancel_requested_at.is_some());
        let audit = reopened.audit_for_tool(tool, 10).await.expect("audit");
        assert_eq!(audit.len(), 1);
        assert_eq!(audit[0].outcome, "completed");
    }

    /// `sqlite://PATH` creates the file and the folders above it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connect_creates_the_file_and_its_folders() {
        let database = TestDatabase::sqlite().await;
        let folder = std::path::Path::new(
            database
                .url()
                .strip_prefix("sqlite://")
                .expect("a sqlite url"),
        )
        .parent()
        .expect("a folder")
        .to_owned();
        let path = folder.join("nested").join("deeper").join("docket.db");
        let url = format!("sqlite://{}", path.display());
        let store = docket_storage::connect(&url, ConnectOptions::default())
            .await
            .expect("connect")
            .task_store();
        assert!(path.exists());
        let task = new_task("connect_creates_the_file_and_its_folders");
        store.create(task.clone()).await.expect("create");
        assert!(store.get(&task.id).await.expect("get").is_some());
    }

    /// Migrating a migrated file changes nothing and fails nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn migrate_is_idempotent() {
        let database = TestDatabase::sqlite().await;
        docket_storage::migrate(database.url())
            .await
            .expect("migrate again");
        let store = docket_storage::connect(database.url(), no_migration(2))
            .await
            .expect("connect")
            .task_store();
        let task = new_task("migrate_is_idempotent");
        store.create(task.clone()).await.expect("create");
        assert!(store.get(&task.id).await.expect("get").is_some());
    }

    /// One beat with no messages stamps all of a replica's tasks through the
    /// replica's row (one stamp, no task row written) and reports only the
    /// cancelled ones.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_beat_stamps_every_task_through_its_replica() {
        let _alone = heavy().await;
        let database = TestDatabase::sqlite().await;
        let store = database.store().await;
        let mut ids = Vec::new();
        for _ in 0..1_000 {
            let mut task = new_task("one_beat_stamps_every_task_through_its_replica");
            task.replica_id = "bulk".into();
            ids.push(store.create(task).await.expect("create").id);
        }
        store.request_cancel(&ids[7]).await.expect("cancel");
        let (_, before) = store.get(&ids[0]).await.expect("get").expect("present");
        // Only to order events: SQLite's clock counts milliseconds.
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(
            store.heartbeat("bulk", &[]).await.expect("heartbeat"),
            vec![ids[7].clone()]
        );
        let mut stamps = HashSet::new();
        for id in &ids {
            let (task, _) = store.get(id).await.expect("get").expect("present");
            assert!(task.heartbeat_at > before);
            assert!(task.last_updated_at < before, "no task row was written");
            stamps.insert(task.heartbeat_at);
        }
        assert_eq!(stamps.len(), 1, "one stamp: the replica's");
    }
}

mod urls {
    use super::*;

    /// Neither the message nor the causes of a failed connection carry the
    /// password from the URL.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn connection_errors_do_not_reveal_the_password() {
        let url = "postgres://docket:hunter2-Secret@127.0.0.1:1/docket?connect_timeout=5";
        for options in [no_migration(1), ConnectOptions::default()] {
            let error = docket_storage::connect(url, options)
                .await
                .expect_err("nothing listens on port 1");
            let text = chain(&error);
            assert!(matches!(error, StorageError::Connect { .. }), "{text}");
            assert!(!text.contains("hunter2-Secret"), "{text}");
        }
        let error = docket_storage::migrate(url)
            .await
            .expect_err("nothing listens on port 1");
        assert!(!chain(&error).contains("hunter2-Secret"));
    }

    /// Only PostgreSQL and SQLite URLs are accepted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn other_urls_are_refused() {
        for url in ["mysql://db/docket", "docket.db", "sqlite://"] {
            let error = docket_storage::connect(url, ConnectOptions::default())
                .await
                .expect_err("refused");
            assert!(
                matches!(error, StorageError::InvalidUrl { .. }),
                "{url}: {error}"
            );
        }
    }
}

/// The asset and call catalogs' behaviour suites, from one source on both
/// backends.
mod catalog {
    use super::*;

    mod postgres {
        use super::*;

        // As for the task suite: the block yields a ready store or returns from
        // the test, which is how a test skips.
        docket_catalog::asset_store_suite!({
            let light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let store = database.connect().await.asset_store();
            std::future::ready((store, (database, light)))
        });

        docket_catalog::call_catalog_suite!({
            let light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let catalog = database.connect().await.call_catalog();
            std::future::ready((catalog, (database, light)))
        });

        docket_catalog::session_store_suite!({
            let light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let sessions = database.connect().await.session_store();
            std::future::ready((sessions, (database, light)))
        });

        docket_catalog::prompt_library_suite!({
            let light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let prompts = database.connect().await.prompt_library();
            std::future::ready((prompts, (database, light)))
        });

        docket_catalog::principal_store_suite!({
            let light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let principals = database.connect().await.principal_store();
            std::future::ready((principals, (database, light)))
        });

        docket_catalog::link_store_suite!({
            let light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let links = database.connect().await.link_store();
            std::future::ready((links, (database, light)))
        });

        docket_catalog::spool_store_suite!({
            let light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let spools = database.connect().await.spool_store();
            std::future::ready((spools, (database, light)))
        });

        /// Two stores with pools of their own (two replicas) racing to record
        /// one owner's key: one asset, which both answer with.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn replicas_racing_on_one_key_record_one_asset() {
            let _light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let replicas = [
                database.connect().await.asset_store(),
                database.connect().await.asset_store(),
            ];
            let mut writers = Vec::new();
            for round in 0..8 {
                let store = Arc::clone(&replicas[round % 2]);
                let mut asset = docket_catalog::testing::new_asset(
                    "apikey:alice",
                    &format!("replica-{round}.csv"),
                );
                asset.idempotency_key = Some("shared-key".into());
                writers.push(tokio::spawn(async move {
                    store.create_or_get(asset).await.expect("create_or_get")
                }));
            }
            let mut created = 0;
            let mut answered = HashSet::new();
            for writer in writers {
                let outcome = patiently("a racing create", writer).await.expect("joined");
                created += usize::from(outcome.is_created());
                answered.insert(outcome.into_asset().id);
            }
            assert_eq!(created, 1);
            assert_eq!(answered.len(), 1);
        }
    }

    mod sqlite {
        use super::*;

        docket_catalog::asset_store_suite!(async {
            let light = light().await;
            let database = TestDatabase::sqlite().await;
            (database.connect().await.asset_store(), (database, light))
        });

        docket_catalog::call_catalog_suite!(async {
            let light = light().await;
            let database = TestDatabase::sqlite().await;
            (database.connect().await.call_catalog(), (database, light))
        });

        docket_catalog::session_store_suite!(async {
            let light = light().await;
            let database = TestDatabase::sqlite().await;
            (database.connect().await.session_store(), (database, light))
        });

        docket_catalog::prompt_library_suite!(async {
            let light = light().await;
            let database = TestDatabase::sqlite().await;
            (database.connect().await.prompt_library(), (database, light))
        });

        docket_catalog::principal_store_suite!(async {
            let light = light().await;
            let database = TestDatabase::sqlite().await;
            (
                database.connect().await.principal_store(),
                (database, light),
            )
        });

        docket_catalog::link_store_suite!(async {
            let light = light().await;
            let database = TestDatabase::sqlite().await;
            (database.connect().await.link_store(), (database, light))
        });

        docket_catalog::spool_store_suite!(async {
            let light = light().await;
            let database = TestDatabase::sqlite().await;
            (database.connect().await.spool_store(), (database, light))
        });

        /// Assets and call records written before the store closed are there,
        /// unchanged, when the file is opened again.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn the_catalogs_survive_reopening_the_file() {
            let database = TestDatabase::sqlite().await;
            let asset = docket_catalog::testing::new_asset("apikey:alice", "kept.csv");
            let record = docket_catalog::testing::new_call_record("apikey:alice");
            let (asset_before, record_before) = {
                let store = database.connect().await;
                let asset = store
                    .asset_store()
                    .create_or_get(asset)
                    .await
                    .expect("create")
                    .into_asset();
                store
                    .call_catalog()
                    .record(record.clone())
                    .await
                    .expect("record");
                let record = store
                    .call_catalog()
                    .get(&record.id)
                    .await
                    .expect("get")
                    .expect("present");
                (asset, record)
            };
            let reopened = docket_storage::connect(database.url(), ConnectOptions::default())
                .await
                .expect("reopen");
            assert_eq!(
                reopened
                    .asset_store()
                    .get(&asset_before.id)
                    .await
                    .expect("get"),
                Some(asset_before)
            );
            assert_eq!(
                reopened
                    .call_catalog()
                    .recent(None, 10)
                    .await
                    .expect("recent"),
                [record_before]
            );
        }
    }
}

/// The authorization server's store suite (`docket_oauth::testing`) on both
/// backends, and what only PostgreSQL has: replicas with pools of their own
/// racing on one code and one refresh token.
mod oauth {
    use super::*;
    use docket_oauth::testing::{base_time, new_refresh};
    use docket_oauth::{Fetched, OnceKind, Rotation};

    mod postgres {
        use super::*;

        docket_oauth::oauth_store_suite!({
            let light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let store = database.connect().await.oauth_store();
            std::future::ready((store, (database, light)))
        });

        /// Two replicas taking one code at once and rotating one refresh
        /// token at once: one take is fresh, one rotation wins.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn replicas_racing_on_one_code_and_one_token_have_one_winner() {
            let _light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let replicas = [
                database.connect().await.oauth_store(),
                database.connect().await.oauth_store(),
            ];
            let now = base_time();
            let later = now + time::Duration::minutes(10);
            replicas[0]
                .put_once(OnceKind::Code, "code", &json!({"code": 1}), later, 10)
                .await
                .expect("put");
            replicas[1]
                .put_refresh(
                    &new_refresh("t0", "family", "client", "oidc:alice", now),
                    10,
                )
                .await
                .expect("put");
            let mut takes = Vec::new();
            let mut rotations = Vec::new();
            for round in 0..8 {
                let store = Arc::clone(&replicas[round % 2]);
                takes.push(tokio::spawn(async move {
                    store.take_once(OnceKind::Code, "code", now).await
                }));
                let store = Arc::clone(&replicas[(round + 1) % 2]);
                rotations.push(tokio::spawn(async move {
                    store
                        .rotate_refresh("t0", &format!("t1-{round}"), now)
                        .await
                }));
            }
            let mut fresh = 0;
            for take in takes {
                let taken = patiently("a racing take", take).await.expect("joined");
                fresh += usize::from(matches!(taken.expect("take"), Fetched::Fresh(_)));
            }
            let mut rotated = 0;
            for rotation in rotations {
                let outcome = patiently("a racing rotation", rotation)
                    .await
                    .expect("joined")
                    .expect("rotate");
                assert!(!matches!(outcome, Rotation::Missing), "{outcome:?}");
                rotated += usize::from(matches!(outcome, Rotation::Rotated(_)));
            }
            assert_eq!((fresh, rotated), (1, 1));
        }
    }

    mod sqlite {
        use super::*;

        docket_oauth::oauth_store_suite!(async {
            let light = light().await;
            let database = TestDatabase::sqlite().await;
            (database.connect().await.oauth_store(), (database, light))
        });
    }
}

/// The portal's store suite (`docket_portal::testing`) on both backends, and
/// what only PostgreSQL has: replicas with pools of their own racing to take
/// one login.
mod portal {
    use super::*;
    use docket_portal::PortalStore;
    use docket_portal::testing::{base_time, new_login};

    mod postgres {
        use super::*;

        docket_portal::portal_store_suite!({
            let light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let store = database.connect().await.portal_store();
            std::future::ready((store, (database, light)))
        });

        /// Two replicas taking one login at once: one gets it.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn replicas_racing_on_one_login_have_one_winner() {
            let _light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let replicas: [Arc<dyn PortalStore>; 2] = [
                database.connect().await.portal_store(),
                database.connect().await.portal_store(),
            ];
            let now = base_time();
            let login = new_login("raced", now);
            replicas[0].begin_login(&login, 10).await.expect("begin");
            let mut takes = Vec::new();
            for round in 0..8 {
                let store = Arc::clone(&replicas[round % 2]);
                let state_hash = login.state_hash.clone();
                takes.push(tokio::spawn(async move {
                    store.take_login(&state_hash, now).await
                }));
            }
            let mut got = 0;
            for take in takes {
                let taken = patiently("a racing take", take).await.expect("joined");
                got += usize::from(taken.expect("take").is_some());
            }
            assert_eq!(got, 1);
        }
    }

    mod sqlite {
        use super::*;

        docket_portal::portal_store_suite!(async {
            let light = light().await;
            let database = TestDatabase::sqlite().await;
            (database.connect().await.portal_store(), (database, light))
        });
    }
}

/// The script store's shared suite on both backends, and what only PostgreSQL
/// has: claims across two replicas' pools, and run signals through NOTIFY.
mod scripts {
    use super::*;
    use docket_catalog::scripts::RunSignal;
    use docket_catalog::scripts::testing::{new_run, new_script};

    mod postgres {
        use super::*;

        docket_catalog::script_store_suite!({
            let light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let store = database.connect().await.script_store();
            std::future::ready((store, (database, light)))
        });

        /// Two replicas (pools of their own) claiming together take each run
        /// once: SKIP LOCKED, not a shared in-process lock.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn two_replicas_claim_each_run_once() {
            let _light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let replicas = [
                database.connect().await.script_store(),
                database.connect().await.script_store(),
            ];
            let (script, _) = replicas[0]
                .create_script(new_script("alice", "shared"), u32::MAX)
                .await
                .expect("create");
            let mut ids = HashSet::new();
            for _ in 0..20 {
                ids.insert(
                    replicas[0]
                        .enqueue(new_run(&script, "alice"))
                        .await
                        .expect("enqueue")
                        .id,
                );
            }
            let mut workers = Vec::new();
            for worker in 0..6 {
                let store = Arc::clone(&replicas[worker % 2]);
                workers.push(tokio::spawn(async move {
                    let mut mine = Vec::new();
                    while let Some(run) = store
                        .claim(
                            &format!("replica-{}-{worker}", worker % 2),
                            PATIENCE,
                            u32::MAX,
                        )
                        .await
                        .expect("claim")
                    {
                        mine.push(run.id);
                    }
                    mine
                }));
            }
            let mut claimed = Vec::new();
            for worker in workers {
                claimed.extend(patiently("a worker", worker).await.expect("joined"));
            }
            assert_eq!(claimed.len(), ids.len());
            assert_eq!(claimed.into_iter().collect::<HashSet<_>>(), ids);
        }

        /// A queued run and a cancel taken by one replica reach a listener on
        /// another through NOTIFY docket_runs.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn run_signals_reach_another_replica() {
            let _light = light().await;
            let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
                return;
            };
            let listening = database.connect().await.script_store();
            let taking = database.connect().await.script_store();
            let (sender, mut signals) = tokio::sync::mpsc::unbounded_channel();
            listening.set_run_listener(Arc::new(move |signal| {
                let _ = sender.send(signal);
            }));
            let (script, _) = taking
                .create_script(new_script("alice", "signals"), u32::MAX)
                .await
                .expect("create");
            // LISTEN starts in the background; queue runs until one is heard.
            let heard = patiently("a queued signal", async {
                loop {
                    let run = taking
                        .enqueue(new_run(&script, "alice"))
                        .await
                        .expect("enqueue");
                    let deadline = tokio::time::Instant::now() + Duration::from_millis(200);
                    while let Ok(Some(signal)) =
                        tokio::time::timeout_at(deadline, signals.recv()).await
                    {
                        if signal == RunSignal::Queued(run.id.clone()) {
                            return run;
                        }
                    }
                }
            })
            .await;
            let claimed = loop {
                let run = taking
                    .claim("w", PATIENCE, u32::MAX)
                    .await
                    .expect("claim")
                    .expect("run");
                if run.id == heard.id {
                    break run;
                }
            };
            taking.cancel_run(&claimed.id).await.expect("cancel");
            patiently("the cancel signal", async {
                while let Some(signal) = signals.recv().await {
                    if signal == RunSignal::Cancel(claimed.id.clone()) {
                        return;
                    }
                }
            })
            .await;
        }
    }

    mod sqlite {
        use super::*;

        docket_catalog::script_store_suite!(async {
            let light = light().await;
            let database = TestDatabase::sqlite().await;
            (database.connect().await.script_store(), (database, light))
        });
    }
}

/// Retention of audit rows, call records and assets, on both backends: bounded
/// batches of what is older than the age, nothing younger; and the assets whose
/// task is gone.
mod retention {
    use docket_catalog::testing::{new_asset, new_call_record};
    use docket_storage::Store;
    use docket_task::store::{AuditContext, AuditEntry};

    use super::*;

    async fn retention_deletes_in_batches_and_only_what_is_due(store: Store) {
        let tasks = store.task_store();
        let retention = store.retention();
        for index in 0..3 {
            tasks
                .record_audit(AuditEntry {
                    tool: "trino_query".into(),
                    subject: format!("apikey:user-{index}"),
                    context: AuditContext::default(),
                    success: true,
                    outcome: "completed".into(),
                    error_message: None,
                    duration_ms: 1,
                    call_id: Some(format!("call-{index}")),
                    engine_user: None,
                    upstream_ids: Vec::new(),
                })
                .await
                .expect("audit");
            store
                .call_catalog()
                .record(new_call_record("apikey:alice"))
                .await
                .expect("record");
        }
        let kept_task = tasks.create(new_task("trino_export")).await.expect("task");
        let mut with_task = new_asset("apikey:alice", "kept-with-its-task.csv");
        with_task.task_id = Some(kept_task.id.to_string());
        let mut orphan = new_asset("apikey:alice", "orphan.csv");
        orphan.task_id = Some(TaskId::generate().expect("id").to_string());
        let mut direct = new_asset("apikey:alice", "direct.csv");
        direct.task_id = None;
        let assets = store.asset_store();
        for asset in [&with_task, &orphan, &direct] {
            assets.create_or_get(asset.clone()).await.expect("asset");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;

        let hour = Duration::from_secs(3600);
        assert_eq!(
            retention
                .delete_audit_older_than(hour, 10)
                .await
                .expect("audit"),
            0
        );
        assert_eq!(
            retention
                .delete_calls_older_than(hour, 10)
                .await
                .expect("calls"),
            0
        );
        assert!(
            retention
                .assets_older_than(hour, 10)
                .await
                .expect("assets")
                .is_empty()
        );

        let due = Duration::ZERO;
        assert_eq!(
            retention
                .delete_audit_older_than(due, 2)
                .await
                .expect("audit"),
            2
        );
        assert_eq!(
            retention
                .delete_audit_older_than(due, 2)
                .await
                .expect("audit"),
            1
        );
        assert_eq!(
            retention
                .delete_audit_older_than(due, 2)
                .await
                .expect("audit"),
            0
        );
        assert_eq!(
            retention
                .delete_calls_older_than(due, 2)
                .await
                .expect("calls"),
            2
        );
        assert_eq!(
            retention
                .delete_calls_older_than(due, 2)
                .await
                .expect("calls"),
            1
        );
        assert!(
            store
                .call_catalog()
                .recent(None, 10)
                .await
                .expect("recent")
                .is_empty()
        );
        let old: Vec<String> = retention
            .assets_older_than(due, 10)
            .await
            .expect("assets")
            .into_iter()
            .map(|asset| asset.id)
            .collect();
        assert_eq!(old.len(), 3, "{old:?}");
        let orphaned = retention
            .assets_without_their_task(10)
            .await
            .expect("orphans");
        assert_eq!(
            orphaned
                .iter()
                .map(|asset| asset.id.as_str())
                .collect::<Vec<_>>(),
            vec![orphan.id.as_str()]
        );
        assert_eq!(orphaned[0].storage_key, orphan.storage_key);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        let _light = light().await;
        let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
            return;
        };
        retention_deletes_in_batches_and_only_what_is_due(database.connect().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        let _light = light().await;
        let database = TestDatabase::sqlite().await;
        retention_deletes_in_batches_and_only_what_is_due(database.connect().await).await;
    }
}

/// Administrators' reads on both backends: the audit search narrows by
/// person, tool and time, newest first, within its limit; the replicas come
/// with their last beats and the database clock.
mod oversight {
    use docket_storage::Store;
    use docket_task::oversight::AuditQuery;
    use docket_task::store::{AuditContext, AuditEntry};

    use super::*;

    fn entry(tool: &str, subject: &str) -> AuditEntry {
        AuditEntry {
            tool: tool.into(),
            subject: subject.into(),
            context: AuditContext::default(),
            success: true,
            outcome: "completed".into(),
            error_message: None,
            duration_ms: 1,
            call_id: None,
            engine_user: None,
            upstream_ids: Vec::new(),
        }
    }

    async fn the_audit_is_searched_and_the_replicas_listed(store: Store) {
        let tasks = store.task_store();
        let oversight = store.oversight();
        for (tool, subject) in [
            ("trino_query", "oidc:alice"),
            ("trino_export", "oidc:alice"),
            ("trino_query", "oidc:bob"),
        ] {
            tasks
                .record_audit(entry(tool, subject))
                .await
                .expect("audit");
        }
        let search = |subject: Option<&str>, tool: Option<&str>| AuditQuery {
            subject: subject.map(str::to_owned),
            tool: tool.map(str::to_owned),
            limit: 10,
            ..AuditQuery::default()
        };
        let by = |rows: &[docket_task::oversight::AuditRecord]| {
            rows.iter()
                .map(|row| (row.entry.tool.clone(), row.entry.subject.clone()))
                .collect::<Vec<_>>()
        };
        let alice = oversight
            .search_audit(&search(Some("oidc:alice"), None))
            .await
            .expect("search");
        assert_eq!(
            by(&alice),
            [
                ("trino_export".to_owned(), "oidc:alice".to_owned()),
                ("trino_query".to_owned(), "oidc:alice".to_owned())
            ]
        );
        let queries = oversight
            .search_audit(&search(None, Some("trino_query")))
            .await
            .expect("search");
        assert_eq!(queries.len(), 2);
        let both = oversight
            .search_audit(&search(Some("oidc:bob"), Some("trino_query")))
            .await
            .expect("search");
        assert_eq!(
            by(&both),
            [("trino_query".to_owned(), "oidc:bob".to_owned())]
        );
        let newest = alice[0].at;
        let mut window = search(None, None);
        window.since = Some(newest + time::Duration::minutes(1));
        assert!(
            oversight
                .search_audit(&window)
                .await
                .expect("search")
                .is_empty()
        );
        window.since = Some(newest - time::Duration::minutes(1));
        window.until = Some(newest + time::Duration::minutes(1));
        assert_eq!(
            oversight.search_audit(&window).await.expect("search").len(),
            3
        );
        window.limit = 1;
        assert_eq!(
            oversight.search_audit(&window).await.expect("search").len(),
            1
        );

        tasks.heartbeat("replica-a", &[]).await.expect("beat");
        tasks.heartbeat("replica-b", &[]).await.expect("beat");
        tasks.mark_draining("replica-b").await.expect("drain");
        let (replicas, now) = oversight.replicas(10).await.expect("replicas");
        let mut seen: Vec<(String, bool)> = replicas
            .iter()
            .map(|replica| (replica.id.clone(), replica.draining))
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                ("replica-a".to_owned(), false),
                ("replica-b".to_owned(), true)
            ]
        );
        for replica in &replicas {
            assert!(replica.last_beat_at <= now + time::Duration::seconds(1));
            assert!(now - replica.last_beat_at < time::Duration::minutes(5));
        }
        assert_eq!(oversight.replicas(1).await.expect("replicas").0.len(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        let _light = light().await;
        let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
            return;
        };
        the_audit_is_searched_and_the_replicas_listed(database.connect().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        let _light = light().await;
        let database = TestDatabase::sqlite().await;
        the_audit_is_searched_and_the_replicas_listed(database.connect().await).await;
    }
}
