//! `manage_script`: the command dispatch, and create, update, get, list,
//! delete and validate. The authoring commands (patch, diff, outline, stats)
//! are in `authoring`, run_draft in `draft`, runs and get_run in `runs`.

use docket_catalog::scripts::{NewScript, Script, ScriptChange, ScriptStatus, ScriptVersion};
use docket_catalog::{CatalogError, generate_id};
use serde_json::{Value, json};

use crate::refusal::Refusal;
use crate::registry::{ToolCall, ToolOutcome};

use super::answers::{
    AUTHORING, REENTRANT, inside_run, limit_reached, not_found, refusal, saved_message,
    script_json, syntax_refusal, text_result, unavailable,
};
use super::authoring::{patch, script_outline, stats, version_diff};
use super::context::{MAX_LIST, ScriptTools, is_run, string_arg};
use super::draft::draft;
use super::help::{help, known_commands};
use super::params::check_contract;
use super::runs::{get_run, script_runs};
use super::schedules::{schedule_list, schedule_set, schedule_switch};

pub(super) async fn manage(deps: &ScriptTools, call: ToolCall) -> ToolOutcome {
    let command = string_arg(&call, "command").unwrap_or_default();
    let name = string_arg(&call, "name").unwrap_or_default();
    if is_run(&call.identity) {
        match command {
            "run_draft" => return inside_run("manage_script run_draft", REENTRANT),
            "create" | "update" | "delete" | "patch" | "schedule_set" | "schedule_enable"
            | "schedule_disable" => {
                return inside_run(&format!("manage_script {command}"), AUTHORING);
            }
            _ => {}
        }
    }
    let needs_name = matches!(
        command,
        "create"
            | "update"
            | "get"
            | "delete"
            | "patch"
            | "diff"
            | "outline"
            | "stats"
            | "runs"
            | "schedule_set"
            | "schedule_enable"
            | "schedule_disable"
    );
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
            match deps.store.create_script(new, deps.max_per_owner).await {
                Ok((script, version)) => saved(&script, &version, "Saved."),
                Err(CatalogError::LimitReached(limit)) => limit_reached(
                    "scripts",
                    limit,
                    "scripts.max_per_owner",
                    "Delete a script you no longer need, or ask an administrator to raise the limit.",
                ),
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
                base_version: None,
            };
            match deps.store.update_script(&script.id, change).await {
                Ok(Some((script, version))) => saved(
                    &script,
                    &version,
                    &saved_message(&script, &version, &call.identity.subject),
                ),
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
            Some(source) => ToolOutcome::Result(text_result(
                validated(source, call.arguments.get("params"), deps),
                false,
            )),
            None => refusal(
                Refusal::InvalidArguments,
                "validate needs a source",
                "Give the Starlark source.",
            ),
        },
        "run_draft" => draft(deps, &call, name, source).await,
        "help" => ToolOutcome::Result(text_result(help(), false)),
        "get_run" => get_run(deps, &call).await,
        "schedule_list" => schedule_list(deps, &call).await,
        "patch" | "diff" | "outline" | "stats" | "runs" | "schedule_set" | "schedule_enable"
        | "schedule_disable" => {
            let script = match deps.owned(&call, name).await {
                Ok(script) => script,
                Err(refused) => return refused,
            };
            match command {
                "patch" => patch(deps, &call, script).await,
                "diff" => version_diff(deps, &call, script).await,
                "outline" => script_outline(deps, &call, script).await,
                "stats" => stats(deps, script).await,
                "schedule_set" => schedule_set(deps, &call, script).await,
                "schedule_enable" => schedule_switch(deps, script, true).await,
                "schedule_disable" => schedule_switch(deps, script, false).await,
                _ => script_runs(deps, &call, script).await,
            }
        }
        other => refusal(
            Refusal::InvalidArguments,
            &format!("unknown command: {other}"),
            &format!("The commands are: {}.", known_commands()),
        ),
    }
}

/// What `validate` answers for source that passed every check: which checks
/// those were, so a caller knows what "valid" covers (and what only a run
/// finds: wrong tool arguments, failing queries, a name unbound on one path).
fn validated(source: &str, params: Option<&Value>, deps: &ScriptTools) -> Value {
    let mut checked = vec![
        json!(format!(
            "size: {} of at most {} bytes",
            source.len(),
            deps.run_limits.max_source_bytes
        )),
        json!("nesting: brackets and operator runs within the parser's safe depth"),
        json!(
            "syntax: the script dialect (def, lambda, top-level for and if; no load, no while, no type annotations, no f-strings)"
        ),
        json!(
            "names: every name used is defined or predeclared (platform, json, date, run, print and the Starlark builtins)"
        ),
    ];
    if params.is_some() {
        checked.push(json!(
            "params: each has a name and a type of string, int, float, bool, date, enum or connection"
        ));
    }
    json!({
        "valid": true,
        "checked": checked,
        "not_checked": "tool names and arguments, queries and connections: a run_draft exercises those",
        "bytes": source.len(),
        "lines": source.lines().count(),
    })
}
