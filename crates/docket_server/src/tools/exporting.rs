//! What every export tool does around its executor, so `trino_export`,
//! `api_export` and `graphql_export` behave alike: the timeout a call may ask
//! for, the replay of an earlier asset with the same idempotency key, the ids and
//! the storage key, and recording the asset (race-safe, with the bytes deleted
//! when the row cannot be written).

use docket_task::runtime::TaskContext;
use std::time::Duration;

use docket_catalog::{Asset, CatalogError, NewAsset, generate_id};
use docket_export::sink::Upload;
use docket_protocol::JsonObject;
use docket_protocol::tools::{CallToolResult, ToolAnnotations};
use serde_json::Value;

use super::assets::asset_result;
use crate::assets::Assets;
use crate::config::ExportsConfig;
use crate::refusal::Refusal;
use crate::registry::ToolCall;

/// The timeout an export call asks for (`timeout_seconds`), or the default.
pub(crate) fn export_timeout(
    arguments: &JsonObject,
    limits: &ExportsConfig,
) -> Result<Duration, CallToolResult> {
    match arguments
        .get("timeout_seconds")
        .and_then(Value::as_u64)
        .map(Duration::from_secs)
    {
        Some(timeout) if timeout > limits.max_timeout => Err(Refusal::InvalidArguments.result(
            &format!(
                "timeout_seconds {} exceeds the maximum of {}",
                timeout.as_secs(),
                limits.max_timeout.as_secs()
            ),
            "Lower timeout_seconds.",
        )),
        Some(timeout) => Ok(timeout),
        None => Ok(limits.default_timeout),
    }
}

/// The asset an earlier call with this owner's idempotency key produced, as the
/// result to answer with; `None` when there is none (or no key).
pub(crate) async fn replay(
    assets: &Assets,
    owner: &str,
    idempotency_key: Option<&str>,
    message: &str,
) -> Option<CallToolResult> {
    let key = idempotency_key?;
    match assets.store.find_by_idempotency_key(owner, key).await {
        Ok(Some(existing)) => Some(asset_result(assets, &existing, message, None).await),
        Ok(None) => None,
        Err(err) => Some(
            Refusal::Unavailable.result(&format!("the asset store failed: {err}"), "Try again."),
        ),
    }
}

/// The ids an export is recorded under.
pub(crate) struct ExportIds {
    /// The asset's id (also the first segment of its storage key).
    pub(crate) asset_id: String,
    /// The call record's id.
    pub(crate) call_id: String,
}

/// Fresh asset and call ids.
pub(crate) fn export_ids() -> Result<ExportIds, CallToolResult> {
    match (generate_id(), generate_id()) {
        (Ok(asset_id), Ok(call_id)) => Ok(ExportIds { asset_id, call_id }),
        _ => Err(Refusal::Internal.result("could not draw an id", "Try again.")),
    }
}

/// The most characters of an asset's name its file name keeps: with the extension
/// it stays well inside the 255 bytes a file system allows a name.
const MAX_FILE_STEM: usize = 128;

/// A file name from the asset's name: safe characters only, at most
/// [`MAX_FILE_STEM`] of them, and `extension` (once: a name that already ends
/// with it keeps it as it is).
pub(crate) fn file_name(name: &str, extension: &str) -> String {
    let stem: String = name
        .chars()
        .take(MAX_FILE_STEM)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let stem = stem.trim_matches('.');
    let stem = if stem.is_empty() { "export" } else { stem };
    let suffix = format!(".{extension}");
    let stem = stem
        .strip_suffix(&suffix)
        .filter(|s| !s.is_empty())
        .unwrap_or(stem);
    format!("{stem}{suffix}")
}

/// The asset fields every export call takes: `name`, `description`, `tags`,
/// `idempotency_key`.
pub(crate) struct AssetFields {
    /// The asset's name.
    pub(crate) name: String,
    /// Its description.
    pub(crate) description: Option<String>,
    /// Its tags.
    pub(crate) tags: Vec<String>,
    /// The caller's idempotency key.
    pub(crate) idempotency_key: Option<String>,
}

