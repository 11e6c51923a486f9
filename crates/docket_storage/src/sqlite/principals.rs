//! The `principals` model on SQLite (synchronous, run on a blocking thread):
//! the principal directory's statements. The claims are JSON text, read back as
//! [`rows::ClaimsRow`]; the times are the caller's, in the one stored form, so
//! they compare as text.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};

use crate::rows::ClaimsRow;
use crate::statement::statement;

/// Creates the subject's row, or replaces its claims and sighting when `seen_at`
/// (stored form) is no earlier than the one stored.
pub(crate) fn remember(
    conn: &mut SqliteConnection,
    subject: &str,
    claims: &str,
    seen_at: &str,
) -> QueryResult<()> {
    statement(
        "INSERT INTO principals (subject, claims, seen_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (subject) DO UPDATE SET claims = excluded.claims, seen_at = excluded.seen_at \
         WHERE principals.seen_at <= excluded.seen_at",
    )
    .bind::<Text, _>(subject)
    .bind::<Text, _>(claims)
    .bind::<Text, _>(seen_at)
    .execute(conn)
    .map(drop)
}

/// The subject's claims, when remembered.
pub(crate) fn claims_of(
    conn: &mut SqliteConnection,
    subject: &str,
) -> QueryResult<Option<ClaimsRow>> {
    statement("SELECT claims FROM principals WHERE subject = ?1")
        .bind::<Text, _>(subject)
        .get_result::<ClaimsRow>(conn)
        .optional()
}

/// Deletes up to `limit` principals seen before `cutoff` (stored form), those
/// seen longest ago first; the one writer needs no locking clause.
pub(crate) fn forget_unseen_before(
    conn: &mut SqliteConnection,
    cutoff: &str,
    limit: u32,
) -> QueryResult<usize> {
    statement(
        "DELETE FROM principals WHERE subject IN (\
             SELECT subject FROM principals WHERE seen_at < ?1 ORDER BY seen_at LIMIT ?2)",
    )
    .bind::<Text, _>(cutoff)
    .bind::<BigInt, _>(i64::from(limit))
    .execute(conn)
}
