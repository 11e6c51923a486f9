//! What one replica's bridge holds in memory and its workers share: the
//! store, the runner, the audit store, the configuration, the wake-ups, the
//! runs executing here (each with why it was stopped), and the shutdown flags.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use docket_catalog::scripts::{Run, ScriptStore};
use docket_task::audit::AuditWriter;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::audit;
use crate::config::BridgeConfig;
use crate::runner::ScriptRunner;

/// Why a worker stopped its sandbox early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum StopReason {
    None = 0,
    /// Someone asked to cancel the run.
    Cancel = 1,
    /// The lease is gone: another worker holds the run.
    LeaseLost = 2,
    /// This replica is shutting down.
    Shutdown = 3,
}

/// A run executing on this replica: its cancel token and why it was fired.
pub(crate) struct Executing {
    pub(crate) cancel: CancellationToken,
    pub(crate) reason: Arc<AtomicU8>,
}

impl Executing {
    pub(crate) fn stop(&self, reason: StopReason) {
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

/// The state a bridge and its workers share on one replica.
/// How many ended runs a follower may fall behind by before it misses some.
const FINISHED_BUFFER: usize = 1024;

pub(crate) struct Replica {
    pub(crate) store: Arc<dyn ScriptStore>,
    pub(crate) audit: Option<Arc<AuditWriter>>,
    pub(crate) runner: Arc<dyn ScriptRunner>,
    pub(crate) config: BridgeConfig,
    /// Wakes idle workers (a local enqueue, a NOTIFY from another replica).
    pub(crate) wake: Arc<Notify>,
    /// Wakes waiters when a run ends on this replica.
    pub(crate) ended: Notify,
    /// Names each run that ended, here or (through the store) on another replica.
    pub(crate) finished: tokio::sync::broadcast::Sender<String>,
    pub(crate) executing: Mutex<HashMap<String, Executing>>,
    /// Held by a worker while it claims: one claim at a time on a replica, so each
    /// sees the runs the last one took as running, and an owner's fair share holds
    /// among this replica's workers (claims on other replicas may still race: see
    /// the store's claim).
    pub(crate) claiming: tokio::sync::Mutex<()>,
    /// No more claims: set when shutdown starts.
    pub(crate) draining: AtomicBool,
    /// Fires when workers must stop: their runs are released.
    pub(crate) stop: CancellationToken,
    /// When `stop` fired: endings in hand are tried for `ending_grace` after.
    pub(crate) stopped_at: Mutex<Option<tokio::time::Instant>>,
    /// How a run's span joins the trace it was queued in, once the embedder's
    /// tracing said ([`crate::RunBridge::join_traces_with`]).
    pub(crate) join_trace: std::sync::OnceLock<crate::JoinTrace>,
}

impl Replica {
    /// Nothing executing, not draining, not stopped.
    pub(crate) fn new(
        store: Arc<dyn ScriptStore>,
        audit: Option<Arc<AuditWriter>>,
        runner: Arc<dyn ScriptRunner>,
        config: BridgeConfig,
    ) -> Self {
        Self {
            store,
            audit,
            runner,
            config,
            wake: Arc::new(Notify::new()),
            ended: Notify::new(),
            finished: tokio::sync::broadcast::channel(FINISHED_BUFFER).0,
            executing: Mutex::new(HashMap::new()),
            claiming: tokio::sync::Mutex::new(()),
            draining: AtomicBool::new(false),
            stop: CancellationToken::new(),
            stopped_at: Mutex::new(None),
            join_trace: std::sync::OnceLock::new(),
        }
    }

    /// Stops the run if it executes here, for `reason`.
    pub(crate) fn stop_local(&self, run_id: &str, reason: StopReason) {
        if let Some(executing) = lock(&self.executing).get(run_id) {
            executing.stop(reason);
        }
    }

    /// Writes a run's one audit row, in the background: an audit failure never
    /// fails the run. A store briefly away is tried again, and a shutdown waits
    /// for it.
    pub(crate) fn audit_run(&self, run: &Run, duration_ms: i64) {
        if let Some(writer) = &self.audit {
            writer.write(audit::run_entry(run, duration_ms));
        }
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
