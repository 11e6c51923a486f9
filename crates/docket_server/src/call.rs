//! The `tools/call` pipeline: identity → authorization (persona: tool and
//! connection) → gates (rate limit, task support, argument validation) → consent
//! (a verified `requestState` from an earlier `input_required` round) → handler.
//!
//! A refusal by authorization or a gate is a tool result with `isError: true` and a
//! structured error; a malformed call is a JSON-RPC error. Refused calls never reach
//! a handler.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use docket_protocol::JsonObject;
use docket_protocol::jsonrpc::{JsonRpcVersion, OutgoingNotification};
use docket_protocol::mrtr::InputRequiredResult;
use docket_protocol::progress::{PROGRESS_METHOD, ProgressParams};
use docket_protocol::result::ResultType;
use docket_protocol::tools::{CallToolParams, CallToolResult};
use docket_task::TaskId;
use docket_task::store::{AuditContext, AuditEntry, NewTask};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::audit::redact_arguments;
use crate::error::McpError;
use crate::headers;
use crate::metrics::CallOutcome;
use crate::persona::Persona;
use crate::refusal::Refusal;
use crate::registry::{
    Consent, ConsentRequest, InputRound, Progress, ProgressUpdate, RegisteredTool, TaskSupport,
    ToolCall, ToolHandler, ToolOutcome,
};
use crate::reply::{Reply, StreamItem, to_value};
use crate::request::RequestContext;
use crate::request_state::Binding;
use crate::state::App;
use crate::tasks::{Tasks, create_result_value, spawn_failure, task_outcome};

/// Why the pipeline stopped before the handler ran: a refusal (a tool result with
/// `isError: true`, counted and logged as refused) or a malformed call (a JSON-RPC
/// error).
enum Stop {
    Refused(CallToolResult),
    Error(McpError),
}

impl From<McpError> for Stop {
    fn from(error: McpError) -> Self {
        Self::Error(error)
    }
}

/// One `tools/call` on its way through the pipeline: what every stage reads.
struct Call<'a> {
    app: &'a App,
    context: RequestContext,
    name: String,
    tool: &'a RegisteredTool,
    arguments: JsonObject,
    started: Instant,
}

/// Runs one `tools/call` through the pipeline's stages, in the contract's order:
/// authorize → gates → consent → start a task or answer.
pub(crate) async fn call_tool(
    app: &App,
    context: RequestContext,
    params: Option<Value>,
) -> Result<Reply, McpError> {
    let started = Instant::now();
    let params: CallToolParams = serde_json::from_value(params.unwrap_or(Value::Null))
        .map_err(|err| McpError::InvalidParams(format!("invalid tools/call params: {err}")))?;
    let tool = app
        .state
        .registry
        .get(&params.name)
        .ok_or_else(|| McpError::InvalidParams(format!("Unknown tool: {}", params.name)))?;
    let arguments = params.arguments.clone().unwrap_or_default();
    // A call from inside a script run has no HTTP request, so no headers to mirror.
    if context.run_id.is_none() {
        headers::check_param_headers(&context.headers, &tool.spec.input_schema, &arguments)
            .map_err(McpError::HeaderMismatch)?;
    }
    let call = Call {
        app,
        context,
        name: params.name.clone(),
        tool,
        arguments,
        started,
    };
    let identity = Arc::clone(&call.context.identity);
    let stages = async {
        let (persona, connection) = call.authorize()?;
        let declares_tasks = call.gates(&persona)?;
        let input = call.input_round(&params)?;
        let finish = call.finish(&persona, connection);
        if let Some(answer) = call.consent(&persona, input.as_ref(), &finish).await? {
            return Ok(answer);
        }
        call.start_or_answer(persona, input, declares_tasks, finish)
            .await
            .map_err(Stop::Error)
    };
    match stages.await {
        Ok(reply) => Ok(reply),
        Err(Stop::Error(error)) => Err(error),
        Err(Stop::Refused(result)) => {
            app.state.metrics.record_tool_call(
                &params.name,
                CallOutcome::Refused,
                started.elapsed(),
            );
            tracing::info!(
                tool = params.name,
                subject = identity.subject,
                "tool call refused"
            );
            to_value(&result).map(Reply::Json)
        }
    }
}

