//! Schedules and their fires on PostgreSQL: the schedule half of the
//! [`ScriptStore`](docket_catalog::ScriptStore) implementation. A fire is one
//! transaction: the compare-and-set on `next_fire_at` (whose row lock also
//! orders two replicas firing the same schedule), the fire record under its
//! unique (script, fire time), the overlap check, and the run with its
//! `NOTIFY`.

use std::time::Duration;

use diesel::prelude::*;
use diesel::result::{DatabaseErrorKind, Error as DieselError};
use diesel::sql_types::{BigInt, Bool, Integer, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, RunQueryDsl};
use time::OffsetDateTime;

use super::PgStore;
use super::listen::run_channel;
use crate::columns::PgColumns;
use crate::error::catalog_query_error;
use crate::scripts::rows::{self, due_script_columns, fire_columns, run_columns, schedule_columns};
use crate::shared;
use crate::statement::statement;
use docket_catalog::CatalogError;
use docket_catalog::scripts::{Fire, FireOutcome, FireRecord, NewSchedule, Run, Schedule, Script};

type ScheduleRow = rows::ScheduleRow<PgColumns>;
type DueRow = rows::DueRow<PgColumns>;
type FireRow = rows::FireRow<PgColumns>;
type RunRow = rows::RunRow<PgColumns>;

#[derive(QueryableByName)]
struct Found {
    #[diesel(sql_type = Bool)]
    found: bool,
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = BigInt)]
    count: i64,
}

/// One schedule, joined with its script.
async fn read_schedule(
    conn: &mut diesel_async::AsyncPgConnection,
    script_id: &str,
) -> diesel::QueryResult<Option<ScheduleRow>> {
    statement(concat!(
        "SELECT ",
        schedule_columns!(),
        " FROM script_schedules sc JOIN scripts s ON s.id = sc.script_id WHERE sc.script_id = $1"
    ))
    .bind::<Text, _>(script_id)
    .get_result::<ScheduleRow>(conn)
    .await
    .optional()
}

pub(super) async fn set_schedule(
    store: &PgStore,
    schedule: NewSchedule,
    owner_limit: u32,
) -> Result<Schedule, CatalogError> {
    schedule.validate()?;
    let mut conn = store.catalog_conn().await?;
    let row = conn
        .transaction(async |conn| {
            // One owner's schedule sets take turns on a transaction-scoped
            // advisory lock, so each count includes every set committed before it.
            statement(
                "SELECT pg_advisory_xact_lock(hashtext('script_schedules'), hashtext(owner)) \
                 FROM scripts WHERE id = $1",
            )
            .bind::<Text, _>(&schedule.script_id)
            .execute(conn)
            .await?;
            let others = statement(
                "SELECT count(*) AS count FROM script_schedules sc \
                 JOIN scripts s ON s.id = sc.script_id \
                 WHERE s.owner = (SELECT owner FROM scripts WHERE id = $1) \
                 AND sc.script_id <> $1",
            )
            .bind::<Text, _>(&schedule.script_id)
            .get_result::<Count>(conn)
            .await?;
            if others.count >= i64::from(owner_limit) {
                return Ok(Err(CatalogError::LimitReached(owner_limit)));
            }
            statement(
                "INSERT INTO script_schedules \
                 (script_id, cron, timezone, args, next_fire_at, set_by) \
                 VALUES ($1, $2, $3, $4, $5, $6) \
                 ON CONFLICT (script_id) DO UPDATE SET cron = EXCLUDED.cron, \
                 timezone = EXCLUDED.timezone, args = EXCLUDED.args, enabled = true, \
                 next_fire_at = EXCLUDED.next_fire_at, last_fire_at = NULL, missed_fires = 0, \
                 set_by = EXCLUDED.set_by, updated_at = now()",
            )
            .bind::<Text, _>(&schedule.script_id)
            .bind::<Text, _>(&schedule.cron)
            .bind::<Text, _>(&schedule.timezone)
            .bind::<Jsonb, _>(&schedule.args)
            .bind::<Timestamptz, _>(schedule.next_fire_at)
            .bind::<Text, _>(&schedule.set_by)
            .execute(conn)
            .await?;
            read_schedule(conn, &schedule.script_id).await.map(Ok)
        })
        .await
        .map_err(|error| match error {
            DieselError::DatabaseError(DatabaseErrorKind::ForeignKeyViolation, _) => {
                CatalogError::Invalid("there is no such script to schedule".into())
            }
            other => catalog_query_error(other),
        })??;
    row.ok_or_else(|| CatalogError::Corrupt("a schedule vanished as it was saved".into()))?
        .try_into()
}

