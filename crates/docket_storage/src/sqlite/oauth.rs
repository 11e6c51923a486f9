//! The authorization server's models on SQLite: [`OAuthStore`] for
//! [`SqliteStore`]. Every write runs on the one writing connection, each
//! operation that reads before it writes in one immediate transaction, so no
//! other write comes between the read and the write: a take, a rotation and a
//! signing-key compare-and-set have one winner. Times are bound in the one
//! stored form, so they compare as text.

use async_trait::async_trait;
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::{OptionalExtension, QueryResult, RunQueryDsl, SqliteConnection};
use docket_oauth::store::validate_key;
use docket_oauth::{
    ClientRecord, Fetched, OAuthStore, OnceKind, RefreshToken, Rotation, SigningKey, StoreError,
};
use serde_json::Value;
use time::OffsetDateTime;

use super::SqliteStore;
use super::sql::stored_time;
use crate::columns::TextColumns;
use crate::oauth::rows::{
    self, CountRow, FamilyRow, PresentedRow, TakenRow, client_columns, key_columns,
    presented_columns, token_columns,
};
use crate::oauth::{
    json_text, json_value, other_families_kept, pool_error, query_error, sql_count, touched,
    wall_clock,
};
use crate::statement::statement;

type ClientRow = rows::ClientRow<TextColumns>;
type KeyRow = rows::KeyRow<TextColumns>;

/// What a transaction decided: its value, or the refusal it ended with
/// (written nothing).
type Decided<T> = QueryResult<Result<T, StoreError>>;

/// `at` in the stored form.
fn stored(at: OffsetDateTime) -> Result<String, StoreError> {
    stored_time(at).map_err(|error| StoreError::Invalid(format!("a time out of range: {error}")))
}

/// The clients a reap takes, as a subquery: `?1` unused before, `?2` idle
/// before, `?3` how many. Ordered, so each statement of the transaction takes
/// the same ones.
macro_rules! doomed_clients {
    () => {
        "SELECT client_id FROM oauth_clients \
          WHERE (last_used_at IS NULL AND registered_at < ?1) OR last_used_at < ?2 \
          ORDER BY client_id LIMIT ?3"
    };
}

impl SqliteStore {
    /// Runs `work` on the writing connection, on a blocking thread.
    async fn oauth_write<R, F>(&self, work: F) -> Result<R, StoreError>
    where
        F: FnOnce(&mut SqliteConnection) -> QueryResult<R> + Send + 'static,
        R: Send + 'static,
    {
        let mut connection = self.writer.get().await.map_err(pool_error)?;
        connection.spawn_blocking(work).await.map_err(query_error)
    }

    /// Runs `work` on a reading connection, on a blocking thread.
    async fn oauth_read<R, F>(&self, work: F) -> Result<R, StoreError>
    where
        F: FnOnce(&mut SqliteConnection) -> QueryResult<R> + Send + 'static,
        R: Send + 'static,
    {
        let mut connection = self.readers.get().await.map_err(pool_error)?;
        connection.spawn_blocking(work).await.map_err(query_error)
    }
}

/// Revokes the family at `revoked_at` (stored form) unless it is revoked;
/// whether it was live.
fn revoke(conn: &mut SqliteConnection, family: &str, revoked_at: &str) -> QueryResult<bool> {
    statement(
        "UPDATE oauth_refresh_families SET revoked_at = ?2 \
         WHERE family = ?1 AND revoked_at IS NULL",
    )
    .bind::<Text, _>(family)
    .bind::<Text, _>(revoked_at)
    .execute(conn)
    .map(|revoked| revoked > 0)
}

