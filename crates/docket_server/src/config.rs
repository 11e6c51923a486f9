//! The configuration file: YAML in the shape of DESIGN.md §5, with `${ENV}`
//! expansion, every unknown key reported, and every problem reported at once.
//!
//! Environment lookups are passed in as a function, because only the binary reads
//! the process environment; tests pass a map.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use crate::auth::AuthConfig;
use crate::persona::{AdminConfig, PersonaConfig};
use crate::rate_limit::RateLimitConfig;

/// The whole configuration. Structs here do not use `deny_unknown_fields`: unknown
/// keys are collected with `serde_ignored` so all of them are reported together.
/// Every key is optional; [`Config::default`] is what
/// `docket serve` runs with when no file is given (see [`Config::embedded_default`]).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct Config {
    /// The HTTP server.
    pub server: ServerConfig,
    /// Who may call.
    pub auth: AuthConfig,
    /// Which persona names the administrators.
    pub admin: AdminConfig,
    /// What each persona may call, by persona name.
    pub personas: BTreeMap<String, PersonaConfig>,
    /// The per-identity rate limit.
    pub rate_limit: RateLimitConfig,
    /// Named connections to data systems.
    pub connections: BTreeMap<String, ConnectionConfig>,
    /// Where tasks, audit rows and the rest are stored.
    pub database: DatabaseConfig,
    /// Durable MCP tasks.
    pub tasks: TasksConfig,
    /// The audit log.
    pub audit: AuditConfig,
    /// Call records.
    pub calls: CallsConfig,
    /// Tools for checking a deployment.
    pub diagnostics: DiagnosticsConfig,
    /// Limits on exports.
    pub exports: ExportsConfig,
    /// Where export assets are stored.
    pub storage: StorageConfig,
    /// When to ask the user before running something expensive.
    pub consent: ConsentConfig,
    /// Log output.
    pub logging: LoggingConfig,
    /// Managed scripts and their runs.
    pub scripts: ScriptsConfig,
}

/// The `server:` section.
#[derive(Clone, Deserialize)]
#[serde(default)]
pub struct ServerConfig {
    /// The address to listen on.
    pub address: SocketAddr,
    /// The URL clients reach this server at, used in links it hands out.
    pub public_base_url: Option<String>,
    /// Origins (`scheme://host[:port]`) allowed besides loopback ones.
    pub allowed_origins: Vec<String>,
    /// This replica's name; empty means a unique name per process.
    pub replica_id: String,
    /// Graceful shutdown.
    pub shutdown: ShutdownConfig,
    /// The largest request body accepted, in bytes.
    pub max_request_bytes: usize,
    /// How long a client has to send a request's headers — also how long a kept-alive
    /// connection may sit idle waiting for its next request — before it is closed.
    #[serde(deserialize_with = "deserialize_duration")]
    pub header_read_timeout: Duration,
    /// How long a client has to send a request's body once its headers are in.
    #[serde(deserialize_with = "deserialize_duration")]
    pub body_timeout: Duration,
    /// Connections served at once. Beyond it a new connection is answered at once —
    /// `/healthz` with 200, anything else with 503 — and closed; it never waits.
    pub max_connections: usize,
    /// The secret that protects `requestState`; every replica needs the same one.
    /// When unset, a random secret is drawn per process (fine for one replica).
    pub request_state_secret: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            address: SocketAddr::from(([127, 0, 0, 1], 8080)),
            public_base_url: None,
            allowed_origins: Vec::new(),
            replica_id: String::new(),
            shutdown: ShutdownConfig::default(),
            max_request_bytes: 4 * 1024 * 1024,
            header_read_timeout: Duration::from_secs(20),
            body_timeout: Duration::from_secs(30),
            max_connections: 512,
            request_state_secret: None,
        }
    }
}

impl fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConfig")
            .field("address", &self.address)
            .field("public_base_url", &self.public_base_url)
            .field("allowed_origins", &self.allowed_origins)
            .field("replica_id", &self.replica_id)
            .field("shutdown", &self.shutdown)
            .field("max_request_bytes", &self.max_request_bytes)
            .field("header_read_timeout", &self.header_read_timeout)
            .field("body_timeout", &self.body_timeout)
            .field("max_connections", &self.max_connections)
            .field(
                "request_state_secret",
                &self.request_state_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl ServerConfig {
    /// The base URL clients use: `public_base_url`, or `http://<address>`.
    pub fn base_url(&self) -> String {
        match &self.public_base_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => format!("http://{}", self.address),
        }
    }
}

