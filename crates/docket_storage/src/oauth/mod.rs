//! What both backends' authorization-server statements share beyond the rows
//! (`rows`): how a failed statement becomes [`StoreError`], and the stored
//! form of payloads (JSON text, read back exactly as written).
//!
//! The per-kind cap of one-shot records counts the records unexpired by the
//! process's clock ([`wall_clock`]): `put_once` is given no `now`, and the
//! replica's clock is the one the server writes every other time with. The
//! same clock stamps `revoked_at` where a revocation is given no `now`; that
//! stamp is for operators only, nothing compares it.

pub(crate) mod rows;

use diesel::result::{DatabaseErrorKind, Error as DieselError};
use docket_oauth::StoreError;
use serde_json::Value;
use time::OffsetDateTime;

use crate::columns::Corrupt;

impl From<Corrupt> for StoreError {
    fn from(corrupt: Corrupt) -> Self {
        StoreError::Corrupt(corrupt.0)
    }
}

/// A failed statement as the authorization server sees it: a key taken is a
/// conflict, a CHECK the bounds should have caught is invalid, a row that
/// does not read back is corrupt, anything else an outage.
pub(crate) fn query_error(error: DieselError) -> StoreError {
    match error {
        DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
            StoreError::Conflict(format!("a row with that key exists: {}", info.message()))
        }
        DieselError::DatabaseError(DatabaseErrorKind::CheckViolation, info) => {
            StoreError::Invalid(format!("a value out of bounds: {}", info.message()))
        }
        DieselError::DeserializationError(error) => StoreError::Corrupt(error.to_string()),
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// A connection the pool could not hand out.
pub(crate) fn pool_error(error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("no database connection: {error}"))
}

/// A payload as its column stores it.
pub(crate) fn json_text(value: &Value) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|error| StoreError::Invalid(format!("a payload that is not JSON: {error}")))
}

/// A stored payload read back.
pub(crate) fn json_value(text: &str, column: &str) -> Result<Value, StoreError> {
    serde_json::from_str(text)
        .map_err(|error| StoreError::Corrupt(format!("{column} is not JSON: {error}")))
}

/// The process's clock, for the cap of one-shot records and the revocation
/// stamps no caller's `now` reaches.
pub(crate) fn wall_clock() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// How many of a family's newest live families stay beside a new one: the new
/// family always stays, whatever the cap.
pub(crate) fn other_families_kept(families_per_subject: u32) -> i64 {
    i64::from(families_per_subject.max(1) - 1)
}

/// A count or limit as SQL binds it.
pub(crate) fn sql_count(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Rows a statement touched, as the trait counts them.
pub(crate) fn touched(rows: usize) -> u64 {
    u64::try_from(rows).unwrap_or(u64::MAX)
}
