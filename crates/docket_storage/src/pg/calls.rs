//! The `call_records` model on PostgreSQL: the row as read, the row to insert,
//! and their queries.

use diesel::prelude::*;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;

use super::schema::call_records;
use crate::error::catalog_query_error;
use crate::shared;
use docket_catalog::{CallRecord, CatalogError, NewCallRecord};

/// A call record as read.
#[derive(Debug, Queryable, Selectable)]
#[diesel(table_name = call_records, check_for_backend(diesel::pg::Pg))]
struct CallRow {
    id: String,
    kind: String,
    tool: String,
    connection: Option<String>,
    statement: String,
    subject: String,
    persona: Option<String>,
    success: bool,
    outcome: String,
    error_message: Option<String>,
    duration_ms: i64,
    rows: Option<i64>,
    bytes: Option<i64>,
    asset_id: Option<String>,
    task_id: Option<String>,
    upstream_status: Option<i32>,
    created_at: OffsetDateTime,
}

impl TryFrom<CallRow> for CallRecord {
    type Error = CatalogError;

    fn try_from(row: CallRow) -> Result<Self, CatalogError> {
        Ok(CallRecord {
            id: row.id,
            kind: shared::call_kind(&row.kind)?,
            tool: row.tool,
            connection: row.connection,
            statement: row.statement,
            subject: row.subject,
            persona: row.persona,
            success: row.success,
            outcome: row.outcome,
            error_message: row.error_message,
            duration_ms: row.duration_ms,
            rows: row.rows,
            bytes: row.bytes,
            asset_id: row.asset_id,
            task_id: row.task_id,
            upstream_status: shared::upstream_status(row.upstream_status)?,
            created_at: row.created_at,
        })
    }
}

/// A call record to insert; `created_at` comes from the database.
#[derive(Insertable)]
#[diesel(table_name = call_records, check_for_backend(diesel::pg::Pg))]
struct NewCallRow<'a> {
    id: &'a str,
    kind: &'static str,
    tool: &'a str,
    connection: Option<&'a str>,
    statement: &'a str,
    subject: &'a str,
    persona: Option<&'a str>,
    success: bool,
    outcome: &'a str,
    error_message: Option<&'a str>,
    duration_ms: i64,
    rows: Option<i64>,
    bytes: Option<i64>,
    asset_id: Option<&'a str>,
    task_id: Option<&'a str>,
    upstream_status: Option<i32>,
}

impl<'a> From<&'a NewCallRecord> for NewCallRow<'a> {
    fn from(record: &'a NewCallRecord) -> Self {
        NewCallRow {
            id: &record.id,
            kind: record.kind.as_str(),
            tool: &record.tool,
            connection: record.connection.as_deref(),
            statement: &record.statement,
            subject: &record.subject,
            persona: record.persona.as_deref(),
            success: record.success,
            outcome: &record.outcome,
            error_message: record.error_message.as_deref(),
            duration_ms: record.duration_ms,
            rows: record.rows,
            bytes: record.bytes,
            asset_id: record.asset_id.as_deref(),
            task_id: record.task_id.as_deref(),
            upstream_status: record.upstream_status.map(i32::from),
        }
    }
}

/// Writes one call record.
pub(crate) async fn insert(
    conn: &mut AsyncPgConnection,
    record: &NewCallRecord,
) -> Result<(), CatalogError> {
    diesel::insert_into(call_records::table)
        .values(NewCallRow::from(record))
        .execute(conn)
        .await
        .map_err(catalog_query_error)?;
    Ok(())
}

/// The record with this id.
pub(crate) async fn get(
    conn: &mut AsyncPgConnection,
    id: &str,
) -> Result<Option<CallRecord>, CatalogError> {
    call_records::table
        .find(id)
        .select(CallRow::as_select())
        .first(conn)
        .await
        .optional()
        .map_err(catalog_query_error)?
        .map(CallRecord::try_from)
        .transpose()
}

/// The newest records, of one subject or of everyone, newest first.
pub(crate) async fn recent(
    conn: &mut AsyncPgConnection,
    subject: Option<&str>,
    limit: u32,
) -> Result<Vec<CallRecord>, CatalogError> {
    let mut query = call_records::table
        .select(CallRow::as_select())
        .into_boxed();
    if let Some(subject) = subject {
        query = query.filter(call_records::subject.eq(subject));
    }
    query
        .order((call_records::created_at.desc(), call_records::id.desc()))
        .limit(shared::limit(limit))
        .load(conn)
        .await
        .map_err(catalog_query_error)?
        .into_iter()
        .map(CallRecord::try_from)
        .collect()
}