impl Call<'_> {
    /// Authorization: the persona must allow the tool and the connection the call
    /// uses — the one it names, or the tool's default when it names none.
    fn authorize(&self) -> Result<(Arc<Persona>, Option<String>), Stop> {
        let identity = &self.context.identity;
        let Some(persona) = self.app.state.personas.resolve(&identity.roles) else {
            return Err(Stop::Refused(Refusal::Unauthorized.result(
                &format!(
                    "not authorized: no persona matches the roles of {}",
                    identity.display_name
                ),
                "Ask an administrator to give you a role that maps to a persona.",
            )));
        };
        if !persona.may_call_tool(&self.name) {
            return Err(Stop::Refused(Refusal::Unauthorized.result(
                &format!(
                    "not authorized: tool not allowed for persona: {}",
                    persona.name
                ),
                &format!(
                    "Persona \"{}\" is not permitted to call \"{}\". Request access from an administrator.",
                    persona.name, self.name
                ),
            )));
        }
        let connection = match self.arguments.get("connection") {
            Some(Value::String(named)) => Some(named.clone()),
            _ => self.tool.spec.default_connection.clone(),
        };
        if let Some(connection) = &connection
            && !persona.may_use_connection(connection)
        {
            return Err(Stop::Refused(Refusal::Unauthorized.result(
                &format!(
                    "not authorized: connection not allowed for persona: {}",
                    persona.name
                ),
                &format!(
                    "Persona \"{}\" may not use connection \"{connection}\".",
                    persona.name
                ),
            )));
        }
        Ok((persona, connection))
    }

    /// The gates: the rate limit first (a tool may be exempt, as `platform_info`
    /// is, so a caller can always find out who it is), then task support, the
    /// arguments against the tool's schema, and draining. Answers whether the call
    /// may become a task.
    fn gates(&self, persona: &Persona) -> Result<bool, Stop> {
        let state = &self.app.state;
        let identity = &self.context.identity;
        let task_support = self.tool.spec.task_support;
        if self.tool.spec.rate_limited
            && let Err(limited) = state.rate_limiter.check(&identity.subject, Instant::now())
        {
            return Err(Stop::Refused(Refusal::RateLimited.result(
                &format!(
                    "RATE_LIMITED: too many tool calls in a short window; {} was refused",
                    self.name
                ),
                &format!(
                    "Wait {} seconds before calling again.",
                    limited.retry_after.as_secs().max(1)
                ),
            )));
        }
        // A caller without credentials (other than the local administrator of the
        // embedded default) shares one subject with every other such caller: it gets
        // no task, so nobody can follow or cancel another's.
        let anonymous = !identity.may_own_tasks(persona.is_admin);
        if anonymous && task_support == TaskSupport::Required {
            return Err(Stop::Error(McpError::InvalidParams(format!(
                "the tool {} runs only as a task, and callers without credentials get no tasks: \
                 authenticate",
                self.name
            ))));
        }
        let declares_tasks = self.context.meta.client_capabilities.declares_tasks() && !anonymous;
        if task_support == TaskSupport::Required && !declares_tasks {
            return Err(Stop::Error(McpError::MissingCapability {
                message: format!(
                    "the tool {} runs only as a task: declare the io.modelcontextprotocol/tasks extension",
                    self.name
                ),
                required: Box::new(docket_protocol::meta::ClientCapabilities::with_extension(
                    docket_protocol::TASKS_EXTENSION,
                )),
            }));
        }
        self.tool.validate(&self.arguments).map_err(|problems| {
            McpError::InvalidParams(format!(
                "invalid arguments for tool {}: {problems}",
                self.name
            ))
        })?;
        // A draining replica starts no new long work, task or direct, whatever the
        // tool: the caller is sent to another replica, every tool alike.
        if task_support != TaskSupport::Never && self.app.is_draining() {
            return Err(Stop::Error(McpError::Unavailable(
                docket_task::runtime::SpawnError::Draining.to_string(),
            )));
        }
        Ok(declares_tasks)
    }

    /// The answers of an earlier `input_required` round: the state must be ours,
    /// for this caller and this very call.
    fn input_round(&self, params: &CallToolParams) -> Result<Option<InputRound>, Stop> {
        let binding = Binding {
            subject: &self.context.identity.subject,
            tool: &self.name,
            arguments: &self.arguments,
        };
        Ok(match (&params.request_state, &params.input_responses) {
            (None, None) => None,
            (Some(sealed), responses) => {
                let state_value = self
                    .app
                    .state
                    .state_key
                    .open(sealed, binding, unix_now())
                    .map_err(|err| McpError::InvalidParams(err.to_string()))?;
                Some(InputRound {
                    responses: responses.clone().unwrap_or_default(),
                    state: state_value,
                })
            }
            (None, Some(responses)) => Some(InputRound {
                responses: responses.clone(),
                state: Value::Null,
            }),
        })
    }

    /// What turns the handler's outcome into the answer, and audits it.
    fn finish(&self, persona: &Persona, connection: Option<String>) -> Finish {
        Finish {
            app: self.app.clone(),
            tool: self.name.clone(),
            subject: self.context.identity.subject.clone(),
            persona: persona.name.clone(),
            connection,
            arguments: self.arguments.clone(),
            run_id: self.context.run_id.clone(),
            started: self.started,
            now: unix_now(),
        }
    }

    /// Consent: the tool may ask the client before anything runs, and before any
    /// task exists, so a refusal or a prompt leaves no task behind. `Some` is the
    /// answer when the call stops here.
    async fn consent(
        &self,
        persona: &Persona,
        input: Option<&InputRound>,
        finish: &Finish,
    ) -> Result<Option<Reply>, Stop> {
        let request = ConsentRequest {
            arguments: &self.arguments,
            identity: &self.context.identity,
            persona,
            client_capabilities: &self.context.meta.client_capabilities,
            input,
        };
        match self.tool.handler().consent(&request).await {
            Consent::Proceed => Ok(None),
            Consent::Refuse(result) => Err(Stop::Refused(result)),
            Consent::Error(error) => Err(Stop::Error(McpError::from(error))),
            Consent::Ask { requests, state } => {
                let outcome = ToolOutcome::InputRequired { requests, state };
                finish
                    .clone()
                    .into_result(outcome)
                    .map(|value| Some(Reply::Json(value)))
                    .map_err(Stop::Error)
            }
        }
    }

    /// Starts the call: as a task when the tool may become one, this very request
    /// declares the extension, and tasks are on (a tool whose work is durable on
    /// its own answers its own task); otherwise the handler runs now, streaming
    /// progress when the request asked for it.
    async fn start_or_answer(
        self,
        persona: Arc<Persona>,
        input: Option<InputRound>,
        declares_tasks: bool,
        finish: Finish,
    ) -> Result<Reply, McpError> {
        let state = &self.app.state;
        let handler = self.tool.handler();
        let task_support = self.tool.spec.task_support;
        if task_support != TaskSupport::Never && declares_tasks {
            match &state.tasks {
                Some(tasks) => {
                    let call = ToolCall {
                        arguments: self.arguments,
                        identity: Arc::clone(&self.context.identity),
                        persona,
                        client_capabilities: self.context.meta.client_capabilities.clone(),
                        progress: Progress::default(),
                        input,
                        cancel: CancellationToken::new(),
                        task: None,
                    };
                    if let Some(own_task) = handler.start_own_task(&call) {
                        return match own_task.await {
                            Ok(record) => {
                                state.metrics.record_tool_call(
                                    &self.name,
                                    CallOutcome::TaskCreated,
                                    self.started.elapsed(),
                                );
                                create_result_value(&record).map(Reply::Json)
                            }
                            Err(refused) => finish.into_result(refused).map(Reply::Json),
                        };
                    }
                    return start_task(self.app, tasks, call, handler, finish).await;
                }
                None if task_support == TaskSupport::Required => {
                    return Err(McpError::Unavailable(format!(
                        "the tool {} runs only as a task, and tasks are not enabled on this server",
                        self.name
                    )));
                }
                None => {}
            }
        }
        let cancel = CancellationToken::new();
        let (progress, progress_updates) = match &self.context.meta.progress_token {
            Some(token) => {
                let (sender, receiver) = mpsc::unbounded_channel();
                (Progress::new(token.clone(), sender), Some(receiver))
            }
            None => (Progress::default(), None),
        };
        let call = ToolCall {
            arguments: self.arguments,
            identity: Arc::clone(&self.context.identity),
            persona,
            client_capabilities: self.context.meta.client_capabilities.clone(),
            progress,
            input,
            cancel: cancel.clone(),
            task: None,
        };
        let running = RunningCall::new(
            tokio::spawn(async move { handler.call(call).await }),
            cancel,
        );
        match progress_updates {
            None => {
                let outcome = running.wait().await;
                finish.into_result(outcome).map(Reply::Json)
            }
            Some(updates) => {
                let (items, receiver) = mpsc::channel(32);
                tokio::spawn(stream_call(running, updates, items, finish));
                Ok(Reply::Stream(receiver))
            }
        }
    }
}

