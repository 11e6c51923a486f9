//! The tokio runtime for task work.
//!
//! [`TaskRuntime::spawn`] commits the task row, then runs the work detached from
//! the request that started it. While work runs, ONE heartbeat statement per beat
//! stamps every running task of this replica, stores their status messages, and
//! learns which of them another replica asked to cancel. A cancel taken on this
//! replica stops the work at once; signals from other replicas (database
//! notifications) arrive through [`TaskRuntime::signal`]. On shutdown,
//! [`TaskRuntime::drain`] refuses new work, lets running work finish within the
//! grace period, and records the rest as failed.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use crate::id::TaskId;
use crate::model::{Outcome, TaskError, TaskRecord, TaskStatus};
use crate::store::{Beat, NewTask, StaleTask, StoreError, TaskSignal, TaskStore};
use crate::trace::TaskTrace;

/// How the runtime paces itself.
#[derive(Clone, Debug)]
pub struct RuntimeConfig {
    /// This replica's id, stamped on the tasks it runs.
    pub replica_id: String,
    /// How often running tasks are stamped (default 2 s).
    pub heartbeat_interval: Duration,
    /// How long without a stamp before a task's replica counts as gone (default 30 s).
    pub stale_after: Duration,
    /// How often the maintenance pass (stale tasks, retention) runs.
    pub maintenance_interval: Duration,
    /// How long [`TaskRuntime::drain`] still waits, after its grace period, for
    /// endings already in hand that the store has not taken yet (the database
    /// briefly away as the replica stops): an outcome computed is kept if the store
    /// answers within it (default 10 s).
    pub ending_grace: Duration,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            replica_id: String::new(),
            heartbeat_interval: Duration::from_secs(2),
            stale_after: Duration::from_secs(30),
            maintenance_interval: Duration::from_secs(30),
            ending_grace: Duration::from_secs(10),
        }
    }
}

/// Why work could not be started.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The replica is shutting down and takes no new work.
    #[error(
        "the server is shutting down and takes no new tasks; call the tool again on another replica"
    )]
    Draining,
    /// The id could not be drawn from the OS random source.
    #[error("could not draw a task id: {0}")]
    Random(String),
    /// The task row could not be written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why waiting for input ended without answers.
#[non_exhaustive]
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The task was cancelled (or the replica is stopping) while it waited.
    #[error("the task was cancelled while waiting for input")]
    Cancelled,
    /// The task ended before the requests could be recorded.
    #[error("the task has already ended")]
    Ended,
    /// The store failed.
    #[error("the task store failed: {0}")]
    Store(String),
}

struct Running {
    cancel: CancellationToken,
    /// The trace the task was created in, which a beat's span links to.
    trace: Option<TaskTrace>,
    status_message: Arc<Mutex<Option<String>>>,
    /// The status message the last beat stored, so a beat sends only changes.
    sent_message: Mutex<Option<String>>,
    input_ready: Arc<Notify>,
}

/// The first wait before writing a task's ending again; it doubles up to
/// [`LAST_ENDING_RETRY`].
const FIRST_ENDING_RETRY: Duration = Duration::from_millis(100);

/// How long a drain waits to record in the store that the replica drains.
const MARK_DRAINING_WAIT: Duration = Duration::from_secs(2);

/// The longest wait between two attempts to write a task's ending.
const LAST_ENDING_RETRY: Duration = Duration::from_secs(2);

/// How many changes a follower may fall behind by before it misses some (and
/// reads again).
const CHANGES_BUFFER: usize = 1024;

