//! Database URLs: which backend a URL names, where a SQLite file lives, and how to
//! show a URL without its password.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::StorageError;

/// The database a store runs on.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// PostgreSQL: production, many replicas.
    Postgres,
    /// SQLite: embedded, one replica.
    Sqlite,
}

impl Backend {
    /// The backend `url` names, if any: `postgres://`, `postgresql://` or `sqlite://`.
    pub fn from_url(url: &str) -> Option<Self> {
        DatabaseUrl::parse(url).ok().map(|parsed| match parsed {
            DatabaseUrl::Postgres(_) => Backend::Postgres,
            DatabaseUrl::Sqlite(_) => Backend::Sqlite,
        })
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Postgres => "postgresql",
            Backend::Sqlite => "sqlite",
        })
    }
}

/// A URL split by backend.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum DatabaseUrl<'a> {
    /// The URL as given; tokio-postgres parses the rest.
    Postgres(&'a str),
    /// The SQLite file's path.
    Sqlite(PathBuf),
}

impl<'a> DatabaseUrl<'a> {
    pub(crate) fn parse(url: &'a str) -> Result<Self, StorageError> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(DatabaseUrl::Postgres(url));
        }
        match url.strip_prefix("sqlite://") {
            Some(path) if !path.is_empty() => Ok(DatabaseUrl::Sqlite(PathBuf::from(path))),
            Some(_) => Err(StorageError::InvalidUrl {
                reason: "a sqlite:// url needs a file path, as in sqlite://./docket-data/docket.db",
            }),
            None => Err(StorageError::InvalidUrl {
                reason: "the database url must start with postgres://, postgresql:// or sqlite://",
            }),
        }
    }
}

/// Creates the folder a SQLite file goes in, if it is missing.
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

/// `url` with the password, if it has one, replaced by `***`, for messages.
#[cfg(any(test, feature = "testing"))]
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    // The user information ends at the last `@` of the authority; a password may
    // itself contain `@` only percent-encoded, but be generous anyway.
    let Some((user_info, host)) = authority.rsplit_once('@') else {
        return url.to_owned();
    };
    match user_info.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
        None => url.to_owned(),
    }
}

/// The password in `url`, if it has one, so messages from lower layers can be
/// checked for it.
pub(crate) fn password(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let (user_info, _) = authority.rsplit_once('@')?;
    let (_, password) = user_info.split_once(':')?;
    (!password.is_empty()).then_some(password)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_their_backend() {
        assert_eq!(
            DatabaseUrl::parse("postgres://u@h/db").expect("pg"),
            DatabaseUrl::Postgres("postgres://u@h/db")
        );
        assert_eq!(
            Backend::from_url("postgresql://h/db"),
            Some(Backend::Postgres)
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite://./docket-data/docket.db").expect("sqlite"),
            DatabaseUrl::Sqlite(PathBuf::from("./docket-data/docket.db"))
        );
        assert_eq!(
            DatabaseUrl::parse("sqlite:///var/lib/docket/docket.db").expect("sqlite"),
            DatabaseUrl::Sqlite(PathBuf::from("/var/lib/docket/docket.db"))
        );
        assert!(DatabaseUrl::parse("sqlite://").is_err());
        assert!(DatabaseUrl::parse("mysql://h/db").is_err());
        assert_eq!(Backend::from_url("docket.db"), None);
    }

    #[test]
    fn redaction_hides_only_the_password() {
        assert_eq!(
            redact("postgres://alice:s3cret@db:5432/docket?sslmode=disable"),
            "postgres://alice:***@db:5432/docket?sslmode=disable"
        );
        assert_eq!(
            redact("postgres://alice@db/docket"),
            "postgres://alice@db/docket"
        );
        assert_eq!(redact("postgres://db/x@y"), "postgres://db/x@y");
        assert_eq!(redact("sqlite://./a.db"), "sqlite://./a.db");
        assert_eq!(
            password("postgres://alice:s3cret@db/docket"),
            Some("s3cret")
        );
        assert_eq!(password("postgres://alice@db/docket"), None);
    }
}
