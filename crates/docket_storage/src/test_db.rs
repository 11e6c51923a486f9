//! Per-test databases, in the manner of crates.io's `crates_io_test_db`: every
//! test gets a database of its own, so suites run in parallel on one server.
//!
//! - [`TestDatabase::postgres`] creates a uniquely named schema on the
//!   [`PostgresServer`] it is given, migrates it, and hands out a URL whose
//!   connections see only that schema (`options=-csearch_path=<schema>`).
//!   Dropping the value drops the schema. When the server cannot be reached it
//!   returns `None` and the test returns at once, which libtest counts as passed;
//!   so that this never goes unnoticed (docs/design.md, Testing) it says so on the
//!   terminal, past libtest's output capture, once per test binary. When the server
//!   is [required](PostgresServer::required) (CI, and `cargo xtask test` when it
//!   found the server) it panics instead; when the harness says the PostgreSQL
//!   cases were [filtered out](PostgresServer::cases_filtered) (`cargo xtask test`
//!   when it found none) it panics too, because a test that reaches it there needs
//!   PostgreSQL without saying so in its name.
//! - [`TestDatabase::postgres_or_sqlite`] is for tests that hold on either backend:
//!   PostgreSQL when it answers, else SQLite, announced the same way.
//! - [`TestDatabase::sqlite`] creates a migrated SQLite file in a fresh temporary
//!   folder, removed on drop.
//!
//! Nothing here reads Docket's variables: a test harness builds its
//! [`PostgresServer`] with [`PostgresServer::from_lookup`], passing the lookup in (the
//! process environment, as `|name| std::env::var(name).ok()`), so the variables
//! are named once ([`DATABASE_URL_VAR`], [`REQUIRE_POSTGRES_VAR`]) and read only
//! by the harness. (SQLite files go in the OS temporary folder,
//! `std::env::temp_dir`, which follows `TMPDIR` as every program does.) This module (feature `testing`) panics on failure, as a test
//! harness should, and is not for production code.

use std::error::Error;
#[cfg(feature = "sqlite")]
use std::path::PathBuf;
use std::sync::Arc;
#[cfg(feature = "postgres")]
use std::sync::Once;
use std::time::Duration;

#[cfg(feature = "postgres")]
use diesel_async::SimpleAsyncConnection;
use docket_task::TaskStore;

use crate::url::Backend;
#[cfg(feature = "postgres")]
use crate::url::redact;
use crate::{ConnectOptions, Store};

/// The variable naming the PostgreSQL server tests use.
pub const DATABASE_URL_VAR: &str = "DOCKET_TEST_DATABASE_URL";

/// The variable that, set to `1`, makes an unreachable PostgreSQL a failure.
pub const REQUIRE_POSTGRES_VAR: &str = "DOCKET_REQUIRE_POSTGRES";

/// The variable `cargo xtask test` sets to `1` when it found no PostgreSQL and
/// filtered out the cases whose names contain `postgres`: a test that still asks
/// for PostgreSQL then fails, naming the rule its name breaks.
pub const POSTGRES_CASES_FILTERED_VAR: &str = "DOCKET_POSTGRES_CASES_FILTERED";

/// The server tests use when [`DATABASE_URL_VAR`] is not set.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// How long to wait for the server before deciding it is not there.
#[cfg(feature = "postgres")]
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections each store from [`TestDatabase::store`] may open: enough for the
/// suite's racing writers, few enough for many tests at once.
const TEST_POOL_SIZE: usize = 4;

/// A database of one test's own; dropping it removes it.
#[derive(Debug)]
pub struct TestDatabase {
    url: String,
    cleanup: Cleanup,
}

#[derive(Debug)]
enum Cleanup {
    /// Drop this schema through a connection to the server's URL.
    #[cfg(feature = "postgres")]
    Schema { server_url: String, schema: String },
    /// Remove this folder.
    #[cfg(feature = "sqlite")]
    Directory(PathBuf),
}

/// The PostgreSQL server test schemas are made on, and whether a test may skip
/// when it cannot be reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresServer {
    url: String,
    required: bool,
    cases_filtered: bool,
}

impl PostgresServer {
    /// The server at `url`; with `required`, an unreachable server fails the
    /// test instead of skipping it.
    pub fn new(url: impl Into<String>, required: bool) -> Self {
        Self {
            url: url.into(),
            required,
            cases_filtered: false,
        }
    }

