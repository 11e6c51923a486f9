//! [`RunBridge`]: one replica's view of the run queue — it starts the workers
//! (`worker`) and the retention pass, and queues, cancels, waits for and
//! releases runs.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use docket_catalog::scripts::{CancelOutcome, NewRun, Run, RunSignal, ScriptStore};
use docket_task::audit::AuditWriter;
use tokio::task::JoinSet;

use crate::clock::{Clock, SystemClock};
use crate::config::{BridgeConfig, BridgeError};
use crate::replica::{Replica, StopReason, lock};
use crate::runner::ScriptRunner;
use crate::scheduler::Scheduler;

/// How many ended runs one retention statement deletes at most.
const RETENTION_BATCH: u32 = 200;

/// The run queue's workers and operations on one replica.
pub struct RunBridge {
    replica: Arc<Replica>,
    tasks: Mutex<JoinSet<()>>,
    scheduler: Arc<Scheduler>,
}

impl std::fmt::Debug for RunBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunBridge")
            .field("config", &self.replica.config)
            .finish_non_exhaustive()
    }
}

impl RunBridge {
    /// A bridge over `store` that executes runs with `runner` and writes each
    /// run's audit row through `audit`. Call [`RunBridge::start`] to start its
    /// workers.
    pub fn new(
        store: Arc<dyn ScriptStore>,
        audit: Option<Arc<AuditWriter>>,
        runner: Arc<dyn ScriptRunner>,
        config: BridgeConfig,
    ) -> Arc<Self> {
        Self::with_clock(store, audit, runner, config, Arc::new(SystemClock))
    }

    /// [`RunBridge::new`] with the clock its scheduler reads (a
    /// [`ManualClock`](crate::clock::ManualClock) in tests).
    pub fn with_clock(
        store: Arc<dyn ScriptStore>,
        audit: Option<Arc<AuditWriter>>,
        runner: Arc<dyn ScriptRunner>,
        config: BridgeConfig,
        clock: Arc<dyn Clock>,
    ) -> Arc<Self> {
        let replica = Arc::new(Replica::new(store, audit, runner, config));
        let scheduler = Scheduler::new(
            Arc::clone(&replica.store),
            clock,
            replica.config.replica_id.clone(),
        )
        .waking(Arc::clone(&replica.wake));
        Arc::new(Self {
            replica,
            tasks: Mutex::new(JoinSet::new()),
            scheduler: Arc::new(scheduler),
        })
    }

    /// This replica's scheduler (its loop runs from [`RunBridge::start`] when
    /// [`BridgeConfig::schedule_interval`] is set; tests may call
    /// [`Scheduler::tick`] themselves).
    pub fn scheduler(&self) -> &Arc<Scheduler> {
        &self.scheduler
    }

    /// Makes each run's span (a child of nothing on the replica that executes it)
    /// join the trace the run was queued in ([`docket_catalog::scripts::Run::trace_context`]),
    /// through the embedder's tracing; a second call changes nothing.
    pub fn join_traces_with(&self, join: crate::JoinTrace) {
        let _ = self.replica.join_trace.set(join);
    }

    /// The store the bridge works on.
    pub fn store(&self) -> &Arc<dyn ScriptStore> {
        &self.replica.store
    }

    /// The configuration.
    pub fn config(&self) -> &BridgeConfig {
        &self.replica.config
    }

    /// Starts the workers and the retention pass, and listens for other
    /// replicas' signals. Must be called within a tokio runtime.
    pub fn start(self: &Arc<Self>) {
        let weak = Arc::downgrade(&self.replica);
        self.replica.store.set_run_listener(Arc::new(move |signal| {
            let Some(replica) = weak.upgrade() else {
                return;
            };
            match signal {
                RunSignal::Queued(_) => replica.wake.notify_waiters(),
                RunSignal::Cancel(id) => replica.stop_local(&id, StopReason::Cancel),
                RunSignal::Ended(id) => {
                    let _ = replica.finished.send(id);
                }
            }
        }));
        let mut tasks = lock(&self.tasks);
        let suffix = random_suffix();
        for index in 0..self.replica.config.workers {
            let worker = format!("{}/w{index}/{suffix}", self.replica.config.replica_id);
            tasks.spawn(Arc::clone(&self.replica).work(worker));
        }
        tasks.spawn(Arc::clone(self).maintain());
        if let Some(interval) = self.replica.config.schedule_interval {
            tasks.spawn(Arc::clone(&self.scheduler).run(interval, self.replica.stop.clone()));
        }
    }

    /// Queues a run (committed before this returns) and wakes a worker.
    ///
    /// # Errors
    /// [`BridgeError::Draining`] while shutting down, [`BridgeError::Store`].
    pub async fn enqueue(&self, run: NewRun) -> Result<Run, BridgeError> {
        if self.replica.draining.load(Ordering::SeqCst) {
            return Err(BridgeError::Draining);
        }
        let run = self.replica.store.enqueue(run).await?;
        self.replica.wake.notify_one();
        Ok(run)
    }

