//! The `link_keys` and `asset_shares` models on SQLite (synchronous, run on a
//! blocking thread): the [`LinkStore`](docket_catalog::LinkStore) statements.
//! Times are the caller's, in the one stored form, so they compare as text; the
//! one writer makes each compare-and-set and each capped insert atomic.

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Nullable, Text};
use docket_catalog::links::MAX_SHARE_PAGE;
use docket_catalog::{CatalogError, LinkKey, LinkStore, NewShare, Share};
use time::OffsetDateTime;

use super::SqliteStore;
use super::assets::stored_time;
use crate::columns::TextColumns;
use crate::error::catalog_error;
use crate::links::{self, link_key_columns, share_columns};
use crate::statement::statement;

type LinkKeyRow = links::LinkKeyRow<TextColumns>;
type ShareRow = links::ShareRow<TextColumns>;

/// A count of rows a statement touched.
fn touched(rows: usize) -> u64 {
    u64::try_from(rows).unwrap_or(u64::MAX)
}

#[async_trait]
impl LinkStore for SqliteStore {
    async fn link_keys(&self) -> Result<Vec<LinkKey>, CatalogError> {
        self.read(|conn| {
            statement(concat!(
                "SELECT ",
                link_key_columns!(),
                " FROM link_keys ORDER BY position DESC"
            ))
            .load::<LinkKeyRow>(conn)
        })
        .await
        .map_err(catalog_error)?
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
        let kid = key.kid.clone();
        let secret = key.secret.clone();
        let created_at = stored_time(key.created_at)?;
        let expected = expected_newest.map(str::to_owned);
        self.write(move |conn| {
            statement(
                "INSERT OR IGNORE INTO link_keys (kid, replaces, secret, created_at) \
                 SELECT ?1, coalesce(?4, ''), ?2, ?3 \
                  WHERE (SELECT kid FROM link_keys ORDER BY position DESC LIMIT 1) IS ?4",
            )
            .bind::<Text, _>(&kid)
            .bind::<Text, _>(&secret)
            .bind::<Text, _>(&created_at)
            .bind::<Nullable<Text>, _>(expected.as_deref())
            .execute(conn)
        })
        .await
        .map_err(catalog_error)
        .map(|inserted| inserted > 0)
    }

    async fn remove_link_keys_before(
        &self,
        created_before: OffsetDateTime,
    ) -> Result<u64, CatalogError> {
        let cutoff = stored_time(created_before)?;
        self.write(move |conn| {
            statement(
                "DELETE FROM link_keys WHERE created_at < ?1 \
                   AND position < (SELECT max(position) FROM link_keys)",
            )
            .bind::<Text, _>(&cutoff)
            .execute(conn)
        })
        .await
        .map_err(catalog_error)
        .map(touched)
    }

    async fn create_share(
        &self,
        share: &NewShare,
        owner_limit: u32,
    ) -> Result<Share, CatalogError> {
        share.validate()?;
        let people = links::people_text(&share.audience);
        let expires_at = stored_time(share.expires_at)?;
        let created_at = stored_time(share.created_at)?;
        let share = share.clone();
        let inserted = self
            .write(move |conn| {
                statement(concat!(
                    "INSERT INTO asset_shares \
                     (id, asset_id, owner, audience, people, expires_at, created_at) \
                     SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7 \
                      WHERE (SELECT count(*) FROM asset_shares WHERE owner = ?3) < ?8 \
                     RETURNING ",
                    share_columns!()
                ))
                .bind::<Text, _>(&share.id)
                .bind::<Text, _>(&share.asset_id)
                .bind::<Text, _>(&share.owner)
                .bind::<Text, _>(share.audience.kind())
                .bind::<Text, _>(&people)
                .bind::<Text, _>(&expires_at)
                .bind::<Text, _>(&created_at)
                .bind::<BigInt, _>(i64::from(owner_limit))
                .get_result::<ShareRow>(conn)
                .optional()
            })
            .await
            .map_err(catalog_error)?;
        match inserted {
            Some(row) => row.into_share(),
            None => Err(CatalogError::LimitReached(owner_limit)),
        }
    }

    async fn share(&self, id: &str) -> Result<Option<Share>, CatalogError> {
        let id = id.to_owned();
        self.read(move |conn| {
            statement(concat!(
                "SELECT ",
                share_columns!(),
                " FROM asset_shares WHERE id = ?1"
            ))
            .bind::<Text, _>(&id)
            .get_result::<ShareRow>(conn)
            .optional()
        })
        .await
        .map_err(catalog_error)?
        .map(ShareRow::into_share)
        .transpose()
    }

    async fn list_shares(
        &self,
        owner: &str,
        asset_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Share>, CatalogError> {
        let owner = owner.to_owned();
        let asset_id = asset_id.map(str::to_owned);
        self.read(move |conn| {
            statement(concat!(
                "SELECT ",
                share_columns!(),
                " FROM asset_shares WHERE owner = ?1 AND (?2 IS NULL OR asset_id = ?2) \
                 ORDER BY created_at DESC, id DESC LIMIT ?3"
            ))
            .bind::<Text, _>(&owner)
            .bind::<Nullable<Text>, _>(asset_id.as_deref())
            .bind::<BigInt, _>(i64::from(limit.min(MAX_SHARE_PAGE)))
            .load::<ShareRow>(conn)
        })
        .await
        .map_err(catalog_error)?
        .into_iter()
        .map(ShareRow::into_share)
        .collect()
    }

    async fn revoke_share(&self, id: &str, now: OffsetDateTime) -> Result<bool, CatalogError> {
        let id = id.to_owned();
        let now = stored_time(now)?;
        self.write(move |conn| {
            statement(
                "UPDATE asset_shares SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
            )
            .bind::<Text, _>(&id)
            .bind::<Text, _>(&now)
            .execute(conn)
        })
        .await
        .map_err(catalog_error)
        .map(|updated| updated > 0)
    }

    async fn record_open(
        &self,
        id: &str,
        now: OffsetDateTime,
    ) -> Result<Option<Share>, CatalogError> {
        let id = id.to_owned();
        let now = stored_time(now)?;
        self.write(move |conn| {
            statement(concat!(
                "UPDATE asset_shares SET open_count = open_count + 1, last_opened_at = ?2 \
                  WHERE id = ?1 AND revoked_at IS NULL AND expires_at > ?2 RETURNING ",
                share_columns!()
            ))
            .bind::<Text, _>(&id)
            .bind::<Text, _>(&now)
            .get_result::<ShareRow>(conn)
            .optional()
        })
        .await
        .map_err(catalog_error)?
        .map(ShareRow::into_share)
        .transpose()
    }

    async fn delete_ended_shares(
        &self,
        cutoff: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, CatalogError> {
        let cutoff = stored_time(cutoff)?;
        self.write(move |conn| {
            statement(
                "DELETE FROM asset_shares WHERE id IN (\
                     SELECT id FROM asset_shares WHERE expires_at < ?1 OR revoked_at < ?1 \
                      LIMIT ?2)",
            )
            .bind::<Text, _>(&cutoff)
            .bind::<BigInt, _>(i64::from(limit))
            .execute(conn)
        })
        .await
        .map_err(catalog_error)
        .map(touched)
    }
}
