//! The `audit_logs` model on PostgreSQL: the statements that write and read
//! it. The row as read is [`rows::AuditRow`].

use diesel::sql_types::{BigInt, Bool, Jsonb, Nullable, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use docket_task::StoreError;
use docket_task::store::AuditEntry;

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
