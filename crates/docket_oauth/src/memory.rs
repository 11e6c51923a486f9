//! [`MemoryStore`]: the authorization server's state in one mutex-guarded
//! value, for a single replica and for tests. Every operation takes the lock
//! once, decides and writes, and lets it go without awaiting, so each is
//! atomic exactly as the trait's docs ask of a database backend.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use serde_json::Value;
use time::OffsetDateTime;

use crate::store::{
    ClientRecord, Fetched, OAuthStore, OnceKind, RefreshToken, Rotation, SigningKey, StoreError,
    validate_key, validate_payload,
};

/// A one-shot record and whether it has been taken.
#[derive(Debug)]
struct Once {
    /// What the caller stored.
    payload: Value,
    /// When it stops being served.
    expires_at: OffsetDateTime,
    /// Whether [`OAuthStore::take_once`] has served it fresh already.
    taken: bool,
}

/// A refresh token and whether it has been replaced.
#[derive(Debug)]
struct Token {
    /// The token as issued.
    record: RefreshToken,
    /// Whether a rotation used it up.
    used: bool,
}

/// A refresh-token family: every token issued since one login.
#[derive(Debug)]
struct Family {
    /// Whom it acts for.
    subject: String,
    /// The client it was issued to.
    client_id: String,
    /// When its first token was issued: the age the per-subject cap compares.
    created_at: OffsetDateTime,
    /// The order families were created in, to break ties of `created_at`.
    sequence: u64,
    /// When every token of it ends.
    expires_at: OffsetDateTime,
    /// Whether it was revoked (reuse, RFC 7009, the per-subject cap).
    revoked: bool,
    /// The hashes of its tokens, oldest first.
    tokens: Vec<String>,
}

impl Family {
    /// Whether a token of it may still be presented at `now`.
    fn live(&self, now: OffsetDateTime) -> bool {
        !self.revoked && self.expires_at > now
    }
}

/// Everything the store holds.
#[derive(Debug, Default)]
struct State {
    /// Registered clients by id.
    clients: HashMap<String, ClientRecord>,
    /// One-shot records by kind and key.
    once: HashMap<(OnceKind, String), Once>,
    /// Refresh tokens by hash.
    tokens: HashMap<String, Token>,
    /// Refresh-token families by id.
    families: HashMap<String, Family>,
    /// When each (subject, client) consent was given.
    consents: HashMap<(String, String), OffsetDateTime>,
    /// Signing keys in the order they were added: the last is the newest.
    keys: Vec<SigningKey>,
    /// The next family's [`Family::sequence`].
    next_sequence: u64,
}

impl State {
    /// Deletes a family and its tokens; how many tokens.
    fn drop_family(&mut self, family: &str) -> u64 {
        let Some(removed) = self.families.remove(family) else {
            return 0;
        };
        let mut count = 0;
        for hash in removed.tokens {
            if self.tokens.remove(&hash).is_some() {
                count += 1;
            }
        }
        count
    }
}

/// An [`OAuthStore`] in memory: nothing survives the process, and replicas do
/// not share it.
///
/// The caps of [`OAuthStore::put_once`] count the records that have not
/// expired by the process's clock, as the database backends do: that method is
/// given no `now`.
#[derive(Debug, Default)]
pub struct MemoryStore {
    /// All the state, behind one lock.
    state: Mutex<State>,
}