    /// A fresh run id: see [`crate::task::new_run_id`].
    ///
    /// # Errors
    /// [`BridgeError::Random`].
    pub fn new_run_id() -> Result<String, BridgeError> {
        crate::task::new_run_id().map_err(|err| BridgeError::Random(err.to_string()))
    }

    /// Asks to cancel a run: see [`ScriptStore::cancel_run`]. A run running on
    /// this replica is stopped at once; one ended here and now is audited.
    ///
    /// # Errors
    /// [`BridgeError::Store`].
    pub async fn cancel(&self, run_id: &str) -> Result<Option<CancelOutcome>, BridgeError> {
        let outcome = self.replica.store.cancel_run(run_id).await?;
        match &outcome {
            Some(CancelOutcome::Requested) => self.replica.stop_local(run_id, StopReason::Cancel),
            Some(CancelOutcome::Ended(run)) => {
                self.replica.audit_run(run, 0);
                self.replica.ended.notify_waiters();
                let _ = self.replica.finished.send(run.id.clone());
            }
            _ => {}
        }
        Ok(outcome)
    }

    /// Names each run that ends, on this replica or (with PostgreSQL) another, so
    /// followers need not poll. A receiver that falls behind misses some
    /// (`Lagged`) and should read again.
    pub fn watch_ended(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.replica.finished.subscribe()
    }

    /// Reads a run until it has ended or `timeout` passed; the last reading.
    ///
    /// # Errors
    /// [`BridgeError::Store`].
    pub async fn wait(&self, run_id: &str, timeout: Duration) -> Result<Option<Run>, BridgeError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let ended = self.replica.ended.notified();
            let Some((run, _)) = self.replica.store.run(run_id).await? else {
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
        lock(&self.replica.executing).len()
    }

    /// Stops claiming, lets running runs finish for up to `grace`, then stops
    /// them and releases them back to the queue (not failed); waits for the
    /// workers to end (a run that ended as they stopped is still written for
    /// [`BridgeConfig::ending_grace`]) and, as long again, for the audit rows.
    pub async fn shutdown(&self, grace: Duration) {
        self.replica.draining.store(true, Ordering::SeqCst);
        self.replica.wake.notify_waiters();
        let deadline = tokio::time::Instant::now() + grace;
        while self.executing_count() > 0 && tokio::time::Instant::now() < deadline {
            tokio::select! {
                () = self.replica.ended.notified() => {}
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        *lock(&self.replica.stopped_at) = Some(tokio::time::Instant::now());
        self.replica.stop.cancel();
        for executing in lock(&self.replica.executing).values() {
            executing.stop(StopReason::Shutdown);
        }
        let mut tasks = std::mem::take(&mut *lock(&self.tasks));
        while tasks.join_next().await.is_some() {}
        // The runs that ended are audited before the replica goes.
        if let Some(writer) = &self.replica.audit {
            writer.flush(self.replica.config.ending_grace).await;
        }
    }

    /// The retention pass, every `maintenance_interval`, until shutdown.
    async fn maintain(self: Arc<Self>) {
        loop {
            self.delete_expired_runs().await;
            tokio::select! {
                () = tokio::time::sleep(self.replica.config.maintenance_interval) => {}
                () = self.replica.stop.cancelled() => return,
            }
        }
    }

    /// Deletes every run that finished more than `run_retention` ago, and the
    /// schedule fire records older than that; how many runs. Safe on every
    /// replica at once.
    pub async fn delete_expired_runs(&self) -> usize {
        if self.replica.stop.is_cancelled() {
            return 0;
        }
        loop {
            let started = tokio::time::Instant::now();
            match self
                .replica
                .store
                .delete_old_fires(self.replica.config.run_retention, RETENTION_BATCH)
                .await
            {
                // Rests twice as long as the batch took: see `rest_after`.
                Ok(count) if count >= u64::from(RETENTION_BATCH) => {
                    if !self.rest_after(started).await {
                        break;
                    }
                }
                Ok(_) => break,
                Err(error) => {
                    tracing::warn!(%error, "the schedule fire retention pass failed");
                    break;
                }
            }
        }
        let mut deleted = 0;
        loop {
            let started = tokio::time::Instant::now();
            match self
                .replica
                .store
                .delete_finished_runs(self.replica.config.run_retention, RETENTION_BATCH)
                .await
            {
                Ok(ids) => {
                    deleted += ids.len();
                    if ids.len() < RETENTION_BATCH as usize {
                        return deleted;
                    }
                    if !self.rest_after(started).await {
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

    /// After a full batch of a backlog: rests twice as long as the batch took, so the pass
    /// never holds more than a third of a connection's time from the callers meanwhile.
    /// False when the replica is stopping: a shutdown, which waits for this pass, does not
    /// wait for a backlog (the next pass, on any replica, takes up the rest).
    async fn rest_after(&self, started: tokio::time::Instant) -> bool {
        tokio::select! {
            () = tokio::time::sleep(started.elapsed() * 2) => true,
            () = self.replica.stop.cancelled() => false,
        }
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
