//! Typed connection settings. `connections:` entries keep their kind-specific keys
//! as raw YAML; each kind's parser turns them into what its tools need and reports
//! every problem, unknown keys included.

use std::collections::BTreeMap;
use std::time::Duration;

use docket_export::trino::{TrinoAuth, TrinoClient, TrinoConfig};
use serde::Deserialize;

use crate::config::{ConnectionConfig, ConnectionKind, deserialize_duration};

/// When a Trino connection asks the user before running a statement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsentMode {
    /// Only when `EXPLAIN` estimates more rows than `consent.trino.row_threshold`.
    #[default]
    Threshold,
    /// Before every query and export.
    Always,
    /// Never.
    Never,
}

#[derive(Deserialize)]
#[serde(default)]
struct TrinoSettings {
    url: String,
    user: String,
    catalog: Option<String>,
    schema: Option<String>,
    source: Option<String>,
    auth: Option<TrinoAuthSettings>,
    #[serde(deserialize_with = "deserialize_duration")]
    timeout: Duration,
    consent: ConsentMode,
    default: bool,
}

impl Default for TrinoSettings {
    fn default() -> Self {
        Self {
            url: String::new(),
            user: String::new(),
            catalog: None,
            schema: None,
            source: None,
            auth: None,
            timeout: Duration::from_secs(60),
            consent: ConsentMode::Threshold,
            default: false,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum TrinoAuthSettings {
    Basic { username: String, password: String },
    Bearer(String),
}

/// A Trino connection ready for the tools.
#[derive(Clone, Debug)]
pub struct TrinoConnection {
    /// Its name in `connections:`.
    pub name: String,
    /// The client.
    pub client: TrinoClient,
    /// When to ask before running.
    pub consent: ConsentMode,
    /// Whether calls without a `connection` argument use it.
    pub is_default: bool,
}

/// Every Trino connection, or every problem found in their settings.
///
/// # Errors
/// One sentence per problem, prefixed by the key path.
pub fn trino_connections(
    connections: &BTreeMap<String, ConnectionConfig>,
) -> Result<Vec<TrinoConnection>, Vec<String>> {
    let mut problems = Vec::new();
    let mut parsed = Vec::new();
    for (name, connection) in connections
        .iter()
        .filter(|(_, c)| c.kind == ConnectionKind::Trino)
    {
        let path = format!("connections.{name}");
        let mapping: yaml_serde::Mapping = connection
            .settings
            .iter()
            .map(|(key, value)| (yaml_serde::Value::String(key.clone()), value.clone()))
            .collect();
        let mut unknown = Vec::new();
        let settings: Result<TrinoSettings, _> =
            serde_ignored::deserialize(yaml_serde::Value::Mapping(mapping), |key| {
                unknown.push(key.to_string())
            });
        problems.extend(
            unknown
                .into_iter()
                .map(|key| format!("{path}.{key}: unknown key for a trino connection")),
        );
        let settings = match settings {
            Ok(settings) => settings,
            Err(err) => {
                problems.push(format!("{path}: {err}"));
                continue;
            }
        };
        if settings.url.is_empty() {
            problems.push(format!("{path}.url: required for a trino connection"));
            continue;
        }
        if settings.user.is_empty() {
            problems.push(format!(
                "{path}.user: required (the X-Trino-User queries run as)"
            ));
            continue;
        }
        let mut config = TrinoConfig::new(settings.url, settings.user);
        config.catalog = settings.catalog;
        config.schema = settings.schema;
        if let Some(source) = settings.source {
            config.source = source;
        }
        // The per-request timeout bounds one HTTP exchange (a page), never a whole
        // export: exports page on for as long as their own timeout allows.
        config.request_timeout = settings.timeout;
        config.auth = match settings.auth {
            None => TrinoAuth::None,
            Some(TrinoAuthSettings::Basic { username, password }) => {
                TrinoAuth::Basic { username, password }
            }
            Some(TrinoAuthSettings::Bearer(token)) => TrinoAuth::Bearer { token },
        };
        match TrinoClient::new(config) {
            Ok(client) => parsed.push(TrinoConnection {
                name: name.clone(),
                client,
                consent: settings.consent,
                is_default: settings.default,
            }),
            Err(err) => problems.push(format!("{path}: {err}")),
        }
    }
    if parsed
        .iter()
        .filter(|connection| connection.is_default)
        .count()
        > 1
    {
        problems.push("connections: more than one trino connection says default: true".into());
    }
    if problems.is_empty() {
        Ok(parsed)
    } else {
        Err(problems)
    }
}
