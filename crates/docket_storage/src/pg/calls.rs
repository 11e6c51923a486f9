//! The `call_records` model on PostgreSQL: the statements that write and read
//! it. The row as read is [`rows::CallRow`].

use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Jsonb, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::columns::PgColumns;
use crate::error::catalog_query_error;
use crate::rows::{self, bind_new_call, call_columns};
use crate::shared;
use crate::statement::statement;
use docket_catalog::{CallRecord, CatalogError, NewCallRecord};

type CallRow = rows::CallRow<PgColumns>;

/// Writes one call record; `created_at` comes from the database.
pub(crate) async fn insert(
    conn: &mut AsyncPgConnection,
    record: &NewCallRecord,
) -> Result<(), CatalogError> {
    bind_new_call!(
        statement(
            "INSERT INTO call_records (id, kind, tool, connection, statement, subject, persona, \
             success, outcome, error_message, duration_ms, rows, bytes, asset_id, task_id, \
             upstream_status, engine_user, upstream_ids) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, \
                     $17, $18)",
        ),
        record
    )
    .bind::<Jsonb, _>(shared::upstream_ids_json(&record.upstream_ids))
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
    statement(concat!(
        "SELECT ",
        call_columns!(),
        " FROM call_records WHERE id = $1"
    ))
    .bind::<Text, _>(id)
    .get_result::<CallRow>(conn)
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
    let limit = shared::limit(limit);
    let rows = match subject {
        Some(subject) => {
            statement(concat!(
                "SELECT ",
                call_columns!(),
                " FROM call_records WHERE subject = $1 \
                  ORDER BY created_at DESC, id DESC LIMIT $2"
            ))
            .bind::<Text, _>(subject)
            .bind::<BigInt, _>(limit)
            .load::<CallRow>(conn)
            .await
        }
        None => {
            statement(concat!(
                "SELECT ",
                call_columns!(),
                " FROM call_records ORDER BY created_at DESC, id DESC LIMIT $1"
            ))
            .bind::<BigInt, _>(limit)
            .load::<CallRow>(conn)
            .await
        }
    };
    rows::calls(rows.map_err(catalog_query_error)?)
}