    /// The server `lookup` names: [`DATABASE_URL_VAR`] (else
    /// [`DEFAULT_DATABASE_URL`]), required when [`REQUIRE_POSTGRES_VAR`] is `1`.
    /// `lookup` answers for a variable name, e.g. `|name| std::env::var(name).ok()`.
    /// [`POSTGRES_CASES_FILTERED_VAR`] set to `1` says the PostgreSQL cases were
    /// filtered out.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let flag = |name: &str| lookup(name).is_some_and(|value| value == "1");
        Self {
            url: lookup(DATABASE_URL_VAR).unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned()),
            required: flag(REQUIRE_POSTGRES_VAR),
            cases_filtered: flag(POSTGRES_CASES_FILTERED_VAR),
        }
    }

    /// Says that the harness filtered out the cases whose names contain
    /// `postgres`: a test that still asks for the server then fails.
    #[must_use]
    pub fn with_cases_filtered(mut self) -> Self {
        self.cases_filtered = true;
        self
    }

    /// Whether the harness filtered out the PostgreSQL cases.
    pub fn cases_filtered(&self) -> bool {
        self.cases_filtered
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether an unreachable server fails the test instead of skipping it.
    pub fn required(&self) -> bool {
        self.required
    }
}

impl TestDatabase {
    /// A fresh, migrated schema on the test PostgreSQL server, or `None` when the
    /// server cannot be reached (said on the terminal once per test binary).
    ///
    /// # Panics
    /// When the server cannot be reached and is [required](PostgresServer::required)
    /// or its cases were filtered out, or when the schema cannot be created or
    /// migrated.
    #[cfg(feature = "postgres")]
    pub async fn postgres(server: &PostgresServer) -> Option<Self> {
        let reason = match Self::try_postgres(server).await {
            Ok(database) => return Some(database),
            Err(reason) => reason,
        };
        if server.cases_filtered {
            panic!(
                "this test needs PostgreSQL, which is not reachable ({reason}); `cargo xtask \
                 test` filtered out the cases whose names contain `postgres`, and this one's \
                 name does not: put it in a `postgres` module or end its name with \
                 `_on_postgres`"
            );
        }
        static SKIPPING: Once = Once::new();
        announce_once(
            &SKIPPING,
            &format!(
                "PostgreSQL is not reachable ({reason}): the PostgreSQL cases of this test \
             binary return at once and are counted as passed although they did not run. \
             `cargo xtask test` filters them out instead; {REQUIRE_POSTGRES_VAR}=1 makes \
             this a failure."
            ),
        );
        None
    }

    /// A fresh PostgreSQL schema when the server answers, else a fresh SQLite
    /// file: for tests whose behaviour holds on either backend. Falling back is
    /// said on the terminal once per test binary.
    ///
    /// # Panics
    /// When the server cannot be reached and is [required](PostgresServer::required), or when
    /// the database cannot be created or migrated.
    #[cfg(all(feature = "postgres", feature = "sqlite"))]
    pub async fn postgres_or_sqlite(server: &PostgresServer) -> Self {
        match Self::try_postgres(server).await {
            Ok(database) => database,
            Err(reason) => {
                static FALLING_BACK: Once = Once::new();
                announce_once(
                    &FALLING_BACK,
                    &format!(
                        "PostgreSQL is not reachable ({reason}): the tests of this binary that \
                     hold on either backend run on SQLite instead. {REQUIRE_POSTGRES_VAR}=1 \
                     makes this a failure."
                    ),
                );
                Self::sqlite().await
            }
        }
    }

    /// A fresh schema, or why the server could not be reached.
    ///
    /// # Panics
    /// When the server cannot be reached and is [required](PostgresServer::required), or when
    /// the schema cannot be created or migrated.
    #[cfg(feature = "postgres")]
    async fn try_postgres(server: &PostgresServer) -> Result<Self, String> {
        let server_url = server.url.clone();
        let reason =
            match tokio::time::timeout(CONNECT_TIMEOUT, crate::pg::establish(server_url.clone()))
                .await
            {
                Ok(Ok(mut connection)) => {
                    let schema = format!("docket_test_{}", random_hex());
                    connection
                        .batch_execute(&format!("CREATE SCHEMA {schema}"))
                        .await
                        .unwrap_or_else(|error| {
                            panic!("could not create the test schema {schema}: {error}")
                        });
                    // From here on the schema exists; the value drops it even if
                    // migrating panics.
                    let database = Self {
                        url: with_search_path(&server_url, &schema),
                        cleanup: Cleanup::Schema { server_url, schema },
                    };
                    if let Err(error) = crate::migrate(&database.url).await {
                        panic!("could not migrate the test schema: {}", chain(&error));
                    }
                    return Ok(database);
                }
                Ok(Err(error)) => error.to_string(),
                Err(_) => format!("no answer within {CONNECT_TIMEOUT:?}"),
            };
        let required = server.required;
        let server = redact(&server_url);
        if required {
            panic!(
                "{REQUIRE_POSTGRES_VAR}=1 but PostgreSQL at {server} is not reachable: {reason} \
                 (`cargo xtask test` sets it when something answered on the server's port)"
            );
        }
        Err(format!("at {server}: {reason}"))
    }

