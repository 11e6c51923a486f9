//! The task runtime over the in-memory store, and the store behaviour suite run
//! against the in-memory store (the database backends run the same suite).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use docket_task::memory::MemoryStore;
use docket_task::runtime::{InputError, RuntimeConfig, SpawnError, TaskRuntime};
use docket_task::store::{AuditEntry, Beat, NewTask, SignalListener, StaleTask, StoreError};
use docket_task::testing::new_task;
use docket_task::{Outcome, TaskError, TaskId, TaskPosition, TaskRecord, TaskStatus, TaskStore};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use tokio::sync::oneshot;

docket_task::store_suite!(async { (Arc::new(MemoryStore::new()) as Arc<dyn TaskStore>, ()) });

/// A store that counts heartbeat statements and otherwise forwards to memory.
#[derive(Default)]
struct CountingStore {
    inner: MemoryStore,
    heartbeats: AtomicUsize,
    /// Status messages carried by the last heartbeat.
    last_messages: AtomicUsize,
}

#[async_trait]
impl TaskStore for CountingStore {
    async fn create(&self, task: NewTask) -> Result<TaskRecord, StoreError> {
        self.inner.create(task).await
    }
    async fn get(&self, id: &TaskId) -> Result<Option<(TaskRecord, OffsetDateTime)>, StoreError> {
        self.inner.get(id).await
    }
    async fn list_followed(
        &self,
        subject: &str,
        after: Option<&TaskPosition>,
        limit: u32,
    ) -> Result<(Vec<TaskRecord>, OffsetDateTime), StoreError> {
        self.inner.list_followed(subject, after, limit).await
    }
    async fn finish(
        &self,
        id: &TaskId,
        outcome: Outcome,
    ) -> Result<Option<TaskStatus>, StoreError> {
        self.inner.finish(id, outcome).await
    }
    async fn request_cancel(&self, id: &TaskId) -> Result<(), StoreError> {
        self.inner.request_cancel(id).await
    }
    async fn heartbeat(&self, replica_id: &str, beats: &[Beat]) -> Result<Vec<TaskId>, StoreError> {
        self.heartbeats.fetch_add(1, Ordering::SeqCst);
        self.last_messages.store(beats.len(), Ordering::SeqCst);
        self.inner.heartbeat(replica_id, beats).await
    }
    async fn mark_draining(&self, replica_id: &str) -> Result<(), StoreError> {
        self.inner.mark_draining(replica_id).await
    }
    async fn require_input(
        &self,
        id: &TaskId,
        requests: Map<String, Value>,
    ) -> Result<bool, StoreError> {
        self.inner.require_input(id, requests).await
    }
    async fn answer_input(
        &self,
        id: &TaskId,
        responses: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        self.inner.answer_input(id, responses).await
    }
    async fn take_answers(&self, id: &TaskId) -> Result<Map<String, Value>, StoreError> {
        self.inner.take_answers(id).await
    }
    async fn fail_stale(&self, stale_after: Duration) -> Result<Vec<StaleTask>, StoreError> {
        self.inner.fail_stale(stale_after).await
    }
    async fn delete_expired(&self, limit: u32) -> Result<Vec<TaskId>, StoreError> {
        self.inner.delete_expired(limit).await
    }
    async fn record_audit(&self, entry: AuditEntry) -> Result<(), StoreError> {
        self.inner.record_audit(entry).await
    }
    async fn audit_for_tool(&self, tool: &str, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        self.inner.audit_for_tool(tool, limit).await
    }
    fn set_signal_listener(&self, listener: SignalListener) {
        // Deliberately dropped: this store delivers signals only through heartbeats,
        // like a database whose notifications were lost.
        let _ = listener;
    }
}

fn config() -> RuntimeConfig {
    RuntimeConfig {
        replica_id: "a".into(),
        ..RuntimeConfig::default()
    }
}

