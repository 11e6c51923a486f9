//! The `mcp_sessions` model on PostgreSQL. The row as read is
//! [`rows::SessionRow`].

use std::time::Duration;

use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::columns::PgColumns;
use crate::error::catalog_query_error;
use crate::rows::{self, session_columns};
use crate::shared;
use crate::statement::statement;
use docket_catalog::{CatalogError, NewSession, Session};
use time::OffsetDateTime;

type SessionRow = rows::SessionRow<PgColumns>;

/// Stores a new session.
pub(crate) async fn insert(
    conn: &mut AsyncPgConnection,
    session: &NewSession,
) -> Result<(), CatalogError> {
    statement(
        "INSERT INTO mcp_sessions (id, protocol_version, client_capabilities, client_info, subject) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind::<Text, _>(&session.id)
    .bind::<Text, _>(&session.protocol_version)
    .bind::<Text, _>(session.client_capabilities.to_string())
    .bind::<Nullable<Text>, _>(session.client_info.as_ref().map(ToString::to_string))
    .bind::<Text, _>(&session.subject)
    .execute(conn)
    .await
    .map_err(catalog_query_error)
    .map(drop)
}

/// The session, unless idle for longer than `idle`, with the database clock.
pub(crate) async fn find(
    conn: &mut AsyncPgConnection,
    id: &str,
    idle: Duration,
) -> Result<Option<(Session, OffsetDateTime)>, CatalogError> {
    statement(concat!(
        "SELECT ",
        session_columns!(),
        ", now() AS now FROM mcp_sessions \
         WHERE id = $1 AND last_used_at > now() - $2 * interval '1 millisecond'"
    ))
    .bind::<Text, _>(id)
    .bind::<BigInt, _>(shared::millis(idle))
    .get_result::<SessionRow>(conn)
    .await
    .optional()
    .map_err(catalog_query_error)?
    .map(SessionRow::into_session)
    .transpose()
}

/// Marks the session used now.
pub(crate) async fn touch(conn: &mut AsyncPgConnection, id: &str) -> Result<(), CatalogError> {
    statement("UPDATE mcp_sessions SET last_used_at = now() WHERE id = $1")
        .bind::<Text, _>(id)
        .execute(conn)
        .await
        .map_err(catalog_query_error)
        .map(drop)
}

/// Records the session's log level.
pub(crate) async fn set_log_level(
    conn: &mut AsyncPgConnection,
    id: &str,
    level: &str,
) -> Result<(), CatalogError> {
    statement("UPDATE mcp_sessions SET log_level = $2 WHERE id = $1")
        .bind::<Text, _>(id)
        .bind::<Text, _>(level)
        .execute(conn)
        .await
        .map_err(catalog_query_error)
        .map(drop)
}

/// Ends the session; whether there was one.
pub(crate) async fn delete(conn: &mut AsyncPgConnection, id: &str) -> Result<bool, CatalogError> {
    statement("DELETE FROM mcp_sessions WHERE id = $1")
        .bind::<Text, _>(id)
        .execute(conn)
        .await
        .map_err(catalog_query_error)
        .map(|deleted| deleted > 0)
}

/// Deletes the sessions idle for longer than `idle`; how many.
pub(crate) async fn delete_idle(
    conn: &mut AsyncPgConnection,
    idle: Duration,
) -> Result<u64, CatalogError> {
    statement(
        "DELETE FROM mcp_sessions WHERE last_used_at <= now() - $1 * interval '1 millisecond'",
    )
    .bind::<BigInt, _>(shared::millis(idle))
    .execute(conn)
    .await
    .map_err(catalog_query_error)
    .map(|deleted| u64::try_from(deleted).unwrap_or(u64::MAX))
}

/// Keeps an answer; a second answer to one request is [`CatalogError::Duplicate`].
pub(crate) async fn put_answer(
    conn: &mut AsyncPgConnection,
    session_id: &str,
    request_id: &str,
    answer: &str,
) -> Result<(), CatalogError> {
    statement(
        "INSERT INTO mcp_session_answers (session_id, request_id, answer) VALUES ($1, $2, $3)",
    )
    .bind::<Text, _>(session_id)
    .bind::<Text, _>(request_id)
    .bind::<Text, _>(answer)
    .execute(conn)
    .await
    .map_err(catalog_query_error)
    .map(drop)
}

/// Takes an answer: marks it taken and returns its text, once.
pub(crate) async fn take_answer(
    conn: &mut AsyncPgConnection,
    session_id: &str,
    request_id: &str,
) -> Result<Option<String>, CatalogError> {
    #[derive(diesel::QueryableByName)]
    struct Answer {
        #[diesel(sql_type = Text)]
        answer: String,
    }
    statement(
        "UPDATE mcp_session_answers SET taken = true \
         WHERE session_id = $1 AND request_id = $2 AND NOT taken RETURNING answer",
    )
    .bind::<Text, _>(session_id)
    .bind::<Text, _>(request_id)
    .get_result::<Answer>(conn)
    .await
    .optional()
    .map_err(catalog_query_error)
    .map(|answer| answer.map(|answer| answer.answer))
}