/// How long a cancelled handler may take to clean up (cancel its upstream
/// query, abort its upload, record the call) before its task is aborted.
const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// A handler running on its own tokio task. Dropping it (the client went away,
/// the task was cancelled) fires the call's cancel token and aborts the task if
/// it has not ended within [`CANCEL_GRACE`]: a handler that honours the token
/// finishes its cleanup (aborting at once would cut a cleanup that is already
/// awaiting, such as the `DELETE` to Trino or the call record), and one that
/// ignores it is stopped anyway.
struct RunningCall {
    handle: Option<JoinHandle<ToolOutcome>>,
    cancel: CancellationToken,
}

impl RunningCall {
    fn new(handle: JoinHandle<ToolOutcome>, cancel: CancellationToken) -> Self {
        Self {
            handle: Some(handle),
            cancel,
        }
    }

    async fn wait(mut self) -> ToolOutcome {
        let Some(handle) = self.handle.as_mut() else {
            return ToolOutcome::Error(crate::registry::ToolError::Internal(
                "the tool was already stopped".into(),
            ));
        };
        let outcome = handle.await;
        self.handle = None;
        match outcome {
            Ok(outcome) => outcome,
            Err(err) => ToolOutcome::Error(crate::registry::ToolError::Internal(format!(
                "the tool stopped unexpectedly: {err}"
            ))),
        }
    }
}

