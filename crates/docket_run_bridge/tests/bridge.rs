//! The run bridge against real stores, on SQLite and PostgreSQL from one
//! source: claims, execution to each ending, retries of platform faults only,
//! cancel (local, from another bridge, of a queued run), release on shutdown,
//! reclaim after a dead worker's lease expired, fencing after a lost lease,
//! two bridges sharing a queue, retention, and the run-as-task mapping.
//!
//! The scripts here run on a stand-in [`ScriptRunner`] whose behaviour the
//! source names (`ok`, `block`, `gated`, `fault`, `fault-once`, `error`), so these tests
//! are about the queue, not the sandbox (the server's tests run real scripts).
//! No assertion is about time: waits are bounded by a generous hang guard.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use docket_catalog::scripts::testing::{new_run, new_script};
use docket_catalog::scripts::{
    CancelOutcome, Fire, FireOutcome, NewSchedule, Run, RunErrorKind, RunStatus, ScriptStore,
    ScriptVersion,
};
use docket_run_bridge::task::run_task;
use docket_run_bridge::{BridgeConfig, OwnerAccess, RunBridge, ScriptRunner};
use docket_script::{RunProgress, ScriptFailure, ScriptReport};
use docket_storage::test_db::{FaultProxy, PostgresServer, TestDatabase};
use docket_task::audit::AuditWriter;
use docket_task::{TaskStatus, TaskStore};
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The PostgreSQL server the environment names (`DOCKET_TEST_DATABASE_URL`,
/// `DOCKET_REQUIRE_POSTGRES`): this harness reads the variables, the
/// test-database helpers do not.
fn postgres_server() -> PostgresServer {
    PostgresServer::from_lookup(|name| std::env::var(name).ok())
}

/// A hang guard, never an assertion about speed.
const PATIENCE: Duration = Duration::from_secs(60);

async fn patiently<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {PATIENCE:?}"))
}

/// Runs scripts by what their source says, counting executions per run and
/// keeping the roles each acted with. A `gated` run succeeds once the test
/// signals `release`. Owners are as `owners` says (unchecked when absent), as
/// a server's identity configuration would tell them.
#[derive(Default)]
struct StandIn {
    executions: Mutex<HashMap<String, u32>>,
    roles: Mutex<HashMap<String, Vec<String>>>,
    owners: Mutex<HashMap<String, OwnerAccess>>,
    release: tokio::sync::Notify,
}

impl StandIn {
    fn executions(&self, run_id: &str) -> u32 {
        self.executions
            .lock()
            .expect("lock")
            .get(run_id)
            .copied()
            .unwrap_or(0)
    }

    fn roles(&self, run_id: &str) -> Option<Vec<String>> {
        self.roles.lock().expect("lock").get(run_id).cloned()
    }

    fn set_owner(&self, owner: &str, access: OwnerAccess) {
        self.owners
            .lock()
            .expect("lock")
            .insert(owner.to_owned(), access);
    }
}

fn report(outcome: Result<serde_json::Value, ScriptFailure>) -> ScriptReport {
    ScriptReport {
        outcome,
        log: "hello\n".into(),
        log_truncated: false,
        steps: 3,
        host_calls: 1,
    }
}

#[async_trait]
impl ScriptRunner for StandIn {
    async fn owner_access(&self, owner: &str) -> OwnerAccess {
        self.owners
            .lock()
            .expect("lock")
            .get(owner)
            .cloned()
            .unwrap_or(OwnerAccess::Unchecked)
    }

    async fn run(
        &self,
        run: &Run,
        version: &ScriptVersion,
        roles: &[String],
        cancel: CancellationToken,
        _progress: Arc<RunProgress>,
    ) -> ScriptReport {
        self.roles
            .lock()
            .expect("lock")
            .insert(run.id.clone(), roles.to_vec());
        *self
            .executions
            .lock()
            .expect("lock")
            .entry(run.id.clone())
            .or_default() += 1;
        match version.source.as_str() {
            "ok" => report(Ok(json!({"rows": 3}))),
            "error" => report(Err(ScriptFailure::Error {
                message: "line 1: boom".into(),
            })),
            "fault" => report(Err(ScriptFailure::Platform(
                "the database went away".into(),
            ))),
            "fault-once" if run.attempt == 1 => {
                report(Err(ScriptFailure::Platform("a hiccup".into())))
            }
            "fault-once" => report(Ok(json!("recovered"))),
            "gated" => {
                self.release.notified().await;
                report(Ok(json!("released")))
            }
            _ => {
                cancel.cancelled().await;
                report(Err(ScriptFailure::Cancelled))
            }
        }
    }
}

/// A test's database, its store, and a way to make bridges on it.
struct Harness {
    database: TestDatabase,
    store: Arc<dyn ScriptStore>,
    audit: Arc<dyn TaskStore>,
    /// Writes the bridges' audit rows into `audit`.
    writer: Arc<AuditWriter>,
    runner: Arc<StandIn>,
}

impl Harness {
    async fn new(database: TestDatabase) -> Self {
        let connected = database.connect().await;
        let audit = connected.task_store();
        Self {
            store: connected.script_store(),
            writer: Arc::new(AuditWriter::new(
                Arc::clone(&audit),
                Duration::from_secs(30),
            )),
            audit,
            database,
            runner: Arc::default(),
        }
    }

    fn config(name: &str) -> BridgeConfig {
        BridgeConfig {
            workers: 1,
            lease: Duration::from_secs(30),
            heartbeat_interval: Duration::from_millis(100),
            poll_interval: Duration::from_millis(100),
            max_platform_retries: 2,
            retry_backoff: Duration::from_millis(1),
            ..BridgeConfig::new(name)
        }
    }

    /// A started bridge on a store (and pool) of its own: another replica.
    async fn replica(&self, config: BridgeConfig) -> Arc<RunBridge> {
        let store = self.database.connect().await.script_store();
        let bridge = RunBridge::new(
            store,
            Some(Arc::clone(&self.writer)),
            Arc::clone(&self.runner) as Arc<dyn ScriptRunner>,
            config,
        );
        bridge.start();
        bridge
    }

