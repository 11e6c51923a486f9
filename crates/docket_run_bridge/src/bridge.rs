//! [`RunBridge`]: the queue's workers, cancels, waits, shutdown and retention.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use docket_catalog::CatalogError;
use docket_catalog::scripts::{
    CancelOutcome, Lease, NewRun, Renewal, Run, RunEnding, RunErrorKind, RunSignal, RunStatus,
    ScriptStore, ScriptVersion,
};
use docket_script::{
    Host, Isolation, Limits, RunProgress, ScriptFailure, ScriptInput, ScriptReport,
};
use docket_task::TaskStore;
use docket_task::store::{AuditContext, AuditEntry};
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// The tool that starts runs, and the tool name of a run's audit row.
pub const RUN_SCRIPT_TOOL: &str = "run_script";

/// How many ended runs one retention statement deletes at most.
const RETENTION_BATCH: u32 = 1000;

/// The first wait before writing a run's ending again; it doubles up to
/// [`LAST_ENDING_RETRY`].
const FIRST_ENDING_RETRY: Duration = Duration::from_millis(100);

/// The longest wait between two attempts to write a run's ending.
const LAST_ENDING_RETRY: Duration = Duration::from_secs(2);

/// How the bridge runs.
#[derive(Clone, Debug)]
pub struct BridgeConfig {
    /// This replica's id; worker ids start with it.
    pub replica_id: String,
    /// Workers on this replica (runs executing at once); 0 queues runs without
    /// executing any here.
    pub workers: usize,
    /// How long a claim or a renewal holds a run. A run whose worker died is
    /// reclaimed this long after its last renewal.
    pub lease: Duration,
    /// How often a worker renews its lease, and so the latest a cancel taken by
    /// a replica whose NOTIFY was lost reaches it.
    pub heartbeat_interval: Duration,
    /// How often an idle worker looks at the queue without being woken.
    pub poll_interval: Duration,
    /// Retries of platform faults before the run fails; script errors are
    /// never retried.
    pub max_platform_retries: u32,
    /// How many times a run may be taken back from a worker whose lease
    /// expired (its replica vanished mid-run) before it ends failed instead of
    /// being started again, so no source can take down one replica after
    /// another.
    pub max_reclaims: u32,
    /// The first retry's delay; each further retry doubles it.
    pub retry_backoff: Duration,
    /// How long after a run finished the retention pass deletes it.
    pub run_retention: Duration,
    /// How often the retention pass runs.
    pub maintenance_interval: Duration,
}

impl BridgeConfig {
    /// Defaults for `replica_id`: two workers, a 30 s lease renewed every 2 s,
    /// a 5 s poll, 3 retries from 1 s, 2 reclaims, runs kept 365 days, retention hourly.
    pub fn new(replica_id: impl Into<String>) -> Self {
        Self {
            replica_id: replica_id.into(),
            workers: 2,
            lease: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(2),
            poll_interval: Duration::from_secs(5),
            max_platform_retries: 3,
            max_reclaims: 2,
            retry_backoff: Duration::from_secs(1),
            run_retention: Duration::from_secs(365 * 86_400),
            maintenance_interval: Duration::from_secs(3600),
        }
    }
}

/// Why a bridge operation failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The store failed.
    #[error("the run store is unavailable: {0}")]
    Store(#[from] CatalogError),
    /// The OS random source failed while drawing a run id.
    #[error("could not draw a run id: {0}")]
    Random(String),
    /// The bridge is shutting down and takes no new runs.
    #[error("the server is shutting down and takes no new runs; try again on another replica")]
    Draining,
}

/// What executes one run: the sandbox with a host (see [`SandboxRunner`]), or
/// a stand-in in tests.
#[async_trait]
pub trait ScriptRunner: Send + Sync + 'static {
    /// Runs `version` for `run`, stopping when `cancel` fires; `progress`
    /// counts tool calls as they happen.
    async fn run(
        &self,
        run: &Run,
        version: &ScriptVersion,
        cancel: CancellationToken,
        progress: Arc<RunProgress>,
    ) -> ScriptReport;
}

