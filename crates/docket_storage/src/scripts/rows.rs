//! What both backends' script statements share: the column lists, the small
//! rows that do not depend on the backend's types, and how a statement's
//! answer becomes a [`Renewal`] or a [`CancelOutcome`].

use diesel::QueryableByName;
use diesel::sql_types::{Bool, Text};

use docket_catalog::CatalogError;
use docket_catalog::scripts::{CancelOutcome, Renewal, Run};

/// The columns of a run, as every statement that returns one lists them.
pub(crate) const RUN_COLUMNS: &str = "id, script_id, script_name, script_owner, version, status, \
     params, requested_by, attempt, platform_faults, reclaims, lease_owner, lease_expires_at, \
     cancel_requested_at, host_calls, result, error, error_kind, log, log_truncated, metrics, \
     created_at, started_at, finished_at, updated_at";

/// The columns of a script.
pub(crate) const SCRIPT_COLUMNS: &str =
    "id, owner, name, description, params, status, enabled, version, created_at, updated_at";

/// The columns of a script version.
pub(crate) const VERSION_COLUMNS: &str =
    "script_id, version, source, description, params, author, author_roles, created_at";

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
