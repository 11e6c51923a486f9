//! The tasks extension on the server side: starting a task from a `tools/call`,
//! and `tasks/get`, `tasks/update`, `tasks/cancel`.
//!
//! Who may follow a task: whoever started it, administrators, and the task kind's
//! extra follower. Everyone else gets exactly the answer an unknown id gets, so a
//! task id's existence cannot be probed.
//!
//! A script run is its own task: an id the task store does not know is looked
//! up as a run id, read through `docket_run_bridge::task::run_task` (its
//! followers are whoever asked for the run and the script's owner), and
//! cancelled through the run bridge.

use std::sync::Arc;
use std::time::Duration;

use docket_protocol::error::ErrorObject;
use docket_protocol::mrtr::InputRequests;
use docket_protocol::result::{EmptyResult, ResultType};
use docket_protocol::tasks::{
    CreateTaskResult, GetTaskResult, Task, TaskDetail, TaskIdParams, TaskStatus as WireStatus,
    UpdateTaskParams,
};
use docket_task::runtime::{SpawnError, TaskRuntime};
use docket_task::store::TaskSignal;
use docket_task::{Caller, Outcome, TaskError, TaskId, TaskRecord, TaskStatus, TaskView};
use serde_json::Value;
use time::format_description::well_known::Rfc3339;

use crate::app::App;
use crate::dispatch::{RequestContext, to_value};
use crate::error::McpError;
use crate::registry::ToolOutcome;

/// The task machinery of an app with a database and `tasks.enabled`.
pub(crate) struct Tasks {
    /// Runs task work on this replica.
    pub(crate) runtime: Arc<TaskRuntime>,
    /// How long an export task is kept after it was created.
    pub(crate) retention: Duration,
    /// How often clients should poll.
    pub(crate) poll_interval_ms: u64,
    /// How long without a heartbeat before a task's replica counts as gone.
    pub(crate) stale_after: Duration,
}

/// The `tasks/*` methods.
pub(crate) const METHODS: &[&str] = &["tasks/get", "tasks/update", "tasks/cancel"];

/// Runs one `tasks/*` request.
pub(crate) async fn handle(
    app: &App,
    context: &RequestContext,
    method: &str,
    params: Option<Value>,
) -> Result<Value, McpError> {
    let Some(tasks) = &app.state.tasks else {
        return Err(McpError::MethodNotFound(method.to_owned()));
    };
    // The capability check comes before the id is looked at, so a client that did not
    // declare the extension learns nothing about ids.
    if !context.meta.client_capabilities.declares_tasks() {
        return Err(McpError::MissingCapability {
            message: format!(
                "{method} needs the io.modelcontextprotocol/tasks extension declared on the request"
            ),
            required: Box::new(docket_protocol::meta::ClientCapabilities::with_extension(
                docket_protocol::TASKS_EXTENSION,
            )),
        });
    }
    let params = params.unwrap_or(Value::Null);
    match method {
        "tasks/get" => {
            let TaskIdParams { task_id } = parse(params, method)?;
            let (record, view, _) = find(app, tasks, context, &task_id).await?;
            to_value(&get_result(&record, &view))
        }
        "tasks/cancel" => {
            let TaskIdParams { task_id } = parse(params, method)?;
            let (record, _, kind) = find(app, tasks, context, &task_id).await?;
            match (kind, &app.state.scripts) {
                // A run's cancel is cancel_run's: mark it, wake its worker wherever it is.
                (Found::Run, Some(scripts)) => {
                    scripts
                        .bridge
                        .cancel(record.id.as_str())
                        .await
                        .map_err(|error| {
                            McpError::Unavailable(format!(
                                "the run store is unavailable; try again: {error}"
                            ))
                        })?;
                }
                _ => tasks
                    .runtime
                    .cancel(&record.id)
                    .await
                    .map_err(store_failure)?,
            }
            to_value(&EmptyResult::default())
        }
        "tasks/update" => {
            let UpdateTaskParams {
                task_id,
                input_responses,
            } = parse(params, method)?;
            let (record, _, kind) = find(app, tasks, context, &task_id).await?;
            if kind == Found::Run {
                // A run never asks for input: acknowledged, nothing to apply.
                return to_value(&EmptyResult::default());
            }
            let responses = input_responses.into_iter().collect();
            // Applied before the acknowledgement, so the very next tasks/get on any
            // replica shows it.
            tasks
                .runtime
                .store()
                .answer_input(&record.id, &responses)
                .await
                .map_err(store_failure)?;
            tasks.runtime.signal(TaskSignal::Input(record.id.clone()));
            to_value(&EmptyResult::default())
        }
        other => Err(McpError::MethodNotFound(other.to_owned())),
    }
}

fn parse<T: serde::de::DeserializeOwned>(params: Value, method: &str) -> Result<T, McpError> {
    serde_json::from_value(params)
        .map_err(|err| McpError::InvalidParams(format!("invalid {method} params: {err}")))
}

fn store_failure(error: docket_task::StoreError) -> McpError {
    McpError::Unavailable(format!("the task store is unavailable; try again: {error}"))
}

/// What an id named: a task row, or a script run (which is its own task).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Found {
    Task,
    Run,
}

