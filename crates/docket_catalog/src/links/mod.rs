//! Links to assets that open without a bearer token: the keys the server signs
//! an owner's download links with ([`LinkKey`]), and the shares an owner makes
//! for others ([`Share`]: to named people, to anyone signed in, or public). The
//! [`LinkStore`] trait is what the backends implement.
//!
//! The keys are kept in the database so every replica signs and verifies with
//! the same ones without any configuration; a key is added by compare-and-set
//! on the newest (of replicas rotating at once, one key lands), and old keys are
//! removed only once no link signed with them can still be valid.
//!
//! A share is a row: opening one counts it ([`LinkStore::record_open`], which
//! refuses a revoked or expired share in the same statement), revoking it stops
//! it at once, and every share expires, so the retention pass can delete it
//! ([`LinkStore::delete_ended_shares`]). Who may share, list or revoke is the
//! server's decision, not the store's.
//!
//! Times are the caller's clock (`now`), as the principal directory's are: the
//! server writes and prunes with one clock, and tests pass their own.

#[cfg(feature = "testing")]
pub mod testing;

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::error::{CatalogError, require};

/// The most bytes of a key id (`kid`): the server makes short ones, and the id
/// travels in every link.
pub const MAX_KID_BYTES: usize = 64;

/// The most bytes of a key's secret, as stored text.
pub const MAX_SECRET_BYTES: usize = 256;

/// The most people one share may name.
pub const MAX_SHARE_PEOPLE: usize = 50;

/// The most bytes of one named person (a subject, as identities carry it).
pub const MAX_PERSON_BYTES: usize = 512;

/// The most shares one listing returns.
pub const MAX_SHARE_PAGE: u32 = 200;

/// A key the server signs download links with.
#[derive(Clone, PartialEq, Eq)]
pub struct LinkKey {
    /// Its id, which every link signed with it names.
    pub kid: String,
    /// The secret, as text (the server's encoding; lower-case hex).
    pub secret: String,
    /// When it was made (the caller's clock).
    pub created_at: OffsetDateTime,
}

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret is what signs links; it stays out of every log line.
        f.debug_struct("LinkKey")
            .field("kid", &self.kid)
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

impl LinkKey {
    /// Checks what every store refuses before it writes a key.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] naming the rule the key breaks.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(
            !self.kid.is_empty() && self.kid.len() <= MAX_KID_BYTES,
            "a link key's id is 1 to 64 bytes",
        )?;
        require(
            self.kid.bytes().all(|byte| byte.is_ascii_alphanumeric()),
            "a link key's id is ASCII letters and digits",
        )?;
        require(
            !self.secret.is_empty() && self.secret.len() <= MAX_SECRET_BYTES,
            "a link key's secret is 1 to 256 bytes of text",
        )
    }
}

/// Who a share opens for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShareAudience {
    /// These people (subjects), each signed in as themselves.
    People(Vec<String>),
    /// Anyone signed in.
    SignedIn,
    /// Anyone with the link, signed in or not (such a share must expire).
    Public,
}

impl ShareAudience {
    /// The audience's kind as stored and shown: `people`, `signed_in`, `public`.
    pub fn kind(&self) -> &'static str {
        match self {
            ShareAudience::People(_) => "people",
            ShareAudience::SignedIn => "signed_in",
            ShareAudience::Public => "public",
        }
    }

    /// The named people (empty for the other kinds).
    pub fn people(&self) -> &[String] {
        match self {
            ShareAudience::People(people) => people,
            ShareAudience::SignedIn | ShareAudience::Public => &[],
        }
    }

    /// The audience a stored kind and people list describe, if they describe one.
    pub fn from_parts(kind: &str, people: Vec<String>) -> Option<Self> {
        match kind {
            "people" => Some(ShareAudience::People(people)),
            "signed_in" if people.is_empty() => Some(ShareAudience::SignedIn),
            "public" if people.is_empty() => Some(ShareAudience::Public),
            _ => None,
        }
    }
}

/// A share to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewShare {
    /// Its id (from [`generate_id`](crate::generate_id)); the link carries it.
    pub id: String,
    /// The asset it opens.
    pub asset_id: String,
    /// The asset's owner, whose cap it counts against.
    pub owner: String,
    /// Who may open it.
    pub audience: ShareAudience,
    /// When it stops opening (every share expires).
    pub expires_at: OffsetDateTime,
    /// When it was made (the caller's clock).
    pub created_at: OffsetDateTime,
}

