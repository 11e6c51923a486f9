//! Managed scripts and their runs: [`Script`] rows (unique name per owner),
//! immutable [`ScriptVersion`]s (the source of each save, with the roles its
//! author held), and [`Run`]s — one table that is both the run queue and the
//! run history — behind the [`ScriptStore`] trait that `docket_storage`
//! implements on PostgreSQL and SQLite, and
//! [`MemoryScripts`](crate::memory::MemoryScripts) in memory.
//!
//! The queue: [`ScriptStore::enqueue`] inserts a `queued` run (and, on
//! PostgreSQL, announces it with `NOTIFY docket_runs`); a worker takes one with
//! [`ScriptStore::claim`], which also takes back `running` runs whose lease
//! expired (their worker died) — on PostgreSQL with `FOR UPDATE SKIP LOCKED`, so
//! workers on many replicas never take the same run. A claim raises the run's
//! `attempt`, and every later write of that worker ([`ScriptStore::renew`],
//! [`ScriptStore::finish`], [`ScriptStore::retry`], [`ScriptStore::release`]) is
//! fenced by `(id, lease owner, attempt)`: a worker that lost its lease writes
//! nothing.
//!
//! Schedules (`schedule`): at most one per script, fired through
//! [`ScriptStore::fire_schedule`], which makes each fire time one run (trigger
//! `schedule`) or one `skipped_overlap` record, once, however many replicas
//! fire it.
//!
//! Authorisation is not here: the store answers for any id or owner it is given.
//! Failures reuse [`CatalogError`].

mod schedule;
#[cfg(feature = "testing")]
pub mod testing;

pub use schedule::{Fire, FireOutcome, FireRecord, FireStatus, NewSchedule, RunTrigger, Schedule};

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use time::OffsetDateTime;

use crate::error::{CatalogError, require};
use crate::page::PageCursor;

/// A script to create: its first version is saved with it.
#[derive(Clone, Debug, PartialEq)]
pub struct NewScript {
    /// Its id (from [`generate_id`](crate::generate_id)).
    pub id: String,
    /// Who owns it.
    pub owner: String,
    /// Its name, unique per owner.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The parameter contract, a JSON array.
    pub params: Value,
    /// The Starlark source.
    pub source: String,
    /// Who saved this version.
    pub author: String,
    /// The roles the author held when saving.
    pub author_roles: Vec<String>,
}

/// A change to a script: the fields given replace the current ones. Every change
/// saves a new version (copying what is not given), so a run always names the
/// exact source and roles it ran with.
///
/// A version carries the roles of the author of its *source*: a change that
/// brings new source (given and different from the current source) makes the
/// editor that version's author, with the editor's roles; any other change
/// (description, parameters, enabled, status) keeps the current version's
/// author and roles, whoever makes it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ScriptChange {
    /// A new description.
    pub description: Option<String>,
    /// A new parameter contract.
    pub params: Option<Value>,
    /// New source.
    pub source: Option<String>,
    /// Enables or disables runs.
    pub enabled: Option<bool>,
    /// A new status.
    pub status: Option<ScriptStatus>,
    /// Who makes the change; the new version's author only when it brings new
    /// source.
    pub editor: String,
    /// The roles the editor holds, which the new version carries only when the
    /// change brings new source.
    pub editor_roles: Vec<String>,
    /// The version the change was made against: when given and the script is
    /// no longer at it, nothing changes and the store answers
    /// [`CatalogError::Stale`] (a patch computed on an old source must not
    /// overwrite a newer one).
    pub base_version: Option<i32>,
}

/// Whether a script may still be run.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptStatus {
    /// In use.
    Active,
    /// Kept for its history; it must not be run.
    Deprecated,
}

impl ScriptStatus {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            ScriptStatus::Active => "active",
            ScriptStatus::Deprecated => "deprecated",
        }
    }

    /// The status a stored name names.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "active" => Some(ScriptStatus::Active),
            "deprecated" => Some(ScriptStatus::Deprecated),
            _ => None,
        }
    }
}

/// A script as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Script {
    /// Its id.
    pub id: String,
    /// Who owns it.
    pub owner: String,
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The parameter contract of the newest version.
    pub params: Value,
    /// Whether it may be run.
    pub status: ScriptStatus,
    /// Whether runs are enabled.
    pub enabled: bool,
    /// The newest version's number.
    pub version: i32,
    /// When it was created (database clock).
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
}