/// The `database:` section.
#[derive(Clone, Deserialize)]
#[serde(default)]
pub struct DatabaseConfig {
    /// `postgres://user@host:5432/db` or `sqlite://PATH`; without a `database:`
    /// section, the embedded SQLite database of the zero-configuration default
    /// ([`EMBEDDED_DATABASE_URL`]). `None` (only an embedder sets it) runs without
    /// a database, and so without tasks, scripts, audit or exports.
    pub url: Option<String>,
    /// The connection pool's size.
    pub max_connections: u32,
    /// Whether to apply migrations at start-up.
    pub migrate_on_start: bool,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: Some(EMBEDDED_DATABASE_URL.to_owned()),
            max_connections: 16,
            migrate_on_start: true,
        }
    }
}

impl fmt::Debug for DatabaseConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may carry a password.
        f.debug_struct("DatabaseConfig")
            .field("url", &self.url.as_ref().map(|url| redact_url(url)))
            .field("max_connections", &self.max_connections)
            .field("migrate_on_start", &self.migrate_on_start)
            .finish()
    }
}

/// `scheme://user:password@host/…` with the password replaced.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((credentials, host)) => match credentials.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}{path}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// The `tasks:` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct TasksConfig {
    /// Whether long calls become tasks when the client declares the extension.
    pub enabled: bool,
    /// How long an export task is kept for its caller to read, in days.
    pub retention_days: u32,
    /// How often clients should poll, in milliseconds.
    pub poll_interval_ms: u64,
    /// How often a replica stamps its running tasks.
    #[serde(deserialize_with = "deserialize_duration")]
    pub heartbeat_interval: Duration,
    /// How long without a stamp before a task's replica counts as gone.
    #[serde(deserialize_with = "deserialize_duration")]
    pub stale_after: Duration,
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            retention_days: 7,
            poll_interval_ms: 1000,
            heartbeat_interval: Duration::from_secs(2),
            stale_after: Duration::from_secs(30),
        }
    }
}

/// The `scripts:` section: managed Starlark scripts and the run queue.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct ScriptsConfig {
    /// Whether the script tools are offered (they also need a database).
    pub enabled: bool,
    /// How long a run is kept after it finished, in days.
    pub run_retention_days: u32,
    /// This replica's run workers.
    pub worker: ScriptWorkerConfig,
    /// How long a worker's claim on a run lasts without renewal; a run whose
    /// worker died is taken by another this long after its last renewal.
    #[serde(deserialize_with = "deserialize_duration")]
    pub lease: Duration,
    /// How often a worker renews its lease (and so hears a cancel whose
    /// notification was lost).
    #[serde(deserialize_with = "deserialize_duration")]
    pub heartbeat_interval: Duration,
    /// How many times a platform fault is retried; script errors never are.
    pub max_platform_retries: u32,
    /// How many times a run whose replica vanished mid-run is taken over by
    /// another worker before it ends failed.
    pub max_reclaims: u32,
    /// Evaluation steps a run may take.
    pub max_steps: u64,
    /// Wall-clock time a run may take, tool calls included.
    #[serde(deserialize_with = "deserialize_duration")]
    pub timeout: Duration,
    /// How long `run_script` waits for the run when `wait_seconds` is not given.
    #[serde(deserialize_with = "deserialize_duration")]
    pub default_wait: Duration,
}

impl Default for ScriptsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            run_retention_days: 365,
            worker: ScriptWorkerConfig::default(),
            lease: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(2),
            max_platform_retries: 3,
            max_reclaims: 2,
            max_steps: 20_000_000,
            timeout: Duration::from_secs(600),
            default_wait: Duration::from_secs(120),
        }
    }
}

/// The `scripts.worker:` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct ScriptWorkerConfig {
    /// Whether this replica executes runs (it queues them either way).
    pub enabled: bool,
    /// How many runs this replica executes at once.
    pub concurrency: usize,
}

impl Default for ScriptWorkerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            concurrency: 2,
        }
    }
}

/// The `audit:` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct AuditConfig {
    /// Whether tool calls are audited (when a database is configured).
    pub enabled: bool,
    /// Audit rows are deleted this long after they were written; 0 keeps them.
    pub retention_days: u32,
    /// Argument keys whose values are replaced by `[REDACTED]`, besides the built-in
    /// ones (password, secret, token, api_key, authorization, credentials).
    pub redact_keys: Vec<String>,
}

impl Default for AuditConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            retention_days: 90,
            redact_keys: Vec::new(),
        }
    }
}

/// The `calls:` section: the call records behind `list_calls`-style history.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct CallsConfig {
    /// Call records are deleted this long after they were written; 0 keeps them.
    pub retention_days: u32,
}

impl Default for CallsConfig {
    fn default() -> Self {
        Self { retention_days: 90 }
    }
}

/// The `diagnostics:` section.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct DiagnosticsConfig {
    /// Registers `diagnostics_sleep`, a task-capable tool that only waits.
    pub enabled: bool,
}

