//! The `result_spools` model on PostgreSQL: the
//! [`SpoolStore`](docket_catalog::SpoolStore) statements. Rows are
//! [`crate::spools`]'; times are the caller's, as the trait says.

use async_trait::async_trait;
use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use diesel_async::RunQueryDsl;
use docket_catalog::{CatalogError, NewSpool, Spool, SpoolProgress, SpoolStore};
use time::OffsetDateTime;

use super::PgStore;
use crate::columns::PgColumns;
use crate::error::catalog_query_error;
use crate::spools::{self, spool_columns, stored_count};
use crate::statement::statement;

type SpoolRow = spools::SpoolRow<PgColumns>;

#[async_trait]
impl SpoolStore for PgStore {
    async fn create_spool(&self, spool: NewSpool, per_owner: u32) -> Result<(), CatalogError> {
        spool.validate()?;
        // The cap and the insert in one statement: of two made at once by one
        // owner at the cap, each sees the other only once committed, so an owner
        // may pass the cap by the spools it makes at the same instant, never more.
        let inserted = statement(
            "INSERT INTO result_spools \
                 (id, owner, tool, connection, columns, created_at, updated_at, expires_at, \
                  source_id) \
             SELECT $1, $2, $3, $4, $5, $6, $6, $7, $9 \
              WHERE (SELECT count(*) FROM result_spools \
                      WHERE owner = $2 AND expires_at > $6) < $8 \
             ON CONFLICT (id) DO NOTHING \
             RETURNING id",
        )
        .bind::<Text, _>(&spool.id)
        .bind::<Text, _>(&spool.owner)
        .bind::<Text, _>(&spool.tool)
        .bind::<Text, _>(&spool.connection)
        .bind::<Text, _>(spool.columns.to_string())
        .bind::<Timestamptz, _>(spool.created_at)
        .bind::<Timestamptz, _>(spool.expires_at)
        .bind::<BigInt, _>(i64::from(per_owner))
        .bind::<Nullable<Text>, _>(spool.source_id.as_deref())
        .execute(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)?;
        if inserted == 1 {
            return Ok(());
        }
        // Refused: a used id, or the cap.
        let exists = statement("SELECT count(*) AS count FROM result_spools WHERE id = $1")
            .bind::<Text, _>(&spool.id)
            .get_result::<spools::CountRow>(&mut *self.catalog_conn().await?)
            .await
            .map_err(catalog_query_error)?;
        Err(if exists.count > 0 {
            CatalogError::Duplicate
        } else {
            CatalogError::LimitReached(per_owner)
        })
    }

    async fn record_spool_progress(
        &self,
        id: &str,
        progress: &SpoolProgress,
    ) -> Result<bool, CatalogError> {
        statement(
            "UPDATE result_spools SET chunks = $2, row_count = $3, byte_count = $4, \
                    state = $5, error = $6, updated_at = $7 \
              WHERE id = $1",
        )
        .bind::<Text, _>(id)
        .bind::<BigInt, _>(i64::from(progress.chunks))
        .bind::<BigInt, _>(stored_count(progress.rows))
        .bind::<BigInt, _>(stored_count(progress.bytes))
        .bind::<Text, _>(progress.state.as_str())
        .bind::<Nullable<Text>, _>(progress.error.as_deref())
        .bind::<Timestamptz, _>(progress.updated_at)
        .execute(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)
        .map(|updated| updated > 0)
    }

    async fn spool(&self, id: &str, now: OffsetDateTime) -> Result<Option<Spool>, CatalogError> {
        statement(concat!(
            "SELECT ",
            spool_columns!(),
            " FROM result_spools WHERE id = $1 AND expires_at > $2"
        ))
        .bind::<Text, _>(id)
        .bind::<Timestamptz, _>(now)
        .get_result::<SpoolRow>(&mut *self.catalog_conn().await?)
        .await
        .optional()
        .map_err(catalog_query_error)?
        .map(SpoolRow::into_spool)
        .transpose()
    }

    async fn delete_spool(&self, id: &str) -> Result<Option<Spool>, CatalogError> {
        statement(concat!(
            "DELETE FROM result_spools WHERE id = $1 RETURNING ",
            spool_columns!()
        ))
        .bind::<Text, _>(id)
        .get_result::<SpoolRow>(&mut *self.catalog_conn().await?)
        .await
        .optional()
        .map_err(catalog_query_error)?
        .map(SpoolRow::into_spool)
        .transpose()
    }

    async fn take_expired_spools(
        &self,
        now: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<Spool>, CatalogError> {
        // SKIP LOCKED: replicas sweeping at once take different rows.
        statement(concat!(
            "DELETE FROM result_spools WHERE id IN ( \
                 SELECT id FROM result_spools WHERE expires_at <= $1 \
                  ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) \
             RETURNING ",
            spool_columns!()
        ))
        .bind::<Timestamptz, _>(now)
        .bind::<BigInt, _>(i64::from(limit))
        .load::<SpoolRow>(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)?
        .into_iter()
        .map(SpoolRow::into_spool)
        .collect()
    }
}
