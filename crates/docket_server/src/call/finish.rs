//! Turning a handler's outcome into the answer: the metric, the log line, the
//! sealed state of an `input_required` round, and the call's audit row.

use std::sync::Arc;
use std::time::{Duration, Instant};

use docket_protocol::JsonObject;
use docket_protocol::mrtr::InputRequiredResult;
use docket_protocol::result::ResultType;
use docket_task::store::{AuditContext, AuditEntry};
use serde_json::Value;

use crate::attribution::Attribution;
use crate::audit::redact_arguments;
use crate::error::McpError;
use crate::metrics::CallOutcome;
use crate::registry::ToolOutcome;
use crate::reply::to_value;
use crate::request_state::Binding;
use crate::state::App;

/// What is needed to turn a handler's outcome into an answer.
#[derive(Clone)]
pub(super) struct Finish {
    pub(super) app: App,
    pub(super) tool: String,
    pub(super) subject: String,
    pub(super) persona: String,
    pub(super) connection: Option<String>,
    pub(super) arguments: JsonObject,
    /// The script run making the call, recorded in its audit row.
    pub(super) run_id: Option<String>,
    pub(super) started: Instant,
    pub(super) now: u64,
    /// Who the call ran as upstream and what it caused there.
    pub(super) attribution: Arc<Attribution>,
}

impl Finish {
    pub(super) fn into_result(self, outcome: ToolOutcome) -> Result<Value, McpError> {
        let state = &self.app.state;
        let (label, answer) = match outcome {
            ToolOutcome::Result(mut result) => {
                self.attribution.stamp(&mut result);
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
    pub(super) fn audit_context(&self) -> AuditContext {
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
    pub(super) fn audit(
        &self,
        label: CallOutcome,
        answer: &Result<Value, McpError>,
        elapsed: Duration,
    ) {
        let Some(writer) = &self.app.state.audit else {
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
            call_id: Some(self.attribution.call_id().to_owned()),
            engine_user: self.attribution.engine_user(),
            upstream_ids: self.attribution.query_ids(),
        };
        // Tried again while the store is away, as an ending is (tasks.stale_after),
        // and flushed at shutdown, so "audited once" holds for calls from requests
        // and from runs alike.
        writer.write(entry);
    }
}

/// The first text block of a result, for an audit message.
pub(super) fn first_text(result: &Value) -> Option<String> {
    result
        .get("content")?
        .as_array()?
        .iter()
        .find_map(|block| block.get("text")?.as_str().map(str::to_owned))
}
