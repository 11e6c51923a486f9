//! A database URL turned into what a store opens: the PostgreSQL URL as given,
//! or the SQLite file's path (whose folder is created when missing). A URL no
//! backend of this build can open is a [`StorageError`] that says why.

#[cfg(feature = "sqlite")]
use std::path::{Path, PathBuf};

use crate::error::StorageError;
use crate::url::{Backend, SQLITE_SCHEME};

/// A URL split by backend, for the backends this build carries.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DatabaseUrl {
    /// The URL as given; tokio-postgres parses the rest.
    #[cfg(feature = "postgres")]
    Postgres(String),
    /// The SQLite file's path.
    #[cfg(feature = "sqlite")]
    Sqlite(PathBuf),
}

impl DatabaseUrl {
    /// Splits `url` by its scheme.
    ///
    /// # Errors
    /// [`StorageError::InvalidUrl`] when it names no supported database, and
    /// [`StorageError::BackendNotBuilt`] when it names one this build leaves out.
    pub(crate) fn parse(url: &str) -> Result<Self, StorageError> {
        let path = url.strip_prefix(SQLITE_SCHEME);
        let backend = match Backend::from_url(url) {
            Some(backend) => backend,
            None if path.is_some() => {
                return Err(StorageError::InvalidUrl {
                    reason: "a sqlite:// url needs a file path, as in sqlite://./docket-data/docket.db",
                });
            }
            None => {
                return Err(StorageError::InvalidUrl {
                    reason: "the database url must start with postgres://, postgresql:// or sqlite://",
                });
            }
        };
        match backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres => Ok(DatabaseUrl::Postgres(url.to_owned())),
            #[cfg(feature = "sqlite")]
            Backend::Sqlite => Ok(DatabaseUrl::Sqlite(PathBuf::from(path.unwrap_or_default()))),
            #[cfg_attr(
                all(feature = "postgres", feature = "sqlite"),
                expect(
                    unreachable_patterns,
                    reason = "with every backend built in, every backend is matched above"
                )
            )]
            backend => Err(StorageError::BackendNotBuilt {
                backend,
                feature: backend.feature(),
            }),
        }
    }
}

/// Creates the folder a SQLite file goes in, if it is missing.
///
/// # Errors
/// [`StorageError::CreateDirectory`] when it cannot be created.
#[cfg(feature = "sqlite")]
pub(crate) fn create_parent_directory(path: &Path) -> Result<(), StorageError> {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => {
            std::fs::create_dir_all(parent).map_err(|source| StorageError::CreateDirectory {
                path: parent.to_owned(),
                source,
            })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_by_backend() {
        #[cfg(feature = "postgres")]
        assert_eq!(
            DatabaseUrl::parse("postgres://u@h/db").expect("pg"),
            DatabaseUrl::Postgres("postgres://u@h/db".to_owned())
        );
        #[cfg(feature = "sqlite")]
        {
            assert_eq!(
                DatabaseUrl::parse("sqlite://./docket-data/docket.db").expect("sqlite"),
                DatabaseUrl::Sqlite(PathBuf::from("./docket-data/docket.db"))
            );
            assert_eq!(
                DatabaseUrl::parse("sqlite:///var/lib/docket/docket.db").expect("sqlite"),
                DatabaseUrl::Sqlite(PathBuf::from("/var/lib/docket/docket.db"))
            );
        }
        assert!(matches!(
            DatabaseUrl::parse("sqlite://"),
            Err(StorageError::InvalidUrl { .. })
        ));
        assert!(matches!(
            DatabaseUrl::parse("mysql://h/db"),
            Err(StorageError::InvalidUrl { .. })
        ));
    }

    #[cfg(not(feature = "postgres"))]
    #[test]
    fn a_postgres_url_without_the_postgres_feature_says_so() {
        let error = DatabaseUrl::parse("postgres://u@h/db").expect_err("not built");
        assert!(error.to_string().contains("`postgres` feature"), "{error}");
    }

    #[cfg(not(feature = "sqlite"))]
    #[test]
    fn a_sqlite_url_without_the_sqlite_feature_says_so() {
        let error = DatabaseUrl::parse("sqlite://./a.db").expect_err("not built");
        assert!(error.to_string().contains("`sqlite` feature"), "{error}");
    }
}
