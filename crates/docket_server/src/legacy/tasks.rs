//! Durable tasks for sessions of revision 2025-11-25: a `tools/call` with
//! `params.task` creates the same task the tasks extension creates (same row,
//! heartbeats, cross-replica cancel), answered in that revision's shape, and
//! `tasks/get`, `tasks/result` and `tasks/cancel` follow it. A task is the same row in
//! both eras, so the same identity follows it from either.
//!
//! In that revision a requestor may augment a request with `task` when the
//! *receiver* declared support for it: the server's `capabilities.tasks.requests`
//! at `initialize` decides, not the client's own `tasks` capability (which says what
//! the client would accept as a receiver). So a session whose client declared no
//! `tasks` still gets a task for `params.task`, and without `params.task` every call
//! is answered directly, whatever the client declared.
//!
//! `tasks/list` lists the caller's own tasks across every task source (the task
//! table and script runs), newest first, a page at a time.

use std::sync::Arc;
use std::time::Duration;

use docket_protocol::TASKS_EXTENSION;
use docket_protocol::error::ErrorObject;
use docket_protocol::tasks::TaskIdParams;
use docket_task::{TaskStatus, TaskView};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::error::McpError;
use crate::registry::TaskSupport;
use crate::reply::{Reply, StreamItem};
use crate::request::RequestContext;
use crate::state::App;
use crate::tasks::{self, FoundTask, viewed_task};

/// The revision whose sessions get tasks.
pub(super) const TASKS_REVISION: &str = "2025-11-25";

/// The notification that tells a client its task's status changed.
const STATUS_NOTIFICATION: &str = "notifications/tasks/status";

/// The key that ties a result to its task.
const RELATED_TASK_KEY: &str = "io.modelcontextprotocol/related-task";

/// How long `tasks/cancel` waits for the task to end cancelled (a cancel reaches the
/// running replica within a heartbeat, sooner by NOTIFY).
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// How often `tasks/cancel` reads the task again while it waits, and the shortest
/// step of `tasks/result`'s wait.
const WAIT_STEP: Duration = Duration::from_millis(100);

/// The longest step of `tasks/result`'s wait (it otherwise follows the task's poll
/// interval).
const RESULT_WAIT_MAX: Duration = Duration::from_secs(2);

/// The `tasks` capability `initialize` advertises to a session that can have tasks.
pub(super) fn server_capability() -> Value {
    json!({"cancel": {}, "list": {}, "requests": {"tools": {"call": {}}}})
}

/// The `execution` a tool of `support` is listed with in such a session.
pub(super) fn execution(support: TaskSupport) -> Option<Value> {
    match support {
        TaskSupport::Never => None,
        TaskSupport::Optional => Some(json!({"taskSupport": "optional"})),
        TaskSupport::Required => Some(json!({"taskSupport": "required"})),
    }
}

/// A current-era `Task` (or `CreateTaskResult`) object in this revision's names:
/// `ttlMs` → `ttl`, `pollIntervalMs` → `pollInterval`, without `resultType`.
pub(super) fn legacy_task(modern: Value) -> Value {
    let Value::Object(mut object) = modern else {
        return modern;
    };
    object.remove("resultType");
    let ttl = object.remove("ttlMs").unwrap_or(Value::Null);
    object.insert("ttl".into(), ttl);
    if let Some(poll) = object.remove("pollIntervalMs") {
        object.insert("pollInterval".into(), poll);
    }
    Value::Object(object)
}

/// The answer to a task-augmented `tools/call`: `{"task": {...}}`, with the result's
/// `_meta` beside the task, not in it.
pub(super) fn create_answer(created: Value) -> Value {
    let mut task = legacy_task(created);
    let meta = match &mut task {
        Value::Object(object) => object.remove("_meta"),
        _ => None,
    };
    match meta {
        Some(meta) => json!({"task": task, "_meta": meta}),
        None => json!({"task": task}),
    }
}

/// Whether a tool result is a created task (the current era's `resultType: task`).
pub(super) fn is_created_task(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("task")
}

