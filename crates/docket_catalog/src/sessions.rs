//! Sessions of the earlier protocol era (revisions 2025-03-26 to 2025-11-25): a
//! client that opens with `initialize` gets an `Mcp-Session-Id`, and every later
//! request names it. The session is a row, so any replica serves any session, and
//! the [`SessionStore`] trait is what the backends implement.
//!
//! A session holds what `initialize` negotiated (the protocol version, the client's
//! capabilities and info) and who opened it; the server refuses it to anyone else
//! as if it did not exist. It lives while it is used: a session idle for longer
//! than the server's idle timeout is gone.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use time::OffsetDateTime;

use crate::error::{CatalogError, require};

/// The most bytes a session's client capabilities and client info may take,
/// encoded as JSON, together: kept for as long as the session lives, so a client
/// cannot park megabytes in the database by opening sessions.
pub const MAX_CLIENT_DECLARATION_BYTES: usize = 16 * 1024;

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
        )?;
        require(
            self.declaration_bytes() <= MAX_CLIENT_DECLARATION_BYTES,
            "a client's capabilities and clientInfo are at most 16 KiB of JSON together",
        )
    }

    /// How many bytes the client's capabilities and info take as JSON.
    pub fn declaration_bytes(&self) -> usize {
        let encoded =
            |value: &Value| serde_json::to_vec(value).map_or(usize::MAX, |bytes| bytes.len());
        encoded(&self.client_capabilities)
            .saturating_add(self.client_info.as_ref().map_or(0, encoded))
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

/// A session the idle sweep ended ([`SessionStore::delete_idle_sessions`]): what its
/// `mcp.server.session.duration` needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndedSession {
    /// The protocol version it had negotiated.
    pub protocol_version: String,
    /// How long it was in use: from its creation to its last use (the idle time that
    /// followed is not part of its life).
    pub lasted: Duration,
}

/// An answer arrived for a question a session's client was asked: who waits for
/// it takes it with [`SessionStore::take_answer`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AnswerSignal {
    /// The session.
    pub session_id: String,
    /// The id of the server's request the answer is to.
    pub request_id: String,
}

/// Hears [`AnswerSignal`]s, from this process or (through the database) another.
pub type AnswerListener = Arc<dyn Fn(AnswerSignal) + Send + Sync>;

/// Where sessions are kept.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Stores a new session. When its subject then holds more than `per_subject`
    /// sessions, the least recently used of them beyond that are ended, so one
    /// identity opening sessions without end costs a bounded number of rows and
    /// only ever ends its own sessions.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] for a session [`NewSession::validate`] refuses,
    /// [`CatalogError::Duplicate`] for an id already taken, and
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn create_session(
        &self,
        session: NewSession,
        per_subject: u32,
    ) -> Result<(), CatalogError>;

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

    /// Ends the session (and drops its questions); whether there was one.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn delete_session(&self, id: &str) -> Result<bool, CatalogError>;

    /// Records that the server asked the session's client the request `request_id`,
    /// before the question goes out, so its answer is accepted on any replica.
    /// False when the session is gone.
    ///
    /// # Errors
    /// [`CatalogError::Duplicate`] for a request id asked before in the session, and
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn ask(&self, session_id: &str, request_id: &str) -> Result<bool, CatalogError>;

    /// Keeps the client's answer to the question `request_id` for the call that
    /// waits for it, on whichever replica that runs, and signals it. True when a
    /// question waited; false (nothing kept) when none does: never asked, already
    /// answered, or given up.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn put_answer(
        &self,
        session_id: &str,
        request_id: &str,
        answer: Value,
    ) -> Result<bool, CatalogError>;

    /// Takes the answer to `request_id` once it has arrived, ending the question;
    /// `None` while it has not.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn take_answer(
        &self,
        session_id: &str,
        request_id: &str,
    ) -> Result<Option<Value>, CatalogError>;

    /// Ends a question nobody waits for any more (its call's stream closed), so a
    /// late answer is refused.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn forget_question(&self, session_id: &str, request_id: &str)
    -> Result<(), CatalogError>;

    /// Deletes at most `limit` of the sessions idle for longer than `idle` (and their
    /// questions), the least recently used first, and the used answers past their
    /// lifetime; the sessions it deleted, each once however many replicas sweep at
    /// the same time. Fewer than `limit` means none idle is left.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn delete_idle_sessions(
        &self,
        idle: Duration,
        limit: usize,
    ) -> Result<Vec<EndedSession>, CatalogError>;

    /// Marks the answer `key` used for `lifetime`: true the first time, on whichever
    /// replica asks, false every time after, so an answer sealed in a `requestState`
    /// (a consent) runs its call once however often it is replayed. The mark is
    /// kept for `lifetime` (as long as the seal opens), then
    /// [`SessionStore::delete_idle_sessions`] drops it.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn use_answer_once(&self, key: &str, lifetime: Duration) -> Result<bool, CatalogError>;

    /// Asks to be told when an answer arrives, on any replica. A store without
    /// notifications ignores it; whoever waits reads the store now and then too.
    fn set_answer_listener(&self, listener: AnswerListener) {
        let _ = listener;
    }
}
