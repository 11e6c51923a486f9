//! `manage_prompt`: the prompt library's commands (create, update, get, list,
//! delete). A prompt belongs to whoever created it; its owner and administrators
//! change or delete it; those it is shared with (persona names, or `*` for
//! everyone) see and use it as an MCP prompt. A prompt someone may not see reads
//! exactly as one that does not exist.

use std::sync::Arc;

use docket_catalog::prompts::PromptArgumentSpec;
use docket_catalog::{
    CatalogError, LibraryPrompt, NewPrompt, PageCursor, PromptLibrary, PromptViewer,
};
use docket_protocol::tools::CallToolResult;
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;

use crate::refusal::Refusal;
use crate::registry::{RegistryError, ToolCall, ToolOutcome, ToolRegistry, ToolSpec};

/// The commands, as the unknown-command answer lists them.
const COMMANDS: &[&str] = &["create", "update", "get", "list", "delete"];

/// Prompts `list` returns when the call names no limit.
const DEFAULT_PAGE: u64 = 50;

/// What `manage_prompt` needs.
pub(crate) struct PromptDeps {
    /// The library.
    pub(crate) library: Arc<dyn PromptLibrary>,
    /// Names registered prompts (and the built-in ones) hold.
    pub(crate) reserved: Vec<String>,
    /// Where a change to the library is announced, to listeners on every replica.
    pub(crate) changes: Arc<dyn docket_catalog::ChangeFeed>,
    /// Prompts one identity may own (`server.max_prompts_per_owner`).
    pub(crate) max_per_owner: u32,
}

/// Registers `manage_prompt`.
pub(crate) fn register(
    registry: &mut ToolRegistry,
    deps: Arc<PromptDeps>,
) -> Result<(), RegistryError> {
    use docket_catalog::prompts::{
        MAX_ARGUMENT_DESCRIPTION_BYTES, MAX_DESCRIPTION_BYTES, MAX_ITEMS, MAX_REFERENCE_BYTES,
        MAX_TEMPLATE_BYTES,
    };
    let argument = json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 64},
        "description": {"type": "string", "maxLength": MAX_ARGUMENT_DESCRIPTION_BYTES},
        "required": {"type": "boolean"}
    }, "required": ["name"], "additionalProperties": false});
    let references = |description: &str| {
        json!({"type": "array", "maxItems": MAX_ITEMS, "description": description,
               "items": {"type": "string", "maxLength": MAX_REFERENCE_BYTES}})
    };
    registry.register(
        ToolSpec::new(
            "manage_prompt",
            "Keeps the team's prompt library: create, update, get, list or delete a prompt. A \
             prompt has a template whose {{argument}} placeholders its declared arguments fill, \
             may name scripts it is meant to run with, and is shared with personas (or `*` for \
             everyone); it is then offered as an MCP prompt to those it is shared with.",
            json!({"type": "object", "properties": {
                "command": {"type": "string", "maxLength": 16,
                            "description": "create, update, get, list or delete"},
                "name": {"type": "string", "maxLength": 64,
                         "description": "the prompt's name (create, update, get, delete)"},
                "description": {"type": "string", "maxLength": MAX_DESCRIPTION_BYTES},
                "template": {"type": "string", "maxLength": MAX_TEMPLATE_BYTES,
                             "description": "text with {{argument}} placeholders"},
                "arguments": {"type": "array", "maxItems": MAX_ITEMS, "items": argument},
                "scripts": references("scripts it is meant to run with"),
                "shared_with": references("persona names, or \"*\" for everyone; empty keeps it yours"),
                "limit": {"type": "integer", "minimum": 1, "maximum": docket_catalog::prompts::MAX_PAGE,
                          "description": "list: prompts per page (default 50)"},
                "cursor": {"type": "string", "maxLength": 512,
                           "description": "list: next_cursor from the previous page"}
            }, "required": ["command"], "additionalProperties": false}),
        )
        .with_output_schema(output_schema()),
        move |call: ToolCall| {
            let deps = Arc::clone(&deps);
            async move { ToolOutcome::Result(manage(&deps, &call).await) }
        },
    )
}

async fn manage(deps: &PromptDeps, call: &ToolCall) -> CallToolResult {
    let command = call
        .arguments
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let answer = command_answer(deps, call).await;
    let changed =
        matches!(command, "create" | "update" | "delete") && answer.is_error != Some(true);
    if changed
        && let Err(err) = deps
            .changes
            .publish(docket_catalog::CatalogChange::Prompts)
            .await
    {
        tracing::warn!(error = %err, "could not announce a change to the prompt library");
    }
    answer
}

