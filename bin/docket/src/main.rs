//! The `docket` command line: `serve`, `check-config`.
//!
//! This is the only place that reads environment variables, installs signal
//! handlers and binds sockets; everything else lives in `docket_server`.

mod call;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use docket_server::config::{LogFormat, redact_url};
use docket_server::object_sink;
use docket_server::{App, Config};

/// Docket: an MCP server for data work.
#[derive(Parser)]
#[command(name = "docket", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve MCP at http://<server.address>/mcp until SIGINT or SIGTERM.
    Serve {
        /// The YAML configuration file; without it the embedded defaults apply
        /// (loopback only, anonymous callers are administrators, SQLite under
        /// ./docket-data/).
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Listen here instead of `server.address` (for example 127.0.0.1:0).
        #[arg(long)]
        address: Option<std::net::SocketAddr>,
    },
    /// Apply the database migrations and exit.
    Migrate {
        /// The YAML configuration file; without it, the embedded default database.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Call a tool on a running server; follow it to its end if it becomes a task.
    Call {
        /// The tool to call.
        tool: String,
        /// An argument as key=value (repeatable); values that parse as JSON are JSON.
        #[arg(long = "arg", value_name = "KEY=VALUE")]
        args: Vec<String>,
        /// The MCP endpoint.
        #[arg(long, default_value = "http://127.0.0.1:8080/mcp")]
        url: String,
        /// An API key, sent as a bearer token.
        #[arg(long, env = "DOCKET_API_KEY", hide_env_values = true)]
        api_key: Option<String>,
        /// Follow a task to its end (Ctrl-C cancels it).
        #[arg(long)]
        follow: bool,
        /// Print raw JSON results, for scripts.
        #[arg(long)]
        json: bool,
    },
    /// Check a configuration file and report every problem in it.
    CheckConfig {
        /// The YAML configuration file.
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Evaluate one script run handed over on standard input (the server starts this; it is
    /// not for people).
    #[command(hide = true)]
    ScriptChild,
}

/// The subcommand a server starts its script children with.
const SCRIPT_CHILD: &str = "script-child";

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { config, address } => serve(config.as_deref(), address),
        Command::Migrate { config } => migrate(config.as_deref()),
        Command::CheckConfig { config } => check_config(&config),
        Command::ScriptChild => return docket_server::script_child::serve(),
        Command::Call {
            tool,
            args,
            url,
            api_key,
            follow,
            json,
        } => {
            let args = call::CallArgs {
                tool,
                args,
                url,
                api_key,
                follow,
                json,
            };
            match runtime().and_then(|runtime| runtime.block_on(call::run(args))) {
                Ok(true) => Ok(()),
                Ok(false) => return ExitCode::from(1),
                Err(err) => Err(err),
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("docket: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn load_config(path: Option<&Path>) -> anyhow::Result<Config> {
    let Some(path) = path else {
        return Ok(Config::embedded_default());
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let config = Config::from_yaml(&text, &|name| std::env::var(name).ok())
        .with_context(|| format!("invalid configuration in {}", path.display()))?;
    Ok(config)
}

fn check_config(path: &Path) -> anyhow::Result<()> {
    load_config(Some(path))?;
    println!("{}: ok", path.display());
    Ok(())
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")
}

fn migrate(path: Option<&Path>) -> anyhow::Result<()> {
    let config = load_config(path)?;
    let Some(url) = config.database.url.clone() else {
        anyhow::bail!("no database is configured (database.url)");
    };
    runtime()?.block_on(async move {
        let telemetry = init_telemetry(&config)?;
        let migrated = docket_storage::migrate(&url)
            .await
            .context("migration failed");
        telemetry.shutdown().await;
        migrated?;
        println!("{}: migrations applied", redact_url(&url));
        Ok(())
    })
}

fn serve(path: Option<&Path>, address: Option<std::net::SocketAddr>) -> anyhow::Result<()> {
    let mut config = load_config(path)?;
    if let Some(address) = address {
        config.server.address = address;
        let problems = config.problems();
        if !problems.is_empty() {
            return Err(docket_server::config::ConfigError { problems }.into());
        }
    }
    runtime()?.block_on(async move {
        // Log lines, and traces and metrics over OTLP when telemetry.otlp is set;
        // started inside the runtime, which the exporter runs on.
        let telemetry = init_telemetry(&config)?;
        let served = serve_app(config).await;
        // The last spans and metrics leave after the server stopped (a collector that
        // is down costs a few seconds at most).
        telemetry.shutdown().await;
        served
    })
}

async fn serve_app(config: docket_server::Config) -> anyhow::Result<()> {
    {
        let address = config.server.address;
        // Every script runs in a child process: this binary, started again with its hidden
        // subcommand, so a script can never take the server down.
        // `/proc/self/exe` names this very binary even after an upgrade replaced the file
        // on disk, so runs keep starting until the server restarts onto the new one.
        let program = match std::path::Path::new("/proc/self/exe") {
            proc if proc.exists() => proc.to_path_buf(),
            _ => {
                std::env::current_exe().context("cannot find the docket binary for script runs")?
            }
        };
        let mut builder =
            App::builder(config.clone()).script_isolation(docket_server::Isolation::Child(
                // As many children started ahead as runs can evaluate at once, so a claimed
                // run does not wait for its process to start.
                docket_server::ChildProcess::new(program, [SCRIPT_CHILD])
                    .warm(config.scripts.worker.concurrency),
            ));
        if let Some(url) = &config.database.url {
            let options = docket_storage::ConnectOptions {
                max_connections: usize::try_from(config.database.max_connections).unwrap_or(16),
                migrate: config.database.migrate_on_start,
            };
            let store = connect_waiting(url, options, config.database.start_timeout).await?;
            tracing::info!(database = %redact_url(url), backend = ?store.backend(), "database ready");
            remove_stale_uploads(&config.storage).await;
            builder = builder
                .task_store(store.task_store())
                .sessions(store.session_store())
                .principals(store.principal_store())
                .links(store.link_store())
                .spools(store.spool_store())
                .oauth_store(store.oauth_store())
                .portal_store(store.portal_store())
                .oversight(store.oversight())
                .prompt_library(store.prompt_library())
                .change_feed(store.change_feed())
                .scripts(store.script_store())
                .retention(store.retention())
                .assets(
                    store.asset_store(),
                    Some(store.call_catalog()),
                    object_sink(&config.storage).context("cannot set up the asset store")?,
                );
        }
        let app = builder.build().context("cannot start the server")?;
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen on {address}"))?;
        let local = listener
            .local_addr()
            .context("cannot read the bound address")?;
        tracing::info!(
            url = %format!("http://{local}{}", docket_server::MCP_PATH),
            replica = app.replica_id(),
            tasks = app.tasks_enabled(),
            "docket is serving"
        );
        docket_server::serve(listener, app, shutdown_signal())
            .await
            .context("the server stopped with an error")?;
        tracing::info!("docket stopped");
        Ok(())
    }
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => tracing::info!("received SIGINT"),
        () = terminate => tracing::info!("received SIGTERM"),
    }
}

/// Installs the process's tracing: log lines on stderr in `logging.format`, filtered by
/// `DOCKET_LOG` when it holds a valid filter, else by `logging.level`, each with the
/// active span's `trace_id` and `span_id`; and, with `telemetry.otlp`, spans and the MCP
/// metrics exported over OTLP. Must run inside the tokio runtime.
fn init_telemetry(config: &docket_server::Config) -> anyhow::Result<docket_telemetry::Telemetry> {
    let filter = std::env::var("DOCKET_LOG")
        .ok()
        .filter(|filter| tracing_subscriber::EnvFilter::try_new(filter).is_ok())
        .unwrap_or_else(|| config.logging.level.clone());
    let format = match config.logging.format {
        LogFormat::Json => docket_telemetry::LogFormat::Json,
        LogFormat::Pretty => docket_telemetry::LogFormat::Text,
    };
    let (dispatch, telemetry) =
        docket_telemetry::Telemetry::build(&config.telemetry, format, &filter, std::io::stderr)
            .context("cannot start telemetry")?;
    tracing::dispatcher::set_global_default(dispatch)
        .context("cannot install the tracing subscriber")?;
    Ok(telemetry)
}

/// Removes what uploads of a filesystem store killed mid-export left behind.
async fn remove_stale_uploads(storage: &docket_server::config::StorageConfig) {
    match docket_server::config::remove_stale_uploads(storage).await {
        Ok(0) => {}
        Ok(removed) => tracing::info!(removed, path = storage.path, "removed unfinished uploads"),
        Err(error) => {
            tracing::warn!(%error, path = storage.path, "could not look for unfinished uploads");
        }
    }
}

/// The first wait between start-up attempts to reach the database; it doubles up
/// to [`LONGEST_CONNECT_WAIT`].
const FIRST_CONNECT_WAIT: Duration = Duration::from_millis(250);

/// The longest wait between start-up attempts to reach the database.
const LONGEST_CONNECT_WAIT: Duration = Duration::from_secs(5);

/// Opens the database, waiting up to `patience` for one that does not answer yet (a
/// database that starts after the server, or is briefly away), with a logged
/// attempt and a growing pause each time. A URL, folder or migration that fails
/// for any other reason fails at once.
async fn connect_waiting(
    url: &str,
    options: docket_storage::ConnectOptions,
    patience: Duration,
) -> anyhow::Result<docket_storage::Store> {
    let give_up_at = tokio::time::Instant::now() + patience;
    let mut wait = FIRST_CONNECT_WAIT;
    let mut attempt = 1u32;
    loop {
        match docket_storage::connect(url, options.clone()).await {
            Ok(store) => return Ok(store),
            Err(error)
                if error.is_unreachable() && tokio::time::Instant::now() + wait <= give_up_at =>
            {
                tracing::warn!(
                    database = %redact_url(url),
                    attempt,
                    retry_in = ?wait,
                    error = format!("{:#}", anyhow::Error::new(error)),
                    "the database does not answer yet; trying again (database.start_timeout)"
                );
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(LONGEST_CONNECT_WAIT);
                attempt += 1;
            }
            Err(error) => {
                return Err(anyhow::Error::new(error)).with_context(|| {
                    format!(
                        "cannot open the database {} (after {attempt} attempt(s); \
                         database.start_timeout is {:?})",
                        redact_url(url),
                        patience
                    )
                });
            }
        }
    }
}