/// Runs task work on this replica.
pub struct TaskRuntime {
    store: Arc<dyn TaskStore>,
    config: RuntimeConfig,
    running: Mutex<HashMap<TaskId, Running>>,
    /// Tasks whose ending could not be written within `stale_after`: the
    /// replica's beat keeps them alive, so the next beat that reaches the store
    /// records them failed instead.
    abandoned: Mutex<Vec<TaskId>>,
    /// Until when endings in hand are still tried once the grace period of a
    /// drain is over; `None` before that.
    endings_due: Mutex<Option<tokio::time::Instant>>,
    draining: AtomicBool,
    tracker: TaskTracker,
    /// Fires when the grace period is over: remaining work is recorded as failed.
    shutdown: CancellationToken,
    /// Stops the background loops.
    stop_background: CancellationToken,
    /// Tells followers of changed tasks ([`TaskRuntime::watch`]).
    changes: tokio::sync::broadcast::Sender<TaskId>,
    /// How a beat's span links to the traces of the tasks it stamps, once the
    /// embedder's tracing said ([`TaskRuntime::link_traces_with`]).
    link_trace: std::sync::OnceLock<LinkTrace>,
    /// How the span of the sweep's record of a stale task is parented on the trace
    /// that task keeps, once the embedder's tracing said
    /// ([`TaskRuntime::join_traces_with`]).
    join_trace: std::sync::OnceLock<LinkTrace>,
    /// Background beats that failed (the store did not take them), for the
    /// embedder's metrics ([`TaskRuntime::heartbeat_failures`]).
    heartbeat_failures: AtomicU64,
    /// Tasks of vanished replicas this runtime's maintenance recorded failed
    /// ([`TaskRuntime::stale_tasks_recorded`]).
    stale_tasks_recorded: AtomicU64,
    /// Expired tasks this runtime's maintenance has deleted since it started
    /// ([`TaskRuntime::expired_tasks_deleted`]).
    expired_tasks_deleted: AtomicU64,
}

/// Links a span to a stored trace, or parents it on one (the embedder's tracing
/// wiring: the server passes its OpenTelemetry's).
pub type LinkTrace = fn(&tracing::Span, &TaskTrace);

/// The most task traces one beat's span links to.
const MAX_BEAT_LINKS: usize = 32;

/// Expired tasks one retention statement deletes at most.
const RETENTION_BATCH: u32 = 200;

/// The span of one task store statement (kind CLIENT, named by the conventions
/// for a database call: `{operation} {table}`); it carries no value.
pub fn store_span(operation: &'static str) -> tracing::Span {
    let name = match operation {
        "create" => "create call_tasks",
        "finish" => "finish call_tasks",
        "request_cancel" => "request_cancel call_tasks",
        "heartbeat" => "heartbeat call_tasks",
        "get" => "get call_tasks",
        _ => "call_tasks",
    };
    tracing::info_span!(
        "task_store",
        otel.name = name,
        otel.kind = "client",
        "db.operation.name" = operation,
        "db.collection.name" = "call_tasks",
        "error.type" = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    )
}

/// Runs `statement` in a [`store_span`] named for `operation`, marking the span
/// failed when it fails.
///
/// # Errors
/// The statement's own error, unchanged.
pub async fn in_store_span<T>(
    operation: &'static str,
    statement: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let span = store_span(operation);
    let outcome = statement.instrument(span.clone()).await;
    if outcome.is_err() {
        span.record("error.type", "store");
        span.record("otel.status_code", "error");
    }
    outcome
}

/// What task work gets: its id, its cancel token, a status message it can set, and
/// a way to ask the client for input.
pub struct TaskContext {
    id: TaskId,
    cancel: CancellationToken,
    status_message: Arc<Mutex<Option<String>>>,
    input_ready: Arc<Notify>,
    store: Arc<dyn TaskStore>,
    poll: Duration,
    /// Tells this replica's followers that the task now waits for input.
    changes: tokio::sync::broadcast::Sender<TaskId>,
    /// What the work left behind for a result, taken back unless the task ends
    /// completed ([`TaskContext::undo_unless_completed`]).
    undo: Arc<Mutex<Vec<Undo>>>,
}

/// Work that takes back what a task left behind for a result it did not end with.
type Undo = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