async fn command_answer(deps: &PromptDeps, call: &ToolCall) -> CallToolResult {
    let arguments = &call.arguments;
    let command = arguments
        .get("command")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = arguments.get("name").and_then(Value::as_str);
    // A run acts for its script's owner: a prompt it creates is the owner's (to
    // change and delete) and counts against the owner's cap, not a `script:` id's.
    let subject = call.identity.on_behalf_of();
    let persona = Some(call.persona.name.as_str());
    let is_admin = call.persona.is_admin;
    let missing_name = || {
        Refusal::InvalidArguments.result(
            &format!("{command} needs the prompt's name"),
            "Give `name`.",
        )
    };
    let not_found = |name: &str| {
        Refusal::NotFound.result(
            &format!("no prompt named {name:?} is visible to you"),
            "List the prompts you may use with command list.",
        )
    };
    let visible = |prompt: &LibraryPrompt| prompt.visible_to(subject, persona, is_admin);
    let may_change = |prompt: &LibraryPrompt| is_admin || prompt.owner == subject;
    // Refuses a change to a prompt: unknown, or not the caller's to change (said as
    // such only to those who may see it).
    let not_theirs = |name: &str, prompt: Option<&LibraryPrompt>| match prompt {
        Some(prompt) if visible(prompt) => Refusal::Unauthorized.result(
            &format!("only its owner or an administrator may change prompt {name:?}"),
            "Ask its owner, or create a prompt of your own.",
        ),
        _ => not_found(name),
    };
    match command {
        "list" => list(deps, call).await,
        "get" => {
            let Some(name) = name else {
                return missing_name();
            };
            match deps.library.prompt(name).await {
                Ok(Some(prompt)) if visible(&prompt) => {
                    CallToolResult::structured(prompt_json(&prompt))
                }
                Ok(_) => not_found(name),
                Err(err) => unavailable(&err),
            }
        }
        "delete" => {
            let Some(name) = name else {
                return missing_name();
            };
            match deps.library.prompt(name).await {
                Ok(Some(prompt)) if may_change(&prompt) => {
                    match deps.library.delete_prompt(name).await {
                        Ok(_) => CallToolResult::structured(json!({"deleted": name})),
                        Err(err) => unavailable(&err),
                    }
                }
                Ok(found) => not_theirs(name, found.as_ref()),
                Err(err) => unavailable(&err),
            }
        }
        "create" => {
            let Some(name) = name else {
                return missing_name();
            };
            // A near name of the server's own prompts (`Explore_Table` beside
            // `explore_table`) could pass for one of them in a client's list.
            if deps
                .reserved
                .iter()
                .any(|reserved| name_key(reserved) == name_key(name))
            {
                return name_taken(name);
            }
            let prompt = match new_prompt(call, name, subject, None) {
                Ok(prompt) => prompt,
                Err(refused) => return refused,
            };
            match deps.library.create_prompt(prompt, deps.max_per_owner).await {
                Ok(created) => CallToolResult::structured(prompt_json(&created)),
                Err(CatalogError::LimitReached(limit)) => Refusal::LimitReached.result(
                    &format!(
                        "you already keep {limit} prompts, the most one identity may \
                         (server.max_prompts_per_owner)"
                    ),
                    "Delete prompts you no longer need, or update one instead.",
                ),
                Err(CatalogError::Duplicate) => name_taken(name),
                Err(CatalogError::Invalid(message)) => {
                    Refusal::InvalidArguments.result(&message, "Fix the prompt and try again.")
                }
                Err(err) => unavailable(&err),
            }
        }
        "update" => {
            let Some(name) = name else {
                return missing_name();
            };
            let existing = match deps.library.prompt(name).await {
                Ok(Some(prompt)) if may_change(&prompt) => prompt,
                Ok(found) => return not_theirs(name, found.as_ref()),
                Err(err) => return unavailable(&err),
            };
            let prompt = match new_prompt(call, name, &existing.owner, Some(&existing)) {
                Ok(prompt) => prompt,
                Err(refused) => return refused,
            };
            match deps.library.update_prompt(prompt).await {
                Ok(Some(updated)) => CallToolResult::structured(prompt_json(&updated)),
                Ok(None) => not_found(name),
                Err(CatalogError::Invalid(message)) => {
                    Refusal::InvalidArguments.result(&message, "Fix the prompt and try again.")
                }
                Err(err) => unavailable(&err),
            }
        }
        other => Refusal::InvalidArguments.result(
            &format!("unknown command {other:?}"),
            &format!("Use one of: {}.", COMMANDS.join(", ")),
        ),
    }
}

/// `list`: a page of the prompts the caller may see, newest first, and the cursor
/// of the next page while there may be one.
async fn list(deps: &PromptDeps, call: &ToolCall) -> CallToolResult {
    let limit = call
        .arguments
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_PAGE)
        .clamp(1, u64::from(docket_catalog::prompts::MAX_PAGE));
    let limit = u32::try_from(limit).unwrap_or(docket_catalog::prompts::MAX_PAGE);
    let before = match call.arguments.get("cursor").and_then(Value::as_str) {
        Some(token) => match PageCursor::decode(token) {
            Some(cursor) => Some(cursor),
            None => {
                return Refusal::InvalidArguments.result(
                    "the cursor is not valid",
                    "Use next_cursor from the previous list.",
                );
            }
        },
        None => None,
    };
    let viewer = PromptViewer {
        subject: call.identity.on_behalf_of(),
        persona: Some(&call.persona.name),
        is_admin: call.persona.is_admin,
    };
    match deps.library.prompts(&viewer, before.as_ref(), limit).await {
        Ok(prompts) => {
            let next_cursor = (prompts.len() == limit as usize)
                .then(|| prompts.last().map(|prompt| prompt.cursor().encode()))
                .flatten();
            let listed: Vec<Value> = prompts
                .iter()
                .map(|prompt| {
                    json!({"name": prompt.name, "owner": prompt.owner,
                           "description": prompt.description,
                           "shared_with": prompt.shared_with})
                })
                .collect();
            CallToolResult::structured(json!({ "prompts": listed, "next_cursor": next_cursor }))
        }
        Err(err) => unavailable(&err),
    }
}

