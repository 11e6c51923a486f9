//! The task state machine and the rules around it, as pure functions: no I/O and
//! no clock — every time is passed in.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

use crate::id::TaskId;

/// JSON-RPC's internal-error code, used for failures the platform records itself
/// (a replica that is gone, a shutdown).
pub const INTERNAL_ERROR: i64 = -32603;

/// Where a task is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for answers to its input requests.
    InputRequired,
    /// Ended with a result (possibly a tool error).
    Completed,
    /// Ended with a JSON-RPC error.
    Failed,
    /// Ended by a cancel.
    Cancelled,
}

impl TaskStatus {
    /// Whether the task has ended. A terminal status never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }

    /// Parses a stored name.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "working" => TaskStatus::Working,
            "input_required" => TaskStatus::InputRequired,
            "completed" => TaskStatus::Completed,
            "failed" => TaskStatus::Failed,
            "cancelled" => TaskStatus::Cancelled,
            _ => return None,
        })
    }

    /// Checks a transition. Terminal states are final; `working` and
    /// `input_required` move between each other and to any terminal state.
    ///
    /// # Errors
    /// [`TransitionError`] for a transition out of a terminal state or to itself.
    pub fn transition(self, to: TaskStatus) -> Result<TaskStatus, TransitionError> {
        if self.is_terminal() {
            return Err(TransitionError { from: self, to });
        }
        if self == to {
            return Err(TransitionError { from: self, to });
        }
        Ok(to)
    }
}

/// A transition the state machine does not allow. A value, not a panic: racing
/// writers meet this routinely, and the first terminal transition wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a task cannot go from {} to {}", .from.as_str(), .to.as_str())]
pub struct TransitionError {
    /// The status it was in.
    pub from: TaskStatus,
    /// The status asked for.
    pub to: TaskStatus,
}

/// A JSON-RPC error a failed task carries.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskError {
    /// The JSON-RPC error code.
    pub code: i64,
    /// What went wrong.
    pub message: String,
    /// Structured detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl TaskError {
    /// An internal error with `message`.
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            code: INTERNAL_ERROR,
            message: message.into(),
            data: None,
        }
    }

    /// The error of a task whose replica stopped heartbeating.
    pub fn replica_gone() -> Self {
        Self::internal(
            "the server replica running this task stopped before it finished; call the tool again",
        )
    }

    /// The error of a task whose outcome its replica could not record while the
    /// store was away, recorded once the store answered again.
    pub fn ending_lost() -> Self {
        Self::internal(
            "the task ended while the database was unavailable and its outcome could not be \
             recorded; call the tool again",
        )
    }

    /// The error of a task still running when its replica shut down.
    pub fn shut_down() -> Self {
        Self::internal("the server shut down before the task finished; call the tool again")
    }
}

/// How a task ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The tool's result (a `CallToolResult` as JSON), an `isError` one included.
    Completed(Value),
    /// A JSON-RPC error.
    Failed(TaskError),
    /// Stopped by a cancel.
    Cancelled,
}

impl Outcome {
    /// The status this outcome ends a task in.
    pub fn status(&self) -> TaskStatus {
        match self {
            Outcome::Completed(_) => TaskStatus::Completed,
            Outcome::Failed(_) => TaskStatus::Failed,
            Outcome::Cancelled => TaskStatus::Cancelled,
        }
    }

    /// Whether the outcome counts as a success for audit: completed without `isError`.
    pub fn is_success(&self) -> bool {
        match self {
            Outcome::Completed(result) => result.get("isError") != Some(&Value::Bool(true)),
            Outcome::Failed(_) | Outcome::Cancelled => false,
        }
    }
}

/// Who asks about a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The caller's subject (`apikey:alice`, `oidc:…`, `anonymous`).
    pub subject: String,
    /// Whether the caller is an administrator.
    pub is_admin: bool,
}