/// One saved version of a script.
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptVersion {
    /// The script.
    pub script_id: String,
    /// Its number, from 1.
    pub version: i32,
    /// The Starlark source.
    pub source: String,
    /// The description at this version.
    pub description: String,
    /// The parameter contract at this version.
    pub params: Value,
    /// Who saved it.
    pub author: String,
    /// The roles the author held when saving.
    pub author_roles: Vec<String>,
    /// When it was saved.
    pub created_at: OffsetDateTime,
}

/// Where a run is in its life.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Waiting for a worker.
    Queued,
    /// A worker holds its lease.
    Running,
    /// The script ended without an error.
    Succeeded,
    /// The script failed, or the platform gave up on it.
    Failed,
    /// Cancelled before it ended.
    Cancelled,
}

impl RunStatus {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    /// The status a stored name names.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "queued" => Some(RunStatus::Queued),
            "running" => Some(RunStatus::Running),
            "succeeded" => Some(RunStatus::Succeeded),
            "failed" => Some(RunStatus::Failed),
            "cancelled" => Some(RunStatus::Cancelled),
            _ => None,
        }
    }

    /// Whether the run has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Succeeded | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whose fault a failed run was.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunErrorKind {
    /// The script's: deterministic, never retried.
    Script,
    /// The platform's: retried a bounded number of times.
    Platform,
}

impl RunErrorKind {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunErrorKind::Script => "script",
            RunErrorKind::Platform => "platform",
        }
    }

    /// The kind a stored name names.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "script" => Some(RunErrorKind::Script),
            "platform" => Some(RunErrorKind::Platform),
            _ => None,
        }
    }
}

/// A run to queue.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRun {
    /// Its id: 128 random bits, also its task id.
    pub id: String,
    /// The script.
    pub script_id: String,
    /// The script's name.
    pub script_name: String,
    /// The script's owner.
    pub script_owner: String,
    /// The version to run.
    pub version: i32,
    /// The bound parameters, a JSON object.
    pub params: Value,
    /// Who asked for it.
    pub requested_by: String,
    /// The trace of the request that asked for it (the W3C `traceparent`, then a
    /// line break and the `tracestate` when there is one: `docket_task::TaskTrace`'s
    /// column form), which the worker that runs it continues; at most
    /// [`MAX_TRACE_CONTEXT_BYTES`].
    pub trace_context: Option<String>,
}

/// The longest [`NewRun::trace_context`] kept, in bytes.
pub const MAX_TRACE_CONTEXT_BYTES: usize = 641;

/// A run as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Run {
    /// Its id.
    pub id: String,
    /// The script.
    pub script_id: String,
    /// The script's name.
    pub script_name: String,
    /// The script's owner.
    pub script_owner: String,
    /// The version it runs.
    pub version: i32,
    /// Where it is.
    pub status: RunStatus,
    /// The bound parameters.
    pub params: Value,
    /// Who asked for it (empty for a scheduled run).
    pub requested_by: String,
    /// How it came to be.
    pub trigger: RunTrigger,
    /// The fire time it runs for, when a schedule queued it.
    pub fire_time: Option<OffsetDateTime>,
    /// How many times a worker claimed it (the fencing token).
    pub attempt: i32,
    /// Platform faults so far (retried failures of the platform; not reclaims).
    pub platform_faults: i32,
    /// How many times a claim took the run back from a worker whose lease
    /// expired (its replica vanished mid-run).
    pub reclaims: i32,
    /// The worker holding its lease.
    pub lease_owner: Option<String>,
    /// When that lease ends.
    pub lease_expires_at: Option<OffsetDateTime>,
    /// When a cancel was first asked for.
    pub cancel_requested_at: Option<OffsetDateTime>,
    /// Tool calls so far.
    pub host_calls: i64,
    /// The script's result, once succeeded.
    pub result: Option<Value>,
    /// Why it failed.
    pub error: Option<String>,
    /// Whose fault the failure was.
    pub error_kind: Option<RunErrorKind>,
    /// What the script printed.
    pub log: Option<String>,
    /// Whether the log was cut at its limit.
    pub log_truncated: bool,
    /// `{steps, host_calls, duration_ms}` once ended.
    pub metrics: Value,
    /// When it was queued.
    pub created_at: OffsetDateTime,
    /// When a worker first took it.
    pub started_at: Option<OffsetDateTime>,
    /// When it ended.
    pub finished_at: Option<OffsetDateTime>,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
    /// The trace of the request that asked for it ([`NewRun::trace_context`]).
    pub trace_context: Option<String>,
}

