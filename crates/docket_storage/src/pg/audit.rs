//! The `audit_logs` model on PostgreSQL: the row as read, the row to insert, and
//! their queries.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use docket_task::StoreError;
use docket_task::store::{AuditContext, AuditEntry};
use serde_json::Value;

use super::schema::audit_logs;
use crate::error::query_error;

/// An audit row as read.
#[derive(Debug, Queryable, Selectable)]
#[diesel(table_name = audit_logs, check_for_backend(diesel::pg::Pg))]
struct AuditRow {
    tool: String,
    subject: String,
    persona: Option<String>,
    connection: Option<String>,
    arguments: Value,
    success: bool,
    outcome: String,
    error_message: Option<String>,
    duration_ms: i64,
}

impl From<AuditRow> for AuditEntry {
    fn from(row: AuditRow) -> Self {
        AuditEntry {
            tool: row.tool,
            subject: row.subject,
            context: AuditContext {
                persona: row.persona,
                connection: row.connection,
                arguments: row.arguments,
            },
            success: row.success,
            outcome: row.outcome,
            error_message: row.error_message,
            duration_ms: row.duration_ms,
        }
    }
}

/// An audit row to insert; `id` and `created_at` come from the database.
#[derive(Insertable)]
#[diesel(table_name = audit_logs, check_for_backend(diesel::pg::Pg))]
struct NewAuditRow<'a> {
    tool: &'a str,
    subject: &'a str,
    persona: Option<&'a str>,
    connection: Option<&'a str>,
    arguments: &'a Value,
    success: bool,
    outcome: &'a str,
    error_message: Option<&'a str>,
    duration_ms: i64,
}

impl<'a> From<&'a AuditEntry> for NewAuditRow<'a> {
    fn from(entry: &'a AuditEntry) -> Self {
        NewAuditRow {
            tool: &entry.tool,
            subject: &entry.subject,
            persona: entry.context.persona.as_deref(),
            connection: entry.context.connection.as_deref(),
            arguments: &entry.context.arguments,
            success: entry.success,
            outcome: &entry.outcome,
            error_message: entry.error_message.as_deref(),
            duration_ms: entry.duration_ms,
        }
    }
}

/// Writes one audit row.
pub(crate) async fn insert(
    conn: &mut AsyncPgConnection,
    entry: &AuditEntry,
) -> Result<(), StoreError> {
    diesel::insert_into(audit_logs::table)
        .values(NewAuditRow::from(entry))
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
    let rows = audit_logs::table
        .filter(audit_logs::tool.eq(tool))
        .order((audit_logs::created_at.desc(), audit_logs::id.desc()))
        .limit(i64::from(limit))
        .select(AuditRow::as_select())
        .load(conn)
        .await
        .map_err(query_error)?;
    Ok(rows.into_iter().map(AuditEntry::from).collect())
}