impl MemoryStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The guarded state, also after a panic elsewhere poisoned the mutex:
    /// every operation checks before it writes, so the state stays consistent.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl OAuthStore for MemoryStore {
    async fn register_client(&self, client: &ClientRecord, cap: u64) -> Result<(), StoreError> {
        client.validate()?;
        let mut state = self.lock();
        if state.clients.contains_key(&client.client_id) {
            return Err(StoreError::Conflict(format!(
                "the client id {} is taken",
                client.client_id
            )));
        }
        if state.clients.len() as u64 >= cap {
            return Err(StoreError::Full(format!(
                "at most {cap} clients may register"
            )));
        }
        state
            .clients
            .insert(client.client_id.clone(), client.clone());
        Ok(())
    }

    async fn client(&self, client_id: &str) -> Result<Option<ClientRecord>, StoreError> {
        Ok(self.lock().clients.get(client_id).cloned())
    }

    async fn touch_client(&self, client_id: &str, now: OffsetDateTime) -> Result<(), StoreError> {
        if let Some(client) = self.lock().clients.get_mut(client_id) {
            // Replicas' clocks differ a little: the latest use wins.
            if client.last_used_at.is_none_or(|used| used < now) {
                client.last_used_at = Some(now);
            }
        }
        Ok(())
    }

    async fn reap_clients(
        &self,
        unused_before: OffsetDateTime,
        idle_before: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let mut doomed: Vec<(OffsetDateTime, String)> = state
            .clients
            .values()
            .filter(|client| match client.last_used_at {
                None => client.registered_at < unused_before,
                Some(used) => used < idle_before,
            })
            .map(|client| {
                (
                    client.last_used_at.unwrap_or(client.registered_at),
                    client.client_id.clone(),
                )
            })
            .collect();
        doomed.sort();
        doomed.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        for (_, client_id) in &doomed {
            state.clients.remove(client_id);
            state.consents.retain(|(_, client), _| client != client_id);
            let families: Vec<String> = state
                .families
                .iter()
                .filter(|(_, family)| &family.client_id == client_id)
                .map(|(id, _)| id.clone())
                .collect();
            for family in families {
                state.drop_family(&family);
            }
        }
        Ok(doomed.len() as u64)
    }

    async fn put_once(
        &self,
        kind: OnceKind,
        key: &str,
        payload: &Value,
        expires_at: OffsetDateTime,
        cap: u64,
    ) -> Result<(), StoreError> {
        validate_payload(key, payload)?;
        let clock = OffsetDateTime::now_utc();
        let mut state = self.lock();
        let slot = (kind, key.to_owned());
        if state.once.contains_key(&slot) {
            return Err(StoreError::Conflict(format!(
                "a {} record with that key exists",
                kind.as_str()
            )));
        }
        let live = state
            .once
            .iter()
            .filter(|((of, _), record)| *of == kind && record.expires_at > clock)
            .count() as u64;
        if live >= cap {
            return Err(StoreError::Full(format!(
                "at most {cap} {} records may be in flight",
                kind.as_str()
            )));
        }
        state.once.insert(
            slot,
            Once {
                payload: payload.clone(),
                expires_at,
                taken: false,
            },
        );
        Ok(())
    }

    async fn take_once(
        &self,
        kind: OnceKind,
        key: &str,
        now: OffsetDateTime,
    ) -> Result<Fetched, StoreError> {
        let mut state = self.lock();
        let Some(record) = state.once.get_mut(&(kind, key.to_owned())) else {
            return Ok(Fetched::Missing);
        };
        if record.expires_at <= now {
            return Ok(Fetched::Missing);
        }
        if record.taken {
            return Ok(Fetched::Replayed(record.payload.clone()));
        }
        record.taken = true;
        Ok(Fetched::Fresh(record.payload.clone()))
    }

    async fn put_refresh(
        &self,
        token: &RefreshToken,
        families_per_subject: u32,
    ) -> Result<(), StoreError> {
        token.validate()?;
        let mut state = self.lock();
        if state.tokens.contains_key(&token.token_hash) {
            return Err(StoreError::Conflict(
                "a refresh token with that hash exists".to_owned(),
            ));
        }
        if state.families.contains_key(&token.family) {
            return Err(StoreError::Conflict(
                "a refresh-token family with that id exists".to_owned(),
            ));
        }
        let sequence = state.next_sequence;
        state.next_sequence += 1;
        state.families.insert(
            token.family.clone(),
            Family {
                subject: token.subject.clone(),
                client_id: token.client_id.clone(),
                created_at: token.issued_at,
                sequence,
                expires_at: token.expires_at,
                revoked: false,
                tokens: vec![token.token_hash.clone()],
            },
        );
        state.tokens.insert(
            token.token_hash.clone(),
            Token {
                record: token.clone(),
                used: false,
            },
        );
        // The new family is the newest and always stays, whatever the cap;
        // of the others, the newest `families_per_subject - 1` stay live.
        let keep = usize::try_from(families_per_subject.max(1) - 1).unwrap_or(usize::MAX);
        let mut others: Vec<(OffsetDateTime, u64, String)> = state
            .families
            .iter()
            .filter(|(id, family)| {
                **id != token.family
                    && family.subject == token.subject
                    && family.live(token.issued_at)
            })
            .map(|(id, family)| (family.created_at, family.sequence, id.clone()))
            .collect();
        others.sort_by(|a, b| b.cmp(a));
        for (_, _, id) in others.into_iter().skip(keep) {
            if let Some(family) = state.families.get_mut(&id) {
                family.revoked = true;
            }
        }
        Ok(())
    }

    async fn rotate_refresh(
        &self,
        presented_hash: &str,
        next_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Rotation, StoreError> {
        validate_key(next_hash)?;
        let mut state = self.lock();
        let State {
            tokens, families, ..
        } = &mut *state;
        let Some(presented) = tokens.get(presented_hash) else {
            return Ok(Rotation::Missing);
        };
        let record = presented.record.clone();
        let used = presented.used;
        let Some(family) = families.get_mut(&record.family) else {
            return Err(StoreError::Corrupt(
                "a refresh token without its family".to_owned(),
            ));
        };
        if family.expires_at <= now {
            return Ok(Rotation::Missing);
        }
        if used || family.revoked {
            family.revoked = true;
            return Ok(Rotation::Reused(record));
        }
        if tokens.contains_key(next_hash) {
            return Err(StoreError::Conflict(
                "a refresh token with that hash exists".to_owned(),
            ));
        }
        family.tokens.push(next_hash.to_owned());
        let next = RefreshToken {
            token_hash: next_hash.to_owned(),
            issued_at: now,
            ..record
        };
        if let Some(presented) = tokens.get_mut(presented_hash) {
            presented.used = true;
        }
        tokens.insert(
            next_hash.to_owned(),
            Token {
                record: next.clone(),
                used: false,
            },
        );
        Ok(Rotation::Rotated(next))
    }

    async fn revoke_refresh(&self, token_hash: &str) -> Result<Option<String>, StoreError> {
        let mut state = self.lock();
        let Some(family_id) = state
            .tokens
            .get(token_hash)
            .map(|token| token.record.family.clone())
        else {
            return Ok(None);
        };
        if let Some(family) = state.families.get_mut(&family_id) {
            family.revoked = true;
        }
        Ok(Some(family_id))
    }

    async fn revoke_family(&self, family: &str) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let State {
            families, tokens, ..
        } = &mut *state;
        let Some(found) = families.get_mut(family) else {
            return Ok(0);
        };
        if found.revoked {
            return Ok(0);
        }
        found.revoked = true;
        Ok(found
            .tokens
            .iter()
            .filter(|hash| tokens.get(*hash).is_some_and(|token| !token.used))
            .count() as u64)
    }

    async fn consented(&self, subject: &str, client_id: &str) -> Result<bool, StoreError> {
        Ok(self
            .lock()
            .consents
            .contains_key(&(subject.to_owned(), client_id.to_owned())))
    }

    async fn put_consent(
        &self,
        subject: &str,
        client_id: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        validate_key(subject)?;
        validate_key(client_id)?;
        self.lock()
            .consents
            .insert((subject.to_owned(), client_id.to_owned()), now);
        Ok(())
    }

    async fn signing_keys(&self) -> Result<Vec<SigningKey>, StoreError> {
        Ok(self.lock().keys.iter().rev().cloned().collect())
    }

    async fn add_signing_key(
        &self,
        key: &SigningKey,
        expected_newest: Option<&str>,
    ) -> Result<bool, StoreError> {
        key.validate()?;
        let mut state = self.lock();
        if state.keys.last().map(|newest| newest.kid.as_str()) != expected_newest {
            return Ok(false);
        }
        if state.keys.iter().any(|held| held.kid == key.kid) {
            return Err(StoreError::Conflict(format!(
                "a signing key with kid {} exists",
                key.kid
            )));
        }
        state.keys.push(key.clone());
        Ok(true)
    }

    async fn remove_signing_keys_before(
        &self,
        created_before: OffsetDateTime,
    ) -> Result<u64, StoreError> {
        let mut state = self.lock();
        let Some(newest) = state.keys.last().map(|key| key.kid.clone()) else {
            return Ok(0);
        };
        let before = state.keys.len();
        state
            .keys
            .retain(|key| key.kid == newest || key.created_at >= created_before);
        Ok((before - state.keys.len()) as u64)
    }

    async fn purge_expired(&self, now: OffsetDateTime, limit: u32) -> Result<u64, StoreError> {
        let mut budget = u64::from(limit);
        let mut state = self.lock();
        let ended: Vec<(OnceKind, String)> = state
            .once
            .iter()
            .filter(|(_, record)| record.expires_at <= now)
            .map(|(slot, _)| slot.clone())
            .take(usize::try_from(budget).unwrap_or(usize::MAX))
            .collect();
        for slot in &ended {
            state.once.remove(slot);
        }
        budget -= ended.len() as u64;
        let ended_families: Vec<String> = state
            .families
            .iter()
            .filter(|(_, family)| !family.live(now))
            .map(|(id, _)| id.clone())
            .collect();
        let mut tokens_removed = 0;
        for id in ended_families {
            if budget == 0 {
                break;
            }
            let State {
                families, tokens, ..
            } = &mut *state;
            let Some(family) = families.get_mut(&id) else {
                continue;
            };
            while budget > 0 {
                let Some(hash) = family.tokens.pop() else {
                    break;
                };
                if tokens.remove(&hash).is_some() {
                    budget -= 1;
                    tokens_removed += 1;
                }
            }
            if family.tokens.is_empty() {
                families.remove(&id);
            }
        }
        Ok(ended.len() as u64 + tokens_removed)
    }
}
