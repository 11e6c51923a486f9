//! Schedules and their fires on SQLite: the schedule half of the
//! [`ScriptStore`](docket_catalog::ScriptStore) implementation. Times are
//! stored in the fixed-width text form, so the compare-and-set on
//! `next_fire_at` compares text written the same way. One writer
//! connection: a fire is one immediate transaction no other write can
//! interleave with; the unique (script, fire time) still guards it.

use std::time::Duration;

use diesel::prelude::*;
use diesel::result::Error as DieselError;
use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text};
use time::OffsetDateTime;

use super::SqliteStore;
use super::assets::stored_time;
use super::sql::{modifier, now};
use crate::columns::TextColumns;
use crate::error::catalog_error;
use crate::scripts::rows::{self, due_script_columns, fire_columns, run_columns, schedule_columns};
use crate::shared;
use crate::statement::statement;
use docket_catalog::CatalogError;
use docket_catalog::scripts::{Fire, FireOutcome, FireRecord, NewSchedule, Run, Schedule, Script};

type ScheduleRow = rows::ScheduleRow<TextColumns>;
type DueRow = rows::DueRow<TextColumns>;
type FireRow = rows::FireRow<TextColumns>;
type RunRow = rows::RunRow<TextColumns>;

#[derive(QueryableByName)]
struct Found {
    #[diesel(sql_type = Bool)]
    found: bool,
}

fn read_schedule(conn: &mut SqliteConnection, script_id: &str) -> QueryResult<Option<ScheduleRow>> {
    statement(concat!(
        "SELECT ",
        schedule_columns!(),
        " FROM script_schedules sc JOIN scripts s ON s.id = sc.script_id WHERE sc.script_id = ?1"
    ))
    .bind::<Text, _>(script_id)
    .get_result::<ScheduleRow>(conn)
    .optional()
}

pub(super) async fn set_schedule(
    store: &SqliteStore,
    schedule: NewSchedule,
    owner_limit: u32,
) -> Result<Schedule, CatalogError> {
    schedule.validate()?;
    let next_fire_at = stored_time(schedule.next_fire_at)?;
    let row = store
        .write(move |conn| {
            conn.immediate_transaction(|conn| {
                let exists =
                    statement("SELECT EXISTS (SELECT 1 FROM scripts WHERE id = ?1) AS found")
                        .bind::<Text, _>(&schedule.script_id)
                        .get_result::<Found>(conn)?;
                if !exists.found {
                    return Ok(None);
                }
                // Under the immediate transaction's write lock: the count is of
                // every schedule committed before this one.
                let at_limit = statement(OTHER_SCHEDULES_AT_LIMIT)
                    .bind::<Text, _>(&schedule.script_id)
                    .bind::<BigInt, _>(i64::from(owner_limit))
                    .get_result::<Found>(conn)?;
                if at_limit.found {
                    return Ok(Some(Err(CatalogError::LimitReached(owner_limit))));
                }
                statement(concat!(
                    "INSERT INTO script_schedules \
                     (script_id, cron, timezone, args, next_fire_at, set_by) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
                     ON CONFLICT (script_id) DO UPDATE SET cron = excluded.cron, \
                     timezone = excluded.timezone, args = excluded.args, enabled = 1, \
                     next_fire_at = excluded.next_fire_at, last_fire_at = NULL, missed_fires = 0, \
                     set_by = excluded.set_by, updated_at = ",
                    now!()
                ))
                .bind::<Text, _>(&schedule.script_id)
                .bind::<Text, _>(&schedule.cron)
                .bind::<Text, _>(&schedule.timezone)
                .bind::<Text, _>(schedule.args.to_string())
                .bind::<Text, _>(&next_fire_at)
                .bind::<Text, _>(&schedule.set_by)
                .execute(conn)?;
                read_schedule(conn, &schedule.script_id).map(|row| row.map(Ok))
            })
        })
        .await
        .map_err(catalog_error)?;
    row.ok_or_else(|| CatalogError::Invalid("there is no such script to schedule".into()))??
        .try_into()
}

/// Whether the owner of script `?1` has `?2` schedules on their other scripts.
const OTHER_SCHEDULES_AT_LIMIT: &str = "SELECT (SELECT count(*) FROM script_schedules sc \
     JOIN scripts s ON s.id = sc.script_id \
     WHERE s.owner = (SELECT owner FROM scripts WHERE id = ?1) AND sc.script_id <> ?1) >= ?2 \
     AS found";