/// The task `task_id` as the caller may see it, or the one "unknown task" answer.
async fn find(
    app: &App,
    tasks: &Tasks,
    context: &RequestContext,
    task_id: &str,
) -> Result<(TaskRecord, TaskView, Found), McpError> {
    // One answer for unknown, expired and not-yours ids: the same bytes, whatever the id.
    let unknown = || McpError::InvalidParams("Unknown task".to_owned());
    let id = TaskId::from_client(task_id).ok_or_else(unknown)?;
    let is_admin = app
        .state
        .personas
        .resolve(&context.identity.roles)
        .is_some_and(|persona| persona.is_admin);
    // A caller without credentials owns no task, so it can follow none.
    if !crate::call::may_own_tasks(&context.identity, is_admin) {
        return Err(unknown());
    }
    // Both tables are read for every id, at once: an id that exists but is not
    // yours takes the same path, and the same time, as one that does not exist.
    let run_lookup = async {
        match &app.state.scripts {
            Some(scripts) => scripts
                .store
                .run(id.as_str())
                .await
                .map(|found| found.map(|run| (scripts, run))),
            None => Ok(None),
        }
    };
    let (task, run) = tokio::join!(tasks.runtime.store().get(&id), run_lookup);
    let (record, now, found) = match (task.map_err(store_failure)?, run) {
        (Some((record, now)), _) => (record, now, Found::Task),
        (None, Ok(Some((scripts, (run, now))))) => {
            let record = docket_run_bridge::task::run_task(
                &run,
                now,
                scripts.run_retention,
                scripts.poll_interval_ms,
                crate::tools::scripts::run_task_result(&run),
            );
            (record, now, Found::Run)
        }
        (None, Ok(None)) => return Err(unknown()),
        (None, Err(error)) => {
            return Err(McpError::Unavailable(format!(
                "the run store is unavailable; try again: {error}"
            )));
        }
    };
    let caller = Caller {
        subject: context.identity.subject.clone(),
        is_admin,
    };
    let expired = record
        .expires_at
        .is_some_and(|expires_at| expires_at <= now);
    if !record.may_follow(&caller) || expired {
        return Err(unknown());
    }
    let view = record.view(now, tasks.stale_after);
    Ok((record, view, found))
}

fn timestamp(time: time::OffsetDateTime) -> String {
    time.to_offset(time::UtcOffset::UTC)
        .format(&Rfc3339)
        .unwrap_or_default()
}

fn wire_status(status: TaskStatus) -> WireStatus {
    match status {
        TaskStatus::Working => WireStatus::Working,
        TaskStatus::InputRequired => WireStatus::InputRequired,
        TaskStatus::Completed => WireStatus::Completed,
        TaskStatus::Failed => WireStatus::Failed,
        TaskStatus::Cancelled => WireStatus::Cancelled,
    }
}

fn wire_task(record: &TaskRecord, status: TaskStatus, status_message: Option<String>) -> Task {
    Task {
        task_id: record.id.to_string(),
        status: wire_status(status),
        status_message,
        created_at: timestamp(record.created_at),
        last_updated_at: timestamp(record.last_updated_at),
        ttl_ms: record.ttl_ms(),
        poll_interval_ms: Some(record.poll_interval_ms),
    }
}

fn wire_error(error: &TaskError) -> ErrorObject {
    ErrorObject {
        code: error.code,
        message: error.message.clone(),
        data: error.data.clone(),
    }
}

/// The `CreateTaskResult` for a freshly committed task.
pub(crate) fn create_result(record: &TaskRecord) -> CreateTaskResult {
    CreateTaskResult::new(wire_task(
        record,
        record.status,
        record.status_message.clone(),
    ))
}

fn get_result(record: &TaskRecord, view: &TaskView) -> GetTaskResult {
    let detail = match view.status {
        TaskStatus::Completed => TaskDetail {
            result: record.result.clone(),
            error: None,
            input_requests: None,
        },
        TaskStatus::Failed => TaskDetail {
            result: None,
            error: view.error.as_ref().map(wire_error),
            input_requests: None,
        },
        TaskStatus::InputRequired => TaskDetail {
            result: None,
            error: None,
            input_requests: record
                .input_requests
                .clone()
                .and_then(|requests| serde_json::from_value::<InputRequests>(requests).ok()),
        },
        TaskStatus::Working | TaskStatus::Cancelled => TaskDetail {
            result: None,
            error: None,
            input_requests: None,
        },
    };
    GetTaskResult {
        result_type: ResultType::Complete,
        task: wire_task(record, view.status, view.status_message.clone()),
        detail,
    }
}

/// How a tool's outcome ends its task.
pub(crate) fn task_outcome(outcome: ToolOutcome) -> Outcome {
    match outcome {
        ToolOutcome::Result(result) => match serde_json::to_value(&result) {
            Ok(value) => Outcome::Completed(value),
            Err(err) => Outcome::Failed(TaskError::internal(format!(
                "could not encode the result: {err}"
            ))),
        },
        ToolOutcome::Error(error) => {
            let (_, object) = McpError::from(error).to_wire();
            Outcome::Failed(TaskError {
                code: object.code,
                message: object.message,
                data: object.data,
            })
        }
        ToolOutcome::InputRequired { .. } => Outcome::Failed(TaskError::internal(
            "the tool asked for input the direct way inside a task; tools ask through ToolCall::request_input in a task",
        )),
    }
}

/// Maps a failure to start a task.
pub(crate) fn spawn_failure(error: SpawnError) -> McpError {
    match error {
        SpawnError::Draining => McpError::Unavailable(error.to_string()),
        // The task row could not be written: the database is away; nothing started.
        SpawnError::Store(store) => McpError::Unavailable(format!(
            "the task store is unavailable, so no task was started; try again: {store}"
        )),
        other => McpError::Internal(other.to_string()),
    }
}

/// A `tools/call` result value for a task record, for `call.rs`.
pub(crate) fn create_result_value(record: &TaskRecord) -> Result<Value, McpError> {
    to_value(&create_result(record))
}
