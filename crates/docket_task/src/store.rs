//! The [`TaskStore`] trait: what the task machinery needs from a database.
//!
//! Every method is one short transaction. The rules an implementation must keep:
//! - [`TaskStore::create`] returns only after the row is committed, so a read on any
//!   replica finds the task at once.
//! - Terminal transitions are compare-and-set: only a task that has not ended can
//!   end, so a late completion never overwrites a cancel and two writers racing to
//!   end a task cannot both win. The winner also writes the task's one audit row, in
//!   the same transaction.
//! - [`TaskStore::heartbeat`] stamps ALL of a replica's running tasks in one
//!   statement and returns those with a cancel requested.
//! - Times that decide staleness and expiry come from the database clock.
//! - A store that signals other replicas ([`TaskStore::set_signal_listener`]) sends
//!   [`TaskSignal::Changed`] for every change a follower would see: an ending, a
//!   status message a beat stored, and a move to or from `input_required`. The
//!   runtime tells this replica's followers itself.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::id::TaskId;
use crate::model::{Outcome, TaskRecord, TaskStatus};
use crate::trace::TaskTrace;
use crate::upstream::Upstream;

/// A task the stale sweep ended ([`TaskStore::fail_stale`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleTask {
    /// Its id.
    pub id: TaskId,
    /// The trace it was created in, when it keeps one.
    pub trace: Option<TaskTrace>,
}

/// A task to create.
#[derive(Clone, Debug, PartialEq)]
pub struct NewTask {
    /// Its id (from [`TaskId::generate`]).
    pub id: TaskId,
    /// The tool that runs it.
    pub tool: String,
    /// The call's arguments, as given.
    pub arguments: Value,
    /// The subject of whoever starts it.
    pub owner: String,
    /// A further subject that may follow it, if the task kind names one.
    pub extra_follower: Option<String>,
    /// The replica that will run it.
    pub replica_id: String,
    /// The first status message.
    pub status_message: Option<String>,
    /// How long after creation it may be deleted; `None` for no expiry of its own.
    pub retention: Option<Duration>,
    /// How often a client should poll, in milliseconds.
    pub poll_interval_ms: u64,
    /// What its audit row will record when it ends.
    pub audit: AuditContext,
    /// The trace of the request that created it, which whoever executes,
    /// cancels or ends it continues; `None` when that request had none.
    pub trace_context: Option<TaskTrace>,
}

/// Where a page of [`TaskStore::list_followed`] ended: the next page holds the
/// tasks strictly after this position in newest-first order. A position, not a
/// row: it stays valid when the task it came from is deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskPosition {
    /// The creation time of the last task listed.
    pub created_at: OffsetDateTime,
    /// Its id, which orders tasks created at the same instant.
    pub id: TaskId,
}

impl TaskPosition {
    /// The position just after `record`.
    pub fn after(record: &TaskRecord) -> Self {
        Self {
            created_at: record.created_at,
            id: record.id.clone(),
        }
    }

    /// Whether `record` comes strictly after this position, newest first.
    pub fn precedes(&self, record: &TaskRecord) -> bool {
        (record.created_at, record.id.as_str()) < (self.created_at, self.id.as_str())
    }
}

/// What an audit row records about a call besides its outcome.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AuditContext {
    /// The caller's persona.
    pub persona: Option<String>,
    /// The connection the call used, if any.
    pub connection: Option<String>,
    /// The arguments with secrets redacted.
    pub arguments: Value,
}

/// One audit row: a `tools/call` that ended.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditEntry {
    /// The tool.
    pub tool: String,
    /// Who called.
    pub subject: String,
    /// Persona, connection and redacted arguments.
    pub context: AuditContext,
    /// Whether it succeeded (completed without `isError`).
    pub success: bool,
    /// `completed`, `tool_error`, `failed` or `cancelled`.
    pub outcome: String,
    /// The error message, when it did not succeed.
    pub error_message: Option<String>,
    /// How long it took, in milliseconds.
    pub duration_ms: i64,
    /// Docket's id of the call, so the row can be found from the call's other
    /// traces (its call record, an engine's query log). For a task it is the task
    /// id, unless the result named another ([`Upstream::call_id`]).
    pub call_id: Option<String>,
    /// The Trino session user the call ran as, when it reached Trino
    /// ([`Upstream::engine_user`]).
    pub engine_user: Option<String>,
    /// The Trino query ids the call caused, in the order it submitted them, at
    /// most [`MAX_UPSTREAM_IDS`](crate::upstream::MAX_UPSTREAM_IDS)
    /// ([`Upstream::query_ids`]).
    pub upstream_ids: Vec<String>,
}

