//! [`MemorySpools`]: result spools in a mutex-guarded map.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;
use time::OffsetDateTime;

use super::lock;
use crate::CatalogError;
use crate::spools::{NewSpool, Spool, SpoolProgress, SpoolState, SpoolStore};

/// A [`SpoolStore`] in memory.
#[derive(Debug, Default)]
pub struct MemorySpools {
    spools: Mutex<BTreeMap<String, Spool>>,
}

impl MemorySpools {
    /// No spools.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl SpoolStore for MemorySpools {
    async fn create_spool(&self, spool: NewSpool, per_owner: u32) -> Result<(), CatalogError> {
        spool.validate()?;
        let mut spools = lock(&self.spools);
        if spools.contains_key(&spool.id) {
            return Err(CatalogError::Duplicate);
        }
        let held = spools
            .values()
            .filter(|held| held.owner == spool.owner && held.expires_at > spool.created_at)
            .count();
        if held >= usize::try_from(per_owner).unwrap_or(usize::MAX) {
            return Err(CatalogError::LimitReached(per_owner));
        }
        spools.insert(
            spool.id.clone(),
            Spool {
                progress: SpoolProgress {
                    chunks: 0,
                    rows: 0,
                    bytes: 0,
                    state: SpoolState::Filling,
                    error: None,
                    updated_at: spool.created_at,
                },
                id: spool.id,
                owner: spool.owner,
                tool: spool.tool,
                connection: spool.connection,
                columns: spool.columns,
                source_id: spool.source_id,
                created_at: spool.created_at,
                expires_at: spool.expires_at,
            },
        );
        Ok(())
    }

    async fn record_spool_progress(
        &self,
        id: &str,
        progress: &SpoolProgress,
    ) -> Result<bool, CatalogError> {
        Ok(match lock(&self.spools).get_mut(id) {
            Some(spool) => {
                spool.progress = progress.clone();
                true
            }
            None => false,
        })
    }

    async fn spool(&self, id: &str, now: OffsetDateTime) -> Result<Option<Spool>, CatalogError> {
        Ok(lock(&self.spools)
            .get(id)
            .filter(|spool| spool.expires_at > now)
            .cloned())
    }

    async fn delete_spool(&self, id: &str) -> Result<Option<Spool>, CatalogError> {
        Ok(lock(&self.spools).remove(id))
    }

    async fn take_expired_spools(
        &self,
        now: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<Spool>, CatalogError> {
        let mut spools = lock(&self.spools);
        let expired: Vec<String> = spools
            .values()
            .filter(|spool| spool.expires_at <= now)
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .map(|spool| spool.id.clone())
            .collect();
        Ok(expired.iter().filter_map(|id| spools.remove(id)).collect())
    }
}
