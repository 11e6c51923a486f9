//! The authorization server's models on PostgreSQL: [`OAuthStore`] for
//! [`PgStore`]. Every decision that must have one winner across replicas is one
//! statement whose row lock decides it: a take stamps `taken_at` only where it
//! is NULL, a rotation stamps `used_at` only where it is NULL (and inserts the
//! next token in the same statement), a signing key lands only if no key
//! `replaces` the same newest one (a unique column). A second statement runs
//! only for the loser, to tell a replay or a reuse from a missing row. The
//! purges take disjoint rows across replicas (`FOR UPDATE SKIP LOCKED`), as the
//! other retention paths do. Caps count in the inserting statement, so replicas
//! registering at the same instant may pass one by a few rows.

use async_trait::async_trait;
use diesel::OptionalExtension;
use diesel::sql_types::{BigInt, Nullable, Text, Timestamptz};
use diesel_async::pooled_connection::deadpool::Object;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use docket_oauth::store::{validate_key, validate_payload};
use docket_oauth::{
    ClientRecord, Fetched, OAuthStore, OnceKind, RefreshToken, Rotation, SigningKey, StoreError,
};
use serde_json::Value;
use time::OffsetDateTime;

use super::PgStore;
use crate::columns::PgColumns;
use crate::oauth::rows::{
    self, CountRow, FamilyRow, PresentedRow, TakenRow, client_columns, key_columns,
    presented_columns, token_columns,
};
use crate::oauth::{
    json_text, json_value, other_families_kept, pool_error, query_error, sql_count, touched,
    wall_clock,
};
use crate::statement::statement;

type ClientRow = rows::ClientRow<PgColumns>;
type TokenRow = rows::TokenRow<PgColumns>;
type KeyRow = rows::KeyRow<PgColumns>;

impl PgStore {
    /// A connection for the authorization server's statements.
    async fn oauth_conn(&self) -> Result<Object<AsyncPgConnection>, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }
}

#[async_trait]
impl OAuthStore for PgStore {
    async fn register_client(&self, client: &ClientRecord, cap: u64) -> Result<(), StoreError> {
        client.validate()?;
        let conn = &mut *self.oauth_conn().await?;
        let inserted = statement(
            "INSERT INTO oauth_clients (client_id, metadata, secret_hash, registered_at, last_used_at) \
             SELECT $1, $2, $3, $4, $5 WHERE (SELECT count(*) FROM oauth_clients) < $6 \
             ON CONFLICT (client_id) DO NOTHING",
        )
        .bind::<Text, _>(&client.client_id)
        .bind::<Text, _>(json_text(&client.metadata)?)
        .bind::<Nullable<Text>, _>(client.secret_hash.as_deref())
        .bind::<Timestamptz, _>(client.registered_at)
        .bind::<Nullable<Timestamptz>, _>(client.last_used_at)
        .bind::<BigInt, _>(sql_count(cap))
        .execute(conn)
        .await
        .map_err(query_error)?;
        if inserted > 0 {
            return Ok(());
        }
        let taken = statement("SELECT count(*) AS count FROM oauth_clients WHERE client_id = $1")
            .bind::<Text, _>(&client.client_id)
            .get_result::<CountRow>(conn)
            .await
            .map_err(query_error)?;
        Err(if taken.count > 0 {
            StoreError::Conflict(format!("the client id {} is taken", client.client_id))
        } else {
            StoreError::Full(format!("at most {cap} clients may register"))
        })
    }

    async fn client(&self, client_id: &str) -> Result<Option<ClientRecord>, StoreError> {
        statement(concat!(
            "SELECT ",
            client_columns!(),
            " FROM oauth_clients WHERE client_id = $1"
        ))
        .bind::<Text, _>(client_id)
        .get_result::<ClientRow>(&mut *self.oauth_conn().await?)
        .await
        .optional()
        .map_err(query_error)?
        .map(ClientRow::into_client)
        .transpose()
    }