    /// A fresh, migrated SQLite file in a new temporary folder.
    ///
    /// # Panics
    /// When the folder cannot be created or the file cannot be migrated.
    #[cfg(feature = "sqlite")]
    pub async fn sqlite() -> Self {
        let folder = std::env::temp_dir().join(format!("docket-test-{}", random_hex()));
        std::fs::create_dir_all(&folder).unwrap_or_else(|error| {
            panic!("could not create {}: {error}", folder.display());
        });
        let database = Self {
            url: format!("sqlite://{}", folder.join("docket.db").display()),
            cleanup: Cleanup::Directory(folder),
        };
        if let Err(error) = crate::migrate(&database.url).await {
            panic!("could not migrate the test database: {}", chain(&error));
        }
        database
    }

    /// The URL to connect to (for PostgreSQL it selects the test's schema).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The URL with its server's `host:port` replaced by `proxy`'s address, so
    /// connections go through the proxy. `None` for SQLite, which has no server.
    #[must_use]
    pub fn url_through(&self, proxy: &FaultProxy) -> Option<String> {
        let (scheme, rest) = self.url.split_once("://")?;
        let (credentials, rest) = rest.rsplit_once('@').map_or(("", rest), |(c, r)| (c, r));
        let path_at = rest.find(['/', '?']).unwrap_or(rest.len());
        let at = if credentials.is_empty() { "" } else { "@" };
        (self.backend() == Backend::Postgres).then(|| {
            format!(
                "{scheme}://{credentials}{at}{}{}",
                proxy.addr(),
                &rest[path_at..]
            )
        })
    }

    /// The `host:port` of its server, for a [`FaultProxy`] to forward to. `None` for
    /// SQLite.
    #[must_use]
    pub fn server_authority(&self) -> Option<String> {
        let (_, rest) = self.url.split_once("://")?;
        let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        (self.backend() == Backend::Postgres).then(|| rest[..end].to_owned())
    }

    /// Which backend it is.
    pub fn backend(&self) -> Backend {
        match self.cleanup {
            #[cfg(feature = "postgres")]
            Cleanup::Schema { .. } => Backend::Postgres,
            #[cfg(feature = "sqlite")]
            Cleanup::Directory(_) => Backend::Sqlite,
        }
    }

    /// A store on this database, with a pool of its own.
    ///
    /// # Panics
    /// When the database cannot be connected to.
    pub async fn connect(&self) -> Store {
        let options = ConnectOptions {
            max_connections: TEST_POOL_SIZE,
            migrate: false,
        };
        crate::connect(&self.url, options)
            .await
            .unwrap_or_else(|error| {
                panic!("could not connect to the test database: {}", chain(&error))
            })
    }

    /// [`TestDatabase::connect`] as the task machinery uses it.
    ///
    /// # Panics
    /// When the database cannot be connected to.
    pub async fn store(&self) -> Arc<dyn TaskStore> {
        self.connect().await.task_store()
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        match &self.cleanup {
            #[cfg(feature = "postgres")]
            Cleanup::Schema { server_url, schema } => drop_schema(server_url, schema),
            #[cfg(feature = "sqlite")]
            Cleanup::Directory(folder) => {
                // Best effort: a leftover temporary folder harms nothing.
                let _ = std::fs::remove_dir_all(folder);
            }
        }
    }
}

/// Drops `schema`, blocking until done. `Drop` may run inside a tokio runtime,
/// where blocking on a future would panic, so the work runs on a thread of its
/// own with a runtime of its own. Failures are printed, never raised: a panic in
/// `Drop` during a failing test's unwinding would abort the test binary.
#[cfg(feature = "postgres")]
fn drop_schema(server_url: &str, schema: &str) {
    let server_url = server_url.to_owned();
    let sql = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
    let dropped = std::thread::spawn(move || -> Result<(), String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| error.to_string())?;
        runtime.block_on(async {
            let mut connection = crate::pg::establish(server_url)
                .await
                .map_err(|error| error.to_string())?;
            connection
                .batch_execute(&sql)
                .await
                .map_err(|error| error.to_string())
        })
    })
    .join();
    match dropped {
        Ok(Ok(())) => {}
        Ok(Err(error)) => eprintln!("could not drop the test schema {schema}: {error}"),
        Err(_) => eprintln!("the thread dropping the test schema {schema} panicked"),
    }
}