pub(super) async fn schedule(
    store: &SqliteStore,
    script_id: &str,
) -> Result<Option<Schedule>, CatalogError> {
    let script_id = script_id.to_owned();
    store
        .read(move |conn| read_schedule(conn, &script_id))
        .await
        .map_err(catalog_error)?
        .map(Schedule::try_from)
        .transpose()
}

pub(super) async fn list_schedules(
    store: &SqliteStore,
    owner: Option<&str>,
    limit: u32,
) -> Result<Vec<Schedule>, CatalogError> {
    let owner = owner.map(str::to_owned);
    store
        .read(move |conn| {
            statement(concat!(
                "SELECT ",
                schedule_columns!(),
                " FROM script_schedules sc JOIN scripts s ON s.id = sc.script_id \
                 WHERE (?1 IS NULL OR s.owner = ?1) ORDER BY s.name, s.owner LIMIT ?2"
            ))
            .bind::<Nullable<Text>, _>(&owner)
            .bind::<BigInt, _>(shared::limit(limit))
            .load::<ScheduleRow>(conn)
        })
        .await
        .map_err(catalog_error)?
        .into_iter()
        .map(Schedule::try_from)
        .collect()
}

pub(super) async fn set_schedule_enabled(
    store: &SqliteStore,
    script_id: &str,
    enabled: bool,
    next_fire_at: OffsetDateTime,
) -> Result<Option<Schedule>, CatalogError> {
    let script_id = script_id.to_owned();
    let next_fire_at = stored_time(next_fire_at)?;
    store
        .write(move |conn| {
            conn.immediate_transaction(|conn| {
                let changed = statement(concat!(
                    "UPDATE script_schedules SET \
                     next_fire_at = CASE WHEN ?2 AND NOT enabled THEN ?3 ELSE next_fire_at END, \
                     enabled = ?2, updated_at = ",
                    now!(),
                    " WHERE script_id = ?1"
                ))
                .bind::<Text, _>(&script_id)
                .bind::<Bool, _>(enabled)
                .bind::<Text, _>(&next_fire_at)
                .execute(conn)?;
                if changed == 0 {
                    return Ok(None);
                }
                read_schedule(conn, &script_id)
            })
        })
        .await
        .map_err(catalog_error)?
        .map(Schedule::try_from)
        .transpose()
}

pub(super) async fn due_schedules(
    store: &SqliteStore,
    now: OffsetDateTime,
    limit: u32,
) -> Result<Vec<(Schedule, Script)>, CatalogError> {
    let now = stored_time(now)?;
    store
        .read(move |conn| {
            statement(concat!(
                "SELECT ",
                schedule_columns!(),
                ", ",
                due_script_columns!(),
                " FROM script_schedules sc JOIN scripts s ON s.id = sc.script_id \
                 WHERE sc.enabled = 1 AND sc.next_fire_at <= ?1 ORDER BY sc.next_fire_at LIMIT ?2"
            ))
            .bind::<Text, _>(&now)
            .bind::<BigInt, _>(shared::limit(limit))
            .load::<DueRow>(conn)
        })
        .await
        .map_err(catalog_error)?
        .into_iter()
        .map(<(Schedule, Script)>::try_from)
        .collect()
}

/// What the fire transaction decided.
enum Fired {
    Lost,
    Advanced,
    Skipped,
    Queued(Box<RunRow>),
}

