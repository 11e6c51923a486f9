//! The script tools: `manage_script` (create, update, get, list, delete,
//! validate, run_draft, help, patch, diff, outline, stats, runs, get_run,
//! schedule_set, schedule_list, schedule_enable, schedule_disable),
//! `run_script`, `get_run`, `list_runs` and `cancel_run`, over the
//! [`ScriptStore`] and the [`RunBridge`].
//!
//! Who may do what (the original platform's rules): a script is seen, run,
//! changed and deleted by its owner and administrators; anyone else is told
//! `script "X" not found`. A run is read and cancelled by whoever asked for
//! it, the script's owner and administrators; anyone else is told `run not
//! found`. `run_script` and the authoring commands are refused from inside a
//! run.
//!
//! A run's result is one JSON object, as text and as `structuredContent`: the
//! run summary (`name, run_id, status, version, attempt, tool_calls,
//! started_at, finished_at, duration_ms`), plus `result`, `log` and
//! `log_truncated` once it ended, `error`, `retryable: false` and a message
//! when the script failed (then `isError: true`), and a message while it is
//! still going. `tasks/get` on a run id answers this same result.

mod answers;
mod authoring;
mod context;
mod draft;
mod help;
mod manage;
mod owners;
mod params;
mod run;
mod run_tasks;
mod runs;
mod schedules;

pub(crate) use context::{DRAFT_SLOTS, ScriptTools};
pub(crate) use owners::ConfiguredOwners;
pub(crate) use run_tasks::RunTasks;

use std::sync::Arc;

use docket_protocol::tools::ToolAnnotations;
use serde_json::json;

use crate::registry::{RegistryError, TaskSupport, ToolCall, ToolRegistry, ToolSpec};

use context::{CANCEL_RUN, GET_RUN, LIST_RUNS, MANAGE_SCRIPT, MAX_LIST, RUN_SCRIPT};
use manage::manage;
use run::RunScript;
use runs::{cancel_run, get_run, list_runs};

fn annotations(read_only: bool, destructive: bool) -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: Some(read_only),
        destructive_hint: Some(destructive),
        idempotent_hint: Some(read_only),
        open_world_hint: Some(false),
        ..ToolAnnotations::default()
    }
}

/// The longest `source` the schema takes: a script's own limit
/// (`Limits::max_source_bytes`, configurable) is checked where it is parsed, with
/// its message; this is the outer bound that holds whatever it is set to.
const MAX_SOURCE_INPUT_BYTES: usize = 4 * 1024 * 1024;

