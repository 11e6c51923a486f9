//! The call catalog: one [`CallRecord`] per data-access call (SQL on Trino,
//! an HTTP API call, a GraphQL operation), written when the call ends, and the
//! [`CallCatalog`] trait the backends implement.

use std::fmt;

use async_trait::async_trait;
use time::OffsetDateTime;

use crate::error::{CatalogError, require};

/// What kind of system a call reached.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// SQL on a Trino connection.
    Sql,
    /// An HTTP API call.
    Api,
    /// A GraphQL operation.
    Graphql,
}

impl CallKind {
    /// Its stored name: `sql`, `api` or `graphql`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Sql => "sql",
            CallKind::Api => "api",
            CallKind::Graphql => "graphql",
        }
    }

    /// The kind a stored name names.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "sql" => Some(CallKind::Sql),
            "api" => Some(CallKind::Api),
            "graphql" => Some(CallKind::Graphql),
            _ => None,
        }
    }
}

impl fmt::Display for CallKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A call to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCallRecord {
    /// Its id (from [`generate_id`](crate::generate_id)), minted when the call
    /// starts so its result can cite it.
    pub id: String,
    /// What kind of system it reached.
    pub kind: CallKind,
    /// The tool that made it.
    pub tool: String,
    /// The connection it used.
    pub connection: Option<String>,
    /// What it asked: the SQL text, the method and path, or the GraphQL
    /// operation.
    pub statement: String,
    /// Who called.
    pub subject: String,
    /// The caller's persona.
    pub persona: Option<String>,
    /// Whether it succeeded.
    pub success: bool,
    /// How it ended: the audit log's labels (`completed`, `tool_error`,
    /// `failed`, `cancelled`).
    pub outcome: String,
    /// The error message, when it did not succeed.
    pub error_message: Option<String>,
    /// How long it took, in milliseconds.
    pub duration_ms: i64,
    /// How many rows it returned or wrote, when it has rows.
    pub rows: Option<i64>,
    /// How many bytes it returned or wrote.
    pub bytes: Option<i64>,
    /// The asset it wrote, for an export.
    pub asset_id: Option<String>,
    /// The task it ran as, if it ran as one.
    pub task_id: Option<String>,
    /// The HTTP status the upstream answered with (API and GraphQL calls).
    pub upstream_status: Option<u16>,
    /// The Trino session user the call ran as, when it reached Trino.
    pub engine_user: Option<String>,
    /// The Trino query ids the call caused, in the order it submitted them, so a
    /// line of Trino's query log leads to this record and back; empty for a call
    /// that reached no Trino. The call pipeline keeps at most 32, as the call's
    /// audit row does; stores keep what they are given.
    pub upstream_ids: Vec<String>,
}

impl NewCallRecord {
    /// Checks what every store refuses (the table too, as a backstop), with a
    /// message that says why. Stores call it before they write.
    ///
    /// # Errors
    /// [`CatalogError::Invalid`] naming the rule the value breaks.
    pub fn validate(&self) -> Result<(), CatalogError> {
        require(!self.id.is_empty(), "a call record id must not be empty")?;
        require(self.duration_ms >= 0, "duration_ms must not be negative")?;
        require(
            self.rows.is_none_or(|rows| rows >= 0),
            "rows must not be negative",
        )?;
        require(
            self.bytes.is_none_or(|bytes| bytes >= 0),
            "bytes must not be negative",
        )?;
        require(
            self.upstream_status
                .is_none_or(|status| (100..=999).contains(&status)),
            "upstream_status must be an HTTP status (100 to 999)",
        )
    }
}

/// A recorded call: what was recorded, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallRecord {
    /// Its id.
    pub id: String,
    /// What kind of system it reached.
    pub kind: CallKind,
    /// The tool that made it.
    pub tool: String,
    /// The connection it used.
    pub connection: Option<String>,
    /// What it asked.
    pub statement: String,
    /// Who called.
    pub subject: String,
    /// The caller's persona.
    pub persona: Option<String>,
    /// Whether it succeeded.
    pub success: bool,
    /// How it ended.
    pub outcome: String,
    /// The error message, when it did not succeed.
    pub error_message: Option<String>,
    /// How long it took, in milliseconds.
    pub duration_ms: i64,
    /// How many rows it returned or wrote.
    pub rows: Option<i64>,
    /// How many bytes it returned or wrote.
    pub bytes: Option<i64>,
    /// The asset it wrote.
    pub asset_id: Option<String>,
    /// The task it ran as.
    pub task_id: Option<String>,
    /// The HTTP status the upstream answered with.
    pub upstream_status: Option<u16>,
    /// The Trino session user the call ran as, when it reached Trino.
    pub engine_user: Option<String>,
    /// The Trino query ids the call caused, in the order it submitted them.
    pub upstream_ids: Vec<String>,
    /// When it was recorded (database clock).
    pub created_at: OffsetDateTime,
}

/// What the call pipeline needs from a database to keep the call catalog.
#[async_trait]
pub trait CallCatalog: Send + Sync + 'static {
    /// Records one call, committed before it returns.
    ///
    /// # Errors
    /// [`CatalogError::Duplicate`] when a record with this id exists (a call is
    /// recorded once), [`CatalogError::Invalid`] for out-of-range values,
    /// [`CatalogError::Unavailable`] when the database fails.
    async fn record(&self, record: NewCallRecord) -> Result<(), CatalogError>;

    /// The record with this id, whoever made the call.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn get(&self, id: &str) -> Result<Option<CallRecord>, CatalogError>;

    /// At most `limit` records of `subject`'s calls (everyone's with `None`, for
    /// administrators), newest first.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] or [`CatalogError::Corrupt`].
    async fn recent(
        &self,
        subject: Option<&str>,
        limit: u32,
    ) -> Result<Vec<CallRecord>, CatalogError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_names() {
        for kind in [CallKind::Sql, CallKind::Api, CallKind::Graphql] {
            assert_eq!(CallKind::parse(kind.as_str()), Some(kind));
            assert_eq!(kind.to_string(), kind.as_str());
        }
        assert_eq!(CallKind::parse("SQL"), None);
    }
}
