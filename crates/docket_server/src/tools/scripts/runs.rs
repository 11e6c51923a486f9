//! `get_run`, `list_runs` and `cancel_run`: reading and stopping runs; and
//! `manage_script runs` and `get_run`, the original's commands for the same.

use docket_catalog::scripts::{CancelOutcome, RunFilter, RunStatus, Script};
use serde_json::{Value, json};

use crate::refusal::Refusal;
use crate::registry::{ToolCall, ToolOutcome};

use super::answers::{refusal, run_json, run_not_found, text_result, timestamp, unavailable};
use super::context::{MAX_LIST, ScriptTools, string_arg};

pub(super) async fn get_run(deps: &ScriptTools, call: &ToolCall) -> ToolOutcome {
    let id = string_arg(call, "run_id").unwrap_or_default();
    if id.is_empty() {
        return refusal(
            Refusal::InvalidArguments,
            "run_id is required",
            "Give the run_id run_script answered.",
        );
    }
    match deps.readable_run(call, id).await {
        Ok(Some(run)) => {
            let mut value = run_json(&run);
            value["requested_by"] = json!(run.requested_by);
            value["params"] = run.params.clone();
            value["steps"] = run.metrics.get("steps").cloned().unwrap_or(Value::Null);
            value["created_at"] = timestamp(Some(run.created_at));
            ToolOutcome::Result(text_result(value, run.status == RunStatus::Failed))
        }
        Ok(None) => run_not_found(),
        Err(refused) => refused,
    }
}

/// The `limit` argument: 20 unless given, at most [`MAX_LIST`].
fn list_limit(call: &ToolCall) -> u32 {
    call.arguments
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(20, |limit| u32::try_from(limit).unwrap_or(MAX_LIST))
        .clamp(1, MAX_LIST)
}

/// The status filter under `key`, or the refusal of a status no run has.
fn status_filter(call: &ToolCall, key: &str) -> Result<Option<RunStatus>, ToolOutcome> {
    match string_arg(call, key) {
        None => Ok(None),
        Some(name) => RunStatus::parse(name).map(Some).ok_or_else(|| {
            refusal(
                Refusal::InvalidArguments,
                &format!("{key} {name:?} is not a run status"),
                "A run is queued, running, succeeded, failed or cancelled.",
            )
        }),
    }
}

/// `manage_script runs`: one script's runs, newest first, by status.
pub(super) async fn script_runs(
    deps: &ScriptTools,
    call: &ToolCall,
    script: Script,
) -> ToolOutcome {
    let status = match status_filter(call, "run_status") {
        Ok(status) => status,
        Err(refused) => return refused,
    };
    let filter = RunFilter {
        script_id: Some(script.id.clone()),
        status,
        ..RunFilter::default()
    };
    match deps.store.list_runs(&filter, list_limit(call)).await {
        Ok(runs) => {
            let listed: Vec<Value> = runs.iter().map(run_json).collect();
            ToolOutcome::Result(text_result(
                json!({"name": script.name, "count": listed.len(), "runs": listed}),
                false,
            ))
        }
        Err(error) => unavailable(&error),
    }
}

pub(super) async fn list_runs(deps: &ScriptTools, call: ToolCall) -> ToolOutcome {
    let limit = list_limit(&call);
    let mut filter = RunFilter::default();
    match status_filter(&call, "status") {
        Ok(status) => filter.status = status,
        Err(refused) => return refused,
    }
    if let Some(name) = string_arg(&call, "name") {
        match deps.owned(&call, name).await {
            Ok(script) => filter.script_id = Some(script.id),
            Err(refused) => return refused,
        }
    } else if !call.persona.is_admin {
        filter.visible_to = Some(call.identity.subject.clone());
    }
    match deps.store.list_runs(&filter, limit).await {
        Ok(runs) => {
            let listed: Vec<Value> = runs.iter().map(run_json).collect();
            ToolOutcome::Result(text_result(
                json!({"count": listed.len(), "runs": listed}),
                false,
            ))
        }
        Err(error) => unavailable(&error),
    }
}

pub(super) async fn cancel_run(deps: &ScriptTools, call: ToolCall) -> ToolOutcome {
    let id = string_arg(&call, "run_id").unwrap_or_default();
    match deps.readable_run(&call, id).await {
        Ok(Some(_)) => {}
        Ok(None) => return run_not_found(),
        Err(refused) => return refused,
    }
    let message = match deps.bridge.cancel(id).await {
        Ok(Some(CancelOutcome::Ended(_))) => "The run was queued; it is cancelled.",
        Ok(Some(CancelOutcome::Requested)) => {
            "The run is stopping; it ends cancelled unless it finishes first."
        }
        Ok(Some(CancelOutcome::AlreadyEnded)) => "The run had already ended; it keeps its outcome.",
        Ok(None) => return run_not_found(),
        Err(error) => {
            tracing::warn!(%error, "could not cancel a run");
            return refusal(
                Refusal::Unavailable,
                "the run store is unavailable",
                "Try again in a moment.",
            );
        }
    };
    match deps.store.run(id).await {
        Ok(Some((run, _))) => {
            let mut value = run_json(&run);
            value["message"] = json!(message);
            ToolOutcome::Result(text_result(value, false))
        }
        Ok(None) => run_not_found(),
        Err(error) => unavailable(&error),
    }
}
