//! Where the authorization server keeps its state: registered clients, the
//! one-shot records of a login in flight (pending authorizations, codes),
//! refresh-token families, consents and signing keys. [`OAuthStore`] is what a
//! backend implements; [`crate::memory::MemoryStore`] keeps it in memory, and
//! `docket_storage` on PostgreSQL and SQLite, so that any replica serves any
//! step of a login.
//!
//! Secrets are never stored as given: codes and refresh tokens are found by the
//! SHA-256 of their value (`*_hash`, lower-case hex), which the server computes.
//! Signing keys are the exception (they are what the server signs with), so
//! whoever reads the database can mint tokens; the database is trusted as the
//! task rows are.
//!
//! Times are the caller's clock (`now`): the server writes and prunes with one
//! clock, and tests pass their own.

use async_trait::async_trait;
use serde_json::Value;
use time::OffsetDateTime;

/// The most bytes a payload (a client's metadata, a one-shot record's JSON, a
/// refresh token's grant) may take as JSON. Checked by [`validate_payload`]
/// before anything is written, by every backend.
pub const MAX_PAYLOAD_BYTES: usize = 16 * 1024;

/// The most bytes of a key: a client id (a metadata document's URL is one), a
/// hash, a family id, a subject.
pub const MAX_KEY_BYTES: usize = 2048;

/// Why a store operation did not happen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A cap was reached (the clients, the one-shot records of a kind); nothing
    /// was written. The message names the cap.
    #[error("{0}")]
    Full(String),
    /// A value breaks a rule every backend enforces (see [`validate_payload`]).
    #[error("{0}")]
    Invalid(String),
    /// A row with that key already exists.
    #[error("{0}")]
    Conflict(String),
    /// The store cannot be reached; the operation may be retried.
    #[error("the authorization store is unavailable: {0}")]
    Unavailable(String),
    /// A row could not be read back.
    #[error("the authorization store holds a row it cannot read: {0}")]
    Corrupt(String),
}

/// Checks the bounds every backend enforces on a key and a payload.
///
/// # Errors
/// [`StoreError::Invalid`] when the key is empty, longer than
/// [`MAX_KEY_BYTES`] or holds a NUL, or the payload takes more than
/// [`MAX_PAYLOAD_BYTES`] as JSON.
pub fn validate_payload(key: &str, payload: &Value) -> Result<(), StoreError> {
    validate_key(key)?;
    let bytes = serde_json::to_vec(payload).map_or(usize::MAX, |encoded| encoded.len());
    if bytes > MAX_PAYLOAD_BYTES {
        return Err(StoreError::Invalid(
            "an authorization record is at most 16 KiB of JSON".to_owned(),
        ));
    }
    Ok(())
}

/// Checks the bounds every backend enforces on a key.
///
/// # Errors
/// [`StoreError::Invalid`] when the key is empty, longer than
/// [`MAX_KEY_BYTES`] or holds a NUL.
pub fn validate_key(key: &str) -> Result<(), StoreError> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES || key.contains('\0') {
        return Err(StoreError::Invalid(
            "an authorization key is 1 to 2048 bytes without NUL".to_owned(),
        ));
    }
    Ok(())
}

/// A client registered at run time: by dynamic client registration (RFC 7591).
/// Clients named by a metadata document are not stored (their document is the
/// registration, cached per replica), nor are the ones the configuration
/// pre-registers.
#[derive(Clone, Debug, PartialEq)]
pub struct ClientRecord {
    /// The id the server gave it (random, from the OS RNG).
    pub client_id: String,
    /// The registered metadata as accepted (redirect URIs, name, application
    /// type, grant types, authentication method), as JSON.
    pub metadata: Value,
    /// The SHA-256 (hex) of its secret, for a confidential client; `None` for a
    /// public one.
    pub secret_hash: Option<String>,
    /// When it registered.
    pub registered_at: OffsetDateTime,
    /// When it last completed a step (an authorization or a token request).
    pub last_used_at: Option<OffsetDateTime>,
}

impl ClientRecord {
    /// Checks the bounds every backend enforces on a client: its id (and its
    /// secret's hash) as keys, its metadata as a payload.
    ///
    /// # Errors
    /// [`StoreError::Invalid`], as [`validate_payload`] says.
    pub fn validate(&self) -> Result<(), StoreError> {
        validate_payload(&self.client_id, &self.metadata)?;
        self.secret_hash.as_deref().map_or(Ok(()), validate_key)
    }
}

