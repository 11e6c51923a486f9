//! Database URLs as text: which backend a URL names, and how to show a URL
//! without its password. Nothing here fails with a [`StorageError`]; turning a
//! URL into what a store opens is `database_url`'s.
//!
//! [`StorageError`]: crate::StorageError

use std::fmt;

/// The prefixes of a PostgreSQL URL.
pub(crate) const POSTGRES_SCHEMES: [&str; 2] = ["postgres://", "postgresql://"];

/// The prefix of a SQLite URL; the file's path follows it.
pub(crate) const SQLITE_SCHEME: &str = "sqlite://";

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
    /// The backend `url` names, if any: `postgres://`, `postgresql://` or
    /// `sqlite://PATH`. The answer does not depend on which backends this build
    /// of the crate carries.
    pub fn from_url(url: &str) -> Option<Self> {
        if POSTGRES_SCHEMES
            .iter()
            .any(|scheme| url.starts_with(scheme))
        {
            return Some(Backend::Postgres);
        }
        url.strip_prefix(SQLITE_SCHEME)
            .filter(|path| !path.is_empty())
            .map(|_| Backend::Sqlite)
    }

    /// The Cargo feature of this crate that builds the backend.
    pub(crate) fn feature(self) -> &'static str {
        match self {
            Backend::Postgres => "postgres",
            Backend::Sqlite => "sqlite",
        }
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

/// `url` with the password, if it has one, replaced by `***`, for messages.
#[cfg(any(test, all(feature = "testing", feature = "postgres")))]
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
            Backend::from_url("postgres://u@h/db"),
            Some(Backend::Postgres)
        );
        assert_eq!(
            Backend::from_url("postgresql://h/db"),
            Some(Backend::Postgres)
        );
        assert_eq!(
            Backend::from_url("sqlite://./docket-data/docket.db"),
            Some(Backend::Sqlite)
        );
        assert_eq!(Backend::from_url("sqlite://"), None);
        assert_eq!(Backend::from_url("mysql://h/db"), None);
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
