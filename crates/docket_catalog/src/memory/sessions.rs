//! [`MemorySessions`]: protocol sessions in a mutex-guarded map.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use time::OffsetDateTime;

use super::{before, lock, now};
use crate::CatalogError;
use crate::sessions::{
    AnswerListener, AnswerSignal, EndedSession, NewSession, Session, SessionStore,
};

/// A [`SessionStore`] in memory; an answer signals the listener in this process.
#[derive(Default)]
pub struct MemorySessions {
    sessions: Mutex<HashMap<String, Session>>,
    /// Questions by (session, request): `None` while unanswered.
    questions: Mutex<HashMap<(String, String), Option<Value>>>,
    /// Used answers, with when their mark may go.
    used_answers: Mutex<HashMap<String, OffsetDateTime>>,
    listener: Mutex<Option<AnswerListener>>,
}

impl MemorySessions {
    /// No sessions.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl SessionStore for MemorySessions {
    async fn create_session(
        &self,
        session: NewSession,
        per_subject: u32,
    ) -> Result<(), CatalogError> {
        session.validate()?;
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(&session.id) {
            return Err(CatalogError::Duplicate);
        }
        let mut others: Vec<(OffsetDateTime, String)> = sessions
            .values()
            .filter(|other| other.subject == session.subject)
            .map(|other| (other.last_used_at, other.id.clone()))
            .collect();
        others.sort_by(|a, b| b.cmp(a));
        let keep = usize::try_from(per_subject.max(1) - 1).unwrap_or(usize::MAX);
        for (_, id) in others.into_iter().skip(keep) {
            sessions.remove(&id);
            lock(&self.questions).retain(|(session, _), _| *session != id);
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
        lock(&self.questions).retain(|(session, _), _| session != id);
        Ok(lock(&self.sessions).remove(id).is_some())
    }

    async fn ask(&self, session_id: &str, request_id: &str) -> Result<bool, CatalogError> {
        if !lock(&self.sessions).contains_key(session_id) {
            return Ok(false);
        }
        let mut questions = lock(&self.questions);
        let key = (session_id.to_owned(), request_id.to_owned());
        if questions.contains_key(&key) {
            return Err(CatalogError::Duplicate);
        }
        questions.insert(key, None);
        Ok(true)
    }

    async fn put_answer(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Value,
    ) -> Result<bool, CatalogError> {
        let key = (session_id.to_owned(), request_id.to_owned());
        let kept = match lock(&self.questions).get_mut(&key) {
            Some(slot @ None) => {
                *slot = Some(answer);
                true
            }
            _ => false,
        };
        let listener = lock(&self.listener).clone();
        if let (true, Some(listener)) = (kept, listener) {
            listener(AnswerSignal {
                session_id: key.0,
                request_id: key.1,
            });
        }
        Ok(kept)
    }

    async fn take_answer(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<Option<Value>, CatalogError> {
        let key = (session_id.to_owned(), request_id.to_owned());
        let mut questions = lock(&self.questions);
        match questions.get(&key) {
            Some(Some(_)) => Ok(questions.remove(&key).flatten()),
            _ => Ok(None),
        }
    }

    async fn forget_question(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<(), CatalogError> {
        lock(&self.questions).remove(&(session_id.to_owned(), request_id.to_owned()));
        Ok(())
    }

    fn set_answer_listener(&self, listener: AnswerListener) {
        *lock(&self.listener) = Some(listener);
    }

    async fn delete_idle_sessions(
        &self,
        idle: Duration,
        limit: usize,
    ) -> Result<Vec<EndedSession>, CatalogError> {
        let cutoff = before(now(), idle);
        let mut sessions = lock(&self.sessions);
        let mut idle_ones: Vec<(OffsetDateTime, String)> = sessions
            .iter()
            .filter(|(_, session)| session.last_used_at <= cutoff)
            .map(|(id, session)| (session.last_used_at, id.clone()))
            .collect();
        idle_ones.sort();
        let ended = idle_ones
            .into_iter()
            .take(limit)
            .filter_map(|(_, id)| sessions.remove(&id))
            .map(|session| EndedSession {
                lasted: (session.last_used_at - session.created_at)
                    .try_into()
                    .unwrap_or_default(),
                protocol_version: session.protocol_version,
            })
            .collect();
        lock(&self.questions).retain(|(session, _), _| sessions.contains_key(session));
        let now = now();
        lock(&self.used_answers).retain(|_, expires_at| *expires_at > now);
        Ok(ended)
    }

    async fn use_answer_once(&self, key: &str, lifetime: Duration) -> Result<bool, CatalogError> {
        let now = now();
        let mut used = lock(&self.used_answers);
        match used.get(key) {
            Some(expires_at) if *expires_at > now => Ok(false),
            _ => {
                used.insert(key.to_owned(), now + lifetime);
                Ok(true)
            }
        }
    }
}
