//! `share_asset`: links to an asset for others. `create` makes a share — to
//! named people (each must sign in as themselves to open it), to anyone signed
//! in, or public — which always expires (`storage.shares.default_ttl`, at most
//! `storage.shares.max_ttl`); `list` shows the shares of one asset or all of
//! the caller's, with how often each was opened; `revoke` stops one at once.
//! Only the asset's owner and administrators may share, list or revoke, and an
//! asset or share that is not the caller's reads exactly as one that does not
//! exist. A share is opened at its `url` (`downloads::open_share`).

use std::time::Duration;

use docket_catalog::links::{MAX_PERSON_BYTES, MAX_SHARE_PAGE, MAX_SHARE_PEOPLE};
use docket_catalog::{CatalogError, NewShare, Share, ShareAudience};
use docket_protocol::tools::{CallToolResult, ToolAnnotations};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::assets::{Assets, visible_asset};
use crate::refusal::Refusal;
use crate::registry::{RegistryError, ToolCall, ToolOutcome, ToolRegistry, ToolSpec};

/// The answer for an asset that is not the caller's or does not exist.
fn no_asset(id: &str) -> CallToolResult {
    Refusal::NotFound.result(
        &format!("no asset {id:?}"),
        "Call list_assets to see your assets.",
    )
}

/// The answer for a share that is not the caller's or does not exist.
fn no_share(id: &str) -> CallToolResult {
    Refusal::NotFound.result(
        &format!("no share {id:?}"),
        "Call share_asset with command list to see your shares.",
    )
}

fn unavailable(err: &CatalogError) -> CallToolResult {
    Refusal::Unavailable.result(&format!("the share store failed: {err}"), "Try again.")
}

fn time_text(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

/// A share as the tool shows it.
fn share_json(deps: &Assets, share: &Share) -> Value {
    json!({
        "share_id": share.id,
        "url": deps.links.share_url(&share.id),
        "asset_id": share.asset_id,
        "owner": share.owner,
        "audience": share.audience.kind(),
        "people": share.audience.people(),
        "created_at": time_text(share.created_at),
        "expires_at": time_text(share.expires_at),
        "revoked_at": share.revoked_at.map(time_text),
        "open_count": share.open_count,
        "last_opened_at": share.last_opened_at.map(time_text),
        "live": share.is_live(OffsetDateTime::now_utc()),
    })
}

/// The shape of [`share_json`].
fn share_schema() -> Value {
    use super::output::{array, boolean, count, record, string, time, time_or_null};
    record(json!({
        "share_id": string("The share's id (revoke names it)."),
        "url": string("The link that opens the asset."),
        "asset_id": string("The asset it opens."),
        "owner": string("Who made it."),
        "audience": {"type": "string", "enum": ["people", "signed_in", "public"]},
        "people": array(string("A subject."), "Who may open it, for audience people."),
        "created_at": time("When it was made (RFC 3339)."),
        "expires_at": time("When it stops opening (RFC 3339)."),
        "revoked_at": time_or_null("When it was revoked, if it was."),
        "open_count": count("How often it was opened."),
        "last_opened_at": time_or_null("When it was last opened."),
        "live": boolean("Whether it opens now."),
    }))
}

/// What `share_asset` answers: a share (create, revoke) or the caller's shares
/// (list).
fn output_schema() -> Value {
    let listing = super::output::record(json!({
        "shares": super::output::array(share_schema(), "The shares, newest first."),
    }));
    json!({"type": "object", "anyOf": [share_schema(), listing]})
}

/// Registers `share_asset`.
pub(crate) fn register(registry: &mut ToolRegistry, deps: Assets) -> Result<(), RegistryError> {
    let max_ttl_seconds = deps.links.shares.max_ttl.as_secs().max(60);
    registry.register(
        ToolSpec::new(
            "share_asset",
            "Makes, lists and revokes links to one of your assets for other people. \
             command create: audience `people` (name them in `people`; each must sign in as \
             themselves to open it), `signed_in` (anyone signed in) or `public` (anyone with \
             the link); every share expires (expires_in_seconds). The answer's `url` opens \
             the asset. command list: your shares (of asset_id when given), with how often \
             each was opened. command revoke: stops share_id at once.",
            json!({"type": "object", "properties": {
                "command": {"type": "string", "enum": ["create", "list", "revoke"]},
                "asset_id": {"type": "string", "minLength": 1, "maxLength": 64},
                "share_id": {"type": "string", "minLength": 1, "maxLength": 64},
                "audience": {"type": "string", "enum": ["people", "signed_in", "public"]},
                "people": {
                    "type": "array",
                    "maxItems": MAX_SHARE_PEOPLE,
                    "items": {"type": "string", "minLength": 1, "maxLength": MAX_PERSON_BYTES},
                    "description": "who may open it: their subjects, as platform_info shows each person's"
                },
                "expires_in_seconds": {"type": "integer", "minimum": 60, "maximum": max_ttl_seconds},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SHARE_PAGE}
            }, "required": ["command"], "additionalProperties": false}),
        )
        .with_annotations(ToolAnnotations {
            read_only_hint: Some(false),
            destructive_hint: Some(false),
            idempotent_hint: Some(false),
            open_world_hint: Some(false),
            ..ToolAnnotations::default()
        })
        .with_output_schema(output_schema()),
        move |call: ToolCall| {
            let deps = deps.clone();
            async move {
                let result = match call.arguments.get("command").and_then(Value::as_str) {
                    Some("create") => create(&deps, &call).await,
                    Some("list") => list(&deps, &call).await,
                    Some("revoke") => revoke(&deps, &call).await,
                    _ => Refusal::InvalidArguments
                        .result("command must be create, list or revoke", "Name a command."),
                };
                ToolOutcome::Result(result)
            }
        },
    )
}

