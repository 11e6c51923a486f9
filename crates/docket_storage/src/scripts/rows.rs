//! What both backends' script statements share: the column lists, the rows
//! (written once over [`Columns`], which says how a backend stores times and
//! JSON) and how they become a [`Script`], a [`ScriptVersion`] and a [`Run`],
//! and how a statement's answer becomes a [`Renewal`] or a [`CancelOutcome`].

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text};

use docket_catalog::CatalogError;
use docket_catalog::scripts::{
    CancelOutcome, FireRecord, FireStatus, Renewal, Run, RunStatus, RunTrigger, Schedule, Script,
    ScriptVersion,
};

use crate::columns::{Columns, StoredValue, optional};
use crate::scripts;

/// A script as read.
#[derive(QueryableByName)]
pub(crate) struct ScriptRow<C: Columns> {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    owner: String,
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    description: String,
    #[diesel(sql_type = C::JsonSql)]
    params: C::Json,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Bool)]
    enabled: bool,
    #[diesel(sql_type = Integer)]
    version: i32,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    updated_at: C::Time,
}

impl<C: Columns> TryFrom<ScriptRow<C>> for Script {
    type Error = CatalogError;

    fn try_from(row: ScriptRow<C>) -> Result<Self, CatalogError> {
        Ok(Script {
            params: row.params.value()?,
            status: scripts::script_status(&row.status)?,
            created_at: row.created_at.value()?,
            updated_at: row.updated_at.value()?,
            id: row.id,
            owner: row.owner,
            name: row.name,
            description: row.description,
            enabled: row.enabled,
            version: row.version,
        })
    }
}

/// A script version as read.
#[derive(QueryableByName)]
pub(crate) struct VersionRow<C: Columns> {
    #[diesel(sql_type = Text)]
    pub(crate) script_id: String,
    #[diesel(sql_type = Integer)]
    pub(crate) version: i32,
    #[diesel(sql_type = Text)]
    pub(crate) source: String,
    #[diesel(sql_type = Text)]
    pub(crate) description: String,
    #[diesel(sql_type = C::JsonSql)]
    pub(crate) params: C::Json,
    #[diesel(sql_type = Text)]
    pub(crate) author: String,
    #[diesel(sql_type = C::JsonSql)]
    pub(crate) author_roles: C::Json,
    #[diesel(sql_type = C::TimeSql)]
    pub(crate) created_at: C::Time,
}

impl<C: Columns> TryFrom<VersionRow<C>> for ScriptVersion {
    type Error = CatalogError;

    fn try_from(row: VersionRow<C>) -> Result<Self, CatalogError> {
        Ok(ScriptVersion {
            params: row.params.value()?,
            author_roles: scripts::roles(row.author_roles.value()?)?,
            created_at: row.created_at.value()?,
            script_id: row.script_id,
            version: row.version,
            source: row.source,
            description: row.description,
            author: row.author,
        })
    }
}

/// A run as read ([`run_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct RunRow<C: Columns> {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    script_id: String,
    #[diesel(sql_type = Text)]
    script_name: String,
    #[diesel(sql_type = Text)]
    script_owner: String,
    #[diesel(sql_type = Integer)]
    version: i32,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = C::JsonSql)]
    params: C::Json,
    #[diesel(sql_type = Text)]
    requested_by: String,
    #[diesel(sql_type = Integer)]
    attempt: i32,
    #[diesel(sql_type = Integer)]
    platform_faults: i32,
    #[diesel(sql_type = Integer)]
    reclaims: i32,
    #[diesel(sql_type = Nullable<Text>)]
    lease_owner: Option<String>,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    lease_expires_at: Option<C::Time>,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    cancel_requested_at: Option<C::Time>,
    #[diesel(sql_type = BigInt)]
    host_calls: i64,
    #[diesel(sql_type = Nullable<C::JsonSql>)]
    result: Option<C::Json>,
    #[diesel(sql_type = Nullable<Text>)]
    error: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    error_kind: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    log: Option<String>,
    #[diesel(sql_type = Bool)]
    log_truncated: bool,
    #[diesel(sql_type = C::JsonSql)]
    metrics: C::Json,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    started_at: Option<C::Time>,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    finished_at: Option<C::Time>,
    #[diesel(sql_type = C::TimeSql)]
    updated_at: C::Time,
    #[diesel(sql_type = Text)]
    trigger_kind: String,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    fire_time: Option<C::Time>,
    #[diesel(sql_type = Nullable<Text>)]
    trace_context: Option<String>,
}

impl<C: Columns> TryFrom<RunRow<C>> for Run {
    type Error = CatalogError;

