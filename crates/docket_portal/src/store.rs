//! [`PortalStore`]: where the portal keeps the logins in flight and the
//! sessions, so that any replica serves any step. A store keeps only hashes of
//! the secrets that name rows (a session id, a login's `state`): whoever reads
//! the database cannot present them.
//!
//! A store answers for any hash it is given; who may do what is the portal's
//! business, not the store's.

use async_trait::async_trait;
use time::OffsetDateTime;

/// The most bytes of a subject or a display name a store keeps.
pub const MAX_NAME_BYTES: usize = 512;

/// The most roles a session keeps, and the most bytes of each.
pub const MAX_ROLES: usize = 64;

/// The most bytes of one role.
pub const MAX_ROLE_BYTES: usize = 128;

/// The most bytes of a login's PKCE verifier and of the path it returns to.
pub const MAX_LOGIN_FIELD_BYTES: usize = 2048;

/// What a store fails with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store cannot be reached or refused the statement.
    #[error("the portal store is unavailable: {0}")]
    Unavailable(String),
    /// A value breaks a bound (too long, empty, out of range).
    #[error("invalid portal record: {0}")]
    Invalid(String),
    /// A cap is reached (too many logins in flight).
    #[error("the portal store is full: {0}")]
    Full(String),
    /// A row with that key exists already.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A stored row does not read back (written by something else, or damaged).
    #[error("a stored portal record is corrupt: {0}")]
    Corrupt(String),
}

/// A login in flight: the browser went to the authorization server with a
/// `state` whose hash names this row, and comes back with it once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingLogin {
    /// The SHA-256 (hex) of the `state` sent to the authorization server.
    pub state_hash: String,
    /// The PKCE verifier the code is exchanged with. Kept as it is: it is
    /// worth nothing without the code, which only the browser carries.
    pub verifier: String,
    /// The portal path the person wanted (always under `/portal`).
    pub return_to: String,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it stops being accepted.
    pub expires_at: OffsetDateTime,
}

impl PendingLogin {
    /// Checks the bounds every backend holds.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] naming the broken bound.
    pub fn validate(&self) -> Result<(), StoreError> {
        validate_hash("state_hash", &self.state_hash)?;
        bounded("verifier", &self.verifier, MAX_LOGIN_FIELD_BYTES)?;
        bounded("return_to", &self.return_to, MAX_LOGIN_FIELD_BYTES)?;
        if self.expires_at <= self.created_at {
            return Err(StoreError::Invalid(
                "a login must expire after it was made".to_owned(),
            ));
        }
        Ok(())
    }
}

/// A signed-in browser: who it is, and until when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortalSession {
    /// The SHA-256 (hex) of the session id the cookie carries.
    pub id_hash: String,
    /// The person, as Docket names owners (`oidc:<sub>`).
    pub subject: String,
    /// A name to show.
    pub display_name: String,
    /// The person's roles at login (they select the persona).
    pub roles: Vec<String>,
    /// Whether the person's persona is the administrators'.
    pub administrator: bool,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it ends, whatever happens.
    pub expires_at: OffsetDateTime,
}

impl PortalSession {
    /// Checks the bounds every backend holds.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] naming the broken bound.
    pub fn validate(&self) -> Result<(), StoreError> {
        validate_hash("id_hash", &self.id_hash)?;
        bounded("subject", &self.subject, MAX_NAME_BYTES)?;
        if self.display_name.len() > MAX_NAME_BYTES {
            return Err(StoreError::Invalid(format!(
                "display_name is over {MAX_NAME_BYTES} bytes"
            )));
        }
        if self.roles.len() > MAX_ROLES {
            return Err(StoreError::Invalid(format!("over {MAX_ROLES} roles")));
        }
        for role in &self.roles {
            bounded("a role", role, MAX_ROLE_BYTES)?;
        }
        if self.expires_at <= self.created_at {
            return Err(StoreError::Invalid(
                "a session must expire after it was made".to_owned(),
            ));
        }
        Ok(())
    }
}

fn bounded(name: &str, value: &str, max: usize) -> Result<(), StoreError> {
    if value.is_empty() {
        return Err(StoreError::Invalid(format!("{name} is empty")));
    }
    if value.len() > max {
        return Err(StoreError::Invalid(format!("{name} is over {max} bytes")));
    }
    Ok(())
}

/// Checks that `value` is a SHA-256 in lower-case hex.
///
/// # Errors
/// [`StoreError::Invalid`] otherwise.
pub fn validate_hash(name: &str, value: &str) -> Result<(), StoreError> {
    if value.len() == 64
        && value
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
    {
        Ok(())
    } else {
        Err(StoreError::Invalid(format!(
            "{name} is not a SHA-256 in lower-case hex"
        )))
    }
}

/// What one [`PortalStore::sweep`] removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Expired sessions.
    pub sessions: u64,
    /// Expired logins in flight.
    pub logins: u64,
}

/// Where the portal keeps its state.
#[async_trait]
pub trait PortalStore: Send + Sync {
    /// Keeps `login` unless `cap` logins (expired ones included, until swept)
    /// are in flight already.
    ///
    /// # Errors
    /// [`StoreError::Full`] at the cap, [`StoreError::Conflict`] when the
    /// hash is taken, [`StoreError::Invalid`], [`StoreError::Unavailable`].
    async fn begin_login(&self, login: &PendingLogin, cap: u64) -> Result<(), StoreError>;

    /// Takes the login named by `state_hash` if it has not expired at `now`:
    /// removes it, so that of two takes at most one gets it.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn take_login(
        &self,
        state_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Option<PendingLogin>, StoreError>;

    /// Keeps `session`, then ends the person's oldest sessions beyond
    /// `per_person_cap` (the new one counts): a person signing in on a new
    /// browser ends the longest-standing one instead of growing without
    /// bound.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the hash is taken,
    /// [`StoreError::Invalid`], [`StoreError::Unavailable`].
    async fn create_session(
        &self,
        session: &PortalSession,
        per_person_cap: u32,
    ) -> Result<(), StoreError>;

    /// The session named by `id_hash` unless it has expired at `now`.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn session(
        &self,
        id_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Option<PortalSession>, StoreError>;

    /// Ends the session named by `id_hash`; whether there was one.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn end_session(&self, id_hash: &str) -> Result<bool, StoreError>;

    /// Removes at most `limit` sessions and at most `limit` logins that
    /// expired before `now`.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn sweep(&self, now: OffsetDateTime, limit: u32) -> Result<Swept, StoreError>;
}
