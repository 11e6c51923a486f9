//! What both backends' script statements share beyond the rows (`rows`): the
//! run signal channel, the version insert, and how stored text becomes the
//! statuses, kinds and roles of `docket_catalog::scripts` (a value no
//! variant names reads as [`CatalogError::Corrupt`]).

pub(crate) mod rows;

use docket_catalog::CatalogError;
use docket_catalog::scripts::{RunErrorKind, RunSignal, RunStatus, ScriptStatus};
use serde_json::Value;

/// The channel PostgreSQL run signals travel on; payloads are `queued:<id>` and
/// `cancel:<id>`.
pub(crate) const RUN_CHANNEL: &str = "docket_runs";

/// A version to insert, as both backends' statements bind it.
pub(crate) struct VersionInsert<'a> {
    pub(crate) script_id: &'a str,
    pub(crate) version: i32,
    pub(crate) source: &'a str,
    pub(crate) description: &'a str,
    pub(crate) params: &'a Value,
    pub(crate) author: &'a str,
    /// The author's roles, as the JSON array stored.
    pub(crate) author_roles: &'a Value,
}

/// Reads a stored run status.
pub(crate) fn run_status(text: &str) -> Result<RunStatus, CatalogError> {
    RunStatus::parse(text).ok_or_else(|| CatalogError::Corrupt(format!("run status `{text}`")))
}

/// Reads a stored script status.
pub(crate) fn script_status(text: &str) -> Result<ScriptStatus, CatalogError> {
    ScriptStatus::parse(text)
        .ok_or_else(|| CatalogError::Corrupt(format!("script status `{text}`")))
}

/// Reads a stored error kind.
pub(crate) fn error_kind(text: Option<&str>) -> Result<Option<RunErrorKind>, CatalogError> {
    text.map(|text| {
        RunErrorKind::parse(text)
            .ok_or_else(|| CatalogError::Corrupt(format!("run error kind `{text}`")))
    })
    .transpose()
}

/// Reads stored author roles.
pub(crate) fn roles(value: Value) -> Result<Vec<String>, CatalogError> {
    serde_json::from_value(value)
        .map_err(|err| CatalogError::Corrupt(format!("stored author roles: {err}")))
}

/// Author roles to store.
pub(crate) fn roles_json(roles: &[String]) -> Value {
    Value::Array(roles.iter().cloned().map(Value::String).collect())
}

/// Parses a run signal payload: `queued:<id>` or `cancel:<id>`.
pub(crate) fn parse_signal(payload: &str) -> Option<RunSignal> {
    let (kind, id) = payload.split_once(':')?;
    match kind {
        "queued" => Some(RunSignal::Queued(id.to_owned())),
        "cancel" => Some(RunSignal::Cancel(id.to_owned())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_name_a_kind_and_a_run() {
        assert_eq!(
            parse_signal("queued:a"),
            Some(RunSignal::Queued("a".into()))
        );
        assert_eq!(
            parse_signal("cancel:a"),
            Some(RunSignal::Cancel("a".into()))
        );
        assert_eq!(parse_signal("other:a"), None);
        assert_eq!(parse_signal("cancel"), None);
    }
}