/// A task as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRecord {
    /// Its id.
    pub id: TaskId,
    /// The tool that runs it.
    pub tool: String,
    /// The call's arguments.
    pub arguments: Value,
    /// The subject of whoever started it.
    pub owner: String,
    /// A further subject that may follow it (for example a script's owner), if any.
    pub extra_follower: Option<String>,
    /// The replica running it.
    pub replica_id: String,
    /// Its stored status (see [`TaskRecord::view`] for what callers see).
    pub status: TaskStatus,
    /// What is happening, in words.
    pub status_message: Option<String>,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub last_updated_at: OffsetDateTime,
    /// When its replica was last heard from: the later of its replica's last
    /// beat and the task's own stamp (taken when it was created).
    pub heartbeat_at: OffsetDateTime,
    /// When a cancel was asked for, if one was.
    pub cancel_requested_at: Option<OffsetDateTime>,
    /// The result, once completed.
    pub result: Option<Value>,
    /// The error, once failed.
    pub error: Option<TaskError>,
    /// Outstanding input requests by key (a JSON object), while it waits for input.
    pub input_requests: Option<Value>,
    /// When it may be deleted; `None` while it lives as long as something else does.
    pub expires_at: Option<OffsetDateTime>,
    /// How often a client should poll, in milliseconds.
    pub poll_interval_ms: u64,
    /// Whether its replica had begun a graceful shutdown when it was read: a
    /// stale task of such a replica was stopped by that shutdown, not lost to a
    /// crash ([`TaskRecord::stale_error`]).
    pub replica_draining: bool,
    /// The trace of the request that created it, when it had one.
    pub trace_context: Option<crate::trace::TaskTrace>,
}

/// What a caller sees of a task at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskView {
    /// The status to report.
    pub status: TaskStatus,
    /// The message to report.
    pub status_message: Option<String>,
    /// The error to report, when failed.
    pub error: Option<TaskError>,
    /// Whether the failure was read from staleness rather than stored.
    pub stale: bool,
}

impl TaskRecord {
    /// Whether `caller` may follow this task: whoever started it, an
    /// administrator, or the extra follower the task kind names.
    pub fn may_follow(&self, caller: &Caller) -> bool {
        caller.is_admin
            || caller.subject == self.owner
            || self.extra_follower.as_deref() == Some(caller.subject.as_str())
    }

    /// Whether a working task's replica stopped stamping it `stale_after` before `now`.
    pub fn is_stale(&self, now: OffsetDateTime, stale_after: Duration) -> bool {
        !self.status.is_terminal() && now - self.heartbeat_at > stale_after
    }

    /// The task as a caller sees it at `now` (a time read from the database clock):
    /// a task whose replica is gone reads as failed, saying so.
    pub fn view(&self, now: OffsetDateTime, stale_after: Duration) -> TaskView {
        if self.is_stale(now, stale_after) {
            let error = self.stale_error();
            return TaskView {
                status: TaskStatus::Failed,
                status_message: Some(error.message.clone()),
                error: Some(error),
                stale: true,
            };
        }
        TaskView {
            status: self.status,
            status_message: self.status_message.clone(),
            error: self.error.clone(),
            stale: false,
        }
    }

    /// The error a stale task reads (and is recorded) with: "shut down" when its
    /// replica had announced its shutdown before it went silent, "replica gone"
    /// otherwise.
    pub fn stale_error(&self) -> TaskError {
        if self.replica_draining {
            TaskError::shut_down()
        } else {
            TaskError::replica_gone()
        }
    }

    /// The time-to-live to report, in milliseconds from creation; `None` is unlimited.
    pub fn ttl_ms(&self) -> Option<u64> {
        ttl_ms(self.created_at, self.expires_at)
    }
}

/// Milliseconds from `created_at` to `expires_at` (zero if already past), or
/// `None` (unlimited) when there is no expiry.
pub fn ttl_ms(created_at: OffsetDateTime, expires_at: Option<OffsetDateTime>) -> Option<u64> {
    let expires_at = expires_at?;
    let millis = (expires_at - created_at).whole_milliseconds().max(0);
    Some(u64::try_from(millis).unwrap_or(u64::MAX))
}

