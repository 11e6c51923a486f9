//! The keys download links are signed with, kept in the [`LinkStore`] so every
//! replica signs and verifies with the same ones and none needs configuring.
//!
//! The first key is made (32 bytes from the OS random source) when a link is
//! first signed; the maintenance pass adds a new one when the newest is
//! [`ROTATE_EVERY`] old (compare-and-set: of replicas rotating at once, one key
//! lands) and removes a key once the key after it has been signing for longer
//! than any link may live ([`super::MAX_LINK_TTL`]), so no unexpired link loses
//! its key. Each replica caches the keys and reads the store again when the
//! cache is a minute old, or when a link names a key it does not know (at most
//! once every few seconds, so forged `kid`s cannot hammer the database).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use docket_catalog::{CatalogError, LinkKey, LinkStore};
use time::OffsetDateTime;

/// How long a key signs before the next one takes over.
pub(crate) const ROTATE_EVERY: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long the cached keys are used before the store is read again.
const CACHE_FOR: Duration = Duration::from_secs(60);

/// How often an unknown `kid` may make the store be read again.
const UNKNOWN_KID_EVERY: Duration = Duration::from_secs(5);

/// A key ready to sign and verify with.
#[derive(Clone)]
pub(crate) struct LoadedKey {
    pub(crate) kid: String,
    pub(crate) secret: Vec<u8>,
}

/// Makes a new key, created at `now`: a 32-byte secret and a 16-character id,
/// both from the OS random source.
///
/// # Errors
/// [`CatalogError::Invalid`] when the OS random source fails.
pub(crate) fn generate(now: OffsetDateTime) -> Result<LinkKey, CatalogError> {
    let mut secret = [0u8; 32];
    let mut kid = [0u8; 8];
    getrandom::fill(&mut secret)
        .and_then(|()| getrandom::fill(&mut kid))
        .map_err(|error| {
            CatalogError::Invalid(format!("no random bytes for a link key: {error}"))
        })?;
    Ok(LinkKey {
        kid: hex::encode(kid),
        secret: hex::encode(secret),
        created_at: now,
    })
}

fn load(key: &LinkKey) -> Option<LoadedKey> {
    match hex::decode(&key.secret) {
        Ok(secret) if !secret.is_empty() => Some(LoadedKey {
            kid: key.kid.clone(),
            secret,
        }),
        _ => {
            tracing::warn!(kid = %key.kid, "a link key's secret is not hex; it cannot be used");
            None
        }
    }
}

#[derive(Default)]
struct Cache {
    /// Newest first.
    keys: Vec<Arc<LoadedKey>>,
    loaded_at: Option<Instant>,
    forced_at: Option<Instant>,
}

/// One replica's view of the link keys.
pub(crate) struct KeyRing {
    store: Arc<dyn LinkStore>,
    cache: Mutex<Cache>,
}

impl KeyRing {
    pub(crate) fn new(store: Arc<dyn LinkStore>) -> Self {
        Self {
            store,
            cache: Mutex::new(Cache::default()),
        }
    }

    fn cached(&self) -> (Vec<Arc<LoadedKey>>, bool) {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let fresh = cache
            .loaded_at
            .is_some_and(|loaded| loaded.elapsed() < CACHE_FOR);
        (cache.keys.clone(), fresh)
    }

    async fn reload(&self) -> Result<Vec<Arc<LoadedKey>>, CatalogError> {
        let keys: Vec<Arc<LoadedKey>> = self
            .store
            .link_keys()
            .await?
            .iter()
            .filter_map(load)
            .map(Arc::new)
            .collect();
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.keys.clone_from(&keys);
        cache.loaded_at = Some(Instant::now());
        Ok(keys)
    }

    async fn keys(&self) -> Result<Vec<Arc<LoadedKey>>, CatalogError> {
        match self.cached() {
            (keys, true) => Ok(keys),
            (_, false) => self.reload().await,
        }
    }

