//! Scripts, versions and runs on SQLite: how its columns store JSON and times
//! (as text), and the [`ScriptStore`] implementation, over the rows
//! `scripts::rows` reads on both backends. One replica: the claim is one
//! `UPDATE` on the one writer connection, which no other worker can interleave
//! with, and there are no notifications.

use std::time::Duration;

use async_trait::async_trait;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text};
use serde_json::Value;
use time::OffsetDateTime;

use super::SqliteStore;
use super::schedules;
use super::sql::{modifier, now, time};
use crate::columns::TextColumns;
use crate::error::catalog_error;
use crate::scripts::rows::{
    self, CancelRow, IdRow, StatusRow, run_columns, script_columns, version_columns,
};
use crate::scripts::{self, VersionInsert};
use crate::shared;
use crate::statement::statement;
use docket_catalog::CatalogError;
use docket_catalog::scripts::{
    CancelOutcome, Fire, FireOutcome, FireRecord, Lease, NewRun, NewSchedule, NewScript, Renewal,
    Run, RunEnding, RunFilter, RunStatus, Schedule, Script, ScriptChange, ScriptStore,
    ScriptVersion,
};

/// The fence every write of a lease holder carries (?1 id, ?2 owner, ?3 attempt).
macro_rules! fence {
    () => {
        "id = ?1 AND lease_owner = ?2 AND attempt = ?3 AND status = 'running'"
    };
}

fn corrupt(error: docket_task::StoreError) -> CatalogError {
    catalog_error(error)
}

fn stored_time(text: &str) -> Result<OffsetDateTime, CatalogError> {
    time(text).map_err(corrupt)
}

type ScriptRow = rows::ScriptRow<TextColumns>;
type VersionRow = rows::VersionRow<TextColumns>;
type RunRow = rows::RunRow<TextColumns>;

#[derive(QueryableByName)]
struct NowRow {
    #[diesel(sql_type = Text)]
    now: String,
}

fn insert_version(
    conn: &mut SqliteConnection,
    version: &VersionInsert<'_>,
) -> QueryResult<VersionRow> {
    statement(concat!(
        "INSERT INTO script_versions \
         (script_id, version, source, description, params, author, author_roles) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) RETURNING ",
        version_columns!()
    ))
    .bind::<Text, _>(version.script_id)
    .bind::<Integer, _>(version.version)
    .bind::<Text, _>(version.source)
    .bind::<Text, _>(version.description)
    .bind::<Text, _>(version.params.to_string())
    .bind::<Text, _>(version.author)
    .bind::<Text, _>(version.author_roles.to_string())
    .get_result(conn)
}

fn run_rows(rows: Vec<RunRow>) -> Result<Vec<Run>, CatalogError> {
    rows.into_iter().map(Run::try_from).collect()
}

