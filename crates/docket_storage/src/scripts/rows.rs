//! What both backends' script statements share: the column lists, the rows
//! (written once over [`Columns`], which says how a backend stores times and
//! JSON) and how they become a [`Script`], a [`ScriptVersion`] and a [`Run`],
//! and how a statement's answer becomes a [`Renewal`] or a [`CancelOutcome`].

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text};

use docket_catalog::CatalogError;
use docket_catalog::scripts::{CancelOutcome, Renewal, Run, Script, ScriptVersion};

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
         created_at, started_at, finished_at, updated_at"
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
