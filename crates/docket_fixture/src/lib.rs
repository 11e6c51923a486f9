//! The conformance fixture: a Docket server that registers the tools the official
//! MCP conformance suite (`@modelcontextprotocol/conformance`) calls, through the
//! same public library API an embedder uses.
//!
//! The fixture is a test harness, not a product: it exists so that the suite can
//! exercise Docket's transport and call pipeline end to end. Its tools mirror the
//! suite's reference "everything-server" by name and behaviour, plus the seven
//! tools of the suite's tasks-extension scenarios; Docket offers tools only, so the
//! suite's resource, prompt and completion scenarios are expected to fail against it.
//!
//! [`fixture_app`] builds the [`App`] over the task store it is given, and
//! [`fixture_store`] opens that store: a PostgreSQL database or a temporary SQLite
//! file. The `docket_fixture` binary serves the app on a loopback port, and tests
//! start it in-process with [`docket_server::serve`].

mod content;
mod diagnostics;
mod input;
mod library;
mod mrtr;
mod store;
mod tasks;

use std::sync::Arc;
use std::time::Duration;

use docket_server::registry::RegistryError;
use docket_server::{App, AppBuilder, BuildError, Config};
use docket_storage::SessionStore;
use docket_task::TaskStore;
use serde_json::{Value, json};

pub use store::{FixtureDatabase, FixtureStore, FixtureStoreError, fixture_store};

/// The name of every tool the fixture registers, in registration order. Docket's
/// platform tools (`platform_info`, `list_connections`) are listed by `tools/list`
/// as well, because every [`App`] has them.
pub const FIXTURE_TOOLS: &[&str] = &[
    content::SIMPLE_TEXT,
    content::IMAGE_CONTENT,
    content::AUDIO_CONTENT,
    content::EMBEDDED_RESOURCE,
    content::MULTIPLE_CONTENT_TYPES,
    content::ERROR_HANDLING,
    content::TOOL_WITH_PROGRESS,
    diagnostics::ABOUT,
    diagnostics::MISSING_CAPABILITY,
    diagnostics::LOGGING_TOOL,
    diagnostics::TOOL_WITH_LOGGING,
    diagnostics::JSON_SCHEMA_2020_12,
    diagnostics::CUSTOM_HEADER,
    mrtr::STREAMING_ELICITATION,
    mrtr::ELICITATION,
    mrtr::SAMPLING,
    mrtr::LIST_ROOTS,
    mrtr::REQUEST_STATE,
    mrtr::MULTIPLE_INPUTS,
    mrtr::MULTI_ROUND,
    mrtr::LEGACY_ELICITATION,
    mrtr::LEGACY_SAMPLING,
    mrtr::SEP1034_DEFAULTS,
    mrtr::SEP1330_ENUMS,
    mrtr::TAMPERED_STATE,
    mrtr::CAPABILITIES,
    tasks::GREET,
    tasks::SLOW_COMPUTE,
    tasks::FAILING_JOB,
    tasks::PROTOCOL_ERROR_JOB,
    tasks::CONFIRM_DELETE,
    tasks::MULTI_INPUT,
    tasks::TOOL_WITH_TASK,
];

/// How long the fixture waits for open requests after a shutdown signal. Shorter
/// than Docket's default because the harness that starts the fixture kills it a
/// few seconds after SIGTERM, and nothing the fixture runs is worth waiting for.
const SHUTDOWN_GRACE_PERIOD: Duration = Duration::from_secs(2);

/// Builds the fixture application: Docket's embedded default configuration
/// (loopback only, anonymous callers are administrators), every fixture tool,
/// tasks kept in `store` (which turns the tasks extension on) and the sessions of
/// earlier-era clients in `sessions`.
///
/// # Errors
/// [`BuildError`] when a tool cannot be registered (a name clash or a schema that
/// does not compile) or the configuration is inconsistent.
pub fn fixture_app(
    store: Arc<dyn TaskStore>,
    sessions: Arc<dyn SessionStore>,
) -> Result<App, BuildError> {
    let mut config = Config::embedded_default();
    config.server.shutdown.grace_period = SHUTDOWN_GRACE_PERIOD;
    // The suite sends its scenarios back to back as one anonymous caller; a rate limit
    // here would only test the suite's pacing (Docket's own tests cover the limit).
    config.rate_limit.requests_per_minute = 0;
    let builder = App::builder(config).task_store(store).sessions(sessions);
    let builder = content::register(builder)?;
    let builder = diagnostics::register(builder)?;
    let builder = mrtr::register(builder)?;
    let builder = tasks::register(builder)?;
    let builder = library::register(builder)?;
    builder.build()
}

/// The signature every module's `register` function shares.
type Registered = Result<AppBuilder, RegistryError>;

/// The input schema of a tool without arguments: an object that allows no property.
fn no_arguments() -> Value {
    json!({ "type": "object", "properties": {}, "additionalProperties": false })
}
