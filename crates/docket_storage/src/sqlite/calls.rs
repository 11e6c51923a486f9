//! The `call_records` model on SQLite: the statements that write and read it
//! (synchronous, run on a blocking thread). The row as read is [`rows::CallRow`].

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};

use crate::columns::TextColumns;
use crate::rows::{self, bind_new_call, call_columns};
use crate::shared;
use crate::statement::statement;
use docket_catalog::NewCallRecord;

/// A call record as read.
pub(crate) type CallRow = rows::CallRow<TextColumns>;

/// Writes one call record; `created_at` comes from the database.
pub(crate) fn insert(conn: &mut SqliteConnection, record: &NewCallRecord) -> QueryResult<()> {
    bind_new_call!(
        statement(
            "INSERT INTO call_records (id, kind, tool, connection, statement, subject, persona, \
             success, outcome, error_message, duration_ms, rows, bytes, asset_id, task_id, \
             upstream_status, engine_user, upstream_ids) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, \
                     ?17, ?18)",
        ),
        record
    )
    .bind::<Text, _>(shared::upstream_ids_json(&record.upstream_ids).to_string())
    .execute(conn)
    .map(drop)
}

/// The record with this id.
pub(crate) fn get(conn: &mut SqliteConnection, id: &str) -> QueryResult<Option<CallRow>> {
    statement(concat!(
        "SELECT ",
        call_columns!(),
        " FROM call_records WHERE id = ?1"
    ))
    .bind::<Text, _>(id)
    .get_result::<CallRow>(conn)
    .optional()
}

/// The newest records, of one subject or of everyone, newest first.
pub(crate) fn recent(
    conn: &mut SqliteConnection,
    subject: Option<&str>,
    limit: u32,
) -> QueryResult<Vec<CallRow>> {
    let limit = shared::limit(limit);
    match subject {
        Some(subject) => statement(concat!(
            "SELECT ",
            call_columns!(),
            " FROM call_records WHERE subject = ?1 \
                  ORDER BY created_at DESC, id DESC LIMIT ?2"
        ))
        .bind::<Text, _>(subject)
        .bind::<BigInt, _>(limit)
        .load::<CallRow>(conn),
        None => statement(concat!(
            "SELECT ",
            call_columns!(),
            " FROM call_records ORDER BY created_at DESC, id DESC LIMIT ?1"
        ))
        .bind::<BigInt, _>(limit)
        .load::<CallRow>(conn),
    }
}
