//! [`Scheduler`]: turns due schedules into runs. Every replica may run one;
//! each fire time still becomes exactly one run (or one `skipped_overlap`
//! record), because the store fires a schedule with a compare-and-set and a
//! unique (script, fire time) key — no lock is held, no leader elected.
//!
//! A pass ([`Scheduler::tick`]) reads the schedules due at the clock's now,
//! and for each computes the fire owed (after downtime, only the latest fire
//! time, with the count missed) and hands it to the store. A schedule whose
//! script is disabled or deprecated advances without a run: disabling a
//! script stops its schedule, and enabling it again resumes at the next
//! regular fire time instead of catching up.
//!
//! A scheduled run is an ordinary run with trigger `schedule`: the newest
//! version at fire time, acting with that version's author's roles, the
//! schedule's arguments as its parameters (`${fire_date}` in a string
//! argument becomes the fire time's date in the schedule's zone), audited
//! when it ends, and deleted by the run retention.

use std::sync::Arc;
use std::time::Duration;

use docket_catalog::CatalogError;
use docket_catalog::scripts::{
    Fire, FireOutcome, NewRun, Run, Schedule, Script, ScriptStatus, ScriptStore,
};
use serde_json::Value;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::cadence::Cadence;
use crate::clock::Clock;

/// How many due schedules one pass reads at most; a pass that filled its
/// batch runs again at once.
const BATCH: u32 = 100;

/// The `${fire_date}` token of schedule arguments.
const FIRE_DATE: &str = "${fire_date}";

/// What one scheduler pass did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TickReport {
    /// The runs it queued.
    pub queued: Vec<Run>,
    /// Fires recorded as `skipped_overlap`.
    pub skipped_overlap: usize,
    /// Schedules of disabled scripts it moved on without a run.
    pub advanced: usize,
    /// Fires another replica made first (or whose schedule changed under it).
    pub lost: usize,
    /// Fire times the fires it made stand for, beyond themselves.
    pub missed: i64,
}

/// Fires due schedules; see the module docs.
pub struct Scheduler {
    store: Arc<dyn ScriptStore>,
    clock: Arc<dyn Clock>,
    replica_id: String,
    /// Woken when a fire queued a run, so a worker here claims it at once.
    wake: Option<Arc<Notify>>,
}

impl std::fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scheduler")
            .field("replica_id", &self.replica_id)
            .finish_non_exhaustive()
    }
}

impl Scheduler {
    /// A scheduler for `replica_id` over `store`, reading `clock`.
    pub fn new(
        store: Arc<dyn ScriptStore>,
        clock: Arc<dyn Clock>,
        replica_id: impl Into<String>,
    ) -> Self {
        Self {
            store,
            clock,
            replica_id: replica_id.into(),
            wake: None,
        }
    }

    /// Also wakes `wake` (a bridge's idle workers) when a fire queues a run.
    #[must_use]
    pub fn waking(mut self, wake: Arc<Notify>) -> Self {
        self.wake = Some(wake);
        self
    }

    /// The clock it reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// One pass at the clock's now: fires every due schedule once.
    ///
    /// # Errors
    /// [`CatalogError`] when the store fails; fires made before the failure
    /// stand.
    pub async fn tick(&self) -> Result<TickReport, CatalogError> {
        let mut report = TickReport::default();
        loop {
            let now = self.clock.now();
            let due = self.store.due_schedules(now, BATCH).await?;
            let full = due.len() >= BATCH as usize;
            let mut progressed = false;
            for (schedule, script) in due {
                progressed |= self.fire(&schedule, &script, now, &mut report).await?;
            }
            if !full || !progressed {
                return Ok(report);
            }
        }
    }

