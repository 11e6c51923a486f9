//! The rows of result spools as both backends' statements return them, written
//! once over [`Columns`], and how each becomes its domain value. Every statement
//! returning one names its columns with `spool_columns!()`. Columns are JSON text
//! on both backends.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Nullable, Text};
use docket_catalog::{CatalogError, Spool, SpoolProgress, SpoolState};

use crate::columns::{Columns, StoredValue};

/// The columns a spool is read by, in [`SpoolRow`]'s order.
macro_rules! spool_columns {
    () => {
        "id, owner, tool, connection, columns, source_id, chunks, row_count, byte_count, state, error, \
         created_at, updated_at, expires_at"
    };
}
pub(crate) use spool_columns;

/// A spool as read ([`spool_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct SpoolRow<C: Columns> {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    owner: String,
    #[diesel(sql_type = Text)]
    tool: String,
    #[diesel(sql_type = Text)]
    connection: String,
    #[diesel(sql_type = Text)]
    columns: String,
    #[diesel(sql_type = Nullable<Text>)]
    source_id: Option<String>,
    #[diesel(sql_type = BigInt)]
    chunks: i64,
    #[diesel(sql_type = BigInt)]
    row_count: i64,
    #[diesel(sql_type = BigInt)]
    byte_count: i64,
    #[diesel(sql_type = Text)]
    state: String,
    #[diesel(sql_type = Nullable<Text>)]
    error: Option<String>,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    updated_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    expires_at: C::Time,
}

/// How many rows a `SELECT count(*) AS count` found.
#[derive(QueryableByName)]
pub(crate) struct CountRow {
    #[diesel(sql_type = BigInt)]
    pub(crate) count: i64,
}

/// A count as stored (the columns are `CHECK`ed non-negative).
fn count(stored: i64) -> u64 {
    u64::try_from(stored).unwrap_or_default()
}

/// A count as the column takes it.
pub(crate) fn stored_count(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

impl<C: Columns> SpoolRow<C> {
    /// The spool.
    pub(crate) fn into_spool(self) -> Result<Spool, CatalogError> {
        Ok(Spool {
            columns: crate::rows::json_text(&self.columns, "columns")?,
            progress: SpoolProgress {
                chunks: u32::try_from(self.chunks).unwrap_or(u32::MAX),
                rows: count(self.row_count),
                bytes: count(self.byte_count),
                state: SpoolState::parse(&self.state)?,
                error: self.error,
                updated_at: self.updated_at.value()?,
            },
            id: self.id,
            owner: self.owner,
            tool: self.tool,
            connection: self.connection,
            source_id: self.source_id,
            created_at: self.created_at.value()?,
            expires_at: self.expires_at.value()?,
        })
    }
}