/// The kinds of one-shot record: each is taken once, and lives until it expires.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OnceKind {
    /// An authorization in flight: from `/authorize` to the provider's callback,
    /// and from there to the person's consent. Keyed by a random id.
    Pending,
    /// An authorization code, keyed by its hash.
    Code,
}

impl OnceKind {
    /// The kind's name in a database column: `pending`, `code`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Code => "code",
        }
    }
}

/// What taking a one-shot record found.
#[derive(Clone, Debug, PartialEq)]
pub enum Fetched {
    /// The record, taken now for the first time.
    Fresh(Value),
    /// The record had been taken before (a code presented twice): the caller
    /// refuses it and revokes what the first use issued.
    Replayed(Value),
    /// No such record, or it has expired.
    Missing,
}

/// One refresh token of a family. A family starts at a login (or a consent)
/// and each refresh replaces its newest token by a new one; a token presented
/// after it was replaced revokes the whole family (OAuth 2.1 §4.3.1).
#[derive(Clone, Debug, PartialEq)]
pub struct RefreshToken {
    /// The SHA-256 (hex) of the token.
    pub token_hash: String,
    /// The family's id (random).
    pub family: String,
    /// The client it was issued to.
    pub client_id: String,
    /// Whom it acts for (the provider's `sub`, or a client's own subject).
    pub subject: String,
    /// What an access token from it carries (claims, scope, resource), as JSON.
    pub grant: Value,
    /// When this token was issued.
    pub issued_at: OffsetDateTime,
    /// When the family ends, whatever its refreshes: a family never outlives
    /// its login's lifetime.
    pub expires_at: OffsetDateTime,
}

impl RefreshToken {
    /// Checks the bounds every backend enforces on a token: its hash, family,
    /// client id and subject as keys, its grant as a payload.
    ///
    /// # Errors
    /// [`StoreError::Invalid`], as [`validate_payload`] says.
    pub fn validate(&self) -> Result<(), StoreError> {
        validate_payload(&self.token_hash, &self.grant)?;
        validate_key(&self.family)?;
        validate_key(&self.client_id)?;
        validate_key(&self.subject)
    }
}

/// What presenting a refresh token did.
#[derive(Clone, Debug, PartialEq)]
pub enum Rotation {
    /// It was the family's newest token: it is used up now, and the new token
    /// (the hash given, everything else copied from it, issued now) replaced it.
    Rotated(RefreshToken),
    /// It had been replaced already (or its family was revoked): the family is
    /// revoked now, every token of it. Carries the presented token's record.
    Reused(RefreshToken),
    /// No such token, or its family has expired.
    Missing,
}

/// A key the server signs access tokens with. The newest signs; the others are
/// still published (JWKS) until tokens they signed have expired.
#[derive(Clone, Debug, PartialEq)]
pub struct SigningKey {
    /// The key id (`kid`).
    pub kid: String,
    /// The private key, PKCS#8 DER in base64 (standard alphabet, padded).
    pub private_pkcs8: String,
    /// The public key as a JWK (with `kid`, `alg`, `use`).
    pub public_jwk: Value,
    /// When it was made.
    pub created_at: OffsetDateTime,
}

impl SigningKey {
    /// Checks the bounds every backend enforces on a key: its kid as a key,
    /// its JWK as a payload, its private part at most [`MAX_PAYLOAD_BYTES`].
    ///
    /// # Errors
    /// [`StoreError::Invalid`].
    pub fn validate(&self) -> Result<(), StoreError> {
        validate_payload(&self.kid, &self.public_jwk)?;
        if self.private_pkcs8.is_empty() || self.private_pkcs8.len() > MAX_PAYLOAD_BYTES {
            return Err(StoreError::Invalid(
                "a signing key's private part is 1 byte to 16 KiB of base64".to_owned(),
            ));
        }
        Ok(())
    }
}

/// Where the authorization server keeps its state.
#[async_trait]
pub trait OAuthStore: Send + Sync {
    /// Registers a client, unless `cap` clients are registered already
    /// ([`StoreError::Full`]) or its id is taken ([`StoreError::Conflict`]).
    ///
    /// # Errors
    /// Those, [`StoreError::Invalid`] for a record [`validate_payload`] refuses,
    /// and [`StoreError::Unavailable`].
    async fn register_client(&self, client: &ClientRecord, cap: u64) -> Result<(), StoreError>;

