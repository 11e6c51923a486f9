//! `manage_script` patch, diff, outline and stats: editing a long script
//! without resending it, and reading what changed. The text work is
//! `docket_script::authoring`; this file loads versions, checks who may, and
//! saves.

use docket_catalog::CatalogError;
use docket_catalog::scripts::{Script, ScriptChange, ScriptVersion};
use docket_protocol::tools::{CallToolResult, ContentBlock};
use docket_script::authoring::diff::diff;
use docket_script::authoring::outline::{OutlineKind, outline};
use docket_script::authoring::patch::{self, PatchError};
use serde_json::{Value, json};

use crate::refusal::Refusal;
use crate::registry::{ToolCall, ToolOutcome};

use super::answers::{not_found, refusal, saved_message, syntax_refusal, text_result, unavailable};
use super::context::ScriptTools;

/// A patch refusal: its stable `PATCH_*` code in the text and under
/// `error.code`, the edit to blame under `error.edit`.
fn patch_refusal(error: &PatchError) -> ToolOutcome {
    let code = error.code.as_str();
    let hint = error.code.hint();
    let mut result = CallToolResult::from_content(vec![ContentBlock::text(format!(
        "{} (code: {code}) Hint: {hint}",
        error.message
    ))]);
    result.is_error = Some(true);
    result.structured_content = Some(json!({"error": {
        "code": code,
        "category": Refusal::InvalidArguments.category(),
        "message": error.message,
        "hint": hint,
        "edit": error.index,
    }}));
    ToolOutcome::Result(result)
}

fn integer_arg(call: &ToolCall, key: &str) -> Result<Option<i32>, ToolOutcome> {
    match call.arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_i64()
            .and_then(|number| i32::try_from(number).ok())
            .filter(|number| *number >= 1)
            .map(Some)
            .ok_or_else(|| {
                refusal(
                    Refusal::InvalidArguments,
                    &format!("{key} must be a version number from 1"),
                    "Read the script's version with manage_script get.",
                )
            }),
    }
}

/// The script's `version` (its newest when `None`).
async fn version_of(
    deps: &ScriptTools,
    script: &Script,
    version: Option<i32>,
) -> Result<ScriptVersion, ToolOutcome> {
    let number = version.unwrap_or(script.version);
    match deps.store.script_version(&script.id, number).await {
        Ok(Some(version)) => Ok(version),
        Ok(None) => Err(refusal(
            Refusal::NotFound,
            &format!(
                "script {:?} has no version {number}; its newest is {}",
                script.name, script.version
            ),
            "Versions are numbered from 1 to the script's version.",
        )),
        Err(error) => Err(unavailable(&error)),
    }
}

/// `patch`: anchored edits of the newest source, saved as a new version
/// (or only shown, with `dry_run`).
pub(super) async fn patch(deps: &ScriptTools, call: &ToolCall, script: Script) -> ToolOutcome {
    let base_version = match integer_arg(call, "base_version") {
        Ok(base) => base,
        Err(refused) => return refused,
    };
    if let Some(base) = base_version
        && base != script.version
    {
        return patch_refusal(&PatchError::stale_base(
            i64::from(base),
            i64::from(script.version),
        ));
    }
    let edits = match patch::parse_edits(call.arguments.get("edits").unwrap_or(&Value::Null)) {
        Ok(edits) => edits,
        Err(error) => return patch_refusal(&error),
    };
    let current = match version_of(deps, &script, None).await {
        Ok(version) => version,
        Err(refused) => return refused,
    };
    let patched = match patch::apply(&current.source, &edits, deps.run_limits.max_source_bytes) {
        Ok(patched) => patched,
        Err(error) => return patch_refusal(&error),
    };
    let dry_run = call
        .arguments
        .get("dry_run")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let next = current.version + 1;
    let change = diff(
        &current.source,
        &patched.source,
        &format!("{} v{}", script.name, current.version),
        &format!(
            "{} {}",
            script.name,
            if dry_run {
                "(dry run)".to_owned()
            } else {
                format!("v{next}")
            }
        ),
    );
    let edits: Vec<Value> = patched
        .edits
        .iter()
        .map(|edit| {
            json!({
                "index": edit.index,
                "op": edit.op.as_str(),
                "matches": edit.matches,
                "line": edit.line,
            })
        })
        .collect();
    let checked = docket_script::check(&patched.source, &deps.run_limits);
    let mut answer = json!({
        "name": script.name,
        "base_version": current.version,
        "edits": edits,
        "diff": change.unified,
        "lines_added": change.added,
        "lines_removed": change.removed,
        "size_bytes": patched.source.len(),
        "dry_run": dry_run,
    });
    if dry_run {
        // A dry run shows a patch that leaves the source broken too, with why,
        // so the next patch can fix it; saving one is refused.
        answer["valid"] = json!(checked.is_ok());
        if let Err(error) = &checked {
            answer["problem"] = json!(error.message);
            answer["problem_line"] = json!(error.line);
        }
        answer["message"] = json!("Nothing was saved (dry_run).");
        return ToolOutcome::Result(text_result(answer, false));
    }
    if let Err(error) = checked {
        return syntax_refusal(&error);
    }
    let saved = deps
        .store
        .update_script(
            &script.id,
            ScriptChange {
                source: Some(patched.source),
                editor: call.identity.subject.clone(),
                editor_roles: call.identity.roles.clone(),
                base_version: Some(current.version),
                ..ScriptChange::default()
            },
        )
        .await;
    match saved {
        Ok(Some((script, version))) => {
            answer["version"] = json!(version.version);
            answer["author"] = json!(version.author);
            answer["message"] = json!(saved_message(&script, &version, &call.identity.subject));
            ToolOutcome::Result(text_result(answer, false))
        }
        Ok(None) => not_found(&script.name),
        // Another save landed between the read and this one.
        Err(CatalogError::Stale(now)) => patch_refusal(&PatchError::stale_base(
            i64::from(current.version),
            i64::from(now),
        )),
        Err(error) => unavailable(&error),
    }
}

