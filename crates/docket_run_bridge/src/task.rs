//! A run is its task: the task record `tasks/get` answers for a run id, built
//! from the run row alone (nothing is stored in the task table for a run).
//!
//! - queued → `working`, "queued"; running → `working`, "running, N tool
//!   calls" (the count the worker stamps with each lease renewal);
//! - succeeded → `completed` with the `CallToolResult` a direct `run_script`
//!   returns, and a script error → `completed` with that result too (it has
//!   `isError: true`): the caller passes that result in, since only the server
//!   knows the wire shape;
//! - a platform fault → `failed` with an internal error;
//! - cancelled → `cancelled`.
//!
//! The task lives as long as the run: while unfinished its expiry is unset
//! (`ttlMs` null); after, it expires `run_retention` after the run finished.
//! Followers: whoever asked for the run and the script's owner (the record's
//! owner and extra follower), and administrators.

use std::time::Duration;

use docket_catalog::scripts::{Run, RunErrorKind, RunStatus};
use docket_task::{IdPrefix, TaskError, TaskId, TaskRecord, TaskStatus};
use serde_json::Value;
use time::OffsetDateTime;

use crate::RUN_SCRIPT_TOOL;

/// The prefix of every run id minted here (`run_…`): `tasks/*` looks an id with it
/// up only among the runs, and an id with another prefix never among them.
pub const RUN_IDS: IdPrefix = IdPrefix::new("run");

/// A fresh run id: 128 bits from the OS random source, `run_` and 32 hex digits.
///
/// # Errors
/// When the OS random source fails.
pub fn new_run_id() -> Result<String, getrandom::Error> {
    TaskId::generate_in(RUN_IDS).map(|id| id.as_str().to_owned())
}

/// The task record of `run` at `now` (database clock). `result` is the
/// `CallToolResult` (as JSON) of an ended run that has one: succeeded, or
/// failed by its script.
pub fn run_task(
    run: &Run,
    now: OffsetDateTime,
    run_retention: Duration,
    poll_interval_ms: u64,
    result: Option<Value>,
) -> TaskRecord {
    let (status, status_message, error) = match run.status {
        RunStatus::Queued => (TaskStatus::Working, Some("queued".to_owned()), None),
        RunStatus::Running => (
            TaskStatus::Working,
            Some(format!("running, {} tool calls", run.host_calls)),
            None,
        ),
        RunStatus::Succeeded => (TaskStatus::Completed, None, None),
        RunStatus::Failed if run.error_kind == Some(RunErrorKind::Platform) => {
            let message = run
                .error
                .clone()
                .unwrap_or_else(|| "the run failed on a platform fault".to_owned());
            (
                TaskStatus::Failed,
                Some(message.clone()),
                Some(TaskError::internal(message)),
            )
        }
        RunStatus::Failed => (TaskStatus::Completed, None, None),
        // `RunStatus` is non-exhaustive; cancelled and anything newer read as ended.
        _ => (TaskStatus::Cancelled, None, None),
    };
    let expires_at = run.finished_at.map(|finished_at| {
        finished_at + time::Duration::try_from(run_retention).unwrap_or(time::Duration::MAX)
    });
    TaskRecord {
        id: TaskId::from_stored(run.id.clone()),
        tool: RUN_SCRIPT_TOOL.to_owned(),
        arguments: Value::Null,
        owner: run.requested_by.clone(),
        extra_follower: Some(run.script_owner.clone()),
        replica_id: run.lease_owner.clone().unwrap_or_default(),
        status,
        status_message,
        created_at: run.created_at,
        last_updated_at: run.updated_at,
        // A run is never stale the way an export task is: its lease brings it
        // back to the queue when its worker dies. Stamping "now" keeps the
        // staleness rule from ever applying.
        heartbeat_at: now,
        cancel_requested_at: run.cancel_requested_at,
        result: if status == TaskStatus::Completed {
            result
        } else {
            None
        },
        error,
        input_requests: None,
        expires_at,
        poll_interval_ms,
        // A run is taken over, never failed stale.
        replica_draining: false,
        trace_context: None,
    }
}