    async fn touch_client(&self, client_id: &str, now: OffsetDateTime) -> Result<(), StoreError> {
        // Replicas' clocks differ a little: the latest use wins.
        statement(
            "UPDATE oauth_clients SET last_used_at = $2 \
             WHERE client_id = $1 AND (last_used_at IS NULL OR last_used_at < $2)",
        )
        .bind::<Text, _>(client_id)
        .bind::<Timestamptz, _>(now)
        .execute(&mut *self.oauth_conn().await?)
        .await
        .map_err(query_error)
        .map(drop)
    }

    async fn reap_clients(
        &self,
        unused_before: OffsetDateTime,
        idle_before: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, StoreError> {
        // Deleting a client's families deletes their tokens (ON DELETE CASCADE).
        statement(
            "WITH doomed AS ( \
                 SELECT client_id FROM oauth_clients \
                  WHERE (last_used_at IS NULL AND registered_at < $1) OR last_used_at < $2 \
                  LIMIT $3 FOR UPDATE SKIP LOCKED), \
             consents AS ( \
                 DELETE FROM oauth_consents WHERE client_id IN (SELECT client_id FROM doomed)), \
             families AS ( \
                 DELETE FROM oauth_refresh_families \
                  WHERE client_id IN (SELECT client_id FROM doomed)) \
             DELETE FROM oauth_clients WHERE client_id IN (SELECT client_id FROM doomed)",
        )
        .bind::<Timestamptz, _>(unused_before)
        .bind::<Timestamptz, _>(idle_before)
        .bind::<BigInt, _>(i64::from(limit))
        .execute(&mut *self.oauth_conn().await?)
        .await
        .map_err(query_error)
        .map(touched)
    }

    async fn put_once(
        &self,
        kind: OnceKind,
        key: &str,
        payload: &Value,
        expires_at: OffsetDateTime,
        cap: u64,
    ) -> Result<(), StoreError> {
        validate_payload(key, payload)?;
        let conn = &mut *self.oauth_conn().await?;
        let inserted = statement(
            "INSERT INTO oauth_once_records (kind, key, payload, expires_at) \
             SELECT $1, $2, $3, $4 WHERE ( \
                 SELECT count(*) FROM oauth_once_records WHERE kind = $1 AND expires_at > $5) < $6 \
             ON CONFLICT (kind, key) DO NOTHING",
        )
        .bind::<Text, _>(kind.as_str())
        .bind::<Text, _>(key)
        .bind::<Text, _>(json_text(payload)?)
        .bind::<Timestamptz, _>(expires_at)
        .bind::<Timestamptz, _>(wall_clock())
        .bind::<BigInt, _>(sql_count(cap))
        .execute(conn)
        .await
        .map_err(query_error)?;
        if inserted > 0 {
            return Ok(());
        }
        let taken = statement(
            "SELECT count(*) AS count FROM oauth_once_records WHERE kind = $1 AND key = $2",
        )
        .bind::<Text, _>(kind.as_str())
        .bind::<Text, _>(key)
        .get_result::<CountRow>(conn)
        .await
        .map_err(query_error)?;
        Err(if taken.count > 0 {
            StoreError::Conflict(format!("a {} record with that key exists", kind.as_str()))
        } else {
            StoreError::Full(format!(
                "at most {cap} {} records may be in flight",
                kind.as_str()
            ))
        })
    }

    async fn take_once(
        &self,
        kind: OnceKind,
        key: &str,
        now: OffsetDateTime,
    ) -> Result<Fetched, StoreError> {
        // The UPDATE stamps the record only while unstamped: of two takes at
        // once, the second waits for the first's row lock and then finds it
        // stamped. The second branch (the statement's snapshot) reads the
        // record for a take whose UPDATE found nothing to stamp.
        let taken = statement(
            "WITH taken AS ( \
                 UPDATE oauth_once_records SET taken_at = $3 \
                  WHERE kind = $1 AND key = $2 AND taken_at IS NULL AND expires_at > $3 \
                  RETURNING payload) \
             SELECT payload, true AS fresh FROM taken \
             UNION ALL \
             SELECT payload, false AS fresh FROM oauth_once_records \
              WHERE kind = $1 AND key = $2 AND expires_at > $3 \
                AND NOT EXISTS (SELECT 1 FROM taken)",
        )
        .bind::<Text, _>(kind.as_str())
        .bind::<Text, _>(key)
        .bind::<Timestamptz, _>(now)
        .get_result::<TakenRow>(&mut *self.oauth_conn().await?)
        .await
        .optional()
        .map_err(query_error)?;
        Ok(match taken {
            None => Fetched::Missing,
            Some(row) => {
                let payload = json_value(&row.payload, "a one-shot record's payload")?;
                if row.fresh {
                    Fetched::Fresh(payload)
                } else {
                    Fetched::Replayed(payload)
                }
            }
        })
    }

    async fn put_refresh(
        &self,
        token: &RefreshToken,
        families_per_subject: u32,
    ) -> Result<(), StoreError> {
        token.validate()?;
        // The subquery's snapshot does not hold the new family, so it keeps
        // `families_per_subject - 1` others and the new one always stays.
        statement(
            "WITH family AS ( \
                 INSERT INTO oauth_refresh_families (family, client_id, subject, created_at, expires_at) \
                 VALUES ($2, $3, $4, $6, $7) RETURNING family), \
             token AS ( \
                 INSERT INTO oauth_refresh_tokens \
                     (token_hash, family, client_id, subject, grant_payload, issued_at, expires_at) \
                 SELECT $1, family, $3, $4, $5, $6, $7 FROM family RETURNING token_hash) \
             UPDATE oauth_refresh_families SET revoked_at = $6 \
              WHERE family IN ( \
                  SELECT family FROM oauth_refresh_families \
                   WHERE subject = $4 AND revoked_at IS NULL AND expires_at > $6 \
                   ORDER BY created_at DESC, family DESC OFFSET $8) \
                AND EXISTS (SELECT 1 FROM token)",
        )
        .bind::<Text, _>(&token.token_hash)
        .bind::<Text, _>(&token.family)
        .bind::<Text, _>(&token.client_id)
        .bind::<Text, _>(&token.subject)
        .bind::<Text, _>(json_text(&token.grant)?)
        .bind::<Timestamptz, _>(token.issued_at)
        .bind::<Timestamptz, _>(token.expires_at)
        .bind::<BigInt, _>(other_families_kept(families_per_subject))
        .execute(&mut *self.oauth_conn().await?)
        .await
        .map_err(query_error)
        .map(drop)
    }

    async fn rotate_refresh(
        &self,
        presented_hash: &str,
        next_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Rotation, StoreError> {
        validate_key(next_hash)?;
        let conn = &mut *self.oauth_conn().await?;
        // Stamps the presented token used only while unused and its family
        // live, and inserts the next token, in one statement: of two
        // presentations at once, the second waits for the first's row lock and
        // then finds the token used.
        let rotated = statement(concat!(
            "WITH presented AS ( \
                 UPDATE oauth_refresh_tokens t SET used_at = $3 \
                   FROM oauth_refresh_families f \
                  WHERE t.token_hash = $1 AND t.used_at IS NULL AND f.family = t.family \
                    AND f.revoked_at IS NULL AND f.expires_at > $3 \
                  RETURNING t.family, t.client_id, t.subject, t.grant_payload, t.expires_at), \
             t AS ( \
                 INSERT INTO oauth_refresh_tokens \
                     (token_hash, family, client_id, subject, grant_payload, issued_at, expires_at) \
                 SELECT $2, family, client_id, subject, grant_payload, $3, expires_at FROM presented \
                 RETURNING *) \
             SELECT ",
            token_columns!(),
            " FROM t"
        ))
        .bind::<Text, _>(presented_hash)
        .bind::<Text, _>(next_hash)
        .bind::<Timestamptz, _>(now)
        .get_result::<TokenRow>(conn)
        .await
        .optional()
        .map_err(query_error)?;
        if let Some(next) = rotated {
            return Ok(Rotation::Rotated(next.into_token()?));
        }
        let presented = statement(concat!(
            "SELECT ",
            presented_columns!("$2"),
            " WHERE t.token_hash = $1"
        ))
        .bind::<Text, _>(presented_hash)
        .bind::<Timestamptz, _>(now)
        .get_result::<PresentedRow<PgColumns>>(conn)
        .await
        .optional()
        .map_err(query_error)?;
        let Some(presented) = presented else {
            return Ok(Rotation::Missing);
        };
        if presented.ended {
            return Ok(Rotation::Missing);
        }
        // The stamp found the token replaced already or its family revoked
        // (`spent`): reuse revokes the family.
        let token = presented.token.into_token()?;
        statement(
            "UPDATE oauth_refresh_families SET revoked_at = $2 \
             WHERE family = $1 AND revoked_at IS NULL",
        )
        .bind::<Text, _>(&token.family)
        .bind::<Timestamptz, _>(now)
        .execute(conn)
        .await
        .map_err(query_error)?;
        Ok(Rotation::Reused(token))
    }

    async fn revoke_refresh(&self, token_hash: &str) -> Result<Option<String>, StoreError> {
        let conn = &mut *self.oauth_conn().await?;
        let family = statement("SELECT family FROM oauth_refresh_tokens WHERE token_hash = $1")
            .bind::<Text, _>(token_hash)
            .get_result::<FamilyRow>(conn)
            .await
            .optional()
            .map_err(query_error)?;
        let Some(FamilyRow { family }) = family else {
            return Ok(None);
        };
        statement(
            "UPDATE oauth_refresh_families SET revoked_at = $2 \
             WHERE family = $1 AND revoked_at IS NULL",
        )
        .bind::<Text, _>(&family)
        .bind::<Timestamptz, _>(wall_clock())
        .execute(conn)
        .await
        .map_err(query_error)?;
        Ok(Some(family))
    }

    async fn revoke_family(&self, family: &str) -> Result<u64, StoreError> {
        statement(
            "WITH revoked AS ( \
                 UPDATE oauth_refresh_families SET revoked_at = $2 \
                  WHERE family = $1 AND revoked_at IS NULL RETURNING family) \
             SELECT count(*) AS count FROM oauth_refresh_tokens \
              WHERE family IN (SELECT family FROM revoked) AND used_at IS NULL",
        )
        .bind::<Text, _>(family)
        .bind::<Timestamptz, _>(wall_clock())
        .get_result::<CountRow>(&mut *self.oauth_conn().await?)
        .await
        .map_err(query_error)
        .map(|row| u64::try_from(row.count).unwrap_or(0))
    }

    async fn consented(&self, subject: &str, client_id: &str) -> Result<bool, StoreError> {
        statement(
            "SELECT count(*) AS count FROM oauth_consents WHERE subject = $1 AND client_id = $2",
        )
        .bind::<Text, _>(subject)
        .bind::<Text, _>(client_id)
        .get_result::<CountRow>(&mut *self.oauth_conn().await?)
        .await
        .map_err(query_error)
        .map(|row| row.count > 0)
    }

    async fn put_consent(
        &self,
        subject: &str,
        client_id: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        validate_key(subject)?;
        validate_key(client_id)?;
        statement(
            "INSERT INTO oauth_consents (subject, client_id, consented_at) VALUES ($1, $2, $3) \
             ON CONFLICT (subject, client_id) DO UPDATE SET consented_at = EXCLUDED.consented_at",
        )
        .bind::<Text, _>(subject)
        .bind::<Text, _>(client_id)
        .bind::<Timestamptz, _>(now)
        .execute(&mut *self.oauth_conn().await?)
        .await
        .map_err(query_error)
        .map(drop)
    }

    async fn signing_keys(&self) -> Result<Vec<SigningKey>, StoreError> {
        statement(concat!(
            "SELECT ",
            key_columns!(),
            " FROM oauth_signing_keys ORDER BY position DESC"
        ))
        .load::<KeyRow>(&mut *self.oauth_conn().await?)
        .await
        .map_err(query_error)?
        .into_iter()
        .map(KeyRow::into_key)
        .collect()
    }

    async fn add_signing_key(
        &self,
        key: &SigningKey,
        expected_newest: Option<&str>,
    ) -> Result<bool, StoreError> {
        key.validate()?;
        // Inserted only while the newest key is the expected one; of replicas
        // that saw the same newest key, the unique `replaces` lets one in.
        statement(
            "INSERT INTO oauth_signing_keys (kid, replaces, private_pkcs8, public_jwk, created_at) \
             SELECT $1, coalesce($5, ''), $2, $3, $4 \
              WHERE (SELECT kid FROM oauth_signing_keys ORDER BY position DESC LIMIT 1) \
                    IS NOT DISTINCT FROM $5 \
             ON CONFLICT (replaces) DO NOTHING",
        )
        .bind::<Text, _>(&key.kid)
        .bind::<Text, _>(&key.private_pkcs8)
        .bind::<Text, _>(json_text(&key.public_jwk)?)
        .bind::<Timestamptz, _>(key.created_at)
        .bind::<Nullable<Text>, _>(expected_newest)
        .execute(&mut *self.oauth_conn().await?)
        .await
        .map_err(query_error)
        .map(|inserted| inserted > 0)
    }

    async fn remove_signing_keys_before(
        &self,
        created_before: OffsetDateTime,
    ) -> Result<u64, StoreError> {
        statement(
            "DELETE FROM oauth_signing_keys WHERE created_at < $1 \
               AND position < (SELECT max(position) FROM oauth_signing_keys)",
        )
        .bind::<Timestamptz, _>(created_before)
        .execute(&mut *self.oauth_conn().await?)
        .await
        .map_err(query_error)
        .map(touched)
    }

    async fn purge_expired(&self, now: OffsetDateTime, limit: u32) -> Result<u64, StoreError> {
        let conn = &mut *self.oauth_conn().await?;
        let records = statement(
            "DELETE FROM oauth_once_records WHERE (kind, key) IN ( \
                 SELECT kind, key FROM oauth_once_records WHERE expires_at <= $1 \
                  LIMIT $2 FOR UPDATE SKIP LOCKED)",
        )
        .bind::<Timestamptz, _>(now)
        .bind::<BigInt, _>(i64::from(limit))
        .execute(conn)
        .await
        .map_err(query_error)
        .map(touched)?;
        let budget = u64::from(limit).saturating_sub(records);
        if budget == 0 {
            return Ok(records);
        }
        let tokens = statement(
            "DELETE FROM oauth_refresh_tokens WHERE token_hash IN ( \
                 SELECT t.token_hash FROM oauth_refresh_tokens t \
                   JOIN oauth_refresh_families f ON f.family = t.family \
                  WHERE f.revoked_at IS NOT NULL OR f.expires_at <= $1 \
                  LIMIT $2 FOR UPDATE OF t SKIP LOCKED)",
        )
        .bind::<Timestamptz, _>(now)
        .bind::<BigInt, _>(sql_count(budget))
        .execute(conn)
        .await
        .map_err(query_error)
        .map(touched)?;
        // The ended families left without tokens: bookkeeping, not counted.
        statement(
            "DELETE FROM oauth_refresh_families WHERE family IN ( \
                 SELECT family FROM oauth_refresh_families f \
                  WHERE (f.revoked_at IS NOT NULL OR f.expires_at <= $1) \
                    AND NOT EXISTS (SELECT 1 FROM oauth_refresh_tokens t WHERE t.family = f.family) \
                  LIMIT $2 FOR UPDATE SKIP LOCKED)",
        )
        .bind::<Timestamptz, _>(now)
        .bind::<BigInt, _>(i64::from(limit))
        .execute(conn)
        .await
        .map_err(query_error)?;
        Ok(records + tokens)
    }
}