impl Run {
    /// The lease a claim returned this run with, when a worker holds it.
    pub fn lease(&self) -> Option<Lease> {
        Some(Lease {
            run_id: self.id.clone(),
            owner: self.lease_owner.clone()?,
            attempt: self.attempt,
        })
    }
}

/// What fences a worker's writes to the run it claimed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The run.
    pub run_id: String,
    /// The worker.
    pub owner: String,
    /// The attempt the claim started.
    pub attempt: i32,
}

/// How a run ends.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEnding {
    /// `Succeeded`, `Failed` or `Cancelled`.
    pub status: RunStatus,
    /// The result, when succeeded.
    pub result: Option<Value>,
    /// Why it failed.
    pub error: Option<String>,
    /// Whose fault the failure was.
    pub error_kind: Option<RunErrorKind>,
    /// What the script printed.
    pub log: String,
    /// Whether the log was cut.
    pub log_truncated: bool,
    /// `{steps, host_calls, duration_ms}`.
    pub metrics: Value,
}

/// What a lease renewal found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// The lease is held for another period; whether a cancel was asked for.
    Held {
        /// A cancel was asked for.
        cancel_requested: bool,
    },
    /// The lease is gone (expired and claimed by another worker, or the run was
    /// deleted): stop and write nothing.
    Lost,
}

/// What asking to cancel a run did.
#[derive(Clone, Debug, PartialEq)]
pub enum CancelOutcome {
    /// The run was queued and is now cancelled.
    Ended(Box<Run>),
    /// The run is running; its worker was asked to stop.
    Requested,
    /// The run had already ended; it keeps its outcome.
    AlreadyEnded,
}

/// A cross-replica signal about a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RunSignal {
    /// A run was queued (or put back in the queue): a worker may claim it.
    Queued(String),
    /// A cancel was asked for this running run.
    Cancel(String),
    /// The run ended: followers read it again.
    Ended(String),
}

/// Hears [`RunSignal`]s from other replicas.
pub type RunSignalListener = Arc<dyn Fn(RunSignal) + Send + Sync>;

/// Which runs to list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only this script's runs.
    pub script_id: Option<String>,
    /// Only runs this subject asked for or whose script it owns.
    pub visible_to: Option<String>,
    /// Only runs strictly before this position, newest first (the next page).
    pub before: Option<PageCursor>,
    /// Only runs in this status.
    pub status: Option<RunStatus>,
}

