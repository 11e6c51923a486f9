//! `manage_script run_draft`: source run as the caller, under draft limits, nothing saved.
use std::sync::Arc;

use docket_catalog::generate_id;
use docket_script::{Limits, RunProgress, ScriptFailure, ScriptInput};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::refusal::Refusal;
use crate::registry::{ToolCall, ToolOutcome};
use crate::tools::script_host::ScriptHost;

use super::answers::{not_found, refusal, text_result, unavailable};
use super::context::{DRAFT_SLOT_WAIT, ScriptTools};
use super::params::bind_params;

/// Runs source (given, or the caller's script's current version) as the
/// caller, under draft limits, persisting nothing.
pub(super) async fn draft(
    deps: &ScriptTools,
    call: &ToolCall,
    name: &str,
    source: Option<&str>,
) -> ToolOutcome {
    let (source, contract) = match source {
        Some(source) => (
            source.to_owned(),
            call.arguments
                .get("params")
                .cloned()
                .unwrap_or_else(|| json!([])),
        ),
        None => {
            let script = match deps.owned(call, name).await {
                Ok(script) => script,
                Err(refused) => return refused,
            };
            match deps.store.script_version(&script.id, script.version).await {
                Ok(Some(version)) => (version.source, version.params),
                Ok(None) => return not_found(name),
                Err(error) => return unavailable(&error),
            }
        }
    };
    let args = call
        .arguments
        .get("args")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let params = match bind_params(&contract, args) {
        Ok(params) => params,
        Err(problem) => {
            return refusal(
                Refusal::InvalidArguments,
                &problem,
                "Give args matching the params.",
            );
        }
    };
    let Some(app) = deps.app.get().cloned() else {
        return refusal(
            Refusal::Unavailable,
            "the server is starting",
            "Try again in a moment.",
        );
    };
    let Ok(Ok(_slot)) = tokio::time::timeout(DRAFT_SLOT_WAIT, deps.draft_slots.acquire()).await
    else {
        return refusal(
            Refusal::Busy,
            "too many drafts are running on this server",
            "Try again in a few seconds.",
        );
    };
    let run_id = match generate_id() {
        Ok(id) => format!("draft-{id}"),
        Err(error) => return refusal(Refusal::Internal, &error.to_string(), "Try again."),
    };
    let host = Arc::new(ScriptHost::new(
        app,
        Arc::clone(&call.identity),
        run_id.clone(),
    ));
    let cancel = CancellationToken::new();
    let _stop_with_call = call.cancel.clone().drop_guard();
    let call_cancel = call.cancel.clone();
    let stop = cancel.clone();
    tokio::spawn(async move {
        call_cancel.cancelled().await;
        stop.cancel();
    });
    let report = deps
        .isolation
        .run(
            source,
            ScriptInput {
                run_id: run_id.clone(),
                params,
                fire_time: None,
            },
            host,
            Limits::draft(),
            cancel,
            Arc::new(RunProgress::new()),
        )
        .await;
    let (status, result, error) = match &report.outcome {
        Ok(result) => ("succeeded", result.clone(), None),
        Err(ScriptFailure::Cancelled) => ("cancelled", Value::Null, None),
        Err(failure) => ("failed", Value::Null, Some(failure.to_string())),
    };
    ToolOutcome::Result(text_result(
        json!({
            "run_id": run_id,
            "draft": true,
            "status": status,
            "result": result,
            "error": error,
            "log": report.log,
            "log_truncated": report.log_truncated,
            "steps": report.steps,
            "tool_calls": report.host_calls,
        }),
        error.is_some(),
    ))
}
