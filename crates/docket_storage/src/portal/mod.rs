//! What both backends' portal statements share: the rows (read once over
//! [`Columns`]), how a failed statement becomes the portal's [`StoreError`],
//! and the stored form of a session's roles (a JSON array as text).

use diesel::QueryableByName;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel::sql_types::{Bool, Text};
use docket_portal::{PendingLogin, PortalSession, StoreError};

use crate::columns::{Columns, Corrupt, StoredValue};

impl From<Corrupt> for StoreError {
    fn from(corrupt: Corrupt) -> Self {
        StoreError::Corrupt(corrupt.0)
    }
}

/// A failed statement as the portal sees it: a key taken is a conflict, a
/// CHECK the bounds should have caught is invalid, a row that does not read
/// back is corrupt, anything else an outage.
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

/// A session's roles as the `roles` column stores them.
pub(crate) fn roles_text(roles: &[String]) -> Result<String, StoreError> {
    serde_json::to_string(roles)
        .map_err(|error| StoreError::Invalid(format!("roles that are not JSON: {error}")))
}

/// A count or limit as SQL binds it.
pub(crate) fn sql_count(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// Rows a statement touched, as the trait counts them.
pub(crate) fn touched(rows: usize) -> u64 {
    u64::try_from(rows).unwrap_or(u64::MAX)
}

/// The columns a login is read by, in [`LoginRow`]'s order.
macro_rules! login_columns {
    () => {
        "state_hash, verifier, return_to, created_at, expires_at"
    };
}
pub(crate) use login_columns;

/// A login in flight as read ([`login_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct LoginRow<C: Columns> {
    #[diesel(sql_type = Text)]
    state_hash: String,
    #[diesel(sql_type = Text)]
    verifier: String,
    #[diesel(sql_type = Text)]
    return_to: String,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    expires_at: C::Time,
}

impl<C: Columns> LoginRow<C> {
    /// The login, or [`StoreError::Corrupt`] when a time does not read back.
    pub(crate) fn into_login(self) -> Result<PendingLogin, StoreError> {
        Ok(PendingLogin {
            state_hash: self.state_hash,
            verifier: self.verifier,
            return_to: self.return_to,
            created_at: self.created_at.value()?,
            expires_at: self.expires_at.value()?,
        })
    }
}

/// The columns a session is read by, in [`SessionRow`]'s order.
macro_rules! session_columns {
    () => {
        "id_hash, subject, display_name, roles, administrator, created_at, expires_at"
    };
}
pub(crate) use session_columns;

/// A session as read ([`session_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct SessionRow<C: Columns> {
    #[diesel(sql_type = Text)]
    id_hash: String,
    #[diesel(sql_type = Text)]
    subject: String,
    #[diesel(sql_type = Text)]
    display_name: String,
    #[diesel(sql_type = Text)]
    roles: String,
    #[diesel(sql_type = Bool)]
    administrator: bool,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    expires_at: C::Time,
}

impl<C: Columns> SessionRow<C> {
    /// The session, or [`StoreError::Corrupt`] when a column does not read
    /// back.
    pub(crate) fn into_session(self) -> Result<PortalSession, StoreError> {
        let roles = serde_json::from_str(&self.roles)
            .map_err(|error| StoreError::Corrupt(format!("a session's roles: {error}")))?;
        Ok(PortalSession {
            id_hash: self.id_hash,
            subject: self.subject,
            display_name: self.display_name,
            roles,
            administrator: self.administrator,
            created_at: self.created_at.value()?,
            expires_at: self.expires_at.value()?,
        })
    }
}