/// Makes the [`Host`] a run talks to.
type HostFactory = dyn Fn(&Run, &ScriptVersion) -> Arc<dyn Host> + Send + Sync;

/// The real runner: the version's source in `docket_script` under `limits`,
/// evaluated where `isolation` says (a child process, in a server), with the
/// host `host_for` makes for each run.
pub struct SandboxRunner {
    limits: Limits,
    isolation: Isolation,
    host_for: Box<HostFactory>,
}

impl SandboxRunner {
    /// A runner with these limits, isolation and host factory.
    pub fn new(
        limits: Limits,
        isolation: Isolation,
        host_for: impl Fn(&Run, &ScriptVersion) -> Arc<dyn Host> + Send + Sync + 'static,
    ) -> Self {
        Self {
            limits,
            isolation,
            host_for: Box::new(host_for),
        }
    }
}

#[async_trait]
impl ScriptRunner for SandboxRunner {
    async fn run(
        &self,
        run: &Run,
        version: &ScriptVersion,
        cancel: CancellationToken,
        progress: Arc<RunProgress>,
    ) -> ScriptReport {
        let input = ScriptInput {
            run_id: run.id.clone(),
            params: run.params.as_object().cloned().unwrap_or_default(),
        };
        let host = (self.host_for)(run, version);
        self.isolation
            .run(
                version.source.clone(),
                input,
                host,
                self.limits,
                cancel,
                progress,
            )
            .await
    }
}

/// Why a worker stopped its sandbox early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum StopReason {
    None = 0,
    /// Someone asked to cancel the run.
    Cancel = 1,
    /// The lease is gone: another worker holds the run.
    LeaseLost = 2,
    /// This replica is shutting down.
    Shutdown = 3,
}

/// A run executing on this replica: its cancel token and why it was fired.
struct Executing {
    cancel: CancellationToken,
    reason: Arc<AtomicU8>,
}

