//! The `result_spools` model on SQLite (synchronous, run on a blocking thread):
//! the [`SpoolStore`](docket_catalog::SpoolStore) statements. Times are the
//! caller's, in the one stored form, so they compare as text; the one writer
//! makes the capped insert atomic.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use docket_catalog::{CatalogError, NewSpool, Spool, SpoolProgress, SpoolStore};
use time::OffsetDateTime;

use super::SqliteStore;
use super::assets::stored_time;
use crate::columns::TextColumns;
use crate::error::catalog_error;
use crate::spools::{self, spool_columns, stored_count};
use crate::statement::statement;

type SpoolRow = spools::SpoolRow<TextColumns>;

/// Why a spool was not made.
enum Refused {
    Duplicate,
    Cap,
}

#[async_trait]
impl SpoolStore for SqliteStore {
    async fn create_spool(&self, spool: NewSpool, per_owner: u32) -> Result<(), CatalogError> {
        spool.validate()?;
        let created_at = stored_time(spool.created_at)?;
        let expires_at = stored_time(spool.expires_at)?;
        let refused = self
            .write(move |conn| {
                conn.immediate_transaction(|conn| {
                    let exists =
                        statement("SELECT count(*) AS count FROM result_spools WHERE id = ?1")
                            .bind::<Text, _>(&spool.id)
                            .get_result::<spools::CountRow>(conn)?;
                    if exists.count > 0 {
                        return Ok(Some(Refused::Duplicate));
                    }
                    let inserted = statement(
                        "INSERT INTO result_spools \
                             (id, owner, tool, connection, columns, created_at, updated_at, \
                              expires_at, source_id) \
                         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7, ?9 \
                          WHERE (SELECT count(*) FROM result_spools \
                                  WHERE owner = ?2 AND expires_at > ?6) < ?8",
                    )
                    .bind::<Text, _>(&spool.id)
                    .bind::<Text, _>(&spool.owner)
                    .bind::<Text, _>(&spool.tool)
                    .bind::<Text, _>(&spool.connection)
                    .bind::<Text, _>(spool.columns.to_string())
                    .bind::<Text, _>(&created_at)
                    .bind::<Text, _>(&expires_at)
                    .bind::<BigInt, _>(i64::from(per_owner))
                    .bind::<Nullable<Text>, _>(spool.source_id.as_deref())
                    .execute(conn)?;
                    Ok((inserted == 0).then_some(Refused::Cap))
                })
            })
            .await
            .map_err(catalog_error)?;
        match refused {
            None => Ok(()),
            Some(Refused::Duplicate) => Err(CatalogError::Duplicate),
            Some(Refused::Cap) => Err(CatalogError::LimitReached(per_owner)),
        }
    }

    async fn record_spool_progress(
        &self,
        id: &str,
        progress: &SpoolProgress,
    ) -> Result<bool, CatalogError> {
        let id = id.to_owned();
        let progress = progress.clone();
        let updated_at = stored_time(progress.updated_at)?;
        self.write(move |conn| {
            statement(
                "UPDATE result_spools SET chunks = ?2, row_count = ?3, byte_count = ?4, \
                        state = ?5, error = ?6, updated_at = ?7 \
                  WHERE id = ?1",
            )
            .bind::<Text, _>(&id)
            .bind::<BigInt, _>(i64::from(progress.chunks))
            .bind::<BigInt, _>(stored_count(progress.rows))
            .bind::<BigInt, _>(stored_count(progress.bytes))
            .bind::<Text, _>(progress.state.as_str())
            .bind::<Nullable<Text>, _>(progress.error.as_deref())
            .bind::<Text, _>(&updated_at)
            .execute(conn)
        })
        .await
        .map_err(catalog_error)
        .map(|updated| updated > 0)
    }

    async fn spool(&self, id: &str, now: OffsetDateTime) -> Result<Option<Spool>, CatalogError> {
        let id = id.to_owned();
        let now = stored_time(now)?;
        self.read(move |conn| {
            statement(concat!(
                "SELECT ",
                spool_columns!(),
                " FROM result_spools WHERE id = ?1 AND expires_at > ?2"
            ))
            .bind::<Text, _>(&id)
            .bind::<Text, _>(&now)
            .get_result::<SpoolRow>(conn)
            .optional()
        })
        .await
        .map_err(catalog_error)?
        .map(SpoolRow::into_spool)
        .transpose()
    }

    async fn delete_spool(&self, id: &str) -> Result<Option<Spool>, CatalogError> {
        let id = id.to_owned();
        self.write(move |conn| {
            statement(concat!(
                "DELETE FROM result_spools WHERE id = ?1 RETURNING ",
                spool_columns!()
            ))
            .bind::<Text, _>(&id)
            .get_result::<SpoolRow>(conn)
            .optional()
        })
        .await
        .map_err(catalog_error)?
        .map(SpoolRow::into_spool)
        .transpose()
    }

    async fn take_expired_spools(
        &self,
        now: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<Spool>, CatalogError> {
        let now = stored_time(now)?;
        self.write(move |conn| {
            statement(concat!(
                "DELETE FROM result_spools WHERE id IN ( \
                     SELECT id FROM result_spools WHERE expires_at <= ?1 \
                      ORDER BY expires_at LIMIT ?2) \
                 RETURNING ",
                spool_columns!()
            ))
            .bind::<Text, _>(&now)
            .bind::<BigInt, _>(i64::from(limit))
            .load::<SpoolRow>(conn)
        })
        .await
        .map_err(catalog_error)?
        .into_iter()
        .map(SpoolRow::into_spool)
        .collect()
    }
}
