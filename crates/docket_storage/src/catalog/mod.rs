//! The asset catalog and the call catalog: what an export leaves behind (an
//! [`Asset`] row describing an object in the object store) and what every
//! data-access call leaves behind (a [`CallRecord`]), as two async traits that
//! [`PgStore`](crate::PgStore) and [`SqliteStore`](crate::SqliteStore) implement
//! and `docket_server` uses through `Arc<dyn …>` (see
//! [`Store::asset_store`](crate::Store::asset_store) and
//! [`Store::call_catalog`](crate::Store::call_catalog)).
//!
//! - [`AssetStore`]: assets by id, by owner (newest first, with a keyset
//!   [`AssetCursor`]), and by the owner's idempotency key. An export with a key
//!   first asks [`AssetStore::find_by_idempotency_key`] (a hit answers without
//!   running anything), and records its asset with
//!   [`AssetStore::create_or_get`], which is race-safe: of concurrent creates
//!   with one owner and key exactly one is [`CreateOutcome::Created`], the others
//!   get that asset back as [`CreateOutcome::Existing`].
//! - [`CallCatalog`]: one [`CallRecord`] per SQL, API or GraphQL call, written
//!   when the call ends, read back newest first.
//! - [`testing`]: the behaviour every implementation must have, as test
//!   functions each backend runs from one source.
//!
//! Authorisation is not here: the store answers for any id or owner it is given,
//! and the caller decides who may see what.

mod assets;
mod calls;
pub mod testing;

pub use assets::{Asset, AssetCursor, AssetStore, CreateOutcome, NewAsset};
pub use calls::{CallCatalog, CallKind, CallRecord, NewCallRecord};

use docket_task::StoreError;

/// Why a catalog operation failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CatalogError {
    /// The database could not be reached or refused the statement.
    #[error("the catalog is unavailable: {0}")]
    Unavailable(String),
    /// A stored value could not be read back.
    #[error("a stored catalog row is corrupt: {0}")]
    Corrupt(String),
    /// A row with this id already exists.
    #[error("a catalog row with this id already exists")]
    Duplicate,
    /// A value to store is out of range (a negative size, an empty id).
    #[error("invalid catalog value: {0}")]
    Invalid(String),
}

impl CatalogError {
    /// The same failure, from the helpers the task store and the catalog share.
    pub(crate) fn from_store(error: StoreError) -> Self {
        match error {
            StoreError::Duplicate => CatalogError::Duplicate,
            StoreError::Corrupt(message) => CatalogError::Corrupt(message),
            // `StoreError` is non-exhaustive; anything else is an outage.
            other => CatalogError::Unavailable(other.to_string()),
        }
    }
}

/// A fresh id for an asset or a call record: 128 bits from the operating
/// system's random source as 32 lower-case hex digits, like a task id, so one
/// id cannot be guessed from another.
///
/// # Errors
/// When the OS random source fails.
pub fn generate_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// Refuses a value before any SQL runs, so the caller hears what is wrong
/// rather than a constraint name from the database (the tables check the same
/// rules as a backstop).
fn require(valid: bool, rule: &str) -> Result<(), CatalogError> {
    if valid {
        Ok(())
    } else {
        Err(CatalogError::Invalid(rule.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ids_are_32_hex_digits_and_distinct() {
        let ids: HashSet<String> = (0..1000).map(|_| generate_id().expect("random")).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|id| {
            id.len() == 32
                && id
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        }));
    }

    #[test]
    fn store_errors_keep_their_kind() {
        assert_eq!(
            CatalogError::from_store(StoreError::Duplicate),
            CatalogError::Duplicate
        );
        assert_eq!(
            CatalogError::from_store(StoreError::Corrupt("x".into())),
            CatalogError::Corrupt("x".into())
        );
        assert!(matches!(
            CatalogError::from_store(StoreError::Unavailable("down".into())),
            CatalogError::Unavailable(message) if message.contains("down")
        ));
    }
}