fn text<'a>(call: &'a ToolCall, name: &str) -> Option<&'a str> {
    call.arguments.get(name).and_then(Value::as_str)
}

/// The audience `create` names, or the refusal that says what is missing.
fn audience(call: &ToolCall) -> Result<ShareAudience, CallToolResult> {
    let people: Vec<String> = call
        .arguments
        .get("people")
        .and_then(Value::as_array)
        .map(|people| {
            people
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    match (text(call, "audience"), people.is_empty()) {
        (Some("people"), false) => Ok(ShareAudience::People(people)),
        (Some("people"), true) => Err(Refusal::InvalidArguments.result(
            "a share to people names them in `people`",
            "Give the subjects of the people who may open it.",
        )),
        (Some("signed_in"), true) => Ok(ShareAudience::SignedIn),
        (Some("public"), true) => Ok(ShareAudience::Public),
        (Some("signed_in" | "public"), false) => Err(Refusal::InvalidArguments.result(
            "`people` goes with audience `people` only",
            "Leave `people` out, or use audience `people`.",
        )),
        _ => Err(Refusal::InvalidArguments.result(
            "create needs an audience: people, signed_in or public",
            "Say who may open the share.",
        )),
    }
}

async fn create(deps: &Assets, call: &ToolCall) -> CallToolResult {
    let Some(asset_id) = text(call, "asset_id") else {
        return Refusal::InvalidArguments.result("create needs asset_id", "Name the asset.");
    };
    let audience = match audience(call) {
        Ok(audience) => audience,
        Err(refusal) => return refusal,
    };
    let asset = match visible_asset(
        deps,
        asset_id,
        call.identity.on_behalf_of(),
        call.persona.is_admin,
    )
    .await
    {
        Ok(Some(asset)) => asset,
        Ok(None) => return no_asset(asset_id),
        Err(err) => {
            return Refusal::Unavailable
                .result(&format!("the asset store failed: {err}"), "Try again.");
        }
    };
    let settings = &deps.links.shares;
    let lifetime = call
        .arguments
        .get("expires_in_seconds")
        .and_then(Value::as_u64)
        .map_or(settings.default_ttl, Duration::from_secs)
        .min(settings.max_ttl);
    let id = match docket_catalog::generate_id() {
        Ok(id) => id,
        Err(err) => {
            return Refusal::Internal.result(&format!("no random id: {err}"), "Try again.");
        }
    };
    let now = OffsetDateTime::now_utc();
    // Made by an administrator too, the share is the asset owner's: it counts
    // against their cap and they see and revoke it.
    let share = NewShare {
        id,
        asset_id: asset.id.clone(),
        owner: asset.owner.clone(),
        audience,
        expires_at: now + lifetime,
        created_at: now,
    };
    match deps
        .links
        .store
        .create_share(&share, settings.max_per_owner)
        .await
    {
        Ok(created) => CallToolResult::structured(share_json(deps, &created)),
        Err(CatalogError::LimitReached(limit)) => Refusal::LimitReached.result(
            &format!(
                "the asset's owner already holds {limit} shares, the most one owner may \
                 (storage.shares.max_per_owner)"
            ),
            "Revoke shares you no longer need; ended shares are deleted by the retention pass.",
        ),
        Err(CatalogError::Invalid(rule)) => Refusal::InvalidArguments.result(&rule, "Fix it."),
        Err(err) => unavailable(&err),
    }
}

async fn list(deps: &Assets, call: &ToolCall) -> CallToolResult {
    let limit = call
        .arguments
        .get("limit")
        .and_then(Value::as_u64)
        .and_then(|limit| u32::try_from(limit).ok())
        .unwrap_or(50)
        .min(MAX_SHARE_PAGE);
    let (owner, asset_id) = match text(call, "asset_id") {
        Some(asset_id) => match visible_asset(
            deps,
            asset_id,
            call.identity.on_behalf_of(),
            call.persona.is_admin,
        )
        .await
        {
            Ok(Some(asset)) => (asset.owner, Some(asset.id)),
            Ok(None) => return no_asset(asset_id),
            Err(err) => {
                return Refusal::Unavailable
                    .result(&format!("the asset store failed: {err}"), "Try again.");
            }
        },
        None => (call.identity.on_behalf_of().to_owned(), None),
    };
    match deps
        .links
        .store
        .list_shares(&owner, asset_id.as_deref(), limit)
        .await
    {
        Ok(shares) => {
            let listed: Vec<Value> = shares.iter().map(|share| share_json(deps, share)).collect();
            CallToolResult::structured(json!({"shares": listed}))
        }
        Err(err) => unavailable(&err),
    }
}

async fn revoke(deps: &Assets, call: &ToolCall) -> CallToolResult {
    let Some(share_id) = text(call, "share_id") else {
        return Refusal::InvalidArguments.result("revoke needs share_id", "Name the share.");
    };
    if !crate::links::codec::is_asset_id(share_id) {
        return no_share(share_id);
    }
    let share = match deps.links.store.share(share_id).await {
        Ok(Some(share)) if call.persona.is_admin || share.owner == call.identity.on_behalf_of() => {
            share
        }
        Ok(_) => return no_share(share_id),
        Err(err) => return unavailable(&err),
    };
    match deps
        .links
        .store
        .revoke_share(&share.id, OffsetDateTime::now_utc())
        .await
    {
        // Revoking twice is acknowledged as once: the share is revoked either way.
        Ok(_) => match deps.links.store.share(&share.id).await {
            Ok(Some(share)) => CallToolResult::structured(share_json(deps, &share)),
            Ok(None) => no_share(share_id),
            Err(err) => unavailable(&err),
        },
        Err(err) => unavailable(&err),
    }
}