/// The `exports:` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct ExportsConfig {
    /// The most rows an export may write (also the default `limit`).
    pub max_rows: u64,
    /// The most bytes an export may write.
    #[serde(deserialize_with = "deserialize_bytes")]
    pub max_bytes: u64,
    /// How long an export may run when the call names no timeout.
    #[serde(deserialize_with = "deserialize_duration")]
    pub default_timeout: Duration,
    /// The longest `timeout_seconds` a call may ask for.
    #[serde(deserialize_with = "deserialize_duration")]
    pub max_timeout: Duration,
}

impl Default for ExportsConfig {
    fn default() -> Self {
        Self {
            max_rows: 1_000_000,
            max_bytes: 1 << 30,
            default_timeout: Duration::from_secs(5 * 60),
            max_timeout: Duration::from_secs(30 * 60),
        }
    }
}

/// The `storage:` section: where asset bytes go.
#[derive(Clone, Deserialize)]
#[serde(default)]
pub struct StorageConfig {
    /// `filesystem` or `s3`.
    pub kind: StorageKind,
    /// The folder of the filesystem store.
    pub path: String,
    /// The S3 bucket.
    pub bucket: Option<String>,
    /// A key prefix inside the bucket.
    pub prefix: Option<String>,
    /// A custom S3 endpoint (for S3-compatible servers).
    pub endpoint: Option<String>,
    /// The S3 region.
    pub region: Option<String>,
    /// The S3 access key id.
    pub access_key_id: Option<String>,
    /// The S3 secret access key.
    pub secret_access_key: Option<String>,
    /// Whether plain-HTTP endpoints are allowed (local S3-compatible servers).
    pub allow_http: bool,
    /// Whether the retention pass deletes an export's asset (bytes, then row) once
    /// its task (or script run) was deleted.
    pub delete_with_task: bool,
    /// Assets are deleted (bytes, then row) this long after they were created; 0
    /// keeps them.
    pub retention_days: u32,
    /// The filesystem store's unfinished upload files (left by a process killed
    /// mid-export) older than this are removed at start-up.
    #[serde(deserialize_with = "deserialize_duration")]
    pub stale_parts_after: Duration,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            kind: StorageKind::Filesystem,
            path: "./docket-data/assets".into(),
            bucket: None,
            prefix: None,
            endpoint: None,
            region: None,
            access_key_id: None,
            secret_access_key: None,
            allow_http: false,
            delete_with_task: false,
            retention_days: 30,
            stale_parts_after: Duration::from_secs(24 * 3600),
        }
    }
}

impl fmt::Debug for StorageConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageConfig")
            .field("kind", &self.kind)
            .field("path", &self.path)
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field(
                "access_key_id",
                &self.access_key_id.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field("allow_http", &self.allow_http)
            .finish()
    }
}

/// Where assets are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StorageKind {
    /// A local folder.
    Filesystem,
    /// An S3 bucket.
    S3,
}

/// Removes the unfinished upload files of a filesystem store older than
/// `storage.stale_parts_after` (a process killed mid-export leaves them); an S3
/// store's incomplete multipart uploads are the bucket's lifecycle rule's to abort.
/// Returns how many were removed.
///
/// # Errors
/// When the folder cannot be read.
pub async fn remove_stale_uploads(storage: &StorageConfig) -> std::io::Result<usize> {
    match storage.kind {
        StorageKind::Filesystem => {
            docket_export::sink::FilesystemSink::new(&storage.path)
                .remove_stale_parts(storage.stale_parts_after)
                .await
        }
        StorageKind::S3 => Ok(0),
    }
}

/// The object sink `storage:` describes.
///
/// # Errors
/// When the S3 settings cannot make a client.
pub fn object_sink(
    storage: &StorageConfig,
) -> Result<std::sync::Arc<dyn docket_export::sink::ObjectSink>, docket_export::sink::SinkError> {
    use docket_export::sink::{FilesystemSink, S3Config, S3Sink};
    Ok(match storage.kind {
        StorageKind::Filesystem => std::sync::Arc::new(FilesystemSink::new(&storage.path)),
        StorageKind::S3 => {
            let mut s3 = S3Config::new(storage.bucket.clone().unwrap_or_default());
            s3.prefix = storage.prefix.clone().unwrap_or_default();
            s3.endpoint = storage.endpoint.clone();
            if let Some(region) = &storage.region {
                s3.region = region.clone();
            }
            s3.access_key_id = storage.access_key_id.clone();
            s3.secret_access_key = storage.secret_access_key.clone();
            s3.allow_http = storage.allow_http;
            std::sync::Arc::new(S3Sink::new(&s3)?)
        }
    })
}