async fn wait_for_status(store: &dyn TaskStore, id: &TaskId, status: TaskStatus) -> TaskRecord {
    // A guard against hanging, not a speed assertion.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (record, _) = store.get(id).await.expect("get").expect("present");
        if record.status == status {
            return record;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task stayed {:?}",
            record.status
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An ending in hand when a drain's grace period runs out, with the store away, is
/// still tried for the ending grace, and written once the store answers: the work's
/// outcome is kept, not lost to the shutdown (it once read "the replica stopped
/// before it finished" although the work had finished). On tokio's paused clock,
/// so the grace runs out before the store comes back however loaded the machine is.
#[tokio::test(start_paused = true)]
async fn an_ending_in_hand_outlives_the_grace_period_while_the_store_is_away() {
    let store = Arc::new(docket_task::memory::FlakyStore::default());
    let runtime = TaskRuntime::new(
        Arc::clone(&store) as Arc<dyn TaskStore>,
        RuntimeConfig {
            ending_grace: Duration::from_secs(30),
            ..config()
        },
    );
    let (release, released) = oneshot::channel::<()>();
    let done = new_task("done_before_the_stop");
    runtime
        .spawn(done.clone(), |_context| async move {
            let _ = released.await;
            Outcome::Completed(json!({"content": [{"type": "text", "text": "finished"}]}))
        })
        .await
        .expect("spawned");
    store.set_failing(true);
    let refused_before = store.refused_calls();
    release.send(()).expect("work waiting");
    while store.refused_calls() == refused_before {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // The drain's 1 s grace runs out with the ending still refused; the store comes
    // back at 5 s, inside the 30 s ending grace.
    let come_back = async {
        tokio::time::sleep(Duration::from_secs(5)).await;
        store.set_failing(false);
    };
    tokio::join!(runtime.drain(Duration::from_secs(1)), come_back);
    let (read, _) = store.get(&done.id).await.expect("get").expect("present");
    assert_eq!(read.status, TaskStatus::Completed, "{read:?}");
}

/// An ending the store keeps refusing is retried for `stale_after`, not forever:
/// then the next beat that reaches the store records the task failed (the
/// replica's beats would keep it alive otherwise). One written as soon as the
/// store answers again keeps its outcome.
#[tokio::test]
async fn an_ending_is_retried_through_an_outage_but_not_forever() {
    let store = Arc::new(docket_task::memory::FlakyStore::default());
    let runtime = TaskRuntime::new(
        Arc::clone(&store) as Arc<dyn TaskStore>,
        RuntimeConfig {
            stale_after: Duration::from_millis(500),
            ..config()
        },
    );
    let (release, released) = oneshot::channel::<()>();
    let kept = new_task("kept");
    runtime
        .spawn(kept.clone(), |_context| async move {
            let _ = released.await;
            Outcome::Completed(json!({"content": []}))
        })
        .await
        .expect("spawned");
    store.set_failing(true);
    let refused_before = store.refused_calls();
    release.send(()).expect("work waiting");
    // The ending reaches the store while it is away; only then does it come back.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while store.refused_calls() == refused_before {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ending never reached the store"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    store.set_failing(false);
    wait_for_status(&*store, &kept.id, TaskStatus::Completed).await;

    let refused = new_task("refused");
    runtime
        .spawn(refused.clone(), |_context| async move {
            Outcome::Completed(json!({"content": []}))
        })
        .await
        .expect("spawned");
    store.set_failing(true);
    // A guard against hanging, not a speed assertion.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while runtime.running_count() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ending was retried forever"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The replica's beat would keep the task alive: the first beat that reaches
    // the store records it failed instead.
    store.set_failing(false);
    let (still, _) = store.get(&refused.id).await.expect("get").expect("present");
    assert_eq!(still.status, TaskStatus::Working);
    runtime.beat().await.expect("heartbeat");
    let (lost, _) = store.get(&refused.id).await.expect("get").expect("present");
    assert_eq!(lost.status, TaskStatus::Failed);
    assert_eq!(lost.error, Some(TaskError::ending_lost()));
}

#[tokio::test]
async fn the_row_is_committed_before_spawn_returns_and_work_completes() {
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    let runtime = TaskRuntime::new(Arc::clone(&store), config());
    let (release, released) = oneshot::channel::<()>();
    let task = new_task("spawn");
    let record = runtime
        .spawn(task.clone(), |_context| async move {
            let _ = released.await;
            Outcome::Completed(json!({"content": [{"type": "text", "text": "done"}]}))
        })
        .await
        .expect("spawned");
    assert_eq!(record.status, TaskStatus::Working);
    let (read, _) = store
        .get(&task.id)
        .await
        .expect("get")
        .expect("committed before spawn returned");
    assert_eq!(read.status, TaskStatus::Working);
    release.send(()).expect("work waiting");
    let done = wait_for_status(&*store, &task.id, TaskStatus::Completed).await;
    assert_eq!(done.result.expect("result")["content"][0]["text"], "done");
}

#[tokio::test]
async fn a_local_cancel_stops_the_work_at_once() {
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    let runtime = TaskRuntime::new(Arc::clone(&store), config());
    let task = new_task("local_cancel");
    runtime
        .spawn(task.clone(), |_context| std::future::pending::<Outcome>())
        .await
        .expect("spawned");
    runtime.cancel(&task.id).await.expect("cancel");
    wait_for_status(&*store, &task.id, TaskStatus::Cancelled).await;
    assert_eq!(runtime.running_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_that_stops_because_of_a_cancel_ends_cancelled() {
    // Work that watches its cancel token and returns its own "stopped" result the
    // moment it fires must still end `cancelled`, on every interleaving.
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    let runtime = TaskRuntime::new(Arc::clone(&store), config());
    for _ in 0..200 {
        let task = new_task("cancel_race");
        runtime
            .spawn(task.clone(), |context| async move {
                let cancel = context.cancelled().clone();
                let stopped = tokio::spawn(async move {
                    cancel.cancelled().await;
                    Outcome::Completed(json!({"content": [], "isError": true}))
                });
                stopped.await.unwrap_or(Outcome::Cancelled)
            })
            .await
            .expect("spawned");
        runtime.cancel(&task.id).await.expect("cancel");
        let ended = wait_for_end(&*store, &task.id).await;
        assert_eq!(ended.status, TaskStatus::Cancelled);
    }
}

async fn wait_for_end(store: &dyn TaskStore, id: &TaskId) -> TaskRecord {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (record, _) = store.get(id).await.expect("get").expect("present");
        if record.status.is_terminal() {
            return record;
        }
        assert!(tokio::time::Instant::now() < deadline, "task never ended");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test]
async fn work_that_finished_first_keeps_its_outcome() {
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    let runtime = TaskRuntime::new(Arc::clone(&store), config());
    let task = new_task("finished_first");
    runtime
        .spawn(task.clone(), |_context| async {
            Outcome::Completed(json!({"content": []}))
        })
        .await
        .expect("spawned");
    wait_for_status(&*store, &task.id, TaskStatus::Completed).await;
    runtime
        .cancel(&task.id)
        .await
        .expect("a cancel after the end is acknowledged");
    let (read, _) = store.get(&task.id).await.expect("get").expect("present");
    assert_eq!(read.status, TaskStatus::Completed);
}

#[tokio::test]
async fn a_cancel_recorded_elsewhere_arrives_with_the_next_heartbeat() {
    let store = Arc::new(CountingStore::default());
    let runtime = TaskRuntime::new(store.clone() as Arc<dyn TaskStore>, config());
    let task = new_task("remote_cancel");
    runtime
        .spawn(task.clone(), |_context| std::future::pending::<Outcome>())
        .await
        .expect("spawned");
    // Another replica records the cancel; no notification reaches this one.
    store.inner.request_cancel(&task.id).await.expect("cancel");
    let (read, _) = store.get(&task.id).await.expect("get").expect("present");
    assert_eq!(
        read.status,
        TaskStatus::Working,
        "without a heartbeat nothing has happened yet"
    );
    runtime.beat().await.expect("heartbeat");
    wait_for_status(&*store, &task.id, TaskStatus::Cancelled).await;
}

/// A cancel acknowledged by another replica while the work runs wins over the
/// result the work returns without having heard it (its replica was not
/// listening): the ending statement records it cancelled, and what the work left
/// for its result is taken back. A task that ends completed keeps what it left.
#[tokio::test]
async fn an_acknowledged_cancel_wins_over_work_that_never_heard_it() {
    let store = Arc::new(CountingStore::default());
    let runtime = TaskRuntime::new(store.clone() as Arc<dyn TaskStore>, config());
    let taken_back = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut releases = Vec::new();
    let mut tasks = Vec::new();
    for name in ["cancelled_unheard", "completed_kept"] {
        let (release, released) = oneshot::channel::<()>();
        let task = new_task(name);
        let taken_back = Arc::clone(&taken_back);
        runtime
            .spawn(task.clone(), move |context| async move {
                let _ = released.await;
                context.undo_unless_completed(async move {
                    taken_back.lock().expect("lock").push(name);
                });
                Outcome::Completed(json!({"content": [{"type": "text", "text": name}]}))
            })
            .await
            .expect("spawned");
        releases.push(release);
        tasks.push(task);
    }
    // Another replica records the cancel; no notification reaches this one, and
    // no beat runs before the work ends.
    store
        .inner
        .request_cancel(&tasks[0].id)
        .await
        .expect("cancel");
    for release in releases {
        release.send(()).expect("the work waits");
    }
    let cancelled = wait_for_end(&*store, &tasks[0].id).await;
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    assert_eq!(cancelled.result, None);
    let completed = wait_for_end(&*store, &tasks[1].id).await;
    assert_eq!(completed.status, TaskStatus::Completed);
    // The drain waits for the work, and the take-backs after its endings.
    runtime.drain(Duration::from_secs(30)).await;
    assert_eq!(*taken_back.lock().expect("lock"), vec!["cancelled_unheard"]);
    let audit = store
        .audit_for_tool("cancelled_unheard", 10)
        .await
        .expect("audit");
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].outcome, "cancelled");
}

/// One statement per beat, whatever the number of tasks; a beat carries only the
/// status messages that changed since the one before.
#[tokio::test]
async fn one_heartbeat_statement_stamps_every_running_task() {
    let store = Arc::new(CountingStore::default());
    let runtime = TaskRuntime::new(store.clone() as Arc<dyn TaskStore>, config());
    let mut ids = Vec::new();
    let (progress, mut told) = tokio::sync::mpsc::unbounded_channel::<()>();
    for index in 0..200 {
        let task = new_task("many");
        ids.push(task.id.clone());
        let progress = progress.clone();
        runtime
            .spawn(task, move |context| async move {
                context.set_status_message("busy");
                if index == 0 {
                    let _ = progress.send(());
                }
                std::future::pending::<Outcome>().await
            })
            .await
            .expect("spawned");
    }
    // The work runs in the order it was spawned: once the first task has
    // reported in and the rest had their turn, every message is set.
    told.recv().await.expect("the first task started");
    tokio::task::yield_now().await;
    runtime.beat().await.expect("heartbeat");
    assert_eq!(
        store.heartbeats.load(Ordering::SeqCst),
        1,
        "one statement for 200 tasks"
    );
    assert_eq!(store.last_messages.load(Ordering::SeqCst), 200);
    let (read, _) = store.get(&ids[0]).await.expect("get").expect("present");
    assert_eq!(read.status_message.as_deref(), Some("busy"));
    runtime.beat().await.expect("heartbeat");
    assert_eq!(store.heartbeats.load(Ordering::SeqCst), 2);
    assert_eq!(
        store.last_messages.load(Ordering::SeqCst),
        0,
        "nothing changed since the last beat"
    );
    runtime.drain(Duration::ZERO).await;
}

/// A replica that drains says so in the store before it waits for its work.
#[tokio::test]
async fn draining_is_recorded_for_the_replica() {
    let store = Arc::new(MemoryStore::new());
    let runtime = TaskRuntime::new(store.clone() as Arc<dyn TaskStore>, config());
    assert!(store.draining_replicas().is_empty());
    runtime.drain(Duration::ZERO).await;
    assert_eq!(store.draining_replicas(), vec!["a".to_owned()]);
}

/// The short work runs while the replica drains and ends when the test lets it,
/// once draining has begun; the long work never ends. The grace period runs on
/// tokio's paused clock, which moves only when every task is waiting, so the short
/// work always gets its turn within the grace however loaded the machine is.
#[tokio::test(start_paused = true)]
async fn draining_lets_short_work_finish_and_fails_long_work() {
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    let runtime = TaskRuntime::new(Arc::clone(&store), config());
    let short = new_task("drain_short");
    let long = new_task("drain_long");
    let (started, short_started) = oneshot::channel::<()>();
    let (finish, short_may_finish) = oneshot::channel::<()>();
    runtime
        .spawn(short.clone(), |_context| async move {
            let _ = started.send(());
            let _ = short_may_finish.await;
            Outcome::Completed(json!({"content": []}))
        })
        .await
        .expect("spawned");
    runtime
        .spawn(long.clone(), |_context| std::future::pending::<Outcome>())
        .await
        .expect("spawned");
    short_started.await.expect("the short work started");
    let release_once_draining = async {
        while !runtime.is_draining() {
            tokio::task::yield_now().await;
        }
        finish.send(()).expect("the short work is waiting");
    };
    tokio::join!(
        runtime.drain(Duration::from_secs(30)),
        release_once_draining
    );
    let (short_read, _) = store.get(&short.id).await.expect("get").expect("present");
    assert_eq!(short_read.status, TaskStatus::Completed);
    let (long_read, _) = store.get(&long.id).await.expect("get").expect("present");
    assert_eq!(long_read.status, TaskStatus::Failed);
    assert!(
        long_read
            .error
            .expect("error")
            .message
            .contains("shut down")
    );
    assert!(matches!(
        runtime
            .spawn(new_task("late"), |_c| async { Outcome::Cancelled })
            .await,
        Err(SpawnError::Draining)
    ));
}

#[tokio::test]
async fn work_can_wait_for_input_answered_through_the_store() {
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    let runtime = TaskRuntime::new(Arc::clone(&store), config());
    let task = new_task("input");
    runtime
        .spawn(task.clone(), |context| async move {
            let mut requests = Map::new();
            requests.insert("confirm".into(), json!({"method": "elicitation/create", "params": {"message": "Sure?", "requestedSchema": {"type": "object"}}}));
            match context.request_input(requests).await {
                Ok(answers) => Outcome::Completed(json!({"content": [{"type": "text", "text": answers["confirm"]["action"]}]})),
                Err(InputError::Cancelled) => Outcome::Cancelled,
                Err(other) => Outcome::Failed(docket_task::TaskError::internal(other.to_string())),
            }
        })
        .await
        .expect("spawned");
    wait_for_status(&*store, &task.id, TaskStatus::InputRequired).await;
    let mut answers = Map::new();
    answers.insert(
        "confirm".into(),
        json!({"action": "accept", "content": {"confirm": true}}),
    );
    store
        .answer_input(&task.id, &answers)
        .await
        .expect("answer");
    let done = wait_for_status(&*store, &task.id, TaskStatus::Completed).await;
    assert_eq!(done.result.expect("result")["content"][0]["text"], "accept");
}

#[tokio::test]
async fn maintenance_fails_tasks_of_a_vanished_replica() {
    // The store reads a clock the test moves, so "older than stale_after" is a
    // step the test takes, not a wait.
    let start = OffsetDateTime::now_utc();
    let elapsed_ms = Arc::new(AtomicUsize::new(0));
    let clock = {
        let elapsed_ms = Arc::clone(&elapsed_ms);
        move || {
            let elapsed = elapsed_ms.load(Ordering::SeqCst);
            start + Duration::from_millis(u64::try_from(elapsed).expect("fits"))
        }
    };
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::with_clock(Box::new(clock)));
    let mut gone = new_task("vanished");
    gone.replica_id = "b".into();
    store.create(gone.clone()).await.expect("create");
    elapsed_ms.store(30, Ordering::SeqCst);
    let runtime = TaskRuntime::new(
        Arc::clone(&store),
        RuntimeConfig {
            stale_after: Duration::from_millis(10),
            ..config()
        },
    );
    // The embedder's tracing is told of each swept task's trace, to join it.
    static JOINED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    fn join(_span: &tracing::Span, trace: &docket_task::TaskTrace) {
        JOINED
            .lock()
            .expect("joined")
            .push(trace.traceparent().to_owned());
    }
    runtime.join_traces_with(join);
    runtime.maintain().await;
    let (read, _) = store.get(&gone.id).await.expect("get").expect("present");
    assert_eq!(read.status, TaskStatus::Failed);
    let audit = store.audit_for_tool("vanished", 10).await.expect("audit");
    assert_eq!(audit.len(), 1);
    let expected = gone.trace_context.as_ref().expect("a trace").traceparent();
    assert_eq!(*JOINED.lock().expect("joined"), vec![expected.to_owned()]);
}

/// A backlog of expired tasks larger than one retention statement is cleared by one
/// maintenance pass, not a statement's worth per `maintenance_interval`; a task
/// that has not expired stays.
#[tokio::test]
async fn one_maintenance_pass_deletes_a_backlog_of_expired_tasks() {
    let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::new());
    let expired_count = 2_345;
    for _ in 0..expired_count {
        let mut expired = new_task("backlog");
        expired.retention = Some(Duration::ZERO);
        store.create(expired).await.expect("create");
    }
    let kept = new_task("backlog");
    store.create(kept.clone()).await.expect("create");
    let runtime = TaskRuntime::new(Arc::clone(&store), config());
    runtime.maintain().await;
    assert_eq!(runtime.expired_tasks_deleted(), expired_count);
    assert!(store.get(&kept.id).await.expect("get").is_some());
    assert!(
        store
            .delete_expired(10)
            .await
            .expect("retention")
            .is_empty()
    );
}

/// An audit row written while the store is away is tried again, and a shutdown's
/// flush waits for it: the row lands once the store answers within the bound. A
/// flush whose bound runs out first says so. On tokio's paused clock, so the
/// bound runs out exactly when the test says, however loaded the machine is.
#[tokio::test(start_paused = true)]
async fn a_shutdown_waits_for_audit_rows_still_being_written() {
    use docket_task::audit::AuditWriter;

    let store = Arc::new(docket_task::memory::FlakyStore::default());
    let writer = AuditWriter::new(
        Arc::clone(&store) as Arc<dyn TaskStore>,
        Duration::from_secs(30),
    );
    store.set_failing(true);
    writer.write(audit_entry("written_late"));
    // The store comes back 3 s into a flush that waits up to 10 s.
    let back = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            store.set_failing(false);
        })
    };
    assert!(
        writer.flush(Duration::from_secs(10)).await,
        "every row written"
    );
    back.await.expect("joined");
    let rows = store
        .audit_for_tool("written_late", 10)
        .await
        .expect("audit");
    assert_eq!(rows.len(), 1);

    // A store away for longer than the flush's bound: the flush gives up, and says so.
    store.set_failing(true);
    writer.write(audit_entry("never_written"));
    assert!(!writer.flush(Duration::from_secs(1)).await);
}

