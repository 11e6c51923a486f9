//! The application: configuration, tools, identity, personas and metrics, built
//! once and shared by every connection.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use docket_catalog::{AssetStore, CallCatalog, SessionStore};
use docket_export::sink::ObjectSink;
use docket_protocol::meta::Implementation;
use docket_task::TaskStore;
use docket_task::audit::AuditWriter;
use docket_task::runtime::{RuntimeConfig, TaskRuntime};

use crate::assets::Assets;
use crate::auth::{Attributes, Identity, IdentityKind, RunIdentity};
use crate::auth::{AuthError, Authenticator};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::persona::Personas;
use crate::rate_limit::RateLimiter;
use crate::registry::{RegistryError, ToolHandler, ToolRegistry, ToolSpec};
use crate::request_state::RequestStateKey;
use crate::state::{App, AppState, SERVER_NAME};
use crate::tasks::{CallTasks, TaskSource, Tasks};
use crate::tools;
use crate::tools::script_host::ScriptHost;
use crate::tools::scripts::{ConfiguredOwners, RunTasks, ScriptTools};
use docket_catalog::ScriptStore;
use docket_catalog::scripts::{Run, RunTrigger, ScriptVersion};
use docket_run_bridge::{BridgeConfig, RunBridge, SandboxRunner};
use docket_script::{Isolation, Limits};

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

/// How many catalog changes a listen stream may fall behind by before it misses some.
const CHANGES_BUFFER: usize = 256;

