//! The `audit_logs` model on SQLite: the row as read, the row to insert, and
//! their queries (synchronous, run on a blocking thread).

use diesel::prelude::*;
use diesel::sqlite::Sqlite;
use docket_task::StoreError;
use docket_task::store::{AuditContext, AuditEntry};

use super::schema::audit_logs;
use super::sql::json;

/// An audit row as read (its arguments as JSON text).
#[derive(Debug, Queryable, Selectable)]
#[diesel(table_name = audit_logs, check_for_backend(Sqlite))]
pub(crate) struct AuditRow {
    tool: String,
    subject: String,
    persona: Option<String>,
    connection: Option<String>,
    arguments: String,
    success: bool,
    outcome: String,
    error_message: Option<String>,
    duration_ms: i64,
}

impl TryFrom<AuditRow> for AuditEntry {
    type Error = StoreError;

    fn try_from(row: AuditRow) -> Result<Self, StoreError> {
        Ok(AuditEntry {
            tool: row.tool,
            subject: row.subject,
            context: AuditContext {
                persona: row.persona,
                connection: row.connection,
                arguments: json(&row.arguments)?,
            },
            success: row.success,
            outcome: row.outcome,
            error_message: row.error_message,
            duration_ms: row.duration_ms,
        })
    }
}

/// An audit row to insert; `id` and `created_at` come from the database.
#[derive(Insertable)]
#[diesel(table_name = audit_logs, check_for_backend(Sqlite))]
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
}

/// Writes audit rows.
pub(crate) fn insert_rows(
    conn: &mut SqliteConnection,
    rows: &[NewAuditRow<'_>],
) -> QueryResult<()> {
    if rows.is_empty() {
        return Ok(());
    }
    diesel::insert_into(audit_logs::table)
        .values(rows)
        .execute(conn)
        .map(drop)
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
        }],
    )
}

/// The newest rows for `tool`, newest first.
pub(crate) fn for_tool(
    conn: &mut SqliteConnection,
    tool: &str,
    limit: u32,
) -> QueryResult<Vec<AuditRow>> {
    audit_logs::table
        .filter(audit_logs::tool.eq(tool))
        .order((audit_logs::created_at.desc(), audit_logs::id.desc()))
        .limit(i64::from(limit))
        .select(AuditRow::as_select())
        .load(conn)
}