#[async_trait]
impl ScriptStore for SqliteStore {
    async fn create_script(
        &self,
        script: NewScript,
        owner_limit: u32,
    ) -> Result<(Script, ScriptVersion), CatalogError> {
        script.validate()?;
        let author_roles = scripts::roles_json(&script.author_roles);
        // The immediate transaction holds the write lock from its start, so the
        // count is of every create committed before this one.
        let created = self
            .write(move |conn| {
                conn.immediate_transaction(|conn| {
                    let Some(script_row) = statement(concat!(
                        "INSERT INTO scripts (id, owner, name, description, params, version) \
                         SELECT ?1, ?2, ?3, ?4, ?5, 1 \
                          WHERE (SELECT count(*) FROM scripts WHERE owner = ?2) < ?6 RETURNING ",
                        script_columns!()
                    ))
                    .bind::<Text, _>(&script.id)
                    .bind::<Text, _>(&script.owner)
                    .bind::<Text, _>(&script.name)
                    .bind::<Text, _>(&script.description)
                    .bind::<Text, _>(script.params.to_string())
                    .bind::<BigInt, _>(i64::from(owner_limit))
                    .get_result::<ScriptRow>(conn)
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
                    )?;
                    Ok(Some((script_row, version_row)))
                })
            })
            .await
            .map_err(catalog_error)?;
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
        let id = id.to_owned();
        let rows = self
            .write(move |conn| {
                conn.immediate_transaction(|conn| {
                    let Some(current) = statement(concat!(
                        "SELECT ",
                        version_columns!(),
                        " FROM script_versions WHERE script_id = ?1 \
                         AND version = (SELECT version FROM scripts WHERE id = ?1)"
                    ))
                    .bind::<Text, _>(&id)
                    .get_result::<VersionRow>(conn)
                    .optional()?
                    else {
                        return Ok(None);
                    };
                    if let Some(base) = change.base_version
                        && base != current.version
                    {
                        return Ok(Some(Err(current.version)));
                    }
                    let current_params: Value =
                        serde_json::from_str(&current.params).unwrap_or(Value::Array(Vec::new()));
                    let description = change.description.as_ref().unwrap_or(&current.description);
                    let params = change.params.as_ref().unwrap_or(&current_params);
                    // Only new source changes whose roles the version carries.
                    let (source, author, author_roles) = match change.new_source(&current.source) {
                        Some(source) => (source, change.editor.as_str(), editor_roles.clone()),
                        None => (
                            current.source.as_str(),
                            current.author.as_str(),
                            serde_json::from_str(&current.author_roles).map_err(|error| {
                                diesel::result::Error::DeserializationError(Box::new(error))
                            })?,
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
                            author_roles: &author_roles,
                        },
                    )?;
                    let script_row = statement(concat!(
                        "UPDATE scripts SET version = ?2, description = ?3, params = ?4, \
                         enabled = COALESCE(?5, enabled), status = COALESCE(?6, status), \
                         updated_at = ",
                        now!(),
                        " WHERE id = ?1 RETURNING ",
                        script_columns!()
                    ))
                    .bind::<Text, _>(&id)
                    .bind::<Integer, _>(current.version + 1)
                    .bind::<Text, _>(description)
                    .bind::<Text, _>(params.to_string())
                    .bind::<Nullable<Bool>, _>(change.enabled)
                    .bind::<Nullable<Text>, _>(change.status.map(|status| status.as_str()))
                    .get_result::<ScriptRow>(conn)?;
                    Ok(Some(Ok((script_row, version_row))))
                })
            })
            .await
            .map_err(catalog_error)?;
        match rows {
            None => Ok(None),
            Some(Err(current)) => Err(CatalogError::Stale(current)),
            Some(Ok((script, version))) => Ok(Some((script.try_into()?, version.try_into()?))),
        }
    }

    async fn find_script(&self, owner: &str, name: &str) -> Result<Option<Script>, CatalogError> {
        let (owner, name) = (owner.to_owned(), name.to_owned());
        self.read(move |conn| {
            statement(concat!(
                "SELECT ",
                script_columns!(),
                " FROM scripts WHERE owner = ?1 AND name = ?2"
            ))
            .bind::<Text, _>(&owner)
            .bind::<Text, _>(&name)
            .get_result::<ScriptRow>(conn)
            .optional()
        })
        .await
        .map_err(catalog_error)?
        .map(Script::try_from)
        .transpose()
    }

    async fn script(&self, id: &str) -> Result<Option<Script>, CatalogError> {
        let id = id.to_owned();
        self.read(move |conn| {
            statement(concat!(
                "SELECT ",
                script_columns!(),
                " FROM scripts WHERE id = ?1"
            ))
            .bind::<Text, _>(&id)
            .get_result::<ScriptRow>(conn)
            .optional()
        })
        .await
        .map_err(catalog_error)?
        .map(Script::try_from)
        .transpose()
    }

    async fn list_scripts(
        &self,
        owner: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Script>, CatalogError> {
        let owner = owner.map(str::to_owned);
        self.read(move |conn| {
            statement(concat!(
                "SELECT ",
                script_columns!(),
                " FROM scripts WHERE (?1 IS NULL OR owner = ?1) \
                 ORDER BY name, owner LIMIT ?2"
            ))
            .bind::<Nullable<Text>, _>(&owner)
            .bind::<BigInt, _>(shared::limit(limit))
            .load::<ScriptRow>(conn)
        })
        .await
        .map_err(catalog_error)?
        .into_iter()
        .map(Script::try_from)
        .collect()
    }

    async fn delete_script(&self, id: &str) -> Result<bool, CatalogError> {
        let id = id.to_owned();
        let deleted = self
            .write(move |conn| {
                statement("DELETE FROM scripts WHERE id = ?1")
                    .bind::<Text, _>(&id)
                    .execute(conn)
            })
            .await
            .map_err(catalog_error)?;
        Ok(deleted == 1)
    }

    async fn script_version(
        &self,
        script_id: &str,
        version: i32,
    ) -> Result<Option<ScriptVersion>, CatalogError> {
        let script_id = script_id.to_owned();
        self.read(move |conn| {
            statement(concat!(
                "SELECT ",
                version_columns!(),
                " FROM script_versions \
                 WHERE script_id = ?1 AND version = ?2"
            ))
            .bind::<Text, _>(&script_id)
            .bind::<Integer, _>(version)
            .get_result::<VersionRow>(conn)
            .optional()
        })
        .await
        .map_err(catalog_error)?
        .map(ScriptVersion::try_from)
        .transpose()
    }

    async fn enqueue(&self, run: NewRun) -> Result<Run, CatalogError> {
        run.validate()?;
        self.write(move |conn| {
            statement(concat!(
                "INSERT INTO script_runs \
                 (id, script_id, script_name, script_owner, version, status, params, requested_by, \
                  trace_context) \
                 VALUES (?1, ?2, ?3, ?4, ?5, 'queued', ?6, ?7, ?8) RETURNING ",
                run_columns!()
            ))
            .bind::<Text, _>(&run.id)
            .bind::<Text, _>(&run.script_id)
            .bind::<Text, _>(&run.script_name)
            .bind::<Text, _>(&run.script_owner)
            .bind::<Integer, _>(run.version)
            .bind::<Text, _>(run.params.to_string())
            .bind::<Text, _>(&run.requested_by)
            .bind::<Nullable<Text>, _>(&run.trace_context)
            .get_result::<RunRow>(conn)
        })
        .await
        .map_err(catalog_error)?
        .try_into()
    }

    async fn run(&self, id: &str) -> Result<Option<(Run, OffsetDateTime)>, CatalogError> {
        let id = id.to_owned();
        let found = self
            .read(move |conn| {
                let row = statement(concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM script_runs WHERE id = ?1"
                ))
                .bind::<Text, _>(&id)
                .get_result::<RunRow>(conn)
                .optional()?;
                let now =
                    statement(concat!("SELECT ", now!(), " AS now")).get_result::<NowRow>(conn)?;
                Ok(row.map(|row| (row, now.now)))
            })
            .await
            .map_err(catalog_error)?;
        found
            .map(|(row, now)| Ok((row.try_into()?, stored_time(&now)?)))
            .transpose()
    }

    async fn list_runs(&self, filter: &RunFilter, limit: u32) -> Result<Vec<Run>, CatalogError> {
        let filter = filter.clone();
        let before = filter
            .before
            .as_ref()
            .map(|cursor| super::assets::stored_time(cursor.created_at))
            .transpose()?;
        let rows = self
            .read(move |conn| {
                statement(concat!(
                    "SELECT ",
                    run_columns!(),
                    " FROM script_runs \
                     WHERE (?1 IS NULL OR script_id = ?1) \
                       AND (?2 IS NULL OR requested_by = ?2 OR script_owner = ?2) \
                       AND (?3 IS NULL OR created_at < ?3 OR (created_at = ?3 AND id < ?4)) \
                       AND (?6 IS NULL OR status = ?6) \
                     ORDER BY created_at DESC, id DESC LIMIT ?5"
                ))
                .bind::<Nullable<Text>, _>(&filter.script_id)
                .bind::<Nullable<Text>, _>(&filter.visible_to)
                .bind::<Nullable<Text>, _>(&before)
                .bind::<Nullable<Text>, _>(filter.before.as_ref().map(|cursor| &cursor.id))
                .bind::<BigInt, _>(shared::limit(limit))
                .bind::<Nullable<Text>, _>(filter.status.map(|status| status.as_str()))
                .load::<RunRow>(conn)
            })
            .await
            .map_err(catalog_error)?;
        run_rows(rows)
    }

    async fn claim(
        &self,
        worker: &str,
        lease: Duration,
        max_running_per_owner: u32,
    ) -> Result<Option<Run>, CatalogError> {
        let worker = worker.to_owned();
        self.write(move |conn| {
            statement(concat!(
                "UPDATE script_runs \
                    SET status = 'running', attempt = attempt + 1, \
                        reclaims = reclaims \
                            + CASE WHEN status = 'running' THEN 1 ELSE 0 END, \
                        lease_owner = ?1, \
                        lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?2), \
                        started_at = COALESCE(started_at, ",
                now!(),
                "), updated_at = ",
                now!(),
                " \
                  WHERE id = (SELECT id FROM script_runs AS candidate \
                               WHERE ((status = 'queued' AND not_before <= ",
                now!(),
                ") \
                                  OR (status = 'running' AND lease_expires_at < ",
                now!(),
                ")) \
                                 AND (SELECT count(*) FROM script_runs AS held \
                                       WHERE held.script_owner = candidate.script_owner \
                                         AND held.status = 'running' \
                                         AND held.lease_expires_at >= ",
                now!(),
                ") < ?3 \
                               ORDER BY not_before, created_at LIMIT 1) \
                 RETURNING ",
                run_columns!()
            ))
            .bind::<Text, _>(&worker)
            .bind::<Text, _>(modifier('+', lease))
            .bind::<BigInt, _>(i64::from(max_running_per_owner))
            .get_result::<RunRow>(conn)
            .optional()
        })
        .await
        .map_err(catalog_error)?
        .map(Run::try_from)
        .transpose()
    }

    async fn renew(
        &self,
        lease: &Lease,
        duration: Duration,
        host_calls: i64,
    ) -> Result<Renewal, CatalogError> {
        let lease = lease.clone();
        let row = self
            .write(move |conn| {
                statement(concat!(
                    "UPDATE script_runs \
                        SET lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?4), \
                            host_calls = max(host_calls, ?5), updated_at = ",
                    now!(),
                    " \
                      WHERE ",
                    fence!(),
                    " \
                     RETURNING cancel_requested_at IS NOT NULL AS cancel_requested"
                ))
                .bind::<Text, _>(&lease.run_id)
                .bind::<Text, _>(&lease.owner)
                .bind::<Integer, _>(lease.attempt)
                .bind::<Text, _>(modifier('+', duration))
                .bind::<BigInt, _>(host_calls.max(0))
                .get_result::<CancelRow>(conn)
                .optional()
            })
            .await
            .map_err(catalog_error)?;
        Ok(rows::renewal(row))
    }

    async fn finish(
        &self,
        lease: &Lease,
        ending: RunEnding,
    ) -> Result<Option<RunStatus>, CatalogError> {
        ending.validate()?;
        let lease = lease.clone();
        let host_calls = rows::host_calls(&ending.metrics);
        let ended = self
            .write(move |conn| {
                // A cancel recorded first wins over the ending.
                statement(concat!(
                    "UPDATE script_runs \
                        SET status = CASE WHEN cancel_requested_at IS NULL THEN ?4 \
                                          ELSE 'cancelled' END, \
                            result = CASE WHEN cancel_requested_at IS NULL THEN ?5 END, \
                            error = CASE WHEN cancel_requested_at IS NULL THEN ?6 END, \
                            error_kind = CASE WHEN cancel_requested_at IS NULL THEN ?7 END, \
                            log = ?8, log_truncated = ?9, metrics = ?10, \
                            host_calls = max(host_calls, ?11), lease_owner = NULL, \
                            lease_expires_at = NULL, finished_at = ",
                    now!(),
                    ", updated_at = ",
                    now!(),
                    " \
                      WHERE ",
                    fence!(),
                    " RETURNING status"
                ))
                .bind::<Text, _>(&lease.run_id)
                .bind::<Text, _>(&lease.owner)
                .bind::<Integer, _>(lease.attempt)
                .bind::<Text, _>(ending.status.as_str())
                .bind::<Nullable<Text>, _>(ending.result.as_ref().map(Value::to_string))
                .bind::<Nullable<Text>, _>(&ending.error)
                .bind::<Nullable<Text>, _>(ending.error_kind.map(|kind| kind.as_str()))
                .bind::<Text, _>(&ending.log)
                .bind::<Bool, _>(ending.log_truncated)
                .bind::<Text, _>(ending.metrics.to_string())
                .bind::<BigInt, _>(host_calls)
                .get_result::<StatusRow>(conn)
                .optional()
            })
            .await
            .map_err(catalog_error)?;
        rows::ended_status(ended)
    }

    async fn retry(
        &self,
        lease: &Lease,
        error: &str,
        delay: Duration,
    ) -> Result<bool, CatalogError> {
        self.requeue(lease, Some(error.to_owned()), delay).await
    }

    async fn release(&self, lease: &Lease) -> Result<bool, CatalogError> {
        self.requeue(lease, None, Duration::ZERO).await
    }

    async fn cancel_run(&self, id: &str) -> Result<Option<CancelOutcome>, CatalogError> {
        let id = id.to_owned();
        let outcome = self
            .write(move |conn| {
                conn.immediate_transaction(|conn| {
                    let Some(before) = statement("SELECT status FROM script_runs WHERE id = ?1")
                        .bind::<Text, _>(&id)
                        .get_result::<StatusRow>(conn)
                        .optional()?
                    else {
                        return Ok(None);
                    };
                    match before.status.as_str() {
                        "queued" => {
                            let row = statement(concat!(
                                "UPDATE script_runs SET status = 'cancelled', \
                                 cancel_requested_at = ",
                                now!(),
                                ", finished_at = ",
                                now!(),
                                ", \
                                 updated_at = ",
                                now!(),
                                " WHERE id = ?1 RETURNING ",
                                run_columns!()
                            ))
                            .bind::<Text, _>(&id)
                            .get_result::<RunRow>(conn)?;
                            Ok(Some(Ok(row)))
                        }
                        "running" => {
                            statement(concat!(
                                "UPDATE script_runs SET cancel_requested_at = \
                                 COALESCE(cancel_requested_at, ",
                                now!(),
                                "), updated_at = ",
                                now!(),
                                " \
                                 WHERE id = ?1"
                            ))
                            .bind::<Text, _>(&id)
                            .execute(conn)?;
                            Ok(Some(Err(true)))
                        }
                        _ => Ok(Some(Err(false))),
                    }
                })
            })
            .await
            .map_err(catalog_error)?;
        rows::cancel_outcome(outcome)
    }

    async fn delete_finished_runs(
        &self,
        retention: Duration,
        limit: u32,
    ) -> Result<Vec<String>, CatalogError> {
        let rows = self
            .write(move |conn| {
                statement(
                    "DELETE FROM script_runs WHERE id IN ( \
                         SELECT id FROM script_runs \
                          WHERE finished_at IS NOT NULL \
                            AND status IN ('succeeded', 'failed', 'cancelled') \
                            AND finished_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1) \
                          LIMIT ?2) \
                     RETURNING id",
                )
                .bind::<Text, _>(modifier('-', retention))
                .bind::<BigInt, _>(shared::limit(limit))
                .load::<IdRow>(conn)
            })
            .await
            .map_err(catalog_error)?;
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
}

impl SqliteStore {
    /// Puts a leased run back in the queue (a retry counts a platform fault, a
    /// release does not), fenced by the lease.
    async fn requeue(
        &self,
        lease: &Lease,
        error: Option<String>,
        delay: Duration,
    ) -> Result<bool, CatalogError> {
        let lease = lease.clone();
        let fault = i32::from(error.is_some());
        let queued = self
            .write(move |conn| {
                statement(concat!(
                    "UPDATE script_runs \
                        SET status = 'queued', lease_owner = NULL, lease_expires_at = NULL, \
                            error = COALESCE(?4, error), platform_faults = platform_faults + ?5, \
                            not_before = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?6), \
                            updated_at = ",
                    now!(),
                    " \
                      WHERE ",
                    fence!()
                ))
                .bind::<Text, _>(&lease.run_id)
                .bind::<Text, _>(&lease.owner)
                .bind::<Integer, _>(lease.attempt)
                .bind::<Nullable<Text>, _>(&error)
                .bind::<Integer, _>(fault)
                .bind::<Text, _>(modifier('+', delay))
                .execute(conn)
            })
            .await
            .map_err(catalog_error)?;
        Ok(queued == 1)
    }
}
