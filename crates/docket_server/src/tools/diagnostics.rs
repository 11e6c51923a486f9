//! `diagnostics_sleep`: a task-capable tool that only waits, for checking that a
//! deployment's tasks work end to end (create on one replica, follow on another,
//! cancel, shutdown). Registered only when `diagnostics.enabled` is true.

use std::time::Duration;

use docket_protocol::tools::{CallToolResult, ToolAnnotations};
use serde_json::{Value, json};

use crate::refusal::Refusal;
use crate::registry::{RegistryError, TaskSupport, ToolCall, ToolOutcome, ToolRegistry, ToolSpec};

/// The tool's name.
pub(crate) const DIAGNOSTICS_SLEEP: &str = "diagnostics_sleep";

pub(super) fn register(registry: &mut ToolRegistry) -> Result<(), RegistryError> {
    let spec = ToolSpec::new(
        DIAGNOSTICS_SLEEP,
        "Waits for the given number of seconds and reports its progress, as a task when the client \
         declares the tasks extension. For checking a deployment; it touches no data.",
        json!({
            "type": "object",
            "properties": {
                "seconds": {"type": "number", "minimum": 0, "maximum": 3600, "description": "How long to wait."}
            },
            "required": ["seconds"],
            "additionalProperties": false
        }),
    )
    .with_annotations(ToolAnnotations {
        read_only_hint: Some(true),
        destructive_hint: Some(false),
        idempotent_hint: Some(true),
        open_world_hint: Some(false),
        ..ToolAnnotations::default()
    })
    .with_task_support(TaskSupport::Optional)
    .with_output_schema(super::output::record(json!({
        "slept_seconds": {"type": "number", "minimum": 0, "description": "How long it waited."}
    })));
    registry.register(spec, |call: ToolCall| async move {
        let seconds = call
            .arguments
            .get("seconds")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        let total = Duration::from_secs_f64(seconds);
        let started = tokio::time::Instant::now();
        let mut ticker = tokio::time::interval(Duration::from_millis(250));
        loop {
            let elapsed = started.elapsed();
            if elapsed >= total {
                break;
            }
            call.progress.report(
                elapsed.as_secs(),
                Some(total.as_secs()),
                Some(format!("slept {:.1} of {seconds} s", elapsed.as_secs_f64())),
            );
            tokio::select! {
                _ = ticker.tick() => {}
                () = tokio::time::sleep(total.saturating_sub(elapsed)) => {}
                () = call.cancel.cancelled() => {
                    return ToolOutcome::Result(Refusal::ToolError.result(
                        "stopped before the time was up",
                        "The call was cancelled; call it again to wait.",
                    ));
                }
            }
        }
        ToolOutcome::Result(CallToolResult::structured(
            json!({ "slept_seconds": seconds }),
        ))
    })
}