impl TaskContext {
    /// The task's id.
    pub fn id(&self) -> &TaskId {
        &self.id
    }

    /// Fires when the task is cancelled; long work should watch it.
    pub fn cancelled(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Sets what the task reports it is doing ("412 000 rows written, 38 MB"); the
    /// next heartbeat stores it.
    pub fn set_status_message(&self, message: impl Into<String>) {
        *lock(&self.status_message) = Some(message.into());
    }

    /// Runs `undo` once the task has ended, unless this replica recorded it
    /// `completed`: what the work left behind for its result (an export's asset) is
    /// taken back when the result is not what the task ends with — a cancel asked
    /// for first won, the work was stopped after it left it, or another replica
    /// recorded the task failed first.
    pub fn undo_unless_completed(&self, undo: impl Future<Output = ()> + Send + 'static) {
        lock(&self.undo).push(Box::pin(undo));
    }

    /// Asks the client for input and waits until every key is answered. The requests
    /// are stored with the task, so any replica reports them.
    ///
    /// # Errors
    /// [`InputError`] when the task is cancelled or ends, or the store fails.
    pub async fn request_input(
        &self,
        requests: Map<String, Value>,
    ) -> Result<Map<String, Value>, InputError> {
        let wanted: Vec<String> = requests.keys().cloned().collect();
        let recorded = self
            .store
            .require_input(&self.id, requests)
            .await
            .map_err(|err| InputError::Store(err.to_string()))?;
        if !recorded {
            return Err(InputError::Ended);
        }
        // Followers here hear of `input_required` at once; other replicas' through
        // the store (NOTIFY on PostgreSQL).
        let _ = self.changes.send(self.id.clone());
        let mut answers = Map::new();
        loop {
            let taken = self
                .store
                .take_answers(&self.id)
                .await
                .map_err(|err| InputError::Store(err.to_string()))?;
            answers.extend(taken);
            if wanted.iter().all(|key| answers.contains_key(key)) {
                return Ok(answers);
            }
            // A signal wakes us early; the poll covers a lost one.
            tokio::select! {
                () = self.input_ready.notified() => {}
                () = tokio::time::sleep(self.poll) => {}
                () = self.cancel.cancelled() => return Err(InputError::Cancelled),
            }
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl TaskRuntime {
    /// A runtime over `store`. Call [`TaskRuntime::start_background`] to run the
    /// heartbeat and maintenance loops.
    pub fn new(store: Arc<dyn TaskStore>, config: RuntimeConfig) -> Arc<Self> {
        let runtime = Arc::new(Self {
            store,
            config,
            running: Mutex::default(),
            abandoned: Mutex::default(),
            endings_due: Mutex::default(),
            draining: AtomicBool::new(false),
            tracker: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            stop_background: CancellationToken::new(),
            changes: tokio::sync::broadcast::channel(CHANGES_BUFFER).0,
            link_trace: std::sync::OnceLock::new(),
            join_trace: std::sync::OnceLock::new(),
            heartbeat_failures: AtomicU64::new(0),
            stale_tasks_recorded: AtomicU64::new(0),
            expired_tasks_deleted: AtomicU64::new(0),
        });
        let weak: Weak<Self> = Arc::downgrade(&runtime);
        runtime.store.set_signal_listener(Arc::new(move |signal| {
            if let Some(runtime) = weak.upgrade() {
                runtime.signal(signal);
            }
        }));
        runtime
    }

    /// Tells of every task that changed on this replica — it ended, began to wait
    /// for input, or its status message was stored by a beat — or on another whose
    /// store signals it (PostgreSQL), so followers need not poll. A receiver may hear
    /// of one change more than once; one that falls behind misses changes
    /// (`Lagged`) and should read again.
    pub fn watch(&self) -> tokio::sync::broadcast::Receiver<TaskId> {
        self.changes.subscribe()
    }

    /// Makes each beat's span link to the traces of the tasks it stamps (at most
    /// 32), through the embedder's tracing; a second call changes nothing.
    pub fn link_traces_with(&self, link: LinkTrace) {
        let _ = self.link_trace.set(link);
    }

    /// Makes the maintenance pass record each stale task it ends in a span of that
    /// task's own trace (at most 32 a pass), parented through the embedder's tracing
    /// by `join`; a second call changes nothing.
    pub fn join_traces_with(&self, join: LinkTrace) {
        let _ = self.join_trace.set(join);
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn TaskStore> {
        &self.store
    }

    /// The configuration.
    pub fn config(&self) -> &RuntimeConfig {
        &self.config
    }

    /// Whether the runtime refuses new work.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// How many tasks run on this replica now.
    pub fn running_count(&self) -> usize {
        lock(&self.running).len()
    }

    /// How many of the background loop's beats have failed since the runtime started
    /// (each is also logged as `heartbeat failed`): the store was unreachable or refused.
    pub fn heartbeat_failures(&self) -> u64 {
        self.heartbeat_failures.load(Ordering::Relaxed)
    }

    /// How many tasks of vanished replicas this runtime's maintenance pass has recorded
    /// failed since it started.
    pub fn stale_tasks_recorded(&self) -> u64 {
        self.stale_tasks_recorded.load(Ordering::Relaxed)
    }

    /// How many expired tasks this runtime's maintenance has deleted since it started.
    pub fn expired_tasks_deleted(&self) -> u64 {
        self.expired_tasks_deleted.load(Ordering::Relaxed)
    }

    /// Starts the heartbeat loop (every `heartbeat_interval`) and the maintenance
    /// loop (stale tasks and retention, every `maintenance_interval`).
    pub fn start_background(self: &Arc<Self>) {
        let runtime = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(runtime.config.heartbeat_interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    () = runtime.stop_background.cancelled() => return,
                }
                if let Err(err) = runtime.beat().await {
                    runtime.heartbeat_failures.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %err, "heartbeat failed");
                }
            }
        });
        let runtime = Arc::clone(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(runtime.config.maintenance_interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticker.tick() => {}
                    () = runtime.stop_background.cancelled() => return,
                }
                runtime.maintain().await;
            }
        });
    }

    /// Commits `task`, then runs `work` detached from the caller. Returns the
    /// committed record: it is readable on every replica before this returns.
    ///
    /// # Errors
    /// [`SpawnError::Draining`] while shutting down; [`SpawnError::Store`] when the
    /// row cannot be written (then no work runs).
    pub async fn spawn<F, Fut>(
        self: &Arc<Self>,
        task: NewTask,
        work: F,
    ) -> Result<TaskRecord, SpawnError>
    where
        F: FnOnce(TaskContext) -> Fut + Send + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        if self.is_draining() {
            return Err(SpawnError::Draining);
        }
        let record = in_store_span("create", self.store.create(task)).await?;
        let id = record.id.clone();
        let cancel = CancellationToken::new();
        let status_message = Arc::new(Mutex::new(record.status_message.clone()));
        let input_ready = Arc::new(Notify::new());
        let undo = Arc::new(Mutex::new(Vec::new()));
        lock(&self.running).insert(
            id.clone(),
            Running {
                cancel: cancel.clone(),
                trace: record.trace_context.clone(),
                status_message: Arc::clone(&status_message),
                sent_message: Mutex::new(None),
                input_ready: Arc::clone(&input_ready),
            },
        );
        let context = TaskContext {
            id: id.clone(),
            cancel: cancel.clone(),
            status_message,
            input_ready,
            store: Arc::clone(&self.store),
            poll: self.config.heartbeat_interval,
            changes: self.changes.clone(),
            undo: Arc::clone(&undo),
        };
        let runtime = Arc::clone(self);
        // The work's span is a child of what created the task (the request's span),
        // whose trace the task row keeps for the replicas that cancel or end it.
        let span = tracing::info_span!(
            "task",
            otel.name = "task run",
            otel.kind = "internal",
            "docket.task.id" = %id,
            "docket.task.tool" = %record.tool,
            "docket.task.status" = tracing::field::Empty,
        );
        let work_span = span.clone();
        self.tracker.spawn(
            async move {
                let work = work(context);
                // Biased, cancel first: work that stops because it saw the cancel must
                // not win the race with its own "stopped" result. Work that finished
                // before the cancel fired was returned by an earlier poll and keeps its
                // outcome.
                let outcome = tokio::select! {
                    biased;
                    () = cancel.cancelled() => Outcome::Cancelled,
                    () = runtime.shutdown.cancelled() => Outcome::Failed(TaskError::shut_down()),
                    outcome = work => outcome,
                };
                // Still heartbeated while its ending is being written, so a short outage
                // of the store never makes it look abandoned.
                let ended = runtime.record_ending(&id, outcome).await;
                if let Some(status) = ended {
                    work_span.record("docket.task.status", status.as_str());
                }
                lock(&runtime.running).remove(&id);
                if ended != Some(TaskStatus::Completed) {
                    let undo = std::mem::take(&mut *lock(&undo));
                    for undo in undo {
                        undo.await;
                    }
                }
            }
            .instrument(span),
        );
        Ok(record)
    }

    /// Writes how a task ended, retrying with backoff while the store is
    /// unavailable, so an outage shorter than `stale_after` loses no outcome. The
    /// write is a compare-and-set: if another replica recorded the task failed
    /// meanwhile (a longer outage), this one changes nothing, so a task never holds
    /// both a result and a failure. Gives up after `stale_after` — a store that
    /// keeps refusing this one ending (an outcome it cannot hold) must not keep the
    /// task alive forever: the task is then left to the next beat that reaches the
    /// store, which records it failed ([`TaskError::ending_lost`]). A drain past its
    /// grace period still tries it for [`RuntimeConfig::ending_grace`]; after that
    /// the replica stops beating and another replica's stale sweep records it failed.
    /// The status this replica recorded, if it did.
    async fn record_ending(&self, id: &TaskId, outcome: Outcome) -> Option<TaskStatus> {
        let give_up_at = tokio::time::Instant::now() + self.config.stale_after;
        let mut delay = FIRST_ENDING_RETRY;
        loop {
            let error = match in_store_span("finish", self.store.finish(id, outcome.clone())).await
            {
                Ok(ended) => {
                    match ended {
                        // Compare-and-set: an ending recorded first stands (a reader
                        // that found this replica gone, a cancel, a stale sweep).
                        None => tracing::info!(
                            task = %id,
                            "the task had already ended; this replica's ending is not kept"
                        ),
                        Some(status) if status != outcome.status() => tracing::info!(
                            task = %id,
                            "a cancel asked for first won over the task's own ending"
                        ),
                        Some(_) => {}
                    }
                    // Followers here learn at once; other replicas' through the store.
                    let _ = self.changes.send(id.clone());
                    return ended;
                }
                Err(error) => error,
            };
            // Shutting down, an ending in hand is still tried for the ending grace
            // (`drain` waits for it; never past `stale_after`, when another replica's
            // sweep records it failed): a store briefly away loses no outcome.
            let give_up_at = match *lock(&self.endings_due) {
                Some(endings_due) => give_up_at.min(endings_due),
                None => give_up_at,
            };
            if tokio::time::Instant::now() + delay > give_up_at {
                if self.shutdown.is_cancelled() {
                    tracing::error!(task = %id, %error, "could not record how a task ended before the ending grace ran out");
                    return None;
                }
                tracing::error!(task = %id, %error, "could not record how a task ended; the next beat records it failed");
                lock(&self.abandoned).push(id.clone());
                return None;
            }
            tracing::warn!(task = %id, %error, retry_in = ?delay, "could not record how a task ended yet; retrying");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(LAST_ENDING_RETRY);
        }
    }

    /// Records as failed the tasks whose ending could not be written; those the
    /// store still refuses wait for the next beat.
    async fn fail_abandoned(&self) {
        let abandoned = std::mem::take(&mut *lock(&self.abandoned));
        for id in abandoned {
            let failed = Outcome::Failed(TaskError::ending_lost());
            if let Err(error) = self.store.finish(&id, failed).await {
                tracing::warn!(task = %id, %error, "could not record a lost ending yet");
                lock(&self.abandoned).push(id);
            }
        }
    }

    /// Asks a task to stop: records the request (so the replica running it learns
    /// of it) and stops it at once if it runs here.
    ///
    /// # Errors
    /// When the store cannot record the request.
    pub async fn cancel(&self, id: &TaskId) -> Result<(), StoreError> {
        in_store_span("request_cancel", self.store.request_cancel(id)).await?;
        self.cancel_local(id);
        Ok(())
    }

    /// Handles a signal from another replica.
    pub fn signal(&self, signal: TaskSignal) {
        match signal {
            TaskSignal::Cancel(id) => self.cancel_local(&id),
            TaskSignal::Input(id) => {
                if let Some(running) = lock(&self.running).get(&id) {
                    running.input_ready.notify_one();
                }
            }
            TaskSignal::Changed(id) => {
                let _ = self.changes.send(id);
            }
        }
    }

    fn cancel_local(&self, id: &TaskId) {
        if let Some(running) = lock(&self.running).get(id) {
            running.cancel.cancel();
        }
    }

    /// One heartbeat: a single store statement that stamps this replica (its
    /// tasks are as alive as it is), stores the status messages that changed
    /// since the last beat (and tells followers of them), and learns which of its
    /// tasks another replica asked to cancel. Its cost does not grow with the
    /// number of tasks running here.
    ///
    /// # Errors
    /// When the store fails; the next beat tries again (and sends the messages
    /// this one could not).
    pub async fn beat(&self) -> Result<(), StoreError> {
        let beats: Vec<Beat> = lock(&self.running)
            .iter()
            .filter_map(|(id, running)| {
                // Compared in place: only a changed message is copied.
                let message = lock(&running.status_message);
                let changed = message.is_some() && *message != *lock(&running.sent_message);
                changed.then(|| Beat {
                    id: id.clone(),
                    status_message: message.clone(),
                })
            })
            .collect();
        let statement = self.store.heartbeat(&self.config.replica_id, &beats);
        let cancelled = match self.beat_span() {
            Some(span) => {
                in_store_span("heartbeat", statement)
                    .instrument(span)
                    .await?
            }
            None => statement.await?,
        };
        {
            let running = lock(&self.running);
            for beat in beats {
                if let Some(task) = running.get(&beat.id) {
                    *lock(&task.sent_message) = beat.status_message;
                }
                // A new status message is a change followers here hear of at once;
                // other replicas' hear it through the store.
                let _ = self.changes.send(beat.id);
            }
        }
        self.fail_abandoned().await;
        for id in &cancelled {
            self.cancel_local(id);
        }
        Ok(())
    }

    /// The span of one beat: none while no task runs here (an idle replica's beats
    /// would each be a trace of their own), else one that links to the traces of
    /// the tasks it stamps.
    fn beat_span(&self) -> Option<tracing::Span> {
        let running = lock(&self.running);
        if running.is_empty() {
            return None;
        }
        let span = tracing::info_span!(
            "task_heartbeat",
            otel.name = "task heartbeat",
            otel.kind = "internal",
            "docket.tasks.running" = i64::try_from(running.len()).unwrap_or(i64::MAX),
        );
        if let Some(link) = self.link_trace.get() {
            for trace in running
                .values()
                .filter_map(|task| task.trace.as_ref())
                .take(MAX_BEAT_LINKS)
            {
                link(&span, trace);
            }
        }
        Some(span)
    }

    /// The maintenance pass: fail tasks whose replica is gone, delete expired ones.
    /// Safe on every replica at once: both are compare-and-set in the store.
    pub async fn maintain(&self) {
        match self.store.fail_stale(self.config.stale_after).await {
            Ok(failed) if !failed.is_empty() => {
                self.stale_tasks_recorded.fetch_add(
                    u64::try_from(failed.len()).unwrap_or(u64::MAX),
                    Ordering::Relaxed,
                );
                tracing::warn!(
                    count = failed.len(),
                    "recorded tasks of a vanished replica as failed"
                );
                self.trace_stale(&failed);
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(error = %err, "stale-task sweep failed"),
        }
        self.delete_expired().await;
    }

    /// Deletes every expired task, [`RETENTION_BATCH`] at a time until a batch comes
    /// back short: a backlog (a retention shortened, a replica that was down) is
    /// cleared in one pass instead of a batch per `maintenance_interval`. Each
    /// statement stays small, and after each the pass rests twice as long as the
    /// statement took, so it never holds more than a third of a connection's time from the
    /// callers reading meanwhile.
    async fn delete_expired(&self) {
        let mut total = 0u64;
        loop {
            let started = tokio::time::Instant::now();
            match self.store.delete_expired(RETENTION_BATCH).await {
                Ok(deleted) => {
                    let count = u64::try_from(deleted.len()).unwrap_or(u64::MAX);
                    total += count;
                    self.expired_tasks_deleted
                        .fetch_add(count, Ordering::Relaxed);
                    if deleted.len() < RETENTION_BATCH as usize {
                        break;
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, "retention pass failed");
                    break;
                }
            }
            // A shutdown does not wait for a backlog: the next pass takes up the rest.
            tokio::select! {
                () = tokio::time::sleep(started.elapsed() * 2) => {}
                () = self.stop_background.cancelled() => break,
            }
        }
        if total > 0 {
            tracing::info!(count = total, "deleted expired tasks");
        }
    }

    /// Records, in the trace each swept task keeps, that this replica's sweep ended
    /// it, so the task's trace shows where and when it was recorded failed.
    fn trace_stale(&self, failed: &[StaleTask]) {
        let Some(join) = self.join_trace.get() else {
            return;
        };
        let traced = failed
            .iter()
            .filter_map(|task| Some((&task.id, task.trace.as_ref()?)))
            .take(MAX_BEAT_LINKS);
        for (id, trace) in traced {
            let span = tracing::info_span!(
                "task",
                otel.name = "task recorded stale",
                otel.kind = "internal",
                "docket.task.id" = %id,
                "docket.replica.id" = %self.config.replica_id,
            );
            join(&span, trace);
            span.in_scope(|| {
                tracing::debug!(task = %id, "recorded failed: its replica stopped beating");
            });
        }
    }

    /// Shuts down: refuses new work, waits up to `grace` for running work, records
    /// what is still running as failed ("call the tool again"), and stops the loops.
    pub async fn drain(&self, grace: Duration) {
        self.draining.store(true, Ordering::SeqCst);
        // Said in the replica's row for operators; a database that is away delays
        // the shutdown by at most MARK_DRAINING_WAIT.
        let marked = tokio::time::timeout(
            MARK_DRAINING_WAIT,
            self.store.mark_draining(&self.config.replica_id),
        )
        .await;
        match marked {
            Ok(Ok(())) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, "could not record that this replica is draining");
            }
            Err(_) => tracing::warn!("recording that this replica is draining took too long"),
        }
        self.tracker.close();
        if tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                still_running = self.running_count(),
                "grace period over; recording unfinished tasks as failed"
            );
            *lock(&self.endings_due) = Some(tokio::time::Instant::now() + self.config.ending_grace);
            self.shutdown.cancel();
            self.tracker.wait().await;
        }
        self.stop_background.cancel();
    }
}
