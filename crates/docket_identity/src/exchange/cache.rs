//! Exchanged tokens, per caller, until shortly before they expire.
//!
//! The key is the SHA-256 of the caller's token, so the cache never holds a
//! caller's token itself. Each key has a slot with an async lock that is held while
//! its exchange runs: concurrent calls by one caller share one exchange, and calls by
//! other callers do not wait for it. At most `capacity` slots are kept; when a new
//! caller would pass that, slots whose token expired (or that hold none) go first,
//! then the oldest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use sha2::{Digest, Sha256};
use tokio::time::Instant;

use crate::secret::Secret;

/// The most callers whose exchanged tokens are kept, unless told otherwise.
pub const DEFAULT_CAPACITY: usize = 10_000;

/// A digest of a caller's token.
pub(crate) type Key = [u8; 32];

/// The cache key for `subject_token`.
pub(crate) fn key(subject_token: &str) -> Key {
    Sha256::digest(subject_token.as_bytes()).into()
}

/// An exchanged token and when it is due.
#[derive(Clone, Debug)]
pub(crate) struct Cached {
    pub(crate) token: Secret,
    /// From then on it is exchanged anew.
    pub(crate) refresh_at: Instant,
    /// When the identity provider said it expires.
    pub(crate) expires_at: Instant,
}

impl Cached {
    /// Whether it may still be used at `now`.
    pub(crate) fn is_fresh(&self, now: Instant) -> bool {
        now < self.refresh_at
    }
}

/// One caller's slot: its token, under the lock its exchange holds.
#[derive(Debug)]
pub(crate) struct Slot {
    created: Instant,
    pub(crate) state: tokio::sync::Mutex<Option<Cached>>,
}

/// The per-caller cache of one token exchange.
#[derive(Debug)]
pub(crate) struct Cache {
    slots: Mutex<HashMap<Key, Arc<Slot>>>,
    capacity: usize,
}

impl Cache {
    /// An empty cache for at most `capacity` callers (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            slots: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
        }
    }

    /// The slot for `key`, made (and room made for it) if there is none.
    pub(crate) fn slot(&self, key: Key) -> Arc<Slot> {
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(slot) = slots.get(&key) {
            return Arc::clone(slot);
        }
        let now = Instant::now();
        if slots.len() >= self.capacity {
            evict(&mut slots, self.capacity, now);
        }
        let slot = Arc::new(Slot {
            created: now,
            state: tokio::sync::Mutex::new(None),
        });
        slots.insert(key, Arc::clone(&slot));
        slot
    }

    /// Whether `key` has a slot.
    #[cfg(test)]
    fn contains(&self, key: &Key) -> bool {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(key)
    }

    /// How many callers have a slot.
    pub(crate) fn len(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

/// Makes room for one more slot: drops the slots whose token expired or that hold
/// none (a slot whose exchange is running is kept), then, if that was not enough, the
/// oldest.
fn evict(slots: &mut HashMap<Key, Arc<Slot>>, capacity: usize, now: Instant) {
    slots.retain(|_, slot| match slot.state.try_lock() {
        Ok(state) => state.as_ref().is_some_and(|cached| cached.expires_at > now),
        Err(_) => true,
    });
    while slots.len() >= capacity {
        let oldest = slots
            .iter()
            .min_by_key(|(_, slot)| slot.created)
            .map(|(key, _)| *key);
        match oldest {
            Some(key) => slots.remove(&key),
            None => break,
        };
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    async fn fill(cache: &Cache, name: &str, lifetime: Duration) {
        let slot = cache.slot(key(name));
        let now = Instant::now();
        *slot.state.lock().await = Some(Cached {
            token: Secret::new(format!("for-{name}")),
            refresh_at: now + lifetime,
            expires_at: now + lifetime,
        });
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_cache_drops_expired_tokens_then_the_oldest() {
        let cache = Cache::new(3);
        fill(&cache, "a", Duration::from_secs(100)).await;
        tokio::time::advance(Duration::from_secs(1)).await;
        fill(&cache, "b", Duration::from_secs(5)).await;
        tokio::time::advance(Duration::from_secs(1)).await;
        fill(&cache, "c", Duration::from_secs(100)).await;
        assert_eq!(cache.len(), 3);
        tokio::time::advance(Duration::from_secs(10)).await;
        // b expired, so it makes room; a and c stay.
        fill(&cache, "d", Duration::from_secs(100)).await;
        assert_eq!(cache.len(), 3);
        assert!(cache.contains(&key("a")) && cache.contains(&key("c")));
        assert!(!cache.contains(&key("b")));
        // Nothing expired now: a, the oldest, goes.
        fill(&cache, "e", Duration::from_secs(100)).await;
        assert_eq!(cache.len(), 3);
        assert!(!cache.contains(&key("a")));
        assert!(cache.contains(&key("c")) && cache.contains(&key("d")));
    }

    #[test]
    fn keys_are_digests_not_tokens() {
        assert_ne!(key("a"), key("b"));
        assert_eq!(key("a"), key("a"));
        assert_eq!(key("abc").len(), 32);
    }
}