/// The expiry of an export task: `retention_days` after creation.
pub fn retention_expiry(created_at: OffsetDateTime, retention_days: u32) -> OffsetDateTime {
    created_at + time::Duration::days(i64::from(retention_days))
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::macros::datetime;

    use super::*;

    fn record(status: TaskStatus) -> TaskRecord {
        let created = datetime!(2026-11-30 10:00 UTC);
        TaskRecord {
            id: TaskId::from_stored("t".into()),
            tool: "trino_export".into(),
            arguments: json!({}),
            owner: "apikey:alice".into(),
            extra_follower: Some("apikey:owner".into()),
            replica_id: "a".into(),
            status,
            status_message: Some("412 000 rows".into()),
            created_at: created,
            last_updated_at: created,
            heartbeat_at: created,
            cancel_requested_at: None,
            result: None,
            error: None,
            input_requests: None,
            expires_at: Some(retention_expiry(created, 7)),
            poll_interval_ms: 1000,
            replica_draining: false,
            trace_context: None,
        }
    }

    #[test]
    fn terminal_states_are_final() {
        for terminal in [
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ] {
            for to in [
                TaskStatus::Working,
                TaskStatus::InputRequired,
                TaskStatus::Completed,
                TaskStatus::Failed,
                TaskStatus::Cancelled,
            ] {
                assert_eq!(
                    terminal.transition(to),
                    Err(TransitionError { from: terminal, to })
                );
            }
        }
        assert_eq!(
            TaskStatus::Working.transition(TaskStatus::InputRequired),
            Ok(TaskStatus::InputRequired)
        );
        assert_eq!(
            TaskStatus::InputRequired.transition(TaskStatus::Working),
            Ok(TaskStatus::Working)
        );
        assert_eq!(
            TaskStatus::InputRequired.transition(TaskStatus::Cancelled),
            Ok(TaskStatus::Cancelled)
        );
        assert!(TaskStatus::Working.transition(TaskStatus::Working).is_err());
    }

    #[test]
    fn statuses_round_trip_their_names() {
        for status in [
            TaskStatus::Working,
            TaskStatus::InputRequired,
            TaskStatus::Completed,
            TaskStatus::Failed,
            TaskStatus::Cancelled,
        ] {
            assert_eq!(TaskStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(TaskStatus::parse("done"), None);
    }

    #[test]
    fn starter_admins_and_the_extra_follower_may_follow() {
        let task = record(TaskStatus::Working);
        let caller = |subject: &str, is_admin| Caller {
            subject: subject.into(),
            is_admin,
        };
        assert!(task.may_follow(&caller("apikey:alice", false)));
        assert!(task.may_follow(&caller("apikey:owner", false)));
        assert!(task.may_follow(&caller("apikey:root", true)));
        assert!(!task.may_follow(&caller("apikey:bob", false)));
        assert!(!task.may_follow(&caller("anonymous", false)));
    }

    #[test]
    fn a_working_task_without_heartbeats_reads_as_failed() {
        let task = record(TaskStatus::Working);
        let stale_after = Duration::from_secs(30);
        let fresh = task.view(task.heartbeat_at + Duration::from_secs(30), stale_after);
        assert_eq!(fresh.status, TaskStatus::Working);
        let gone = task.view(task.heartbeat_at + Duration::from_secs(31), stale_after);
        assert_eq!(gone.status, TaskStatus::Failed);
        assert!(gone.stale);
        assert!(
            gone.error
                .as_ref()
                .is_some_and(|e| e.message.contains("call the tool again"))
        );
        let mut done = record(TaskStatus::Completed);
        done.result = Some(json!({"content": []}));
        assert_eq!(
            done.view(done.heartbeat_at + Duration::from_secs(3600), stale_after)
                .status,
            TaskStatus::Completed
        );
    }

    #[test]
    fn ttl_counts_from_creation_and_null_means_unlimited() {
        let task = record(TaskStatus::Working);
        assert_eq!(task.ttl_ms(), Some(7 * 86_400_000));
        assert_eq!(ttl_ms(task.created_at, None), None);
        assert_eq!(
            ttl_ms(
                task.created_at,
                Some(task.created_at - time::Duration::seconds(5))
            ),
            Some(0)
        );
    }

    #[test]
    fn success_is_completed_without_is_error() {
        assert!(Outcome::Completed(json!({"content": []})).is_success());
        assert!(!Outcome::Completed(json!({"content": [], "isError": true})).is_success());
        assert!(!Outcome::Failed(TaskError::internal("x")).is_success());
        assert!(!Outcome::Cancelled.is_success());
        assert_eq!(Outcome::Cancelled.status(), TaskStatus::Cancelled);
    }
}
