//! The `mcp_sessions` model on SQLite (synchronous, run on a blocking thread).
//! The row as read is [`rows::SessionRow`].

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};

use super::sql::{modifier, now};
use crate::columns::TextColumns;
use crate::rows::{self, session_columns};
use crate::statement::statement;
use docket_catalog::NewSession;

/// A session as read.
pub(crate) type SessionRow = rows::SessionRow<TextColumns>;

/// Stores a new session and, in the same transaction, ends its subject's least
/// recently used other sessions beyond `per_subject - 1`.
pub(crate) fn insert(
    conn: &mut SqliteConnection,
    session: &NewSession,
    per_subject: u32,
) -> QueryResult<()> {
    conn.transaction(|conn| {
        statement(
            "INSERT INTO mcp_sessions (id, protocol_version, client_capabilities, client_info, subject) \
             VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .bind::<Text, _>(&session.id)
        .bind::<Text, _>(&session.protocol_version)
        .bind::<Text, _>(session.client_capabilities.to_string())
        .bind::<Nullable<Text>, _>(session.client_info.as_ref().map(ToString::to_string))
        .bind::<Text, _>(&session.subject)
        .execute(conn)?;
        statement(
            "DELETE FROM mcp_sessions WHERE id IN ( \
                 SELECT id FROM mcp_sessions WHERE subject = ?1 AND id <> ?2 \
                  ORDER BY last_used_at DESC, created_at DESC LIMIT -1 OFFSET ?3)",
        )
        .bind::<Text, _>(&session.subject)
        .bind::<Text, _>(&session.id)
        .bind::<BigInt, _>(i64::from(per_subject.max(1) - 1))
        .execute(conn)
        .map(drop)
    })
}

/// The session, unless idle for longer than `idle`.
pub(crate) fn find(
    conn: &mut SqliteConnection,
    id: &str,
    idle: Duration,
) -> QueryResult<Option<SessionRow>> {
    statement(concat!(
        "SELECT ",
        session_columns!(),
        ", ",
        now!(),
        " AS now FROM mcp_sessions \
         WHERE id = ?1 AND last_used_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?2)"
    ))
    .bind::<Text, _>(id)
    .bind::<Text, _>(modifier('-', idle))
    .get_result::<SessionRow>(conn)
    .optional()
}

/// Marks the session used now.
pub(crate) fn touch(conn: &mut SqliteConnection, id: &str) -> QueryResult<()> {
    statement(concat!(
        "UPDATE mcp_sessions SET last_used_at = ",
        now!(),
        " WHERE id = ?1"
    ))
    .bind::<Text, _>(id)
    .execute(conn)
    .map(drop)
}

/// Records the session's log level.
pub(crate) fn set_log_level(conn: &mut SqliteConnection, id: &str, level: &str) -> QueryResult<()> {
    statement("UPDATE mcp_sessions SET log_level = ?2 WHERE id = ?1")
        .bind::<Text, _>(id)
        .bind::<Text, _>(level)
        .execute(conn)
        .map(drop)
}

/// Ends the session; whether there was one.
pub(crate) fn delete(conn: &mut SqliteConnection, id: &str) -> QueryResult<bool> {
    statement("DELETE FROM mcp_sessions WHERE id = ?1")
        .bind::<Text, _>(id)
        .execute(conn)
        .map(|deleted| deleted > 0)
}

/// Deletes the sessions idle for longer than `idle`; how many.
pub(crate) fn delete_idle(
    conn: &mut SqliteConnection,
    idle: Duration,
    limit: usize,
) -> QueryResult<Vec<rows::EndedSessionRow<TextColumns>>> {
    statement(
        "DELETE FROM mcp_sessions WHERE id IN ( \
             SELECT id FROM mcp_sessions \
              WHERE last_used_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1) \
              ORDER BY last_used_at LIMIT ?2) \
         RETURNING protocol_version, created_at, last_used_at",
    )
    .bind::<Text, _>(modifier('-', idle))
    .bind::<BigInt, _>(i64::try_from(limit).unwrap_or(i64::MAX))
    .load(conn)
}

/// Marks an answer used for `lifetime`; false when it already was. A mark past its
/// lifetime is taken again, as if swept.
pub(crate) fn use_answer_once(
    conn: &mut SqliteConnection,
    key: &str,
    lifetime: Duration,
) -> QueryResult<bool> {
    statement(
        "INSERT INTO used_answers (key, expires_at) \
         VALUES (?1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?2)) \
         ON CONFLICT (key) DO UPDATE SET expires_at = excluded.expires_at \
         WHERE used_answers.expires_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
    )
    .bind::<Text, _>(key)
    .bind::<Text, _>(modifier('+', lifetime))
    .execute(conn)
    .map(|marked| marked == 1)
}

/// Deletes the used answers past their lifetime.
pub(crate) fn delete_expired_answers(conn: &mut SqliteConnection) -> QueryResult<usize> {
    statement("DELETE FROM used_answers WHERE expires_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')")
        .execute(conn)
}

/// Records a question asked in a live session; false when the session is gone.
pub(crate) fn ask(
    conn: &mut SqliteConnection,
    session_id: &str,
    request_id: &str,
) -> QueryResult<bool> {
    statement(
        "INSERT INTO mcp_session_questions (session_id, request_id) \
         SELECT id, ?2 FROM mcp_sessions WHERE id = ?1",
    )
    .bind::<Text, _>(session_id)
    .bind::<Text, _>(request_id)
    .execute(conn)
    .map(|inserted| inserted == 1)
}

/// Keeps the answer to a question that waits; false when no question waits.
pub(crate) fn put_answer(
    conn: &mut SqliteConnection,
    session_id: &str,
    request_id: &str,
    answer: &str,
) -> QueryResult<bool> {
    statement(
        "UPDATE mcp_session_questions SET answer = ?3 \
         WHERE session_id = ?1 AND request_id = ?2 AND answer IS NULL",
    )
    .bind::<Text, _>(session_id)
    .bind::<Text, _>(request_id)
    .bind::<Text, _>(answer)
    .execute(conn)
    .map(|kept| kept == 1)
}

/// Takes an answer that arrived, ending its question: its text, once.
pub(crate) fn take_answer(
    conn: &mut SqliteConnection,
    session_id: &str,
    request_id: &str,
) -> QueryResult<Option<String>> {
    #[derive(QueryableByName)]
    struct Answer {
        #[diesel(sql_type = Text)]
        answer: String,
    }
    statement(
        "DELETE FROM mcp_session_questions \
         WHERE session_id = ?1 AND request_id = ?2 AND answer IS NOT NULL RETURNING answer",
    )
    .bind::<Text, _>(session_id)
    .bind::<Text, _>(request_id)
    .get_result::<Answer>(conn)
    .optional()
    .map(|answer| answer.map(|answer| answer.answer))
}

/// Ends a question nobody waits for.
pub(crate) fn forget_question(
    conn: &mut SqliteConnection,
    session_id: &str,
    request_id: &str,
) -> QueryResult<()> {
    statement("DELETE FROM mcp_session_questions WHERE session_id = ?1 AND request_id = ?2")
        .bind::<Text, _>(session_id)
        .bind::<Text, _>(request_id)
        .execute(conn)
        .map(drop)
}
