//! Schedules: at most one per script, a cron expression in a time zone with
//! the arguments its runs get, and the fires it made.
//!
//! The store does no calendar arithmetic: the scheduler (in
//! `docket_run_bridge`) computes fire times and hands each fire to
//! [`ScriptStore::fire_schedule`](super::ScriptStore::fire_schedule), which
//! makes it happen at most once however many replicas try: it advances the
//! schedule with a compare-and-set on `next_fire_at` and records the fire
//! under the unique key (script, fire time), in one transaction with the run
//! it queues.

use serde_json::Value;
use time::OffsetDateTime;

use super::{NewRun, Run};
use crate::error::{CatalogError, require};

/// A schedule to save (replacing the script's schedule, if it has one).
#[derive(Clone, Debug, PartialEq)]
pub struct NewSchedule {
    /// The script it runs.
    pub script_id: String,
    /// The cron expression, as given (five fields or a descriptor).
    pub cron: String,
    /// The IANA time zone the expression is read in.
    pub timezone: String,
    /// The bound arguments of each run, a JSON object.
    pub args: Value,
    /// The first fire time.
    pub next_fire_at: OffsetDateTime,
    /// Who set it.
    pub set_by: String,
}

impl NewSchedule {
    /// Checks what every store refuses.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] naming the rule the value breaks.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(!self.cron.is_empty(), "a schedule needs a cron expression")?;
        require(!self.timezone.is_empty(), "a schedule needs a time zone")?;
        require(self.args.is_object(), "schedule args must be a JSON object")
    }
}

/// A schedule as stored, with its script's name and owner.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// The script it runs (one schedule per script).
    pub script_id: String,
    /// The script's name.
    pub script_name: String,
    /// The script's owner.
    pub script_owner: String,
    /// The cron expression.
    pub cron: String,
    /// The IANA time zone.
    pub timezone: String,
    /// The arguments of each run.
    pub args: Value,
    /// Whether it fires.
    pub enabled: bool,
    /// The fire time the scheduler waits for.
    pub next_fire_at: OffsetDateTime,
    /// The last fire time it fired for.
    pub last_fire_at: Option<OffsetDateTime>,
    /// Fire times that passed while no scheduler ran (only the latest of a
    /// gap fires), counted since the schedule was set.
    pub missed_fires: i64,
    /// Who set it.
    pub set_by: String,
    /// When it was set.
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
}

/// One fire for [`ScriptStore::fire_schedule`](super::ScriptStore::fire_schedule).
#[derive(Clone, Debug, PartialEq)]
pub struct Fire {
    /// The schedule's script.
    pub script_id: String,
    /// The `next_fire_at` the scheduler read: the fire happens only if the
    /// schedule still waits for it (compare-and-set).
    pub expected_next_fire_at: OffsetDateTime,
    /// The fire time this fire is for (the latest one due).
    pub fire_time: OffsetDateTime,
    /// Fire times before it that passed unfired.
    pub missed: i64,
    /// The fire time after it, which the schedule waits for next.
    pub next_fire_at: OffsetDateTime,
    /// Which replica fires.
    pub fired_by: String,
    /// The run to queue; `None` advances the schedule without a run or a
    /// record (its script is disabled or deprecated: a disabled script's
    /// schedule is stopped, not piling up missed fires).
    pub run: Option<NewRun>,
}

/// What [`ScriptStore::fire_schedule`](super::ScriptStore::fire_schedule) did.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq)]
pub enum FireOutcome {
    /// The fire queued this run (trigger `schedule`).
    Queued(Box<Run>),
    /// The schedule's previous run was still queued or running: the fire is
    /// recorded as `skipped_overlap` and queues nothing.
    SkippedOverlap,
    /// The schedule advanced without a run (the fire had none to queue).
    Advanced,
    /// Another replica fired first, or the schedule changed or was disabled:
    /// nothing was written.
    Lost,
}

/// What became of one fire.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FireStatus {
    /// It queued a run.
    Queued,
    /// The previous run was still open: it queued nothing.
    SkippedOverlap,
}

impl FireStatus {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            FireStatus::Queued => "queued",
            FireStatus::SkippedOverlap => "skipped_overlap",
        }
    }

    /// The status a stored name names.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "queued" => Some(FireStatus::Queued),
            "skipped_overlap" => Some(FireStatus::SkippedOverlap),
            _ => None,
        }
    }
}

/// A fire as recorded: one per (script, fire time), ever.
#[derive(Clone, Debug, PartialEq)]
pub struct FireRecord {
    /// The schedule's script.
    pub script_id: String,
    /// The fire time.
    pub fire_time: OffsetDateTime,
    /// What became of it.
    pub status: FireStatus,
    /// The run it queued.
    pub run_id: Option<String>,
    /// Fire times before it that passed unfired.
    pub missed: i64,
    /// The replica that fired it.
    pub fired_by: String,
    /// When it was recorded.
    pub created_at: OffsetDateTime,
}

/// How a run came to be.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunTrigger {
    /// `run_script` (or a task of it).
    Tool,
    /// A schedule's fire.
    Schedule,
}

impl RunTrigger {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunTrigger::Tool => "tool",
            RunTrigger::Schedule => "schedule",
        }
    }

    /// The trigger a stored name names.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "tool" => Some(RunTrigger::Tool),
            "schedule" => Some(RunTrigger::Schedule),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for status in [FireStatus::Queued, FireStatus::SkippedOverlap] {
            assert_eq!(FireStatus::parse(status.as_str()), Some(status));
        }
        for trigger in [RunTrigger::Tool, RunTrigger::Schedule] {
            assert_eq!(RunTrigger::parse(trigger.as_str()), Some(trigger));
        }
    }
}