/// Rows waiting for the store are bounded: past the cap a row is tried once, so a
/// long outage under load cannot hold an unbounded number in memory.
#[tokio::test(start_paused = true)]
async fn audit_rows_waiting_for_the_store_are_capped() {
    use docket_task::audit::AuditWriter;

    let store = Arc::new(docket_task::memory::FlakyStore::default());
    let writer = AuditWriter::new(
        Arc::clone(&store) as Arc<dyn TaskStore>,
        Duration::from_secs(30),
    )
    .with_max_pending(1);
    store.set_failing(true);
    writer.write(audit_entry("waits"));
    writer.write(audit_entry("past_the_cap"));
    // Both reached the store once; only the first is still waiting.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(1);
    while store.refused_calls() < 2 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a row never reached the store"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    store.set_failing(false);
    assert!(writer.flush(Duration::from_secs(10)).await);
    let count = async |tool: &str| store.audit_for_tool(tool, 10).await.expect("audit").len();
    assert_eq!((count("waits").await, count("past_the_cap").await), (1, 0));
}

/// A direct call's audit row of `tool`, as the audit tests write it.
fn audit_entry(tool: &str) -> AuditEntry {
    AuditEntry {
        tool: tool.to_owned(),
        subject: "apikey:alice".into(),
        context: docket_task::store::AuditContext::default(),
        success: true,
        outcome: "completed".into(),
        error_message: None,
        duration_ms: 1,
        call_id: None,
        engine_user: None,
        upstream_ids: Vec::new(),
    }
}