    fn try_from(row: RunRow<C>) -> Result<Self, CatalogError> {
        Ok(Run {
            status: scripts::run_status(&row.status)?,
            error_kind: scripts::error_kind(row.error_kind.as_deref())?,
            params: row.params.value()?,
            lease_expires_at: optional(row.lease_expires_at)?,
            cancel_requested_at: optional(row.cancel_requested_at)?,
            result: optional(row.result)?,
            metrics: row.metrics.value()?,
            created_at: row.created_at.value()?,
            started_at: optional(row.started_at)?,
            finished_at: optional(row.finished_at)?,
            updated_at: row.updated_at.value()?,
            trigger: RunTrigger::parse(&row.trigger_kind).ok_or_else(|| {
                CatalogError::Corrupt(format!("run trigger `{}`", row.trigger_kind))
            })?,
            fire_time: optional(row.fire_time)?,
            trace_context: row.trace_context,
            id: row.id,
            script_id: row.script_id,
            script_name: row.script_name,
            script_owner: row.script_owner,
            version: row.version,
            requested_by: row.requested_by,
            attempt: row.attempt,
            platform_faults: row.platform_faults,
            reclaims: row.reclaims,
            lease_owner: row.lease_owner,
            host_calls: row.host_calls,
            error: row.error,
            log: row.log,
            log_truncated: row.log_truncated,
        })
    }
}

/// The columns of a run, as every statement that returns one lists them.
macro_rules! run_columns {
    () => {
        "id, script_id, script_name, script_owner, version, status, \
     params, requested_by, attempt, platform_faults, reclaims, lease_owner, lease_expires_at, \
     cancel_requested_at, host_calls, result, error, error_kind, log, log_truncated, metrics, \
         created_at, started_at, finished_at, updated_at, trigger_kind, fire_time, trace_context"
    };
}
pub(crate) use run_columns;

/// The columns of a script.
macro_rules! script_columns {
    () => {
        "id, owner, name, description, params, status, enabled, version, created_at, updated_at"
    };
}
pub(crate) use script_columns;

/// The columns of a script version.
macro_rules! version_columns {
    () => {
        "script_id, version, source, description, params, author, author_roles, created_at"
    };
}
pub(crate) use version_columns;

/// A run's status before a cancel.
#[derive(QueryableByName)]
pub(crate) struct StatusRow {
    #[diesel(sql_type = Text)]
    pub(crate) status: String,
}

/// The status a run's ending statement recorded, when it held the lease.
pub(crate) fn ended_status(row: Option<StatusRow>) -> Result<Option<RunStatus>, CatalogError> {
    row.map(|row| {
        RunStatus::parse(&row.status)
            .ok_or_else(|| CatalogError::Corrupt(format!("run status `{}`", row.status)))
    })
    .transpose()
}

/// What a renewal read back.
#[derive(QueryableByName)]
pub(crate) struct CancelRow {
    #[diesel(sql_type = Bool)]
    pub(crate) cancel_requested: bool,
}

/// One run id.
#[derive(QueryableByName)]
pub(crate) struct IdRow {
    #[diesel(sql_type = Text)]
    pub(crate) id: String,
}

/// A renewal's answer: a row (the lease is held) or none (it is lost).
pub(crate) fn renewal(row: Option<CancelRow>) -> Renewal {
    match row {
        Some(row) => Renewal::Held {
            cancel_requested: row.cancel_requested,
        },
        None => Renewal::Lost,
    }
}

/// What a cancel transaction found: nothing, a queued run it ended (`Ok`), or
/// whether the run was running (`Err(true)`) or had ended (`Err(false)`).
pub(crate) type CancelFound<R> = Option<Result<R, bool>>;

/// A cancel transaction's answer as a [`CancelOutcome`].
pub(crate) fn cancel_outcome<R>(
    found: CancelFound<R>,
) -> Result<Option<CancelOutcome>, CatalogError>
where
    Run: TryFrom<R, Error = CatalogError>,
{
    Ok(match found {
        None => None,
        Some(Ok(row)) => Some(CancelOutcome::Ended(Box::new(Run::try_from(row)?))),
        Some(Err(true)) => Some(CancelOutcome::Requested),
        Some(Err(false)) => Some(CancelOutcome::AlreadyEnded),
    })
}

/// The tool calls an ending's metrics record.
pub(crate) fn host_calls(metrics: &serde_json::Value) -> i64 {
    metrics
        .get("host_calls")
        .and_then(serde_json::Value::as_i64)
        .unwrap_or(0)
}

/// A schedule as read ([`schedule_columns!`]), joined with its script.
#[derive(QueryableByName)]
pub(crate) struct ScheduleRow<C: Columns> {
    #[diesel(sql_type = Text)]
    script_id: String,
    #[diesel(sql_type = Text)]
    script_name: String,
    #[diesel(sql_type = Text)]
    script_owner: String,
    #[diesel(sql_type = Text)]
    cron: String,
    #[diesel(sql_type = Text)]
    timezone: String,
    #[diesel(sql_type = C::JsonSql)]
    args: C::Json,
    #[diesel(sql_type = Bool)]
    enabled: bool,
    #[diesel(sql_type = C::TimeSql)]
    next_fire_at: C::Time,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    last_fire_at: Option<C::Time>,
    #[diesel(sql_type = BigInt)]
    missed_fires: i64,
    #[diesel(sql_type = Text)]
    set_by: String,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    updated_at: C::Time,
}

