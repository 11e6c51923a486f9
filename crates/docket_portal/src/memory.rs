//! [`MemoryStore`]: the portal's state in this process, for tests and for a
//! single replica without a database. It follows the same rules as the
//! database backends (the behaviour suite in [`crate::testing`] runs on it).

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::store::{PendingLogin, PortalSession, PortalStore, StoreError, Swept};

/// The portal's state in memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    logins: HashMap<String, PendingLogin>,
    sessions: HashMap<String, PortalSession>,
}

impl MemoryStore {
    /// An empty store.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> Result<std::sync::MutexGuard<'_, State>, StoreError> {
        self.state
            .lock()
            .map_err(|_| StoreError::Unavailable("the memory store's lock is poisoned".to_owned()))
    }
}

#[async_trait]
impl PortalStore for MemoryStore {
    async fn begin_login(&self, login: &PendingLogin, cap: u64) -> Result<(), StoreError> {
        login.validate()?;
        let mut state = self.state()?;
        if state.logins.contains_key(&login.state_hash) {
            return Err(StoreError::Conflict(
                "the login's state is taken".to_owned(),
            ));
        }
        if u64::try_from(state.logins.len()).unwrap_or(u64::MAX) >= cap {
            return Err(StoreError::Full(format!(
                "at most {cap} logins may be in flight"
            )));
        }
        state.logins.insert(login.state_hash.clone(), login.clone());
        Ok(())
    }

    async fn take_login(
        &self,
        state_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Option<PendingLogin>, StoreError> {
        let mut state = self.state()?;
        Ok(state
            .logins
            .remove(state_hash)
            .filter(|login| login.expires_at > now))
    }

    async fn create_session(
        &self,
        session: &PortalSession,
        per_person_cap: u32,
    ) -> Result<(), StoreError> {
        session.validate()?;
        let mut state = self.state()?;
        if state.sessions.contains_key(&session.id_hash) {
            return Err(StoreError::Conflict("the session id is taken".to_owned()));
        }
        state
            .sessions
            .insert(session.id_hash.clone(), session.clone());
        let mut theirs: Vec<(OffsetDateTime, String)> = state
            .sessions
            .values()
            .filter(|held| held.subject == session.subject)
            .map(|held| (held.created_at, held.id_hash.clone()))
            .collect();
        let cap = usize::try_from(per_person_cap.max(1)).unwrap_or(usize::MAX);
        if theirs.len() > cap {
            // Oldest first; the id breaks ties the way the databases do.
            theirs.sort();
            let excess = theirs.len() - cap;
            for (_, id_hash) in theirs.into_iter().take(excess) {
                state.sessions.remove(&id_hash);
            }
        }
        Ok(())
    }

    async fn session(
        &self,
        id_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Option<PortalSession>, StoreError> {
        let state = self.state()?;
        Ok(state
            .sessions
            .get(id_hash)
            .filter(|session| session.expires_at > now)
            .cloned())
    }

    async fn end_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        Ok(self.state()?.sessions.remove(id_hash).is_some())
    }

    async fn sweep(&self, now: OffsetDateTime, limit: u32) -> Result<Swept, StoreError> {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut state = self.state()?;
        let sessions: Vec<String> = state
            .sessions
            .values()
            .filter(|session| session.expires_at <= now)
            .map(|session| session.id_hash.clone())
            .take(limit)
            .collect();
        for id_hash in &sessions {
            state.sessions.remove(id_hash);
        }
        let logins: Vec<String> = state
            .logins
            .values()
            .filter(|login| login.expires_at <= now)
            .map(|login| login.state_hash.clone())
            .take(limit)
            .collect();
        for state_hash in &logins {
            state.logins.remove(state_hash);
        }
        Ok(Swept {
            sessions: u64::try_from(sessions.len()).unwrap_or(u64::MAX),
            logins: u64::try_from(logins.len()).unwrap_or(u64::MAX),
        })
    }
}
