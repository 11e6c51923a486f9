//! `run_script`: queues a run of a saved script, and waits for it or answers it as its own task.
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::registry::{OwnTaskFuture, ToolCall, ToolFuture, ToolHandler, ToolOutcome};

use super::answers::{run_json, run_result, text_result};
use super::context::{MAX_WAIT, ScriptTools};

pub(super) async fn run_script(deps: &ScriptTools, call: ToolCall) -> ToolOutcome {
    let run = match deps.start_run(&call).await {
        Ok(run) => run,
        Err(refused) => return refused,
    };
    let wait = match call.arguments.get("wait_seconds").and_then(Value::as_i64) {
        Some(seconds) if seconds < 0 => Duration::ZERO,
        Some(0) | None => deps.default_wait,
        Some(seconds) => Duration::from_secs(u64::try_from(seconds).unwrap_or(0)),
    }
    .min(MAX_WAIT);
    let read = tokio::select! {
        read = deps.bridge.wait(&run.id, wait) => read,
        // The client went away: the run keeps going.
        () = call.cancel.cancelled() => Ok(None),
    };
    let run = match read {
        Ok(Some(read)) => read,
        Ok(None) => run,
        Err(error) => {
            tracing::warn!(%error, "could not read a run back");
            run
        }
    };
    if run.status.is_terminal() {
        return ToolOutcome::Result(run_result(&run));
    }
    let mut pending = run_json(&run);
    pending["message"] = json!(if wait.is_zero() {
        format!(
            "The run is queued and executes in the background. Read it with get_run run_id={}.",
            run.id
        )
    } else {
        format!(
            "The run is still going after {}s and continues in the background. Read it with get_run run_id={}.",
            wait.as_secs(),
            run.id
        )
    });
    ToolOutcome::Result(text_result(pending, false))
}

/// The `run_script` tool. A run is durable on its own (a row in `script_runs` that any
/// replica's worker picks up), so as a task it answers the run's own task record: the
/// task id is the run id, and nothing is written to the task table.
pub(super) struct RunScript {
    pub(super) tools: Arc<ScriptTools>,
}

impl ToolHandler for RunScript {
    fn call(&self, call: ToolCall) -> ToolFuture {
        let tools = Arc::clone(&self.tools);
        Box::pin(async move { run_script(&tools, call).await })
    }

    fn start_own_task<'a>(&'a self, call: &'a ToolCall) -> Option<OwnTaskFuture<'a>> {
        Some(Box::pin(self.tools.start_run_task(call)))
    }
}
