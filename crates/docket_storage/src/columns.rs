//! How each backend stores the columns whose types differ between backends,
//! times and JSON, so every row is written once for both: a row type is
//! generic over [`Columns`], and reading it back turns each stored value into
//! the domain's value through [`StoredValue`]. PostgreSQL reads `timestamptz`
//! and `jsonb` into the values themselves ([`PgColumns`]); SQLite reads text
//! and parses it ([`TextColumns`]).

use serde_json::Value;
use time::OffsetDateTime;

use docket_catalog::CatalogError;
use docket_task::StoreError;

/// How one backend stores times and JSON.
pub(crate) trait Columns {
    /// The SQL type of a time column.
    type TimeSql;
    /// What diesel reads a time column into.
    type Time: StoredValue<OffsetDateTime>;
    /// The SQL type of a JSON column.
    type JsonSql;
    /// What diesel reads a JSON column into.
    type Json: StoredValue<Value>;
}

/// A stored value that could not be read back (a row written by something
/// other than this crate, or a damaged one).
#[derive(Debug)]
pub(crate) struct Corrupt(pub(crate) String);

impl From<Corrupt> for StoreError {
    fn from(corrupt: Corrupt) -> Self {
        StoreError::Corrupt(corrupt.0)
    }
}

impl From<Corrupt> for CatalogError {
    fn from(corrupt: Corrupt) -> Self {
        CatalogError::Corrupt(corrupt.0)
    }
}

/// A column value as read, turned into the value a domain type holds.
pub(crate) trait StoredValue<T> {
    /// The value, or [`Corrupt`] when the stored form cannot be read.
    fn value(self) -> Result<T, Corrupt>;
}

impl<T> StoredValue<T> for T {
    fn value(self) -> Result<T, Corrupt> {
        Ok(self)
    }
}

/// An optional column's value.
pub(crate) fn optional<T, S: StoredValue<T>>(stored: Option<S>) -> Result<Option<T>, Corrupt> {
    stored.map(StoredValue::value).transpose()
}

/// PostgreSQL: `timestamptz` and `jsonb`, read into the values themselves.
#[cfg(feature = "postgres")]
pub(crate) struct PgColumns;

#[cfg(feature = "postgres")]
impl Columns for PgColumns {
    type TimeSql = diesel::sql_types::Timestamptz;
    type Time = OffsetDateTime;
    type JsonSql = diesel::sql_types::Jsonb;
    type Json = Value;
}

/// SQLite: times and JSON as text (times in the one form
/// `now!()` writes), parsed when read.
#[cfg(feature = "sqlite")]
pub(crate) struct TextColumns;

#[cfg(feature = "sqlite")]
impl Columns for TextColumns {
    type TimeSql = diesel::sql_types::Text;
    type Time = String;
    type JsonSql = diesel::sql_types::Text;
    type Json = String;
}

#[cfg(feature = "sqlite")]
impl StoredValue<OffsetDateTime> for String {
    fn value(self) -> Result<OffsetDateTime, Corrupt> {
        use time::format_description::well_known::Rfc3339;
        OffsetDateTime::parse(&self, &Rfc3339)
            .map_err(|err| Corrupt(format!("a stored time `{self}`: {err}")))
    }
}

#[cfg(feature = "sqlite")]
impl StoredValue<Value> for String {
    fn value(self) -> Result<Value, Corrupt> {
        serde_json::from_str(&self).map_err(|err| Corrupt(format!("stored JSON: {err}")))
    }
}
