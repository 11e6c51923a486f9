//! Scripts, versions and runs on PostgreSQL: the [`ScriptStore`]
//! implementation, over the rows `scripts::rows` reads on both backends. The claim lives in `scripts/claim.sql`; the
//! other statements are short enough to read here.

use std::time::Duration;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Integer, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use time::OffsetDateTime;

use super::PgStore;
use super::listen::run_channel;
use super::schedules;
use crate::columns::PgColumns;
use crate::error::catalog_query_error;
use crate::scripts::rows::{
    self, CancelRow, IdRow, StatusRow, run_columns, script_columns, version_columns,
};
use crate::scripts::{self, VersionInsert};
use crate::shared;
use crate::statement::statement;
use docket_catalog::CatalogError;
use docket_catalog::scripts::{
    CancelOutcome, Fire, FireOutcome, FireRecord, Lease, NewRun, NewSchedule, NewScript, Renewal,
    Run, RunEnding, RunFilter, RunSignalListener, RunStatus, Schedule, Script, ScriptChange,
    ScriptStore, ScriptVersion,
};

/// The fence every write of a lease holder carries ($1 id, $2 owner, $3 attempt).
macro_rules! fence {
    () => {
        "id = $1 AND lease_owner = $2 AND attempt = $3 AND status = 'running'"
    };
}

type ScriptRow = rows::ScriptRow<PgColumns>;
type VersionRow = rows::VersionRow<PgColumns>;
type RunRow = rows::RunRow<PgColumns>;

#[derive(QueryableByName)]
struct NowRow {
    #[diesel(sql_type = Timestamptz)]
    now: OffsetDateTime,
}

fn runs(rows: Vec<RunRow>) -> Result<Vec<Run>, CatalogError> {
    rows.into_iter().map(Run::try_from).collect()
}

async fn insert_version(
    conn: &mut AsyncPgConnection,
    version: &VersionInsert<'_>,
) -> diesel::QueryResult<VersionRow> {
    statement(concat!(
        "INSERT INTO script_versions \
         (script_id, version, source, description, params, author, author_roles) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ",
        version_columns!()
    ))
    .bind::<Text, _>(version.script_id)
    .bind::<Integer, _>(version.version)
    .bind::<Text, _>(version.source)
    .bind::<Text, _>(version.description)
    .bind::<Jsonb, _>(version.params)
    .bind::<Text, _>(version.author)
    .bind::<Jsonb, _>(version.author_roles)
    .get_result(conn)
    .await
}

#[async_trait]
impl ScriptStore for PgStore {
    async fn create_script(
        &self,
        script: NewScript,
        owner_limit: u32,
    ) -> Result<(Script, ScriptVersion), CatalogError> {
        script.validate()?;
        let author_roles = scripts::roles_json(&script.author_roles);
        let mut conn = self.catalog_conn().await?;
        let created = conn
            .transaction(async |conn| {
                // One owner's creates take turns on a transaction-scoped advisory
                // lock, so each count includes every create committed before it.
                statement("SELECT pg_advisory_xact_lock(hashtext('scripts'), hashtext($1))")
                    .bind::<Text, _>(&script.owner)
                    .execute(conn)
                    .await?;
                let Some(script_row) = statement(concat!(
                    "INSERT INTO scripts (id, owner, name, description, params, version) \
                     SELECT $1, $2, $3, $4, $5, 1 \
                      WHERE (SELECT count(*) FROM scripts WHERE owner = $2) < $6 RETURNING ",
                    script_columns!()
                ))
                .bind::<Text, _>(&script.id)
                .bind::<Text, _>(&script.owner)
                .bind::<Text, _>(&script.name)
                .bind::<Text, _>(&script.description)
                .bind::<Jsonb, _>(&script.params)
                .bind::<BigInt, _>(i64::from(owner_limit))
                .get_result::<ScriptRow>(conn)
                .await
                .optional()?
                else {
                    return Ok(None);
                };
                let version_row = insert_version(
                    conn,
                    &VersionInsert {
                        script_id: &script.id,
                        version: 1,
                        source: &script.source,
                        description: &script.description,
                        params: &script.params,
                        author: &script.author,
                        author_roles: &author_roles,
                    },
                )
                .await?;
                Ok::<_, diesel::result::Error>(Some((script_row, version_row)))
            })
            .await
            .map_err(catalog_query_error)?;
        let Some((script_row, version_row)) = created else {
            return Err(CatalogError::LimitReached(owner_limit));
        };
        Ok((script_row.try_into()?, version_row.try_into()?))
    }