/// `diff`: a unified diff between two versions (`from_version` defaults to
/// the one before `to_version`, which defaults to the newest).
pub(super) async fn version_diff(
    deps: &ScriptTools,
    call: &ToolCall,
    script: Script,
) -> ToolOutcome {
    let (from, to) = match (
        integer_arg(call, "from_version"),
        integer_arg(call, "to_version"),
    ) {
        (Ok(from), Ok(to)) => (from, to),
        (Err(refused), _) | (_, Err(refused)) => return refused,
    };
    let to = to.unwrap_or(script.version);
    let from = from.unwrap_or_else(|| (to - 1).max(1));
    let (old, new) = match (
        version_of(deps, &script, Some(from)).await,
        version_of(deps, &script, Some(to)).await,
    ) {
        (Ok(old), Ok(new)) => (old, new),
        (Err(refused), _) | (_, Err(refused)) => return refused,
    };
    let change = diff(
        &old.source,
        &new.source,
        &format!("{} v{from}", script.name),
        &format!("{} v{to}", script.name),
    );
    ToolOutcome::Result(text_result(
        json!({
            "name": script.name,
            "from_version": from,
            "to_version": to,
            "diff": change.unified,
            "lines_added": change.added,
            "lines_removed": change.removed,
            "identical": change.unified.is_empty(),
            "from_author": old.author,
            "to_author": new.author,
        }),
        false,
    ))
}

/// `outline`: the newest source's top-level statements with their lines.
pub(super) async fn script_outline(
    deps: &ScriptTools,
    call: &ToolCall,
    script: Script,
) -> ToolOutcome {
    let version = match integer_arg(call, "to_version") {
        Ok(version) => version,
        Err(refused) => return refused,
    };
    let version = match version_of(deps, &script, version).await {
        Ok(version) => version,
        Err(refused) => return refused,
    };
    let items: Vec<Value> = outline(&version.source)
        .iter()
        .map(|item| {
            json!({
                "kind": item.kind.as_str(),
                "name": item.name,
                "line": item.line,
                "end_line": item.end_line,
            })
        })
        .collect();
    ToolOutcome::Result(text_result(
        json!({
            "name": script.name,
            "version": version.version,
            "items": items,
            "count": items.len(),
        }),
        false,
    ))
}

/// `stats`: the newest source's size and shape, and the script's history.
pub(super) async fn stats(deps: &ScriptTools, script: Script) -> ToolOutcome {
    let version = match version_of(deps, &script, None).await {
        Ok(version) => version,
        Err(refused) => return refused,
    };
    let source = &version.source;
    let items = outline(source);
    let functions = items
        .iter()
        .filter(|item| item.kind == OutlineKind::Function)
        .count();
    let calls = |needle: &str| source.matches(needle).count();
    ToolOutcome::Result(text_result(
        json!({
            "name": script.name,
            "version": script.version,
            "versions": script.version,
            "bytes": source.len(),
            "lines": source.lines().count(),
            "blank_lines": source.lines().filter(|line| line.trim().is_empty()).count(),
            "comment_lines": source.lines().filter(|line| line.trim_start().starts_with('#')).count(),
            "functions": functions,
            "top_level_statements": items.len(),
            "params": script.params.as_array().map_or(0, Vec::len),
            "platform_calls": {
                "query": calls("platform.query("),
                "call": calls("platform.call("),
                "export": calls("platform.export("),
            },
            "max_bytes": deps.run_limits.max_source_bytes,
            "author": version.author,
            "updated_at": super::answers::timestamp(Some(script.updated_at)),
        }),
        false,
    ))
}