impl NewTask {
    /// The task as a store holds it once inserted: `working`, created (and last
    /// updated, and stamped) at `created_at`, expiring at `expires_at`; every
    /// other field as given.
    pub fn into_record(
        self,
        created_at: OffsetDateTime,
        expires_at: Option<OffsetDateTime>,
    ) -> TaskRecord {
        TaskRecord {
            id: self.id,
            tool: self.tool,
            arguments: self.arguments,
            owner: self.owner,
            extra_follower: self.extra_follower,
            replica_id: self.replica_id,
            status: TaskStatus::Working,
            status_message: self.status_message,
            created_at,
            last_updated_at: created_at,
            heartbeat_at: created_at,
            cancel_requested_at: None,
            result: None,
            error: None,
            input_requests: None,
            expires_at,
            poll_interval_ms: self.poll_interval_ms,
            replica_draining: false,
            trace_context: self.trace_context,
        }
    }
}

impl AuditEntry {
    /// The row for a call that ended with `outcome` after `duration_ms`. A
    /// completed call's attribution ([`AuditEntry::call_id`],
    /// [`AuditEntry::engine_user`], [`AuditEntry::upstream_ids`]) is read from its
    /// result's `_meta` ([`Upstream::from_result`]); a failed or cancelled one has
    /// no result, so none.
    pub fn for_outcome(
        tool: &str,
        subject: &str,
        context: AuditContext,
        outcome: &Outcome,
        duration_ms: i64,
    ) -> Self {
        let (label, error_message) = match outcome {
            Outcome::Completed(_) if outcome.is_success() => ("completed", None),
            Outcome::Completed(result) => ("tool_error", first_text(result)),
            Outcome::Failed(error) => ("failed", Some(error.message.clone())),
            Outcome::Cancelled => ("cancelled", Some("cancelled by the caller".to_owned())),
        };
        let upstream = match outcome {
            Outcome::Completed(result) => Upstream::from_result(result),
            Outcome::Failed(_) | Outcome::Cancelled => Upstream::default(),
        };
        Self {
            tool: tool.to_owned(),
            subject: subject.to_owned(),
            context,
            success: outcome.is_success(),
            outcome: label.to_owned(),
            error_message,
            duration_ms,
            call_id: upstream.call_id,
            engine_user: upstream.engine_user,
            upstream_ids: upstream.query_ids,
        }
    }

    /// The row of task `id`, which ended with `outcome` after `duration_ms`: as
    /// [`AuditEntry::for_outcome`], with the task id as the call id when the
    /// result names none.
    pub fn for_task(
        id: &TaskId,
        tool: &str,
        subject: &str,
        context: AuditContext,
        outcome: &Outcome,
        duration_ms: i64,
    ) -> Self {
        let mut entry = Self::for_outcome(tool, subject, context, outcome, duration_ms);
        entry.call_id.get_or_insert_with(|| id.as_str().to_owned());
        entry
    }

    /// This row as it is written when a cancel recorded first overrules the
    /// ending it was made for: cancelled, with the cancel's message, and still
    /// the attribution of the ending the work reported (the upstream queries it
    /// names did run).
    #[must_use]
    pub fn cancelled_instead(self) -> Self {
        let cancelled = Self::for_outcome("", "", AuditContext::default(), &Outcome::Cancelled, 0);
        Self {
            success: cancelled.success,
            outcome: cancelled.outcome,
            error_message: cancelled.error_message,
            ..self
        }
    }
}

/// The first text block of a `CallToolResult`, for an audit message.
fn first_text(result: &Value) -> Option<String> {
    result
        .get("content")?
        .as_array()?
        .iter()
        .find_map(|block| block.get("text")?.as_str().map(str::to_owned))
}

/// A status message a heartbeat carries for one task: the runtime sends a task's
/// message when it changed since the last beat.
#[derive(Clone, Debug, PartialEq)]
pub struct Beat {
    /// The task.
    pub id: TaskId,
    /// Its current status message (progress); `None` keeps the stored one.
    pub status_message: Option<String>,
}

/// A signal another replica sent about a task, delivered early by the database's
/// notifications (the row stays the source of truth; a lost signal costs latency).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskSignal {
    /// A cancel was asked for.
    Cancel(TaskId),
    /// Input responses arrived.
    Input(TaskId),
    /// The task changed (it ended, began or stopped waiting for input, or has a new
    /// status message): followers read it again.
    Changed(TaskId),
}

/// Receives [`TaskSignal`]s.
pub type SignalListener = Arc<dyn Fn(TaskSignal) + Send + Sync>;