impl Drop for RunningCall {
    fn drop(&mut self) {
        let Some(mut handle) = self.handle.take() else {
            return;
        };
        self.cancel.cancel();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if tokio::time::timeout(CANCEL_GRACE, &mut handle)
                        .await
                        .is_err()
                    {
                        handle.abort();
                    }
                });
            }
            Err(_) => handle.abort(),
        }
    }
}

/// Forwards progress to the SSE stream until the handler ends, then sends the
/// final answer. A stream that closes first cancels the call.
async fn stream_call(
    running: RunningCall,
    mut updates: mpsc::UnboundedReceiver<ProgressUpdate>,
    items: mpsc::Sender<StreamItem>,
    finish: Finish,
) {
    let wait = running.wait();
    tokio::pin!(wait);
    let outcome = loop {
        tokio::select! {
            outcome = &mut wait => break outcome,
            Some(update) = updates.recv() => {
                if items.send(StreamItem::Notification(progress_notification(update))).await.is_err() {
                    tracing::info!(tool = finish.tool, "the client closed the stream; cancelling the call");
                    return;
                }
            }
            () = items.closed() => {
                tracing::info!(tool = finish.tool, "the client closed the stream; cancelling the call");
                return;
            }
        }
    };
    // Progress sent just before the end still goes out first, in order.
    while let Ok(update) = updates.try_recv() {
        if items
            .send(StreamItem::Notification(progress_notification(update)))
            .await
            .is_err()
        {
            return;
        }
    }
    let item = match finish.into_result(outcome) {
        Ok(result) => StreamItem::Result(result),
        Err(error) => StreamItem::Error(error.to_wire().1),
    };
    let _ = items.send(item).await;
}

