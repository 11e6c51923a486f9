//! The `tools/call` pipeline: identity → authorization (persona: tool and
//! connection) → gates (rate limit, task support, argument validation) → consent
//! (a verified `requestState` from an earlier `input_required` round) → handler.
//!
//! A refusal by authorization or a gate is a tool result with `isError: true` and a
//! structured error; a malformed call is a JSON-RPC error. Refused calls never reach
//! a handler.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use docket_protocol::JsonObject;
use docket_protocol::jsonrpc::{JsonRpcVersion, OutgoingNotification};
use docket_protocol::mrtr::InputRequiredResult;
use docket_protocol::progress::{PROGRESS_METHOD, ProgressParams};
use docket_protocol::result::ResultType;
use docket_protocol::tools::{CallToolParams, CallToolResult};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::app::App;
use crate::dispatch::{Reply, RequestContext, to_value};
use crate::error::McpError;
use crate::headers;
use crate::http::StreamItem;
use crate::metrics::CallOutcome;
use crate::registry::{InputRound, Progress, ProgressUpdate, TaskSupport, ToolCall, ToolOutcome};
use crate::request_state::Binding;
use crate::tools::{PLATFORM_INFO, error_result};

/// Runs one `tools/call`.
pub(crate) async fn call_tool(
    app: &App,
    context: RequestContext,
    params: Option<Value>,
) -> Result<Reply, McpError> {
    let started = Instant::now();
    let params: CallToolParams = serde_json::from_value(params.unwrap_or(Value::Null))
        .map_err(|err| McpError::InvalidParams(format!("invalid tools/call params: {err}")))?;
    let state = &app.state;
    let tool = state
        .registry
        .get(&params.name)
        .ok_or_else(|| McpError::InvalidParams(format!("Unknown tool: {}", params.name)))?;
    let arguments = params.arguments.clone().unwrap_or_default();
    headers::check_param_headers(&context.headers, &tool.spec.input_schema, &arguments)
        .map_err(McpError::HeaderMismatch)?;

    let identity = &context.identity;
    let refuse = |result: CallToolResult| {
        state
            .metrics
            .record_tool_call(&params.name, CallOutcome::Refused, started.elapsed());
        tracing::info!(
            tool = params.name,
            subject = identity.subject,
            "tool call refused"
        );
        to_value(&result).map(Reply::Json)
    };

    // Authorization: the persona must allow the tool and any connection it names.
    let Some(persona) = state.personas.resolve(&identity.roles) else {
        return refuse(error_result(
            "unauthorized",
            "authorization_denied",
            &format!(
                "not authorized: no persona matches the roles of {}",
                identity.display_name
            ),
            "Ask an administrator to give you a role that maps to a persona.",
        ));
    };
    if !persona.may_call_tool(&params.name) {
        return refuse(error_result(
            "unauthorized",
            "authorization_denied",
            &format!(
                "not authorized: tool not allowed for persona: {}",
                persona.name
            ),
            &format!(
                "Persona \"{}\" is not permitted to call \"{}\". Request access from an administrator.",
                persona.name, params.name
            ),
        ));
    }
    if let Some(Value::String(connection)) = arguments.get("connection")
        && !persona.may_use_connection(connection)
    {
        {
            return refuse(error_result(
                "unauthorized",
                "authorization_denied",
                &format!(
                    "not authorized: connection not allowed for persona: {}",
                    persona.name
                ),
                &format!(
                    "Persona \"{}\" may not use connection \"{connection}\".",
                    persona.name
                ),
            ));
        }
    }

    // Gates. The rate limit comes first; platform_info stays callable so a caller
    // can always find out who it is.
    if params.name != PLATFORM_INFO
        && let Err(limited) = state.rate_limiter.check(&identity.subject, Instant::now())
    {
        {
            return refuse(error_result(
                "rate_limited",
                "rate_limited",
                &format!(
                    "RATE_LIMITED: too many tool calls in a short window; {} was refused",
                    params.name
                ),
                &format!(
                    "Wait {} seconds before calling again.",
                    limited.retry_after.as_secs().max(1)
                ),
            ));
        }
    }
    let declares_tasks = context.meta.client_capabilities.declares_tasks();
    if tool.spec.task_support == TaskSupport::Required && !declares_tasks {
        return Err(McpError::MissingCapability {
            message: format!(
                "the tool {} runs only as a task: declare the io.modelcontextprotocol/tasks extension",
                params.name
            ),
            required: Box::new(docket_protocol::meta::ClientCapabilities::with_extension(
                docket_protocol::TASKS_EXTENSION,
            )),
        });
    }
    tool.validate(&arguments).map_err(|problems| {
        McpError::InvalidParams(format!(
            "invalid arguments for tool {}: {problems}",
            params.name
        ))
    })?;

    // Consent and other multi round-trip input: the state must be ours, for this
    // caller and this very call.
    let now = unix_now();
    let binding = Binding {
        subject: &identity.subject,
        tool: &params.name,
        arguments: &arguments,
    };
    let input = match (&params.request_state, &params.input_responses) {
        (None, None) => None,
        (Some(sealed), responses) => {
            let state_value = state
                .state_key
                .open(sealed, binding, now)
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
    };

    let cancel = CancellationToken::new();
    let (progress, progress_updates) = match &context.meta.progress_token {
        Some(token) => {
            let (sender, receiver) = mpsc::unbounded_channel();
            (Progress::new(token.clone(), sender), Some(receiver))
        }
        None => (Progress::default(), None),
    };
    let call = ToolCall {
        arguments: arguments.clone(),
        identity: identity.clone(),
        persona,
        client_capabilities: context.meta.client_capabilities.clone(),
        progress,
        input,
        cancel: cancel.clone(),
    };
    let handler = tool.handler();
    let running = RunningCall {
        handle: tokio::spawn(async move { handler.call(call).await }),
        cancel,
    };
    let finish = Finish {
        app: app.clone(),
        tool: params.name.clone(),
        subject: identity.subject.clone(),
        arguments,
        started,
        now,
    };

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

/// A handler running on its own tokio task. Dropping it (the client went away)
/// cancels the call and aborts the task.
struct RunningCall {
    handle: JoinHandle<ToolOutcome>,
    cancel: CancellationToken,
}

impl RunningCall {
    async fn wait(mut self) -> ToolOutcome {
        match (&mut self.handle).await {
            Ok(outcome) => outcome,
            Err(err) => ToolOutcome::Error(crate::registry::ToolError::Internal(format!(
                "the tool stopped unexpectedly: {err}"
            ))),
        }
    }
}

impl Drop for RunningCall {
    fn drop(&mut self) {
        self.cancel.cancel();
        self.handle.abort();
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
struct Finish {
    app: App,
    tool: String,
    subject: String,
    arguments: JsonObject,
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
        tracing::info!(tool = self.tool, subject = self.subject, outcome = ?label, ?elapsed, "tool call");
        answer
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}
