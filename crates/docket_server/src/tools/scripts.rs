//! The script tools: `manage_script` (create, update, get, list, delete,
//! validate, run_draft), `run_script`, `get_run`, `list_runs` and
//! `cancel_run`, over the [`ScriptStore`] and the [`RunBridge`].
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

use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use docket_protocol::tools::{CallToolResult, ContentBlock, ToolAnnotations};
use docket_run_bridge::RunBridge;
use docket_script::{Isolation, Limits, RunProgress, ScriptFailure, ScriptInput};
use docket_storage::catalog::{CatalogError, generate_id};
use docket_storage::scripts::{
    CancelOutcome, NewRun, NewScript, Run, RunErrorKind, RunFilter, RunStatus, Script,
    ScriptChange, ScriptStatus, ScriptStore, ScriptVersion,
};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio_util::sync::CancellationToken;

use super::script_host::ScriptHost;
use crate::app::AppState;
use crate::auth::{Identity, IdentityKind};
use crate::refusal::Refusal;
use crate::registry::{RegistryError, TaskSupport, ToolCall, ToolOutcome, ToolRegistry, ToolSpec};

/// The tool names.
pub(crate) const MANAGE_SCRIPT: &str = "manage_script";
/// Runs a saved script.
pub(crate) const RUN_SCRIPT: &str = docket_run_bridge::RUN_SCRIPT_TOOL;
const GET_RUN: &str = "get_run";
const LIST_RUNS: &str = "list_runs";
const CANCEL_RUN: &str = "cancel_run";

/// The longest `run_script` waits, whatever `wait_seconds` asks.
const MAX_WAIT: Duration = Duration::from_secs(300);

/// The most scripts or runs one list answers.
const MAX_LIST: u32 = 50;

/// What the script tools share.
pub(crate) struct ScriptDeps {
    pub(crate) store: Arc<dyn ScriptStore>,
    pub(crate) bridge: Arc<RunBridge>,
    /// The app, for drafts' hosts; set once the app is built.
    pub(crate) app: Arc<OnceLock<Weak<AppState>>>,
    pub(crate) default_wait: Duration,
    pub(crate) run_limits: Limits,
    /// Where runs and drafts are evaluated.
    pub(crate) isolation: Isolation,
    /// How long a run is kept after it finished.
    pub(crate) run_retention: Duration,
    /// How often clients should poll a run's task.
    pub(crate) poll_interval_ms: u64,
    /// Drafts running on this replica at once (they run in the request, as
    /// their caller, outside the queue).
    pub(crate) draft_slots: tokio::sync::Semaphore,
}

/// How many drafts one replica runs at once.
pub(crate) const DRAFT_SLOTS: usize = 4;

/// How long a draft waits for a slot before it is refused.
const DRAFT_SLOT_WAIT: Duration = Duration::from_secs(5);

fn timestamp(time: Option<OffsetDateTime>) -> Value {
    time.and_then(|time| time.format(&Rfc3339).ok())
        .map_or(Value::Null, Value::String)
}

fn text_result(value: Value, is_error: bool) -> CallToolResult {
    let mut result = CallToolResult::from_content(vec![ContentBlock::text(value.to_string())]);
    result.structured_content = Some(value);
    if is_error {
        result.is_error = Some(true);
    }
    result
}

/// A refusal in the platform's error contract.
fn refusal(kind: Refusal, message: &str, hint: &str) -> ToolOutcome {
    ToolOutcome::Result(kind.result(message, hint))
}

fn not_found(name: &str) -> ToolOutcome {
    refusal(
        Refusal::NotFound,
        &format!("script {name:?} not found"),
        "List your scripts with manage_script command=list.",
    )
}

fn run_not_found() -> ToolOutcome {
    refusal(
        Refusal::NotFound,
        "run not found",
        "List the runs you may read with list_runs.",
    )
}

