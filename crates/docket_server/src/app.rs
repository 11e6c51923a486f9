//! The application: configuration, tools, identity, personas and metrics, built
//! once and shared by every connection.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use docket_protocol::meta::Implementation;

use crate::auth::{AuthError, Authenticator};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::persona::Personas;
use crate::rate_limit::RateLimiter;
use crate::registry::{RegistryError, ToolHandler, ToolRegistry, ToolSpec};
use crate::request_state::RequestStateKey;
use crate::tools;

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
}

impl App {
    /// A builder for `config`.
    pub fn builder(config: Config) -> AppBuilder {
        AppBuilder {
            config,
            registry: ToolRegistry::new(),
            sse_keepalive: Duration::from_secs(15),
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

    /// Marks the app as draining: `/readyz` answers 503 from now on.
    pub fn start_draining(&self) {
        self.state.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the app is draining.
    pub fn is_draining(&self) -> bool {
        self.state.draining.load(Ordering::SeqCst)
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
        } = self;
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(crate::config::ConfigError { problems }.into());
        }
        tools::register_platform_tools(&mut registry, &config)?;
        let authenticator = Authenticator::new(&config.auth)?;
        let personas = Personas::new(&config.personas, &config.admin);
        let rate_limiter = RateLimiter::new(&config.rate_limit);
        let state_key = match &config.server.request_state_secret {
            Some(secret) => RequestStateKey::from_secret(secret),
            None => RequestStateKey::random().map_err(|err| BuildError::Random(err.to_string()))?,
        };
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
        };
        Ok(App {
            state: Arc::new(state),
        })
    }
}
