//! The portal's models on PostgreSQL: [`PortalStore`] for [`PgStore`]. A
//! login is taken by one `DELETE … RETURNING`, whose row lock gives it to one
//! taker across replicas; the login cap counts in the inserting statement, so
//! replicas starting logins at the same instant may pass it by a few rows.
//! The sweep takes disjoint rows across replicas (`FOR UPDATE SKIP LOCKED`),
//! as the other retention paths do.

use async_trait::async_trait;
use diesel::sql_types::{BigInt, Bool, Text, Timestamptz};
use diesel_async::pooled_connection::deadpool::Object;
use diesel_async::{AsyncPgConnection, RunQueryDsl};
use docket_portal::{PendingLogin, PortalSession, PortalStore, StoreError, Swept};
use time::OffsetDateTime;

use super::PgStore;
use crate::columns::PgColumns;
use crate::portal::{
    self, login_columns, pool_error, query_error, roles_text, session_columns, sql_count, touched,
};
use crate::statement::statement;

type LoginRow = portal::LoginRow<PgColumns>;
type SessionRow = portal::SessionRow<PgColumns>;

#[derive(diesel::QueryableByName)]
struct CountRow {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

impl PgStore {
    /// A connection for the portal's statements.
    async fn portal_conn(&self) -> Result<Object<AsyncPgConnection>, StoreError> {
        self.pool.get().await.map_err(pool_error)
    }
}

#[async_trait]
impl PortalStore for PgStore {
    async fn begin_login(&self, login: &PendingLogin, cap: u64) -> Result<(), StoreError> {
        login.validate()?;
        let conn = &mut *self.portal_conn().await?;
        let inserted = statement(
            "INSERT INTO portal_logins (state_hash, verifier, return_to, created_at, expires_at) \
             SELECT $1, $2, $3, $4, $5 WHERE (SELECT count(*) FROM portal_logins) < $6 \
             ON CONFLICT (state_hash) DO NOTHING",
        )
        .bind::<Text, _>(&login.state_hash)
        .bind::<Text, _>(&login.verifier)
        .bind::<Text, _>(&login.return_to)
        .bind::<Timestamptz, _>(login.created_at)
        .bind::<Timestamptz, _>(login.expires_at)
        .bind::<BigInt, _>(sql_count(cap))
        .execute(conn)
        .await
        .map_err(query_error)?;
        if inserted > 0 {
            return Ok(());
        }
        let taken = statement("SELECT count(*) AS count FROM portal_logins WHERE state_hash = $1")
            .bind::<Text, _>(&login.state_hash)
            .get_result::<CountRow>(conn)
            .await
            .map_err(query_error)?;
        Err(if taken.count > 0 {
            StoreError::Conflict("the login's state is taken".to_owned())
        } else {
            StoreError::Full(format!("at most {cap} logins may be in flight"))
        })
    }

    async fn take_login(
        &self,
        state_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Option<PendingLogin>, StoreError> {
        let conn = &mut *self.portal_conn().await?;
        // An expired login is deleted too: it can never be taken again.
        let taken = statement(concat!(
            "DELETE FROM portal_logins WHERE state_hash = $1 RETURNING ",
            login_columns!()
        ))
        .bind::<Text, _>(state_hash)
        .get_results::<LoginRow>(conn)
        .await
        .map_err(query_error)?;
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
        let conn = &mut *self.portal_conn().await?;
        statement(
            "INSERT INTO portal_sessions \
                 (id_hash, subject, display_name, roles, administrator, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind::<Text, _>(&session.id_hash)
        .bind::<Text, _>(&session.subject)
        .bind::<Text, _>(&session.display_name)
        .bind::<Text, _>(roles_text(&session.roles)?)
        .bind::<Bool, _>(session.administrator)
        .bind::<Timestamptz, _>(session.created_at)
        .bind::<Timestamptz, _>(session.expires_at)
        .execute(conn)
        .await
        .map_err(query_error)?;
        // A second statement: two logins of one person at the same instant may
        // leave one session over the cap until the person's next login.
        statement(
            "DELETE FROM portal_sessions WHERE id_hash IN ( \
                 SELECT id_hash FROM portal_sessions WHERE subject = $1 \
                 ORDER BY created_at DESC, id_hash DESC OFFSET $2)",
        )
        .bind::<Text, _>(&session.subject)
        .bind::<BigInt, _>(i64::from(per_person_cap.max(1)))
        .execute(conn)
        .await
        .map_err(query_error)?;
        Ok(())
    }

    async fn session(
        &self,
        id_hash: &str,
        now: OffsetDateTime,
    ) -> Result<Option<PortalSession>, StoreError> {
        let conn = &mut *self.portal_conn().await?;
        let found = statement(concat!(
            "SELECT ",
            session_columns!(),
            " FROM portal_sessions WHERE id_hash = $1 AND expires_at > $2"
        ))
        .bind::<Text, _>(id_hash)
        .bind::<Timestamptz, _>(now)
        .get_results::<SessionRow>(conn)
        .await
        .map_err(query_error)?;
        found
            .into_iter()
            .next()
            .map(SessionRow::into_session)
            .transpose()
    }

    async fn end_session(&self, id_hash: &str) -> Result<bool, StoreError> {
        let conn = &mut *self.portal_conn().await?;
        let ended = statement("DELETE FROM portal_sessions WHERE id_hash = $1")
            .bind::<Text, _>(id_hash)
            .execute(conn)
            .await
            .map_err(query_error)?;
        Ok(ended > 0)
    }

    async fn sweep(&self, now: OffsetDateTime, limit: u32) -> Result<Swept, StoreError> {
        let conn = &mut *self.portal_conn().await?;
        let sessions = statement(
            "DELETE FROM portal_sessions WHERE id_hash IN ( \
                 SELECT id_hash FROM portal_sessions WHERE expires_at <= $1 \
                 LIMIT $2 FOR UPDATE SKIP LOCKED)",
        )
        .bind::<Timestamptz, _>(now)
        .bind::<BigInt, _>(i64::from(limit))
        .execute(conn)
        .await
        .map_err(query_error)?;
        let logins = statement(
            "DELETE FROM portal_logins WHERE state_hash IN ( \
                 SELECT state_hash FROM portal_logins WHERE expires_at <= $1 \
                 LIMIT $2 FOR UPDATE SKIP LOCKED)",
        )
        .bind::<Timestamptz, _>(now)
        .bind::<BigInt, _>(i64::from(limit))
        .execute(conn)
        .await
        .map_err(query_error)?;
        Ok(Swept {
            sessions: touched(sessions),
            logins: touched(logins),
        })
    }
}