fn unavailable(error: &CatalogError) -> ToolOutcome {
    tracing::warn!(%error, "the script store failed");
    refusal(
        Refusal::Unavailable,
        "the script store is unavailable",
        "Try again in a moment.",
    )
}

fn inside_run(what: &str, reason: &str) -> ToolOutcome {
    refusal(
        Refusal::ToolError,
        &format!("{what} cannot be called from inside a script run: {reason}"),
        "Do the work in this script.",
    )
}

const REENTRANT: &str = "a run executes one at a time, so a script waiting on a run it started \
     would wait on the worker running it. Do the work in this script, or give the second script \
     its own schedule.";
const AUTHORING: &str = "a run may read the script surface but never change what exists or what \
     will execute.";

fn is_run(identity: &Identity) -> bool {
    identity.kind == IdentityKind::Script
}

/// The run summary, plus what an ended run has. The text a running or queued
/// run's `message` says depends on who asks, so it is added by the caller.
pub(crate) fn run_json(run: &Run) -> Value {
    let mut value = json!({
        "name": run.script_name,
        "script_id": run.script_id,
        "run_id": run.id,
        "status": run.status.as_str(),
        "version": run.version,
        "trigger": "tool",
        "attempt": run.attempt,
        "tool_calls": run.host_calls,
        // The sandbox's value is the original's script-decided part of the run
        // result: `{queries, outputs}`.
        "queries": run.result.as_ref().and_then(|result| result.get("queries")).cloned().unwrap_or(json!(0)),
        "outputs": run.result.as_ref().and_then(|result| result.get("outputs")).cloned().unwrap_or(json!([])),
        "started_at": timestamp(run.started_at),
        "finished_at": timestamp(run.finished_at),
    });
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

/// The `CallToolResult` of a run: ended runs as `tasks/get` shows them too.
pub(crate) fn run_result(run: &Run) -> CallToolResult {
    text_result(run_json(run), run.status == RunStatus::Failed)
}

/// The result a run's task carries, when it has one.
pub(crate) fn run_task_result(run: &Run) -> Option<Value> {
    serde_json::to_value(run_result(run)).ok()
}

fn string_arg<'a>(call: &'a ToolCall, key: &str) -> Option<&'a str> {
    call.arguments.get(key).and_then(Value::as_str)
}

impl ScriptDeps {
    /// The script `name` as the caller may address it: their own, or (for an
    /// administrator) `owner`'s.
    async fn addressed(&self, call: &ToolCall, name: &str) -> Result<Option<Script>, ToolOutcome> {
        let owner = match string_arg(call, "owner") {
            Some(owner) if call.persona.is_admin => owner.to_owned(),
            Some(owner) if owner != call.identity.subject => return Ok(None),
            _ => call.identity.subject.clone(),
        };
        self.store
            .find_script(&owner, name)
            .await
            .map_err(|error| unavailable(&error))
    }

    /// [`ScriptDeps::addressed`], with "not found" as the refusal.
    async fn owned(&self, call: &ToolCall, name: &str) -> Result<Script, ToolOutcome> {
        self.addressed(call, name)
            .await?
            .ok_or_else(|| not_found(name))
    }

    /// The run `id` if the caller may read it.
    async fn readable_run(&self, call: &ToolCall, id: &str) -> Result<Option<Run>, ToolOutcome> {
        // Text that is no run id reads as an unknown run, without a lookup.
        if !docket_task::id::is_well_formed(id) {
            return Ok(None);
        }
        let Some((run, _)) = self
            .store
            .run(id)
            .await
            .map_err(|error| unavailable(&error))?
        else {
            return Ok(None);
        };
        let subject = &call.identity.subject;
        let may =
            call.persona.is_admin || &run.requested_by == subject || &run.script_owner == subject;
        Ok(may.then_some(run))
    }