pub(super) async fn schedule(
    store: &PgStore,
    script_id: &str,
) -> Result<Option<Schedule>, CatalogError> {
    read_schedule(&mut *store.catalog_conn().await?, script_id)
        .await
        .map_err(catalog_query_error)?
        .map(Schedule::try_from)
        .transpose()
}

pub(super) async fn list_schedules(
    store: &PgStore,
    owner: Option<&str>,
    limit: u32,
) -> Result<Vec<Schedule>, CatalogError> {
    statement(concat!(
        "SELECT ",
        schedule_columns!(),
        " FROM script_schedules sc JOIN scripts s ON s.id = sc.script_id \
         WHERE ($1::text IS NULL OR s.owner = $1) ORDER BY s.name, s.owner LIMIT $2"
    ))
    .bind::<Nullable<Text>, _>(owner)
    .bind::<BigInt, _>(shared::limit(limit))
    .load::<ScheduleRow>(&mut *store.catalog_conn().await?)
    .await
    .map_err(catalog_query_error)?
    .into_iter()
    .map(Schedule::try_from)
    .collect()
}

pub(super) async fn set_schedule_enabled(
    store: &PgStore,
    script_id: &str,
    enabled: bool,
    next_fire_at: OffsetDateTime,
) -> Result<Option<Schedule>, CatalogError> {
    let mut conn = store.catalog_conn().await?;
    let row = conn
        .transaction(async |conn| {
            let changed = statement(
                "UPDATE script_schedules SET \
                 next_fire_at = CASE WHEN $2 AND NOT enabled THEN $3 ELSE next_fire_at END, \
                 enabled = $2, updated_at = now() WHERE script_id = $1",
            )
            .bind::<Text, _>(script_id)
            .bind::<Bool, _>(enabled)
            .bind::<Timestamptz, _>(next_fire_at)
            .execute(conn)
            .await?;
            if changed == 0 {
                return Ok(None);
            }
            read_schedule(conn, script_id).await
        })
        .await
        .map_err(catalog_query_error)?;
    row.map(Schedule::try_from).transpose()
}

pub(super) async fn due_schedules(
    store: &PgStore,
    now: OffsetDateTime,
    limit: u32,
) -> Result<Vec<(Schedule, Script)>, CatalogError> {
    statement(concat!(
        "SELECT ",
        schedule_columns!(),
        ", ",
        due_script_columns!(),
        " FROM script_schedules sc JOIN scripts s ON s.id = sc.script_id \
         WHERE sc.enabled AND sc.next_fire_at <= $1 ORDER BY sc.next_fire_at LIMIT $2"
    ))
    .bind::<Timestamptz, _>(now)
    .bind::<BigInt, _>(shared::limit(limit))
    .load::<DueRow>(&mut *store.catalog_conn().await?)
    .await
    .map_err(catalog_query_error)?
    .into_iter()
    .map(<(Schedule, Script)>::try_from)
    .collect()
}

/// What the fire transaction decided, before its rows are read back.
enum Fired {
    Lost,
    Advanced,
    Skipped,
    Queued(Box<RunRow>),
}