impl<C: Columns> TryFrom<ScheduleRow<C>> for Schedule {
    type Error = CatalogError;

    fn try_from(row: ScheduleRow<C>) -> Result<Self, CatalogError> {
        Ok(Schedule {
            args: row.args.value()?,
            next_fire_at: row.next_fire_at.value()?,
            last_fire_at: optional(row.last_fire_at)?,
            created_at: row.created_at.value()?,
            updated_at: row.updated_at.value()?,
            script_id: row.script_id,
            script_name: row.script_name,
            script_owner: row.script_owner,
            cron: row.cron,
            timezone: row.timezone,
            enabled: row.enabled,
            missed_fires: row.missed_fires,
            set_by: row.set_by,
        })
    }
}

/// The columns of a schedule joined with its script (`sc`, the schedule, and
/// `s`, the script).
macro_rules! schedule_columns {
    () => {
        "sc.script_id, s.name AS script_name, s.owner AS script_owner, sc.cron, sc.timezone, \
         sc.args, sc.enabled, sc.next_fire_at, sc.last_fire_at, sc.missed_fires, sc.set_by, \
         sc.created_at, sc.updated_at"
    };
}
pub(crate) use schedule_columns;

/// A schedule joined with its script, as `due_schedules` reads them.
#[derive(QueryableByName)]
pub(crate) struct DueRow<C: Columns> {
    #[diesel(embed)]
    pub(crate) schedule: ScheduleRow<C>,
    #[diesel(sql_type = Text)]
    pub(crate) id: String,
    #[diesel(sql_type = Text)]
    pub(crate) owner: String,
    #[diesel(sql_type = Text)]
    pub(crate) name: String,
    #[diesel(sql_type = Text)]
    pub(crate) description: String,
    #[diesel(sql_type = C::JsonSql)]
    pub(crate) params: C::Json,
    #[diesel(sql_type = Text)]
    pub(crate) status: String,
    #[diesel(sql_type = Bool)]
    pub(crate) script_enabled: bool,
    #[diesel(sql_type = Integer)]
    pub(crate) version: i32,
    #[diesel(sql_type = C::TimeSql)]
    pub(crate) script_created_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    pub(crate) script_updated_at: C::Time,
}

impl<C: Columns> TryFrom<DueRow<C>> for (Schedule, Script) {
    type Error = CatalogError;

    fn try_from(row: DueRow<C>) -> Result<Self, CatalogError> {
        let script = Script {
            params: row.params.value()?,
            status: scripts::script_status(&row.status)?,
            created_at: row.script_created_at.value()?,
            updated_at: row.script_updated_at.value()?,
            id: row.id,
            owner: row.owner,
            name: row.name,
            description: row.description,
            enabled: row.script_enabled,
            version: row.version,
        };
        Ok((row.schedule.try_into()?, script))
    }
}

/// The script columns `DueRow` reads beside the schedule's; those whose
/// names the schedule's columns also have are renamed (a row reads columns
/// by name).
macro_rules! due_script_columns {
    () => {
        "s.id, s.owner, s.name, s.description, s.params, s.status, s.enabled AS script_enabled, \
         s.version, \
         s.created_at AS script_created_at, s.updated_at AS script_updated_at"
    };
}
pub(crate) use due_script_columns;

/// A fire as read.
#[derive(QueryableByName)]
pub(crate) struct FireRow<C: Columns> {
    #[diesel(sql_type = Text)]
    script_id: String,
    #[diesel(sql_type = C::TimeSql)]
    fire_time: C::Time,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Nullable<Text>)]
    run_id: Option<String>,
    #[diesel(sql_type = BigInt)]
    missed: i64,
    #[diesel(sql_type = Text)]
    fired_by: String,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
}

impl<C: Columns> TryFrom<FireRow<C>> for FireRecord {
    type Error = CatalogError;

    fn try_from(row: FireRow<C>) -> Result<Self, CatalogError> {
        Ok(FireRecord {
            status: FireStatus::parse(&row.status)
                .ok_or_else(|| CatalogError::Corrupt(format!("fire status `{}`", row.status)))?,
            fire_time: row.fire_time.value()?,
            created_at: row.created_at.value()?,
            script_id: row.script_id,
            run_id: row.run_id,
            missed: row.missed,
            fired_by: row.fired_by,
        })
    }
}

/// The columns of a fire.
macro_rules! fire_columns {
    () => {
        "script_id, fire_time, status, run_id, missed, fired_by, created_at"
    };
}
pub(crate) use fire_columns;