    /// Fires one due schedule; whether anything was written.
    async fn fire(
        &self,
        schedule: &Schedule,
        script: &Script,
        now: time::OffsetDateTime,
        report: &mut TickReport,
    ) -> Result<bool, CatalogError> {
        let due = match Cadence::parse(&schedule.cron, &schedule.timezone) {
            Ok(cadence) => cadence
                .due(schedule.next_fire_at, now)
                .map(|due| (cadence, due)),
            Err(error) => {
                tracing::warn!(%error, script = script.id, "a stored schedule does not parse");
                None
            }
        };
        let Some((cadence, due)) = due else {
            // A due schedule with no fire to make (its expression no longer
            // parses, or never fires again) would be read by every pass, ahead
            // of the others: it is disabled, and says so in schedule_list.
            tracing::warn!(
                script = script.id,
                cron = schedule.cron,
                "a schedule has no next fire time; it is disabled"
            );
            self.store
                .set_schedule_enabled(&script.id, false, schedule.next_fire_at)
                .await?;
            return Ok(true);
        };
        let runnable = script.enabled && script.status == ScriptStatus::Active;
        let run = if runnable {
            let id = crate::task::new_run_id().map_err(|error| {
                CatalogError::Unavailable(format!("could not draw a run id: {error}"))
            })?;
            Some(NewRun {
                id,
                script_id: script.id.clone(),
                script_name: script.name.clone(),
                script_owner: script.owner.clone(),
                version: script.version,
                params: with_fire_date(&schedule.args, &cadence, due.fire_time),
                // Nobody asked: the owner and administrators read it.
                requested_by: String::new(),
                trace_context: None,
            })
        } else {
            None
        };
        let outcome = self
            .store
            .fire_schedule(Fire {
                script_id: script.id.clone(),
                expected_next_fire_at: schedule.next_fire_at,
                fire_time: due.fire_time,
                missed: due.missed,
                next_fire_at: due.next,
                fired_by: self.replica_id.clone(),
                run,
            })
            .await?;
        match outcome {
            FireOutcome::Queued(run) => {
                report.missed += due.missed;
                if due.missed > 0 {
                    tracing::info!(script = script.id, missed = due.missed, fire_time = %due.fire_time, "fired the latest of a schedule's missed fires");
                }
                report.queued.push(*run);
                if let Some(wake) = &self.wake {
                    wake.notify_one();
                }
            }
            FireOutcome::SkippedOverlap => {
                report.missed += due.missed;
                report.skipped_overlap += 1;
                tracing::info!(script = script.id, fire_time = %due.fire_time, "the previous scheduled run is still open; the fire is recorded as skipped_overlap");
            }
            FireOutcome::Advanced => report.advanced += 1,
            _ => {
                report.lost += 1;
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Runs passes every `interval` by its clock until `stop`. The next pass is due
    /// at the instant `interval` after the previous one started, read once before
    /// that pass, so time the clock moved after that reading — during the pass (a
    /// slow pass, or a test's clock moved meanwhile) or between the pass and the
    /// wait — is never waited again: a pass that found nothing because the clock
    /// moved just after it read the time is followed by another at once.
    pub async fn run(self: Arc<Self>, interval: Duration, stop: CancellationToken) {
        let step = time::Duration::try_from(interval).unwrap_or(time::Duration::MAX);
        loop {
            let next = self.clock.now().saturating_add(step);
            if let Err(error) = self.tick().await {
                tracing::warn!(%error, "a scheduler pass failed; the next one tries again");
            }
            tokio::select! {
                () = self.clock.sleep_until(next) => {}
                () = stop.cancelled() => return,
            }
            // A pass due at once still lets other work run first.
            tokio::task::yield_now().await;
        }
    }
}

/// The schedule's arguments with `${fire_date}` in string values replaced by
/// the fire time's date in the schedule's zone (`2026-03-29`).
fn with_fire_date(args: &Value, cadence: &Cadence, fire_time: time::OffsetDateTime) -> Value {
    let date = cadence.local_date(fire_time);
    match args {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, value)| {
                    let value = match value {
                        Value::String(text) if text.contains(FIRE_DATE) => {
                            Value::String(text.replace(FIRE_DATE, &date))
                        }
                        other => other.clone(),
                    };
                    (key.clone(), value)
                })
                .collect(),
        ),
        other => other.clone(),
    }
}