    async fn update_script(
        &self,
        id: &str,
        change: ScriptChange,
    ) -> Result<Option<(Script, ScriptVersion)>, CatalogError> {
        change.validate()?;
        let editor_roles = scripts::roles_json(&change.editor_roles);
        let mut conn = self.catalog_conn().await?;
        let id = id.to_owned();
        let rows = conn
            .transaction(async |conn| {
                let Some(current) = statement(concat!(
                    "SELECT ",
                    version_columns!(),
                    " FROM script_versions \
                     WHERE script_id = $1 AND version = \
                     (SELECT version FROM scripts WHERE id = $1 FOR UPDATE)"
                ))
                .bind::<Text, _>(&id)
                .get_result::<VersionRow>(conn)
                .await
                .optional()?
                else {
                    return Ok(None);
                };
                if let Some(base) = change.base_version
                    && base != current.version
                {
                    return Ok(Some(Err(current.version)));
                }
                let description = change.description.as_ref().unwrap_or(&current.description);
                let params = change.params.as_ref().unwrap_or(&current.params);
                // Only new source changes whose roles the version carries.
                let (source, author, author_roles) = match change.new_source(&current.source) {
                    Some(source) => (source, change.editor.as_str(), &editor_roles),
                    None => (
                        current.source.as_str(),
                        current.author.as_str(),
                        &current.author_roles,
                    ),
                };
                let version_row = insert_version(
                    conn,
                    &VersionInsert {
                        script_id: &id,
                        version: current.version + 1,
                        source,
                        description,
                        params,
                        author,
                        author_roles,
                    },
                )
                .await?;
                let script_row = statement(concat!(
                    "UPDATE scripts SET version = $2, description = $3, params = $4, \
                     enabled = COALESCE($5, enabled), status = COALESCE($6, status), \
                     updated_at = now() WHERE id = $1 RETURNING ",
                    script_columns!()
                ))
                .bind::<Text, _>(&id)
                .bind::<Integer, _>(current.version + 1)
                .bind::<Text, _>(description)
                .bind::<Jsonb, _>(params)
                .bind::<Nullable<Bool>, _>(change.enabled)
                .bind::<Nullable<Text>, _>(change.status.map(|status| status.as_str()))
                .get_result::<ScriptRow>(conn)
                .await?;
                Ok::<_, diesel::result::Error>(Some(Ok((script_row, version_row))))
            })
            .await
            .map_err(catalog_query_error)?;
        match rows {
            None => Ok(None),
            Some(Err(current)) => Err(CatalogError::Stale(current)),
            Some(Ok((script, version))) => Ok(Some((script.try_into()?, version.try_into()?))),
        }
    }

    async fn find_script(&self, owner: &str, name: &str) -> Result<Option<Script>, CatalogError> {
        statement(concat!(
            "SELECT ",
            script_columns!(),
            " FROM scripts WHERE owner = $1 AND name = $2"
        ))
        .bind::<Text, _>(owner)
        .bind::<Text, _>(name)
        .get_result::<ScriptRow>(&mut *self.catalog_conn().await?)
        .await
        .optional()
        .map_err(catalog_query_error)?
        .map(Script::try_from)
        .transpose()
    }

    async fn script(&self, id: &str) -> Result<Option<Script>, CatalogError> {
        statement(concat!(
            "SELECT ",
            script_columns!(),
            " FROM scripts WHERE id = $1"
        ))
        .bind::<Text, _>(id)
        .get_result::<ScriptRow>(&mut *self.catalog_conn().await?)
        .await
        .optional()
        .map_err(catalog_query_error)?
        .map(Script::try_from)
        .transpose()
    }

