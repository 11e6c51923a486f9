//! The `docket` command line: `serve`, `check-config`.
//!
//! This is the only place that reads environment variables, installs signal
//! handlers and binds sockets; everything else lives in `docket_server`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use docket_server::config::LogFormat;
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
        /// (loopback only, anonymous callers are administrators).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Check a configuration file and report every problem in it.
    CheckConfig {
        /// The YAML configuration file.
        #[arg(long, short)]
        config: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { config } => serve(config.as_deref()),
        Command::CheckConfig { config } => check_config(&config),
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

fn serve(path: Option<&Path>) -> anyhow::Result<()> {
    let config = load_config(path)?;
    init_tracing(config.logging.format, &config.logging.level);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(async move {
        let address = config.server.address;
        let app = App::builder(config).build().context("cannot start the server")?;
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("cannot listen on {address}"))?;
        let local = listener.local_addr().context("cannot read the bound address")?;
        tracing::info!(url = %format!("http://{local}{}", docket_server::MCP_PATH), "docket is serving");
        docket_server::serve(listener, app, shutdown_signal()).await.context("the server stopped with an error")?;
        tracing::info!("docket stopped");
        Ok(())
    })
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

fn init_tracing(format: LogFormat, level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DOCKET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Pretty => builder.init(),
    }
}
