//! The configuration's shape: every section and key `docs/configuration.md`
//! documents, with its default.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use crate::auth::AuthConfig;
use crate::persona::{AdminConfig, PersonaConfig};
use crate::rate_limit::RateLimitConfig;

use super::units::{deserialize_bytes, deserialize_duration};

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
    /// How much of a result an answer holds, and how long the rest is kept.
    pub results: ResultsConfig,
    /// Where export assets are stored.
    pub storage: StorageConfig,
    /// When to ask the user before running something expensive.
    pub consent: ConsentConfig,
    /// Log output.
    pub logging: LoggingConfig,
    /// Managed scripts and their runs.
    pub scripts: ScriptsConfig,
    /// Traces and metrics over OTLP (off without `telemetry.otlp`).
    pub telemetry: docket_telemetry::TelemetryConfig,
    /// The portal at `/portal` (off unless `portal.enabled`).
    pub portal: crate::portal::PortalSection,
    /// How the OpenAPI catalogs of api connections are read (`openapi:`).
    pub catalogs: crate::catalogs::CatalogsConfig,
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
    /// This replica's name, to which each process adds a random suffix (a task
    /// is as alive as its replica, so a restarted process must not be taken for
    /// the one before it); empty means `replica`.
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
    /// The share of `max_connections`, in percent, one identity may hold at once
    /// (requests in flight, streams among them); beyond it its next request is
    /// refused with 429. Anonymous callers share one identity.
    pub max_connection_share_percent: u8,
    /// Long-lived streams (`subscriptions/listen`, a 2025-11-25 `tasks/result`) one
    /// identity may hold open at once; beyond it its next one is refused with 429.
    pub max_streams_per_identity: u32,
    /// The secret that protects `requestState`; every replica needs the same one.
    /// When unset, a random secret is drawn per process (fine for one replica).
    pub request_state_secret: Option<String>,
    /// How long a session of the earlier protocol era (opened by `initialize`) may
    /// sit unused before it ends; its client then initializes again.
    #[serde(deserialize_with = "deserialize_duration")]
    pub session_idle_timeout: Duration,
    /// The largest asset `resources/read` sends (inline text or a base64 blob); a
    /// larger one is refused with its download URL.
    #[serde(deserialize_with = "deserialize_bytes")]
    pub max_resource_read_bytes: u64,
    /// Sessions one identity may hold at once; opening one more ends that
    /// identity's least recently used session (never anyone else's).
    pub max_sessions_per_identity: u32,
    /// Prompts one identity may keep in the prompt library (`manage_prompt
    /// create` is refused beyond it, naming the limit).
    pub max_prompts_per_owner: u32,
    /// How long `completion/complete` waits for suggestions (names a Trino
    /// connection lists, for example); after it, it suggests nothing.
    #[serde(deserialize_with = "deserialize_duration")]
    pub completion_timeout: Duration,
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
            max_connection_share_percent: 25,
            max_streams_per_identity: 16,
            request_state_secret: None,
            session_idle_timeout: crate::legacy::DEFAULT_IDLE_TIMEOUT,
            max_sessions_per_identity: crate::legacy::DEFAULT_SESSIONS_PER_IDENTITY,
            max_resource_read_bytes: 10 << 20,
            max_prompts_per_owner: 500,
            completion_timeout: Duration::from_secs(3),
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
                "max_connection_share_percent",
                &self.max_connection_share_percent,
            )
            .field("max_streams_per_identity", &self.max_streams_per_identity)
            .field("session_idle_timeout", &self.session_idle_timeout)
            .field("max_sessions_per_identity", &self.max_sessions_per_identity)
            .field("max_resource_read_bytes", &self.max_resource_read_bytes)
            .field("max_prompts_per_owner", &self.max_prompts_per_owner)
            .field("completion_timeout", &self.completion_timeout)
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
    /// How long `docket serve` waits for a database that does not answer yet at
    /// start-up (trying again with backoff, logging each attempt) before it gives up;
    /// zero tries once.
    #[serde(deserialize_with = "deserialize_duration")]
    pub start_timeout: Duration,
}

