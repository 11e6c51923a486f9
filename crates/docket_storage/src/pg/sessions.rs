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
use docket_catalog::{CatalogError, EndedSession, NewSession, Session};
use time::OffsetDateTime;

type SessionRow = rows::SessionRow<PgColumns>;

/// Stores a new session and, in the same statement, ends its subject's least
/// recently used sessions beyond `per_subject` (the new one always stays: the
/// statement's snapshot does not hold it, so `per_subject - 1` others are kept).
pub(crate) async fn insert(
    conn: &mut AsyncPgConnection,
    session: &NewSession,
    per_subject: u32,
) -> Result<(), CatalogError> {
    statement(
        "WITH opened AS ( \
             INSERT INTO mcp_sessions (id, protocol_version, client_capabilities, client_info, subject) \
             VALUES ($1, $2, $3, $4, $5) RETURNING id) \
         DELETE FROM mcp_sessions WHERE id IN ( \
             SELECT id FROM mcp_sessions WHERE subject = $5 \
              ORDER BY last_used_at DESC, created_at DESC OFFSET $6) \
           AND EXISTS (SELECT 1 FROM opened)",
    )
    .bind::<Text, _>(&session.id)
    .bind::<Text, _>(&session.protocol_version)
    .bind::<Text, _>(session.client_capabilities.to_string())
    .bind::<Nullable<Text>, _>(session.client_info.as_ref().map(ToString::to_string))
    .bind::<Text, _>(&session.subject)
    .bind::<BigInt, _>(i64::from(per_subject.max(1) - 1))
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
    limit: usize,
) -> Result<Vec<EndedSession>, CatalogError> {
    // Rows another replica's sweep deleted first are skipped by this DELETE, so each
    // session is returned by exactly one sweep.
    statement(
        "DELETE FROM mcp_sessions WHERE id IN ( \
             SELECT id FROM mcp_sessions \
              WHERE last_used_at <= now() - $1 * interval '1 millisecond' \
              ORDER BY last_used_at LIMIT $2) \
         RETURNING protocol_version, created_at, last_used_at",
    )
    .bind::<BigInt, _>(shared::millis(idle))
    .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX))
    .load::<rows::EndedSessionRow<PgColumns>>(conn)
    .await
    .map_err(catalog_query_error)?
    .into_iter()
    .map(rows::EndedSessionRow::into_ended)
    .collect()
}

/// Marks an answer used for `lifetime`; false when it already was. A mark past its
/// lifetime is taken again, as if swept.
pub(crate) async fn use_answer_once(
    conn: &mut AsyncPgConnection,
    key: &str,
    lifetime: Duration,
) -> Result<bool, CatalogError> {
    statement(
        "INSERT INTO used_answers (key, expires_at) \
         VALUES ($1, now() + $2 * interval '1 millisecond') \
         ON CONFLICT (key) DO UPDATE SET expires_at = EXCLUDED.expires_at \
         WHERE used_answers.expires_at <= now()",
    )
    .bind::<Text, _>(key)
    .bind::<BigInt, _>(shared::millis(lifetime))
    .execute(conn)
    .await
    .map_err(catalog_query_error)
    .map(|marked| marked == 1)
}

/// Deletes the used answers past their lifetime.
pub(crate) async fn delete_expired_answers(
    conn: &mut AsyncPgConnection,
) -> Result<(), CatalogError> {
    statement("DELETE FROM used_answers WHERE expires_at <= now()")
        .execute(conn)
        .await
        .map_err(catalog_query_error)
        .map(drop)
}

/// Records a question asked in a live session; false when the session is gone.
pub(crate) async fn ask(
    conn: &mut AsyncPgConnection,
    session_id: &str,
    request_id: &str,
) -> Result<bool, CatalogError> {
    statement(
        "INSERT INTO mcp_session_questions (session_id, request_id) \
         SELECT id, $2 FROM mcp_sessions WHERE id = $1",
    )
    .bind::<Text, _>(session_id)
    .bind::<Text, _>(request_id)
    .execute(conn)
    .await
    .map_err(catalog_query_error)
    .map(|inserted| inserted == 1)
}

/// Keeps the answer to a question that waits and, in the same transaction, signals
/// it on `docket_sessions` (delivered at commit); false when no question waits.
pub(crate) async fn put_answer(
    conn: &mut AsyncPgConnection,
    session_id: &str,
    request_id: &str,
    answer: &str,
) -> Result<bool, CatalogError> {
    statement(
        "WITH kept AS ( \
             UPDATE mcp_session_questions SET answer = $3 \
              WHERE session_id = $1 AND request_id = $2 AND answer IS NULL \
             RETURNING session_id, request_id) \
         SELECT pg_notify('docket_sessions', session_id || ':' || request_id) FROM kept",
    )
    .bind::<Text, _>(session_id)
    .bind::<Text, _>(request_id)
    .bind::<Text, _>(answer)
    .execute(conn)
    .await
    .map_err(catalog_query_error)
    .map(|kept| kept == 1)
}

/// Takes an answer that arrived, ending its question: its text, once.
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
        "DELETE FROM mcp_session_questions \
         WHERE session_id = $1 AND request_id = $2 AND answer IS NOT NULL RETURNING answer",
    )
    .bind::<Text, _>(session_id)
    .bind::<Text, _>(request_id)
    .get_result::<Answer>(conn)
    .await
    .optional()
    .map_err(catalog_query_error)
    .map(|answer| answer.map(|answer| answer.answer))
}

/// Ends a question nobody waits for.
pub(crate) async fn forget_question(
    conn: &mut AsyncPgConnection,
    session_id: &str,
    request_id: &str,
) -> Result<(), CatalogError> {
    statement("DELETE FROM mcp_session_questions WHERE session_id = $1 AND request_id = $2")
        .bind::<Text, _>(session_id)
        .bind::<Text, _>(request_id)
        .execute(conn)
        .await
        .map_err(catalog_query_error)
        .map(drop)
}
