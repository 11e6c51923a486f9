//! The `assets` model on PostgreSQL: the row as read, and one async query
//! function per [`AssetStore`](docket_catalog::AssetStore) operation, each
//! taking the connection. The insert lives in `assets/create.sql`.

use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncPgConnection, RunQueryDsl};

use crate::columns::PgColumns;
use crate::error::catalog_query_error;
use crate::rows::{self, asset_columns};
use crate::shared;
use crate::statement::statement;
use docket_catalog::{Asset, CatalogError, CreateOutcome, NewAsset, PageCursor};

type AssetRow = rows::AssetRow<PgColumns>;

/// How often an insert that met an idempotency conflict looks for the asset it
/// conflicted with and, finding it deleted in between, inserts again. Each
/// round needs a delete to land between two statements, so a third round is
/// already a pathological race; giving up then reports it instead of spinning.
const ATTEMPTS: usize = 3;

/// Records `asset`, or returns the owner's asset with its idempotency key.
///
/// Two statements, not one: a single `INSERT … ON CONFLICT DO NOTHING` that
/// also selects the existing row would read it with the snapshot taken before
/// the statement waited on a concurrent insert, and find nothing. The lookup
/// that follows a conflict runs with a fresh snapshot, which sees the winner.
pub(crate) async fn create_or_get(
    conn: &mut AsyncPgConnection,
    asset: &NewAsset,
) -> Result<CreateOutcome, CatalogError> {
    let tags = shared::tags_json(&asset.tags);
    for _ in 0..ATTEMPTS {
        let inserted = statement(include_str!("assets/create.sql"))
            .bind::<Text, _>(&asset.id)
            .bind::<Text, _>(&asset.owner)
            .bind::<Text, _>(&asset.name)
            .bind::<Nullable<Text>, _>(&asset.description)
            .bind::<Jsonb, _>(&tags)
            .bind::<Text, _>(&asset.format)
            .bind::<Text, _>(&asset.content_type)
            .bind::<Text, _>(&asset.storage_key)
            .bind::<BigInt, _>(asset.size_bytes)
            .bind::<Nullable<BigInt>, _>(asset.row_count)
            .bind::<Nullable<Text>, _>(&asset.connection)
            .bind::<Text, _>(&asset.tool)
            .bind::<Nullable<Text>, _>(&asset.idempotency_key)
            .bind::<Nullable<Text>, _>(&asset.task_id)
            .bind::<Nullable<Text>, _>(&asset.call_id)
            .get_result::<AssetRow>(conn)
            .await
            .optional()
            .map_err(catalog_query_error)?;
        if let Some(row) = inserted {
            return Ok(CreateOutcome::Created(row.try_into()?));
        }
        // Only the idempotency index is skipped on conflict, so no row means
        // the asset has a key.
        let Some(key) = asset.idempotency_key.as_deref() else {
            return Err(CatalogError::Unavailable(
                "the asset insert returned no row".into(),
            ));
        };
        if let Some(existing) = find_by_idempotency_key(conn, &asset.owner, key).await? {
            return Ok(CreateOutcome::Existing(existing));
        }
    }
    Err(CatalogError::Unavailable(format!(
        "the asset with this idempotency key was deleted and recreated {ATTEMPTS} times \
         while this one was recorded; try again"
    )))
}

/// The owner's asset recorded with `key`.
pub(crate) async fn find_by_idempotency_key(
    conn: &mut AsyncPgConnection,
    owner: &str,
    key: &str,
) -> Result<Option<Asset>, CatalogError> {
    statement(concat!(
        "SELECT ",
        asset_columns!(),
        " FROM assets WHERE owner = $1 AND idempotency_key = $2"
    ))
    .bind::<Text, _>(owner)
    .bind::<Text, _>(key)
    .get_result::<AssetRow>(conn)
    .await
    .optional()
    .map_err(catalog_query_error)?
    .map(Asset::try_from)
    .transpose()
}

/// The asset with this id.
pub(crate) async fn get(
    conn: &mut AsyncPgConnection,
    id: &str,
) -> Result<Option<Asset>, CatalogError> {
    statement(concat!(
        "SELECT ",
        asset_columns!(),
        " FROM assets WHERE id = $1"
    ))
    .bind::<Text, _>(id)
    .get_result::<AssetRow>(conn)
    .await
    .optional()
    .map_err(catalog_query_error)?
    .map(Asset::try_from)
    .transpose()
}

/// A page of assets, newest first. After a cursor, `(created_at, id) <
/// (cursor)`: the first condition bounds the index range, the second drops the
/// cursor's own instant up to its id. One statement per combination of
/// filters, so each is planned for what it filters on.
pub(crate) async fn list(
    conn: &mut AsyncPgConnection,
    owner: Option<&str>,
    limit: u32,
    before: Option<&PageCursor>,
) -> Result<Vec<Asset>, CatalogError> {
    let limit = shared::limit(limit);
    let rows = match (owner, before) {
        (None, None) => {
            statement(concat!(
                "SELECT ",
                asset_columns!(),
                " FROM assets ORDER BY created_at DESC, id DESC LIMIT $1"
            ))
            .bind::<BigInt, _>(limit)
            .load::<AssetRow>(conn)
            .await
        }
        (Some(owner), None) => {
            statement(concat!(
                "SELECT ",
                asset_columns!(),
                " FROM assets WHERE owner = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
            ))
            .bind::<Text, _>(owner)
            .bind::<BigInt, _>(limit)
            .load::<AssetRow>(conn)
            .await
        }
        (None, Some(cursor)) => {
            statement(concat!(
                "SELECT ",
                asset_columns!(),
                " FROM assets WHERE created_at <= $1 AND (created_at < $1 OR id < $2) \
                  ORDER BY created_at DESC, id DESC LIMIT $3"
            ))
            .bind::<Timestamptz, _>(cursor.created_at)
            .bind::<Text, _>(&cursor.id)
            .bind::<BigInt, _>(limit)
            .load::<AssetRow>(conn)
            .await
        }
        (Some(owner), Some(cursor)) => {
            statement(concat!(
                "SELECT ",
                asset_columns!(),
                " FROM assets WHERE owner = $1 \
                    AND created_at <= $2 AND (created_at < $2 OR id < $3) \
                  ORDER BY created_at DESC, id DESC LIMIT $4"
            ))
            .bind::<Text, _>(owner)
            .bind::<Timestamptz, _>(cursor.created_at)
            .bind::<Text, _>(&cursor.id)
            .bind::<BigInt, _>(limit)
            .load::<AssetRow>(conn)
            .await
        }
    };
    rows::assets(rows.map_err(catalog_query_error)?)
}

/// Deletes the asset's row; whether it existed.
pub(crate) async fn delete(conn: &mut AsyncPgConnection, id: &str) -> Result<bool, CatalogError> {
    let deleted = statement("DELETE FROM assets WHERE id = $1")
        .bind::<Text, _>(id)
        .execute(conn)
        .await
        .map_err(catalog_query_error)?;
    Ok(deleted == 1)
}