/// What the script tools and the run bridge need from a database.
#[async_trait]
pub trait ScriptStore: Send + Sync + 'static {
    /// Creates a script with its first version, in one transaction, unless its
    /// owner already owns `owner_limit` scripts. The count and the insert are
    /// one step: racing creates of one owner never pass the limit.
    ///
    /// # Errors
    /// [`CatalogError::Duplicate`] when the owner has a script of that name (or
    /// the id exists), [`CatalogError::LimitReached`] with `owner_limit` when
    /// the owner has that many, [`CatalogError::Invalid`] for a malformed
    /// value, [`CatalogError::Unavailable`] when the database fails.
    async fn create_script(
        &self,
        script: NewScript,
        owner_limit: u32,
    ) -> Result<(Script, ScriptVersion), CatalogError>;

    /// Applies a change and saves it as the next version; `None` when the script
    /// does not exist.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] or [`CatalogError::Unavailable`].
    async fn update_script(
        &self,
        id: &str,
        change: ScriptChange,
    ) -> Result<Option<(Script, ScriptVersion)>, CatalogError>;

    /// The script of `owner` called `name`.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn find_script(&self, owner: &str, name: &str) -> Result<Option<Script>, CatalogError>;

    /// The script with this id.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn script(&self, id: &str) -> Result<Option<Script>, CatalogError>;

    /// At most `limit` scripts of `owner` (everyone's with `None`), by name.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn list_scripts(
        &self,
        owner: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Script>, CatalogError>;

    /// Deletes a script with its versions and runs; whether it existed.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`].
    async fn delete_script(&self, id: &str) -> Result<bool, CatalogError>;

    /// One version of a script.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn script_version(
        &self,
        script_id: &str,
        version: i32,
    ) -> Result<Option<ScriptVersion>, CatalogError>;

    /// Queues a run, committed (and announced) before it returns.
    ///
    /// # Errors
    /// [`CatalogError::Duplicate`], [`CatalogError::Invalid`] or
    /// [`CatalogError::Unavailable`].
    async fn enqueue(&self, run: NewRun) -> Result<Run, CatalogError>;

    /// The run with this id, with the database clock's current time.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn run(&self, id: &str) -> Result<Option<(Run, OffsetDateTime)>, CatalogError>;

    /// At most `limit` runs matching `filter`, newest first.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn list_runs(&self, filter: &RunFilter, limit: u32) -> Result<Vec<Run>, CatalogError>;

    /// Claims the oldest claimable run for `worker` — a queued run whose
    /// `not_before` has come, or a running run whose lease expired (counted in
    /// [`Run::reclaims`], not as a platform fault) — leasing it for `lease`,
    /// passing over the runs of owners who already hold
    /// `max_running_per_owner` running runs under a live lease (the fair share:
    /// one owner's queue cannot take every worker). `None` when there is none.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn claim(
        &self,
        worker: &str,
        lease: Duration,
        max_running_per_owner: u32,
    ) -> Result<Option<Run>, CatalogError>;

    /// Extends a held lease by `lease` from now and records the tool calls made
    /// so far; reports whether a cancel was asked for, or that the lease is lost.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`].
    async fn renew(
        &self,
        lease: &Lease,
        duration: Duration,
        host_calls: i64,
    ) -> Result<Renewal, CatalogError>;

    /// Ends a run the lease holds, in one compare-and-set; the status it ended
    /// the run in, `None` when the lease was lost (nothing written). A cancel
    /// asked for before it wins: a run whose cancel was recorded ends `cancelled`
    /// (with no result or error, its log and metrics kept), whatever `ending`
    /// says — the signal that would have stopped it may never have arrived.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] for a non-terminal status,
    /// [`CatalogError::Unavailable`].
    async fn finish(
        &self,
        lease: &Lease,
        ending: RunEnding,
    ) -> Result<Option<RunStatus>, CatalogError>;

    /// Puts a run back in the queue after a platform fault, not before `delay`
    /// from now, counting the fault; `false` when the lease was lost.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`].
    async fn retry(
        &self,
        lease: &Lease,
        error: &str,
        delay: Duration,
    ) -> Result<bool, CatalogError>;

    /// Puts a run back in the queue without counting a fault (its worker is
    /// shutting down); `false` when the lease was lost.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`].
    async fn release(&self, lease: &Lease) -> Result<bool, CatalogError>;

    /// Asks to cancel a run: a queued run ends `cancelled` at once, a running
    /// one is marked (and its worker told); `None` when there is no such run.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn cancel_run(&self, id: &str) -> Result<Option<CancelOutcome>, CatalogError>;

    /// Deletes at most `limit` runs that ended more than `retention` ago;
    /// returns their ids.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`].
    async fn delete_finished_runs(
        &self,
        retention: Duration,
        limit: u32,
    ) -> Result<Vec<String>, CatalogError>;

    /// Sets `schedule` as its script's one schedule (replacing any), enabled,
    /// with its missed-fire count at 0 — unless the script's owner already has
    /// `owner_limit` schedules on other scripts (replacing one adds none). The
    /// count and the write are one step: racing sets never pass the limit.
    ///
    /// # Errors
    /// [`CatalogError::LimitReached`] with `owner_limit`,
    /// [`CatalogError::Invalid`], or [`CatalogError::Unavailable`] (also when
    /// the script does not exist).
    async fn set_schedule(
        &self,
        schedule: NewSchedule,
        owner_limit: u32,
    ) -> Result<Schedule, CatalogError>;

    /// The schedule of this script.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn schedule(&self, script_id: &str) -> Result<Option<Schedule>, CatalogError>;

    /// At most `limit` schedules of `owner`'s scripts (everyone's with
    /// `None`), by script name.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn list_schedules(
        &self,
        owner: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Schedule>, CatalogError>;

    /// Enables or disables a script's schedule; enabling sets the fire time it
    /// waits for (fires that passed while it was disabled are not missed: it
    /// was told not to fire). `None` when the script has no schedule.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn set_schedule_enabled(
        &self,
        script_id: &str,
        enabled: bool,
        next_fire_at: OffsetDateTime,
    ) -> Result<Option<Schedule>, CatalogError>;

    /// At most `limit` enabled schedules whose `next_fire_at` is at or before
    /// `now`, with their scripts, soonest first.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn due_schedules(
        &self,
        now: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<(Schedule, Script)>, CatalogError>;

    /// Fires a schedule once: in one transaction, advances it from
    /// `expected_next_fire_at` to `next_fire_at` (adding `missed`) only if it
    /// still waits for `expected_next_fire_at`, records the fire under the
    /// unique (script, fire time), and queues the run — or records
    /// `skipped_overlap` when the schedule's previous run is still queued or
    /// running. Whoever loses a race writes nothing.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`], [`CatalogError::Unavailable`].
    async fn fire_schedule(&self, fire: Fire) -> Result<FireOutcome, CatalogError>;

    /// The newest `limit` fires of a script's schedule, newest first.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn schedule_fires(
        &self,
        script_id: &str,
        limit: u32,
    ) -> Result<Vec<FireRecord>, CatalogError>;

    /// Deletes at most `limit` fire records older than `retention`; how many.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`].
    async fn delete_old_fires(&self, retention: Duration, limit: u32) -> Result<u64, CatalogError>;

    /// Installs the listener for run signals from other replicas. The default
    /// does nothing: on one replica there is no one to hear from.
    fn set_run_listener(&self, listener: RunSignalListener) {
        let _ = listener;
    }
}

