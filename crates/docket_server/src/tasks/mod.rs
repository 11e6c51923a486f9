//! The tasks extension on the server side: `tasks/get`, `tasks/update` and
//! `tasks/cancel`, over every registered [`TaskSource`].
//!
//! Who may follow a task: whoever started it, administrators, and the task kind's
//! extra follower. Everyone else gets exactly the answer an unknown id gets, so a
//! task id's existence cannot be probed.
//!
//! Task ids are looked up in every source at once: the task table (exports and
//! every other tool that runs as a task, [`source::CallTasks`]) and the sources
//! tools register for work that is durable on its own (script runs in
//! `script_runs`, registered by the script tools). Generic code here never knows
//! which tool a task belongs to.

mod source;
mod wire;

use std::sync::Arc;
use std::time::Duration;
use tracing::Instrument as _;

use docket_catalog::PageCursor;
use docket_protocol::meta::Implementation;
use docket_protocol::result::EmptyResult;
use docket_protocol::tasks::{TaskIdParams, UpdateTaskParams};
use docket_task::runtime::{SpawnError, TaskRuntime};
use docket_task::{Caller, Outcome, TaskError, TaskId, TaskRecord, TaskView};
use serde_json::Value;

use crate::auth::Identity;
use crate::error::McpError;
use crate::registry::ToolOutcome;
use crate::reply::{Reply, encode};
use crate::request::RequestContext;

pub(crate) use source::CallTasks;
pub use source::{CALL_TASK_IDS, FoundTask, TaskSource};
pub(crate) use wire::{create_result, get_result, viewed_task};

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
    /// Where task ids are looked up: the task table first, then what tools registered.
    pub(crate) sources: Vec<Arc<dyn TaskSource>>,
}

/// The `tasks/*` methods.
pub(crate) const METHODS: &[&str] = &["tasks/get", "tasks/update", "tasks/cancel"];

/// Runs one `tasks/*` request for a caller whose persona makes them an
/// administrator or not.
pub(crate) async fn handle(
    tasks: &Tasks,
    context: &RequestContext,
    is_admin: bool,
    method: &str,
    params: Option<Value>,
    server_info: &Implementation,
) -> Result<Reply, McpError> {
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
            let (found, view) = find(tasks, &context.identity, is_admin, &task_id).await?;
            encode(&wire::get_result(found.record, view), server_info)
        }
        "tasks/cancel" => {
            let TaskIdParams { task_id } = parse(params, method)?;
            let (found, _) = find(tasks, &context.identity, is_admin, &task_id).await?;
            cancel(&found).await?;
            encode(&EmptyResult::default(), server_info)
        }
        "tasks/update" => {
            let UpdateTaskParams {
                task_id,
                input_responses,
            } = parse(params, method)?;
            let (found, _) = find(tasks, &context.identity, is_admin, &task_id).await?;
            let responses = input_responses.into_iter().collect();
            // Applied before the acknowledgement, so the very next tasks/get on any
            // replica shows it; in the task's own trace, as a cancel is.
            let span = task_span("task update", &found);
            found
                .source
                .answer_input(&found.record.id, &responses)
                .instrument(span)
                .await?;
            encode(&EmptyResult::default(), server_info)
        }
        other => Err(McpError::MethodNotFound(other.to_owned())),
    }
}

/// Asks `found` to stop, in the task's own trace (its creation, on whichever
/// replica), linked to this request's: both eras' `tasks/cancel`.
///
/// # Errors
/// When the task's source cannot record the cancel.
pub(crate) async fn cancel(found: &FoundTask) -> Result<(), McpError> {
    let span = task_span("task cancel", found);
    found.source.cancel(&found.record.id).instrument(span).await
}

/// A span named `name` for work on `found` done in another request than the one
/// that created it, parented on the trace the task keeps and linked to the request.
fn task_span(name: &'static str, found: &FoundTask) -> tracing::Span {
    let span = tracing::info_span!(
        "task",
        otel.name = name,
        otel.kind = "internal",
        "docket.task.id" = %found.record.id,
    );
    crate::telemetry::join_task_trace(&span, found.record.trace_context.as_ref());
    span
}

fn parse<T: serde::de::DeserializeOwned>(params: Value, method: &str) -> Result<T, McpError> {
    serde_json::from_value(params)
        .map_err(|err| McpError::InvalidParams(format!("invalid {method} params: {err}")))
}

