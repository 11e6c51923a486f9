//! The `principals` model on PostgreSQL: the principal directory's statements.
//! The claims are JSON text, read back as [`rows::ClaimsRow`]; the times are the
//! caller's, as the trait says.

use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::error::catalog_query_error;
use crate::rows::{self, ClaimsRow};
use crate::statement::statement;
use docket_catalog::CatalogError;

/// Creates the subject's row, or replaces its claims and sighting when `now` is
/// no earlier than the one stored: one statement, so two replicas remembering
/// one person at once leave the later sighting.
pub(crate) async fn remember(
    conn: &mut AsyncPgConnection,
    subject: &str,
    claims: &Map<String, Value>,
    now: OffsetDateTime,
) -> Result<(), CatalogError> {
    statement(
        "INSERT INTO principals (subject, claims, seen_at) VALUES ($1, $2, $3) \
         ON CONFLICT (subject) DO UPDATE SET claims = EXCLUDED.claims, seen_at = EXCLUDED.seen_at \
         WHERE principals.seen_at <= EXCLUDED.seen_at",
    )
    .bind::<Text, _>(subject)
    .bind::<Text, _>(rows::claims_text(claims)?)
    .bind::<Timestamptz, _>(now)
    .execute(conn)
    .await
    .map_err(catalog_query_error)
    .map(drop)
}

/// The subject's claims, when remembered.
pub(crate) async fn claims_of(
    conn: &mut AsyncPgConnection,
    subject: &str,
) -> Result<Option<Map<String, Value>>, CatalogError> {
    statement("SELECT claims FROM principals WHERE subject = $1")
        .bind::<Text, _>(subject)
        .get_result::<ClaimsRow>(conn)
        .await
        .optional()
        .map_err(catalog_query_error)?
        .map(ClaimsRow::into_claims)
        .transpose()
}

/// Deletes up to `limit` principals seen before `cutoff`, those seen longest ago
/// first; replicas doing so at once take disjoint rows (`SKIP LOCKED`).
pub(crate) async fn forget_unseen_before(
    conn: &mut AsyncPgConnection,
    cutoff: OffsetDateTime,
    limit: u32,
) -> Result<u64, CatalogError> {
    statement(
        "DELETE FROM principals WHERE subject IN (\
             SELECT subject FROM principals WHERE seen_at < $1 \
              ORDER BY seen_at LIMIT $2 FOR UPDATE SKIP LOCKED)",
    )
    .bind::<Timestamptz, _>(cutoff)
    .bind::<BigInt, _>(i64::from(limit))
    .execute(conn)
    .await
    .map_err(catalog_query_error)
    .map(|deleted| u64::try_from(deleted).unwrap_or(u64::MAX))
}
