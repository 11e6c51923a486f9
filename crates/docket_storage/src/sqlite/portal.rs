//! The portal's models on SQLite: [`PortalStore`] for [`SqliteStore`]. Every
//! write runs on the one writing connection; a login's cap check and insert,
//! and a session's insert and the cap's eviction, each run in one immediate
//! transaction, so no other write comes between them. Times are bound in the
//! one stored form, so they compare as text.

use async_trait::async_trait;
use diesel::sql_types::{BigInt, Bool, Text};
use diesel::{QueryResult, RunQueryDsl, SqliteConnection};
use docket_portal::{PendingLogin, PortalSession, PortalStore, StoreError, Swept};
use time::OffsetDateTime;

use super::SqliteStore;
use super::sql::stored_time;
use crate::columns::TextColumns;
use crate::portal::{
    self, login_columns, pool_error, query_error, roles_text, session_columns, sql_count, touched,
};
use crate::statement::statement;

type LoginRow = portal::LoginRow<TextColumns>;
type SessionRow = portal::SessionRow<TextColumns>;

#[derive(diesel::QueryableByName)]
struct CountRow {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

/// `at` in the stored form.
fn stored(at: OffsetDateTime) -> Result<String, StoreError> {
    stored_time(at).map_err(|error| StoreError::Invalid(format!("a time out of range: {error}")))
}

impl SqliteStore {
    /// Runs `work` on the writing connection, on a blocking thread.
    async fn portal_write<R, F>(&self, work: F) -> Result<R, StoreError>
    where
        F: FnOnce(&mut SqliteConnection) -> QueryResult<R> + Send + 'static,
        R: Send + 'static,
    {
        let mut connection = self.writer.get().await.map_err(pool_error)?;
        connection.spawn_blocking(work).await.map_err(query_error)
    }