/// The `consent:` section.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct ConsentConfig {
    /// Consent for Trino queries and exports.
    pub trino: TrinoConsentConfig,
}

/// `consent.trino`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct TrinoConsentConfig {
    /// Ask before running a statement whose `EXPLAIN` estimates more rows than this.
    pub row_threshold: u64,
}

impl Default for TrinoConsentConfig {
    fn default() -> Self {
        Self {
            row_threshold: 1_000_000,
        }
    }
}

/// Parses sizes written as `1048576`, `512KiB`, `100MiB`, `1GiB` (or `KB`/`MB`/`GB`, taken as
/// powers of 1024 too, as operators mean them).
///
/// # Errors
/// A message saying what was expected.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let amount: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 512KiB, 100MiB or 1GiB"))?;
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => {
            return Err(format!(
                "{text:?} has an unknown unit {other:?} (use KiB, MiB or GiB)"
            ));
        }
    };
    amount
        .checked_mul(factor)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// Serde adapter for [`parse_bytes`], accepting a string or a number of bytes.
///
/// # Errors
/// When the value is not a size.
pub fn deserialize_bytes<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Bytes(u64),
        Text(String),
    }
    match Raw::deserialize(deserializer)? {
        Raw::Bytes(bytes) => Ok(bytes),
        Raw::Text(text) => parse_bytes(&text).map_err(serde::de::Error::custom),
    }
}

/// `server.shutdown`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct ShutdownConfig {
    /// How long running work may take to finish after a shutdown signal.
    #[serde(deserialize_with = "deserialize_duration")]
    pub grace_period: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        Self {
            grace_period: Duration::from_secs(25),
        }
    }
}

/// One entry of `connections:`. The kind-specific settings are read by the tools
/// of that kind; here only what every connection has is interpreted.
#[derive(Clone, Deserialize)]
pub struct ConnectionConfig {
    /// `trino`, `api` or `graphql`.
    pub kind: ConnectionKind,
    /// What the connection is for, shown by `list_connections`.
    #[serde(default)]
    pub description: Option<String>,
    /// Kind-specific settings (URLs, credentials, limits), never shown to callers.
    #[serde(flatten)]
    pub settings: BTreeMap<String, yaml_serde::Value>,
}

impl fmt::Debug for ConnectionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Settings hold credentials; only their keys are printed.
        f.debug_struct("ConnectionConfig")
            .field("kind", &self.kind)
            .field("description", &self.description)
            .field("settings", &self.settings.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// The kinds of data system a connection reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConnectionKind {
    /// A Trino cluster.
    Trino,
    /// An HTTP API.
    Api,
    /// A GraphQL endpoint.
    Graphql,
}

impl ConnectionKind {
    /// The name used in configuration and tool output.
    pub fn as_str(self) -> &'static str {
        match self {
            ConnectionKind::Trino => "trino",
            ConnectionKind::Api => "api",
            ConnectionKind::Graphql => "graphql",
        }
    }
}

/// The `logging:` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct LoggingConfig {
    /// `pretty` for people, `json` for log pipelines.
    pub format: LogFormat,
    /// A tracing filter, for example `info` or `docket_server=debug,info`.
    pub level: String,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Pretty,
            level: "info".into(),
        }
    }
}

/// How logs are written to stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line.
    Json,
}

/// Where the embedded default keeps its database: SQLite under `./docket-data/`.
pub const EMBEDDED_DATABASE_URL: &str = "sqlite://./docket-data/docket.db";

/// Everything wrong with a configuration file, all at once.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the configuration has {} problem(s):\n  - {}", .problems.len(), .problems.join("\n  - "))]
pub struct ConfigError {
    /// One sentence per problem, each starting with the key path it concerns.
    pub problems: Vec<String>,
}

impl Config {
    /// The configuration `docket serve` uses without `--config`: loopback only,
    /// anonymous callers are administrators (only this machine can reach it), and
    /// tasks are kept in SQLite under `./docket-data/`.
    pub fn embedded_default() -> Self {
        let mut config = Config::default();
        config.database.url = Some(EMBEDDED_DATABASE_URL.to_owned());
        config.auth.allow_anonymous = true;
        config.auth.anonymous_roles = vec!["admin".into()];
        // The built-in `admin` persona allows every tool and connection.
        config
    }

