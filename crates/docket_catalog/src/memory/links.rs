//! [`MemoryLinks`]: link keys and shares in mutex-guarded lists.

use std::sync::Mutex;

use async_trait::async_trait;
use time::OffsetDateTime;

use super::{lock, page};
use crate::CatalogError;
use crate::links::{LinkKey, LinkStore, MAX_SHARE_PAGE, NewShare, Share};

/// What the store holds: keys oldest first, shares in the order made.
#[derive(Debug, Default)]
struct Links {
    keys: Vec<LinkKey>,
    shares: Vec<Share>,
}

/// A [`LinkStore`] in memory.
#[derive(Debug, Default)]
pub struct MemoryLinks {
    links: Mutex<Links>,
}

impl MemoryLinks {
    /// No keys and no shares.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl LinkStore for MemoryLinks {
    async fn link_keys(&self) -> Result<Vec<LinkKey>, CatalogError> {
        Ok(lock(&self.links).keys.iter().rev().cloned().collect())
    }

    async fn add_link_key(
        &self,
        key: &LinkKey,
        expected_newest: Option<&str>,
    ) -> Result<bool, CatalogError> {
        key.validate()?;
        let mut links = lock(&self.links);
        let newest = links.keys.last().map(|newest| newest.kid.as_str());
        if newest != expected_newest || links.keys.iter().any(|known| known.kid == key.kid) {
            return Ok(false);
        }
        links.keys.push(key.clone());
        Ok(true)
    }

    async fn remove_link_keys_before(
        &self,
        created_before: OffsetDateTime,
    ) -> Result<u64, CatalogError> {
        let mut links = lock(&self.links);
        let Some(newest) = links.keys.last().map(|key| key.kid.clone()) else {
            return Ok(0);
        };
        let before = links.keys.len();
        links
            .keys
            .retain(|key| key.kid == newest || key.created_at >= created_before);
        Ok(u64::try_from(before - links.keys.len()).unwrap_or(u64::MAX))
    }

    async fn create_share(
        &self,
        share: &NewShare,
        owner_limit: u32,
    ) -> Result<Share, CatalogError> {
        share.validate()?;
        let mut links = lock(&self.links);
        if links.shares.iter().any(|stored| stored.id == share.id) {
            return Err(CatalogError::Duplicate);
        }
        let held = links
            .shares
            .iter()
            .filter(|stored| stored.owner == share.owner)
            .count();
        if held >= page(owner_limit) {
            return Err(CatalogError::LimitReached(owner_limit));
        }
        let recorded = Share {
            id: share.id.clone(),
            asset_id: share.asset_id.clone(),
            owner: share.owner.clone(),
            audience: share.audience.clone(),
            expires_at: share.expires_at,
            created_at: share.created_at,
            revoked_at: None,
            open_count: 0,
            last_opened_at: None,
        };
        links.shares.push(recorded.clone());
        Ok(recorded)
    }

    async fn share(&self, id: &str) -> Result<Option<Share>, CatalogError> {
        Ok(lock(&self.links)
            .shares
            .iter()
            .find(|share| share.id == id)
            .cloned())
    }

    async fn list_shares(
        &self,
        owner: &str,
        asset_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Share>, CatalogError> {
        let mut listed: Vec<Share> = lock(&self.links)
            .shares
            .iter()
            .filter(|share| share.owner == owner)
            .filter(|share| asset_id.is_none_or(|asset| share.asset_id == asset))
            .cloned()
            .collect();
        listed.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        listed.truncate(page(limit.min(MAX_SHARE_PAGE)));
        Ok(listed)
    }

    async fn revoke_share(&self, id: &str, now: OffsetDateTime) -> Result<bool, CatalogError> {
        let mut links = lock(&self.links);
        match links
            .shares
            .iter_mut()
            .find(|share| share.id == id && share.revoked_at.is_none())
        {
            Some(share) => {
                share.revoked_at = Some(now);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    async fn record_open(
        &self,
        id: &str,
        now: OffsetDateTime,
    ) -> Result<Option<Share>, CatalogError> {
        let mut links = lock(&self.links);
        Ok(links
            .shares
            .iter_mut()
            .find(|share| share.id == id && share.is_live(now))
            .map(|share| {
                share.open_count += 1;
                share.last_opened_at = Some(now);
                share.clone()
            }))
    }

    async fn delete_ended_shares(
        &self,
        cutoff: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        let mut links = lock(&self.links);
        let mut due: Vec<String> = links
            .shares
            .iter()
            .filter(|share| {
                share.expires_at < cutoff || share.revoked_at.is_some_and(|at| at < cutoff)
            })
            .map(|share| share.id.clone())
            .collect();
        due.truncate(page(limit));
        links.shares.retain(|share| !due.contains(&share.id));
        Ok(u64::try_from(due.len()).unwrap_or(u64::MAX))
    }
}
