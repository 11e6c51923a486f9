//! The `assets` model on SQLite: the row as read, and one query function per
//! [`AssetStore`](docket_catalog::AssetStore) operation (synchronous, run on a
//! blocking thread by [`SqliteStore`](super::SqliteStore)). The insert lives in
//! `assets/create.sql`.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::sqlite::Sqlite;
use time::format_description::FormatItem;
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};

use super::schema::assets;
use super::sql::{json, time};
use crate::error::catalog_error;
use crate::shared;
use docket_catalog::{Asset, AssetCursor, CatalogError, CreateOutcome, NewAsset};

/// The one form SQLite stores times in (`strftime('%Y-%m-%dT%H:%M:%fZ')`), so a
/// cursor's time compares as text exactly as the stored times do.
const STORED_TIME: &[FormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");

/// An asset as read (tags as JSON text, its time as text).
#[derive(Debug, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = assets, check_for_backend(Sqlite))]
pub(crate) struct AssetRow {
    id: String,
    owner: String,
    name: String,
    description: Option<String>,
    tags: String,
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
    created_at: String,
}

impl TryFrom<AssetRow> for Asset {
    type Error = CatalogError;

    fn try_from(row: AssetRow) -> Result<Self, CatalogError> {
        Ok(Asset {
            tags: shared::tags(json(&row.tags).map_err(catalog_error)?)?,
            created_at: time(&row.created_at).map_err(catalog_error)?,
            id: row.id,
            owner: row.owner,
            name: row.name,
            description: row.description,
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
        })
    }
}

/// What [`create_or_get`] did, before the row is read into an [`Asset`].
pub(crate) enum Recorded {
    /// The row inserted.
    Created(AssetRow),
    /// The owner's row with the same idempotency key.
    Existing(AssetRow),
}

impl TryFrom<Recorded> for CreateOutcome {
    type Error = CatalogError;

    fn try_from(recorded: Recorded) -> Result<Self, CatalogError> {
        Ok(match recorded {
            Recorded::Created(row) => CreateOutcome::Created(row.try_into()?),
            Recorded::Existing(row) => CreateOutcome::Existing(row.try_into()?),
        })
    }
}

/// Records `asset`, or reads the owner's asset with its idempotency key, in one
/// immediate transaction: no other writer comes between the two.
pub(crate) fn create_or_get(
    conn: &mut SqliteConnection,
    asset: &NewAsset,
) -> QueryResult<Recorded> {
    let tags = shared::tags_json(&asset.tags).to_string();
    conn.immediate_transaction(|conn| {
        let inserted = diesel::sql_query(include_str!("assets/create.sql"))
            .bind::<Text, _>(&asset.id)
            .bind::<Text, _>(&asset.owner)
            .bind::<Text, _>(&asset.name)
            .bind::<Nullable<Text>, _>(&asset.description)
            .bind::<Text, _>(&tags)
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
            .optional()?;
        if let Some(row) = inserted {
            return Ok(Recorded::Created(row));
        }
        // Only the idempotency index is skipped on conflict, and inside this
        // transaction the row it conflicted with is still there.
        assets::table
            .filter(assets::owner.eq(&asset.owner))
            .filter(assets::idempotency_key.eq(&asset.idempotency_key))
            .select(AssetRow::as_select())
            .first(conn)
            .map(Recorded::Existing)
    })
}

/// The owner's asset recorded with `key`.
pub(crate) fn find_by_idempotency_key(
    conn: &mut SqliteConnection,
    owner: &str,
    key: &str,
) -> QueryResult<Option<AssetRow>> {
    assets::table
        .filter(assets::owner.eq(owner))
        .filter(assets::idempotency_key.eq(key))
        .select(AssetRow::as_select())
        .first(conn)
        .optional()
}

/// The asset with this id.
pub(crate) fn get(conn: &mut SqliteConnection, id: &str) -> QueryResult<Option<AssetRow>> {
    assets::table
        .find(id)
        .select(AssetRow::as_select())
        .first(conn)
        .optional()
}

/// A cursor's time in the stored form.
pub(crate) fn stored_time(at: OffsetDateTime) -> Result<String, CatalogError> {
    at.to_offset(UtcOffset::UTC)
        .format(STORED_TIME)
        .map_err(|err| CatalogError::Invalid(format!("a cursor time out of range: {err}")))
}

/// A page of assets, newest first; `before` is a cursor with its time in the
/// stored form.
pub(crate) fn list(
    conn: &mut SqliteConnection,
    owner: Option<&str>,
    limit: u32,
    before: Option<(&str, &str)>,
) -> QueryResult<Vec<AssetRow>> {
    let mut query = assets::table.select(AssetRow::as_select()).into_boxed();
    if let Some(owner) = owner {
        query = query.filter(assets::owner.eq(owner));
    }
    if let Some((created_at, id)) = before {
        // (created_at, id) < (cursor): the first condition bounds the index
        // range, the second drops the cursor's own instant up to its id.
        query = query
            .filter(assets::created_at.le(created_at))
            .filter(assets::created_at.lt(created_at).or(assets::id.lt(id)));
    }
    query
        .order((assets::created_at.desc(), assets::id.desc()))
        .limit(shared::limit(limit))
        .load(conn)
}

/// Deletes the asset's row; whether it existed.
pub(crate) fn delete(conn: &mut SqliteConnection, id: &str) -> QueryResult<bool> {
    diesel::delete(assets::table.find(id))
        .execute(conn)
        .map(|deleted| deleted == 1)
}

/// Rows read into assets.
pub(crate) fn assets(rows: Vec<AssetRow>) -> Result<Vec<Asset>, CatalogError> {
    rows.into_iter().map(Asset::try_from).collect()
}

/// The cursor's parts as [`list`] takes them.
pub(crate) fn cursor(
    before: Option<&AssetCursor>,
) -> Result<Option<(String, String)>, CatalogError> {
    before
        .map(|cursor| Ok((stored_time(cursor.created_at)?, cursor.id.clone())))
        .transpose()
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;

    #[test]
    fn cursor_times_take_the_stored_form() {
        assert_eq!(
            stored_time(datetime!(2026-12-01 10:11:12.345 UTC)).expect("time"),
            "2026-12-01T10:11:12.345Z"
        );
        assert_eq!(
            stored_time(datetime!(2026-12-01 12:00:00.5 +02:00)).expect("time"),
            "2026-12-01T10:00:00.500Z"
        );
        let stored = "2026-01-02T03:04:05.067Z";
        assert_eq!(
            stored_time(time(stored).expect("parse")).expect("time"),
            stored
        );
    }
}