    /// Parses a YAML configuration, expanding `${NAME}` in string values with `env`.
    ///
    /// # Errors
    /// [`ConfigError`] listing every unknown key, unset variable, type error and
    /// inconsistency found.
    pub fn from_yaml(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut problems = Vec::new();
        let mut value: yaml_serde::Value = match yaml_serde::from_str(text) {
            Ok(yaml_serde::Value::Null) => yaml_serde::Value::Mapping(Default::default()),
            Ok(value) => value,
            Err(err) => {
                return Err(ConfigError {
                    problems: vec![format!("not valid YAML: {err}")],
                });
            }
        };
        expand_env(&mut value, "", env, &mut problems);
        if value
            .get("database")
            .and_then(yaml_serde::Value::as_str)
            .is_some_and(|text| text.eq_ignore_ascii_case("none"))
        {
            return Err(ConfigError {
                problems: vec![format!(
                    "database: none is not supported: tasks, scripts, audit and exports need \
                     a database; leave database: out to use the embedded SQLite database \
                     ({EMBEDDED_DATABASE_URL}), or set database.url"
                )],
            });
        }

        let Some(config) = typed(value, text, &mut problems) else {
            return Err(ConfigError { problems });
        };
        problems.extend(config.problems());
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError { problems })
        }
    }

    /// Inconsistencies between sections, as sentences prefixed by the key path.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = self.auth.problems();
        problems.extend(crate::persona::problems(&self.personas, &self.admin));
        problems.extend(self.rate_limit.problems());
        if let Err(connection_problems) = crate::connections::trino_connections(&self.connections) {
            problems.extend(connection_problems);
        }
        if let Err(connection_problems) = crate::connections::http_connections(&self.connections) {
            problems.extend(connection_problems);
        }
        for (name, persona) in &self.personas {
            for rule in &persona.api_routes {
                // The connection is a glob (`shop-*`); a rule no connection matches
                // is a typo.
                if !self
                    .connections
                    .keys()
                    .any(|connection| crate::persona::glob_match(&rule.connection, connection))
                {
                    problems.push(format!(
                        "personas.{name}.api_routes: connection {:?} matches no connection under connections",
                        rule.connection
                    ));
                }
            }
        }
        for origin in &self.server.allowed_origins {
            if !(origin.starts_with("http://") || origin.starts_with("https://")) {
                problems.push(format!(
                    "server.allowed_origins: {origin:?} must be an origin such as https://app.example.com"
                ));
            }
        }
        if self.tasks.heartbeat_interval.is_zero() {
            problems.push("tasks.heartbeat_interval: must be greater than zero".into());
        }
        if self.tasks.stale_after <= self.tasks.heartbeat_interval {
            problems.push("tasks.stale_after: must be longer than tasks.heartbeat_interval, or live tasks read as failed".into());
        }
        if self.scripts.lease <= self.scripts.heartbeat_interval {
            problems.push("scripts.lease: must be longer than scripts.heartbeat_interval, or running runs are taken by other workers".into());
        }
        if self.scripts.heartbeat_interval.is_zero() {
            problems.push("scripts.heartbeat_interval: must be greater than zero".into());
        }
        if self.tasks.poll_interval_ms == 0 {
            problems.push("tasks.poll_interval_ms: must be greater than zero".into());
        }
        if let Some(url) = &self.database.url
            && !(url.starts_with("postgres://")
                || url.starts_with("postgresql://")
                || url.starts_with("sqlite://"))
        {
            problems.push(format!(
                "database.url: {} must start with postgres:// or sqlite://",
                redact_url(url)
            ));
        }
        if self.exports.default_timeout > self.exports.max_timeout {
            problems.push(
                "exports.default_timeout: must not be longer than exports.max_timeout".into(),
            );
        }
        if self.storage.kind == StorageKind::S3 && self.storage.bucket.is_none() {
            problems.push("storage.bucket: required when storage.kind is s3".into());
        }
        if self.server.max_connections == 0 {
            problems.push("server.max_connections: must be greater than zero".into());
        }
        if self.server.header_read_timeout.is_zero() || self.server.body_timeout.is_zero() {
            problems.push(
                "server.header_read_timeout, server.body_timeout: must be longer than zero".into(),
            );
        }
        if self.server.max_request_bytes == 0 {
            problems.push("server.max_request_bytes: must be greater than zero".into());
        }
        let has_credentials = !self.auth.api_keys.is_empty() || self.auth.oidc.is_some();
        if !self.server.address.ip().is_loopback() && self.auth.allow_anonymous {
            problems.push(format!(
                "auth.allow_anonymous: anonymous access is only allowed on a loopback address, and server.address is {}; \
                 configure auth.api_keys or auth.oidc, or bind to 127.0.0.1",
                self.server.address
            ));
        } else if !self.server.address.ip().is_loopback() && !has_credentials {
            problems.push(format!(
                "auth: server.address {} is reachable from other machines but no credentials are configured; \
                 add auth.api_keys or auth.oidc, or bind to 127.0.0.1",
                self.server.address
            ));
        }
        problems
    }
}