/// Why a store operation failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or refused the statement.
    #[error("the task store is unavailable: {0}")]
    Unavailable(String),
    /// A stored value could not be read back.
    #[error("a stored task is corrupt: {0}")]
    Corrupt(String),
    /// A task with this id already exists.
    #[error("a task with this id already exists")]
    Duplicate,
}

/// What the task machinery needs from a database.
#[async_trait]
pub trait TaskStore: Send + Sync + 'static {
    /// Inserts a `working` task and commits before returning.
    async fn create(&self, task: NewTask) -> Result<TaskRecord, StoreError>;

    /// Reads a task, with the database clock's current time for staleness checks.
    async fn get(&self, id: &TaskId) -> Result<Option<(TaskRecord, OffsetDateTime)>, StoreError>;

    /// A page of the tasks `subject` follows (it started them, or is their extra
    /// follower) that have not expired, newest first (by creation time, then id),
    /// strictly after `after` in that order, at most `limit`; with the database
    /// clock's current time. Administrators list only their own tasks too.
    async fn list_followed(
        &self,
        subject: &str,
        after: Option<&TaskPosition>,
        limit: u32,
    ) -> Result<(Vec<TaskRecord>, OffsetDateTime), StoreError>;

    /// Ends a task with `outcome` if it has not ended yet, and writes its audit row,
    /// in one compare-and-set. A cancel asked for before it wins: a task whose cancel
    /// was recorded ends `cancelled` whatever `outcome` says (the signal that would
    /// have stopped the work may never have arrived). Returns the status this call
    /// ended the task in, or `None` when it had already ended.
    async fn finish(&self, id: &TaskId, outcome: Outcome)
    -> Result<Option<TaskStatus>, StoreError>;

    /// Records that a cancel was asked for (no-op on an ended task) and signals the
    /// replica running it.
    async fn request_cancel(&self, id: &TaskId) -> Result<(), StoreError>;

    /// One beat of `replica_id`, in ONE statement whose cost does not grow with the
    /// replica's running tasks: stamps the replica (a running task is as alive as
    /// its replica: [`TaskRecord::heartbeat_at`] reads as the later of the task's
    /// own stamp and its replica's last beat), stores the listed status messages
    /// of the replica's running tasks (writing only those that differ), and
    /// returns the replica's running tasks with a cancel requested.
    async fn heartbeat(&self, replica_id: &str, beats: &[Beat]) -> Result<Vec<TaskId>, StoreError>;

    /// Records that `replica_id` began a graceful shutdown: it takes no new work
    /// and ends (or records) what it runs. Shown in its `replicas` row.
    async fn mark_draining(&self, replica_id: &str) -> Result<(), StoreError>;

    /// Adds input requests to a running task and moves it to `input_required`.
    /// Keys must be unique for the task's life. Returns false if the task ended.
    async fn require_input(
        &self,
        id: &TaskId,
        requests: Map<String, Value>,
    ) -> Result<bool, StoreError>;

    /// Applies answers: keys that are outstanding move to the answered set (unknown
    /// keys are ignored); when none remain outstanding the task is `working` again.
    /// Visible to the very next read on any replica; signals the running replica.
    async fn answer_input(
        &self,
        id: &TaskId,
        responses: &Map<String, Value>,
    ) -> Result<(), StoreError>;

    /// Removes and returns the answers the running work has not consumed yet.
    async fn take_answers(&self, id: &TaskId) -> Result<Map<String, Value>, StoreError>;

    /// Fails every running task whose replica stopped beating more than
    /// `stale_after` ago (database clock; a task whose replica never beat is judged
    /// by its own stamp), writing their audit rows. Returns the tasks it ended, each
    /// with the trace it keeps, so the sweep's record of it joins that trace.
    async fn fail_stale(&self, stale_after: Duration) -> Result<Vec<StaleTask>, StoreError>;

    /// Deletes up to `limit` tasks whose expiry has passed. Returns their ids.
    async fn delete_expired(&self, limit: u32) -> Result<Vec<TaskId>, StoreError>;

    /// Writes the audit row of a call that did not become a task.
    async fn record_audit(&self, entry: AuditEntry) -> Result<(), StoreError>;

    /// The newest audit rows for `tool`, newest first, at most `limit`.
    async fn audit_for_tool(&self, tool: &str, limit: u32) -> Result<Vec<AuditEntry>, StoreError>;

    /// Asks to be told about signals other replicas send. Stores without
    /// notifications ignore it (the heartbeat still carries every signal).
    fn set_signal_listener(&self, listener: SignalListener) {
        let _ = listener;
    }
}
