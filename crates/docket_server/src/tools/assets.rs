//! Assets: what exports write. `list_assets` and `get_asset` show the caller's own
//! (administrators see all), each with a signed `download_url` that opens in a
//! browser with no header; `GET /assets/{id}/content` also streams the bytes to
//! the owner's and administrators' bearer tokens.

use docket_catalog::{Asset, PageCursor};
use docket_protocol::tools::CallToolResult;
use serde_json::{Value, json};
use time::format_description::well_known::Rfc3339;

use super::output::read_only;
use crate::assets::{Assets, visible_asset};
use crate::refusal::Refusal;
use crate::registry::{RegistryError, ToolCall, ToolOutcome, ToolRegistry, ToolSpec};

/// The JSON an asset is described by, with a signed `download_url`.
pub(crate) async fn asset_json(deps: &Assets, asset: &Asset) -> Value {
    let download_url = deps.download_url(asset).await;
    json!({
        "asset_id": asset.id,
        "name": asset.name,
        "description": asset.description,
        "tags": asset.tags,
        "format": asset.format,
        "content_type": asset.content_type,
        "row_count": asset.row_count,
        "size_bytes": asset.size_bytes,
        "connection": asset.connection,
        "tool": asset.tool,
        "owner": asset.owner,
        "created_at": asset.created_at.format(&Rfc3339).unwrap_or_default(),
        "download_url": download_url,
    })
}

/// The shape of [`asset_json`]: one asset as `get_asset` and `list_assets` show it.
pub(crate) fn asset_schema() -> Value {
    use super::output::{array, count, count_or_null, record, string, string_or_null, time};
    record(json!({
        "asset_id": string("The asset's id."),
        "name": string("Its name, also the download file name."),
        "description": string_or_null("What it holds."),
        "tags": array(string("A tag."), "Its tags."),
        "format": string("The file format (csv, json, jsonl, parquet, ...)."),
        "content_type": string("The media type of its bytes."),
        "row_count": count_or_null("How many rows it holds, when it has rows."),
        "size_bytes": count("Its size in bytes."),
        "connection": string_or_null("The connection it was exported from."),
        "tool": string("The tool that wrote it."),
        "owner": string("Whose it is."),
        "created_at": time("When it was written (RFC 3339)."),
        "download_url": string("A signed URL that opens in a browser with no header."),
    }))
}

/// The shape of [`asset_result`]: what every export answers.
pub(crate) fn export_schema() -> Value {
    use super::output::{count, count_or_null, record, string, string_or_null};
    record(json!({
        "asset_id": string("The asset the export wrote."),
        "name": string("Its name, also the download file name."),
        "format": string("The file format (csv, json, jsonl, parquet, ...)."),
        "content_type": string("The media type of its bytes."),
        "row_count": count_or_null("How many rows it holds, when it has rows."),
        "size_bytes": count("Its size in bytes."),
        "download_url": string("A signed URL that opens in a browser with no header."),
        "resource_uri": string("The asset as a resource (resources/read)."),
        "message": string("What happened, in a sentence."),
        "call_id": string_or_null("The call that wrote it, in the call catalog."),
    }))
}

/// An export's result: `{asset_id, name, format, content_type, row_count,
/// size_bytes, download_url, resource_uri, message, call_id}` as JSON text and
/// structured content, and a `resource_link` block to the asset; the
/// `download_url` is signed and opens in a browser with no header.
pub(crate) async fn asset_result(
    deps: &Assets,
    asset: &Asset,
    message: &str,
    call_id: Option<&str>,
) -> CallToolResult {
    let download_url = deps.download_url(asset).await;
    let mut result = CallToolResult::structured(json!({
        "asset_id": asset.id,
        "name": asset.name,
        "format": asset.format,
        "content_type": asset.content_type,
        "row_count": asset.row_count,
        "size_bytes": asset.size_bytes,
        "download_url": download_url,
        "resource_uri": crate::asset_resources::asset_uri(&asset.id),
        "message": message,
        "call_id": call_id.or(asset.call_id.as_deref()),
    }));
    // A client attaches the asset by this link (resources/read).
    result
        .content
        .push(crate::asset_resources::resource_link(asset, &download_url));
    result
}

/// Registers `list_assets` and `get_asset`.
pub(crate) fn register(registry: &mut ToolRegistry, deps: Assets) -> Result<(), RegistryError> {
    let list_deps = deps.clone();
    registry.register(
        ToolSpec::new(
            "list_assets",
            "Lists the assets your exports wrote, newest first (administrators see everyone's).",
            json!({"type": "object", "properties": {
                "limit": {"type": "integer", "minimum": 1, "maximum": 200},
                "cursor": {"type": "string", "maxLength": 512, "description": "next_cursor from the previous page"}
            }, "additionalProperties": false}),
        )
        .with_annotations(read_only())
        .with_output_schema(super::output::record(json!({
            "assets": super::output::array(asset_schema(), "The assets, newest first."),
            "next_cursor": super::output::string_or_null("Pass it as `cursor` for the next page."),
        }))),
        move |call: ToolCall| {
            let deps = list_deps.clone();
            async move { ToolOutcome::Result(list(&deps, &call).await) }
        },
    )?;
    registry.register(
        ToolSpec::new(
            "get_asset",
            "Describes one asset, with its download URL.",
            json!({"type": "object", "properties": {"asset_id": {"type": "string", "minLength": 1, "maxLength": 64}},
                   "required": ["asset_id"], "additionalProperties": false}),
        )
        .with_annotations(read_only())
        .with_output_schema(asset_schema()),
        move |call: ToolCall| {
            let deps = deps.clone();
            async move { ToolOutcome::Result(get(&deps, &call).await) }
        },
    )
}

async fn list(deps: &Assets, call: &ToolCall) -> CallToolResult {
    let limit = call
        .arguments
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(50)
        .min(200);
    let cursor = match call.arguments.get("cursor").and_then(Value::as_str) {
        Some(token) => match PageCursor::decode(token) {
            Some(cursor) => Some(cursor),
            None => {
                return Refusal::InvalidArguments.result(
                    "the cursor is not valid",
                    "Use next_cursor from list_assets.",
                );
            }
        },
        None => None,
    };
    let owner = (!call.persona.is_admin).then_some(call.identity.on_behalf_of());
    let limit = u32::try_from(limit).unwrap_or(200);
    match deps.store.list(owner, limit, cursor.as_ref()).await {
        Ok(assets) => {
            let next_cursor = (assets.len() == limit as usize)
                .then(|| assets.last().map(|asset| asset.cursor().encode()))
                .flatten();
            let mut listed: Vec<Value> = Vec::with_capacity(assets.len());
            for asset in &assets {
                listed.push(asset_json(deps, asset).await);
            }
            CallToolResult::structured(json!({"assets": listed, "next_cursor": next_cursor}))
        }
        Err(err) => {
            Refusal::Unavailable.result(&format!("the asset store failed: {err}"), "Try again.")
        }
    }
}

async fn get(deps: &Assets, call: &ToolCall) -> CallToolResult {
    let id = call
        .arguments
        .get("asset_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match visible_asset(
        deps,
        id,
        call.identity.on_behalf_of(),
        call.persona.is_admin,
    )
    .await
    {
        Ok(Some(asset)) => CallToolResult::structured(asset_json(deps, &asset).await),
        // Not yours and does not exist read the same.
        Ok(None) => Refusal::NotFound.result(
            &format!("no asset {id:?}"),
            "Call list_assets to see your assets.",
        ),
        Err(err) => {
            Refusal::Unavailable.result(&format!("the asset store failed: {err}"), "Try again.")
        }
    }
}