    async fn list_scripts(
        &self,
        owner: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Script>, CatalogError> {
        statement(concat!(
            "SELECT ",
            script_columns!(),
            " FROM scripts WHERE ($1::text IS NULL OR owner = $1) \
             ORDER BY name, owner LIMIT $2"
        ))
        .bind::<Nullable<Text>, _>(owner)
        .bind::<BigInt, _>(shared::limit(limit))
        .load::<ScriptRow>(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)?
        .into_iter()
        .map(Script::try_from)
        .collect()
    }

    async fn delete_script(&self, id: &str) -> Result<bool, CatalogError> {
        let deleted = statement("DELETE FROM scripts WHERE id = $1")
            .bind::<Text, _>(id)
            .execute(&mut *self.catalog_conn().await?)
            .await
            .map_err(catalog_query_error)?;
        Ok(deleted == 1)
    }

    async fn script_version(
        &self,
        script_id: &str,
        version: i32,
    ) -> Result<Option<ScriptVersion>, CatalogError> {
        statement(concat!(
            "SELECT ",
            version_columns!(),
            " FROM script_versions WHERE script_id = $1 AND version = $2"
        ))
        .bind::<Text, _>(script_id)
        .bind::<Integer, _>(version)
        .get_result::<VersionRow>(&mut *self.catalog_conn().await?)
        .await
        .optional()
        .map_err(catalog_query_error)?
        .map(ScriptVersion::try_from)
        .transpose()
    }

    async fn enqueue(&self, run: NewRun) -> Result<Run, CatalogError> {
        run.validate()?;
        // The notification goes out at commit, only if the insert commits.
        statement(concat!(
            "WITH queued AS ( \
                 INSERT INTO script_runs \
                 (id, script_id, script_name, script_owner, version, status, params, requested_by, \
                  trace_context) \
                 VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, $8) RETURNING ",
            run_columns!(),
            " \
             ), told AS (SELECT pg_notify('",
            run_channel!(),
            "', 'queued:' || id) FROM queued) \
             SELECT queued.* FROM queued, (SELECT count(*) FROM told) AS sent"
        ))
        .bind::<Text, _>(&run.id)
        .bind::<Text, _>(&run.script_id)
        .bind::<Text, _>(&run.script_name)
        .bind::<Text, _>(&run.script_owner)
        .bind::<Integer, _>(run.version)
        .bind::<Jsonb, _>(&run.params)
        .bind::<Text, _>(&run.requested_by)
        .bind::<Nullable<Text>, _>(&run.trace_context)
        .get_result::<RunRow>(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)?
        .try_into()
    }

    async fn run(&self, id: &str) -> Result<Option<(Run, OffsetDateTime)>, CatalogError> {
        let mut conn = self.catalog_conn().await?;
        let Some(row) = statement(concat!(
            "SELECT ",
            run_columns!(),
            " FROM script_runs WHERE id = $1"
        ))
        .bind::<Text, _>(id)
        .get_result::<RunRow>(&mut *conn)
        .await
        .optional()
        .map_err(catalog_query_error)?
        else {
            return Ok(None);
        };
        let now = statement("SELECT now() AS now")
            .get_result::<NowRow>(&mut *conn)
            .await
            .map_err(catalog_query_error)?;
        Ok(Some((row.try_into()?, now.now)))
    }

    async fn list_runs(&self, filter: &RunFilter, limit: u32) -> Result<Vec<Run>, CatalogError> {
        let rows = statement(concat!(
            "SELECT ",
            run_columns!(),
            " FROM script_runs \
             WHERE ($1::text IS NULL OR script_id = $1) \
               AND ($2::text IS NULL OR requested_by = $2 OR script_owner = $2) \
               AND ($3::timestamptz IS NULL OR (created_at, id) < ($3, $4)) \
               AND ($6::text IS NULL OR status = $6) \
             ORDER BY created_at DESC, id DESC LIMIT $5"
        ))
        .bind::<Nullable<Text>, _>(&filter.script_id)
        .bind::<Nullable<Text>, _>(&filter.visible_to)
        .bind::<Nullable<Timestamptz>, _>(filter.before.as_ref().map(|cursor| cursor.created_at))
        .bind::<Nullable<Text>, _>(filter.before.as_ref().map(|cursor| &cursor.id))
        .bind::<BigInt, _>(shared::limit(limit))
        .bind::<Nullable<Text>, _>(filter.status.map(|status| status.as_str()))
        .load::<RunRow>(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)?;
        runs(rows)
    }

    async fn claim(
        &self,
        worker: &str,
        lease: Duration,
        max_running_per_owner: u32,
    ) -> Result<Option<Run>, CatalogError> {
        statement(concat!(
            include_str!("scripts/claim.sql"),
            " ",
            run_columns!()
        ))
        .bind::<Text, _>(worker)
        .bind::<BigInt, _>(shared::millis(lease))
        .bind::<BigInt, _>(i64::from(max_running_per_owner))
        .get_result::<RunRow>(&mut *self.catalog_conn().await?)
        .await
        .optional()
        .map_err(catalog_query_error)?
        .map(Run::try_from)
        .transpose()
    }

    async fn renew(
        &self,
        lease: &Lease,
        duration: Duration,
        host_calls: i64,
    ) -> Result<Renewal, CatalogError> {
        let row = statement(concat!(
            "UPDATE script_runs SET lease_expires_at = now() + $4 * interval '1 millisecond', \
             host_calls = GREATEST(host_calls, $5), updated_at = now() WHERE ",
            fence!(),
            " \
             RETURNING cancel_requested_at IS NOT NULL AS cancel_requested"
        ))
        .bind::<Text, _>(&lease.run_id)
        .bind::<Text, _>(&lease.owner)
        .bind::<Integer, _>(lease.attempt)
        .bind::<BigInt, _>(shared::millis(duration))
        .bind::<BigInt, _>(host_calls.max(0))
        .get_result::<CancelRow>(&mut *self.catalog_conn().await?)
        .await
        .optional()
        .map_err(catalog_query_error)?;
        Ok(rows::renewal(row))
    }

    async fn finish(
        &self,
        lease: &Lease,
        ending: RunEnding,
    ) -> Result<Option<RunStatus>, CatalogError> {
        ending.validate()?;
        let host_calls = rows::host_calls(&ending.metrics);
        // A cancel recorded first wins over the ending. Followers on every
        // replica hear of the end when it commits.
        let ended = statement(concat!(
            "WITH ended AS (UPDATE script_runs SET \
             status = CASE WHEN cancel_requested_at IS NULL THEN $4 ELSE 'cancelled' END, \
             result = CASE WHEN cancel_requested_at IS NULL THEN $5 END, \
             error = CASE WHEN cancel_requested_at IS NULL THEN $6 END, \
             error_kind = CASE WHEN cancel_requested_at IS NULL THEN $7 END, \
             log = $8, log_truncated = $9, metrics = $10, \
             host_calls = GREATEST(host_calls, $11), \
             lease_owner = NULL, lease_expires_at = NULL, finished_at = now(), updated_at = now() \
             WHERE ",
            fence!(),
            " RETURNING id, status) SELECT ended.status FROM ended \
             CROSS JOIN LATERAL (SELECT pg_notify('",
            run_channel!(),
            "', 'ended:' || ended.id)) AS signalled"
        ))
        .bind::<Text, _>(&lease.run_id)
        .bind::<Text, _>(&lease.owner)
        .bind::<Integer, _>(lease.attempt)
        .bind::<Text, _>(ending.status.as_str())
        .bind::<Nullable<Jsonb>, _>(&ending.result)
        .bind::<Nullable<Text>, _>(&ending.error)
        .bind::<Nullable<Text>, _>(ending.error_kind.map(|kind| kind.as_str()))
        .bind::<Text, _>(&ending.log)
        .bind::<Bool, _>(ending.log_truncated)
        .bind::<Jsonb, _>(&ending.metrics)
        .bind::<BigInt, _>(host_calls)
        .get_result::<StatusRow>(&mut *self.catalog_conn().await?)
        .await
        .optional()
        .map_err(catalog_query_error)?;
        rows::ended_status(ended)
    }

    async fn retry(
        &self,
        lease: &Lease,
        error: &str,
        delay: Duration,
    ) -> Result<bool, CatalogError> {
        requeue(self, lease, Some(error), delay).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, CatalogError> {
        requeue(self, lease, None, Duration::ZERO).await
    }

    async fn cancel_run(&self, id: &str) -> Result<Option<CancelOutcome>, CatalogError> {
        let mut conn = self.catalog_conn().await?;
        let id = id.to_owned();
        let outcome = conn
            .transaction(async |conn| {
                let Some(before) =
                    statement("SELECT status FROM script_runs WHERE id = $1 FOR UPDATE")
                        .bind::<Text, _>(&id)
                        .get_result::<StatusRow>(conn)
                        .await
                        .optional()?
                else {
                    return Ok(None);
                };
                match before.status.as_str() {
                    "queued" => {
                        let row = statement(concat!(
                            "UPDATE script_runs SET status = 'cancelled', \
                             cancel_requested_at = now(), finished_at = now(), \
                             updated_at = now() WHERE id = $1 RETURNING ",
                            run_columns!()
                        ))
                        .bind::<Text, _>(&id)
                        .get_result::<RunRow>(conn)
                        .await?;
                        Ok(Some(Ok(row)))
                    }
                    "running" => {
                        statement(concat!(
                            "WITH asked AS (UPDATE script_runs SET cancel_requested_at = \
                             COALESCE(cancel_requested_at, now()), updated_at = now() \
                             WHERE id = $1 RETURNING id) \
                             SELECT pg_notify('",
                            run_channel!(),
                            "', 'cancel:' || id) FROM asked"
                        ))
                        .bind::<Text, _>(&id)
                        .execute(conn)
                        .await?;
                        Ok(Some(Err(true)))
                    }
                    _ => Ok::<_, diesel::result::Error>(Some(Err(false))),
                }
            })
            .await
            .map_err(catalog_query_error)?;
        rows::cancel_outcome(outcome)
    }

    async fn delete_finished_runs(
        &self,
        retention: Duration,
        limit: u32,
    ) -> Result<Vec<String>, CatalogError> {
        // SKIP LOCKED: replicas running the pass together delete disjoint rows.
        let rows = statement(
            "DELETE FROM script_runs WHERE id IN ( \
                 SELECT id FROM script_runs \
                  WHERE finished_at IS NOT NULL \
                    AND status IN ('succeeded', 'failed', 'cancelled') \
                    AND finished_at < now() - $1 * interval '1 millisecond' \
                  LIMIT $2 FOR UPDATE SKIP LOCKED) \
             RETURNING id",
        )
        .bind::<BigInt, _>(shared::millis(retention))
        .bind::<BigInt, _>(shared::limit(limit))
        .load::<IdRow>(&mut *self.catalog_conn().await?)
        .await
        .map_err(catalog_query_error)?;
        Ok(rows.into_iter().map(|row| row.id).collect())
    }

    async fn set_schedule(
        &self,
        schedule: NewSchedule,
        owner_limit: u32,
    ) -> Result<Schedule, CatalogError> {
        schedules::set_schedule(self, schedule, owner_limit).await
    }

    async fn schedule(&self, script_id: &str) -> Result<Option<Schedule>, CatalogError> {
        schedules::schedule(self, script_id).await
    }

    async fn list_schedules(
        &self,
        owner: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Schedule>, CatalogError> {
        schedules::list_schedules(self, owner, limit).await
    }

    async fn set_schedule_enabled(
        &self,
        script_id: &str,
        enabled: bool,
        next_fire_at: OffsetDateTime,
    ) -> Result<Option<Schedule>, CatalogError> {
        schedules::set_schedule_enabled(self, script_id, enabled, next_fire_at).await
    }

    async fn due_schedules(
        &self,
        now: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<(Schedule, Script)>, CatalogError> {
        schedules::due_schedules(self, now, limit).await
    }

    async fn fire_schedule(&self, fire: Fire) -> Result<FireOutcome, CatalogError> {
        schedules::fire_schedule(self, fire).await
    }

    async fn schedule_fires(
        &self,
        script_id: &str,
        limit: u32,
    ) -> Result<Vec<FireRecord>, CatalogError> {
        schedules::schedule_fires(self, script_id, limit).await
    }

    async fn delete_old_fires(&self, retention: Duration, limit: u32) -> Result<u64, CatalogError> {
        schedules::delete_old_fires(self, retention, limit).await
    }

    fn set_run_listener(&self, listener: RunSignalListener) {
        self.run_signals.set_listener(listener);
    }
}

/// Puts a leased run back in the queue (a retry counts a platform fault, a
/// release does not) and announces it, fenced by the lease.
async fn requeue(
    store: &PgStore,
    lease: &Lease,
    error: Option<&str>,
    delay: Duration,
) -> Result<bool, CatalogError> {
    let told = statement(concat!(
        "WITH queued AS ( \
             UPDATE script_runs SET status = 'queued', lease_owner = NULL, \
             lease_expires_at = NULL, error = COALESCE($4, error), \
             platform_faults = platform_faults + CASE WHEN $4 IS NULL THEN 0 ELSE 1 END, \
             not_before = now() + $5 * interval '1 millisecond', updated_at = now() \
             WHERE ",
        fence!(),
        " RETURNING id) \
         SELECT pg_notify('",
        run_channel!(),
        "', 'queued:' || id) FROM queued"
    ))
    .bind::<Text, _>(&lease.run_id)
    .bind::<Text, _>(&lease.owner)
    .bind::<Integer, _>(lease.attempt)
    .bind::<Nullable<Text>, _>(error)
    .bind::<BigInt, _>(shared::millis(delay))
    .execute(&mut *store.catalog_conn().await?)
    .await
    .map_err(catalog_query_error)?;
    Ok(told == 1)
}
