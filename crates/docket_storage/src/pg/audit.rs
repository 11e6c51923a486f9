//! The `audit_logs` model on PostgreSQL: the statements that write and read
//! it. The row as read is [`rows::AuditRow`].

use diesel::sql_types::{BigInt, Bool, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use docket_task::StoreError;
use docket_task::oversight::{AuditQuery, AuditRecord, MAX_AUDIT_ROWS, ReplicaBeat};
use docket_task::store::AuditEntry;
use time::OffsetDateTime;

use crate::columns::PgColumns;
use crate::error::query_error;
use crate::rows::{self, audit_columns};
use crate::shared;
use crate::statement::statement;

/// Writes one audit row; `id` and `created_at` come from the database.
pub(crate) async fn insert(
    conn: &mut AsyncPgConnection,
    entry: &AuditEntry,
) -> Result<(), StoreError> {
    statement(concat!(
        "INSERT INTO audit_logs (",
        audit_columns!(),
        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
    ))
    .bind::<Text, _>(&entry.tool)
    .bind::<Text, _>(&entry.subject)
    .bind::<Nullable<Text>, _>(&entry.context.persona)
    .bind::<Nullable<Text>, _>(&entry.context.connection)
    .bind::<Jsonb, _>(&entry.context.arguments)
    .bind::<Bool, _>(entry.success)
    .bind::<Text, _>(&entry.outcome)
    .bind::<Nullable<Text>, _>(&entry.error_message)
    .bind::<BigInt, _>(entry.duration_ms)
    .bind::<Nullable<Text>, _>(&entry.call_id)
    .bind::<Nullable<Text>, _>(&entry.engine_user)
    .bind::<Jsonb, _>(shared::upstream_ids_json(&entry.upstream_ids))
    .execute(conn)
    .await
    .map_err(query_error)?;
    Ok(())
}

/// The newest rows for `tool`, newest first.
pub(crate) async fn for_tool(
    conn: &mut AsyncPgConnection,
    tool: &str,
    limit: u32,
) -> Result<Vec<AuditEntry>, StoreError> {
    let rows = statement(concat!(
        "SELECT ",
        audit_columns!(),
        " FROM audit_logs WHERE tool = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
    ))
    .bind::<Text, _>(tool)
    .bind::<BigInt, _>(i64::from(limit))
    .load::<rows::AuditRow<PgColumns>>(conn)
    .await
    .map_err(query_error)?;
    rows::audit_entries(rows)
}

/// The audit rows that match `query`, newest first.
pub(crate) async fn search(
    conn: &mut AsyncPgConnection,
    query: &AuditQuery,
) -> Result<Vec<AuditRecord>, StoreError> {
    let rows = statement(concat!(
        "SELECT created_at, ",
        audit_columns!(),
        " FROM audit_logs WHERE ($1::text IS NULL OR subject = $1) \
           AND ($2::text IS NULL OR tool = $2) \
           AND ($3::timestamptz IS NULL OR created_at >= $3) \
           AND ($4::timestamptz IS NULL OR created_at < $4) \
         ORDER BY created_at DESC, id DESC LIMIT $5"
    ))
    .bind::<Nullable<Text>, _>(query.subject.as_deref())
    .bind::<Nullable<Text>, _>(query.tool.as_deref())
    .bind::<Nullable<Timestamptz>, _>(query.since)
    .bind::<Nullable<Timestamptz>, _>(query.until)
    .bind::<BigInt, _>(i64::from(query.limit.min(MAX_AUDIT_ROWS)))
    .load::<rows::AuditRecordRow<PgColumns>>(conn)
    .await
    .map_err(query_error)?;
    rows::audit_records(rows)
}

/// The replicas, the most recently beating first, with the database clock.
pub(crate) async fn replicas(
    conn: &mut AsyncPgConnection,
    limit: u32,
) -> Result<(Vec<ReplicaBeat>, OffsetDateTime), StoreError> {
    let rows = statement(
        "SELECT id, started_at, last_beat_at, draining, now() AS now FROM replicas \
         ORDER BY last_beat_at DESC, id LIMIT $1",
    )
    .bind::<BigInt, _>(i64::from(limit))
    .load::<rows::ReplicaRow<PgColumns>>(conn)
    .await
    .map_err(query_error)?;
    rows::replica_beats(rows)
}