    /// A started bridge whose store reaches the database through `proxy`.
    async fn replica_through(&self, proxy: &FaultProxy, config: BridgeConfig) -> Arc<RunBridge> {
        let url = self.database.url_through(proxy).expect("a server to proxy");
        let store = docket_storage::connect(
            &url,
            docket_storage::ConnectOptions {
                max_connections: 4,
                migrate: false,
            },
        )
        .await
        .expect("connect through the proxy")
        .script_store();
        let bridge = RunBridge::new(
            store,
            Some(Arc::clone(&self.writer)),
            Arc::clone(&self.runner) as Arc<dyn ScriptRunner>,
            config,
        );
        bridge.start();
        bridge
    }

    /// A started bridge with no workers: it queues and cancels, runs nothing.
    async fn idle(&self, name: &str) -> Arc<RunBridge> {
        self.replica(BridgeConfig {
            workers: 0,
            ..Self::config(name)
        })
        .await
    }

    async fn queue(&self, bridge: &RunBridge, source: &str) -> Run {
        self.queue_for(bridge, "alice", source).await
    }

    /// A run of a new script of `owner`'s.
    async fn queue_for(&self, bridge: &RunBridge, owner: &str, source: &str) -> Run {
        let mut script = new_script(
            owner,
            &format!("s-{}", RunBridge::new_run_id().expect("id")),
        );
        script.source = source.to_owned();
        let (script, _) = self
            .store
            .create_script(script, u32::MAX)
            .await
            .expect("create");
        bridge
            .enqueue(new_run(&script, "bob"))
            .await
            .expect("enqueue")
    }

    async fn ended(&self, bridge: &RunBridge, run: &Run) -> Run {
        patiently("the run's end", async {
            loop {
                let read = bridge
                    .wait(&run.id, Duration::from_secs(5))
                    .await
                    .expect("wait")
                    .expect("present");
                if read.status.is_terminal() {
                    return read;
                }
            }
        })
        .await
    }

