//! [`MemorySessions`]: protocol sessions in a mutex-guarded map.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use time::OffsetDateTime;

use super::{before, lock, now};
use crate::CatalogError;
use crate::sessions::{NewSession, Session, SessionStore};

/// A [`SessionStore`] in memory.
#[derive(Debug, Default)]
pub struct MemorySessions {
    sessions: Mutex<HashMap<String, Session>>,
    /// Answers by (session, request); `None` once taken.
    answers: Mutex<HashMap<(String, String), Option<Value>>>,
}

impl MemorySessions {
    /// No sessions.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl SessionStore for MemorySessions {
    async fn create_session(&self, session: NewSession) -> Result<(), CatalogError> {
        session.validate()?;
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(&session.id) {
            return Err(CatalogError::Duplicate);
        }
        let now = now();
        sessions.insert(
            session.id.clone(),
            Session {
                id: session.id,
                protocol_version: session.protocol_version,
                client_capabilities: session.client_capabilities,
                client_info: session.client_info,
                subject: session.subject,
                log_level: None,
                created_at: now,
                last_used_at: now,
            },
        );
        Ok(())
    }

    async fn find_session(
        &self,
        id: &str,
        idle: Duration,
    ) -> Result<Option<(Session, OffsetDateTime)>, CatalogError> {
        let now = now();
        Ok(lock(&self.sessions)
            .get(id)
            .filter(|session| session.last_used_at > before(now, idle))
            .map(|session| (session.clone(), now)))
    }

    async fn touch_session(&self, id: &str) -> Result<(), CatalogError> {
        if let Some(session) = lock(&self.sessions).get_mut(id) {
            session.last_used_at = now();
        }
        Ok(())
    }

    async fn set_session_log_level(&self, id: &str, level: &str) -> Result<(), CatalogError> {
        if let Some(session) = lock(&self.sessions).get_mut(id) {
            session.log_level = Some(level.to_owned());
        }
        Ok(())
    }

    async fn delete_session(&self, id: &str) -> Result<bool, CatalogError> {
        lock(&self.answers).retain(|(session, _), _| session != id);
        Ok(lock(&self.sessions).remove(id).is_some())
    }

    async fn put_answer(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Value,
    ) -> Result<(), CatalogError> {
        let mut answers = lock(&self.answers);
        let key = (session_id.to_owned(), request_id.to_owned());
        if answers.contains_key(&key) {
            return Err(CatalogError::Duplicate);
        }
        answers.insert(key, Some(answer));
        Ok(())
    }

    async fn take_answer(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<Option<Value>, CatalogError> {
        Ok(lock(&self.answers)
            .get_mut(&(session_id.to_owned(), request_id.to_owned()))
            .and_then(Option::take))
    }

    async fn delete_idle_sessions(&self, idle: Duration) -> Result<u64, CatalogError> {
        let cutoff = before(now(), idle);
        let mut sessions = lock(&self.sessions);
        let before_count = sessions.len();
        sessions.retain(|_, session| session.last_used_at > cutoff);
        lock(&self.answers).retain(|(session, _), _| sessions.contains_key(session));
        Ok(u64::try_from(before_count - sessions.len()).unwrap_or(u64::MAX))
    }
}