impl AssetFields {
    /// Reads them from validated arguments.
    pub(crate) fn from_arguments(arguments: &JsonObject) -> Self {
        let text = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Self {
            name: text("name").unwrap_or_else(|| "export".to_owned()),
            description: text("description"),
            tags: arguments
                .get("tags")
                .and_then(Value::as_array)
                .map(|tags| {
                    tags.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            idempotency_key: text("idempotency_key"),
        }
    }
}

/// Where exports go, or the refusal of an export when assets are not configured.
pub(crate) fn configured(assets: Option<&Assets>) -> Result<&Assets, CallToolResult> {
    assets.ok_or_else(|| {
        Refusal::NotConfigured.result(
            "exports are not configured",
            "Configure storage and a database.",
        )
    })
}

/// How an export call starts: who owns it, its asset fields, its timeout, and
/// fresh ids.
pub(crate) struct ExportStart {
    /// How long the export may run.
    pub(crate) timeout: Duration,
    /// Who will own the asset: the caller, or a run's script owner.
    pub(crate) owner: String,
    /// The asset fields of the call.
    pub(crate) fields: AssetFields,
    /// The asset's and the call record's ids.
    pub(crate) ids: ExportIds,
}

/// Reads the call's timeout and asset fields and, when its idempotency key
/// already produced an asset of this caller, answers with that asset (`Err`,
/// saying `replayed`); otherwise draws fresh ids.
pub(crate) async fn start_export(
    assets: &Assets,
    limits: &ExportsConfig,
    call: &ToolCall,
    replayed: &str,
) -> Result<ExportStart, CallToolResult> {
    let timeout = export_timeout(&call.arguments, limits)?;
    // A script run's exports belong to the script's owner, who follows the run.
    let owner = call.identity.on_behalf_of().to_owned();
    let fields = AssetFields::from_arguments(&call.arguments);
    if let Some(result) = replay(assets, &owner, fields.idempotency_key.as_deref(), replayed).await
    {
        return Err(result);
    }
    Ok(ExportStart {
        timeout,
        owner,
        fields,
        ids: export_ids()?,
    })
}

/// Records the asset whose bytes are committed at `new.storage_key`. When another
/// call with the same idempotency key won the race, its asset is kept and these
/// bytes are deleted; when the row cannot be written, the bytes are deleted too.
/// An asset made for `task` is taken back unless the task ends completed (a
/// cancel acknowledged first won, or the task was stopped or failed after it was
/// saved), so no export leaves an asset its task does not name.
pub(crate) async fn save_asset(
    assets: &Assets,
    new: NewAsset,
    task: Option<&TaskContext>,
) -> Result<Asset, CallToolResult> {
    let storage_key = new.storage_key.clone();
    match record_asset(assets, new).await {
        Ok(outcome) => {
            let created = outcome.is_created();
            if !created {
                let _ = assets.sink.delete(&storage_key).await;
            }
            let asset = outcome.into_asset();
            announce(assets, &asset.owner).await;
            if let Some(task) = task.filter(|_| created) {
                task.undo_unless_completed(take_back(assets.clone(), asset.clone()));
            }
            Ok(asset)
        }
        Err(err) => {
            let _ = assets.sink.delete(&storage_key).await;
            Err(Refusal::StorageFailed
                .result(&format!("could not record the asset: {err}"), "Try again."))
        }
    }
}

/// Tells listeners of `owner`'s resources, on any replica, that they changed.
async fn announce(assets: &Assets, owner: &str) {
    let change = docket_catalog::CatalogChange::Assets {
        owner: owner.to_owned(),
    };
    if let Err(err) = assets.changes.publish(change).await {
        tracing::warn!(error = %err, "could not announce a change of assets");
    }
}

/// Deletes the asset of a task that did not end completed: its row, then its bytes.
async fn take_back(assets: Assets, asset: Asset) {
    match assets.store.delete(&asset.id).await {
        Ok(_) => {
            if let Err(err) = assets.sink.delete(&asset.storage_key).await {
                tracing::warn!(asset = asset.id, error = %err, "could not delete the bytes of a taken-back asset");
            }
            tracing::info!(
                asset = asset.id,
                "deleted an export's asset: its task did not end completed"
            );
            announce(&assets, &asset.owner).await;
        }
        Err(err) => {
            tracing::warn!(asset = asset.id, error = %err, "could not take back the asset of a task that did not end completed");
        }
    }
}

/// The first pause before an asset row is tried again; it doubles up to 2 s.
const FIRST_RECORD_WAIT: Duration = Duration::from_millis(100);

/// Records the row of an asset whose bytes are written. The bytes are computed and
/// kept, so a database that is briefly away costs a wait, not the export: the row
/// is tried again with a growing pause for `assets.record_patience`. An attempt
/// whose answer was lost may have committed: its retry then finds the row by id
/// and takes it as its own.
async fn record_asset(
    assets: &Assets,
    new: NewAsset,
) -> Result<docket_catalog::CreateOutcome, CatalogError> {
    let give_up_at = tokio::time::Instant::now() + assets.record_patience;
    let mut wait = FIRST_RECORD_WAIT;
    let mut retried = false;
    loop {
        match assets.store.create_or_get(new.clone()).await {
            Err(CatalogError::Unavailable(error))
                if tokio::time::Instant::now() + wait <= give_up_at =>
            {
                tracing::warn!(asset = new.id, %error, retry_in = ?wait, "could not record an asset row yet; trying again");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
                retried = true;
            }
            Err(CatalogError::Duplicate) if retried => {
                return match assets.store.get(&new.id).await? {
                    Some(asset)
                        if asset.owner == new.owner && asset.storage_key == new.storage_key =>
                    {
                        Ok(docket_catalog::CreateOutcome::Created(asset))
                    }
                    _ => Err(CatalogError::Duplicate),
                };
            }
            other => return other,
        }
    }
}

/// The annotations of a tool that reaches an open world and leaves something
/// behind (an asset, or whatever the upstream does with the call).
pub(crate) fn open_world_write() -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: Some(false),
        destructive_hint: Some(false),
        idempotent_hint: Some(false),
        open_world_hint: Some(true),
        ..ToolAnnotations::default()
    }
}

