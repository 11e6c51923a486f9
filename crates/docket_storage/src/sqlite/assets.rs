//! The `assets` model on SQLite: the row as read, and one query function per
//! [`AssetStore`](docket_catalog::AssetStore) operation (synchronous, run on a
//! blocking thread by [`SqliteStore`](super::SqliteStore)). The insert lives in
//! `assets/create.sql`.

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use time::OffsetDateTime;

use crate::columns::TextColumns;
use crate::rows::{self, asset_columns};
use crate::shared;
use crate::statement::statement;
use docket_catalog::{CatalogError, CreateOutcome, NewAsset, PageCursor};

/// An asset as read.
pub(crate) type AssetRow = rows::AssetRow<TextColumns>;

/// The owner's asset with an idempotency key (?1 owner, ?2 key).
const BY_IDEMPOTENCY_KEY: &str = concat!(
    "SELECT ",
    asset_columns!(),
    " FROM assets WHERE owner = ?1 AND idempotency_key = ?2"
);

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
        let inserted = statement(include_str!("assets/create.sql"))
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
        statement(BY_IDEMPOTENCY_KEY)
            .bind::<Text, _>(&asset.owner)
            .bind::<Nullable<Text>, _>(&asset.idempotency_key)
            .get_result(conn)
            .map(Recorded::Existing)
    })
}

/// The owner's asset recorded with `key`.
pub(crate) fn find_by_idempotency_key(
    conn: &mut SqliteConnection,
    owner: &str,
    key: &str,
) -> QueryResult<Option<AssetRow>> {
    statement(BY_IDEMPOTENCY_KEY)
        .bind::<Text, _>(owner)
        .bind::<Text, _>(key)
        .get_result(conn)
        .optional()
}

/// The asset with this id.
pub(crate) fn get(conn: &mut SqliteConnection, id: &str) -> QueryResult<Option<AssetRow>> {
    statement(concat!(
        "SELECT ",
        asset_columns!(),
        " FROM assets WHERE id = ?1"
    ))
    .bind::<Text, _>(id)
    .get_result(conn)
    .optional()
}

/// A cursor's time in the stored form.
pub(crate) fn stored_time(at: OffsetDateTime) -> Result<String, CatalogError> {
    super::sql::stored_time(at)
        .map_err(|err| CatalogError::Invalid(format!("a cursor time out of range: {err}")))
}

/// A page of assets, newest first; `before` is a cursor with its time in the
/// stored form. After a cursor, `(created_at, id) < (cursor)`: the first
/// condition bounds the index range, the second drops the cursor's own instant
/// up to its id. One statement per combination of filters.
pub(crate) fn list(
    conn: &mut SqliteConnection,
    owner: Option<&str>,
    limit: u32,
    before: Option<(&str, &str)>,
) -> QueryResult<Vec<AssetRow>> {
    let limit = shared::limit(limit);
    match (owner, before) {
        (None, None) => statement(concat!(
            "SELECT ",
            asset_columns!(),
            " FROM assets ORDER BY created_at DESC, id DESC LIMIT ?1"
        ))
        .bind::<BigInt, _>(limit)
        .load(conn),
        (Some(owner), None) => statement(concat!(
            "SELECT ",
            asset_columns!(),
            " FROM assets WHERE owner = ?1 ORDER BY created_at DESC, id DESC LIMIT ?2"
        ))
        .bind::<Text, _>(owner)
        .bind::<BigInt, _>(limit)
        .load(conn),
        (None, Some((created_at, id))) => statement(concat!(
            "SELECT ",
            asset_columns!(),
            " FROM assets WHERE created_at <= ?1 AND (created_at < ?1 OR id < ?2) \
              ORDER BY created_at DESC, id DESC LIMIT ?3"
        ))
        .bind::<Text, _>(created_at)
        .bind::<Text, _>(id)
        .bind::<BigInt, _>(limit)
        .load(conn),
        (Some(owner), Some((created_at, id))) => statement(concat!(
            "SELECT ",
            asset_columns!(),
            " FROM assets WHERE owner = ?1 \
                AND created_at <= ?2 AND (created_at < ?2 OR id < ?3) \
              ORDER BY created_at DESC, id DESC LIMIT ?4"
        ))
        .bind::<Text, _>(owner)
        .bind::<Text, _>(created_at)
        .bind::<Text, _>(id)
        .bind::<BigInt, _>(limit)
        .load(conn),
    }
}

/// Deletes the asset's row; whether it existed.
pub(crate) fn delete(conn: &mut SqliteConnection, id: &str) -> QueryResult<bool> {
    statement("DELETE FROM assets WHERE id = ?1")
        .bind::<Text, _>(id)
        .execute(conn)
        .map(|deleted| deleted == 1)
}

/// The cursor's parts as [`list`] takes them.
pub(crate) fn cursor(
    before: Option<&PageCursor>,
) -> Result<Option<(String, String)>, CatalogError> {
    before
        .map(|cursor| Ok((stored_time(cursor.created_at)?, cursor.id.clone())))
        .transpose()
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use super::*;
    use crate::sqlite::sql::time;

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
