//! What both backends share because it does not depend on SQL: how an outcome
//! ends a task (the columns it writes and the audit row it records), how input
//! requests and answers merge, and how stored values (task and catalog columns)
//! are read back. Keeping this in one place is what keeps the two backends'
//! semantics identical to [`MemoryStore`](docket_task::memory::MemoryStore)'s.

use std::time::Duration;

use docket_task::StoreError;
use docket_task::model::{Outcome, TaskError, TaskStatus};
use docket_task::store::{AuditContext, AuditEntry};
use serde_json::{Map, Value};

use docket_catalog::{CallKind, CatalogError};

use crate::columns::Corrupt;

/// The columns an outcome writes when it ends a task, and the outcome-dependent
/// part of its audit row.
#[derive(Debug)]
pub(crate) struct Ending {
    /// The terminal status.
    pub(crate) status: &'static str,
    /// The result, when completed.
    pub(crate) result: Option<Value>,
    /// The JSON-RPC error, when failed.
    pub(crate) error: Option<Value>,
    /// The status message to store; `None` keeps the current one.
    pub(crate) status_message: Option<String>,
    /// Whether the audit row counts it a success.
    pub(crate) success: bool,
    /// The audit row's outcome label.
    pub(crate) outcome: String,
    /// The audit row's error message.
    pub(crate) error_message: Option<String>,
    /// The call id the result names; the task id stands in without one.
    pub(crate) call_id: Option<String>,
    /// The Trino session user the result says the work ran as.
    pub(crate) engine_user: Option<String>,
    /// The Trino query ids the result says the work caused.
    pub(crate) upstream_ids: Vec<String>,
}

impl Ending {
    pub(crate) fn new(outcome: Outcome) -> Result<Self, StoreError> {
        // The audit labels come from docket_task so every store writes the same
        // ones; only the outcome-dependent fields of this entry are used.
        let audit = AuditEntry::for_outcome("", "", AuditContext::default(), &outcome, 0);
        let status = outcome.status().as_str();
        let (result, error, status_message) = match outcome {
            Outcome::Completed(result) => (Some(result), None, None),
            Outcome::Failed(error) => {
                let message = error.message.clone();
                (None, Some(error_json(&error)?), Some(message))
            }
            Outcome::Cancelled => (None, None, Some("cancelled".to_owned())),
        };
        Ok(Self {
            status,
            result,
            error,
            status_message,
            success: audit.success,
            outcome: audit.outcome,
            error_message: audit.error_message,
            call_id: audit.call_id,
            engine_user: audit.engine_user,
            upstream_ids: audit.upstream_ids,
        })
    }

    /// The ending a cancel recorded first puts in place of any other (its audit
    /// row keeps the attribution of the ending it overrules, as
    /// [`AuditEntry::cancelled_instead`] has it).
    pub(crate) fn cancelled() -> Self {
        let audit =
            AuditEntry::for_outcome("", "", AuditContext::default(), &Outcome::Cancelled, 0);
        Self {
            status: TaskStatus::Cancelled.as_str(),
            result: None,
            error: None,
            status_message: Some("cancelled".to_owned()),
            success: audit.success,
            outcome: audit.outcome,
            error_message: audit.error_message,
            call_id: audit.call_id,
            engine_user: audit.engine_user,
            upstream_ids: audit.upstream_ids,
        }
    }
}

/// A task error as stored.
pub(crate) fn error_json(error: &TaskError) -> Result<Value, StoreError> {
    serde_json::to_value(error).map_err(|err| StoreError::Corrupt(err.to_string()))
}

/// A stored status.
pub(crate) fn status(text: &str) -> Result<TaskStatus, StoreError> {
    TaskStatus::parse(text).ok_or_else(|| StoreError::Corrupt(format!("unknown status `{text}`")))
}

/// A stored task error.
pub(crate) fn task_error(value: Option<Value>) -> Result<Option<TaskError>, StoreError> {
    value
        .map(serde_json::from_value)
        .transpose()
        .map_err(|err| StoreError::Corrupt(format!("a stored task error: {err}")))
}

/// A stored poll interval.
pub(crate) fn poll_interval(millis: i64) -> Result<u64, StoreError> {
    u64::try_from(millis)
        .map_err(|_| StoreError::Corrupt(format!("a negative poll interval: {millis}")))
}

/// A poll interval to store.
pub(crate) fn poll_interval_column(millis: u64) -> i64 {
    i64::try_from(millis).unwrap_or(i64::MAX)
}