/// Registers the script tools.
pub(crate) fn register(
    registry: &mut ToolRegistry,
    deps: Arc<ScriptTools>,
) -> Result<(), RegistryError> {
    let param = json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 64},
        "type": {"type": "string", "enum": ["string", "int", "float", "bool", "date", "enum", "connection"]},
        "required": {"type": "boolean"},
        "default": {},
        "description": {"type": "string", "maxLength": 1024},
        "values": {"type": "array", "maxItems": 256}
    }, "required": ["name"]});
    let handler =
        |deps: &Arc<ScriptTools>,
         run: fn(Arc<ScriptTools>, ToolCall) -> crate::registry::ToolFuture| {
            let deps = Arc::clone(deps);
            move |call: ToolCall| run(Arc::clone(&deps), call)
        };
    registry.register(
        ToolSpec::new(
            MANAGE_SCRIPT,
            "Manages your Starlark scripts: create, update (each save is a new version), get, list, delete, \
             validate (parse without saving), run_draft (run source as yourself, nothing saved), patch (anchored \
             edits: edits=[{op?, find | pattern, replace | text, section?, occurrence?}], base_version?, dry_run?), \
             diff (between two versions), outline, stats, runs (run_status?, limit?), get_run (run_id), \
             schedule_set (cron, timezone?, args?: one schedule per script), schedule_list, schedule_enable, \
             schedule_disable and help. \
             Scripts use platform.call(tool, args), platform.query(sql, connection=, params=), \
             platform.export(name, rows, format), json, run.params and print.",
            json!({"type": "object", "properties": {
                // No enum: an unknown command is answered by the tool, with the
                // known ones named (as the original answers `unknown command: X`).
                "command": {"type": "string", "maxLength": 32, "description": format!("one of: {}", help::known_commands())},
                "name": {"type": "string", "minLength": 1, "maxLength": 200},
                "source": {"type": "string", "maxLength": MAX_SOURCE_INPUT_BYTES},
                "description": {"type": "string", "maxLength": 2048},
                "params": {"type": "array", "maxItems": 64, "items": param},
                "args": {"type": "object"},
                "enabled": {"type": "boolean"},
                "status": {"type": "string", "enum": ["active", "deprecated"]},
                "owner": {"type": "string", "maxLength": 256, "description": "Administrators: the owner of the script to address."},
                "edits": {"type": "array", "maxItems": 100, "items": {"type": "object"},
                          "description": "patch: [{op?, find | pattern, replace | text, section?, occurrence?}]"},
                "base_version": {"type": "integer", "minimum": 1, "description": "patch: the version the edits were written against."},
                "dry_run": {"type": "boolean", "description": "patch: answer the diff without saving."},
                "from_version": {"type": "integer", "minimum": 1},
                "to_version": {"type": "integer", "minimum": 1},
                "run_id": {"type": "string", "maxLength": 64},
                "run_status": {"type": "string", "enum": ["queued", "running", "succeeded", "failed", "cancelled"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST},
                "cron": {"type": "string", "maxLength": 128, "description": "schedule_set: five fields (minute hour day-of-month month day-of-week) or @hourly, @daily, @weekly, @monthly, @yearly."},
                "timezone": {"type": "string", "maxLength": 64, "description": "schedule_set: an IANA time zone (default UTC)."}
            }, "required": ["command"], "additionalProperties": false}),
        )
        .with_annotations(annotations(false, true))
        .with_output_schema(answers::manage_schema()),
        handler(&deps, |deps, call| Box::pin(async move { manage(&deps, call).await })),
    )?;
    registry.register(
        ToolSpec::new(
            RUN_SCRIPT,
            "Runs one of your saved scripts. Directly, it waits up to wait_seconds (default 120, at most 300; \
             negative: do not wait) and returns the run or its pending state; with the tasks extension the run \
             is the task (its taskId is the run id).",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 200},
                "args": {"type": "object"},
                "wait_seconds": {"type": "integer"},
                "owner": {"type": "string", "maxLength": 256, "description": "Administrators: the owner of the script."}
            }, "required": ["name"], "additionalProperties": false}),
        )
        .with_annotations(annotations(false, false))
        .with_output_schema(answers::run_schema())
        // A task when the request declares the extension; the run is then its own
        // task (`RunScript::start_own_task`).
        .with_task_support(TaskSupport::Optional),
        RunScript {
            tools: Arc::clone(&deps),
        },
    )?;
    let run_id = json!({"type": "object", "properties": {
        "run_id": {"type": "string", "minLength": 1, "maxLength": 64}
    }, "required": ["run_id"], "additionalProperties": false});
    registry.register(
        ToolSpec::new(
            GET_RUN,
            "Reads one script run: status, result, log and error.",
            run_id.clone(),
        )
        .with_annotations(annotations(true, false))
        .with_output_schema(answers::run_schema()),
        handler(&deps, |deps, call| {
            Box::pin(async move { get_run(&deps, &call).await })
        }),
    )?;
    registry.register(
        ToolSpec::new(
            LIST_RUNS,
            "Lists script runs you may read (yours, and those of your scripts), newest first; name narrows to one script, status to one status.",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "minLength": 1, "maxLength": 200},
                "owner": {"type": "string", "maxLength": 256},
                "status": {"type": "string", "enum": ["queued", "running", "succeeded", "failed", "cancelled"]},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST}
            }, "additionalProperties": false}),
        )
        .with_annotations(annotations(true, false))
        .with_output_schema(answers::run_list_schema()),
        handler(&deps, |deps, call| Box::pin(async move { list_runs(&deps, call).await })),
    )?;
    registry.register(
        ToolSpec::new(
            CANCEL_RUN,
            "Cancels a script run: a queued run ends at once, a running one stops wherever it runs; a run that \
             already ended keeps its outcome.",
            run_id,
        )
        .with_annotations(annotations(false, true))
        .with_output_schema(answers::run_schema()),
        handler(&deps, |deps, call| Box::pin(async move { cancel_run(&deps, call).await })),
    )
}