impl Default for DatabaseConfig {
    fn default() -> Self {
        Self {
            url: Some(EMBEDDED_DATABASE_URL.to_owned()),
            max_connections: 16,
            migrate_on_start: true,
            start_timeout: Duration::from_secs(60),
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
            .field("start_timeout", &self.start_timeout)
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
    /// This replica's scheduler.
    pub schedules: ScheduleConfig,
    /// Scripts one identity may own; a create past it is refused.
    pub max_per_owner: u32,
    /// Schedules one identity's scripts may have; a `schedule_set` past it is
    /// refused (replacing a script's schedule adds none).
    pub max_schedules_per_owner: u32,
}

/// The `scripts.schedules:` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct ScheduleConfig {
    /// Whether this replica runs the scheduler. Any number of replicas may:
    /// each fire time still becomes one run.
    pub enabled: bool,
    /// How often the scheduler looks for due schedules; a fire is at most
    /// this late.
    #[serde(deserialize_with = "deserialize_duration")]
    pub interval: Duration,
}

impl Default for ScheduleConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            interval: Duration::from_secs(15),
        }
    }
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
            schedules: ScheduleConfig::default(),
            max_per_owner: 200,
            max_schedules_per_owner: 20,
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
    /// The most runs of one script owner running at once, on all replicas
    /// together; a worker passes over the queued runs of an owner at this
    /// share, so one owner's queue cannot starve another's. Unset: one less
    /// than `concurrency` (at least 1), so another owner always finds a worker.
    pub max_running_per_owner: Option<u32>,
}

impl ScriptWorkerConfig {
    /// [`ScriptWorkerConfig::max_running_per_owner`], or its default.
    #[must_use]
    pub fn running_share(&self) -> u32 {
        self.max_running_per_owner.unwrap_or_else(|| {
            u32::try_from(self.concurrency.saturating_sub(1))
                .unwrap_or(u32::MAX)
                .max(1)
        })
    }
}

impl Default for ScriptWorkerConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            concurrency: 2,
            max_running_per_owner: None,
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

/// The `results:` section: the byte budget of answers that return rows or
/// bodies, and the spools that keep the rest of a cut answer for its cursor.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct ResultsConfig {
    /// The bytes of rows or body an answer holds when the call names no
    /// `max_result_bytes`.
    #[serde(deserialize_with = "deserialize_bytes")]
    pub default_bytes: u64,
    /// The largest `max_result_bytes` a call may ask for.
    #[serde(deserialize_with = "deserialize_bytes")]
    pub max_bytes: u64,
    /// How long the rest of a cut answer is kept for its cursor.
    #[serde(deserialize_with = "deserialize_duration")]
    pub continuation_ttl: Duration,
    /// How many unread continuations one caller may hold at once.
    pub max_spools_per_owner: u32,
}

impl Default for ResultsConfig {
    fn default() -> Self {
        Self {
            default_bytes: 256 << 10,
            max_bytes: 8 << 20,
            continuation_ttl: Duration::from_secs(15 * 60),
            max_spools_per_owner: 20,
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
    /// How long a signed download link (`download_url`) opens: at most
    /// [`MAX_LINK_TTL`].
    #[serde(deserialize_with = "deserialize_duration")]
    pub link_ttl: Duration,
    /// Shares of assets for others (`share_asset`).
    pub shares: SharesConfig,
}

/// The longest `storage.link_ttl` may be: link keys are kept this long after
/// they stop signing, so no link outlives its key.
pub const MAX_LINK_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The longest `storage.shares.max_ttl` may be.
pub const MAX_SHARE_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// `storage.shares`: links an owner makes for others with `share_asset`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct SharesConfig {
    /// The most shares one owner holds (ended ones count until the retention
    /// pass deletes them).
    pub max_per_owner: u32,
    /// How long a share opens when its maker does not say.
    #[serde(deserialize_with = "deserialize_duration")]
    pub default_ttl: Duration,
    /// The longest a share may open: every share expires.
    #[serde(deserialize_with = "deserialize_duration")]
    pub max_ttl: Duration,
    /// Opens of shares and signed links per minute from one client address.
    pub opens_per_minute: u32,
    /// Opens one client address may make at once before the per-minute rate applies.
    pub opens_burst: u32,
}

impl Default for SharesConfig {
    fn default() -> Self {
        Self {
            max_per_owner: 100,
            default_ttl: Duration::from_secs(7 * 24 * 3600),
            max_ttl: Duration::from_secs(90 * 24 * 3600),
            opens_per_minute: 60,
            opens_burst: 20,
        }
    }
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
            link_ttl: Duration::from_secs(3600),
            shares: SharesConfig::default(),
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
            .field("link_ttl", &self.link_ttl)
            .field("shares", &self.shares)
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

/// `server.shutdown`.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct ShutdownConfig {
    /// How long running work may take to finish after a shutdown signal.
    #[serde(deserialize_with = "deserialize_duration")]
    pub grace_period: Duration,
    /// How long, after the grace period, endings already computed are still
    /// written while the database is briefly away (never past `tasks.stale_after`);
    /// a shutdown takes at most `grace_period + ending_grace`.
    #[serde(deserialize_with = "deserialize_duration")]
    pub ending_grace: Duration,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        Self {
            grace_period: Duration::from_secs(25),
            ending_grace: Duration::from_secs(10),
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