/// A duration in whole milliseconds, for SQL interval arithmetic.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// A limit for SQL.
pub(crate) fn limit(limit: u32) -> i64 {
    i64::from(limit)
}

/// The input-related state of one task, read under a write lock.
#[derive(Debug)]
pub(crate) struct InputState {
    /// Its status.
    pub(crate) status: TaskStatus,
    /// Outstanding requests by key (a JSON object), or none.
    pub(crate) input_requests: Option<Value>,
    /// Answers the work has not taken yet.
    pub(crate) answers: Map<String, Value>,
    /// Every key ever requested, so keys stay unique for the task's life.
    pub(crate) requested_keys: Vec<String>,
}

impl InputState {
    /// Adds `requests` whose keys were never asked before and moves the task to
    /// `input_required`. Returns false, changing nothing, if the task has ended.
    pub(crate) fn require(&mut self, requests: Map<String, Value>) -> bool {
        if self.status.is_terminal() {
            return false;
        }
        let mut outstanding = match self.input_requests.take() {
            Some(Value::Object(outstanding)) => outstanding,
            _ => Map::new(),
        };
        for (key, request) in requests {
            if !self.requested_keys.contains(&key) {
                self.requested_keys.push(key.clone());
                outstanding.insert(key, request);
            }
        }
        self.input_requests = Some(Value::Object(outstanding));
        self.status = TaskStatus::InputRequired;
        true
    }

    /// Applies `responses`: outstanding keys move to the answers (others are
    /// ignored); with none outstanding the task works again. Returns what changed.
    pub(crate) fn answer(&mut self, responses: &Map<String, Value>) -> Answered {
        let Some(Value::Object(outstanding)) = self.input_requests.as_mut() else {
            return Answered::Nothing;
        };
        let mut answered = false;
        for (key, response) in responses {
            if outstanding.remove(key).is_some() {
                self.answers.insert(key.clone(), response.clone());
                answered = true;
            }
        }
        if outstanding.is_empty() {
            self.input_requests = None;
            if self.status == TaskStatus::InputRequired {
                self.status = TaskStatus::Working;
            }
        }
        if answered {
            Answered::Some
        } else {
            Answered::None
        }
    }

    /// The requested keys as stored (a JSON array).
    pub(crate) fn requested_keys_json(&self) -> Value {
        Value::Array(
            self.requested_keys
                .iter()
                .cloned()
                .map(Value::String)
                .collect(),
        )
    }
}

/// What [`InputState::answer`] changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answered {
    /// The task was not waiting for input: write nothing.
    Nothing,
    /// No outstanding key was answered, but the state may have moved: write it,
    /// without touching `last_updated_at` or signalling.
    None,
    /// At least one key was answered: write, stamp `last_updated_at`, signal.
    Some,
}

/// Requested keys as stored (a JSON array of strings).
pub(crate) fn requested_keys(value: Value) -> Result<Vec<String>, StoreError> {
    serde_json::from_value(value)
        .map_err(|err| StoreError::Corrupt(format!("stored input keys: {err}")))
}

/// Answers as stored (a JSON object).
pub(crate) fn answers(value: Value) -> Result<Map<String, Value>, StoreError> {
    match value {
        Value::Object(answers) => Ok(answers),
        Value::Null => Ok(Map::new()),
        other => Err(StoreError::Corrupt(format!(
            "stored input answers are not an object: {other}"
        ))),
    }
}

/// An asset's tags as stored (a JSON array of strings).
pub(crate) fn tags_json(tags: &[String]) -> Value {
    Value::Array(tags.iter().cloned().map(Value::String).collect())
}

/// Stored tags.
pub(crate) fn tags(value: Value) -> Result<Vec<String>, CatalogError> {
    serde_json::from_value(value)
        .map_err(|err| CatalogError::Corrupt(format!("stored asset tags: {err}")))
}

/// Upstream query ids as stored (a JSON array of strings), on an audit row and a
/// call record alike.
pub(crate) fn upstream_ids_json(ids: &[String]) -> Value {
    Value::Array(ids.iter().cloned().map(Value::String).collect())
}

/// Stored upstream query ids.
pub(crate) fn upstream_ids(value: Value) -> Result<Vec<String>, Corrupt> {
    serde_json::from_value(value)
        .map_err(|err| Corrupt(format!("stored upstream query ids: {err}")))
}

/// A stored upstream HTTP status (an `integer` column; a status fits in 16 bits).
pub(crate) fn upstream_status(stored: Option<i32>) -> Result<Option<u16>, CatalogError> {
    stored
        .map(|status| {
            u16::try_from(status).map_err(|_| {
                CatalogError::Corrupt(format!("upstream_status {status} is not a status"))
            })
        })
        .transpose()
}