    /// Checks and saves a new run of the caller's script `name`; a refusal as
    /// the result to answer.
    pub(crate) async fn start_run(&self, call: &ToolCall) -> Result<Run, ToolOutcome> {
        if is_run(&call.identity) {
            return Err(inside_run("run_script", REENTRANT));
        }
        let name = string_arg(call, "name").unwrap_or_default();
        let script = self.owned(call, name).await?;
        if let Some(refused) = refuse_run(&script) {
            return Err(refusal(
                Refusal::ToolError,
                &format!(
                    "{refused}; use manage_script run_draft to execute it as yourself while you iterate"
                ),
                "Enable the script or run a draft.",
            ));
        }
        let args = call
            .arguments
            .get("args")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let params = bind_params(&script.params, args).map_err(|problem| {
            refusal(
                Refusal::InvalidArguments,
                &problem,
                "Read the script's params with manage_script command=get.",
            )
        })?;
        let id = RunBridge::new_run_id()
            .map_err(|error| refusal(Refusal::Internal, &error.to_string(), "Try again."))?;
        self.bridge
            .enqueue(NewRun {
                id,
                script_id: script.id.clone(),
                script_name: script.name.clone(),
                script_owner: script.owner.clone(),
                version: script.version,
                params: Value::Object(params),
                requested_by: call.identity.subject.clone(),
            })
            .await
            .map_err(|error| {
                tracing::warn!(%error, "could not queue a run");
                refusal(
                    Refusal::Unavailable,
                    &error.to_string(),
                    "Try again in a moment.",
                )
            })
    }
}

impl ScriptDeps {
    /// `run_script` as a task: the run is queued (committed) and its task
    /// record — the run read as a task — is the answer.
    pub(crate) async fn start_run_task(
        &self,
        call: &ToolCall,
    ) -> Result<docket_task::TaskRecord, ToolOutcome> {
        let run = self.start_run(call).await?;
        let now = run.created_at;
        Ok(docket_run_bridge::task::run_task(
            &run,
            now,
            self.run_retention,
            self.poll_interval_ms,
            None,
        ))
    }
}

/// Why a script must not run now, as the original platform says it.
fn refuse_run(script: &Script) -> Option<&'static str> {
    if !script.enabled {
        Some("the script is disabled")
    } else if script.status == ScriptStatus::Deprecated {
        Some("the script is deprecated and must not be executed")
    } else {
        None
    }
}

/// Binds `args` to the parameter contract: every required parameter given,
/// defaults filled in, no unknown argument, each of its declared type.
pub(crate) fn bind_params(
    contract: &Value,
    mut args: Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let declared = contract.as_array().cloned().unwrap_or_default();
    let mut bound = Map::new();
    for param in &declared {
        let Some(name) = param.get("name").and_then(Value::as_str) else {
            continue;
        };
        let value = match args.remove(name) {
            Some(value) => value,
            None => match param.get("default") {
                Some(default) => default.clone(),
                None if param
                    .get("required")
                    .and_then(Value::as_bool)
                    .unwrap_or(false) =>
                {
                    return Err(format!("the parameter {name:?} is required"));
                }
                None => continue,
            },
        };
        let kind = param
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string");
        let fits = match kind {
            "int" => value.is_i64() || value.is_u64(),
            "float" => value.is_number(),
            "bool" => value.is_boolean(),
            "enum" => param
                .get("values")
                .and_then(Value::as_array)
                .is_none_or(|values| values.contains(&value)),
            _ => value.is_string(),
        };
        if !fits && !value.is_null() {
            return Err(format!("the parameter {name:?} must be of type {kind}"));
        }
        bound.insert(name.to_owned(), value);
    }
    if let Some(unknown) = args.keys().next() {
        return Err(format!("the script has no parameter {unknown:?}"));
    }
    Ok(bound)
}

