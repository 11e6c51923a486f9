//! Sessions of the earlier protocol era (revisions 2025-03-26 to 2025-11-25): a
//! client that opens with `initialize` gets an `Mcp-Session-Id`, and every later
//! request names it. The session is a row, so any replica serves any session, and
//! the [`SessionStore`] trait is what the backends implement.
//!
//! A session holds what `initialize` negotiated (the protocol version, the client's
//! capabilities and info) and who opened it; the server refuses it to anyone else
//! as if it did not exist. It lives while it is used: a session idle for longer
//! than the server's idle timeout is gone.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use time::OffsetDateTime;

use crate::error::{CatalogError, require};

/// A session `initialize` opens.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSession {
    /// Its id (from [`generate_id`](crate::generate_id)): the `Mcp-Session-Id`.
    pub id: String,
    /// The protocol version negotiated at `initialize`.
    pub protocol_version: String,
    /// The capabilities the client declared at `initialize` (an object).
    pub client_capabilities: Value,
    /// The client's `clientInfo`, when it sent one.
    pub client_info: Option<Value>,
    /// Who opened it.
    pub subject: String,
}

impl NewSession {
    /// Checks the rules every backend enforces.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] when the id, version or subject is empty, or the
    /// capabilities are not an object.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(!self.id.is_empty(), "a session id must not be empty")?;
        require(
            !self.protocol_version.is_empty(),
            "a session's protocol version must not be empty",
        )?;
        require(
            !self.subject.is_empty(),
            "a session's subject must not be empty",
        )?;
        require(
            self.client_capabilities.is_object(),
            "a session's client capabilities must be an object",
        )
    }
}

/// A session as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// Its id.
    pub id: String,
    /// The protocol version negotiated at `initialize`.
    pub protocol_version: String,
    /// The capabilities the client declared at `initialize`.
    pub client_capabilities: Value,
    /// The client's `clientInfo`, when it sent one.
    pub client_info: Option<Value>,
    /// Who opened it.
    pub subject: String,
    /// The level `logging/setLevel` chose, when the client chose one.
    pub log_level: Option<String>,
    /// When it was opened.
    pub created_at: OffsetDateTime,
    /// When it was last marked used (see [`SessionStore::touch_session`]).
    pub last_used_at: OffsetDateTime,
}

/// Where sessions are kept.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Stores a new session.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] for a session [`NewSession::validate`] refuses,
    /// [`CatalogError::Duplicate`] for an id already taken, and
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn create_session(&self, session: NewSession) -> Result<(), CatalogError>;

    /// The session `id`, unless it has been idle for longer than `idle`, with the
    /// store's clock when it was read.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn find_session(
        &self,
        id: &str,
        idle: Duration,
    ) -> Result<Option<(Session, OffsetDateTime)>, CatalogError>;

    /// Marks the session used now. A server calls it when a session's last use is
    /// older than a small part of the idle timeout, so a busy session costs one
    /// write a minute, not one per request.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn touch_session(&self, id: &str) -> Result<(), CatalogError>;

    /// Records the level `logging/setLevel` chose.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn set_session_log_level(&self, id: &str, level: &str) -> Result<(), CatalogError>;

    /// Ends the session (and drops its unclaimed answers); whether there was one.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn delete_session(&self, id: &str) -> Result<bool, CatalogError>;

    /// Keeps the client's answer to the server's request `request_id` in the session,
    /// for the call that waits for it, on whichever replica that runs. A second answer
    /// to the same request is [`CatalogError::Duplicate`].
    ///
    /// # Errors
    /// [`CatalogError::Duplicate`] for a request already answered, and
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn put_answer(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Value,
    ) -> Result<(), CatalogError>;

    /// Takes the answer to `request_id`, if it has arrived and was not taken before;
    /// it stays recorded as taken, so the request cannot be answered again.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn take_answer(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<Option<Value>, CatalogError>;

    /// Deletes the sessions idle for longer than `idle` (and their unclaimed answers);
    /// how many.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn delete_idle_sessions(&self, idle: Duration) -> Result<u64, CatalogError>;
}