pub(super) async fn fire_schedule(
    store: &PgStore,
    fire: Fire,
) -> Result<FireOutcome, CatalogError> {
    fire.validate()?;
    let mut conn = store.catalog_conn().await?;
    let fired = conn
        .transaction(async |conn| {
            // The compare-and-set: only the replica that still finds the
            // schedule waiting for this time advances it. Its row lock makes a
            // second replica wait here, then find the new time and stop.
            let advanced = statement(
                "UPDATE script_schedules SET next_fire_at = $3, \
                 last_fire_at = CASE WHEN $5 THEN $4 ELSE last_fire_at END, \
                 missed_fires = missed_fires + CASE WHEN $5 THEN $6 ELSE 0 END, \
                 updated_at = now() \
                 WHERE script_id = $1 AND next_fire_at = $2 AND enabled",
            )
            .bind::<Text, _>(&fire.script_id)
            .bind::<Timestamptz, _>(fire.expected_next_fire_at)
            .bind::<Timestamptz, _>(fire.next_fire_at)
            .bind::<Timestamptz, _>(fire.fire_time)
            .bind::<Bool, _>(fire.run.is_some())
            .bind::<BigInt, _>(fire.missed)
            .execute(conn)
            .await?;
            if advanced == 0 {
                return Ok(Fired::Lost);
            }
            let Some(run) = &fire.run else {
                return Ok(Fired::Advanced);
            };
            // The unique key: a fire time fires once, ever. Losing here rolls
            // the advance back with it.
            let recorded = statement(
                "INSERT INTO script_schedule_fires \
                 (script_id, fire_time, status, missed, fired_by) \
                 VALUES ($1, $2, 'skipped_overlap', $3, $4) ON CONFLICT DO NOTHING",
            )
            .bind::<Text, _>(&fire.script_id)
            .bind::<Timestamptz, _>(fire.fire_time)
            .bind::<BigInt, _>(fire.missed)
            .bind::<Text, _>(&fire.fired_by)
            .execute(conn)
            .await?;
            if recorded == 0 {
                return Err(DieselError::RollbackTransaction);
            }
            let open = statement(
                "SELECT EXISTS (SELECT 1 FROM script_runs WHERE script_id = $1 \
                 AND trigger_kind = 'schedule' AND status IN ('queued', 'running')) AS found",
            )
            .bind::<Text, _>(&fire.script_id)
            .get_result::<Found>(conn)
            .await?;
            if open.found {
                return Ok(Fired::Skipped);
            }
            let queued = statement(concat!(
                "WITH queued AS ( \
                     INSERT INTO script_runs \
                     (id, script_id, script_name, script_owner, version, status, params, \
                      requested_by, trigger_kind, fire_time) \
                     VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7, 'schedule', $8) RETURNING ",
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
            .bind::<Timestamptz, _>(fire.fire_time)
            .get_result::<RunRow>(conn)
            .await?;
            statement(
                "UPDATE script_schedule_fires SET status = 'queued', run_id = $3 \
                 WHERE script_id = $1 AND fire_time = $2",
            )
            .bind::<Text, _>(&fire.script_id)
            .bind::<Timestamptz, _>(fire.fire_time)
            .bind::<Text, _>(&run.id)
            .execute(conn)
            .await?;
            Ok(Fired::Queued(Box::new(queued)))
        })
        .await;
    match fired {
        Ok(Fired::Lost) | Err(DieselError::RollbackTransaction) => Ok(FireOutcome::Lost),
        Ok(Fired::Advanced) => Ok(FireOutcome::Advanced),
        Ok(Fired::Skipped) => Ok(FireOutcome::SkippedOverlap),
        Ok(Fired::Queued(row)) => Ok(FireOutcome::Queued(Box::new(Run::try_from(*row)?))),
        Err(error) => Err(catalog_query_error(error)),
    }
}

pub(super) async fn schedule_fires(
    store: &PgStore,
    script_id: &str,
    limit: u32,
) -> Result<Vec<FireRecord>, CatalogError> {
    statement(concat!(
        "SELECT ",
        fire_columns!(),
        " FROM script_schedule_fires WHERE script_id = $1 ORDER BY fire_time DESC LIMIT $2"
    ))
    .bind::<Text, _>(script_id)
    .bind::<BigInt, _>(shared::limit(limit))
    .load::<FireRow>(&mut *store.catalog_conn().await?)
    .await
    .map_err(catalog_query_error)?
    .into_iter()
    .map(FireRecord::try_from)
    .collect()
}

pub(super) async fn delete_old_fires(
    store: &PgStore,
    retention: Duration,
    limit: u32,
) -> Result<u64, CatalogError> {
    let deleted = statement(
        "WITH gone AS (DELETE FROM script_schedule_fires WHERE (script_id, fire_time) IN ( \
             SELECT script_id, fire_time FROM script_schedule_fires \
              WHERE created_at < now() - $1 * interval '1 millisecond' \
              LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING 1) \
         SELECT count(*) AS count FROM gone",
    )
    .bind::<BigInt, _>(shared::millis(retention))
    .bind::<BigInt, _>(shared::limit(limit))
    .get_result::<Count>(&mut *store.catalog_conn().await?)
    .await
    .map_err(catalog_query_error)?;
    Ok(u64::try_from(deleted.count).unwrap_or(0))
}
