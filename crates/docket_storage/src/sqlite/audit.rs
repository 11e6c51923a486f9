//! The `audit_logs` model on SQLite: the row to insert and the statements
//! (synchronous, run on a blocking thread). The row as read is
//! [`rows::AuditRow`].

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use docket_task::store::AuditEntry;

use crate::columns::TextColumns;
use crate::rows::{self, audit_columns};
use crate::shared;
use crate::statement::statement;

/// An audit row as read.
pub(crate) type AuditRow = rows::AuditRow<TextColumns>;

/// An audit row to insert (its arguments as JSON text, its upstream query ids
/// turned into JSON text when written); `id` and `created_at`
/// come from the database.
pub(crate) struct NewAuditRow<'a> {
    pub(crate) tool: &'a str,
    pub(crate) subject: &'a str,
    pub(crate) persona: Option<&'a str>,
    pub(crate) connection: Option<&'a str>,
    pub(crate) arguments: &'a str,
    pub(crate) success: bool,
    pub(crate) outcome: &'a str,
    pub(crate) error_message: Option<&'a str>,
    pub(crate) duration_ms: i64,
    pub(crate) call_id: Option<&'a str>,
    pub(crate) engine_user: Option<&'a str>,
    pub(crate) upstream_ids: &'a [String],
}

/// Writes audit rows, one prepared insert each (callers hold a transaction).
pub(crate) fn insert_rows(
    conn: &mut SqliteConnection,
    rows: &[NewAuditRow<'_>],
) -> QueryResult<()> {
    for row in rows {
        statement(concat!(
            "INSERT INTO audit_logs (",
            audit_columns!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
        ))
        .bind::<Text, _>(row.tool)
        .bind::<Text, _>(row.subject)
        .bind::<Nullable<Text>, _>(row.persona)
        .bind::<Nullable<Text>, _>(row.connection)
        .bind::<Text, _>(row.arguments)
        .bind::<Bool, _>(row.success)
        .bind::<Text, _>(row.outcome)
        .bind::<Nullable<Text>, _>(row.error_message)
        .bind::<BigInt, _>(row.duration_ms)
        .bind::<Nullable<Text>, _>(row.call_id)
        .bind::<Nullable<Text>, _>(row.engine_user)
        .bind::<Text, _>(shared::upstream_ids_json(row.upstream_ids).to_string())
        .execute(conn)?;
    }
    Ok(())
}

/// Writes one audit row for `entry`.
pub(crate) fn insert(conn: &mut SqliteConnection, entry: &AuditEntry) -> QueryResult<()> {
    let arguments = entry.context.arguments.to_string();
    insert_rows(
        conn,
        &[NewAuditRow {
            tool: &entry.tool,
            subject: &entry.subject,
            persona: entry.context.persona.as_deref(),
            connection: entry.context.connection.as_deref(),
            arguments: &arguments,
            success: entry.success,
            outcome: &entry.outcome,
            error_message: entry.error_message.as_deref(),
            duration_ms: entry.duration_ms,
            call_id: entry.call_id.as_deref(),
            engine_user: entry.engine_user.as_deref(),
            upstream_ids: &entry.upstream_ids,
        }],
    )
}

/// The newest rows for `tool`, newest first.
pub(crate) fn for_tool(
    conn: &mut SqliteConnection,
    tool: &str,
    limit: u32,
) -> QueryResult<Vec<AuditRow>> {
    statement(concat!(
        "SELECT ",
        audit_columns!(),
        " FROM audit_logs WHERE tool = ?1 ORDER BY created_at DESC, id DESC LIMIT ?2"
    ))
    .bind::<Text, _>(tool)
    .bind::<BigInt, _>(i64::from(limit))
    .load(conn)
}

/// The audit rows that match `query`, newest first (times bound as stored
/// text, which compares as time).
pub(crate) fn search(
    conn: &mut SqliteConnection,
    subject: Option<&str>,
    tool: Option<&str>,
    since: Option<&str>,
    until: Option<&str>,
    limit: u32,
) -> QueryResult<Vec<rows::AuditRecordRow<TextColumns>>> {
    statement(concat!(
        "SELECT created_at, ",
        audit_columns!(),
        " FROM audit_logs WHERE (?1 IS NULL OR subject = ?1) AND (?2 IS NULL OR tool = ?2) \
           AND (?3 IS NULL OR created_at >= ?3) AND (?4 IS NULL OR created_at < ?4) \
         ORDER BY created_at DESC, id DESC LIMIT ?5"
    ))
    .bind::<Nullable<Text>, _>(subject)
    .bind::<Nullable<Text>, _>(tool)
    .bind::<Nullable<Text>, _>(since)
    .bind::<Nullable<Text>, _>(until)
    .bind::<BigInt, _>(i64::from(limit))
    .load(conn)
}

/// The replicas, the most recently beating first, with the database clock.
pub(crate) fn replicas(
    conn: &mut SqliteConnection,
    limit: u32,
) -> QueryResult<Vec<rows::ReplicaRow<TextColumns>>> {
    statement(concat!(
        "SELECT id, started_at, last_beat_at, draining, ",
        crate::sqlite::sql::now!(),
        " AS now FROM replicas ORDER BY last_beat_at DESC, id LIMIT ?1"
    ))
    .bind::<BigInt, _>(i64::from(limit))
    .load(conn)
}