/// The prompt the call describes: its fields over `base`'s (an update), or alone.
fn new_prompt(
    call: &ToolCall,
    name: &str,
    owner: &str,
    base: Option<&LibraryPrompt>,
) -> Result<NewPrompt, CallToolResult> {
    let arguments = &call.arguments;
    let text = |key: &str| {
        arguments
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let names = |key: &str| -> Option<Vec<String>> {
        arguments.get(key).and_then(Value::as_array).map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
    };
    let declared = match arguments.get("arguments") {
        Some(value) => {
            serde_json::from_value::<Vec<PromptArgumentSpec>>(value.clone()).map_err(|err| {
                Refusal::InvalidArguments.result(
                    &format!("arguments: {err}"),
                    "Give each argument a name, and optionally a description and required.",
                )
            })?
        }
        None => base
            .map(|prompt| prompt.arguments.clone())
            .unwrap_or_default(),
    };
    Ok(NewPrompt {
        name: name.to_owned(),
        owner: owner.to_owned(),
        description: text("description")
            .or_else(|| base.map(|prompt| prompt.description.clone()))
            .unwrap_or_default(),
        template: text("template")
            .or_else(|| base.map(|prompt| prompt.template.clone()))
            .unwrap_or_default(),
        arguments: declared,
        scripts: names("scripts")
            .or_else(|| base.map(|prompt| prompt.scripts.clone()))
            .unwrap_or_default(),
        shared_with: names("shared_with")
            .or_else(|| base.map(|prompt| prompt.shared_with.clone()))
            .unwrap_or_default(),
    })
}

/// A name's key for telling built-in names apart: case and the separators
/// `_`, `-` and `.` do not count.
fn name_key(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '_' | '-' | '.'))
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// The refusal of a name that cannot be had: the same words whether the server
/// provides it, the caller holds it or someone holds it out of the caller's sight,
/// so a create never tells that a prompt the caller may not see exists.
fn name_taken(name: &str) -> CallToolResult {
    Refusal::AlreadyExists.result(
        &format!("the prompt name {name:?} is not available"),
        "Choose another name; to change a prompt of yours, use update.",
    )
}

/// What `manage_prompt` answers: a prompt (create, update, get), the name of the
/// one deleted, or a page of the listing.
fn output_schema() -> Value {
    use super::output::{array, boolean, object, record, string, string_or_null, time};
    let names = |what: &str| array(string("A name."), what);
    let prompt = record(json!({
        "name": string("The prompt's name."),
        "owner": string("Whose it is."),
        "description": string("What it is for."),
        "template": string("Its text, with {{argument}} placeholders."),
        "arguments": array(object(json!({
            "name": string("The argument's name."),
            "description": string_or_null("What to give."),
            "required": boolean("Whether it must be given."),
        }), &["name"]), "Its arguments."),
        "scripts": names("Scripts it is meant to run with."),
        "shared_with": names("The personas it is shared with (* for everyone)."),
        "created_at": time("When it was created (RFC 3339)."),
        "updated_at": time("When it last changed (RFC 3339)."),
    }));
    let listing = record(json!({
        "prompts": array(record(json!({
            "name": string("The prompt's name."),
            "owner": string("Whose it is."),
            "description": string("What it is for."),
            "shared_with": names("The personas it is shared with."),
        })), "The prompts the caller may see, newest first."),
        "next_cursor": string_or_null("Pass it as `cursor` for the next page."),
    }));
    let deleted = record(json!({"deleted": string("The name of the prompt deleted.")}));
    json!({"type": "object", "anyOf": [prompt, listing, deleted]})
}

fn prompt_json(prompt: &LibraryPrompt) -> Value {
    json!({
        "name": prompt.name,
        "owner": prompt.owner,
        "description": prompt.description,
        "template": prompt.template,
        "arguments": prompt.arguments,
        "scripts": prompt.scripts,
        "shared_with": prompt.shared_with,
        "created_at": prompt.created_at.format(&Rfc3339).unwrap_or_default(),
        "updated_at": prompt.updated_at.format(&Rfc3339).unwrap_or_default(),
    })
}

fn unavailable(error: &CatalogError) -> CallToolResult {
    tracing::warn!(error = %error, "the prompt library is unavailable");
    Refusal::ToolError.result(
        "the prompt library is unavailable",
        "Try again in a moment.",
    )
}
