//! Links to assets that open in a browser with no header: an owner's signed
//! download link (`codec`: HMAC-SHA-256 over the asset id, the expiry and the
//! key id, under a key kept in the database, `keys`) and the addresses of the
//! shares `share_asset` makes. [`Links`] signs and checks them, and limits how
//! often one client address opens them; serving them is `downloads`', who is
//! opening is `opener`'s.

pub(crate) mod codec;
mod keys;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use docket_catalog::{CatalogError, LinkStore};
use time::OffsetDateTime;

use crate::config::{SharesConfig, StorageConfig};
use crate::rate_limit::{RateLimitConfig, RateLimited, RateLimiter};
use codec::{LinkError, LinkQuery};
use keys::KeyRing;

/// How many ended shares one retention batch deletes.
const SHARE_BATCH: u32 = 500;

/// The asset links of one app: the key ring, the share store and the per-address
/// limit on opens.
pub(crate) struct Links {
    /// Shares and keys.
    pub(crate) store: Arc<dyn LinkStore>,
    keys: KeyRing,
    /// The server's public base URL, which every link starts with.
    base_url: String,
    /// How long a signed download link opens (`storage.link_ttl`).
    ttl: Duration,
    /// `storage.shares`.
    pub(crate) shares: SharesConfig,
    /// Opens per client address.
    opens: RateLimiter,
}

impl Links {
    /// Links over `store`, as `storage` configures them, starting with `base_url`.
    pub(crate) fn new(
        store: Arc<dyn LinkStore>,
        storage: &StorageConfig,
        base_url: String,
    ) -> Self {
        Self {
            keys: KeyRing::new(Arc::clone(&store)),
            store,
            base_url,
            ttl: storage.link_ttl,
            shares: storage.shares.clone(),
            opens: RateLimiter::new(&RateLimitConfig {
                requests_per_minute: storage.shares.opens_per_minute,
                burst: storage.shares.opens_burst,
            }),
        }
    }

    /// The address that opens the asset with the owner's bearer token.
    pub(crate) fn plain_url(&self, asset_id: &str) -> String {
        format!("{}/assets/{asset_id}/content", self.base_url)
    }

    /// A signed link to the asset that opens without a header until
    /// `storage.link_ttl` from now. When no key can be had (the database is
    /// away), the plain address, which still opens with the owner's token.
    pub(crate) async fn download_url(&self, asset_id: &str) -> String {
        match self.keys.signing_key().await {
            Ok(key) => {
                let ttl = i64::try_from(self.ttl.as_secs()).unwrap_or(i64::MAX);
                let expires = unix_now().saturating_add(ttl);
                format!(
                    "{}?{}",
                    self.plain_url(asset_id),
                    codec::sign(&key.secret, &key.kid, asset_id, expires)
                )
            }
            Err(error) => {
                tracing::warn!(%error, "no link key; the download URL needs the owner's token");
                self.plain_url(asset_id)
            }
        }
    }

    /// The address of a share.
    pub(crate) fn share_url(&self, share_id: &str) -> String {
        format!("{}/shares/{share_id}", self.base_url)
    }

    /// Checks a signed link to `asset_id` with `query` at `now` (Unix seconds).
    ///
    /// # Errors
    /// `Ok(Err(_))` for a link that does not open; `Err` when the keys cannot be read.
    pub(crate) async fn verify(
        &self,
        asset_id: &str,
        query: &str,
        now: i64,
    ) -> Result<Result<LinkQuery, LinkError>, CatalogError> {
        // Nothing reaches the store for text that is no link at all.
        if !codec::is_asset_id(asset_id) {
            return Ok(Err(LinkError::BadId));
        }
        let kid = match codec::parse_query(query) {
            Ok(link) => link.kid,
            Err(error) => return Ok(Err(error)),
        };
        let secret = self.keys.find(&kid).await?.map(|key| key.secret.clone());
        Ok(codec::verify(asset_id, query, now, |_| secret))
    }

    /// Takes one open from `peer`'s allowance.
    ///
    /// # Errors
    /// [`RateLimited`] when the address opened too much.
    pub(crate) fn spend_open(&self, peer: Option<IpAddr>) -> Result<(), RateLimited> {
        // An embedder's service that passes no peer address shares one allowance.
        let key = peer.map_or_else(|| "unknown".to_owned(), |peer| peer.to_string());
        self.opens.check(&key, Instant::now())
    }

    /// The maintenance pass: rotates the keys and deletes ended shares; the
    /// number of shares deleted.
    pub(crate) async fn maintain(&self) -> u64 {
        let now = OffsetDateTime::now_utc();
        match self.keys.rotate(now, crate::config::MAX_LINK_TTL).await {
            Ok((added, removed)) if added || removed > 0 => {
                tracing::info!(added, removed, "rotated the link keys");
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "could not rotate the link keys"),
        }
        let mut deleted = 0;
        loop {
            match self.store.delete_ended_shares(now, SHARE_BATCH).await {
                Ok(batch) => {
                    deleted += batch;
                    if batch < u64::from(SHARE_BATCH) {
                        return deleted;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "could not delete ended shares");
                    return deleted;
                }
            }
        }
    }
}

/// The time now in Unix seconds.
pub(crate) fn unix_now() -> i64 {
    i64::try_from(crate::request_state::unix_now()).unwrap_or(i64::MAX)
}