/// Serves `tasks/get`, `tasks/result`, `tasks/list` or `tasks/cancel` for the caller of `context`.
pub(super) async fn serve(
    app: &App,
    context: &RequestContext,
    method: &str,
    params: Option<Value>,
) -> Result<Reply, McpError> {
    let Some(surface) = &app.state.tasks else {
        return Err(McpError::MethodNotFound(method.to_owned()));
    };
    let is_admin = app
        .state
        .personas
        .resolve(&context.identity.roles)
        .is_some_and(|persona| persona.is_admin);
    if method == "tasks/list" {
        // Clients send `tasks/list` without params for the first page.
        let params = match params {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(params) => params,
        };
        let ListParams { cursor } = ListParams::deserialize(params)
            .map_err(|err| McpError::InvalidParams(format!("invalid {method} params: {err}")))?;
        let (listed, next) =
            tasks::list_followed(surface, context, is_admin, cursor.as_deref()).await?;
        let listed: Vec<Value> = listed
            .iter()
            .map(|(record, view)| task_value(&viewed_task(record, view)))
            .collect();
        let mut answer = json!({ "tasks": listed });
        if let (Some(next), Value::Object(object)) = (next, &mut answer) {
            object.insert("nextCursor".into(), Value::String(next));
        }
        return Ok(Reply::Json(answer));
    }
    // The TypeScript SDK repeats `task` here; only the id counts.
    let TaskIdParams { task_id } = TaskIdParams::deserialize(params.unwrap_or(Value::Null))
        .map_err(|err| McpError::InvalidParams(format!("invalid {method} params: {err}")))?;
    let find = || tasks::find(surface, &context.identity, is_admin, &task_id);
    match method {
        "tasks/get" => {
            let (found, view) = find().await?;
            Ok(task_reply(&viewed_task(&found.record, &view)))
        }
        "tasks/cancel" => {
            let (found, view) = find().await?;
            if is_terminal(view.status) {
                return Err(McpError::InvalidParams(format!(
                    "the task has already ended ({})",
                    status_name(view.status)
                )));
            }
            tasks::cancel(&found).await?;
            let started = tokio::time::Instant::now();
            loop {
                let (found, view) = find().await?;
                if is_terminal(view.status) || started.elapsed() >= CANCEL_WAIT {
                    return Ok(task_reply(&viewed_task(&found.record, &view)));
                }
                tokio::time::sleep(WAIT_STEP).await;
            }
        }
        "tasks/result" => {
            // Unknown ids, and tasks that have ended, are answered at once.
            let (found, view) = find().await?;
            if let Some(answer) = ended(&found, &view, &task_id) {
                return answer.map(Reply::Json);
            }
            // Otherwise the answer streams: each change of the task's status (or its
            // message) as `notifications/tasks/status`, then its result.
            let (items, receiver) = mpsc::channel(8);
            let (app, is_admin) = (app.clone(), is_admin);
            let context = RequestContext {
                identity: Arc::clone(&context.identity),
                meta: context.meta.clone(),
                headers: context.headers.clone(),
                run_id: None,
            };
            let last = status_of(&viewed_task(&found.record, &view));
            tokio::spawn(async move {
                let item = match follow(&app, &context, is_admin, &task_id, last, &items).await {
                    Ok(result) => StreamItem::Result(result),
                    Err(error) => StreamItem::Error(error.to_wire().1),
                };
                let _ = items.send(item).await;
            });
            Ok(Reply::channel(receiver))
        }
        other => Err(McpError::MethodNotFound(other.to_owned())),
    }
}

