//! The `assets` model on PostgreSQL: the row as read, and one async query
//! function per [`AssetStore`](docket_catalog::AssetStore) operation, each
//! taking the connection. The insert lives in `assets/create.sql`.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Jsonb, Nullable, Text};
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use serde_json::Value;
use time::OffsetDateTime;

use super::schema::assets;
use crate::error::catalog_query_error;
use crate::shared;
use docket_catalog::{Asset, AssetCursor, CatalogError, CreateOutcome, NewAsset};

/// How often an insert that met an idempotency conflict looks for the asset it
/// conflicted with and, finding it deleted in between, inserts again. Each
/// round needs a delete to land between two statements, so a third round is
/// already a pathological race; giving up then reports it instead of spinning.
const ATTEMPTS: usize = 3;

/// An asset as read.
#[derive(Debug, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = assets, check_for_backend(diesel::pg::Pg))]
struct AssetRow {
    id: String,
    owner: String,
    name: String,
    description: Option<String>,
    tags: Value,
    format: String,
    content_type: String,
    storage_key: String,
    size_bytes: i64,
    row_count: Option<i64>,
    connection: Option<String>,
    tool: String,
    idempotency_key: Option<String>,
    task_id: Option<String>,
    call_id: Option<String>,
    created_at: OffsetDateTime,
}

impl TryFrom<AssetRow> for Asset {
    type Error = CatalogError;

    fn try_from(row: AssetRow) -> Result<Self, CatalogError> {
        Ok(Asset {
            id: row.id,
            owner: row.owner,
            name: row.name,
            description: row.description,
            tags: shared::tags(row.tags)?,
            format: row.format,
            content_type: row.content_type,
            storage_key: row.storage_key,
            size_bytes: row.size_bytes,
            row_count: row.row_count,
            connection: row.connection,
            tool: row.tool,
            idempotency_key: row.idempotency_key,
            task_id: row.task_id,
            call_id: row.call_id,
            created_at: row.created_at,
        })
    }
}

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
        let inserted = diesel::sql_query(include_str!("assets/create.sql"))
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
    assets::table
        .filter(assets::owner.eq(owner))
        .filter(assets::idempotency_key.eq(key))
        .select(AssetRow::as_select())
        .first(conn)
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
    assets::table
        .find(id)
        .select(AssetRow::as_select())
        .first(conn)
        .await
        .optional()
        .map_err(catalog_query_error)?
        .map(Asset::try_from)
        .transpose()
}

/// A page of assets, newest first.
pub(crate) async fn list(
    conn: &mut AsyncPgConnection,
    owner: Option<&str>,
    limit: u32,
    before: Option<&AssetCursor>,
) -> Result<Vec<Asset>, CatalogError> {
    let mut query = assets::table.select(AssetRow::as_select()).into_boxed();
    if let Some(owner) = owner {
        query = query.filter(assets::owner.eq(owner));
    }
    if let Some(cursor) = before {
        // (created_at, id) < (cursor): the first condition bounds the index
        // range, the second drops the cursor's own instant up to its id.
        query = query
            .filter(assets::created_at.le(cursor.created_at))
            .filter(
                assets::created_at
                    .lt(cursor.created_at)
                    .or(assets::id.lt(&cursor.id)),
            );
    }
    query
        .order((assets::created_at.desc(), assets::id.desc()))
        .limit(shared::limit(limit))
        .load(conn)
        .await
        .map_err(catalog_query_error)?
        .into_iter()
        .map(Asset::try_from)
        .collect()
}

/// Deletes the asset's row; whether it existed.
pub(crate) async fn delete(conn: &mut AsyncPgConnection, id: &str) -> Result<bool, CatalogError> {
    let deleted = diesel::delete(assets::table.find(id))
        .execute(conn)
        .await
        .map_err(catalog_query_error)?;
    Ok(deleted == 1)
}
