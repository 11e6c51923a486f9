//! The per-process cache of checkpoints: for each text asset seen, where some of its
//! rows start (row index → byte offset), so a page far into an asset is read from the
//! nearest checkpoint before it instead of from the first byte.
//!
//! Committed assets never change, so a checkpoint stays right for as long as its
//! asset exists; the object's size is kept beside them all the same, and an asset
//! whose size differs (a key reused after a delete) loses its checkpoints.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// The most assets whose checkpoints are kept; past it, the least recently used one
/// is forgotten.
pub(super) const MAX_ASSETS: usize = 128;

/// The most checkpoints kept for one asset (with one every 1000 rows, enough for
/// 100 million rows); later rows are reached from the last one.
pub(super) const MAX_CHECKPOINTS_PER_ASSET: usize = 100_000;

/// An asset as the cache knows it: its format (the rows of one object differ by how
/// it is read) and its object key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct AssetKey {
    pub(super) format: &'static str,
    pub(super) key: String,
}

/// Where a row starts: a scan that starts reading at `offset` finds row `row` first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Checkpoint {
    pub(super) row: u64,
    pub(super) offset: u64,
}

/// What the cache knows of an asset before a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Known {
    /// The nearest checkpoint at or before the wanted row, if any.
    pub(super) checkpoint: Option<Checkpoint>,
    /// The object's size when the checkpoints were found.
    pub(super) object_size: u64,
}

/// The checkpoints of up to [`MAX_ASSETS`] assets, shared by every page request.
#[derive(Debug, Default)]
pub(super) struct Checkpoints {
    assets: Mutex<Assets>,
}

#[derive(Debug, Default)]
struct Assets {
    by_key: HashMap<AssetKey, AssetCheckpoints>,
    /// Bumped on every use, to find the least recently used asset.
    clock: u64,
}

#[derive(Debug)]
struct AssetCheckpoints {
    object_size: u64,
    /// Row index → byte offset of the row's first byte.
    offsets: BTreeMap<u64, u64>,
    last_used: u64,
}

impl Checkpoints {
    /// What is known of `asset`: its object's size and the nearest checkpoint at or
    /// before `row`.
    pub(super) fn nearest(&self, asset: &AssetKey, row: u64) -> Option<Known> {
        let mut assets = self.lock();
        assets.clock += 1;
        let now = assets.clock;
        let entry = assets.by_key.get_mut(asset)?;
        entry.last_used = now;
        let checkpoint = entry
            .offsets
            .range(..=row)
            .next_back()
            .map(|(&row, &offset)| Checkpoint { row, offset });
        Some(Known {
            checkpoint,
            object_size: entry.object_size,
        })
    }

    /// Forgets everything about `asset` (its object is not the one it was).
    pub(super) fn forget(&self, asset: &AssetKey) {
        self.lock().by_key.remove(asset);
    }

    /// Keeps `found` for `asset`, whose object is `object_size` bytes long.
    pub(super) fn remember(&self, asset: &AssetKey, object_size: u64, found: &[Checkpoint]) {
        if found.is_empty() {
            return;
        }
        let mut assets = self.lock();
        assets.clock += 1;
        let now = assets.clock;
        if !assets.by_key.contains_key(asset) && assets.by_key.len() >= MAX_ASSETS {
            let oldest = assets
                .by_key
                .iter()
                .min_by_key(|(_, entry)| entry.last_used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                assets.by_key.remove(&oldest);
            }
        }
        let entry = assets
            .by_key
            .entry(asset.clone())
            .or_insert_with(|| AssetCheckpoints {
                object_size,
                offsets: BTreeMap::new(),
                last_used: now,
            });
        if entry.object_size != object_size {
            // Found in another object under the same key: the newer ones win.
            entry.object_size = object_size;
            entry.offsets.clear();
        }
        entry.last_used = now;
        for checkpoint in found {
            if entry.offsets.len() >= MAX_CHECKPOINTS_PER_ASSET {
                break;
            }
            entry.offsets.insert(checkpoint.row, checkpoint.offset);
        }
    }

    fn lock(&self) -> MutexGuard<'_, Assets> {
        // The map is consistent between statements, so a panic elsewhere while the
        // lock was held leaves nothing half-done that matters.
        self.assets.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::{AssetKey, Checkpoint, Checkpoints, MAX_ASSETS};

    fn asset(key: &str) -> AssetKey {
        AssetKey {
            format: "csv",
            key: key.to_owned(),
        }
    }

    #[test]
    fn the_nearest_checkpoint_at_or_before_a_row_is_found() {
        let checkpoints = Checkpoints::default();
        assert_eq!(checkpoints.nearest(&asset("a"), 5), None);
        let found = [
            Checkpoint {
                row: 10,
                offset: 100,
            },
            Checkpoint {
                row: 20,
                offset: 200,
            },
        ];
        checkpoints.remember(&asset("a"), 1000, &found);
        let known = |row| checkpoints.nearest(&asset("a"), row).expect("known");
        assert_eq!(known(5).checkpoint, None);
        assert_eq!(known(10).checkpoint, Some(found[0]));
        assert_eq!(known(19).checkpoint, Some(found[0]));
        assert_eq!(known(25).checkpoint, Some(found[1]));
        assert_eq!(known(25).object_size, 1000);

        // Another size under the same key replaces them.
        checkpoints.remember(&asset("a"), 999, &[Checkpoint { row: 30, offset: 9 }]);
        assert_eq!(known(25).checkpoint, None);
        assert_eq!(known(25).object_size, 999);
        checkpoints.forget(&asset("a"));
        assert_eq!(checkpoints.nearest(&asset("a"), 25), None);
    }

    #[test]
    fn the_least_recently_used_asset_goes_first() {
        let checkpoints = Checkpoints::default();
        let one = [Checkpoint { row: 1, offset: 1 }];
        for index in 0..MAX_ASSETS {
            checkpoints.remember(&asset(&index.to_string()), 10, &one);
        }
        // Asset 0 is used again, so asset 1 is now the oldest.
        assert!(checkpoints.nearest(&asset("0"), 1).is_some());
        checkpoints.remember(&asset("new"), 10, &one);
        assert!(checkpoints.nearest(&asset("0"), 1).is_some());
        assert!(checkpoints.nearest(&asset("1"), 1).is_none());
        assert!(checkpoints.nearest(&asset("new"), 1).is_some());
    }
}
