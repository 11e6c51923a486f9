//! `docket_fixture`: serves the conformance fixture for the MCP conformance suite.
//!
//! Usage: `docket_fixture [--listen ADDR]` (default `127.0.0.1:0`, a free port).
//! Once bound it prints exactly one line to stdout, `listening on http://ADDR/mcp`,
//! which the harness waits for; logs go to stderr (filter from `DOCKET_LOG`,
//! default `warn`). It serves until SIGINT or SIGTERM.
//!
//! Tasks are stored in the PostgreSQL database `DOCKET_TEST_DATABASE_URL` names
//! when it is set (as in CI), and otherwise in a temporary SQLite file that is
//! removed when the fixture stops. Serving from SQLite is said on stderr, since the
//! suite then checks less than it would on PostgreSQL, and with
//! `DOCKET_REQUIRE_POSTGRES=1` it is refused (docs/design.md, Testing).

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use docket_fixture::FixtureDatabase;

/// The address used without `--listen`: loopback, any free port.
const DEFAULT_LISTEN: &str = "127.0.0.1:0";

/// The variable naming the PostgreSQL database for tasks; the same one the
/// workspace's database tests use.
const DATABASE_URL_VAR: &str = "DOCKET_TEST_DATABASE_URL";

/// The variable that, set to `1`, makes serving without PostgreSQL an error.
const REQUIRE_POSTGRES_VAR: &str = "DOCKET_REQUIRE_POSTGRES";

const USAGE: &str =
    "usage: docket_fixture [--listen ADDR]   (default 127.0.0.1:0: a free loopback port)";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("docket_fixture: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let Some(listen) = parse_listen(std::env::args().skip(1))? else {
        println!("{USAGE}");
        return Ok(());
    };
    init_tracing();
    let database = match std::env::var(DATABASE_URL_VAR) {
        Ok(url) if !url.is_empty() => FixtureDatabase::Postgres(url),
        _ if std::env::var(REQUIRE_POSTGRES_VAR).is_ok_and(|value| value == "1") => {
            bail!(
                "{REQUIRE_POSTGRES_VAR}=1 but {DATABASE_URL_VAR} is not set: set it to the \
                 PostgreSQL database the fixture should keep its tasks in"
            );
        }
        _ => {
            eprintln!(
                "docket_fixture: WARNING: {DATABASE_URL_VAR} is not set, so tasks are kept in \
                 a temporary SQLite file, not PostgreSQL; set it (and \
                 {REQUIRE_POSTGRES_VAR}=1 to make its absence an error) to serve from \
                 PostgreSQL"
            );
            FixtureDatabase::TemporarySqlite {
                parent: std::env::temp_dir(),
            }
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(async move {
        let store = docket_fixture::fixture_store(database)
            .await
            .with_context(|| {
                format!("cannot open the task store (PostgreSQL when {DATABASE_URL_VAR} is set, else a temporary SQLite file)")
            })?;
        tracing::info!(backend = %store.backend(), "task store opened");
        let app = docket_fixture::fixture_app(store.task_store(), store.session_store())
            .context("cannot build the fixture")?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let local = listener
            .local_addr()
            .context("cannot read the bound address")?;
        // The harness reads this line to learn the port; flush so that it does not
        // sit in a buffer while stdout is a pipe.
        let mut stdout = std::io::stdout().lock();
        writeln!(
            stdout,
            "listening on http://{local}{}",
            docket_server::MCP_PATH
        )
        .and_then(|()| stdout.flush())
        .context("cannot write to stdout")?;
        drop(stdout);
        docket_server::serve(listener, app, shutdown_signal())
            .await
            .context("the server stopped with an error")?;
        tracing::info!("docket_fixture stopped");
        // Only now may a temporary SQLite database go.
        drop(store);
        Ok(())
    })
}

/// Reads `--listen ADDR` (or `--listen=ADDR`); `None` when help was asked for.
fn parse_listen(mut args: impl Iterator<Item = String>) -> anyhow::Result<Option<SocketAddr>> {
    let mut listen = DEFAULT_LISTEN.to_owned();
    while let Some(arg) = args.next() {
        if arg == "--listen" {
            listen = args
                .next()
                .context("--listen needs an address, for example 127.0.0.1:3000")?;
        } else if let Some(value) = arg.strip_prefix("--listen=") {
            value.clone_into(&mut listen);
        } else if arg == "--help" || arg == "-h" {
            return Ok(None);
        } else {
            bail!("unexpected argument {arg:?}; {USAGE}");
        }
    }
    let address = listen
        .parse()
        .with_context(|| format!("--listen {listen:?} is not an address such as 127.0.0.1:3000"))?;
    Ok(Some(address))
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("DOCKET_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> anyhow::Result<SocketAddr> {
        parse_listen(args.iter().map(|arg| (*arg).to_owned()))?.context("help was asked for")
    }

    #[test]
    fn listen_defaults_to_a_free_loopback_port() {
        assert_eq!(parse(&[]).expect("default").to_string(), "127.0.0.1:0");
    }

    #[test]
    fn listen_takes_an_address_in_either_spelling() {
        assert_eq!(
            parse(&["--listen", "127.0.0.1:3917"])
                .expect("parsed")
                .port(),
            3917
        );
        assert_eq!(
            parse(&["--listen=127.0.0.1:3918"]).expect("parsed").port(),
            3918
        );
    }

    #[test]
    fn unknown_arguments_and_bad_addresses_are_refused() {
        assert!(parse(&["--port", "3000"]).is_err());
        assert!(parse(&["--listen", "localhost"]).is_err());
        assert!(parse(&["--listen"]).is_err());
    }

    #[test]
    fn help_is_not_an_error() {
        let help = parse_listen(["--help".to_owned()].into_iter()).expect("help parses");
        assert!(help.is_none());
    }
}