/// Checks a parameter contract's shape.
fn check_contract(params: &Value) -> Result<(), String> {
    let Some(params) = params.as_array() else {
        return Err("params must be a list of {name, type, required, default, description}".into());
    };
    for param in params {
        let name = param
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if name.is_empty() {
            return Err("every parameter needs a name".into());
        }
        let kind = param
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("string");
        if !matches!(
            kind,
            "string" | "int" | "float" | "bool" | "date" | "enum" | "connection"
        ) {
            return Err(format!(
                "parameter {name:?}: type must be string, int, float, bool, date, enum or connection"
            ));
        }
    }
    Ok(())
}

fn syntax_refusal(error: &docket_script::SyntaxError) -> ToolOutcome {
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

fn script_json(script: &Script, source: Option<&str>) -> Value {
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

async fn manage(deps: &ScriptDeps, call: ToolCall) -> ToolOutcome {
    let command = string_arg(&call, "command").unwrap_or_default();
    let name = string_arg(&call, "name").unwrap_or_default();
    if is_run(&call.identity) {
        match command {
            "run_draft" => return inside_run("manage_script run_draft", REENTRANT),
            "create" | "update" | "delete" => {
                return inside_run(&format!("manage_script {command}"), AUTHORING);
            }
            _ => {}
        }
    }
    let needs_name = matches!(command, "create" | "update" | "get" | "delete");
    if needs_name && name.is_empty() {
        return refusal(
            Refusal::InvalidArguments,
            &format!("{command} needs a name"),
            "Give the script's name.",
        );
    }
    let source = string_arg(&call, "source");
    if let Some(source) = source
        && matches!(command, "create" | "update" | "validate")
        && let Err(error) = docket_script::check(source, &deps.run_limits)
    {
        return syntax_refusal(&error);
    }
    let params = call.arguments.get("params").cloned();
    if let Some(params) = &params
        && let Err(problem) = check_contract(params)
    {
        return refusal(
            Refusal::InvalidArguments,
            &problem,
            "See the manage_script description.",
        );
    }
    // The version's author is the one whose roles its runs act with.
    let saved = |script: &Script, version: &ScriptVersion, message: &str| {
        ToolOutcome::Result(text_result(
            json!({
                "script": script_json(script, None),
                "version": version.version,
                "author": version.author,
                "message": message,
            }),
            false,
        ))
    };
    match command {
        "create" => {
            let Some(source) = source else {
                return refusal(
                    Refusal::InvalidArguments,
                    "create needs a source",
                    "Give the Starlark source.",
                );
            };
            let id = match generate_id() {
                Ok(id) => id,
                Err(error) => {
                    return refusal(Refusal::Internal, &error.to_string(), "Try again.");
                }
            };
            let new = NewScript {
                id,
                owner: call.identity.subject.clone(),
                name: name.to_owned(),
                description: string_arg(&call, "description")
                    .unwrap_or_default()
                    .to_owned(),
                params: params.unwrap_or_else(|| json!([])),
                source: source.to_owned(),
                author: call.identity.subject.clone(),
                author_roles: call.identity.roles.clone(),
            };
            match deps.store.create_script(new).await {
                Ok((script, version)) => saved(&script, &version, "Saved."),
                Err(CatalogError::Duplicate) => refusal(
                    Refusal::AlreadyExists,
                    &format!("a script named {name:?} already exists"),
                    "Change it with command=update, or choose another name.",
                ),
                Err(error) => unavailable(&error),
            }
        }
        "update" => {
            let script = match deps.owned(&call, name).await {
                Ok(script) => script,
                Err(refused) => return refused,
            };
            let change = ScriptChange {
                description: string_arg(&call, "description").map(str::to_owned),
                params,
                source: source.map(str::to_owned),
                enabled: call.arguments.get("enabled").and_then(Value::as_bool),
                status: string_arg(&call, "status").and_then(ScriptStatus::parse),
                editor: call.identity.subject.clone(),
                editor_roles: call.identity.roles.clone(),
            };
            let gave_source = change.source.is_some();
            match deps.store.update_script(&script.id, change).await {
                // An administrator who changed another person's source is now
                // its author: runs of this version act with their roles.
                Ok(Some((script, version)))
                    if gave_source
                        && version.author == call.identity.subject
                        && script.owner != call.identity.subject =>
                {
                    saved(
                        &script,
                        &version,
                        &format!(
                            "Saved as a new version. You are now the author of version {}: \
                             runs of it act with your roles, not {}'s.",
                            version.version, script.owner
                        ),
                    )
                }
                Ok(Some((script, version))) => saved(&script, &version, "Saved as a new version."),
                Ok(None) => not_found(name),
                Err(error) => unavailable(&error),
            }
        }
        "get" => {
            let script = match deps.owned(&call, name).await {
                Ok(script) => script,
                Err(refused) => return refused,
            };
            match deps.store.script_version(&script.id, script.version).await {
                Ok(version) => ToolOutcome::Result(text_result(
                    script_json(
                        &script,
                        version.as_ref().map(|version| version.source.as_str()),
                    ),
                    false,
                )),
                Err(error) => unavailable(&error),
            }
        }
        "list" => {
            let owner = (!call.persona.is_admin).then_some(call.identity.subject.as_str());
            match deps.store.list_scripts(owner, MAX_LIST).await {
                Ok(scripts) => {
                    let listed: Vec<Value> = scripts
                        .iter()
                        .map(|script| script_json(script, None))
                        .collect();
                    ToolOutcome::Result(text_result(
                        json!({"count": listed.len(), "scripts": listed}),
                        false,
                    ))
                }
                Err(error) => unavailable(&error),
            }
        }
        "delete" => {
            let script = match deps.owned(&call, name).await {
                Ok(script) => script,
                Err(refused) => return refused,
            };
            match deps.store.delete_script(&script.id).await {
                Ok(_) => {
                    ToolOutcome::Result(text_result(json!({"name": name, "deleted": true}), false))
                }
                Err(error) => unavailable(&error),
            }
        }
        "validate" => match source {
            Some(_) => ToolOutcome::Result(text_result(json!({"valid": true}), false)),
            None => refusal(
                Refusal::InvalidArguments,
                "validate needs a source",
                "Give the Starlark source.",
            ),
        },
        "run_draft" => draft(deps, &call, name, source).await,
        other => refusal(
            Refusal::InvalidArguments,
            &format!("unknown command: {other}"),
            "Use create, update, get, list, delete, validate or run_draft.",
        ),
    }
}

/// Runs source (given, or the caller's script's current version) as the
/// caller, under draft limits, persisting nothing.
async fn draft(
    deps: &ScriptDeps,
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
    let host = Arc::new(ScriptHost {
        app,
        identity: Arc::clone(&call.identity),
        run_id: run_id.clone(),
    });
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

async fn run_script(deps: &ScriptDeps, call: ToolCall) -> ToolOutcome {
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

async fn get_run(deps: &ScriptDeps, call: ToolCall) -> ToolOutcome {
    let id = string_arg(&call, "run_id").unwrap_or_default();
    match deps.readable_run(&call, id).await {
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

async fn list_runs(deps: &ScriptDeps, call: ToolCall) -> ToolOutcome {
    let limit = call
        .arguments
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(20, |limit| u32::try_from(limit).unwrap_or(MAX_LIST))
        .min(MAX_LIST);
    let mut filter = RunFilter::default();
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

async fn cancel_run(deps: &ScriptDeps, call: ToolCall) -> ToolOutcome {
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

fn annotations(read_only: bool, destructive: bool) -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: Some(read_only),
        destructive_hint: Some(destructive),
        idempotent_hint: Some(read_only),
        open_world_hint: Some(false),
        ..ToolAnnotations::default()
    }
}

/// Registers the script tools.
pub(crate) fn register(
    registry: &mut ToolRegistry,
    deps: Arc<ScriptDeps>,
) -> Result<(), RegistryError> {
    let param = json!({"type": "object", "properties": {
        "name": {"type": "string"},
        "type": {"type": "string", "enum": ["string", "int", "float", "bool", "date", "enum", "connection"]},
        "required": {"type": "boolean"},
        "default": {},
        "description": {"type": "string"},
        "values": {"type": "array"}
    }, "required": ["name"]});
    let handler =
        |deps: &Arc<ScriptDeps>,
         run: fn(Arc<ScriptDeps>, ToolCall) -> crate::registry::ToolFuture| {
            let deps = Arc::clone(deps);
            move |call: ToolCall| run(Arc::clone(&deps), call)
        };
    registry.register(
        ToolSpec::new(
            MANAGE_SCRIPT,
            "Manages your Starlark scripts: create, update (each save is a new version), get, list, delete, \
             validate (parse without saving) and run_draft (run source as yourself, nothing saved). Scripts use \
             platform.call(tool, args), platform.query(sql, connection=, params=), platform.export(name, rows, format), \
             json, run.params and print.",
            json!({"type": "object", "properties": {
                "command": {"type": "string", "enum": ["create", "update", "get", "list", "delete", "validate", "run_draft"]},
                "name": {"type": "string", "minLength": 1, "maxLength": 200},
                "source": {"type": "string"},
                "description": {"type": "string"},
                "params": {"type": "array", "items": param},
                "args": {"type": "object"},
                "enabled": {"type": "boolean"},
                "status": {"type": "string", "enum": ["active", "deprecated"]},
                "owner": {"type": "string", "description": "Administrators: the owner of the script to address."}
            }, "required": ["command"], "additionalProperties": false}),
        )
        .with_annotations(annotations(false, true)),
        handler(&deps, |deps, call| Box::pin(async move { manage(&deps, call).await })),
    )?;
    registry.register(
        ToolSpec::new(
            RUN_SCRIPT,
            "Runs one of your saved scripts. Directly, it waits up to wait_seconds (default 120, at most 300; \
             negative: do not wait) and returns the run or its pending state; with the tasks extension the run \
             is the task (its taskId is the run id).",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "minLength": 1},
                "args": {"type": "object"},
                "wait_seconds": {"type": "integer"},
                "owner": {"type": "string", "description": "Administrators: the owner of the script."}
            }, "required": ["name"], "additionalProperties": false}),
        )
        .with_annotations(annotations(false, false))
        // A task when the request declares the extension; the pipeline then
        // answers the run itself as the task (`ScriptDeps::start_run_task`).
        .with_task_support(TaskSupport::Optional),
        handler(&deps, |deps, call| Box::pin(async move { run_script(&deps, call).await })),
    )?;
    let run_id = json!({"type": "object", "properties": {
        "run_id": {"type": "string", "minLength": 1}
    }, "required": ["run_id"], "additionalProperties": false});
    registry.register(
        ToolSpec::new(
            GET_RUN,
            "Reads one script run: status, result, log and error.",
            run_id.clone(),
        )
        .with_annotations(annotations(true, false)),
        handler(&deps, |deps, call| {
            Box::pin(async move { get_run(&deps, call).await })
        }),
    )?;
    registry.register(
        ToolSpec::new(
            LIST_RUNS,
            "Lists script runs you may read (yours, and those of your scripts), newest first; name narrows to one script.",
            json!({"type": "object", "properties": {
                "name": {"type": "string", "minLength": 1},
                "owner": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST}
            }, "additionalProperties": false}),
        )
        .with_annotations(annotations(true, false)),
        handler(&deps, |deps, call| Box::pin(async move { list_runs(&deps, call).await })),
    )?;
    registry.register(
        ToolSpec::new(
            CANCEL_RUN,
            "Cancels a script run: a queued run ends at once, a running one stops wherever it runs; a run that \
             already ended keeps its outcome.",
            run_id,
        )
        .with_annotations(annotations(false, true)),
        handler(&deps, |deps, call| Box::pin(async move { cancel_run(&deps, call).await })),
    )
}
