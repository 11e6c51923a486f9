//! What both backends' script statements share beyond the rows (`rows`): the
//! version insert, and how stored text becomes the
//! statuses, kinds and roles of `docket_catalog::scripts` (a value no
//! variant names reads as [`CatalogError::Corrupt`]).

pub(crate) mod rows;

use docket_catalog::CatalogError;
use docket_catalog::scripts::{RunErrorKind, RunStatus, ScriptStatus};
use serde_json::Value;

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