/// A stored call kind.
pub(crate) fn call_kind(name: &str) -> Result<CallKind, CatalogError> {
    CallKind::parse(name)
        .ok_or_else(|| CatalogError::Corrupt(format!("unknown call kind `{name}`")))
}

/// Reverts migrations, newest first, through the one whose version (its folder's
/// date, dashes or not) is `version`, for tests of what one migration does to rows
/// whatever came after it.
#[cfg(test)]
pub(crate) fn revert_through<DB, H, S>(conn: &mut H, migrations: impl Fn() -> S, version: &str)
where
    DB: diesel::backend::Backend,
    H: diesel_migrations::MigrationHarness<DB>,
    S: diesel::migration::MigrationSource<DB>,
{
    let wanted = version.replace('-', "");
    loop {
        let reverted = conn
            .revert_last_migration(migrations())
            .expect("revert a migration");
        if reverted.to_string().replace('-', "") == wanted {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use docket_task::model::TaskError;
    use serde_json::json;

    use super::*;

    fn object(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn outcomes_end_tasks_as_the_memory_store_does() {
        let failed = Ending::new(Outcome::Failed(TaskError::internal("boom"))).expect("ending");
        assert_eq!(failed.status, "failed");
        assert_eq!(failed.status_message.as_deref(), Some("boom"));
        assert_eq!(failed.outcome, "failed");
        assert!(!failed.success);
        let cancelled = Ending::new(Outcome::Cancelled).expect("ending");
        assert_eq!(cancelled.status_message.as_deref(), Some("cancelled"));
        let tool_error = Ending::new(Outcome::Completed(
            json!({"content": [{"type": "text", "text": "no"}], "isError": true}),
        ))
        .expect("ending");
        assert_eq!(tool_error.outcome, "tool_error");
        assert_eq!(tool_error.error_message.as_deref(), Some("no"));
        assert_eq!(tool_error.status_message, None);
        assert_eq!(
            (tool_error.call_id, tool_error.engine_user),
            (None, None),
            "a result without attribution names nobody"
        );
        let attributed = Ending::new(Outcome::Completed(json!({
            "content": [],
            "_meta": {docket_task::UPSTREAM_META_KEY: {
                "engine_user": "alice", "query_ids": ["q1", "q2"]
            }}
        })))
        .expect("ending");
        assert_eq!(attributed.engine_user.as_deref(), Some("alice"));
        assert_eq!(
            upstream_ids_json(&attributed.upstream_ids),
            json!(["q1", "q2"])
        );
        assert_eq!(
            upstream_ids(upstream_ids_json(&attributed.upstream_ids)).expect("ids"),
            ["q1", "q2"]
        );
        assert!(upstream_ids(json!({"q": 1})).is_err());
        assert!(Ending::cancelled().upstream_ids.is_empty());
    }

    #[test]
    fn keys_are_unique_for_the_task_life() {
        let mut state = InputState {
            status: TaskStatus::Working,
            input_requests: None,
            answers: Map::new(),
            requested_keys: Vec::new(),
        };
        assert!(state.require(object(json!({"a": 1, "b": 2}))));
        assert_eq!(
            state.answer(&object(json!({"a": "x", "zzz": 0}))),
            Answered::Some
        );
        assert_eq!(state.status, TaskStatus::InputRequired);
        assert_eq!(state.answer(&object(json!({"b": "y"}))), Answered::Some);
        assert_eq!(state.status, TaskStatus::Working);
        assert_eq!(state.input_requests, None);
        assert_eq!(state.answer(&object(json!({"b": "y"}))), Answered::Nothing);
        assert!(state.require(object(json!({"a": 3}))));
        assert_eq!(state.input_requests, Some(json!({})));
        assert_eq!(state.requested_keys_json(), json!(["a", "b"]));
    }

    #[test]
    fn catalog_columns_read_back_or_report_corruption() {
        let stored = tags_json(&["pii".to_owned(), "daily".to_owned()]);
        assert_eq!(stored, json!(["pii", "daily"]));
        assert_eq!(tags(stored).expect("tags"), ["pii", "daily"]);
        assert!(matches!(
            tags(json!({"a": 1})),
            Err(CatalogError::Corrupt(_))
        ));
        assert_eq!(call_kind("api").expect("kind"), CallKind::Api);
        assert!(matches!(call_kind("ftp"), Err(CatalogError::Corrupt(_))));
    }
}
