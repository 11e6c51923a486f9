//! How the script tools answer: run and script summaries, and their refusals.

use docket_catalog::CatalogError;
use docket_catalog::scripts::{Run, RunErrorKind, RunStatus, Script, ScriptVersion};
use docket_protocol::tools::{CallToolResult, ContentBlock};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::refusal::Refusal;
use crate::registry::ToolOutcome;

pub(super) fn timestamp(time: Option<OffsetDateTime>) -> Value {
    time.and_then(|time| time.format(&Rfc3339).ok())
        .map_or(Value::Null, Value::String)
}

pub(super) fn text_result(value: Value, is_error: bool) -> CallToolResult {
    let mut result = CallToolResult::from_content(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    if is_error {
        result.is_error = Some(true);
    }
    result
}

/// What every command that saved a new version says: its number, and, when
/// `editor` is not the owner yet is now the version's author, that its runs
/// act with the editor's roles (those the owner holds too) — one sentence for
/// `update`, `patch` and any later command that saves, so none hands roles
/// over silently.
pub(super) fn saved_message(script: &Script, version: &ScriptVersion, editor: &str) -> String {
    let saved = format!("Saved as version {}.", version.version);
    if version.author == editor && script.owner != editor {
        format!(
            "{saved} You are now the author of version {}: its runs act with your roles, \
             as far as {} holds them too.",
            version.version, script.owner
        )
    } else {
        saved
    }
}

/// The refusal of a save past a per-owner cap: what is counted, the limit,
/// and the configuration key that sets it.
pub(super) fn limit_reached(what: &str, limit: u32, key: &str, hint: &str) -> ToolOutcome {
    refusal(
        Refusal::LimitReached,
        &format!("you already have {limit} {what}, the most one identity may ({key})"),
        hint,
    )
}

/// A refusal in the platform's error contract.
pub(super) fn refusal(kind: Refusal, message: &str, hint: &str) -> ToolOutcome {
    ToolOutcome::Result(kind.result(message, hint))
}

pub(super) fn not_found(name: &str) -> ToolOutcome {
    refusal(
        Refusal::NotFound,
        &format!("script {name:?} not found"),
        "List your scripts with manage_script command=list.",
    )
}

pub(super) fn run_not_found() -> ToolOutcome {
    refusal(
        Refusal::NotFound,
        "run not found",
        "List the runs you may read with list_runs.",
    )
}

pub(super) fn unavailable(error: &CatalogError) -> ToolOutcome {
    tracing::warn!(%error, "the script store failed");
    refusal(
        Refusal::Unavailable,
        "the script store is unavailable",
        "Try again in a moment.",
    )
}

pub(super) fn inside_run(what: &str, reason: &str) -> ToolOutcome {
    refusal(
        Refusal::ToolError,
        &format!("{what} cannot be called from inside a script run: {reason}"),
        "Do the work in this script.",
    )
}

pub(super) const REENTRANT: &str = "a run executes one at a time, so a script waiting on a run it started \
     would wait on the worker running it. Do the work in this script, or give the second script \
     its own schedule.";
pub(super) const AUTHORING: &str = "a run may read the script surface but never change what exists or what \
     will execute.";

/// The run summary, plus what an ended run has. The text a running or queued
/// run's `message` says depends on who asks, so it is added by the caller.
pub(super) fn run_json(run: &Run) -> Value {
    let mut value = json!({
        "name": run.script_name,
        "script_id": run.script_id,
        "run_id": run.id,
        "status": run.status.as_str(),
        "version": run.version,
        "trigger": run.trigger.as_str(),
        "attempt": run.attempt,
        "tool_calls": run.host_calls,
        // The sandbox's value is the original's script-decided part of the run
        // result: `{queries, outputs}`.
        "queries": run.result.as_ref().and_then(|result| result.get("queries")).cloned().unwrap_or(json!(0)),
        "outputs": run.result.as_ref().and_then(|result| result.get("outputs")).cloned().unwrap_or(json!([])),
        "started_at": timestamp(run.started_at),
        "finished_at": timestamp(run.finished_at),
    });
    if run.fire_time.is_some() {
        value["fire_time"] = timestamp(run.fire_time);
    }
    if let (Some(started), Some(finished)) = (run.started_at, run.finished_at) {
        value["duration_ms"] = json!((finished - started).whole_milliseconds().max(0));
    }
    if run.status.is_terminal() {
        value["log"] = json!(run.log.clone().unwrap_or_default());
        value["log_truncated"] = json!(run.log_truncated);
    }
    if run.status == RunStatus::Failed {
        value["error"] = json!(run.error);
        value["retryable"] = json!(false);
        value["message"] = json!(match run.error_kind {
            Some(RunErrorKind::Platform) =>
                "The platform failed this run repeatedly and gave up; run the script again.",
            _ =>
                "A script failure is deterministic: the same version on the same inputs fails \
                  the same way, so the platform does not retry it. Fix the script with run_draft \
                  and save the fix.",
        });
    }
    if run.status == RunStatus::Cancelled {
        value["message"] = json!("The run was cancelled.");
    }
    value
}

/// The shape of [`run_json`] and of what `get_run`, `cancel_run` and
/// `run_script` add to it: the summary every run has, and what an ended, failed,
/// scheduled or read-in-full run adds.
pub(super) fn run_schema() -> Value {
    use crate::tools::output::{
        any, boolean, count, object, string, string_or_null, time, time_or_null,
    };
    object(
        json!({
            "name": string("The script's name."),
            "script_id": string("The script's id."),
            "run_id": string("The run's id (its task id, when it runs as a task)."),
            "status": {"type": "string", "enum": ["queued", "running", "succeeded", "failed", "cancelled"]},
            "version": count("The script version it runs."),
            "trigger": string("What started it (manual, schedule, ...)."),
            "attempt": count("How many times a worker has started it."),
            "tool_calls": count("The platform calls it made."),
            "queries": any("How many queries it ran."),
            "outputs": any("What it returned (its outputs)."),
            "started_at": time_or_null("When it started (RFC 3339)."),
            "finished_at": time_or_null("When it ended (RFC 3339)."),
            "fire_time": time("The schedule's fire time, for a scheduled run."),
            "duration_ms": count("How long it ran."),
            "log": string("What it printed."),
            "log_truncated": boolean("Whether the log was cut at its limit."),
            "error": string_or_null("Why it failed."),
            "retryable": boolean("Whether running it again could end otherwise."),
            "message": string("What to do next."),
            "requested_by": string("Who started it."),
            "params": any("The arguments it runs with."),
            "steps": any("How many interpreter steps it took."),
            "created_at": time("When it was queued (RFC 3339)."),
        }),
        &[
            "name",
            "script_id",
            "run_id",
            "status",
            "version",
            "trigger",
            "attempt",
            "tool_calls",
            "queries",
            "outputs",
            "started_at",
            "finished_at",
        ],
    )
}

/// The shape of a listing of runs (`list_runs`, `manage_script runs`).
pub(super) fn run_list_schema() -> Value {
    use crate::tools::output::{array, count, object, string};
    object(
        json!({
            "name": string("The script, when the listing is one script's."),
            "count": count("How many runs are listed."),
            "runs": array(run_schema(), "The runs, newest first."),
        }),
        &["count", "runs"],
    )
}

/// The `CallToolResult` of a run: ended runs as `tasks/get` shows them too.
pub(super) fn run_result(run: &Run) -> CallToolResult {
    text_result(run_json(run), run.status == RunStatus::Failed)
}

/// The result a run's task carries, when it has one.
pub(super) fn run_task_result(run: &Run) -> Option<Value> {
    serde_json::to_value(run_result(run)).ok()
}

pub(super) fn syntax_refusal(error: &docket_script::SyntaxError) -> ToolOutcome {
    let at = error
        .line
        .map(|line| format!(" (line {line})"))
        .unwrap_or_default();
    let mut result = Refusal::InvalidScript.result(
        &format!("the script does not parse{at}: {}", error.message),
        "Fix the source and save it again; validate checks it without saving.",
    );
    if let Some(structured) = &mut result.structured_content {
        structured["error"]["line"] = json!(error.line);
    }
    ToolOutcome::Result(result)
}

/// The properties of [`script_json`]; `source` only when asked for.
fn script_properties() -> Value {
    use crate::tools::output::{any, boolean, count, string, time};
    json!({
        "id": string("The script's id."),
        "name": string("Its name, unique per owner."),
        "owner": string("Whose it is."),
        "description": string("What it does."),
        "params": any("Its declared parameters."),
        "status": {"type": "string", "enum": ["active", "deprecated"]},
        "enabled": boolean("Whether it may run."),
        "version": count("Its newest version."),
        "created_at": time("When it was created (RFC 3339)."),
        "updated_at": time("When it last changed (RFC 3339)."),
        "source": string("Its Starlark source (get)."),
    })
}

/// What `manage_script` answers. Each command answers its own object, so this
/// names and types the fields the commands answer (a script's, for `get`; the
/// saved script, version and author for `create`, `update` and `patch`; the
/// listings; a check) and leaves the rest (diffs, outlines, schedules, help) to
/// the command; the text block carries the same JSON.
pub(super) fn manage_schema() -> Value {
    use crate::tools::output::{array, boolean, count, object, string};
    let script = object(
        script_properties(),
        &["id", "name", "owner", "status", "enabled", "version"],
    );
    let mut properties = script_properties();
    if let Some(properties) = properties.as_object_mut() {
        properties.extend(
            json!({
                "script": script.clone(),
                "author": string("Whose roles the saved version's runs act with."),
                "message": string("What happened, or what to do next."),
                "count": count("How many items the listing holds."),
                "scripts": array(script, "The scripts, by name."),
                "runs": array(run_schema(), "The runs, newest first."),
                "deleted": boolean("Whether the script was deleted."),
                "valid": boolean("Whether the source passed the checks."),
                "checked": array(string("A check."), "What was checked."),
                "not_checked": string("What only a run checks."),
                "bytes": count("The source's size."),
                "lines": count("The source's lines."),
                // A script's status for the script commands, a run's for
                // run_draft and get_run.
                "status": string("The script's status (active, deprecated) or the run's."),
            })
            .as_object()
            .cloned()
            .unwrap_or_default(),
        );
    }
    json!({
        "type": "object",
        "description": "Depends on the command; the fields named here have these types wherever \
                        a command answers them.",
        "properties": properties
    })
}

pub(super) fn script_json(script: &Script, source: Option<&str>) -> Value {
    let mut value = json!({
        "id": script.id,
        "name": script.name,
        "owner": script.owner,
        "description": script.description,
        "params": script.params,
        "status": script.status.as_str(),
        "enabled": script.enabled,
        "version": script.version,
        "created_at": timestamp(Some(script.created_at)),
        "updated_at": timestamp(Some(script.updated_at)),
    });
    if let Some(source) = source {
        value["source"] = json!(source);
    }
    value
}