/// Writes `notice` to the terminal once per process (per `once`). It goes to the standard
/// error stream directly rather than through `eprintln!`, which libtest captures
/// and shows only for failing tests: a case that could not run passes, so its
/// output would never be seen.
#[cfg(feature = "postgres")]
fn announce_once(once: &'static Once, notice: &str) {
    use std::io::Write as _;
    once.call_once(|| {
        // Best effort: a notice that cannot be written changes no test's outcome.
        let _ = writeln!(std::io::stderr().lock(), "\nnote: {notice}\n");
    });
}

/// `url` with the schema search path set to `schema` for every connection.
#[cfg(feature = "postgres")]
fn with_search_path(url: &str, schema: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-csearch_path%3D{schema}")
}

/// 64 random bits as hex: unique names for schemas and folders.
fn random_hex() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .unwrap_or_else(|error| panic!("the OS random source failed: {error}"));
    hex::encode(bytes)
}

/// An error and its causes on one line.
fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "postgres")]
    #[test]
    fn the_search_path_rides_in_the_url() {
        assert_eq!(
            with_search_path("postgres://u@h/db", "s"),
            "postgres://u@h/db?options=-csearch_path%3Ds"
        );
        assert_eq!(
            with_search_path("postgres://u@h/db?sslmode=disable", "s"),
            "postgres://u@h/db?sslmode=disable&options=-csearch_path%3Ds"
        );
    }

    #[test]
    fn the_server_comes_from_the_lookup_passed_in() {
        let server = PostgresServer::from_lookup(|_| None);
        assert_eq!(server, PostgresServer::new(DEFAULT_DATABASE_URL, false));
        assert!(!server.cases_filtered());
        let server = PostgresServer::from_lookup(|name| match name {
            DATABASE_URL_VAR => Some("postgres://ci@db/test".into()),
            REQUIRE_POSTGRES_VAR => Some("1".into()),
            _ => None,
        });
        assert_eq!(server, PostgresServer::new("postgres://ci@db/test", true));
        let server = PostgresServer::from_lookup(|name| {
            (name == REQUIRE_POSTGRES_VAR).then(|| "yes".to_owned())
        });
        assert!(!server.required(), "only `1` requires the server");
    }
}

/// A TCP proxy a test puts between a store and its database server, to inject an
/// outage without touching the server other tests share: [`FaultProxy::cut`] drops
/// every open connection and refuses new ones for a while; then connections pass
/// again.
#[derive(Debug)]
pub struct FaultProxy {
    addr: std::net::SocketAddr,
    state: Arc<ProxyState>,
    accept: tokio::task::JoinHandle<()>,
}

#[derive(Debug)]
struct ProxyState {
    /// Refuse (close at once) connections accepted before this instant.
    refuse_until: std::sync::Mutex<Option<tokio::time::Instant>>,
    /// Bumped by a cut: open connections end when it changes.
    cuts: tokio::sync::watch::Sender<u64>,
}

impl FaultProxy {
    /// A proxy on a free loopback port forwarding to `target` (`host:port`).
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start(target: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|error| panic!("the proxy could not bind: {error}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|error| panic!("the proxy has no address: {error}"));
        let state = Arc::new(ProxyState {
            refuse_until: std::sync::Mutex::new(None),
            cuts: tokio::sync::watch::channel(0).0,
        });
        let accepting = Arc::clone(&state);
        let accept = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let refusing = accepting
                    .refuse_until
                    .lock()
                    .map(|until| until.is_some_and(|until| tokio::time::Instant::now() < until))
                    .unwrap_or(false);
                if refusing {
                    drop(client);
                    continue;
                }
                let target = target.clone();
                let mut cut = accepting.cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        });
        Self {
            addr,
            state,
            accept,
        }
    }

    /// Where clients connect.
    #[must_use]
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Drops every open connection and refuses new ones for `outage`.
    pub fn cut(&self, outage: Duration) {
        if let Ok(mut until) = self.state.refuse_until.lock() {
            *until = Some(tokio::time::Instant::now() + outage);
        }
        self.state.cuts.send_modify(|cuts| *cuts += 1);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept.abort();
    }
}