#[async_trait]
impl OAuthStore for SqliteStore {
    async fn register_client(&self, client: &ClientRecord, cap: u64) -> Result<(), StoreError> {
        client.validate()?;
        let client_id = client.client_id.clone();
        let metadata = json_text(&client.metadata)?;
        let secret_hash = client.secret_hash.clone();
        let registered_at = stored(client.registered_at)?;
        let last_used_at = client.last_used_at.map(stored).transpose()?;
        self.oauth_write(move |conn| -> Decided<()> {
            conn.immediate_transaction(|conn| {
                let taken =
                    statement("SELECT count(*) AS count FROM oauth_clients WHERE client_id = ?1")
                        .bind::<Text, _>(&client_id)
                        .get_result::<CountRow>(conn)?;
                if taken.count > 0 {
                    return Ok(Err(StoreError::Conflict(format!(
                        "the client id {client_id} is taken"
                    ))));
                }
                let held = statement("SELECT count(*) AS count FROM oauth_clients")
                    .get_result::<CountRow>(conn)?;
                if held.count >= sql_count(cap) {
                    return Ok(Err(StoreError::Full(format!(
                        "at most {cap} clients may register"
                    ))));
                }
                statement(
                    "INSERT INTO oauth_clients \
                         (client_id, metadata, secret_hash, registered_at, last_used_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .bind::<Text, _>(&client_id)
                .bind::<Text, _>(&metadata)
                .bind::<Nullable<Text>, _>(secret_hash.as_deref())
                .bind::<Text, _>(&registered_at)
                .bind::<Nullable<Text>, _>(last_used_at.as_deref())
                .execute(conn)?;
                Ok(Ok(()))
            })
        })
        .await?
    }

    async fn client(&self, client_id: &str) -> Result<Option<ClientRecord>, StoreError> {
        let client_id = client_id.to_owned();
        self.oauth_read(move |conn| {
            statement(concat!(
                "SELECT ",
                client_columns!(),
                " FROM oauth_clients WHERE client_id = ?1"
            ))
            .bind::<Text, _>(&client_id)
            .get_result::<ClientRow>(conn)
            .optional()
        })
        .await?
        .map(ClientRow::into_client)
        .transpose()
    }

    async fn touch_client(&self, client_id: &str, now: OffsetDateTime) -> Result<(), StoreError> {
        let client_id = client_id.to_owned();
        let now = stored(now)?;
        self.oauth_write(move |conn| {
            statement(
                "UPDATE oauth_clients SET last_used_at = ?2 \
                 WHERE client_id = ?1 AND (last_used_at IS NULL OR last_used_at < ?2)",
            )
            .bind::<Text, _>(&client_id)
            .bind::<Text, _>(&now)
            .execute(conn)
            .map(drop)
        })
        .await
    }

    async fn reap_clients(
        &self,
        unused_before: OffsetDateTime,
        idle_before: OffsetDateTime,
        limit: u32,
    ) -> Result<u64, StoreError> {
        let unused_before = stored(unused_before)?;
        let idle_before = stored(idle_before)?;
        // Deleting a client's families deletes their tokens (ON DELETE CASCADE).
        self.oauth_write(move |conn| {
            conn.immediate_transaction(|conn| {
                // The clients last: the subquery picks the same ones each time.
                let mut clients = 0;
                for sql in [
                    concat!(
                        "DELETE FROM oauth_consents WHERE client_id IN (",
                        doomed_clients!(),
                        ")"
                    ),
                    concat!(
                        "DELETE FROM oauth_refresh_families WHERE client_id IN (",
                        doomed_clients!(),
                        ")"
                    ),
                    concat!(
                        "DELETE FROM oauth_clients WHERE client_id IN (",
                        doomed_clients!(),
                        ")"
                    ),
                ] {
                    clients = statement(sql)
                        .bind::<Text, _>(&unused_before)
                        .bind::<Text, _>(&idle_before)
                        .bind::<BigInt, _>(i64::from(limit))
                        .execute(conn)?;
                }
                Ok(clients)
            })
        })
        .await
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
        docket_oauth::store::validate_payload(key, payload)?;
        let key = key.to_owned();
        let payload = json_text(payload)?;
        let expires_at = stored(expires_at)?;
        let clock = stored(wall_clock())?;
        self.oauth_write(move |conn| -> Decided<()> {
            conn.immediate_transaction(|conn| {
                let taken = statement(
                    "SELECT count(*) AS count FROM oauth_once_records WHERE kind = ?1 AND key = ?2",
                )
                .bind::<Text, _>(kind.as_str())
                .bind::<Text, _>(&key)
                .get_result::<CountRow>(conn)?;
                if taken.count > 0 {
                    return Ok(Err(StoreError::Conflict(format!(
                        "a {} record with that key exists",
                        kind.as_str()
                    ))));
                }
                let live = statement(
                    "SELECT count(*) AS count FROM oauth_once_records \
                     WHERE kind = ?1 AND expires_at > ?2",
                )
                .bind::<Text, _>(kind.as_str())
                .bind::<Text, _>(&clock)
                .get_result::<CountRow>(conn)?;
                if live.count >= sql_count(cap) {
                    return Ok(Err(StoreError::Full(format!(
                        "at most {cap} {} records may be in flight",
                        kind.as_str()
                    ))));
                }
                statement(
                    "INSERT INTO oauth_once_records (kind, key, payload, expires_at) \
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .bind::<Text, _>(kind.as_str())
                .bind::<Text, _>(&key)
                .bind::<Text, _>(&payload)
                .bind::<Text, _>(&expires_at)
                .execute(conn)?;
                Ok(Ok(()))
            })
        })
        .await?
    }

    async fn take_once(
        &self,
        kind: OnceKind,
        key: &str,
        now: OffsetDateTime,
    ) -> Result<Fetched, StoreError> {
        let key = key.to_owned();
        let now = stored(now)?;
        let taken = self
            .oauth_write(move |conn| {
                conn.immediate_transaction(|conn| {
                    let fresh = statement(
                        "UPDATE oauth_once_records SET taken_at = ?3 \
                         WHERE kind = ?1 AND key = ?2 AND taken_at IS NULL AND expires_at > ?3 \
                         RETURNING payload, true AS fresh",
                    )
                    .bind::<Text, _>(kind.as_str())
                    .bind::<Text, _>(&key)
                    .bind::<Text, _>(&now)
                    .get_result::<TakenRow>(conn)
                    .optional()?;
                    if fresh.is_some() {
                        return Ok(fresh);
                    }
                    statement(
                        "SELECT payload, false AS fresh FROM oauth_once_records \
                         WHERE kind = ?1 AND key = ?2 AND expires_at > ?3",
                    )
                    .bind::<Text, _>(kind.as_str())
                    .bind::<Text, _>(&key)
                    .bind::<Text, _>(&now)
                    .get_result::<TakenRow>(conn)
                    .optional()
                })
            })
            .await?;
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
        let token_hash = token.token_hash.clone();
        let family = token.family.clone();
        let client_id = token.client_id.clone();
        let subject = token.subject.clone();
        let grant = json_text(&token.grant)?;
        let issued_at = stored(token.issued_at)?;
        let expires_at = stored(token.expires_at)?;
        let kept = other_families_kept(families_per_subject);
        // A token hash or family id taken fails its insert, which rolls the
        // transaction back: a conflict, with nothing written.
        self.oauth_write(move |conn| {
            conn.immediate_transaction(|conn| {
                statement(
                    "INSERT INTO oauth_refresh_families \
                         (family, client_id, subject, created_at, expires_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .bind::<Text, _>(&family)
                .bind::<Text, _>(&client_id)
                .bind::<Text, _>(&subject)
                .bind::<Text, _>(&issued_at)
                .bind::<Text, _>(&expires_at)
                .execute(conn)?;
                statement(
                    "INSERT INTO oauth_refresh_tokens \
                         (token_hash, family, client_id, subject, grant_payload, issued_at, expires_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .bind::<Text, _>(&token_hash)
                .bind::<Text, _>(&family)
                .bind::<Text, _>(&client_id)
                .bind::<Text, _>(&subject)
                .bind::<Text, _>(&grant)
                .bind::<Text, _>(&issued_at)
                .bind::<Text, _>(&expires_at)
                .execute(conn)?;
                statement(
                    "UPDATE oauth_refresh_families SET revoked_at = ?2 WHERE family IN ( \
                         SELECT family FROM oauth_refresh_families \
                          WHERE subject = ?1 AND revoked_at IS NULL AND expires_at > ?2 \
                            AND family <> ?3 \
                          ORDER BY created_at DESC, family DESC LIMIT -1 OFFSET ?4)",
                )
                .bind::<Text, _>(&subject)
                .bind::<Text, _>(&issued_at)
                .bind::<Text, _>(&family)
                .bind::<BigInt, _>(kept)
                .execute(conn)
                .map(drop)
            })
        })
        .await
    }

    async fn rotate_refresh(
        &self,
        presented_hash: &str,
        next_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Rotation, StoreError> {
        validate_key(next_hash)?;
        let presented_hash = presented_hash.to_owned();
        let next_hash = next_hash.to_owned();
        let inserted_hash = next_hash.clone();
        let stored_now = stored(now)?;
        let decided = self
            .oauth_write(
                move |conn| -> QueryResult<Option<(PresentedRow<TextColumns>, bool)>> {
                    conn.immediate_transaction(|conn| {
                        let presented = statement(concat!(
                            "SELECT ",
                            presented_columns!("?2"),
                            " WHERE t.token_hash = ?1"
                        ))
                        .bind::<Text, _>(&presented_hash)
                        .bind::<Text, _>(&stored_now)
                        .get_result::<PresentedRow<TextColumns>>(conn)
                        .optional()?;
                        let Some(presented) = presented else {
                            return Ok(None);
                        };
                        if presented.ended {
                            return Ok(Some((presented, false)));
                        }
                        if presented.spent {
                            // Reuse revokes the family.
                            revoke(conn, presented.token.family(), &stored_now)?;
                            return Ok(Some((presented, false)));
                        }
                        statement(
                            "UPDATE oauth_refresh_tokens SET used_at = ?2 WHERE token_hash = ?1",
                        )
                        .bind::<Text, _>(&presented_hash)
                        .bind::<Text, _>(&stored_now)
                        .execute(conn)?;
                        statement(
                            "INSERT INTO oauth_refresh_tokens \
                             (token_hash, family, client_id, subject, grant_payload, issued_at, \
                              expires_at) \
                         SELECT ?2, family, client_id, subject, grant_payload, ?3, expires_at \
                           FROM oauth_refresh_tokens WHERE token_hash = ?1",
                        )
                        .bind::<Text, _>(&presented_hash)
                        .bind::<Text, _>(&inserted_hash)
                        .bind::<Text, _>(&stored_now)
                        .execute(conn)?;
                        Ok(Some((presented, true)))
                    })
                },
            )
            .await?;
        let Some((presented, rotated)) = decided else {
            return Ok(Rotation::Missing);
        };
        if presented.ended {
            return Ok(Rotation::Missing);
        }
        let token = presented.token.into_token()?;
        Ok(if rotated {
            Rotation::Rotated(RefreshToken {
                token_hash: next_hash,
                issued_at: now,
                ..token
            })
        } else {
            Rotation::Reused(token)
        })
    }

    async fn revoke_refresh(&self, token_hash: &str) -> Result<Option<String>, StoreError> {
        let token_hash = token_hash.to_owned();
        let revoked_at = stored(wall_clock())?;
        self.oauth_write(move |conn| {
            conn.immediate_transaction(|conn| {
                let family =
                    statement("SELECT family FROM oauth_refresh_tokens WHERE token_hash = ?1")
                        .bind::<Text, _>(&token_hash)
                        .get_result::<FamilyRow>(conn)
                        .optional()?;
                let Some(FamilyRow { family }) = family else {
                    return Ok(None);
                };
                revoke(conn, &family, &revoked_at)?;
                Ok(Some(family))
            })
        })
        .await
    }

    async fn revoke_family(&self, family: &str) -> Result<u64, StoreError> {
        let family = family.to_owned();
        let revoked_at = stored(wall_clock())?;
        self.oauth_write(move |conn| {
            conn.immediate_transaction(|conn| {
                if !revoke(conn, &family, &revoked_at)? {
                    return Ok(0);
                }
                statement(
                    "SELECT count(*) AS count FROM oauth_refresh_tokens \
                     WHERE family = ?1 AND used_at IS NULL",
                )
                .bind::<Text, _>(&family)
                .get_result::<CountRow>(conn)
                .map(|row| u64::try_from(row.count).unwrap_or(0))
            })
        })
        .await
    }

    async fn consented(&self, subject: &str, client_id: &str) -> Result<bool, StoreError> {
        let subject = subject.to_owned();
        let client_id = client_id.to_owned();
        self.oauth_read(move |conn| {
            statement(
                "SELECT count(*) AS count FROM oauth_consents WHERE subject = ?1 AND client_id = ?2",
            )
            .bind::<Text, _>(&subject)
            .bind::<Text, _>(&client_id)
            .get_result::<CountRow>(conn)
            .map(|row| row.count > 0)
        })
        .await
    }

    async fn put_consent(
        &self,
        subject: &str,
        client_id: &str,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        validate_key(subject)?;
        validate_key(client_id)?;
        let subject = subject.to_owned();
        let client_id = client_id.to_owned();
        let now = stored(now)?;
        self.oauth_write(move |conn| {
            statement(
                "INSERT INTO oauth_consents (subject, client_id, consented_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (subject, client_id) DO UPDATE SET consented_at = excluded.consented_at",
            )
            .bind::<Text, _>(&subject)
            .bind::<Text, _>(&client_id)
            .bind::<Text, _>(&now)
            .execute(conn)
            .map(drop)
        })
        .await
    }

    async fn signing_keys(&self) -> Result<Vec<SigningKey>, StoreError> {
        self.oauth_read(|conn| {
            statement(concat!(
                "SELECT ",
                key_columns!(),
                " FROM oauth_signing_keys ORDER BY position DESC"
            ))
            .load::<KeyRow>(conn)
        })
        .await?
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
        let kid = key.kid.clone();
        let private_pkcs8 = key.private_pkcs8.clone();
        let public_jwk = json_text(&key.public_jwk)?;
        let created_at = stored(key.created_at)?;
        let expected = expected_newest.map(str::to_owned);
        self.oauth_write(move |conn| {
            conn.immediate_transaction(|conn| {
                let inserted = statement(
                    "INSERT INTO oauth_signing_keys \
                         (kid, replaces, private_pkcs8, public_jwk, created_at) \
                     SELECT ?1, coalesce(?5, ''), ?2, ?3, ?4 \
                      WHERE (SELECT kid FROM oauth_signing_keys ORDER BY position DESC LIMIT 1) \
                            IS ?5",
                )
                .bind::<Text, _>(&kid)
                .bind::<Text, _>(&private_pkcs8)
                .bind::<Text, _>(&public_jwk)
                .bind::<Text, _>(&created_at)
                .bind::<Nullable<Text>, _>(expected.as_deref())
                .execute(conn)?;
                Ok(inserted > 0)
            })
        })
        .await
    }

    async fn remove_signing_keys_before(
        &self,
        created_before: OffsetDateTime,
    ) -> Result<u64, StoreError> {
        let created_before = stored(created_before)?;
        self.oauth_write(move |conn| {
            statement(
                "DELETE FROM oauth_signing_keys WHERE created_at < ?1 \
                   AND position < (SELECT max(position) FROM oauth_signing_keys)",
            )
            .bind::<Text, _>(&created_before)
            .execute(conn)
        })
        .await
        .map(touched)
    }

    async fn purge_expired(&self, now: OffsetDateTime, limit: u32) -> Result<u64, StoreError> {
        let now = stored(now)?;
        self.oauth_write(move |conn| {
            conn.immediate_transaction(|conn| {
                let records = touched(
                    statement(
                        "DELETE FROM oauth_once_records WHERE rowid IN ( \
                             SELECT rowid FROM oauth_once_records WHERE expires_at <= ?1 LIMIT ?2)",
                    )
                    .bind::<Text, _>(&now)
                    .bind::<BigInt, _>(i64::from(limit))
                    .execute(conn)?,
                );
                let budget = u64::from(limit).saturating_sub(records);
                let tokens = if budget == 0 {
                    0
                } else {
                    touched(
                        statement(
                            "DELETE FROM oauth_refresh_tokens WHERE token_hash IN ( \
                                 SELECT t.token_hash FROM oauth_refresh_tokens t \
                                   JOIN oauth_refresh_families f ON f.family = t.family \
                                  WHERE f.revoked_at IS NOT NULL OR f.expires_at <= ?1 LIMIT ?2)",
                        )
                        .bind::<Text, _>(&now)
                        .bind::<BigInt, _>(sql_count(budget))
                        .execute(conn)?,
                    )
                };
                // The ended families left without tokens: bookkeeping, not counted.
                statement(
                    "DELETE FROM oauth_refresh_families WHERE family IN ( \
                         SELECT family FROM oauth_refresh_families f \
                          WHERE (f.revoked_at IS NOT NULL OR f.expires_at <= ?1) \
                            AND NOT EXISTS ( \
                                SELECT 1 FROM oauth_refresh_tokens t WHERE t.family = f.family) \
                          LIMIT ?2)",
                )
                .bind::<Text, _>(&now)
                .bind::<BigInt, _>(i64::from(limit))
                .execute(conn)?;
                Ok(records + tokens)
            })
        })
        .await
    }
}