/// Builds an [`App`]: the platform tools are always there; embedders add their own.
pub struct AppBuilder {
    config: Config,
    registry: ToolRegistry,
    sse_keepalive: Duration,
    store: Option<Arc<dyn TaskStore>>,
    assets: Option<AssetParts>,
    links: Option<Arc<dyn docket_catalog::LinkStore>>,
    spools: Option<Arc<dyn docket_catalog::SpoolStore>>,
    scripts: Option<Arc<dyn ScriptStore>>,
    retention: Option<Arc<dyn docket_catalog::retention::Retention>>,
    script_isolation: Isolation,
    task_sources: Vec<Arc<dyn TaskSource>>,
    sessions: Option<Arc<dyn SessionStore>>,
    principals: Option<Arc<dyn docket_catalog::PrincipalStore>>,
    oauth_store: Option<Arc<dyn docket_oauth::OAuthStore>>,
    portal_store: Option<Arc<dyn docket_portal::PortalStore>>,
    oversight: Option<Arc<dyn docket_task::oversight::Oversight>>,
    features: crate::features::Features,
    prompt_library: Option<Arc<dyn docket_catalog::PromptLibrary>>,
    change_feed: Option<Arc<dyn docket_catalog::ChangeFeed>>,
    schedule_clock: Arc<dyn docket_run_bridge::clock::Clock>,
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
            links: None,
            spools: None,
            scripts: None,
            retention: None,
            script_isolation: Isolation::InProcess,
            task_sources: Vec::new(),
            sessions: None,
            principals: None,
            oauth_store: None,
            portal_store: None,
            oversight: None,
            features: crate::features::Features::default(),
            prompt_library: None,
            change_feed: None,
            schedule_clock: Arc::new(docket_run_bridge::clock::SystemClock),
        }
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

    /// Registers a resource at a fixed URI, read by `reader`. Resources (and
    /// `resources/*`) are offered once one is registered.
    ///
    /// # Errors
    /// [`RegistryError::Duplicate`] when the URI is taken.
    pub fn resource(
        mut self,
        spec: crate::ResourceSpec,
        reader: impl crate::ResourceReader,
    ) -> Result<Self, RegistryError> {
        self.features.add_resource(spec, reader)?;
        Ok(self)
    }

    /// Registers the resources a URI template names (`{name}` variables), read by
    /// `reader` with the variables the URI gave.
    ///
    /// # Errors
    /// [`RegistryError::BadName`] for a malformed template, [`RegistryError::Duplicate`]
    /// when it is taken.
    pub fn resource_template(
        mut self,
        spec: crate::ResourceTemplateSpec,
        reader: impl crate::ResourceReader,
    ) -> Result<Self, RegistryError> {
        self.features.add_template(spec, reader)?;
        Ok(self)
    }

    /// Registers a prompt. Prompts (and `prompts/*`, and completions for their
    /// arguments) are offered once one is registered.
    ///
    /// # Errors
    /// [`RegistryError::Duplicate`] when the name is taken.
    pub fn prompt(
        mut self,
        spec: crate::PromptSpec,
        handler: impl crate::PromptHandler,
    ) -> Result<Self, RegistryError> {
        self.features.add_prompt(spec, handler)?;
        Ok(self)
    }

    /// Registers what suggests values for a prompt's arguments or a resource
    /// template's variables (`completion/complete`).
    pub fn completion(
        mut self,
        reference: docket_protocol::completion::CompletionReference,
        provider: impl crate::CompletionProvider,
    ) -> Self {
        self.features.add_completion(reference, provider);
        self
    }

    /// Where changes to the prompt library and to assets are announced to every
    /// replica (`docket_storage::Store::change_feed`: NOTIFY on PostgreSQL), so
    /// listen streams anywhere say `list_changed`; without one, to this process only.
    pub fn change_feed(mut self, feed: Arc<dyn docket_catalog::ChangeFeed>) -> Self {
        self.change_feed = Some(feed);
        self
    }

    /// The prompt library's store. With it, `manage_prompt` keeps the team's prompts,
    /// they are offered as MCP prompts to those they are shared with, and the
    /// built-in prompts for common data work come with them.
    pub fn prompt_library(mut self, library: Arc<dyn docket_catalog::PromptLibrary>) -> Self {
        self.prompt_library = Some(library);
        self
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

    /// Where the keys that sign asset download links and the shares of assets
    /// (`share_asset`) are kept. Give the database's
    /// (`docket_storage::Store::link_store`) so every replica signs and verifies
    /// with the same keys and opens the same shares; without one they are kept
    /// in this process's memory.
    pub fn links(mut self, store: Arc<dyn docket_catalog::LinkStore>) -> Self {
        self.links = Some(store);
        self
    }

    /// Where the rest of a cut answer is kept for its cursor (issue 39): with it
    /// and [`AppBuilder::assets`] (whose object store holds the rows), an answer
    /// cut at its row limit or byte budget carries a cursor that reads on, on any
    /// replica sharing both. Give the database's
    /// (`docket_storage::Store::spool_store`).
    pub fn spools(mut self, store: Arc<dyn docket_catalog::SpoolStore>) -> Self {
        self.spools = Some(store);
        self
    }

    /// The store for managed scripts and their runs. With it (and a task store
    /// for audit rows) the script tools are offered and this replica runs
    /// `scripts.worker.concurrency` run workers.
    pub fn scripts(mut self, store: Arc<dyn ScriptStore>) -> Self {
        self.scripts = Some(store);
        self
    }

    /// The store the retention pass deletes audit rows, call records and assets
    /// from ([`App::delete_expired`]; `docket serve` runs it hourly).
    pub fn retention(mut self, retention: Arc<dyn docket_catalog::retention::Retention>) -> Self {
        self.retention = Some(retention);
        self
    }

    /// Where the sessions of the earlier protocol era (clients that open with
    /// `initialize`) are kept. Give the database's
    /// (`docket_storage::Store::session_store`) when several replicas serve one
    /// endpoint, so any replica serves any session; without one they are kept in
    /// this process's memory.
    pub fn sessions(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.sessions = Some(store);
        self
    }

    /// The principal directory: what each caller who signs in with an OIDC token
    /// was last seen with (their verified claims, remembered at most hourly while
    /// unchanged), so their script runs, scheduled ones too, act upstream as them
    /// by any claim (`impersonation: { user_claim: email }`). Give the database's
    /// (`docket_storage::Store::principal_store`) so it outlives a restart and
    /// every replica reads it; without one it is kept in this process's memory.
    pub fn principals(mut self, store: Arc<dyn docket_catalog::PrincipalStore>) -> Self {
        self.principals = Some(store);
        self
    }

    /// Where Docket's own authorization server (`auth.oauth_server`) keeps its
    /// clients, logins in flight, refresh tokens, consents and signing keys. Give
    /// the database's (`docket_storage::Store::oauth_store`) so every replica
    /// serves every step of a login and keys outlive a restart; without one they
    /// are kept in this process's memory.
    pub fn oauth_store(mut self, store: Arc<dyn docket_oauth::OAuthStore>) -> Self {
        self.oauth_store = Some(store);
        self
    }

    /// Where the portal (`portal.enabled`) keeps its logins in flight and its
    /// sessions. Give the database's (`docket_storage::Store::portal_store`)
    /// so every replica serves every request of a session; without one they
    /// are kept in this process's memory.
    pub fn portal_store(mut self, store: Arc<dyn docket_portal::PortalStore>) -> Self {
        self.portal_store = Some(store);
        self
    }

    /// Where administrators' portal pages read the audit log and the
    /// replicas (`docket_storage::Store::oversight`); without one those
    /// pages say there is none.
    pub fn oversight(mut self, store: Arc<dyn docket_task::oversight::Oversight>) -> Self {
        self.oversight = Some(store);
        self
    }

    /// Registers where `tasks/*` also looks task ids up, for a tool whose
    /// [`ToolHandler::start_own_task`] answers its own task records (as `run_script`
    /// does for runs). The task table is always read; every source is read for every
    /// id, at once, so an id's existence cannot be told apart by timing.
    pub fn task_source(mut self, source: Arc<dyn TaskSource>) -> Self {
        self.task_sources.push(source);
        self
    }

    /// Where runs and drafts are evaluated. The default, [`Isolation::InProcess`], is for tests
    /// and trusted scripts only: a script can abort the process it runs in. `docket serve` runs
    /// every script in a child process ([`Isolation::Child`]: itself, with its hidden
    /// `script-child` subcommand).
    pub fn script_isolation(mut self, isolation: Isolation) -> Self {
        self.script_isolation = isolation;
        self
    }

    /// The clock the script scheduler reads and sleeps on: the system's by
    /// default; tests pass a [`ManualClock`](docket_run_bridge::clock::ManualClock)
    /// to fire an hour of schedules without waiting for it.
    pub fn schedule_clock(mut self, clock: Arc<dyn docket_run_bridge::clock::Clock>) -> Self {
        self.schedule_clock = clock;
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
            links,
            spools,
            scripts,
            retention,
            script_isolation,
            task_sources,
            sessions,
            principals,
            oauth_store,
            portal_store,
            oversight,
            mut features,
            prompt_library,
            change_feed,
            schedule_clock,
        } = self;
        let change_feed = change_feed.unwrap_or_else(|| {
            Arc::new(docket_catalog::memory::MemoryChangeFeed::new())
                as Arc<dyn docket_catalog::ChangeFeed>
        });
        let (changes, _) = tokio::sync::broadcast::channel(CHANGES_BUFFER);
        let heard = changes.clone();
        change_feed.set_change_listener(Arc::new(move |change| {
            let _ = heard.send(change);
        }));
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(crate::config::ConfigError { problems }.into());
        }
        let trino_connections = crate::connections::trino_connections(&config.connections)
            .map_err(|problems| crate::config::ConfigError { problems })?;
        let http_connections = crate::connections::http_connections(&config.connections)
            .map_err(|problems| crate::config::ConfigError { problems })?;
        let catalogs = {
            let named: Vec<crate::catalogs::Named<'_>> = http_connections
                .iter()
                .filter(|connection| !connection.openapi.is_empty())
                .map(|connection| crate::catalogs::Named {
                    connection: &connection.name,
                    entries: &connection.openapi,
                    client: &connection.client,
                })
                .collect();
            Arc::new(
                crate::catalogs::Catalogs::load(&config.catalogs, &named)
                    .map_err(|problems| crate::config::ConfigError { problems })?,
            )
        };
        // When each connection's client certificate expires: a metric, and in
        // platform_info for administrators.
        let certificates: Vec<(String, time::OffsetDateTime)> = http_connections
            .iter()
            .filter_map(|connection| {
                connection
                    .client
                    .certificate_expires()
                    .map(|expires| (connection.name.clone(), expires))
            })
            .collect();
        let assets = assets.map(|parts| Assets {
            store: parts.store,
            calls: parts.calls,
            sink: parts.sink,
            links: Arc::new(crate::links::Links::new(
                links.unwrap_or_else(|| {
                    Arc::new(docket_catalog::memory::MemoryLinks::new())
                        as Arc<dyn docket_catalog::LinkStore>
                }),
                &config.storage,
                config.server.base_url(),
            )),
            changes: Arc::clone(&change_feed),
            record_patience: config.tasks.stale_after,
        });
        if let Some(assets) = &assets {
            let resources = Arc::new(crate::asset_resources::AssetResources {
                assets: assets.clone(),
                max_read_bytes: config.server.max_resource_read_bytes,
            });
            let reader = Arc::clone(&resources);
            features.add_template(
                crate::asset_resources::template_spec(),
                move |read: crate::ResourceRead| {
                    let reader = Arc::clone(&reader);
                    async move { reader.read(read).await }
                },
            )?;
            features.set_lister(resources);
            // The asset template's `id`: the caller's own asset ids, newest first.
            let store = Arc::clone(&assets.store);
            features.add_completion(
                docket_protocol::completion::CompletionReference::Resource {
                    uri: crate::asset_resources::ASSET_TEMPLATE.to_owned(),
                },
                move |request: crate::CompletionRequest| {
                    let store = Arc::clone(&store);
                    async move {
                        let owned = store
                            .list(Some(&request.identity.subject), 200, None)
                            .await
                            .unwrap_or_default();
                        owned
                            .into_iter()
                            .map(|asset| asset.id)
                            .filter(|id| id.starts_with(request.value.as_str()))
                            .collect()
                    }
                },
            );
        }
        features.set_completion_timeout(config.server.completion_timeout);
        // One budget per caller for everything that costs: tool calls, the reads
        // that cost, and the statements a completion sends Trino.
        let rate_limiter = Arc::new(RateLimiter::new(&config.rate_limit));
        if let Some(library) = prompt_library {
            features.set_library(Arc::clone(&library))?;
            // The built-in prompts' and the library prompts' arguments, completed by
            // what their names say they hold: connections, formats, Trino names,
            // scripts.
            let completions = Arc::new(crate::completions::PlatformCompletions::new(
                trino_connections.clone(),
                docket_export::format::Format::available()
                    .map(|format| format.as_str().to_owned())
                    .collect(),
                scripts
                    .as_ref()
                    .filter(|_| config.scripts.enabled && store.is_some())
                    .map(Arc::clone),
                Arc::clone(&rate_limiter),
            ));
            for (prompt, script_argument) in crate::features::BUILT_IN_PROMPTS {
                let completions = Arc::clone(&completions);
                features.add_completion(
                    docket_protocol::completion::CompletionReference::Prompt {
                        name: (*prompt).to_owned(),
                    },
                    move |request: crate::CompletionRequest| {
                        let completions = Arc::clone(&completions);
                        async move { completions.suggest(&request, *script_argument).await }
                    },
                );
            }
            features.set_library_completion(move |request: crate::CompletionRequest| {
                let completions = Arc::clone(&completions);
                async move { completions.suggest(&request, None).await }
            });
            let reserved = features.registered_prompt_names();
            tools::prompts::register(
                &mut registry,
                Arc::new(tools::prompts::PromptDeps {
                    library,
                    reserved,
                    changes: Arc::clone(&change_feed),
                    max_per_owner: config.server.max_prompts_per_owner,
                }),
            )?;
        }
        let sessions = sessions.unwrap_or_else(|| {
            Arc::new(docket_catalog::memory::MemorySessions::new()) as Arc<dyn SessionStore>
        });
        let principals = crate::state::Principals::new(principals.unwrap_or_else(|| {
            Arc::new(docket_catalog::memory::MemoryPrincipals::new())
                as Arc<dyn docket_catalog::PrincipalStore>
        }));
        // Continuation needs both: the spool's row, and the object store its rows go to.
        let continuation = spools.zip(assets.as_ref()).map(|(spools, assets)| {
            Arc::new(crate::continuation::Continuation::new(
                spools,
                Arc::clone(&assets.sink),
                config.results.clone(),
                config.exports.clone(),
                config.tasks.stale_after,
            ))
        });
        let tool_names = Arc::new(OnceLock::new());
        tools::register_platform_tools(
            &mut registry,
            &config,
            Arc::clone(&tool_names),
            store.is_some() && config.tasks.enabled,
            tools::Connections {
                trino: trino_connections,
                http: http_connections,
                catalogs,
            },
            tools::Stores {
                assets: assets.clone(),
                sessions: Arc::clone(&sessions),
                continuation: continuation.clone(),
            },
        )?;
        // The results view is served when a tool shows its results in it.
        if registry
            .iter()
            .any(|tool| tool.spec.ui_resource.as_deref() == Some(crate::apps::RESULTS_VIEW_URI))
        {
            features.add_resource(
                crate::apps::results_view_spec(),
                crate::apps::read_results_view,
            )?;
        }
        let mut authenticator = Authenticator::new(&config.auth)?;
        let personas = Personas::new(&config.personas, &config.admin);
        let holds = crate::holds::Holds::new(
            config.server.max_connections,
            config.server.max_connection_share_percent,
            config.server.max_streams_per_identity,
        );
        let state_key = match &config.server.request_state_secret {
            Some(secret) => RequestStateKey::from_secret(secret),
            None => RequestStateKey::random().map_err(|err| BuildError::Random(err.to_string()))?,
        };
        // Unique per process even when a name is configured: a task is as alive
        // as its replica's row, so a restarted process must never beat for its
        // predecessor's orphaned tasks.
        let mut suffix = [0u8; 4];
        getrandom::fill(&mut suffix).map_err(|err| BuildError::Random(err.to_string()))?;
        let name = match config.server.replica_id.as_str() {
            "" => "replica",
            name => name,
        };
        let replica_id = format!("{name}-{}", hex::encode(suffix));
        let mut tasks = match &store {
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
                        ending_grace: config.server.shutdown.ending_grace,
                    },
                );
                // A beat's span links to the traces of the tasks it stamps.
                runtime.link_traces_with(crate::telemetry::link_to);
                // The sweep's record of a stale task is a span of that task's trace.
                runtime.join_traces_with(crate::telemetry::parent_on);
                let call_tasks = Arc::new(CallTasks {
                    runtime: Arc::clone(&runtime),
                });
                Some(Tasks {
                    runtime,
                    sources: std::iter::once(call_tasks as Arc<dyn TaskSource>)
                        .chain(task_sources)
                        .collect(),
                    retention: Duration::from_secs(u64::from(config.tasks.retention_days) * 86_400),
                    poll_interval_ms: config.tasks.poll_interval_ms,
                    stale_after: config.tasks.stale_after,
                })
            }
            _ => None,
        };
        let has_store = store.is_some();
        // Rows are tried again while the store is away, and a shutdown waits for
        // them. Nothing lives on an audit row's retry, so it waits longer than an
        // ending does (ten times `tasks.stale_after`), its memory bounded by the
        // writer's cap on pending rows.
        let audit = store
            .filter(|_| config.audit.enabled)
            .map(|store| Arc::new(AuditWriter::new(store, config.tasks.stale_after * 10)));
        if let Some(server_config) = &config.auth.oauth_server {
            let base = config.server.base_url();
            let site = docket_oauth::Site {
                resource: format!("{base}{}", crate::http::MCP_PATH),
                issuer: base,
            };
            let store = oauth_store.unwrap_or_else(|| {
                Arc::new(docket_oauth::memory::MemoryStore::new())
                    as Arc<dyn docket_oauth::OAuthStore>
            });
            let events = Arc::new(crate::oauth::AuditEvents {
                writer: audit.clone(),
            });
            // The portal logs in as a client of this server.
            let with_portal =
                crate::portal::with_portal_client(server_config, &config.portal, &site.issuer);
            let server = docket_oauth::AuthorizationServer::new(with_portal, site, store, events)
                .map_err(|error| AuthError::Config(error.to_string()))?;
            authenticator = authenticator
                .with_authorization_server(Arc::new(server), &server_config.role_claim);
        }
        let app_cell = Arc::new(OnceLock::new());
        let run_bridge = match scripts {
            Some(script_store) if config.scripts.enabled && has_store => {
                if script_isolation == Isolation::InProcess {
                    tracing::warn!(
                        "scripts are evaluated inside the server process: a script can crash it"
                    );
                }
                let deps = script_tools(
                    &config,
                    script_store,
                    audit.clone(),
                    &replica_id,
                    &app_cell,
                    script_isolation,
                    schedule_clock,
                );
                tools::scripts::register(&mut registry, Arc::clone(&deps))?;
                // A run is its own task: `tasks/*` finds run ids in `script_runs`.
                if let Some(tasks) = &mut tasks {
                    tasks.sources.push(Arc::new(RunTasks {
                        store: Arc::clone(&deps.store),
                        bridge: Arc::clone(&deps.bridge),
                        run_retention: deps.run_retention,
                        poll_interval_ms: deps.poll_interval_ms,
                    }));
                }
                Some(Arc::clone(&deps.bridge))
            }
            _ => None,
        };
        // platform_info lists every tool, those registered after it included; the
        // metrics count exactly these by name.
        let names: Vec<String> = registry.iter().map(|tool| tool.spec.name.clone()).collect();
        let metrics = Metrics::default();
        for (connection, expires) in &certificates {
            metrics.record_certificate_expiry(connection, *expires);
        }
        metrics.set_known_tools(names.iter().cloned());
        let _ = tool_names.set(names);
        let server_info = Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION"));
        // Strings only: encoding cannot fail.
        let server_info_json = serde_json::to_value(&server_info).unwrap_or_default();
        let answer_waiters = Arc::new(crate::answers::AnswerWaiters::default());
        sessions.set_answer_listener(answer_waiters.listener());
        let portal = crate::portal::build(&config, portal_store, oversight);
        let state = AppState {
            portal,
            sessions,
            principals,
            answer_waiters,
            features,
            changes,
            server_info,
            server_info_json,
            config,
            registry,
            authenticator,
            personas,
            rate_limiter,
            holds,
            state_key,
            metrics,
            draining: AtomicBool::new(false),
            closing: tokio_util::sync::CancellationToken::new(),
            background_started: AtomicBool::new(false),
            sse_keepalive,
            tasks,
            audit,
            replica_id,
            assets,
            retention,
            continuation,
            run_bridge,
        };
        let state = Arc::new(state);
        // Runs and drafts reach the pipeline through this; it never keeps the
        // app alive.
        let _ = app_cell.set(Arc::downgrade(&state));
        Ok(App { state })
    }
}