    /// Runs `work` on a reading connection, on a blocking thread.
    async fn portal_read<R, F>(&self, work: F) -> Result<R, StoreError>
    where
        F: FnOnce(&mut SqliteConnection) -> QueryResult<R> + Send + 'static,
        R: Send + 'static,
    {
        let mut connection = self.readers.get().await.map_err(pool_error)?;
        connection.spawn_blocking(work).await.map_err(query_error)
    }
}

#[async_trait]
impl PortalStore for SqliteStore {
    async fn begin_login(&self, login: &PendingLogin, cap: u64) -> Result<(), StoreError> {
        login.validate()?;
        let login = login.clone();
        let created_at = stored(login.created_at)?;
        let expires_at = stored(login.expires_at)?;
        self.portal_write(move |conn| {
            conn.immediate_transaction(|conn| {
                let taken =
                    statement("SELECT count(*) AS count FROM portal_logins WHERE state_hash = ?1")
                        .bind::<Text, _>(&login.state_hash)
                        .get_result::<CountRow>(conn)?;
                if taken.count > 0 {
                    return Ok(Err(StoreError::Conflict(
                        "the login's state is taken".to_owned(),
                    )));
                }
                let held = statement("SELECT count(*) AS count FROM portal_logins")
                    .get_result::<CountRow>(conn)?;
                if held.count >= sql_count(cap) {
                    return Ok(Err(StoreError::Full(format!(
                        "at most {cap} logins may be in flight"
                    ))));
                }
                statement(
                    "INSERT INTO portal_logins \
                         (state_hash, verifier, return_to, created_at, expires_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .bind::<Text, _>(&login.state_hash)
                .bind::<Text, _>(&login.verifier)
                .bind::<Text, _>(&login.return_to)
                .bind::<Text, _>(&created_at)
                .bind::<Text, _>(&expires_at)
                .execute(conn)?;
                Ok(Ok(()))
            })
        })
        .await?
    }

    async fn take_login(
        &self,
        state_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Option<PendingLogin>, StoreError> {
        let state_hash = state_hash.to_owned();
        // An expired login is deleted too: it can never be taken again.
        let taken = self
            .portal_write(move |conn| {
                statement(concat!(
                    "DELETE FROM portal_logins WHERE state_hash = ?1 RETURNING ",
                    login_columns!()
                ))
                .bind::<Text, _>(&state_hash)
                .get_results::<LoginRow>(conn)
            })
            .await?;
        let Some(row) = taken.into_iter().next() else {
            return Ok(None);
        };
        let login = row.into_login()?;
        Ok((login.expires_at > now).then_some(login))
    }

    async fn create_session(
        &self,
        session: &PortalSession,
        per_person_cap: u32,
    ) -> Result<(), StoreError> {
        session.validate()?;
        let session = session.clone();
        let roles = roles_text(&session.roles)?;
        let created_at = stored(session.created_at)?;
        let expires_at = stored(session.expires_at)?;
        self.portal_write(move |conn| {
            conn.immediate_transaction(|conn| {
                statement(
                    "INSERT INTO portal_sessions \
                         (id_hash, subject, display_name, roles, administrator, created_at, \
                          expires_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .bind::<Text, _>(&session.id_hash)
                .bind::<Text, _>(&session.subject)
                .bind::<Text, _>(&session.display_name)
                .bind::<Text, _>(&roles)
                .bind::<Bool, _>(session.administrator)
                .bind::<Text, _>(&created_at)
                .bind::<Text, _>(&expires_at)
                .execute(conn)?;
                statement(
                    "DELETE FROM portal_sessions WHERE id_hash IN ( \
                         SELECT id_hash FROM portal_sessions WHERE subject = ?1 \
                         ORDER BY created_at DESC, id_hash DESC LIMIT -1 OFFSET ?2)",
                )
                .bind::<Text, _>(&session.subject)
                .bind::<BigInt, _>(i64::from(per_person_cap.max(1)))
                .execute(conn)
                .map(drop)
            })
        })
        .await
    }

    async fn session(
        &self,
        id_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Option<PortalSession>, StoreError> {
        let id_hash = id_hash.to_owned();
        let now = stored(now)?;
        let found = self
            .portal_read(move |conn| {
                statement(concat!(
                    "SELECT ",
                    session_columns!(),
                    " FROM portal_sessions WHERE id_hash = ?1 AND expires_at > ?2"
                ))
                .bind::<Text, _>(&id_hash)
                .bind::<Text, _>(&now)
                .get_results::<SessionRow>(conn)
            })
            .await?;
        found
            .into_iter()
            .next()
            .map(SessionRow::into_session)
            .transpose()
    }

    async fn end_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        let id_hash = id_hash.to_owned();
        let ended = self
            .portal_write(move |conn| {
                statement("DELETE FROM portal_sessions WHERE id_hash = ?1")
                    .bind::<Text, _>(&id_hash)
                    .execute(conn)
            })
            .await?;
        Ok(ended > 0)
    }

    async fn sweep(&self, now: OffsetDateTime, limit: u32) -> Result<Swept, StoreError> {
        let now = stored(now)?;
        self.portal_write(move |conn| {
            let sessions = statement(
                "DELETE FROM portal_sessions WHERE id_hash IN ( \
                     SELECT id_hash FROM portal_sessions WHERE expires_at <= ?1 LIMIT ?2)",
            )
            .bind::<Text, _>(&now)
            .bind::<BigInt, _>(i64::from(limit))
            .execute(conn)?;
            let logins = statement(
                "DELETE FROM portal_logins WHERE state_hash IN ( \
                     SELECT state_hash FROM portal_logins WHERE expires_at <= ?1 LIMIT ?2)",
            )
            .bind::<Text, _>(&now)
            .bind::<BigInt, _>(i64::from(limit))
            .execute(conn)?;
            Ok(Swept {
                sessions: touched(sessions),
                logins: touched(logins),
            })
        })
        .await
    }
}