/// The task `task_id` as the caller may see it, or the one "unknown task" answer.
pub(crate) async fn find(
    tasks: &Tasks,
    identity: &Identity,
    is_admin: bool,
    task_id: &str,
) -> Result<(FoundTask, TaskView), McpError> {
    // One answer for unknown, expired and not-yours ids: the same bytes, whatever the id.
    let unknown = || McpError::InvalidParams("Unknown task".to_owned());
    let id = TaskId::from_client(task_id).ok_or_else(unknown)?;
    // A caller without credentials owns no task, so it can follow none.
    if !identity.may_own_tasks(is_admin) {
        return Err(unknown());
    }
    // Every source that may hold the id is read, at once. Which ones is decided by
    // the id's text alone, so an id that exists but is not yours takes the same path,
    // and the same time, as one that does not exist. Usually one source is left (the
    // id's prefix names it), and it is simply read.
    let mut failure = None;
    let mut found = None;
    let sources: Vec<_> = tasks
        .sources
        .iter()
        .filter(|source| source.may_hold(&id))
        .collect();
    let answers = match sources.as_slice() {
        [] => Vec::new(),
        [only] => vec![Arc::clone(only).find(&id).await],
        many => {
            futures_util::future::join_all(many.iter().map(|source| Arc::clone(source).find(&id)))
                .await
        }
    };
    for lookup in answers {
        match lookup {
            Ok(Some(task)) if found.is_none() => found = Some(task),
            Ok(_) => {}
            Err(error) => failure = failure.or(Some(error)),
        }
    }
    let found = match (found, failure) {
        (Some(found), _) => found,
        (None, Some(error)) => return Err(error),
        (None, None) => return Err(unknown()),
    };
    let caller = Caller {
        subject: identity.subject.clone(),
        is_admin,
    };
    let expired = found
        .record
        .expires_at
        .is_some_and(|expires_at| expires_at <= found.now);
    if !found.record.may_follow(&caller) || expired {
        return Err(unknown());
    }
    let mut view = found.record.view(found.now, tasks.stale_after);
    let mut found = found;
    if view.stale {
        // Told as final, so recorded as final first (docs/design.md, "Stale replicas"),
        // in the task's own trace: this replica ends a task another one created.
        let span = task_span("task settle stale", &found);
        found = Arc::clone(&found.source)
            .settle_stale(found)
            .instrument(span)
            .await?;
        view = found.record.view(found.now, tasks.stale_after);
    }
    Ok((found, view))
}

/// How many tasks one page of a listing holds.
pub(crate) const LIST_PAGE: u32 = 50;

/// One page of the tasks the caller follows (started, or follows as their kind's
/// extra follower) across every source, newest first, each as the caller sees it,
/// and the cursor of the next page when there may be one. Administrators list
/// their own tasks too: a listing is "mine", not "everyone's".
///
/// # Errors
/// [`McpError::InvalidParams`] for a cursor this server did not give;
/// [`McpError::Unavailable`] when a source cannot be read.
pub(crate) async fn list_followed(
    tasks: &Tasks,
    context: &RequestContext,
    is_admin: bool,
    cursor: Option<&str>,
) -> Result<(Vec<(TaskRecord, TaskView)>, Option<String>), McpError> {
    let before = cursor
        .map(|token| {
            PageCursor::decode(token).ok_or_else(|| {
                McpError::InvalidParams(
                    "invalid cursor: send back a nextCursor exactly as it was given".to_owned(),
                )
            })
        })
        .transpose()?;
    if !context.identity.may_own_tasks(is_admin) {
        return Ok((Vec::new(), None));
    }
    let subject = context.identity.subject.as_str();
    let pages = futures_util::future::join_all(
        tasks
            .sources
            .iter()
            .map(|source| source.list_followed(subject, before.as_ref(), LIST_PAGE)),
    )
    .await;
    let page_len = usize::try_from(LIST_PAGE).unwrap_or(usize::MAX);
    let mut more = false;
    let mut merged = Vec::new();
    for (page, source) in pages.into_iter().zip(&tasks.sources) {
        let page = page?;
        // A full page from any source means that source may hold older tasks.
        more |= page.len() >= page_len;
        merged.extend(page.into_iter().map(|(record, now)| FoundTask {
            record,
            now,
            source: Arc::clone(source),
        }));
    }
    merged.sort_by(|a, b| {
        (b.record.created_at, b.record.id.as_str())
            .cmp(&(a.record.created_at, a.record.id.as_str()))
    });
    more |= merged.len() > page_len;
    merged.truncate(page_len);
    let next = more.then(|| merged.last()).flatten().map(|found| {
        PageCursor {
            created_at: found.record.created_at,
            id: found.record.id.as_str().to_owned(),
        }
        .encode()
    });
    let mut listed = Vec::with_capacity(merged.len());
    for mut found in merged {
        if found
            .record
            .expires_at
            .is_some_and(|expires_at| expires_at <= found.now)
        {
            continue;
        }
        let mut view = found.record.view(found.now, tasks.stale_after);
        if view.stale {
            // Told as final, so recorded as final first, as `find` does.
            found = Arc::clone(&found.source).settle_stale(found).await?;
            view = found.record.view(found.now, tasks.stale_after);
        }
        listed.push((found.record, view));
    }
    Ok((listed, next))
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