impl Executing {
    fn stop(&self, reason: StopReason) {
        // The first reason wins: a cancel that raced a shutdown stays a cancel.
        let _ = self.reason.compare_exchange(
            StopReason::None as u8,
            reason as u8,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
        self.cancel.cancel();
    }
}

/// The run queue's workers and operations on one replica.
pub struct RunBridge {
    store: Arc<dyn ScriptStore>,
    audit: Option<Arc<dyn TaskStore>>,
    runner: Arc<dyn ScriptRunner>,
    config: BridgeConfig,
    /// Wakes idle workers (a local enqueue, a NOTIFY from another replica).
    wake: Notify,
    /// Wakes waiters when a run ends on this replica.
    ended: Notify,
    executing: Mutex<HashMap<String, Executing>>,
    /// No more claims: set when shutdown starts.
    draining: AtomicBool,
    /// Fires when workers must stop: their runs are released.
    stop: CancellationToken,
    tasks: Mutex<JoinSet<()>>,
}

impl std::fmt::Debug for RunBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunBridge")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RunBridge {
    /// A bridge over `store` that executes runs with `runner` and writes each
    /// run's audit row through `audit`. Call [`RunBridge::start`] to start its
    /// workers.
    pub fn new(
        store: Arc<dyn ScriptStore>,
        audit: Option<Arc<dyn TaskStore>>,
        runner: Arc<dyn ScriptRunner>,
        config: BridgeConfig,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            audit,
            runner,
            config,
            wake: Notify::new(),
            ended: Notify::new(),
            executing: Mutex::new(HashMap::new()),
            draining: AtomicBool::new(false),
            stop: CancellationToken::new(),
            tasks: Mutex::new(JoinSet::new()),
        })
    }

    /// The store the bridge works on.
    pub fn store(&self) -> &Arc<dyn ScriptStore> {
        &self.store
    }

    /// The configuration.
    pub fn config(&self) -> &BridgeConfig {
        &self.config
    }

    /// Starts the workers and the retention pass, and listens for other
    /// replicas' signals. Must be called within a tokio runtime.
    pub fn start(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        self.store.set_run_listener(Arc::new(move |signal| {
            let Some(bridge) = weak.upgrade() else {
                return;
            };
            match signal {
                RunSignal::Queued(_) => bridge.wake.notify_waiters(),
                RunSignal::Cancel(id) => bridge.stop_local(&id, StopReason::Cancel),
            }
        }));
        let mut tasks = lock(&self.tasks);
        let suffix = random_suffix();
        for index in 0..self.config.workers {
            let worker = format!("{}/w{index}/{suffix}", self.config.replica_id);
            tasks.spawn(Arc::clone(self).work(worker));
        }
        tasks.spawn(Arc::clone(self).maintain());
    }

    /// Queues a run (committed before this returns) and wakes a worker.
    ///
    /// # Errors
    /// [`BridgeError::Draining`] while shutting down, [`BridgeError::Store`].
    pub async fn enqueue(&self, run: NewRun) -> Result<Run, BridgeError> {
        if self.draining.load(Ordering::SeqCst) {
            return Err(BridgeError::Draining);
        }
        let run = self.store.enqueue(run).await?;
        self.wake.notify_one();
        Ok(run)
    }

    /// A fresh run id: 128 bits from the OS random source, 32 hex digits.
    ///
    /// # Errors
    /// [`BridgeError::Random`].
    pub fn new_run_id() -> Result<String, BridgeError> {
        docket_catalog::generate_id().map_err(|err| BridgeError::Random(err.to_string()))
    }

    /// Asks to cancel a run: see [`ScriptStore::cancel_run`]. A run running on
    /// this replica is stopped at once; one ended here and now is audited.
    ///
    /// # Errors
    /// [`BridgeError::Store`].
    pub async fn cancel(&self, run_id: &str) -> Result<Option<CancelOutcome>, BridgeError> {
        let outcome = self.store.cancel_run(run_id).await?;
        match &outcome {
            Some(CancelOutcome::Requested) => self.stop_local(run_id, StopReason::Cancel),
            Some(CancelOutcome::Ended(run)) => {
                self.audit_run(run, 0);
                self.ended.notify_waiters();
            }
            _ => {}
        }
        Ok(outcome)
    }

    /// Reads a run until it has ended or `timeout` passed; the last reading.
    ///
    /// # Errors
    /// [`BridgeError::Store`].
    pub async fn wait(&self, run_id: &str, timeout: Duration) -> Result<Option<Run>, BridgeError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let ended = self.ended.notified();
            let Some((run, _)) = self.store.run(run_id).await? else {
                return Ok(None);
            };
            if run.status.is_terminal() || tokio::time::Instant::now() >= deadline {
                return Ok(Some(run));
            }
            // Woken at once by an ending on this replica, otherwise polling
            // (the run may be executing on another replica).
            let poll = tokio::time::Instant::now() + Duration::from_millis(250);
            tokio::select! {
                () = ended => {}
                () = tokio::time::sleep_until(poll.min(deadline)) => {}
            }
        }
    }

    /// How many runs are executing on this replica.
    pub fn executing_count(&self) -> usize {
        lock(&self.executing).len()
    }

    /// Stops claiming, lets running runs finish for up to `grace`, then stops
    /// them and releases them back to the queue (not failed); waits for the
    /// workers to end.
    pub async fn shutdown(&self, grace: Duration) {
        self.draining.store(true, Ordering::SeqCst);
        self.wake.notify_waiters();
        let deadline = tokio::time::Instant::now() + grace;
        while self.executing_count() > 0 && tokio::time::Instant::now() < deadline {
            tokio::select! {
                () = self.ended.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        self.stop.cancel();
        for executing in lock(&self.executing).values() {
            executing.stop(StopReason::Shutdown);
        }
        let mut tasks = std::mem::take(&mut *lock(&self.tasks));
        while tasks.join_next().await.is_some() {}
    }

    fn stop_local(&self, run_id: &str, reason: StopReason) {
        if let Some(executing) = lock(&self.executing).get(run_id) {
            executing.stop(reason);
        }
    }

    /// One worker: claim, execute, repeat, until shutdown.
    async fn work(self: Arc<Self>, worker: String) {
        let mut failures = 0u32;
        while !self.draining.load(Ordering::SeqCst) {
            // Registered before the claim, so a wake between an empty claim and
            // the wait is not lost.
            let woken = self.wake.notified();
            match self.store.claim(&worker, self.config.lease).await {
                Ok(Some(run)) => {
                    failures = 0;
                    self.execute(run).await;
                }
                Ok(None) => {
                    tokio::select! {
                        () = woken => {}
                        () = tokio::time::sleep(self.config.poll_interval) => {}
                        () = self.stop.cancelled() => return,
                    }
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    tracing::warn!(%error, worker, "could not claim a run; retrying");
                    let backoff = self.config.poll_interval.min(
                        Duration::from_millis(100).saturating_mul(2u32.saturating_pow(failures)),
                    );
                    tokio::select! {
                        () = tokio::time::sleep(backoff) => {}
                        () = self.stop.cancelled() => return,
                    }
                }
            }
        }
    }

    /// Executes one claimed run to its end (or its release, or the loss of its
    /// lease).
    async fn execute(&self, run: Run) {
        let Some(lease) = run.lease() else {
            return;
        };
        let started = Instant::now();
        if run.cancel_requested_at.is_some() {
            // Cancelled while its previous worker held it; that worker is gone.
            self.end(&run, &lease, cancelled(json!({})), started).await;
            return;
        }
        let max_reclaims = i32::try_from(self.config.max_reclaims).unwrap_or(i32::MAX);
        if run.reclaims > max_reclaims {
            let message = format!(
                "the run stopped its worker {} times; it is not started again",
                run.reclaims
            );
            self.end(&run, &lease, platform_failure(message), started)
                .await;
            return;
        }
        let max_faults = i32::try_from(self.config.max_platform_retries).unwrap_or(i32::MAX);
        if run.platform_faults > max_faults {
            let message = format!(
                "the platform failed this run {} times; the last time: {}",
                run.platform_faults,
                run.error.as_deref().unwrap_or("its worker stopped")
            );
            self.end(&run, &lease, platform_failure(message), started)
                .await;
            return;
        }
        let version = match self.store.script_version(&run.script_id, run.version).await {
            Ok(Some(version)) => version,
            // The script was deleted with its runs: nothing left to write.
            Ok(None) => return,
            Err(error) => {
                self.fault(&run, &lease, &error.to_string(), started).await;
                return;
            }
        };
        match self.store.script(&run.script_id).await {
            Ok(Some(script))
                if !script.enabled
                    || script.status != docket_catalog::scripts::ScriptStatus::Active =>
            {
                let message = if script.enabled {
                    "the script is deprecated and must not be executed"
                } else {
                    "the script is disabled"
                };
                self.end(
                    &run,
                    &lease,
                    script_failure(message.to_owned(), json!({})),
                    started,
                )
                .await;
                return;
            }
            Ok(_) => {}
            Err(error) => {
                self.fault(&run, &lease, &error.to_string(), started).await;
                return;
            }
        }

        let cancel = CancellationToken::new();
        let reason = Arc::new(AtomicU8::new(StopReason::None as u8));
        lock(&self.executing).insert(
            run.id.clone(),
            Executing {
                cancel: cancel.clone(),
                reason: Arc::clone(&reason),
            },
        );
        if self.stop.is_cancelled() {
            self.stop_local(&run.id, StopReason::Shutdown);
        }
        let progress = Arc::new(RunProgress::new());
        let report = {
            let sandbox = self
                .runner
                .run(&run, &version, cancel.clone(), Arc::clone(&progress));
            tokio::pin!(sandbox);
            let mut beat = tokio::time::interval(self.config.heartbeat_interval);
            beat.tick().await;
            loop {
                tokio::select! {
                    report = &mut sandbox => break report,
                    _ = beat.tick() => {
                        let host_calls = i64::try_from(progress.host_calls()).unwrap_or(i64::MAX);
                        match self.store.renew(&lease, self.config.lease, host_calls).await {
                            Ok(Renewal::Held { cancel_requested: true }) => {
                                self.stop_local(&run.id, StopReason::Cancel);
                            }
                            Ok(Renewal::Held { .. }) => {}
                            Ok(Renewal::Lost) => {
                                tracing::warn!(run = run.id, "lost the lease on a run; stopping it");
                                self.stop_local(&run.id, StopReason::LeaseLost);
                            }
                            // The lease may still be held: try again next beat.
                            Err(error) => tracing::warn!(%error, run = run.id, "could not renew a run's lease"),
                        }
                    }
                }
            }
        };
        lock(&self.executing).remove(&run.id);
        let reason = reason.load(Ordering::SeqCst);
        let metrics = json!({
            "steps": report.steps,
            "host_calls": report.host_calls,
            "duration_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
        let log = (report.log, report.log_truncated);
        let ending = match report.outcome {
            Ok(result) => RunEnding {
                status: RunStatus::Succeeded,
                result: Some(result),
                error: None,
                error_kind: None,
                log: log.0,
                log_truncated: log.1,
                metrics,
            },
            _ if reason == StopReason::LeaseLost as u8 => return,
            Err(ScriptFailure::Cancelled) if reason == StopReason::Shutdown as u8 => {
                self.release(&lease).await;
                return;
            }
            Err(ScriptFailure::Cancelled) => RunEnding {
                log: log.0,
                log_truncated: log.1,
                ..cancelled(metrics)
            },
            Err(ScriptFailure::Platform(message)) => {
                if reason == StopReason::Shutdown as u8 {
                    self.release(&lease).await;
                } else {
                    self.fault(&run, &lease, &message, started).await;
                }
                return;
            }
            Err(failure) => RunEnding {
                log: log.0,
                log_truncated: log.1,
                ..script_failure(failure.to_string(), metrics)
            },
        };
        self.end(&run, &lease, ending, started).await;
    }

    /// A platform fault: retried with backoff while retries are left, failed
    /// after.
    async fn fault(&self, run: &Run, lease: &Lease, message: &str, started: Instant) {
        let retries_used = u32::try_from(run.platform_faults).unwrap_or(u32::MAX);
        if retries_used >= self.config.max_platform_retries {
            let message = format!(
                "the platform failed this run {} times; the last time: {message}",
                retries_used.saturating_add(1)
            );
            self.end(run, lease, platform_failure(message), started)
                .await;
            return;
        }
        let delay = self
            .config
            .retry_backoff
            .saturating_mul(2u32.saturating_pow(retries_used));
        tracing::warn!(
            run = run.id,
            error = message,
            ?delay,
            "a platform fault; the run is retried"
        );
        match self.store.retry(lease, message, delay).await {
            Ok(true) => {
                // The retry is another claim: wake a worker for when it is due.
                self.wake.notify_one();
            }
            Ok(false) => tracing::warn!(run = run.id, "lost the lease before retrying a run"),
            Err(error) => {
                tracing::warn!(%error, run = run.id, "could not requeue a run; its lease will expire")
            }
        }
    }

    async fn release(&self, lease: &Lease) {
        match self.store.release(lease).await {
            Ok(_) => tracing::info!(
                run = lease.run_id,
                "released a run back to the queue on shutdown"
            ),
            Err(error) => {
                tracing::warn!(%error, run = lease.run_id, "could not release a run; its lease will expire")
            }
        }
    }

    /// Writes a run's ending, fenced; audits it when the write landed.
    async fn end(&self, run: &Run, lease: &Lease, ending: RunEnding, started: Instant) {
        // An outage of the store loses no outcome: the ending is written again, with
        // backoff, until the store answers. The write is fenced by the lease, so if
        // the outage outlasted it and another worker took the run, this changes
        // nothing. Trying stops once the lease has run out (the run is anyone's
        // then, and a store that keeps refusing this ending must not hold its worker
        // forever) or on shutdown.
        let give_up_at = tokio::time::Instant::now() + self.config.lease;
        let mut delay = FIRST_ENDING_RETRY;
        let written = loop {
            match self.store.finish(lease, ending.clone()).await {
                Ok(written) => break Ok(written),
                Err(error)
                    if self.stop.is_cancelled()
                        || tokio::time::Instant::now() + delay > give_up_at =>
                {
                    break Err(error);
                }
                Err(error) => {
                    tracing::warn!(%error, run = run.id, retry_in = ?delay, "could not end a run yet; retrying");
                    tokio::select! {
                        () = tokio::time::sleep(delay) => {}
                        () = self.stop.cancelled() => {}
                    }
                    delay = (delay * 2).min(LAST_ENDING_RETRY);
                }
            }
        };
        match written {
            Ok(true) => {
                let mut ended = run.clone();
                ended.status = ending.status;
                ended.error = ending.error;
                ended.error_kind = ending.error_kind;
                self.audit_run(
                    &ended,
                    i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
                );
            }
            Ok(false) => tracing::warn!(run = run.id, "lost the lease before ending a run"),
            Err(error) => {
                tracing::warn!(%error, run = run.id, "could not end a run; its lease will expire and it runs again")
            }
        }
        self.ended.notify_waiters();
    }

    /// Writes a run's one audit row, in the background: an audit failure never
    /// fails the run.
    fn audit_run(&self, run: &Run, duration_ms: i64) {
        let Some(audit) = self.audit.clone() else {
            return;
        };
        let outcome = match (run.status, run.error_kind) {
            (RunStatus::Succeeded, _) => "completed",
            (RunStatus::Cancelled, _) => "cancelled",
            (_, Some(RunErrorKind::Platform)) => "failed",
            _ => "tool_error",
        };
        let entry = AuditEntry {
            tool: RUN_SCRIPT_TOOL.to_owned(),
            subject: format!("script:{}", run.script_id),
            context: AuditContext {
                persona: None,
                connection: None,
                arguments: json!({
                    "script": run.script_name,
                    "script_id": run.script_id,
                    "version": run.version,
                    "run_id": run.id,
                    "owner": run.script_owner,
                    "requested_by": run.requested_by,
                    "attempt": run.attempt,
                }),
            },
            success: run.status == RunStatus::Succeeded,
            outcome: outcome.to_owned(),
            error_message: run.error.clone(),
            duration_ms,
        };
        tokio::spawn(async move {
            if let Err(error) = audit.record_audit(entry).await {
                tracing::warn!(%error, "could not write a run's audit row");
            }
        });
    }

    /// The retention pass, every `maintenance_interval`, until shutdown.
    async fn maintain(self: Arc<Self>) {
        loop {
            self.delete_expired_runs().await;
            tokio::select! {
                () = tokio::time::sleep(self.config.maintenance_interval) => {}
                () = self.stop.cancelled() => return,
            }
        }
    }

    /// Deletes every run that finished more than `run_retention` ago; how many.
    /// Safe on every replica at once.
    pub async fn delete_expired_runs(&self) -> usize {
        let mut deleted = 0;
        loop {
            match self
                .store
                .delete_finished_runs(self.config.run_retention, RETENTION_BATCH)
                .await
            {
                Ok(ids) => {
                    deleted += ids.len();
                    if ids.len() < RETENTION_BATCH as usize {
                        return deleted;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "the run retention pass failed");
                    return deleted;
                }
            }
        }
    }
}

fn cancelled(metrics: Value) -> RunEnding {
    RunEnding {
        status: RunStatus::Cancelled,
        result: None,
        error: None,
        error_kind: None,
        log: String::new(),
        log_truncated: false,
        metrics,
    }
}

fn script_failure(message: String, metrics: Value) -> RunEnding {
    RunEnding {
        status: RunStatus::Failed,
        error: Some(message),
        error_kind: Some(RunErrorKind::Script),
        ..cancelled(metrics)
    }
}

fn platform_failure(message: String) -> RunEnding {
    RunEnding {
        status: RunStatus::Failed,
        error: Some(message),
        error_kind: Some(RunErrorKind::Platform),
        ..cancelled(json!({}))
    }
}

/// Eight random hex digits, so worker ids differ between processes that share
/// a replica id (a restarted replica never mistakes an old lease for its own).
fn random_suffix() -> String {
    let mut bytes = [0u8; 4];
    if getrandom::fill(&mut bytes).is_err() {
        // The attempt number still fences; the suffix only adds to it.
        return "0".to_owned();
    }
    hex::encode(bytes)
}