/// The answer `tasks/result` gives for a task as `view` shows it: its result, its
/// error, or a refusal; `None` while it works.
fn ended(found: &FoundTask, view: &TaskView, task_id: &str) -> Option<Result<Value, McpError>> {
    match view.status {
        TaskStatus::Completed => {
            let mut result =
                super::shape::result_shape(found.record.result.clone().unwrap_or(Value::Null));
            if let Value::Object(object) = &mut result {
                let meta = object
                    .entry("_meta")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Value::Object(meta) = meta {
                    meta.insert(RELATED_TASK_KEY.into(), json!({"taskId": task_id}));
                }
            }
            Some(Ok(result))
        }
        TaskStatus::Failed => {
            let error = view.error.clone().map_or_else(
                || ErrorObject::internal("the task failed"),
                |error| ErrorObject {
                    code: error.code,
                    message: error.message,
                    data: error.data,
                },
            );
            Some(Err(McpError::TaskFailed(error)))
        }
        TaskStatus::Cancelled => Some(Err(McpError::InvalidParams(
            "the task was cancelled, so it has no result".into(),
        ))),
        TaskStatus::InputRequired => Some(Err(McpError::InvalidParams(
            "the task is waiting for input, which a session of revision 2025-11-25 \
             cannot give yet: answer it from a 2026-07-28 client (tasks/update), or \
             cancel it with tasks/cancel"
                .into(),
        ))),
        TaskStatus::Working => None,
    }
}

/// What a status notification reports of a task: its status and message.
fn status_of(task: &docket_protocol::tasks::Task) -> (String, Option<String>) {
    (
        serde_json::to_value(task.status)
            .ok()
            .and_then(|status| status.as_str().map(str::to_owned))
            .unwrap_or_default(),
        task.status_message.clone(),
    )
}

/// Reads the task until it ends, at its own poll interval (within bounds, so a client
/// holding many `tasks/result` open costs the store what polling would), sending
/// `notifications/tasks/status` on `items` whenever its status or message changed
/// from `last`; then its answer. Stops when the client goes away.
async fn follow(
    app: &App,
    context: &RequestContext,
    is_admin: bool,
    task_id: &str,
    mut last: (String, Option<String>),
    items: &mpsc::Sender<StreamItem>,
) -> Result<Value, McpError> {
    let surface = app
        .state
        .tasks
        .as_ref()
        .ok_or_else(|| McpError::MethodNotFound("tasks/result".to_owned()))?;
    let mut step = WAIT_STEP;
    loop {
        tokio::select! {
            () = tokio::time::sleep(step) => {}
            // Nobody listens any more: the answer is dropped with the stream.
            () = items.closed() => return Err(McpError::Internal("the client went away".into())),
        }
        let (found, view) = tasks::find(surface, &context.identity, is_admin, task_id).await?;
        let task = viewed_task(&found.record, &view);
        let now = status_of(&task);
        if now != last {
            let notification = json!({
                "jsonrpc": "2.0",
                "method": STATUS_NOTIFICATION,
                "params": task_value(&task),
            });
            if items.send(StreamItem::Message(notification)).await.is_err() {
                return Err(McpError::Internal("the client went away".into()));
            }
            last = now;
        }
        if let Some(answer) = ended(&found, &view, task_id) {
            return answer;
        }
        step =
            Duration::from_millis(found.record.poll_interval_ms).clamp(WAIT_STEP, RESULT_WAIT_MAX);
    }
}

/// A `tasks/get` or `tasks/cancel` answer: the task, flat, in this revision's names.
fn task_reply(task: &docket_protocol::tasks::Task) -> Reply {
    Reply::Json(task_value(task))
}

/// A task in this revision's names.
fn task_value(task: &docket_protocol::tasks::Task) -> Value {
    legacy_task(serde_json::to_value(task).unwrap_or(Value::Null))
}

/// `tasks/list` params: the cursor of the page after the last one.
#[derive(Deserialize)]
struct ListParams {
    #[serde(default)]
    cursor: Option<String>,
}

fn is_terminal(status: TaskStatus) -> bool {
    matches!(
        status,
        TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
    )
}

fn status_name(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Working => "working",
        TaskStatus::InputRequired => "input_required",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
    }
}

/// The capabilities a task-augmented call is made with: the client's, plus the tasks
/// extension, which is how the pipeline is told to make a task.
pub(super) fn with_tasks_extension(
    mut capabilities: docket_protocol::meta::ClientCapabilities,
) -> docket_protocol::meta::ClientCapabilities {
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(
            TASKS_EXTENSION.to_owned(),
            Value::Object(Default::default()),
        );
    capabilities
}