pub(super) async fn fire_schedule(
    store: &SqliteStore,
    fire: Fire,
) -> Result<FireOutcome, CatalogError> {
    fire.validate()?;
    let expected = stored_time(fire.expected_next_fire_at)?;
    let next = stored_time(fire.next_fire_at)?;
    let fire_time = stored_time(fire.fire_time)?;
    let fired = store
        .write(move |conn| {
            let outcome = conn.immediate_transaction(|conn| {
                let advanced = statement(concat!(
                    "UPDATE script_schedules SET next_fire_at = ?3, \
                     last_fire_at = CASE WHEN ?5 THEN ?4 ELSE last_fire_at END, \
                     missed_fires = missed_fires + CASE WHEN ?5 THEN ?6 ELSE 0 END, \
                     updated_at = ",
                    now!(),
                    " WHERE script_id = ?1 AND next_fire_at = ?2 AND enabled = 1"
                ))
                .bind::<Text, _>(&fire.script_id)
                .bind::<Text, _>(&expected)
                .bind::<Text, _>(&next)
                .bind::<Text, _>(&fire_time)
                .bind::<Bool, _>(fire.run.is_some())
                .bind::<BigInt, _>(fire.missed)
                .execute(conn)?;
                if advanced == 0 {
                    return Ok(Fired::Lost);
                }
                let Some(run) = &fire.run else {
                    return Ok(Fired::Advanced);
                };
                let recorded = statement(
                    "INSERT INTO script_schedule_fires \
                     (script_id, fire_time, status, missed, fired_by) \
                     VALUES (?1, ?2, 'skipped_overlap', ?3, ?4) ON CONFLICT DO NOTHING",
                )
                .bind::<Text, _>(&fire.script_id)
                .bind::<Text, _>(&fire_time)
                .bind::<BigInt, _>(fire.missed)
                .bind::<Text, _>(&fire.fired_by)
                .execute(conn)?;
                if recorded == 0 {
                    return Err(DieselError::RollbackTransaction);
                }
                let open = statement(
                    "SELECT EXISTS (SELECT 1 FROM script_runs WHERE script_id = ?1 \
                     AND trigger_kind = 'schedule' AND status IN ('queued', 'running')) AS found",
                )
                .bind::<Text, _>(&fire.script_id)
                .get_result::<Found>(conn)?;
                if open.found {
                    return Ok(Fired::Skipped);
                }
                let queued = statement(concat!(
                    "INSERT INTO script_runs \
                     (id, script_id, script_name, script_owner, version, status, params, \
                      requested_by, trigger_kind, fire_time) \
                     VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?7, 'schedule', ?8) RETURNING ",
                    run_columns!()
                ))
                .bind::<Text, _>(&run.id)
                .bind::<Text, _>(&run.script_id)
                .bind::<Text, _>(&run.script_name)
                .bind::<Text, _>(&run.script_owner)
                .bind::<Integer, _>(run.version)
                .bind::<Text, _>(run.params.to_string())
                .bind::<Text, _>(&run.requested_by)
                .bind::<Text, _>(&fire_time)
                .get_result::<RunRow>(conn)?;
                statement(
                    "UPDATE script_schedule_fires SET status = 'queued', run_id = ?3 \
                     WHERE script_id = ?1 AND fire_time = ?2",
                )
                .bind::<Text, _>(&fire.script_id)
                .bind::<Text, _>(&fire_time)
                .bind::<Text, _>(&run.id)
                .execute(conn)?;
                Ok(Fired::Queued(Box::new(queued)))
            });
            match outcome {
                Err(DieselError::RollbackTransaction) => Ok(Fired::Lost),
                other => other,
            }
        })
        .await
        .map_err(catalog_error)?;
    match fired {
        Fired::Lost => Ok(FireOutcome::Lost),
        Fired::Advanced => Ok(FireOutcome::Advanced),
        Fired::Skipped => Ok(FireOutcome::SkippedOverlap),
        Fired::Queued(row) => Ok(FireOutcome::Queued(Box::new(Run::try_from(*row)?))),
    }
}

pub(super) async fn schedule_fires(
    store: &SqliteStore,
    script_id: &str,
    limit: u32,
) -> Result<Vec<FireRecord>, CatalogError> {
    let script_id = script_id.to_owned();
    store
        .read(move |conn| {
            statement(concat!(
                "SELECT ",
                fire_columns!(),
                " FROM script_schedule_fires WHERE script_id = ?1 ORDER BY fire_time DESC LIMIT ?2"
            ))
            .bind::<Text, _>(&script_id)
            .bind::<BigInt, _>(shared::limit(limit))
            .load::<FireRow>(conn)
        })
        .await
        .map_err(catalog_error)?
        .into_iter()
        .map(FireRecord::try_from)
        .collect()
}

pub(super) async fn delete_old_fires(
    store: &SqliteStore,
    retention: Duration,
    limit: u32,
) -> Result<u64, CatalogError> {
    let deleted = store
        .write(move |conn| {
            statement(
                "DELETE FROM script_schedule_fires WHERE rowid IN ( \
                     SELECT rowid FROM script_schedule_fires \
                      WHERE created_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1) LIMIT ?2)",
            )
            .bind::<Text, _>(modifier('-', retention))
            .bind::<BigInt, _>(shared::limit(limit))
            .execute(conn)
        })
        .await
        .map_err(catalog_error)?;
    Ok(u64::try_from(deleted).unwrap_or(0))
}