    /// The registered client with that id.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`], [`StoreError::Corrupt`].
    async fn client(&self, client_id: &str) -> Result<Option<ClientRecord>, StoreError>;

    /// Notes that the client completed a step at `now`.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn touch_client(&self, client_id: &str, now: OffsetDateTime) -> Result<(), StoreError>;

    /// Deletes up to `limit` clients that registered before `unused_before` and
    /// were never used, or were last used before `idle_before`, with their
    /// consents and refresh tokens; how many clients.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn reap_clients(
        &self,
        unused_before: OffsetDateTime,
        idle_before: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, StoreError>;

    /// Keeps a one-shot record until `expires_at`, unless `cap` unexpired
    /// records of its kind exist already ([`StoreError::Full`]) or the key is
    /// taken ([`StoreError::Conflict`]).
    ///
    /// # Errors
    /// Those, [`StoreError::Invalid`], [`StoreError::Unavailable`].
    async fn put_once(
        &self,
        kind: OnceKind,
        key: &str,
        payload: &Value,
        expires_at: OffsetDateTime,
        cap: u64,
    ) -> Result<(), StoreError>;

    /// Takes a one-shot record: [`Fetched::Fresh`] the first time (atomically:
    /// of two replicas taking it at once, one gets it), [`Fetched::Replayed`]
    /// after that until it expires, [`Fetched::Missing`] when there is none or
    /// it expired at or before `now`.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`], [`StoreError::Corrupt`].
    async fn take_once(
        &self,
        kind: OnceKind,
        key: &str,
        now: OffsetDateTime,
    ) -> Result<Fetched, StoreError>;

    /// Keeps a new family's first refresh token. When the subject then has more
    /// than `families_per_subject` unrevoked families, its oldest are revoked,
    /// so a person who signs in again and again never grows the table.
    ///
    /// # Errors
    /// [`StoreError::Conflict`], [`StoreError::Invalid`], [`StoreError::Unavailable`].
    async fn put_refresh(
        &self,
        token: &RefreshToken,
        families_per_subject: u32,
    ) -> Result<(), StoreError>;

    /// Presents a refresh token (by its hash) and replaces it by `next_hash`
    /// (see [`Rotation`]). Atomic: of two presentations of the same token at
    /// once, one rotates and the other finds it reused.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`], [`StoreError::Corrupt`].
    async fn rotate_refresh(
        &self,
        presented_hash: &str,
        next_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Rotation, StoreError>;

    /// Revokes the family of the refresh token with that hash (RFC 7009); the
    /// family's id, or `None` when there is no such token.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn revoke_refresh(&self, token_hash: &str) -> Result<Option<String>, StoreError>;

    /// Revokes a family; how many of its tokens were still usable.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn revoke_family(&self, family: &str) -> Result<u64, StoreError>;

    /// Whether the subject has consented to the client.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn consented(&self, subject: &str, client_id: &str) -> Result<bool, StoreError>;

    /// Records the subject's consent to the client at `now`.
    ///
    /// # Errors
    /// [`StoreError::Invalid`], [`StoreError::Unavailable`].
    async fn put_consent(
        &self,
        subject: &str,
        client_id: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError>;

    /// Every signing key, newest first.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`], [`StoreError::Corrupt`].
    async fn signing_keys(&self) -> Result<Vec<SigningKey>, StoreError>;

    /// Adds a signing key if the newest key is still `expected_newest` (by
    /// kid; `None`: there is no key yet): of replicas rotating at once, one key
    /// is added. Whether this one was.
    ///
    /// # Errors
    /// [`StoreError::Invalid`], [`StoreError::Unavailable`].
    async fn add_signing_key(
        &self,
        key: &SigningKey,
        expected_newest: Option<&str>,
    ) -> Result<bool, StoreError>;

    /// Deletes the keys made before `created_before`, except the newest key,
    /// which always stays; how many.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn remove_signing_keys_before(
        &self,
        created_before: OffsetDateTime,
    ) -> Result<u64, StoreError>;

    /// Deletes up to `limit` one-shot records and refresh tokens whose time
    /// ended at or before `now` (a revoked family's tokens count as ended);
    /// how many. The retention pass calls it until a batch comes back short.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn purge_expired(&self, now: OffsetDateTime, limit: u32) -> Result<u64, StoreError>;
}
