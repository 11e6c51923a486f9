//! The `link_keys` and `asset_shares` models on PostgreSQL: the
//! [`LinkStore`](docket_catalog::LinkStore) statements. Rows are
//! [`crate::links`]' ; times are the caller's, as the trait says.

use async_trait::async_trait;
use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, RunQueryDsl};
use docket_catalog::links::MAX_SHARE_PAGE;
use docket_catalog::{CatalogError, LinkKey, LinkStore, NewShare, Share};
use time::OffsetDateTime;

use super::PgStore;
use crate::columns::PgColumns;
use crate::error::catalog_query_error;
use crate::links::{self, link_key_columns, share_columns};
use crate::statement::statement;

type LinkKeyRow = links::LinkKeyRow<PgColumns>;
type ShareRow = links::ShareRow<PgColumns>;

/// A count of rows a statement touched.
fn touched(rows: usize) -> u64 {
    u64::try_from(rows).unwrap_or(u64::MAX)
}

#[async_trait]
impl LinkStore for PgStore {
    async fn link_keys(&self) -> Result<Vec<LinkKey>, CatalogError> {
        statement(concat!(
            "SELECT ",
            link_key_columns!(),
            " FROM link_keys ORDER BY position DESC"
        ))
        .load::<LinkKeyRow>(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)?
        .into_iter()
        .map(LinkKeyRow::into_key)
        .collect()
    }

    async fn add_link_key(
        &self,
        key: &LinkKey,
        expected_newest: Option<&str>,
    ) -> Result<bool, CatalogError> {
        key.validate()?;
        // Inserted only while the newest key is the expected one; of replicas
        // that saw the same newest key, the unique `replaces` lets one in.
        statement(
            "INSERT INTO link_keys (kid, replaces, secret, created_at) \
             SELECT $1, coalesce($4, ''), $2, $3 \
              WHERE (SELECT kid FROM link_keys ORDER BY position DESC LIMIT 1) \
                    IS NOT DISTINCT FROM $4 \
             ON CONFLICT DO NOTHING",
        )
        .bind::<Text, _>(&key.kid)
        .bind::<Text, _>(&key.secret)
        .bind::<Timestamptz, _>(key.created_at)
        .bind::<Nullable<Text>, _>(expected_newest)
        .execute(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)
        .map(|inserted| inserted > 0)
    }

    async fn remove_link_keys_before(
        &self,
        created_before: OffsetDateTime,
    ) -> Result<u64, CatalogError> {
        statement(
            "DELETE FROM link_keys WHERE created_at < $1 \
               AND position < (SELECT max(position) FROM link_keys)",
        )
        .bind::<Timestamptz, _>(created_before)
        .execute(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)
        .map(touched)
    }

    async fn create_share(
        &self,
        share: &NewShare,
        owner_limit: u32,
    ) -> Result<Share, CatalogError> {
        share.validate()?;
        let people = links::people_text(&share.audience);
        let conn = &mut *self.catalog_conn().await?;
        // The owner's creates take turns on a transaction-scoped advisory lock,
        // so the count each one reads includes every create committed before
        // it: racing creates never pass the limit.
        let inserted = conn
            .transaction(async |conn| {
                statement("SELECT pg_advisory_xact_lock(hashtext('asset_shares'), hashtext($1))")
                    .bind::<Text, _>(&share.owner)
                    .execute(conn)
                    .await?;
                statement(concat!(
                    "INSERT INTO asset_shares \
                     (id, asset_id, owner, audience, people, expires_at, created_at) \
                     SELECT $1, $2, $3, $4, $5, $6, $7 \
                      WHERE (SELECT count(*) FROM asset_shares WHERE owner = $3) < $8 \
                     RETURNING ",
                    share_columns!()
                ))
                .bind::<Text, _>(&share.id)
                .bind::<Text, _>(&share.asset_id)
                .bind::<Text, _>(&share.owner)
                .bind::<Text, _>(share.audience.kind())
                .bind::<Text, _>(&people)
                .bind::<Timestamptz, _>(share.expires_at)
                .bind::<Timestamptz, _>(share.created_at)
                .bind::<BigInt, _>(i64::from(owner_limit))
                .get_result::<ShareRow>(conn)
                .await
                .optional()
            })
            .await
            .map_err(catalog_query_error)?;
        match inserted {
            Some(row) => row.into_share(),
            None => Err(CatalogError::LimitReached(owner_limit)),
        }
    }

    async fn share(&self, id: &str) -> Result<Option<Share>, CatalogError> {
        statement(concat!(
            "SELECT ",
            share_columns!(),
            " FROM asset_shares WHERE id = $1"
        ))
        .bind::<Text, _>(id)
        .get_result::<ShareRow>(&mut *self.catalog_conn().await?)
        .await
        .optional()
        .map_err(catalog_query_error)?
        .map(ShareRow::into_share)
        .transpose()
    }

    async fn list_shares(
        &self,
        owner: &str,
        asset_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Share>, CatalogError> {
        statement(concat!(
            "SELECT ",
            share_columns!(),
            " FROM asset_shares WHERE owner = $1 AND ($2::text IS NULL OR asset_id = $2) \
             ORDER BY created_at DESC, id DESC LIMIT $3"
        ))
        .bind::<Text, _>(owner)
        .bind::<Nullable<Text>, _>(asset_id)
        .bind::<BigInt, _>(i64::from(limit.min(MAX_SHARE_PAGE)))
        .load::<ShareRow>(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)?
        .into_iter()
        .map(ShareRow::into_share)
        .collect()
    }

    async fn revoke_share(&self, id: &str, now: OffsetDateTime) -> Result<bool, CatalogError> {
        statement("UPDATE asset_shares SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL")
            .bind::<Text, _>(id)
            .bind::<Timestamptz, _>(now)
            .execute(&mut *self.catalog_conn().await?)
            .await
            .map_err(catalog_query_error)
            .map(|updated| updated > 0)
    }

    async fn record_open(
        &self,
        id: &str,
        now: OffsetDateTime,
    ) -> Result<Option<Share>, CatalogError> {
        // The check that it is live and the count are one statement, so a
        // revoke that committed first is never counted past.
        statement(concat!(
            "UPDATE asset_shares SET open_count = open_count + 1, last_opened_at = $2 \
              WHERE id = $1 AND revoked_at IS NULL AND expires_at > $2 RETURNING ",
            share_columns!()
        ))
        .bind::<Text, _>(id)
        .bind::<Timestamptz, _>(now)
        .get_result::<ShareRow>(&mut *self.catalog_conn().await?)
        .await
        .optional()
        .map_err(catalog_query_error)?
        .map(ShareRow::into_share)
        .transpose()
    }

    async fn delete_ended_shares(
        &self,
        cutoff: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        statement(
            "DELETE FROM asset_shares WHERE id IN (\
                 SELECT id FROM asset_shares WHERE expires_at < $1 OR revoked_at < $1 \
                  LIMIT $2 FOR UPDATE SKIP LOCKED)",
        )
        .bind::<Timestamptz, _>(cutoff)
        .bind::<BigInt, _>(i64::from(limit))
        .execute(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)
        .map(touched)
    }
}
