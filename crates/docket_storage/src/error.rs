//! Why connecting or migrating failed, and how database errors become the task
//! machinery's [`StoreError`] and the catalog's [`CatalogError`].
//!
//! Messages never carry a URL: the causes lower layers report are copied into a
//! [`Cause`] with the URL's password scrubbed, in case a driver ever echoes it.

use std::error::Error;
use std::fmt;
use std::path::PathBuf;

use diesel::result::{DatabaseErrorKind, Error as DieselError};
use docket_catalog::CatalogError;
use docket_task::StoreError;

use crate::url::{self, Backend};

/// Why a store could not be opened or migrated.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The URL names no supported database, or is malformed.
    #[error("invalid database url: {reason}")]
    InvalidUrl {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The URL names a backend this build of the crate leaves out.
    #[error(
        "the database url names {backend}, which this build does not include: \
         docket_storage was compiled without its `{feature}` feature"
    )]
    BackendNotBuilt {
        /// The backend the URL names.
        backend: Backend,
        /// The Cargo feature that would build it in.
        feature: &'static str,
    },
    /// The folder for the SQLite file could not be created.
    #[error("could not create the folder {} for the sqlite database", .path.display())]
    CreateDirectory {
        /// The folder.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The database could not be reached or refused the connection.
    #[error("could not connect to the {backend} database")]
    Connect {
        /// Which database.
        backend: Backend,
        /// Why, as the driver said it (without the password).
        #[source]
        source: Cause,
    },
    /// A migration failed; the database is left at the last migration that applied.
    #[error("could not migrate the {backend} database")]
    Migrate {
        /// Which database.
        backend: Backend,
        /// Why, as the migration harness said it (without the password).
        #[source]
        source: Cause,
    },
    /// The blocking thread that ran the migrations stopped without an answer.
    #[error("the {backend} migration thread stopped unexpectedly")]
    MigrationThread {
        /// Which database.
        backend: Backend,
    },
}

impl StorageError {
    /// Whether the database could not be reached (it may come up soon: a start-up
    /// waits for it), as opposed to a URL, folder or migration that will not work
    /// however long one waits.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, StorageError::Connect { .. })
    }
}

/// A lower layer's error, kept as its message with any password removed.
#[derive(Debug)]
pub struct Cause(String);

impl Cause {
    /// `error` and its sources, joined, with `url`'s password (if any) removed.
    pub(crate) fn scrubbed(error: &(dyn Error + 'static), url: &str) -> Self {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            // Drivers often repeat their source in their own message.
            if !message.contains(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            source = cause.source();
        }
        if let Some(password) = url::password(url) {
            message = message.replace(password, "***");
        }
        Self(message)
    }
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Error for Cause {}

/// A failed statement as the task machinery sees it.
pub(crate) fn query_error(error: DieselError) -> StoreError {
    match error {
        DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, _) => StoreError::Duplicate,
        DieselError::DeserializationError(error) => StoreError::Corrupt(error.to_string()),
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// A failed catalog statement, classified as a task statement's would be.
#[cfg(feature = "postgres")]
pub(crate) fn catalog_query_error(error: DieselError) -> CatalogError {
    catalog_error(query_error(error))
}

/// The same failure for the catalog, from the helpers the task store and the
/// catalog share.
pub(crate) fn catalog_error(error: StoreError) -> CatalogError {
    match error {
        StoreError::Duplicate => CatalogError::Duplicate,
        StoreError::Corrupt(message) => CatalogError::Corrupt(message),
        // `StoreError` is non-exhaustive; anything else is an outage.
        other => CatalogError::Unavailable(other.to_string()),
    }
}

/// A connection the pool could not hand out.
pub(crate) fn pool_error(error: impl fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("no database connection: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_errors_keep_their_kind_in_the_catalog() {
        assert_eq!(
            catalog_error(StoreError::Duplicate),
            CatalogError::Duplicate
        );
        assert_eq!(
            catalog_error(StoreError::Corrupt("x".into())),
            CatalogError::Corrupt("x".into())
        );
        assert!(matches!(
            catalog_error(StoreError::Unavailable("down".into())),
            CatalogError::Unavailable(message) if message.contains("down")
        ));
    }
}