/// Replaces `${NAME}` in every string scalar; `$${` writes a literal `${`.
fn expand_env(
    value: &mut yaml_serde::Value,
    path: &str,
    env: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<String>,
) {
    match value {
        yaml_serde::Value::String(text) if text.contains("${") => match expand_string(text, env) {
            Ok(expanded) => *text = expanded,
            Err(name) => problems.push(format!(
                "{}: environment variable {name} is not set",
                if path.is_empty() { "." } else { path }
            )),
        },
        yaml_serde::Value::Sequence(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                expand_env(item, &format!("{path}[{index}]"), env, problems);
            }
        }
        yaml_serde::Value::Mapping(mapping) => {
            for (key, item) in mapping.iter_mut() {
                let key = key.as_str().unwrap_or("?");
                let child = if path.is_empty() {
                    key.to_owned()
                } else {
                    format!("{path}.{key}")
                };
                expand_env(item, &child, env, problems);
            }
        }
        _ => {}
    }
}

/// Expands one string; `Err` names the first unset variable.
fn expand_string(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let Some(end) = after.find('}') else {
                out.push_str(tail);
                return Ok(out);
            };
            let name = &after[..end];
            out.push_str(&env(name).ok_or_else(|| name.to_owned())?);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Parses durations written as `250ms`, `2s`, `5m`, `1h` (or a bare number of seconds).
///
/// # Errors
/// A message saying what was expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let amount: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 500ms, 25s, 5m or 1h"))?;
    let duration = match unit.trim() {
        "ms" => Duration::from_millis(amount),
        "" | "s" => Duration::from_secs(amount),
        "m" => Duration::from_secs(amount.saturating_mul(60)),
        "h" => Duration::from_secs(amount.saturating_mul(3600)),
        other => {
            return Err(format!(
                "{text:?} has an unknown unit {other:?} (use ms, s, m or h)"
            ));
        }
    };
    Ok(duration)
}

/// Serde adapter for [`parse_duration`], accepting a string or a number of seconds.
///
/// # Errors
/// When the value is not a duration.
pub fn deserialize_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Seconds(u64),
        Text(String),
    }
    match Raw::deserialize(deserializer)? {
        Raw::Seconds(seconds) => Ok(Duration::from_secs(seconds)),
        Raw::Text(text) => parse_duration(&text).map_err(serde::de::Error::custom),
    }
}

/// Deserializes one configuration document, reporting every unknown key and the type
/// error it met, each with its key path and line.
fn deserialize_piece(
    piece: yaml_serde::Value,
    text: &str,
    problems: &mut BTreeSet<String>,
) -> Option<Config> {
    let mut unknown = Vec::new();
    let parsed: Result<Config, _> = serde_path_to_error::deserialize(
        serde_ignored::Deserializer::new(piece, &mut |path: serde_ignored::Path<'_>| {
            unknown.push(path.to_string());
        }),
    );
    for path in unknown {
        problems.insert(format!("{}: unknown key", at_line(text, &path)));
    }
    match parsed {
        Ok(config) => Some(config),
        Err(error) => {
            let path = error.path().to_string();
            problems.insert(format!("{}: {}", at_line(text, &path), error.into_inner()));
            None
        }
    }
}

/// The typed configuration, or every problem with it. When the whole document does not
/// deserialize, each key below each section is tried on its own, so one bad value never
/// hides another.
fn typed(value: yaml_serde::Value, text: &str, problems: &mut Vec<String>) -> Option<Config> {
    let mut found = BTreeSet::new();
    if let Some(config) = deserialize_piece(value.clone(), text, &mut found) {
        problems.extend(found);
        return Some(config);
    }
    // Without the values that fail, the rest is checked too (its consistency
    // problems are reported alongside).
    let mut pruned = value.clone();
    if let yaml_serde::Value::Mapping(top) = &value {
        for (key, section) in top {
            let single = |inner: yaml_serde::Value| {
                let mut mapping = yaml_serde::Mapping::new();
                mapping.insert(key.clone(), inner);
                yaml_serde::Value::Mapping(mapping)
            };
            match section {
                yaml_serde::Value::Mapping(entries) if !entries.is_empty() => {
                    for (inner_key, inner_value) in entries {
                        let mut mapping = yaml_serde::Mapping::new();
                        mapping.insert(inner_key.clone(), inner_value.clone());
                        let piece = single(yaml_serde::Value::Mapping(mapping));
                        if deserialize_piece(piece, text, &mut found).is_none()
                            && let Some(yaml_serde::Value::Mapping(entries)) = pruned.get_mut(key)
                        {
                            entries.remove(inner_key);
                        }
                    }
                }
                other => {
                    if deserialize_piece(single(other.clone()), text, &mut found).is_none()
                        && let yaml_serde::Value::Mapping(top) = &mut pruned
                    {
                        top.remove(key);
                    }
                }
            }
        }
    }
    if let Some(rest) = deserialize_piece(pruned, text, &mut BTreeSet::new()) {
        found.extend(rest.problems());
    }
    problems.extend(found);
    None
}