fn progress_notification(update: ProgressUpdate) -> OutgoingNotification {
    let params = ProgressParams {
        progress_token: update.token,
        progress: update.progress.into(),
        total: update.total.map(Into::into),
        message: update.message,
    };
    OutgoingNotification {
        jsonrpc: JsonRpcVersion,
        method: PROGRESS_METHOD.to_owned(),
        params: serde_json::to_value(params).unwrap_or(Value::Null),
    }
}

/// What is needed to turn a handler's outcome into an answer.
#[derive(Clone)]
struct Finish {
    app: App,
    tool: String,
    subject: String,
    persona: String,
    connection: Option<String>,
    arguments: JsonObject,
    /// The script run making the call, recorded in its audit row.
    run_id: Option<String>,
    started: Instant,
    now: u64,
}

impl Finish {
    fn into_result(self, outcome: ToolOutcome) -> Result<Value, McpError> {
        let state = &self.app.state;
        let (label, answer) = match outcome {
            ToolOutcome::Result(result) => {
                let label = if result.is_error() {
                    CallOutcome::ToolError
                } else {
                    CallOutcome::Ok
                };
                (label, to_value(&result))
            }
            ToolOutcome::InputRequired {
                requests,
                state: handler_state,
            } => {
                let binding = Binding {
                    subject: &self.subject,
                    tool: &self.tool,
                    arguments: &self.arguments,
                };
                let result = InputRequiredResult {
                    result_type: ResultType::InputRequired,
                    input_requests: Some(requests),
                    request_state: Some(state.state_key.seal(binding, &handler_state, self.now)),
                    meta: None,
                };
                (CallOutcome::InputRequired, to_value(&result))
            }
            ToolOutcome::Error(error) => (CallOutcome::ProtocolError, Err(McpError::from(error))),
        };
        let elapsed = self.started.elapsed();
        state.metrics.record_tool_call(&self.tool, label, elapsed);
        if label != CallOutcome::InputRequired {
            self.audit(label, &answer, elapsed);
        }
        tracing::info!(tool = self.tool, subject = self.subject, outcome = ?label, ?elapsed, "tool call");
        answer
    }
}

impl Finish {
    /// The audit context of this call.
    fn audit_context(&self) -> AuditContext {
        let redact_keys = &self.app.state.config.audit.redact_keys;
        let arguments = redact_arguments(&self.arguments, redact_keys);
        AuditContext {
            persona: Some(self.persona.clone()),
            connection: self.connection.clone(),
            // A script run's calls carry its run id, so the run's audit trail
            // can be read back call by call.
            arguments: match &self.run_id {
                Some(run_id) => serde_json::json!({"run_id": run_id, "arguments": arguments}),
                None => arguments,
            },
        }
    }

