//! Check 6: every completed export's asset row and bytes exist (an `api_export`'s bytes
//! are exactly what the upstream sent), and nothing is stray: no asset row that no
//! completed export task names, no file in the shared asset folder without a row, and
//! no upload's temporary file left behind.
//!
//! A kill -9 can rightly leave three things, none of which any sweeper collects: a
//! temporary `.part` file of an upload the killed process was writing, a file whose
//! row the killed process had not written yet, and a row whose task the killed process
//! had not ended yet. Each is excused only when a replica was killed between the file's
//! last write (or the row's) and the time its next step could still have been tried
//! (`tasks.stale_after`), and counted apart. A replica stopped with SIGTERM excuses
//! nothing: it finishes or cleans up what it started.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::cluster::is_part_file;
use crate::facts::{Facts, is_tool_error, structured};
use crate::plan::Work;
use crate::timing;
use crate::upstream;
use crate::verdict::Verdict;

/// How long before a kill a `.part` file may have been written last and still be the
/// killed process's (an export writes every page, a page comes every 150 ms).
const PART_QUIET: f64 = 30.0;

pub(crate) fn assets_kept(facts: &Facts<'_>) -> Verdict {
    let mut verdict = Verdict::new(
        6,
        "every completed export's asset row and bytes exist, nothing stray",
    );
    let rows: HashMap<&str, &crate::database::AssetRow> = facts
        .db
        .assets
        .iter()
        .map(|row| (row.id.as_str(), row))
        .collect();
    let (mut exports, mut completed, mut tool_errors) = (0, 0, 0);
    let mut error_texts: Vec<String> = Vec::new();
    for task in &facts.journal.tasks {
        if !matches!(task.work, Work::TrinoExport { .. } | Work::ApiExport { .. }) {
            continue;
        }
        exports += 1;
        let Some(row) = facts.task_row(&task.id) else {
            continue;
        };
        let Some(result) = row.result.as_ref().filter(|_| row.status == "completed") else {
            continue;
        };
        if is_tool_error(result) {
            tool_errors += 1;
            let text = result["content"][0]["text"].as_str().unwrap_or("");
            let said: String = text.chars().take(100).collect();
            if !error_texts.contains(&said) {
                error_texts.push(said);
            }
            continue;
        }
        completed += 1;
        let id = Some(task.id.as_str());
        let content = structured(result);
        let Some(asset_id) = content["asset_id"].as_str() else {
            verdict.fail(id, format!("completed without an asset id: {content}"));
            continue;
        };
        let Some(asset) = rows.get(asset_id) else {
            verdict.fail(
                id,
                format!("completed with asset {asset_id}, which has no row"),
            );
            continue;
        };
        let path = facts.assets_dir.join(&asset.storage_key);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(error) => {
                verdict.fail(
                    id,
                    format!(
                        "asset {asset_id}'s bytes at {} cannot be read: {error}",
                        path.display()
                    ),
                );
                continue;
            }
        };
        let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        if size != asset.size_bytes || content["size_bytes"].as_i64() != Some(size) {
            verdict.fail(
                id,
                format!(
                    "asset {asset_id} holds {size} bytes, its row says {} and the result {}",
                    asset.size_bytes, content["size_bytes"]
                ),
            );
            continue;
        }
        if let Work::ApiExport { name, chunks, .. } = &task.work
            && bytes != upstream::body(name, *chunks)
        {
            verdict.fail(
                id,
                format!("asset {asset_id}'s bytes are not what the upstream sent"),
            );
        }
    }

    let stale_after = timing::secs(timing::STALE_AFTER);
    // Every asset row must belong to a completed export task (acknowledged or not).
    let named: HashSet<&str> = facts
        .db
        .tasks
        .iter()
        .filter(|row| row.status == "completed")
        .filter_map(|row| structured(row.result.as_ref()?)["asset_id"].as_str())
        .collect();
    let mut rows_excused = 0;
    for asset in &facts.db.assets {
        if !named.contains(asset.id.as_str()) {
            // Written, and then its replica killed before the ending could be.
            let created = facts.clock.at_unix(asset.created_at);
            if facts.any_kill_in(created - 0.5, created + stale_after) {
                rows_excused += 1;
                continue;
            }
            let ending = asset
                .task_id
                .as_deref()
                .and_then(|id| facts.task_row(id))
                .map_or_else(
                    || "its task is unknown".to_owned(),
                    |row| format!("its task ended {}", row.status),
                );
            verdict.fail(
                asset.task_id.as_deref(),
                format!(
                    "asset row {} ({}, {}, written at {created:.2} s) belongs to no completed \
                     export: {ending}",
                    asset.id, asset.tool, asset.name
                ),
            );
        }
    }

    let keys: HashSet<&str> = facts
        .db
        .assets
        .iter()
        .map(|row| row.storage_key.as_str())
        .collect();
    let (mut orphans_excused, mut parts_excused) = (0, 0);
    for file in files_under(&facts.assets_dir) {
        let relative = file
            .strip_prefix(&facts.assets_dir)
            .map(|path| path.to_string_lossy().into_owned())
            .unwrap_or_default();
        let written = modified(facts, &file);
        if is_part_file(&file) {
            if written.is_some_and(|at| facts.any_kill_in(at - 0.5, at + PART_QUIET)) {
                parts_excused += 1;
            } else {
                verdict.fail(
                    None,
                    format!("an upload's temporary file was left behind: {relative}"),
                );
            }
        } else if !keys.contains(relative.as_str()) {
            if written.is_some_and(|at| facts.any_kill_in(at - 0.5, at + stale_after)) {
                orphans_excused += 1;
            } else {
                verdict.fail(None, format!("a file without an asset row: {relative}"));
            }
        }
    }
    verdict.counts = format!(
        "{exports} export tasks: {completed} completed with an asset, {tool_errors} ended as \
         tool errors; {} asset rows; excused, as left by a kill -9: {rows_excused} rows of \
         unfinished tasks, {parts_excused} temporary files, {orphans_excused} files without a \
         row",
        facts.db.assets.len()
    );
    if !error_texts.is_empty() {
        verdict.counts += &format!(" (tool errors: {})", error_texts.join(" | "));
    }
    verdict
}

/// When `file` was last written, on the soak's clock.
fn modified(facts: &Facts<'_>, file: &Path) -> Option<f64> {
    let modified = std::fs::metadata(file).ok()?.modified().ok()?;
    let unix = modified.duration_since(UNIX_EPOCH).ok()?.as_secs_f64();
    Some(facts.clock.at_unix(unix))
}

/// Every file under `root`.
fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}
