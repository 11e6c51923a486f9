//! The `tools/call` pipeline: identity → authorization (persona: tool and
//! connection) → gates (rate limit, task support, argument validation) → consent
//! (a verified `requestState` from an earlier `input_required` round) → handler.
//!
//! A refusal by authorization or a gate is a tool result with `isError: true` and a
//! structured error; a malformed call is a JSON-RPC error. Refused calls never reach
//! a handler.

use std::sync::Arc;
use std::time::Instant;

use docket_protocol::JsonObject;
use docket_protocol::logging::LogLevel;
use docket_protocol::tools::{CallToolParams, CallToolResult};
use docket_task::TaskId;
use docket_task::store::NewTask;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::attribution::Attribution;
use crate::audit::redact_arguments;
use crate::error::McpError;
use crate::headers;
use crate::metrics::CallOutcome;
use crate::persona::Persona;
use crate::refusal::Refusal;
use crate::registry::{
    Consent, ConsentRequest, InputRound, Logger, Progress, RegisteredTool, TaskSupport, ToolCall,
    ToolHandler, ToolOutcome,
};
use crate::reply::{Reply, to_value};
use crate::request::RequestContext;
use crate::request_state::{Binding, unix_now};
use crate::state::App;
use crate::tasks::{Tasks, create_result, spawn_failure, task_outcome};

mod finish;
mod running;

use finish::Finish;
use running::{Notifications, RunningCall, stream_call};

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
    attribution: Arc<Attribution>,
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
    let scheduled = context
        .identity
        .run
        .as_ref()
        .is_some_and(|run| run.scheduled);
    let attribution = Attribution::new(scheduled)
        .map_err(|err| McpError::Internal(format!("could not draw a call id: {err}")))?
        .capturing_statements(app.config().telemetry.capture_statements);
    let call = Call {
        app,
        context,
        name: params.name.clone(),
        tool,
        arguments,
        started,
        attribution: Arc::new(attribution),
    };
    let identity = Arc::clone(&call.context.identity);
    let stages = async {
        // The stages that cost get spans of their own: who may call (persona, tool,
        // connection, the gates) and the consent step (EXPLAIN estimates).
        let authorize = tracing::info_span!("authorize", otel.kind = "internal");
        let (persona, connection, declares_tasks, input) = authorize.in_scope(|| {
            let (persona, connection) = call.authorize()?;
            let declares_tasks = call.gates(&persona)?;
            let input = call.input_round(&params)?;
            Ok::<_, Stop>((persona, connection, declares_tasks, input))
        })?;
        let finish = call.finish(&persona, connection);
        let consent = tracing::info_span!("consent", otel.kind = "internal");
        if let Some(answer) = call
            .consent(&persona, input.as_ref(), &finish)
            .instrument(consent)
            .await?
        {
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
            attribution: Arc::clone(&self.attribution),
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
            attribution: &self.attribution,
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
                        log: Logger::default(),
                        input,
                        cancel: CancellationToken::new(),
                        task: None,
                        attribution: Arc::clone(&self.attribution),
                    };
                    if let Some(own_task) = handler.start_own_task(&call) {
                        return match own_task.await {
                            Ok(record) => {
                                state.metrics.record_tool_call(
                                    &self.name,
                                    CallOutcome::TaskCreated,
                                    self.started.elapsed(),
                                );
                                crate::reply::encode(&create_result(&record), &state.server_info)
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
        // Log messages go out only to a caller that asked for them, at its level.
        let (log, log_messages) = match self
            .context
            .meta
            .log_level
            .as_deref()
            .and_then(LogLevel::parse)
        {
            Some(minimum) => {
                let (sender, receiver) = mpsc::unbounded_channel();
                (Logger::new(minimum, sender), Some(receiver))
            }
            None => (Logger::default(), None),
        };
        let call = ToolCall {
            arguments: self.arguments,
            identity: Arc::clone(&self.context.identity),
            persona,
            client_capabilities: self.context.meta.client_capabilities.clone(),
            progress,
            log,
            input,
            cancel: cancel.clone(),
            task: None,
            attribution: Arc::clone(&self.attribution),
        };
        // The handler's own tokio task stays in the request's span.
        let running = RunningCall::new(
            tokio::spawn(async move { handler.call(call).await }.in_current_span()),
            cancel,
        );
        // The answer streams when something may be sent before it.
        if progress_updates.is_none() && log_messages.is_none() {
            let outcome = running.wait().await;
            return finish.into_result(outcome).map(Reply::Json);
        }
        let (items, receiver) = mpsc::channel(32);
        tokio::spawn(
            stream_call(
                running,
                Notifications {
                    progress: progress_updates,
                    logs: log_messages,
                },
                items,
                finish,
            )
            .in_current_span(),
        );
        Ok(Reply::channel(receiver))
    }
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
    let id = TaskId::generate_in(crate::tasks::CALL_TASK_IDS)
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
        // The request's own span: the task's work, its cancel and its ending on any
        // replica continue this trace.
        trace_context: crate::telemetry::current_trace(),
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
            let attribution = Arc::clone(&call.attribution);
            let running =
                RunningCall::new(tokio::spawn(handler.call(call).in_current_span()), cancel);
            let mut outcome = running.wait().await;
            if let ToolOutcome::Result(result) = &mut outcome {
                attribution.stamp(result);
            }
            task_outcome(outcome)
        })
        .await
        .map_err(spawn_failure)?;
    let elapsed = finish.started.elapsed();
    app.state
        .metrics
        .record_tool_call(&finish.tool, CallOutcome::TaskCreated, elapsed);
    tracing::info!(tool = finish.tool, subject = finish.subject, task = %record.id, "task created");
    crate::reply::encode(&create_result(&record), &app.state.server_info)
}

/// Runs one `tools/call` in-process, for a script run's `platform.*` calls
/// (`run_id` names the run) and the portal's pages (no run): the whole
/// pipeline (persona from `identity`'s roles, rate limit, argument
/// validation, consent, audit with the run id), as a request that declares no
/// extension and asks for no progress, so the answer is always direct.
pub(crate) async fn call_in_process(
    app: &App,
    identity: Arc<crate::auth::Identity>,
    run_id: Option<&str>,
    tool: &str,
    arguments: Value,
) -> Result<Value, McpError> {
    let context = RequestContext::in_process(identity, run_id);
    let params = serde_json::json!({"name": tool, "arguments": arguments});
    match call_tool(app, context, Some(params)).await? {
        Reply::Json(value) => Ok(value),
        Reply::Encoded(bytes) => serde_json::from_slice(&bytes)
            .map_err(|err| McpError::Internal(format!("could not read back a result: {err}"))),
        // Only a request with a progress token streams.
        Reply::Stream(_) => Err(McpError::Internal(
            "an in-process call answered with a stream".into(),
        )),
    }
}

/// The text blocks of a tool result, one per line.
pub(crate) fn result_text(answer: &Value) -> String {
    answer
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|block| block.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}