impl NewShare {
    /// Checks what every store refuses before it writes a share.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] naming the rule the share breaks.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(!self.id.is_empty(), "a share id must not be empty")?;
        require(
            !self.asset_id.is_empty(),
            "a share's asset id must not be empty",
        )?;
        require(!self.owner.is_empty(), "a share's owner must not be empty")?;
        require(
            self.expires_at > self.created_at,
            "a share must expire after it is made",
        )?;
        if let ShareAudience::People(people) = &self.audience {
            require(!people.is_empty(), "a share to people names at least one")?;
            require(
                people.len() <= MAX_SHARE_PEOPLE,
                "a share names at most 50 people",
            )?;
            require(
                people.iter().all(|person| {
                    !person.is_empty() && person.len() <= MAX_PERSON_BYTES && !person.contains('\0')
                }),
                "a person is 1 to 512 bytes without NUL",
            )?;
        }
        Ok(())
    }
}

/// A recorded share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// Its id.
    pub id: String,
    /// The asset it opens.
    pub asset_id: String,
    /// The asset's owner.
    pub owner: String,
    /// Who may open it.
    pub audience: ShareAudience,
    /// When it stops opening.
    pub expires_at: OffsetDateTime,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it was revoked, if it was.
    pub revoked_at: Option<OffsetDateTime>,
    /// How often it was opened.
    pub open_count: i64,
    /// When it was last opened.
    pub last_opened_at: Option<OffsetDateTime>,
}

impl Share {
    /// Whether it still opens at `now`: not revoked and not expired.
    pub fn is_live(&self, now: OffsetDateTime) -> bool {
        self.revoked_at.is_none() && now < self.expires_at
    }
}

/// Where the link keys and the shares are kept.
///
/// Every method is one short statement or transaction, committed before it
/// returns, so any replica reads what another wrote.
#[async_trait]
pub trait LinkStore: Send + Sync + 'static {
    /// Every link key, newest first.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`], [`CatalogError::Corrupt`].
    async fn link_keys(&self) -> Result<Vec<LinkKey>, CatalogError>;

    /// Adds `key` if the newest key is still `expected_newest` (by kid; `None`:
    /// there is no key yet): of replicas rotating at once, one key is added.
    /// Whether this one was.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] for a key [`LinkKey::validate`] refuses,
    /// [`CatalogError::Unavailable`].
    async fn add_link_key(
        &self,
        key: &LinkKey,
        expected_newest: Option<&str>,
    ) -> Result<bool, CatalogError>;

    /// Removes the keys made before `created_before`, never the newest; how many.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`].
    async fn remove_link_keys_before(
        &self,
        created_before: OffsetDateTime,
    ) -> Result<u64, CatalogError>;

    /// Records `share` unless its owner already has `owner_limit` shares
    /// ([`CatalogError::LimitReached`]); racing creates never pass the limit.
    ///
    /// # Errors
    /// That, [`CatalogError::Invalid`], [`CatalogError::Duplicate`] for a taken
    /// id, [`CatalogError::Unavailable`].
    async fn create_share(&self, share: &NewShare, owner_limit: u32)
    -> Result<Share, CatalogError>;

    /// The share with this id, whoever owns it, live or not.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`], [`CatalogError::Corrupt`].
    async fn share(&self, id: &str) -> Result<Option<Share>, CatalogError>;

    /// At most `limit` (capped at [`MAX_SHARE_PAGE`]) shares of `owner`, of one
    /// asset when `asset_id` is given, newest first.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`], [`CatalogError::Corrupt`].
    async fn list_shares(
        &self,
        owner: &str,
        asset_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Share>, CatalogError>;

    /// Revokes the share at `now` unless it was revoked already; whether this
    /// call revoked it.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`].
    async fn revoke_share(&self, id: &str, now: OffsetDateTime) -> Result<bool, CatalogError>;

    /// Counts one open of the share at `now` and returns it, in one statement,
    /// only while it is live (not revoked, `now` before its expiry); `None`
    /// otherwise, and nothing is counted.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`], [`CatalogError::Corrupt`].
    async fn record_open(
        &self,
        id: &str,
        now: OffsetDateTime,
    ) -> Result<Option<Share>, CatalogError>;

    /// Deletes up to `limit` shares that expired or were revoked before
    /// `cutoff`; how many. The retention pass calls it until a batch comes back
    /// short. A share whose asset was deleted opens no more (the server reads
    /// the asset on every open) and is deleted once it expires.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`].
    async fn delete_ended_shares(
        &self,
        cutoff: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, CatalogError>;
}
