//! The application as every connection shares it: configuration, tools, identity,
//! personas, metrics and the task surface, built once by [`crate::AppBuilder`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use docket_run_bridge::RunBridge;
use docket_task::audit::AuditWriter;
use docket_task::runtime::TaskRuntime;

use crate::assets::Assets;
use crate::auth::Authenticator;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::persona::Personas;
use crate::rate_limit::RateLimiter;
use crate::registry::ToolRegistry;
use crate::request_state::RequestStateKey;
use crate::tasks::Tasks;

/// The server's name in `serverInfo`.
pub const SERVER_NAME: &str = "docket";

/// Everything a request needs, shared by all connections. Cheap to clone.
#[derive(Clone)]
pub struct App {
    pub(crate) state: Arc<AppState>,
}

pub(crate) struct AppState {
    pub(crate) config: Config,
    /// The sessions of the earlier protocol era.
    pub(crate) sessions: Arc<dyn docket_catalog::SessionStore>,
    /// Resources, prompts and completions.
    pub(crate) features: crate::features::Features,
    /// Changes to the prompt library and to assets, from every replica.
    pub(crate) changes: tokio::sync::broadcast::Sender<docket_catalog::CatalogChange>,
    /// The calls on this replica waiting for their session's answers.
    pub(crate) answer_waiters: Arc<crate::answers::AnswerWaiters>,
    /// The server's `Implementation`: every result carries it.
    pub(crate) server_info: docket_protocol::meta::Implementation,
    /// The same, encoded once, for results stamped as a `Value`.
    pub(crate) server_info_json: serde_json::Value,
    pub(crate) registry: ToolRegistry,
    pub(crate) authenticator: Authenticator,
    pub(crate) personas: Personas,
    pub(crate) rate_limiter: Arc<RateLimiter>,
    /// What each identity holds of the server's connections now.
    pub(crate) holds: crate::holds::Holds,
    pub(crate) state_key: RequestStateKey,
    pub(crate) metrics: Metrics,
    pub(crate) draining: AtomicBool,
    /// Fires when the app starts draining: open listen streams end with their
    /// closing response.
    pub(crate) closing: tokio_util::sync::CancellationToken,
    /// Whether the background work has been started (it is started once).
    pub(crate) background_started: AtomicBool,
    pub(crate) sse_keepalive: Duration,
    /// The task machinery, when a store is configured and `tasks.enabled`.
    pub(crate) tasks: Option<Tasks>,
    /// Where audit rows go, when a store is configured and `audit.enabled`.
    pub(crate) audit: Option<Arc<AuditWriter>>,
    /// This replica's id.
    pub(crate) replica_id: String,
    /// Asset rows and bytes, for downloads.
    pub(crate) assets: Option<Assets>,
    /// Deletes audit rows, call records and assets past their retention.
    pub(crate) retention: Option<Arc<dyn docket_catalog::retention::Retention>>,
    /// The run queue's workers, when a database is configured and `scripts.enabled`.
    pub(crate) run_bridge: Option<Arc<RunBridge>>,
}

impl App {
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
        self.state.closing.cancel();
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

    /// The run bridge (script runs), when scripts are enabled.
    pub fn run_bridge(&self) -> Option<&Arc<RunBridge>> {
        self.state.run_bridge.as_ref()
    }

    /// The task runtime, when tasks are enabled.
    pub fn task_runtime(&self) -> Option<&Arc<TaskRuntime>> {
        self.state.tasks.as_ref().map(|tasks| &tasks.runtime)
    }
}
