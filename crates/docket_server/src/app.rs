//! The application: configuration, tools, identity, personas and metrics, built
//! once and shared by every connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use docket_export::sink::ObjectSink;
use docket_protocol::meta::Implementation;
use docket_storage::catalog::{AssetStore, CallCatalog};
use docket_task::TaskStore;
use docket_task::runtime::{RuntimeConfig, TaskRuntime};

use crate::auth::{AuthError, Authenticator};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::persona::Personas;
use crate::rate_limit::RateLimiter;
use crate::registry::{RegistryError, ToolHandler, ToolRegistry, ToolSpec};
use crate::request_state::RequestStateKey;
use crate::tasks::Tasks;
use crate::tools::{self, AssetDeps};

/// The server's name in `serverInfo`.
pub const SERVER_NAME: &str = "docket";

/// Everything a request needs, shared by all connections. Cheap to clone.
#[derive(Clone)]
pub struct App {
    pub(crate) state: Arc<AppState>,
}

pub(crate) struct AppState {
    pub(crate) config: Config,
    pub(crate) server_info: Implementation,
    pub(crate) registry: ToolRegistry,
    pub(crate) authenticator: Authenticator,
    pub(crate) personas: Personas,
    pub(crate) rate_limiter: RateLimiter,
    pub(crate) state_key: RequestStateKey,
    pub(crate) metrics: Metrics,
    pub(crate) draining: AtomicBool,
    pub(crate) sse_keepalive: Duration,
    /// The task machinery, when a store is configured and `tasks.enabled`.
    pub(crate) tasks: Option<Tasks>,
    /// Where audit rows go, when a store is configured and `audit.enabled`.
    pub(crate) audit: Option<Arc<dyn TaskStore>>,
    /// This replica's id.
    pub(crate) replica_id: String,
    /// Asset rows and bytes, for downloads.
    pub(crate) assets: Option<AssetDeps>,
}

/// Why the application could not be built.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The configuration is inconsistent.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The authentication setup failed.
    #[error("authentication setup failed: {0}")]
    Auth(#[from] AuthError),
    /// A tool could not be registered.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The OS random source failed while drawing the request-state secret.
    #[error("could not draw a random secret: {0}")]
    Random(String),
}

/// Builds an [`App`]: the platform tools are always there; embedders add their own.
pub struct AppBuilder {
    config: Config,
    registry: ToolRegistry,
    sse_keepalive: Duration,
    store: Option<Arc<dyn TaskStore>>,
    assets: Option<AssetParts>,
}

/// Where exports write, as given to [`AppBuilder::assets`].
struct AssetParts {
    store: Arc<dyn AssetStore>,
    calls: Option<Arc<dyn CallCatalog>>,
    sink: Arc<dyn ObjectSink>,
}

impl App {
    /// A builder for `config`.
    pub fn builder(config: Config) -> AppBuilder {
        AppBuilder {
            config,
            registry: ToolRegistry::new(),
            sse_keepalive: Duration::from_secs(15),
            store: None,
            assets: None,
        }
    }

    /// The configuration the app runs with.
    pub fn config(&self) -> &Config {
        &self.state.config
    }

    /// The metrics, for embedders that export them elsewhere.
    pub fn metrics(&self) -> &Metrics {
        &self.state.metrics
    }

    /// Marks the app as draining: `/readyz` answers 503 from now on, and new
    /// task-creating calls are refused.
    pub fn start_draining(&self) {
        self.state.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the app is draining.
    pub fn is_draining(&self) -> bool {
        self.state.draining.load(Ordering::SeqCst)
    }

    /// Whether calls may become tasks (a store is configured and `tasks.enabled`).
    pub fn tasks_enabled(&self) -> bool {
        self.state.tasks.is_some()
    }

    /// This replica's id, stamped on the tasks it runs.
    pub fn replica_id(&self) -> &str {
        &self.state.replica_id
    }

    /// The task runtime, when tasks are enabled.
    pub fn task_runtime(&self) -> Option<&Arc<TaskRuntime>> {
        self.state.tasks.as_ref().map(|tasks| &tasks.runtime)
    }
}

impl AppBuilder {
    /// Registers a tool.
    ///
    /// # Errors
    /// [`RegistryError`] when the name is taken or malformed or the schema is invalid.
    pub fn tool(
        mut self,
        spec: ToolSpec,
        handler: impl ToolHandler,
    ) -> Result<Self, RegistryError> {
        self.registry.register(spec, handler)?;
        Ok(self)
    }