/// The script tools' dependencies: the run bridge over `store`, whose runner
/// runs each run's version in the sandbox with a host that sends every
/// `platform.*` call through this app's pipeline as `script:<name>` with the
/// roles its version's author held.
/// What a script run knows of its owner for acting upstream on their behalf
/// when it starts: an API key's entry as configured now, or an OIDC owner's
/// `sub`. An OIDC owner's claims as last seen when they signed in replace the
/// `sub` before the run's first tool call ([`ScriptHost`] reads the principal
/// directory then); a run never has its owner's token.
fn owner_attributes(api_keys: &[crate::auth::ApiKeyConfig], owner: &str) -> Attributes {
    if let Some(name) = owner.strip_prefix("apikey:") {
        return api_keys
            .iter()
            .find(|key| key.name == name)
            .map(|key| Attributes {
                claims: Arc::new(crate::auth::key_claims(key)),
                key_user: key.user.clone(),
                token: None,
            })
            .unwrap_or_default();
    }
    let mut claims = serde_json::Map::new();
    if let Some(sub) = owner.strip_prefix("oidc:") {
        claims.insert("sub".into(), sub.into());
    }
    Attributes {
        claims: Arc::new(claims),
        key_user: None,
        token: None,
    }
}

fn script_tools(
    config: &Config,
    store: Arc<dyn ScriptStore>,
    audit: Option<Arc<AuditWriter>>,
    replica_id: &str,
    app_cell: &Arc<OnceLock<std::sync::Weak<AppState>>>,
    isolation: Isolation,
    schedule_clock: Arc<dyn docket_run_bridge::clock::Clock>,
) -> Arc<ScriptTools> {
    let settings = &config.scripts;
    let run_limits = Limits {
        max_steps: settings.max_steps,
        wall_time: settings.timeout,
        ..Limits::run()
    };
    let cell = Arc::clone(app_cell);
    let api_keys = config.auth.api_keys.clone();
    let host_for = move |run: &Run, _version: &ScriptVersion, roles: &[String]| {
        // A run acts as its script (by id, so two owners' same-named scripts
        // share nothing), with the roles of its source's author that its owner
        // still holds, on behalf of the script's owner.
        let identity = Identity {
            subject: format!("script:{}", run.script_id),
            display_name: format!("script:{}/{}", run.script_owner, run.script_name),
            email: None,
            roles: roles.to_vec(),
            kind: IdentityKind::Script,
            run: Some(RunIdentity {
                run_id: run.id.clone(),
                owner: run.script_owner.clone(),
                scheduled: run.trigger == RunTrigger::Schedule,
            }),
            attributes: owner_attributes(&api_keys, &run.script_owner),
        };
        Arc::new(ScriptHost::new(
            cell.get().cloned().unwrap_or_default(),
            Arc::new(identity),
            run.id.clone(),
        )) as Arc<dyn docket_script::Host>
    };
    let owners =
        ConfiguredOwners::new(&config.auth, Personas::new(&config.personas, &config.admin));
    let runner = SandboxRunner::new(run_limits, isolation.clone(), host_for)
        .checking_owners(move |owner| owners.access(owner));
    let run_retention = Duration::from_secs(u64::from(settings.run_retention_days) * 86_400);
    let bridge = RunBridge::with_clock(
        Arc::clone(&store),
        audit,
        Arc::new(runner),
        BridgeConfig {
            workers: if settings.worker.enabled {
                settings.worker.concurrency
            } else {
                0
            },
            lease: settings.lease,
            heartbeat_interval: settings.heartbeat_interval,
            max_platform_retries: settings.max_platform_retries,
            max_reclaims: settings.max_reclaims,
            max_running_per_owner: settings.worker.running_share(),
            run_retention,
            schedule_interval: settings
                .schedules
                .enabled
                .then_some(settings.schedules.interval),
            ending_grace: config.server.shutdown.ending_grace,
            ..BridgeConfig::new(replica_id)
        },
        schedule_clock,
    );
    // A run's span continues the trace it was queued in, on whichever replica runs it.
    bridge.join_traces_with(crate::telemetry::join_run_trace);
    Arc::new(ScriptTools {
        store,
        bridge,
        app: Arc::clone(app_cell),
        default_wait: settings.default_wait,
        run_limits,
        isolation,
        run_retention,
        poll_interval_ms: config.tasks.poll_interval_ms,
        draft_slots: tokio::sync::Semaphore::new(crate::tools::scripts::DRAFT_SLOTS),
        max_per_owner: settings.max_per_owner,
        max_schedules_per_owner: settings.max_schedules_per_owner,
    })
}