impl NewScript {
    /// Checks what every store refuses, with a message that says why.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] naming the rule the value breaks.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(!self.id.is_empty(), "a script id must not be empty")?;
        require(!self.name.is_empty(), "a script name must not be empty")?;
        require(self.params.is_array(), "params must be a JSON array")
    }
}

impl ScriptChange {
    /// Checks what every store refuses, with a message that says why.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] naming the rule the value breaks.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(
            self.params.as_ref().is_none_or(Value::is_array),
            "params must be a JSON array",
        )
    }

    /// The source this change brings, when it is new: given, and not the
    /// `current` source again. Only new source makes the editor an author.
    pub fn new_source(&self, current: &str) -> Option<&str> {
        self.source.as_deref().filter(|source| *source != current)
    }
}

impl Fire {
    /// Checks what every store refuses, with a message that says why.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] naming the rule the value breaks.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(self.missed >= 0, "a missed count is not negative")?;
        require(
            self.fire_time >= self.expected_next_fire_at && self.next_fire_at > self.fire_time,
            "a fire is at or after the time the schedule waits for, and before the next",
        )?;
        self.run.as_ref().map_or(Ok(()), NewRun::validate)
    }
}

impl NewRun {
    /// Checks what every store refuses, with a message that says why.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] naming the rule the value breaks.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(!self.id.is_empty(), "a run id must not be empty")?;
        if let Some(trace) = &self.trace_context {
            require(
                trace.len() <= MAX_TRACE_CONTEXT_BYTES,
                "a run's trace context is at most 641 bytes",
            )?;
            require(
                trace.bytes().filter(|byte| *byte == b'\n').count() <= 1
                    && trace
                        .bytes()
                        .all(|byte| byte == b'\n' || (0x20..0x7f).contains(&byte)),
                "a run's trace context is two header values on two lines",
            )?;
        }
        require(self.params.is_object(), "run params must be a JSON object")
    }
}

impl RunEnding {
    /// Checks what every store refuses, with a message that says why.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] for a status that is not terminal.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(self.status.is_terminal(), "a run ends in a terminal status")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for status in [
            RunStatus::Queued,
            RunStatus::Running,
            RunStatus::Succeeded,
            RunStatus::Failed,
            RunStatus::Cancelled,
        ] {
            assert_eq!(RunStatus::parse(status.as_str()), Some(status));
        }
        for kind in [RunErrorKind::Script, RunErrorKind::Platform] {
            assert_eq!(RunErrorKind::parse(kind.as_str()), Some(kind));
        }
        for status in [ScriptStatus::Active, ScriptStatus::Deprecated] {
            assert_eq!(ScriptStatus::parse(status.as_str()), Some(status));
        }
    }

    #[test]
    fn only_different_source_is_new_source() {
        let change = ScriptChange {
            source: Some("result = 1".into()),
            ..ScriptChange::default()
        };
        assert_eq!(change.new_source("result = 1"), None);
        assert_eq!(change.new_source("result = 2"), Some("result = 1"));
        assert_eq!(ScriptChange::default().new_source("result = 1"), None);
    }
}
