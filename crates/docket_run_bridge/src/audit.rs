//! A run's one audit row: written when the run ends, as the tool
//! [`RUN_SCRIPT_TOOL`] acting as `script:<script id>`, with the run id as its
//! call id.

use docket_catalog::scripts::{Run, RunErrorKind, RunStatus};
use docket_task::store::{AuditContext, AuditEntry};
use serde_json::json;

/// The tool that starts runs, and the tool name of a run's audit row.
pub const RUN_SCRIPT_TOOL: &str = "run_script";

/// A run's one audit row.
pub(crate) fn run_entry(run: &Run, duration_ms: i64) -> AuditEntry {
    let outcome = match (run.status, run.error_kind) {
        (RunStatus::Succeeded, _) => "completed",
        (RunStatus::Cancelled, _) => "cancelled",
        (_, Some(RunErrorKind::Platform)) => "failed",
        _ => "tool_error",
    };
    AuditEntry {
        tool: RUN_SCRIPT_TOOL.to_owned(),
        subject: format!("script:{}", run.script_id),
        context: AuditContext {
            persona: None,
            connection: None,
            arguments: json!({
                "script": run.script_name,
                "script_id": run.script_id,
                "version": run.version,
                "run_id": run.id,
                "owner": run.script_owner,
                "requested_by": run.requested_by,
                "attempt": run.attempt,
                "trigger": run.trigger.as_str(),
                "fire_time": run.fire_time.and_then(|at| at.format(&time::format_description::well_known::Rfc3339).ok()),
            }),
        },
        success: run.status == RunStatus::Succeeded,
        outcome: outcome.to_owned(),
        error_message: run.error.clone(),
        duration_ms,
        // The run is the call. The upstream queries are its tool calls', each
        // audited on its own row; the run itself reaches no engine.
        call_id: Some(run.id.clone()),
        engine_user: None,
        upstream_ids: Vec::new(),
    }
}