    /// Writes the audit row of a call that ran and did not become a task. Written
    /// in the background: an audit failure never fails the call.
    fn audit(&self, label: CallOutcome, answer: &Result<Value, McpError>, elapsed: Duration) {
        let Some(store) = self.app.state.audit.clone() else {
            return;
        };
        let (outcome, error_message) = match (label, answer) {
            (CallOutcome::Ok, _) => ("completed", None),
            (CallOutcome::ToolError, Ok(result)) => ("tool_error", first_text(result)),
            (_, Err(error)) => ("failed", Some(error.to_string())),
            _ => ("failed", None),
        };
        let entry = AuditEntry {
            tool: self.tool.clone(),
            subject: self.subject.clone(),
            context: self.audit_context(),
            success: label == CallOutcome::Ok,
            outcome: outcome.to_owned(),
            error_message,
            duration_ms: i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
        };
        tokio::spawn(async move {
            if let Err(err) = store.record_audit(entry).await {
                tracing::warn!(error = %err, "could not write an audit row");
            }
        });
    }
}

/// The first text block of a result, for an audit message.
fn first_text(result: &Value) -> Option<String> {
    result
        .get("content")?
        .as_array()?
        .iter()
        .find_map(|block| block.get("text")?.as_str().map(str::to_owned))
}

/// Commits the task row, starts the work detached from this request, and answers
/// with the `CreateTaskResult`. The task's audit row is written when it ends.
async fn start_task(
    app: &App,
    tasks: &Tasks,
    mut call: ToolCall,
    handler: Arc<dyn ToolHandler>,
    finish: Finish,
) -> Result<Reply, McpError> {
    let id = TaskId::generate()
        .map_err(|err| McpError::Internal(format!("could not draw a task id: {err}")))?;
    let new = NewTask {
        id,
        tool: finish.tool.clone(),
        // Stored at rest as the audit row keeps them: secrets passed as
        // arguments are redacted.
        arguments: redact_arguments(&call.arguments, &app.state.config.audit.redact_keys),
        owner: finish.subject.clone(),
        extra_follower: None,
        replica_id: app.state.replica_id.clone(),
        status_message: Some("working".into()),
        retention: Some(tasks.retention),
        poll_interval_ms: tasks.poll_interval_ms,
        audit: finish.audit_context(),
    };
    let record = tasks
        .runtime
        .spawn(new, move |context| async move {
            let context = Arc::new(context);
            call.cancel = context.cancelled().clone();
            call.progress = Progress::for_task(Arc::clone(&context));
            call.task = Some(context);
            // The handler runs on its own tokio task so a panic ends the task as
            // failed instead of leaving it working; dropping `running` (a cancel)
            // stops it.
            let cancel = call.cancel.clone();
            let running = RunningCall::new(tokio::spawn(handler.call(call)), cancel);
            task_outcome(running.wait().await)
        })
        .await
        .map_err(spawn_failure)?;
    let elapsed = finish.started.elapsed();
    app.state
        .metrics
        .record_tool_call(&finish.tool, CallOutcome::TaskCreated, elapsed);
    tracing::info!(tool = finish.tool, subject = finish.subject, task = %record.id, "task created");
    create_result_value(&record).map(Reply::Json)
}

/// Runs one `tools/call` in-process, for a script run's `platform.*` calls:
/// the whole pipeline (persona from `identity`'s roles, rate limit, argument
/// validation, consent, audit with the run id), as a request that declares no
/// extension and asks for no progress, so the answer is always direct.
pub(crate) async fn call_in_process(
    app: &App,
    identity: Arc<crate::auth::Identity>,
    run_id: &str,
    tool: &str,
    arguments: Value,
) -> Result<Value, McpError> {
    let context = RequestContext {
        identity,
        meta: docket_protocol::meta::RequestMeta {
            protocol_version: docket_protocol::PROTOCOL_VERSION.to_owned(),
            client_capabilities: docket_protocol::meta::ClientCapabilities::default(),
            client_info: None,
            progress_token: None,
            log_level: None,
        },
        headers: http::HeaderMap::new(),
        run_id: Some(run_id.to_owned()),
    };
    let params = serde_json::json!({"name": tool, "arguments": arguments});
    match call_tool(app, context, Some(params)).await? {
        Reply::Json(value) => Ok(value),
        // Only a request with a progress token streams.
        Reply::Stream(_) => Err(McpError::Internal(
            "an in-process call answered with a stream".into(),
        )),
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}
