//! [`MemoryAssets`]: the asset catalog in a mutex-guarded list.

use std::sync::Mutex;

use async_trait::async_trait;

use super::{lock, now, page};
use crate::{Asset, AssetStore, CatalogError, CreateOutcome, NewAsset, PageCursor};

/// An [`AssetStore`] in memory.
#[derive(Debug, Default)]
pub struct MemoryAssets {
    assets: Mutex<Vec<Asset>>,
}

impl MemoryAssets {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl AssetStore for MemoryAssets {
    async fn create_or_get(&self, asset: NewAsset) -> Result<CreateOutcome, CatalogError> {
        asset.validate()?;
        let mut assets = lock(&self.assets);
        // The key answers first, as the tables' unique index on (owner, key)
        // does; an id taken by another asset is a duplicate whatever the key.
        if let Some(key) = &asset.idempotency_key
            && let Some(existing) = assets.iter().find(|stored| {
                stored.owner == asset.owner && stored.idempotency_key.as_ref() == Some(key)
            })
        {
            return Ok(CreateOutcome::Existing(existing.clone()));
        }
        if assets.iter().any(|stored| stored.id == asset.id) {
            return Err(CatalogError::Duplicate);
        }
        let recorded = Asset {
            id: asset.id,
            owner: asset.owner,
            name: asset.name,
            description: asset.description,
            tags: asset.tags,
            format: asset.format,
            content_type: asset.content_type,
            storage_key: asset.storage_key,
            size_bytes: asset.size_bytes,
            row_count: asset.row_count,
            connection: asset.connection,
            tool: asset.tool,
            idempotency_key: asset.idempotency_key,
            task_id: asset.task_id,
            call_id: asset.call_id,
            created_at: now(),
        };
        assets.push(recorded.clone());
        Ok(CreateOutcome::Created(recorded))
    }

    async fn find_by_idempotency_key(
        &self,
        owner: &str,
        key: &str,
    ) -> Result<Option<Asset>, CatalogError> {
        Ok(lock(&self.assets)
            .iter()
            .find(|asset| asset.owner == owner && asset.idempotency_key.as_deref() == Some(key))
            .cloned())
    }

    async fn get(&self, id: &str) -> Result<Option<Asset>, CatalogError> {
        Ok(lock(&self.assets)
            .iter()
            .find(|asset| asset.id == id)
            .cloned())
    }

    async fn list(
        &self,
        owner: Option<&str>,
        limit: u32,
        before: Option<&PageCursor>,
    ) -> Result<Vec<Asset>, CatalogError> {
        let mut listed: Vec<Asset> = lock(&self.assets)
            .iter()
            .filter(|asset| owner.is_none_or(|owner| asset.owner == owner))
            .filter(|asset| {
                before.is_none_or(|cursor| {
                    (asset.created_at, asset.id.as_str()) < (cursor.created_at, cursor.id.as_str())
                })
            })
            .cloned()
            .collect();
        listed.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        listed.truncate(page(limit));
        Ok(listed)
    }

    async fn delete(&self, id: &str) -> Result<bool, CatalogError> {
        let mut assets = lock(&self.assets);
        let before = assets.len();
        assets.retain(|asset| asset.id != id);
        Ok(assets.len() < before)
    }
}
