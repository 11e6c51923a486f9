//! The principal directory: what each signed-in person's verified token said
//! about them (its claims), as last seen, one row per subject. A managed
//! script's run acts on behalf of its owner, and a scheduled run has no person
//! and no token behind it; the directory is how such a run still acts upstream
//! as its owner by any claim (`email`, say), not only by the `sub` its owner's
//! subject carries. The [`PrincipalStore`] trait is what the backends implement.
//!
//! Only a server writes it, from a token it verified: never from anything a
//! caller sends as data. A person's row is replaced by their next sign-in's
//! claims (the latest, by when they were seen, win) and forgotten once they have
//! not been seen for the retention the server gives
//! ([`PrincipalStore::forget_unseen_before`]); a run of a forgotten owner acts as
//! if they had never signed in.
//!
//! Times are the caller's clock (`now`, `cutoff`), as schedules' fire times are:
//! the server writes and prunes with one clock, and tests pass their own.

use async_trait::async_trait;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::error::{CatalogError, require};

/// The most bytes a subject may take: a principal's row is found by it, and an
/// identity provider's `sub` is far shorter.
pub const MAX_SUBJECT_BYTES: usize = 512;

/// The most bytes a principal's claims may take, encoded as JSON: kept for as
/// long as the person is remembered, so a provider (or a person who controls
/// what their profile holds) cannot park megabytes in the database.
pub const MAX_CLAIMS_BYTES: usize = 16 * 1024;

/// Checks the rules every backend enforces on a principal before it is written.
///
/// # Errors
/// [`CatalogError::Invalid`] when the subject is empty, longer than
/// [`MAX_SUBJECT_BYTES`] or holds a NUL (no database keeps one in text), or the
/// claims take more than [`MAX_CLAIMS_BYTES`] as JSON. The message names the
/// rule, never the claims.
pub fn validate(subject: &str, claims: &Map<String, Value>) -> Result<(), CatalogError> {
    require(
        !subject.is_empty(),
        "a principal's subject must not be empty",
    )?;
    require(
        subject.len() <= MAX_SUBJECT_BYTES,
        "a principal's subject is at most 512 bytes",
    )?;
    require(
        !subject.contains('\0'),
        "a principal's subject must not contain NUL",
    )?;
    require(
        claims_bytes(claims) <= MAX_CLAIMS_BYTES,
        "a principal's claims are at most 16 KiB of JSON",
    )
}

/// How many bytes `claims` take as JSON.
pub fn claims_bytes(claims: &Map<String, Value>) -> usize {
    serde_json::to_vec(claims).map_or(usize::MAX, |encoded| encoded.len())
}

/// Where the principal directory is kept.
#[async_trait]
pub trait PrincipalStore: Send + Sync {
    /// Remembers that `subject` was seen at `now` with `claims`: their row is
    /// created, or replaced when `now` is no earlier than when they were last
    /// seen (a slower writer with an older sighting changes nothing), so one row
    /// per subject holds the latest claims.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] for a principal [`validate`] refuses (nothing is
    /// written), and [`CatalogError::Unavailable`] when the store cannot be
    /// reached.
    async fn remember(
        &self,
        subject: &str,
        claims: &Map<String, Value>,
        now: OffsetDateTime,
    ) -> Result<(), CatalogError>;

    /// The claims `subject` was last seen with; `None` for a subject never seen
    /// (or forgotten).
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached, and
    /// [`CatalogError::Corrupt`] for a row that cannot be read back.
    async fn claims_of(&self, subject: &str) -> Result<Option<Map<String, Value>>, CatalogError>;

    /// Forgets up to `limit` principals last seen before `cutoff`, those seen
    /// longest ago first; how many. The retention pass calls it until a batch
    /// comes back short; on PostgreSQL, replicas doing so at once take disjoint
    /// rows.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when the store cannot be reached.
    async fn forget_unseen_before(
        &self,
        cutoff: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, CatalogError>;
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn padded(bytes: usize) -> Map<String, Value> {
        // `{"pad":"…"}` is ten bytes around the padding.
        let mut claims = Map::new();
        claims.insert("pad".into(), json!("x".repeat(bytes - 10)));
        claims
    }

    #[test]
    fn the_bounds_are_inclusive_and_name_the_rule() {
        assert_eq!(claims_bytes(&padded(MAX_CLAIMS_BYTES)), MAX_CLAIMS_BYTES);
        assert_eq!(validate("oidc:a", &padded(MAX_CLAIMS_BYTES)), Ok(()));
        assert_eq!(
            validate("oidc:a", &padded(MAX_CLAIMS_BYTES + 1)),
            Err(CatalogError::Invalid(
                "a principal's claims are at most 16 KiB of JSON".into()
            ))
        );
        assert_eq!(
            validate(&"s".repeat(MAX_SUBJECT_BYTES), &Map::new()),
            Ok(())
        );
        assert!(matches!(
            validate(&"s".repeat(MAX_SUBJECT_BYTES + 1), &Map::new()),
            Err(CatalogError::Invalid(_))
        ));
        for subject in ["", "oidc:a\0b"] {
            assert!(matches!(
                validate(subject, &Map::new()),
                Err(CatalogError::Invalid(_))
            ));
        }
    }
}
