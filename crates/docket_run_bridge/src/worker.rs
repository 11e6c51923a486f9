//! One worker's loop: claim a run, execute it on the runner while renewing
//! its lease (hearing cancels on the way), and write its ending, fenced by the
//! lease — retried through an outage of the store, retried with backoff for a
//! platform fault, released on shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use docket_catalog::scripts::{Lease, Renewal, Run, RunEnding, RunErrorKind, RunStatus};
use docket_script::{RunProgress, ScriptFailure};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::replica::{Executing, Replica, StopReason, lock};

/// The first wait before writing a run's ending again; it doubles up to
/// [`LAST_ENDING_RETRY`].
const FIRST_ENDING_RETRY: Duration = Duration::from_millis(100);

/// The longest wait between two attempts to write a run's ending.
const LAST_ENDING_RETRY: Duration = Duration::from_secs(2);

impl Replica {
    /// One worker: claim, execute, repeat, until shutdown.
    pub(crate) async fn work(self: Arc<Self>, worker: String) {
        let mut failures = 0u32;
        while !self.draining.load(Ordering::SeqCst) {
            // Registered before the claim, so a wake between an empty claim and
            // the wait is not lost.
            let woken = self.wake.notified();
            let claimed = {
                let _turn = self.claiming.lock().await;
                self.store
                    .claim(
                        &worker,
                        self.config.lease,
                        self.config.max_running_per_owner,
                    )
                    .await
            };
            match claimed {
                Ok(Some(run)) => {
                    failures = 0;
                    let span = self.run_span(&run);
                    self.execute(run).instrument(span).await;
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

    /// The span a claimed run executes in: parented on the trace it was queued in,
    /// whichever replica queued it, so its child process and each `platform.call`
    /// are one trace with the request that asked for it.
    fn run_span(&self, run: &Run) -> tracing::Span {
        let span = tracing::info_span!(
            "script_run",
            otel.name = "script run",
            otel.kind = "internal",
            "docket.run.id" = %run.id,
            "docket.run.attempt" = run.attempt,
        );
        if let (Some(trace), Some(join)) = (&run.trace_context, self.join_trace.get()) {
            join(&span, trace);
        }
        span
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
        // Checked at every start (first, retry, reclaim): the owner's access is
        // what it is now, not what it was when the run was queued or its
        // schedule set.
        let owner = self.runner.owner_access(&run.script_owner).await;
        let roles = match crate::owners::acting_roles(&version.author_roles, owner) {
            Ok(roles) => roles,
            Err(message) => {
                self.end(&run, &lease, script_failure(message, json!({})), started)
                    .await;
                return;
            }
        };

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
            let sandbox = self.runner.run(
                &run,
                &version,
                &roles,
                cancel.clone(),
                Arc::clone(&progress),
            );
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
        // forever), or `ending_grace` into a shutdown.
        let lease_ends = tokio::time::Instant::now() + self.config.lease;
        let mut delay = FIRST_ENDING_RETRY;
        let written = loop {
            let error = match self.store.finish(lease, ending.clone()).await {
                Ok(written) => break Ok(written),
                Err(error) => error,
            };
            let give_up_at = match *lock(&self.stopped_at) {
                Some(stopped_at) => lease_ends.min(stopped_at + self.config.ending_grace),
                None => lease_ends,
            };
            if tokio::time::Instant::now() + delay > give_up_at {
                break Err(error);
            }
            tracing::warn!(%error, run = run.id, retry_in = ?delay, "could not end a run yet; retrying");
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(LAST_ENDING_RETRY);
        };
        match written {
            Ok(Some(status)) => {
                let mut ended = run.clone();
                ended.status = status;
                if status == ending.status {
                    ended.error = ending.error;
                    ended.error_kind = ending.error_kind;
                } else {
                    (ended.error, ended.error_kind) = (None, None);
                    tracing::info!(
                        run = run.id,
                        "a cancel asked for first won over the run's own ending"
                    );
                }
                self.audit_run(
                    &ended,
                    i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
                );
            }
            Ok(None) => tracing::warn!(run = run.id, "lost the lease before ending a run"),
            Err(error) => {
                tracing::warn!(%error, run = run.id, "could not end a run; its lease will expire and it runs again")
            }
        }
        self.ended.notify_waiters();
        let _ = self.finished.send(run.id.clone());
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