    /// The store for tasks and audit rows. Without one, every call is answered
    /// directly and nothing is audited.
    pub fn task_store(mut self, store: Arc<dyn TaskStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Where exports write: asset rows, the call catalog (optional) and the object
    /// sink for the bytes. Without them there are no exports or asset tools.
    pub fn assets(
        mut self,
        store: Arc<dyn AssetStore>,
        calls: Option<Arc<dyn CallCatalog>>,
        sink: Arc<dyn ObjectSink>,
    ) -> Self {
        self.assets = Some(AssetParts { store, calls, sink });
        self
    }

    /// How often an SSE response sends a keep-alive comment; the write also detects
    /// a client that went away. Tests shorten it.
    pub fn sse_keepalive(mut self, interval: Duration) -> Self {
        self.sse_keepalive = interval;
        self
    }

    /// Builds the app.
    ///
    /// # Errors
    /// [`BuildError`] for an inconsistent configuration, an auth setup failure or a
    /// tool that clashes with a platform tool.
    pub fn build(self) -> Result<App, BuildError> {
        let AppBuilder {
            config,
            mut registry,
            sse_keepalive,
            store,
            assets,
        } = self;
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(crate::config::ConfigError { problems }.into());
        }
        let trino_connections = crate::connections::trino_connections(&config.connections)
            .map_err(|problems| crate::config::ConfigError { problems })?;
        let assets = assets.map(|parts| AssetDeps {
            store: parts.store,
            calls: parts.calls,
            sink: parts.sink,
            base_url: config.server.base_url(),
        });
        tools::register_platform_tools(
            &mut registry,
            &config,
            store.is_some() && config.tasks.enabled,
            trino_connections,
            assets.clone(),
        )?;
        let authenticator = Authenticator::new(&config.auth)?;
        let personas = Personas::new(&config.personas, &config.admin);
        let rate_limiter = RateLimiter::new(&config.rate_limit);
        let state_key = match &config.server.request_state_secret {
            Some(secret) => RequestStateKey::from_secret(secret),
            None => RequestStateKey::random().map_err(|err| BuildError::Random(err.to_string()))?,
        };
        let replica_id = if config.server.replica_id.is_empty() {
            let mut suffix = [0u8; 4];
            getrandom::fill(&mut suffix).map_err(|err| BuildError::Random(err.to_string()))?;
            format!("replica-{}", hex::encode(suffix))
        } else {
            config.server.replica_id.clone()
        };
        let tasks = match &store {
            Some(store) if config.tasks.enabled => {
                let runtime = TaskRuntime::new(
                    Arc::clone(store),
                    RuntimeConfig {
                        replica_id: replica_id.clone(),
                        heartbeat_interval: config.tasks.heartbeat_interval,
                        stale_after: config.tasks.stale_after,
                        // Often enough that a vanished replica's tasks are recorded
                        // failed (and audited) soon after they start to read as failed.
                        maintenance_interval: (config.tasks.stale_after / 2)
                            .min(Duration::from_secs(15)),
                    },
                );
                Some(Tasks {
                    runtime,
                    retention: Duration::from_secs(u64::from(config.tasks.retention_days) * 86_400),
                    poll_interval_ms: config.tasks.poll_interval_ms,
                    stale_after: config.tasks.stale_after,
                })
            }
            _ => None,
        };
        let audit = store.filter(|_| config.audit.enabled);
        let state = AppState {
            server_info: Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")),
            config,
            registry,
            authenticator,
            personas,
            rate_limiter,
            state_key,
            metrics: Metrics::default(),
            draining: AtomicBool::new(false),
            sse_keepalive,
            tasks,
            audit,
            replica_id,
            assets,
        };
        Ok(App {
            state: Arc::new(state),
        })
    }
}