    async fn running(&self, bridge: &RunBridge, run: &Run) {
        patiently("the run to be running", async {
            while self.runner.executions(&run.id) == 0 || bridge.executing_count() == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
    }
}

async fn a_run_is_claimed_executed_and_audited(h: Harness) {
    let bridge = h.replica(Harness::config("a")).await;
    let run = h.queue(&bridge, "ok").await;
    let ended = h.ended(&bridge, &run).await;
    assert_eq!(ended.status, RunStatus::Succeeded);
    assert_eq!(ended.result, Some(json!({"rows": 3})));
    assert_eq!(ended.log.as_deref(), Some("hello\n"));
    assert_eq!(ended.metrics["host_calls"], json!(1));
    assert_eq!(ended.attempt, 1);
    let rows = patiently("the run's audit row", async {
        loop {
            let rows = h
                .audit
                .audit_for_tool("run_script", 10)
                .await
                .expect("audit");
            if !rows.is_empty() {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].outcome, "completed");
    assert_eq!(rows[0].context.arguments["run_id"], json!(run.id));
    assert_eq!(
        rows[0].call_id.as_deref(),
        Some(run.id.as_str()),
        "a run's row names the run as its call"
    );
    assert_eq!(
        (rows[0].engine_user.as_deref(), rows[0].upstream_ids.len()),
        (None, 0)
    );
    bridge.shutdown(Duration::ZERO).await;
}

async fn script_errors_are_never_retried(h: Harness) {
    let bridge = h.replica(Harness::config("a")).await;
    let run = h.queue(&bridge, "error").await;
    let ended = h.ended(&bridge, &run).await;
    assert_eq!(ended.status, RunStatus::Failed);
    assert_eq!(ended.error_kind, Some(RunErrorKind::Script));
    assert!(
        ended
            .error
            .as_deref()
            .is_some_and(|error| error.contains("boom"))
    );
    assert_eq!(h.runner.executions(&run.id), 1);
    bridge.shutdown(Duration::ZERO).await;
}

async fn platform_faults_are_retried_a_bounded_number_of_times(h: Harness) {
    let bridge = h.replica(Harness::config("a")).await;
    let recovers = h.queue(&bridge, "fault-once").await;
    let ended = h.ended(&bridge, &recovers).await;
    assert_eq!(ended.status, RunStatus::Succeeded);
    assert_eq!((ended.attempt, ended.platform_faults), (2, 1));

    let fails = h.queue(&bridge, "fault").await;
    let ended = h.ended(&bridge, &fails).await;
    assert_eq!(ended.status, RunStatus::Failed);
    assert_eq!(ended.error_kind, Some(RunErrorKind::Platform));
    assert_eq!(
        h.runner.executions(&fails.id),
        3,
        "the first try and two retries"
    );
    assert!(
        ended
            .error
            .as_deref()
            .is_some_and(|error| error.contains("went away"))
    );
    bridge.shutdown(Duration::ZERO).await;
}

async fn a_cancel_stops_a_running_run(h: Harness) {
    let bridge = h.replica(Harness::config("a")).await;
    let run = h.queue(&bridge, "block").await;
    h.running(&bridge, &run).await;
    assert_eq!(
        bridge.cancel(&run.id).await.expect("cancel"),
        Some(CancelOutcome::Requested)
    );
    let ended = h.ended(&bridge, &run).await;
    assert_eq!(ended.status, RunStatus::Cancelled);
    assert_eq!(
        bridge.cancel(&run.id).await.expect("cancel"),
        Some(CancelOutcome::AlreadyEnded),
        "an ended run keeps its outcome"
    );
    bridge.shutdown(Duration::ZERO).await;
}

async fn a_cancel_taken_by_another_replica_stops_the_run(h: Harness) {
    let running_here = h.replica(Harness::config("a")).await;
    let other = h.idle("b").await;
    let run = h.queue(&running_here, "block").await;
    h.running(&running_here, &run).await;
    assert_eq!(
        other.cancel(&run.id).await.expect("cancel"),
        Some(CancelOutcome::Requested)
    );
    let ended = h.ended(&other, &run).await;
    assert_eq!(ended.status, RunStatus::Cancelled);
    running_here.shutdown(Duration::ZERO).await;
    other.shutdown(Duration::ZERO).await;
}

/// A cancel acknowledged through another replica, which the running replica never
/// hears (its notifications are lost, its next renewal an hour away), wins over the
/// success the run then reports: the ending statement records it cancelled, and
/// its audit row says so.
async fn an_unheard_cancel_wins_over_the_runs_own_ending(h: Harness) {
    let deaf = docket_catalog::scripts::testing::FlakyScripts::deaf(
        h.database.connect().await.script_store(),
    );
    let running_here = RunBridge::new(
        Arc::new(deaf),
        Some(Arc::clone(&h.writer)),
        Arc::clone(&h.runner) as Arc<dyn ScriptRunner>,
        BridgeConfig {
            heartbeat_interval: Duration::from_secs(3600),
            lease: Duration::from_secs(7200),
            ..Harness::config("a")
        },
    );
    running_here.start();
    let other = h.idle("b").await;
    let run = h.queue(&running_here, "gated").await;
    h.running(&running_here, &run).await;
    assert_eq!(
        other.cancel(&run.id).await.expect("cancel"),
        Some(CancelOutcome::Requested)
    );
    h.runner.release.notify_one();
    let ended = h.ended(&other, &run).await;
    assert_eq!(ended.status, RunStatus::Cancelled, "{ended:?}");
    assert_eq!((ended.result, ended.error), (None, None));
    let row = patiently("the run's audit row", async {
        loop {
            let rows = h
                .audit
                .audit_for_tool("run_script", 10)
                .await
                .expect("audit");
            if let Some(row) = rows
                .into_iter()
                .find(|row| row.context.arguments["run_id"] == json!(run.id))
            {
                return row;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(row.outcome, "cancelled");
    running_here.shutdown(Duration::ZERO).await;
    other.shutdown(Duration::ZERO).await;
}

async fn a_queued_run_cancelled_ends_at_once(h: Harness) {
    let idle = h.idle("a").await;
    let run = h.queue(&idle, "ok").await;
    let Some(CancelOutcome::Ended(ended)) = idle.cancel(&run.id).await.expect("cancel") else {
        panic!("a queued run ends at once");
    };
    assert_eq!(ended.status, RunStatus::Cancelled);
    assert_eq!(h.runner.executions(&run.id), 0);
    idle.shutdown(Duration::ZERO).await;
}

async fn shutdown_releases_a_running_run_to_the_queue(h: Harness) {
    let bridge = h.replica(Harness::config("a")).await;
    let run = h.queue(&bridge, "block").await;
    h.running(&bridge, &run).await;
    patiently("shutdown", bridge.shutdown(Duration::ZERO)).await;
    let (released, _) = h.store.run(&run.id).await.expect("get").expect("present");
    assert_eq!(released.status, RunStatus::Queued);
    assert_eq!(released.platform_faults, 0, "a release is not a fault");
    assert!(released.lease_owner.is_none());
    assert!(matches!(
        bridge.enqueue(new_run_for(&h, &run).await).await,
        Err(docket_run_bridge::BridgeError::Draining)
    ));
}

async fn new_run_for(h: &Harness, run: &Run) -> docket_catalog::scripts::NewRun {
    let script = h
        .store
        .script(&run.script_id)
        .await
        .expect("get")
        .expect("present");
    new_run(&script, "bob")
}

async fn a_dead_workers_run_is_reclaimed_when_its_lease_expires(h: Harness) {
    let idle = h.idle("idle").await;
    let run = h.queue(&idle, "ok").await;
    // A worker takes the run and dies: nothing renews its short lease.
    let dead = h
        .store
        .claim("dead-replica/w0", Duration::from_millis(50), u32::MAX)
        .await
        .expect("claim")
        .expect("the run");
    assert_eq!(dead.id, run.id);
    let survivor = h.replica(Harness::config("survivor")).await;
    let ended = h.ended(&survivor, &run).await;
    assert_eq!(ended.status, RunStatus::Succeeded);
    assert_eq!(
        (ended.attempt, ended.platform_faults, ended.reclaims),
        (2, 0, 1)
    );
    survivor.shutdown(Duration::ZERO).await;
    idle.shutdown(Duration::ZERO).await;
}

/// A run whose workers keep vanishing (a source that takes its replica down)
/// is taken over `max_reclaims` times, then ends failed without running again.
async fn a_run_that_keeps_stopping_its_worker_is_not_started_again(h: Harness) {
    let idle = h.idle("idle").await;
    let run = h.queue(&idle, "ok").await;
    // Three workers in turn take the run and die with it.
    for worker in 0..3 {
        patiently("the dead worker's claim", async {
            loop {
                if let Some(claimed) = h
                    .store
                    .claim(
                        &format!("dead-{worker}/w0"),
                        Duration::from_millis(20),
                        u32::MAX,
                    )
                    .await
                    .expect("claim")
                {
                    assert_eq!(claimed.id, run.id);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let survivor = h
        .replica(BridgeConfig {
            max_reclaims: 2,
            ..Harness::config("survivor")
        })
        .await;
    let ended = h.ended(&survivor, &run).await;
    assert_eq!(ended.status, RunStatus::Failed);
    assert_eq!(ended.reclaims, 3);
    assert_eq!(
        ended.error.as_deref(),
        Some("the run stopped its worker 3 times; it is not started again")
    );
    assert_eq!(h.runner.executions(&run.id), 0, "the source never ran");
    survivor.shutdown(Duration::ZERO).await;
    idle.shutdown(Duration::ZERO).await;
}

/// Access that ends, ends for runs too: when a worker starts a run (queued, or
/// taken back from a dead worker), an owner who no longer exists fails it
/// without running it, and an owner whose roles were cut gets a run acting
/// only with the saved roles they still hold.
async fn a_run_starts_only_with_what_its_owner_still_holds(h: Harness) {
    let idle = h.idle("idle").await;
    let gone = h.queue(&idle, "ok").await;
    let reclaimed = h.queue(&idle, "ok").await;
    // A worker takes the second run and dies with it while the owner still exists.
    // It takes the first on the way (the oldest due run comes first); its lease is
    // long enough that the first is not due again while the loop runs, however
    // loaded the machine (a short one had it reclaimed over and over, past the
    // reclaim limit), and short enough for the survivor to take both soon after.
    patiently("the dead worker's claim", async {
        while h
            .store
            .claim("dead-replica/w0", Duration::from_secs(3), u32::MAX)
            .await
            .expect("claim")
            .is_none_or(|claimed| claimed.id != reclaimed.id)
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    // And a schedule fires, queueing a run on the same terms.
    let scheduled = {
        let (script, _) = h
            .store
            .create_script(new_script("alice", "nightly"), u32::MAX)
            .await
            .expect("create");
        let fire_time = time::macros::datetime!(2026-06-01 04:00 UTC);
        h.store
            .set_schedule(
                NewSchedule {
                    script_id: script.id.clone(),
                    cron: "0 4 * * *".into(),
                    timezone: "UTC".into(),
                    args: json!({}),
                    next_fire_at: fire_time,
                    set_by: "alice".into(),
                },
                u32::MAX,
            )
            .await
            .expect("schedule");
        let fired = h
            .store
            .fire_schedule(Fire {
                script_id: script.id.clone(),
                expected_next_fire_at: fire_time,
                fire_time,
                missed: 0,
                next_fire_at: time::macros::datetime!(2026-06-02 04:00 UTC),
                fired_by: "idle".into(),
                run: Some(new_run(&script, "alice")),
            })
            .await
            .expect("fire");
        let FireOutcome::Queued(run) = fired else {
            panic!("the fire queued no run: {fired:?}");
        };
        *run
    };
    h.runner.set_owner(
        "alice",
        OwnerAccess::Refused("the script's owner alice no longer exists".into()),
    );
    let survivor = h.replica(Harness::config("survivor")).await;
    for run in [&gone, &reclaimed, &scheduled] {
        let ended = h.ended(&survivor, run).await;
        assert_eq!(ended.status, RunStatus::Failed);
        assert_eq!(ended.error_kind, Some(RunErrorKind::Script));
        assert_eq!(
            ended.error.as_deref(),
            Some("the script's owner alice no longer exists")
        );
        assert_eq!(h.runner.executions(&run.id), 0, "the source never ran");
    }

    // Cut to one of the two roles the version saved.
    h.runner.set_owner(
        "alice",
        OwnerAccess::Holds(vec!["analyst".into(), "viewer".into()]),
    );
    let cut = h.queue(&survivor, "ok").await;
    assert_eq!(h.ended(&survivor, &cut).await.status, RunStatus::Succeeded);
    assert_eq!(h.runner.roles(&cut.id), Some(vec!["analyst".to_owned()]));
    survivor.shutdown(Duration::ZERO).await;
    idle.shutdown(Duration::ZERO).await;
}

/// One owner's queue cannot starve another's: with two workers and a share of
/// one running run per owner, alice's first run holds one worker while her
/// others wait, and bob's run, queued after them all, starts on the other.
async fn a_full_queue_of_one_owner_leaves_a_worker_to_another(h: Harness) {
    let bridge = h
        .replica(BridgeConfig {
            workers: 2,
            max_running_per_owner: 1,
            ..Harness::config("shared")
        })
        .await;
    let mut alices = Vec::new();
    for _ in 0..4 {
        alices.push(h.queue_for(&bridge, "alice", "block").await);
    }
    let bobs = h.queue_for(&bridge, "bob", "ok").await;
    let ended = h.ended(&bridge, &bobs).await;
    assert_eq!(ended.status, RunStatus::Succeeded);
    // Her oldest run was claimed before bob's; it may still be on its way to
    // the runner.
    h.running(&bridge, &alices[0]).await;
    let started: Vec<u32> = alices
        .iter()
        .map(|run| h.runner.executions(&run.id))
        .collect();
    assert_eq!(started, vec![1, 0, 0, 0], "alice holds one worker, no more");
    for run in &alices {
        bridge.cancel(&run.id).await.expect("cancel");
    }
    bridge.shutdown(Duration::ZERO).await;
}

/// A run that ends while its worker cannot reach the database keeps its outcome:
/// the ending is written once the database answers again, and the run is not
/// taken again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ends_during_a_database_outage_keeps_its_outcome_on_postgres() {
    let Some(database) = TestDatabase::postgres(&postgres_server()).await else {
        return;
    };
    let h = Harness::new(database).await;
    let proxy = FaultProxy::start(h.database.server_authority().expect("postgres")).await;
    let idle = h.idle("idle").await;
    let worker = h.replica_through(&proxy, Harness::config("worker")).await;
    let run = h.queue(&idle, "gated").await;
    h.running(&worker, &run).await;
    proxy.cut(Duration::from_secs(3));
    // The run ends now, while the database is out of reach.
    h.runner.release.notify_one();
    let ended = h.ended(&idle, &run).await;
    assert_eq!(ended.status, RunStatus::Succeeded, "{ended:?}");
    assert_eq!(ended.result, Some(json!("released")));
    assert_eq!(ended.attempt, 1, "the run was not taken again");
    assert_eq!(h.runner.executions(&run.id), 1);
    worker.shutdown(Duration::ZERO).await;
    idle.shutdown(Duration::ZERO).await;
}

async fn a_worker_that_lost_its_lease_writes_nothing(h: Harness) {
    let bridge = h
        .replica(BridgeConfig {
            lease: Duration::from_millis(50),
            heartbeat_interval: Duration::from_millis(400),
            ..Harness::config("slow")
        })
        .await;
    let run = h.queue(&bridge, "block").await;
    h.running(&bridge, &run).await;
    // The lease runs out before the worker renews it; another worker takes it.
    let thief = patiently("the reclaim", async {
        loop {
            if let Some(run) = h
                .store
                .claim("thief", Duration::from_secs(600), u32::MAX)
                .await
                .expect("claim")
            {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert_eq!(thief.attempt, 2);
    patiently("the old worker to stop", async {
        while bridge.executing_count() > 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let (read, _) = h.store.run(&run.id).await.expect("get").expect("present");
    assert_eq!(read.status, RunStatus::Running);
    assert_eq!(read.lease_owner.as_deref(), Some("thief"));
    assert_eq!(read.attempt, 2);
    bridge.shutdown(Duration::ZERO).await;
}

async fn two_replicas_share_one_queue_and_run_each_run_once(h: Harness) {
    let config = |name| BridgeConfig {
        workers: 2,
        ..Harness::config(name)
    };
    let a = h.replica(config("a")).await;
    let b = h.replica(config("b")).await;
    let mut runs = Vec::new();
    for index in 0..10 {
        let bridge = if index % 2 == 0 { &a } else { &b };
        runs.push(h.queue(bridge, "ok").await);
    }
    for run in &runs {
        assert_eq!(h.ended(&a, run).await.status, RunStatus::Succeeded);
        assert_eq!(h.runner.executions(&run.id), 1);
    }
    a.shutdown(Duration::ZERO).await;
    b.shutdown(Duration::ZERO).await;
}

/// A bridge keeping ended runs 1 ms, and a run of it that ended longer ago than that.
async fn a_run_past_its_retention(h: &Harness) -> (Arc<RunBridge>, Run) {
    let bridge = h
        .replica(BridgeConfig {
            run_retention: Duration::from_millis(1),
            ..Harness::config("a")
        })
        .await;
    let run = h.queue(&bridge, "ok").await;
    h.ended(&bridge, &run).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    (bridge, run)
}

async fn retention_deletes_runs_after_they_finished(h: Harness) {
    let (bridge, run) = a_run_past_its_retention(&h).await;
    // The pass the bridge runs as it starts may still be under way on a busy machine
    // (its first statement waiting for a connection) and take the run first: either
    // pass deletes it, and no pass deletes more than it.
    assert!(bridge.delete_expired_runs().await <= 1);
    assert!(h.store.run(&run.id).await.expect("get").is_none());
    assert_eq!(bridge.delete_expired_runs().await, 0);
    bridge.shutdown(Duration::ZERO).await;
}

/// A bridge that is stopping runs no more retention: its shutdown waits for its pass, and
/// must not wait for a backlog, which the next pass (on any replica) takes up.
async fn a_stopping_bridge_leaves_retention_to_the_next_pass(h: Harness) {
    let (bridge, run) = a_run_past_its_retention(&h).await;
    bridge.shutdown(Duration::ZERO).await;
    // The pass the bridge ran as it started may have taken the run already; either way
    // a stopped bridge deletes nothing more.
    let existed = h.store.run(&run.id).await.expect("get").is_some();
    assert_eq!(bridge.delete_expired_runs().await, 0);
    assert_eq!(h.store.run(&run.id).await.expect("get").is_some(), existed);
}

async fn a_run_reads_as_its_task(h: Harness) {
    let idle = h.idle("a").await;
    let run = h.queue(&idle, "ok").await;
    let (queued, now) = h.store.run(&run.id).await.expect("get").expect("present");
    let retention = Duration::from_secs(86_400);
    let task = run_task(&queued, now, retention, 500, None);
    assert_eq!(task.id.as_str(), run.id);
    assert_eq!(task.status, TaskStatus::Working);
    assert_eq!(task.status_message.as_deref(), Some("queued"));
    assert_eq!(task.ttl_ms(), None, "unlimited while unfinished");
    assert_eq!(task.owner, "bob");
    assert_eq!(task.extra_follower.as_deref(), Some("alice"));
    assert!(!task.view(now, Duration::from_secs(30)).stale);

    let mut running = queued.clone();
    running.status = RunStatus::Running;
    running.host_calls = 12;
    let task = run_task(&running, now, retention, 500, None);
    assert_eq!(
        task.status_message.as_deref(),
        Some("running, 12 tool calls")
    );

    let Some(CancelOutcome::Ended(cancelled)) = idle.cancel(&run.id).await.expect("cancel") else {
        panic!("ended");
    };
    let task = run_task(&cancelled, now, retention, 500, None);
    assert_eq!(task.status, TaskStatus::Cancelled);
    let finished = cancelled.finished_at.expect("finished");
    assert_eq!(
        task.ttl_ms(),
        u64::try_from(
            ((finished - cancelled.created_at) + time::Duration::days(1)).whole_milliseconds()
        )
        .ok()
    );

    let mut succeeded = cancelled.clone();
    succeeded.status = RunStatus::Succeeded;
    let result = json!({"content": [], "isError": false});
    let task = run_task(&succeeded, now, retention, 500, Some(result.clone()));
    assert_eq!(
        (task.status, task.result),
        (TaskStatus::Completed, Some(result.clone()))
    );

    let mut script_error = succeeded.clone();
    script_error.status = RunStatus::Failed;
    script_error.error_kind = Some(RunErrorKind::Script);
    let task = run_task(&script_error, now, retention, 500, Some(result.clone()));
    assert_eq!(task.status, TaskStatus::Completed);

    let mut fault = script_error.clone();
    fault.error_kind = Some(RunErrorKind::Platform);
    fault.error = Some("gave up".into());
    let task = run_task(&fault, now, retention, 500, Some(result));
    assert_eq!(task.status, TaskStatus::Failed);
    assert!(task.result.is_none());
    assert_eq!(
        task.error.map(|error| error.message),
        Some("gave up".into())
    );
    idle.shutdown(Duration::ZERO).await;
}

macro_rules! suite {
    ($make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some(database) = $make else {
                    return;
                };
                super::$name(Harness::new(database).await).await;
            }
        )*
    };
}

macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod postgres {
            use super::Harness;
            suite!(TestDatabase::postgres(&super::postgres_server()).await; $($name),*);
            use docket_storage::test_db::TestDatabase;
        }
        mod sqlite {
            use super::Harness;
            suite!(Some(TestDatabase::sqlite().await); $($name),*);
            use docket_storage::test_db::TestDatabase;
        }
    };
}

both_backends!(
    a_run_is_claimed_executed_and_audited,
    script_errors_are_never_retried,
    platform_faults_are_retried_a_bounded_number_of_times,
    a_cancel_stops_a_running_run,
    a_cancel_taken_by_another_replica_stops_the_run,
    an_unheard_cancel_wins_over_the_runs_own_ending,
    a_queued_run_cancelled_ends_at_once,
    shutdown_releases_a_running_run_to_the_queue,
    a_dead_workers_run_is_reclaimed_when_its_lease_expires,
    a_run_that_keeps_stopping_its_worker_is_not_started_again,
    a_run_starts_only_with_what_its_owner_still_holds,
    a_full_queue_of_one_owner_leaves_a_worker_to_another,
    a_worker_that_lost_its_lease_writes_nothing,
    two_replicas_share_one_queue_and_run_each_run_once,
    retention_deletes_runs_after_they_finished,
    a_stopping_bridge_leaves_retention_to_the_next_pass,
    a_run_reads_as_its_task,
    two_replicas_fire_each_time_once_through_a_simulated_hour,
    a_disabled_script_stops_its_schedule,
    the_scheduler_loop_follows_a_driven_clock_and_wakes_a_worker,
    a_clock_that_moves_during_a_pass_is_not_waited_again,
    a_clock_that_moves_as_the_loop_starts_to_wait_is_not_waited_again,
    a_schedule_that_cannot_fire_is_disabled,
);

mod schedules {
    //! Schedules over real stores with a driven clock: two replicas'
    //! schedulers firing one schedule through a simulated hour produce one
    //! fire per fire time, record overlaps, and recover from an outage with
    //! one fire and the count missed.

    use std::collections::{BTreeMap, HashSet};
    use std::sync::Arc;
    use std::time::Duration;

    use docket_catalog::scripts::testing::{new_script, succeeded};
    use docket_catalog::scripts::{
        FireStatus, NewSchedule, RunFilter, RunStatus, RunTrigger, ScriptChange, ScriptStore,
    };
    use docket_run_bridge::Scheduler;
    use docket_run_bridge::cadence::Cadence;
    use docket_run_bridge::clock::{Clock, ManualClock};
    use serde_json::json;
    use time::OffsetDateTime;
    use time::macros::datetime;

    use super::Harness;

    const START: OffsetDateTime = datetime!(2026-06-01 03:59:30 UTC);

    /// Ends every queued run of the store, as a worker would.
    async fn finish_queued(store: &Arc<dyn ScriptStore>) -> usize {
        let mut finished = 0;
        while let Some(run) = store
            .claim("test-worker", Duration::from_secs(600), u32::MAX)
            .await
            .expect("claim")
        {
            let lease = run.lease().expect("leased");
            assert_eq!(
                store
                    .finish(&lease, succeeded(json!({})))
                    .await
                    .expect("finish"),
                Some(RunStatus::Succeeded)
            );
            finished += 1;
        }
        finished
    }

    pub(super) async fn two_replicas_fire_each_time_once_through_a_simulated_hour(h: Harness) {
        let clock = Arc::new(ManualClock::new(START));
        let replica_a = Scheduler::new(
            h.database.connect().await.script_store(),
            Arc::clone(&clock) as Arc<dyn Clock>,
            "a",
        );
        let replica_b = Scheduler::new(
            h.database.connect().await.script_store(),
            Arc::clone(&clock) as Arc<dyn Clock>,
            "b",
        );
        let (script, _) = h
            .store
            .create_script(new_script("alice", "minutely"), u32::MAX)
            .await
            .expect("create");
        let cadence = Cadence::parse("* * * * *", "UTC").expect("cron");
        h.store
            .set_schedule(
                NewSchedule {
                    script_id: script.id.clone(),
                    cron: "* * * * *".into(),
                    timezone: "UTC".into(),
                    args: json!({"day": "${fire_date}"}),
                    next_fire_at: cadence.first_after(clock.now()).expect("fires"),
                    set_by: "alice".into(),
                },
                u32::MAX,
            )
            .await
            .expect("schedule");

        // Each loop minute m moves the clock past the fire time 04:00 + (m - 1)
        // minutes. The run of 04:19 stays open through loop minutes 20 and 21,
        // so the fires of 04:20 and 04:21 overlap it. In loop minutes 40 to 49
        // no replica runs (an outage): at minute 50 the fire of 04:49 stands
        // for the ten before it.
        let (mut queued, mut skipped, mut lost, mut missed) = (0, 0, 0, 0);
        for minute in 1..=60 {
            clock.advance(Duration::from_secs(60));
            if (40..50).contains(&minute) {
                continue;
            }
            let (a, b) = tokio::join!(replica_a.tick(), replica_b.tick());
            for report in [a.expect("tick a"), b.expect("tick b")] {
                queued += report.queued.len();
                skipped += report.skipped_overlap;
                lost += report.lost;
                missed += report.missed;
                for run in &report.queued {
                    assert_eq!(run.trigger, RunTrigger::Schedule);
                    assert_eq!(run.params, json!({"day": "2026-06-01"}));
                    assert_eq!(run.requested_by, "");
                }
            }
            if !(20..22).contains(&minute) {
                finish_queued(&h.store).await;
            }
        }
        // 60 fire times, 10 of them missed during the outage: 50 fires.
        assert_eq!(queued + skipped, 50, "one fire per fire time");
        assert_eq!(skipped, 2, "04:20 and 04:21 overlapped the run of 04:19");
        assert_eq!(missed, 10);
        assert!(lost <= 50, "the replica that lost a race wrote nothing");

        let fires = h
            .store
            .schedule_fires(&script.id, 1000)
            .await
            .expect("fires");
        assert_eq!(fires.len(), 50);
        let times: HashSet<OffsetDateTime> = fires.iter().map(|fire| fire.fire_time).collect();
        assert_eq!(times.len(), 50, "each fire time is recorded once");
        let by_time: BTreeMap<OffsetDateTime, _> = fires
            .iter()
            .map(|fire| (fire.fire_time, (fire.status, fire.missed)))
            .collect();
        let at = |minute: i64| datetime!(2026-06-01 04:00 UTC) + time::Duration::minutes(minute);
        assert_eq!(by_time[&at(19)].0, FireStatus::Queued);
        assert_eq!(by_time[&at(20)].0, FireStatus::SkippedOverlap);
        assert_eq!(by_time[&at(21)].0, FireStatus::SkippedOverlap);
        assert_eq!(by_time[&at(22)].0, FireStatus::Queued);
        assert!(
            !by_time.contains_key(&at(45)),
            "missed fire times do not fire"
        );
        assert_eq!(by_time[&at(49)], (FireStatus::Queued, 10));
        assert!(
            fires
                .iter()
                .all(|fire| ["a", "b"].contains(&fire.fired_by.as_str()))
        );

        let runs = h
            .store
            .list_runs(
                &RunFilter {
                    script_id: Some(script.id.clone()),
                    ..RunFilter::default()
                },
                50,
            )
            .await
            .expect("runs");
        assert_eq!(runs.len(), 48, "one run per queued fire");
        let run_times: HashSet<OffsetDateTime> =
            runs.iter().filter_map(|run| run.fire_time).collect();
        assert_eq!(run_times.len(), 48, "no fire time has two runs");
        assert!(runs.iter().all(|run| run.status == RunStatus::Succeeded));
        let schedule = h
            .store
            .schedule(&script.id)
            .await
            .expect("read")
            .expect("set");
        assert_eq!(schedule.missed_fires, 10);
        assert_eq!(schedule.last_fire_at, Some(at(59)));
        assert_eq!(schedule.next_fire_at, at(60));
    }

    pub(super) async fn a_disabled_script_stops_its_schedule(h: Harness) {
        let clock = Arc::new(ManualClock::new(START));
        let scheduler = Scheduler::new(
            Arc::clone(&h.store),
            Arc::clone(&clock) as Arc<dyn Clock>,
            "a",
        );
        let (script, _) = h
            .store
            .create_script(new_script("alice", "paused"), u32::MAX)
            .await
            .expect("create");
        h.store
            .set_schedule(
                NewSchedule {
                    script_id: script.id.clone(),
                    cron: "*/5 * * * *".into(),
                    timezone: "Europe/Berlin".into(),
                    args: json!({}),
                    next_fire_at: datetime!(2026-06-01 04:00 UTC),
                    set_by: "alice".into(),
                },
                u32::MAX,
            )
            .await
            .expect("schedule");
        h.store
            .update_script(
                &script.id,
                ScriptChange {
                    enabled: Some(false),
                    editor: "alice".into(),
                    ..ScriptChange::default()
                },
            )
            .await
            .expect("disable")
            .expect("exists");
        clock.advance(Duration::from_secs(20 * 60));
        let report = scheduler.tick().await.expect("tick");
        assert!(report.queued.is_empty());
        assert_eq!(report.advanced, 1);
        let schedule = h
            .store
            .schedule(&script.id)
            .await
            .expect("read")
            .expect("set");
        assert_eq!(schedule.next_fire_at, datetime!(2026-06-01 04:20 UTC));
        assert_eq!(
            schedule.missed_fires, 0,
            "a stopped schedule misses nothing"
        );
        assert!(
            h.store
                .schedule_fires(&script.id, 10)
                .await
                .expect("fires")
                .is_empty()
        );
        // Enabled again, it fires at the next regular time, not the past ones.
        h.store
            .update_script(
                &script.id,
                ScriptChange {
                    enabled: Some(true),
                    editor: "alice".into(),
                    ..ScriptChange::default()
                },
            )
            .await
            .expect("enable")
            .expect("exists");
        assert!(scheduler.tick().await.expect("tick").queued.is_empty());
        clock.advance(Duration::from_secs(60));
        let report = scheduler.tick().await.expect("tick");
        assert_eq!(report.queued.len(), 1);
        assert_eq!(
            report.queued[0].fire_time,
            Some(datetime!(2026-06-01 04:20 UTC))
        );
        assert_eq!(report.missed, 0);
    }

    pub(super) async fn a_schedule_that_cannot_fire_is_disabled(h: Harness) {
        let clock = Arc::new(ManualClock::new(START));
        let scheduler = Scheduler::new(
            Arc::clone(&h.store),
            Arc::clone(&clock) as Arc<dyn Clock>,
            "a",
        );
        let (script, _) = h
            .store
            .create_script(new_script("alice", "stored-elsewhere"), u32::MAX)
            .await
            .expect("create");
        // An expression that no longer parses (stored by another version, say).
        h.store
            .set_schedule(
                NewSchedule {
                    script_id: script.id.clone(),
                    cron: "every full moon".into(),
                    timezone: "UTC".into(),
                    args: json!({}),
                    next_fire_at: datetime!(2026-06-01 04:00 UTC),
                    set_by: "alice".into(),
                },
                u32::MAX,
            )
            .await
            .expect("schedule");
        clock.advance(Duration::from_secs(60));
        let report = scheduler.tick().await.expect("tick");
        assert!(report.queued.is_empty());
        let schedule = h
            .store
            .schedule(&script.id)
            .await
            .expect("read")
            .expect("set");
        assert!(!schedule.enabled, "it no longer blocks the due schedules");
        assert!(
            h.store
                .due_schedules(clock.now(), 10)
                .await
                .expect("due")
                .is_empty()
        );
    }

    /// When [`MovesOnce`] moves.
    #[derive(Clone, Copy, PartialEq, Eq)]
    pub(super) enum MoveAt {
        /// Just after the clock is first read: while the first pass runs.
        FirstRead,
        /// As the loop starts its first wait: after the pass, before the sleep
        /// reads the clock.
        FirstSleep,
    }

    /// A manual clock that moves 45 s forward once, at a chosen point of the
    /// scheduler loop: each interleaving forced, none hoped for.
    struct MovesOnce {
        inner: ManualClock,
        at: MoveAt,
        moved: std::sync::atomic::AtomicBool,
    }

    impl MovesOnce {
        fn move_if(&self, at: MoveAt) {
            if self.at == at && !self.moved.swap(true, std::sync::atomic::Ordering::SeqCst) {
                self.inner.advance(Duration::from_secs(45));
            }
        }
    }

    #[async_trait::async_trait]
    impl Clock for MovesOnce {
        fn now(&self) -> OffsetDateTime {
            let now = self.inner.now();
            self.move_if(MoveAt::FirstRead);
            now
        }

        async fn sleep_until(&self, deadline: OffsetDateTime) {
            self.move_if(MoveAt::FirstSleep);
            self.inner.sleep_until(deadline).await;
        }
    }

    /// The regression, both ways: a pass that read the time just before the clock
    /// moved past a fire time found nothing, and the loop then waited a whole
    /// interval from the moved time — for a clock that moved no more, forever. It
    /// was lost when the clock moved during the pass, and (found by a busy CI run)
    /// when it moved between the pass's end and the wait's own reading.
    pub(super) async fn a_clock_that_moves_is_not_waited_again(h: Harness, at: MoveAt) {
        let mut script = new_script("alice", "moved");
        script.source = "ok".into();
        let (script, _) = h
            .store
            .create_script(script, u32::MAX)
            .await
            .expect("create");
        h.store
            .set_schedule(
                NewSchedule {
                    script_id: script.id.clone(),
                    cron: "* * * * *".into(),
                    timezone: "UTC".into(),
                    args: json!({}),
                    next_fire_at: datetime!(2026-06-01 04:00 UTC),
                    set_by: "alice".into(),
                },
                u32::MAX,
            )
            .await
            .expect("schedule");
        let clock = Arc::new(MovesOnce {
            inner: ManualClock::new(START),
            at,
            moved: std::sync::atomic::AtomicBool::new(false),
        });
        let scheduler = Arc::new(Scheduler::new(
            Arc::clone(&h.store),
            clock as Arc<dyn Clock>,
            "replica-a",
        ));
        let stop = tokio_util::sync::CancellationToken::new();
        let looping = tokio::spawn(scheduler.run(Duration::from_secs(10), stop.clone()));
        let run = super::patiently("the fire after the clock moved", async {
            loop {
                let runs = h
                    .store
                    .list_runs(
                        &RunFilter {
                            script_id: Some(script.id.clone()),
                            ..RunFilter::default()
                        },
                        10,
                    )
                    .await
                    .expect("runs");
                if let Some(run) = runs.into_iter().next() {
                    return run;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert_eq!(run.fire_time, Some(datetime!(2026-06-01 04:00 UTC)));
        stop.cancel();
        looping.await.expect("the loop ends when stopped");
    }

    pub(super) async fn the_scheduler_loop_follows_a_driven_clock_and_wakes_a_worker(h: Harness) {
        let clock = Arc::new(ManualClock::new(START));
        let bridge = docket_run_bridge::RunBridge::with_clock(
            h.database.connect().await.script_store(),
            Some(Arc::clone(&h.writer)),
            Arc::clone(&h.runner) as Arc<dyn docket_run_bridge::ScriptRunner>,
            docket_run_bridge::BridgeConfig {
                schedule_interval: Some(Duration::from_secs(10)),
                ..Harness::config("looping")
            },
            Arc::clone(&clock) as Arc<dyn Clock>,
        );
        bridge.start();
        let mut script = new_script("alice", "looped");
        script.source = "ok".into();
        let (script, _) = h
            .store
            .create_script(script, u32::MAX)
            .await
            .expect("create");
        h.store
            .set_schedule(
                NewSchedule {
                    script_id: script.id.clone(),
                    cron: "* * * * *".into(),
                    timezone: "UTC".into(),
                    args: json!({}),
                    next_fire_at: datetime!(2026-06-01 04:00 UTC),
                    set_by: "alice".into(),
                },
                u32::MAX,
            )
            .await
            .expect("schedule");
        clock.advance(Duration::from_secs(45));
        let run = super::patiently("the scheduled run", async {
            loop {
                let runs = h
                    .store
                    .list_runs(
                        &RunFilter {
                            script_id: Some(script.id.clone()),
                            status: Some(RunStatus::Succeeded),
                            ..RunFilter::default()
                        },
                        10,
                    )
                    .await
                    .expect("runs");
                if let Some(run) = runs.into_iter().next() {
                    return run;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert_eq!(run.trigger, RunTrigger::Schedule);
        assert_eq!(run.fire_time, Some(datetime!(2026-06-01 04:00 UTC)));
        // Its audit row says it was scheduled.
        let row = super::patiently("the run's audit row", async {
            loop {
                let rows = h
                    .audit
                    .audit_for_tool("run_script", 10)
                    .await
                    .expect("audit");
                if let Some(row) = rows
                    .into_iter()
                    .find(|row| row.context.arguments["run_id"] == json!(run.id))
                {
                    return row;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        assert_eq!(row.context.arguments["trigger"], json!("schedule"));
        bridge.shutdown(Duration::ZERO).await;
    }
}

async fn two_replicas_fire_each_time_once_through_a_simulated_hour(h: Harness) {
    schedules::two_replicas_fire_each_time_once_through_a_simulated_hour(h).await;
}

async fn a_disabled_script_stops_its_schedule(h: Harness) {
    schedules::a_disabled_script_stops_its_schedule(h).await;
}

async fn the_scheduler_loop_follows_a_driven_clock_and_wakes_a_worker(h: Harness) {
    schedules::the_scheduler_loop_follows_a_driven_clock_and_wakes_a_worker(h).await;
}

async fn a_clock_that_moves_during_a_pass_is_not_waited_again(h: Harness) {
    schedules::a_clock_that_moves_is_not_waited_again(h, schedules::MoveAt::FirstRead).await;
}

async fn a_clock_that_moves_as_the_loop_starts_to_wait_is_not_waited_again(h: Harness) {
    schedules::a_clock_that_moves_is_not_waited_again(h, schedules::MoveAt::FirstSleep).await;
}

async fn a_schedule_that_cannot_fire_is_disabled(h: Harness) {
    schedules::a_schedule_that_cannot_fire_is_disabled(h).await;
}