/// `path` with the line of the file it is on, when it can be found: `tasks.enabled
/// (line 3)`. Each segment is looked for after the line of the one before it, as a
/// key (`segment:`) in block or flow style.
fn at_line(text: &str, path: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut from = 0;
    let mut found = None;
    for segment in path.split('.').filter(|segment| !segment.is_empty()) {
        let segment = segment.split('[').next().unwrap_or(segment);
        if segment.is_empty() || segment == "?" {
            continue;
        }
        let key = format!("{segment}:");
        let at = lines.iter().enumerate().skip(from).find(|(_, line)| {
            line.match_indices(&key).any(|(index, _)| {
                line[..index]
                    .chars()
                    .last()
                    .is_none_or(|before| matches!(before, ' ' | '{' | ',' | '-' | '"'))
            })
        });
        match at {
            Some((index, _)) => {
                from = index;
                found = Some(index + 1);
            }
            None => break,
        }
    }
    match found {
        Some(line) => format!("{path} (line {line})"),
        None => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "ALICE_KEY" => Some("s3cret-alice".into()),
            _ => None,
        }
    }

    #[test]
    fn without_a_database_section_the_embedded_database_is_used_and_none_is_refused() {
        let config =
            Config::from_yaml("server: { address: \"127.0.0.1:9000\" }\n", &env).expect("valid");
        assert_eq!(config.database.url.as_deref(), Some(EMBEDDED_DATABASE_URL));
        let refused = Config::from_yaml("database: none\n", &env).expect_err("refused");
        assert!(
            refused.problems[0].starts_with("database: none is not supported"),
            "{refused:?}"
        );
    }

    /// Every problem is reported with its key path and line; one bad value hides
    /// no other, type errors included.
    #[test]
    fn every_problem_names_its_key_and_line() {
        let text = "tasks: { enabled: maybe }\n\
                    database:\n  url: \"mysql://db/docket\"\n\
                    server:\n  max_connections: many\n  shutdown: { grace_period: soon }\n\
                    connections:\n  w: { kind: trino, url: \"not a url\", user: docket }\n  \
                    x: { kind: trino, url: \"http://trino:8080\" }\n\
                    nonsense: 1\n";
        let problems = Config::from_yaml(text, &env).expect_err("invalid").problems;
        let expect = [
            "tasks.enabled (line 1): invalid type: string \"maybe\", expected a boolean",
            "server.max_connections (line 5): invalid type",
            "server.shutdown.grace_period (line 6):",
            "database.url: mysql://db/docket must start with",
            "connections.w.url: \"not a url\" is not an http:// or https:// URL",
            "connections.x.user: required",
            "nonsense (line 10): unknown key",
        ];
        for expected in expect {
            assert!(
                problems.iter().any(|problem| problem.starts_with(expected)),
                "{expected:?} missing from {problems:#?}"
            );
        }
    }

    #[test]
    fn an_empty_file_is_the_default() {
        let config = Config::from_yaml("", &env).expect("valid");
        assert_eq!(
            config.server.address,
            SocketAddr::from(([127, 0, 0, 1], 8080))
        );
        assert_eq!(config.server.shutdown.grace_period, Duration::from_secs(25));
        assert!(!config.auth.allow_anonymous);
    }

    #[test]
    fn env_references_are_expanded() {
        let text =
            "auth:\n  api_keys:\n    - { name: alice, key: \"${ALICE_KEY}\", roles: [analyst] }\n";
        let config = Config::from_yaml(text, &env).expect("valid");
        assert_eq!(config.auth.api_keys[0].key.as_deref(), Some("s3cret-alice"));
        assert_eq!(expand_string("a$${b}c", &env).as_deref(), Ok("a${b}c"));
        assert_eq!(expand_string("cost $5", &env).as_deref(), Ok("cost $5"));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let text = "server:\n  adress: 1\n  shutdown: { grace_period: 3s }\nfoo: 1\nauth:\n  api_keys:\n    - { name: bob, key: \"${MISSING}\" }\n";
        let err = Config::from_yaml(text, &env).expect_err("invalid");
        let all = err.problems.join("\n");
        assert!(all.contains("server.adress (line 2): unknown key"), "{all}");
        assert!(all.contains("foo (line 4): unknown key"), "{all}");
        assert!(
            all.contains("auth.api_keys[0].key: environment variable MISSING is not set"),
            "{all}"
        );
    }

    #[test]
    fn anonymous_access_off_loopback_is_refused() {
        let text = "server: { address: \"0.0.0.0:8080\" }\nauth: { allow_anonymous: true }\n";
        let err = Config::from_yaml(text, &env).expect_err("invalid");
        assert!(err.problems.iter().any(|p| p.contains("loopback")), "{err}");
        let no_credentials = Config::from_yaml("server: { address: \"0.0.0.0:8080\" }\n", &env)
            .expect_err("invalid");
        assert!(
            no_credentials.problems[0].contains("no credentials"),
            "{no_credentials}"
        );
    }

    #[test]
    fn database_passwords_are_not_printed() {
        let text = "database: { url: \"postgres://docket:hunter2@db:5432/docket\" }\n";
        let config = Config::from_yaml(text, &env).expect("valid");
        let printed = format!("{config:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(
            printed.contains("postgres://docket:***@db:5432/docket"),
            "{printed}"
        );
        assert_eq!(
            redact_url("sqlite://./docket-data/docket.db"),
            "sqlite://./docket-data/docket.db"
        );
    }

    #[test]
    fn task_timings_must_leave_room_for_heartbeats() {
        let err = Config::from_yaml("tasks: { heartbeat_interval: 5s, stale_after: 2s }\n", &env)
            .expect_err("invalid");
        assert!(
            err.problems
                .iter()
                .any(|p| p.starts_with("tasks.stale_after")),
            "{err}"
        );
        let config = Config::from_yaml(
            "tasks: { heartbeat_interval: 200ms, stale_after: 1s }\n",
            &env,
        )
        .expect("valid");
        assert_eq!(config.tasks.heartbeat_interval, Duration::from_millis(200));
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("100MiB"), Ok(100 << 20));
        assert_eq!(parse_bytes("512kb"), Ok(512 << 10));
        assert_eq!(parse_bytes("42"), Ok(42));
        assert!(parse_bytes("5 parsecs").is_err());
        let config =
            Config::from_yaml("exports: { max_bytes: 10MiB, max_rows: 5 }\n", &env).expect("valid");
        assert_eq!(config.exports.max_bytes, 10 << 20);
        let err = Config::from_yaml("storage: { kind: s3 }\n", &env).expect_err("invalid");
        assert!(
            err.problems.iter().any(|p| p.starts_with("storage.bucket")),
            "{err}"
        );
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn connection_settings_are_not_printed() {
        let text = "connections:\n  shop: { kind: api, base_url: \"https://x\", auth: { bearer: hunter2 } }\n";
        let config = Config::from_yaml(text, &env).expect("valid");
        let printed = format!("{config:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert_eq!(config.connections["shop"].kind, ConnectionKind::Api);
    }

    /// YAML built from the keys the loader knows, with values of every shape.
    fn config_yaml() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let value = prop_oneof![
            Just("true".to_owned()),
            Just("0".to_owned()),
            Just("-1".to_owned()),
            Just("18446744073709551616".to_owned()),
            Just("\"10s\"".to_owned()),
            Just("\"${UNSET}\"".to_owned()),
            Just("[]".to_owned()),
            Just("{}".to_owned()),
            Just("[a, {b: c}]".to_owned()),
            Just("~".to_owned()),
            "[a-z0-9 :]{0,8}".prop_map(|text| format!("\"{text}\"")),
        ];
        let key = proptest::sample::select(vec![
            "server.address",
            "server.shutdown.grace_period",
            "database.url",
            "tasks.heartbeat_interval",
            "tasks.stale_after",
            "scripts.lease",
            "scripts.max_reclaims",
            "auth.allow_anonymous",
            "auth.api_keys",
            "personas.p.roles",
            "personas.p.tools",
            "connections.c.kind",
            "connections.c.url",
            "exports.max_bytes",
            "rate_limit.burst",
            "unknown.key",
        ]);
        proptest::collection::vec((key, value), 0..8).prop_map(|pairs| {
            let mut text = String::new();
            for (key, value) in pairs {
                let parts: Vec<&str> = key.split('.').collect();
                let (last, parents) = parts.split_last().unwrap_or((&"x", &[]));
                let nested = parents
                    .iter()
                    .rev()
                    .fold(format!("{last}: {value}"), |inner, parent| {
                        format!("{parent}: {{ {inner} }}")
                    });
                text.push_str(&nested);
                text.push('\n');
            }
            text
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Whatever a configuration file holds, the loader answers a configuration
        /// or its problems; it never panics.
        #[test]
        fn no_configuration_panics_the_loader(text in config_yaml()) {
            if let Ok(config) = Config::from_yaml(&text, &env) {
                let _ = config.problems();
            }
        }

        #[test]
        fn no_text_panics_the_loader(text in "\\PC{0,200}") {
            let _ = Config::from_yaml(&text, &env);
        }
    }
}