/// Starts the upload of an export's bytes at `storage_key`.
pub(crate) async fn begin_upload(
    assets: &Assets,
    storage_key: &str,
) -> Result<Box<dyn Upload>, CallToolResult> {
    assets.sink.begin(storage_key).await.map_err(|err| {
        Refusal::StorageFailed.result(&format!("could not start the upload: {err}"), "Try again.")
    })
}

/// A byte count as people write it: `512 B`, `38.4 MB`.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KB", "MB", "GB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit < UNITS.len() - 1 {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Milliseconds since `started`, for a call record.
pub(crate) fn elapsed_ms(started: std::time::Instant) -> i64 {
    i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_safe() {
        assert_eq!(file_name("Q3 orders/../etc", "csv"), "Q3_orders_.._etc.csv");
        assert_eq!(file_name("...", "json"), "export.json");
        assert_eq!(file_name("sales-2026", "jsonl"), "sales-2026.jsonl");
        assert_eq!(file_name("orders.json", "json"), "orders.json");
        assert_eq!(file_name("orders.json", "csv"), "orders.json.csv");
        assert_eq!(file_name(".json", "json"), "json.json");
        // A long name (any scripts' platform.export may give one) still makes a
        // name a file system takes.
        let long = file_name(&"é".repeat(255), "parquet");
        assert_eq!(long, format!("{}.parquet", "_".repeat(MAX_FILE_STEM)));
    }

    #[test]
    fn sizes_read_like_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(38_400_000), "38.4 MB");
    }
}