    /// The key to sign with: the newest, made now if there is none yet.
    pub(crate) async fn signing_key(&self) -> Result<Arc<LoadedKey>, CatalogError> {
        if let Some(newest) = self.keys().await?.into_iter().next() {
            return Ok(newest);
        }
        // Another replica may add its own first key at the same moment; one
        // lands, and both sign with it after the read below.
        self.store
            .add_link_key(&generate(OffsetDateTime::now_utc())?, None)
            .await?;
        self.reload()
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| CatalogError::Unavailable("no link key could be stored".to_owned()))
    }

    /// The key `kid` names, reading the store again (rate-limited) when it is
    /// not cached.
    pub(crate) async fn find(&self, kid: &str) -> Result<Option<Arc<LoadedKey>>, CatalogError> {
        let keys = self.keys().await?;
        if let Some(key) = keys.iter().find(|key| key.kid == kid) {
            return Ok(Some(Arc::clone(key)));
        }
        let may_force = {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            let allowed = cache
                .forced_at
                .is_none_or(|forced| forced.elapsed() >= UNKNOWN_KID_EVERY);
            if allowed {
                cache.forced_at = Some(Instant::now());
            }
            allowed
        };
        if !may_force {
            return Ok(None);
        }
        Ok(self.reload().await?.into_iter().find(|key| key.kid == kid))
    }

    /// Adds a key when there is none or the newest is [`ROTATE_EVERY`] old
    /// (compare-and-set), and removes the keys whose successor has signed for
    /// longer than `max_link_ttl`, so that no unexpired link loses its key.
    /// Whether a key was added, and how many were removed.
    pub(crate) async fn rotate(
        &self,
        now: OffsetDateTime,
        max_link_ttl: Duration,
    ) -> Result<(bool, u64), CatalogError> {
        let stored = self.store.link_keys().await?;
        let newest = stored.first();
        let due = newest.is_none_or(|key| key.created_at + ROTATE_EVERY <= now);
        let added = if due {
            self.store
                .add_link_key(&generate(now)?, newest.map(|key| key.kid.as_str()))
                .await?
        } else {
            false
        };
        // Keys are newest first: the first key whose successor (the key before
        // it in the list) took over more than `max_link_ttl` ago signs nothing
        // that is still valid, and neither does any older one.
        let removed = match stored
            .windows(2)
            .find(|pair| pair[0].created_at + max_link_ttl < now)
        {
            Some(pair) => {
                self.store
                    .remove_link_keys_before(pair[0].created_at)
                    .await?
            }
            None => 0,
        };
        if added || removed > 0 {
            self.reload().await?;
        }
        Ok((added, removed))
    }
}

#[cfg(test)]
mod tests {
    use docket_catalog::memory::MemoryLinks;

    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 3600);

    #[tokio::test]
    async fn the_first_key_is_made_once_and_shared() {
        let store = Arc::new(MemoryLinks::new());
        let one = KeyRing::new(Arc::clone(&store) as Arc<dyn LinkStore>);
        let two = KeyRing::new(Arc::clone(&store) as Arc<dyn LinkStore>);
        let first = one.signing_key().await.expect("key");
        assert_eq!(first.secret.len(), 32);
        // Another replica signs with the same key, and verifies the first's links.
        assert_eq!(two.signing_key().await.expect("key").kid, first.kid);
        assert!(two.find(&first.kid).await.expect("find").is_some());
        assert!(two.find("nope").await.expect("find").is_none());
    }

    #[tokio::test]
    async fn rotation_keeps_old_keys_until_their_links_expired() {
        let store = Arc::new(MemoryLinks::new());
        let ring = KeyRing::new(Arc::clone(&store) as Arc<dyn LinkStore>);
        let start = OffsetDateTime::now_utc() - 30 * DAY;
        assert_eq!(ring.rotate(start, DAY).await.expect("rotate"), (true, 0));
        let first = store.link_keys().await.expect("keys")[0].kid.clone();
        // Not due yet.
        assert_eq!(
            ring.rotate(start + DAY, DAY).await.expect("rotate"),
            (false, 0)
        );
        // Due: a second key; the first still verifies its links.
        let second_at = start + ROTATE_EVERY;
        assert_eq!(
            ring.rotate(second_at, DAY).await.expect("rotate"),
            (true, 0)
        );
        assert_eq!(store.link_keys().await.expect("keys").len(), 2);
        // Links the first signed live at most a day after the second took over.
        assert_eq!(
            ring.rotate(second_at + DAY / 2, DAY).await.expect("rotate"),
            (false, 0)
        );
        assert_eq!(
            ring.rotate(second_at + DAY * 2, DAY).await.expect("rotate"),
            (false, 1)
        );
        let kids: Vec<String> = store
            .link_keys()
            .await
            .expect("keys")
            .into_iter()
            .map(|key| key.kid)
            .collect();
        assert_eq!(kids.len(), 1);
        assert_ne!(kids[0], first);
        assert!(ring.signing_key().await.expect("key").kid == kids[0]);
    }
}
