//! A Trino coordinator double for tests: an in-process HTTP server that speaks
//! Trino's client REST protocol faithfully enough for the official clients, and runs
//! real SQL on SQLite.
//!
//! - **Protocol**: `POST /v1/statement` answers QUEUED with a `queued/…/1` next URI;
//!   following it leads to `executing/…/0`, RUNNING pages with `columns` (type
//!   signatures included) and `data`, and a last FINISHED document without `nextUri`.
//!   Every document carries full `stats`. Tokens behave like Trino's: repeating the
//!   last token returns the same document, an older one answers 410, any other 404.
//!   `DELETE` on a next URI answers 204 and later GETs report `USER_CANCELED`.
//!   `X-Trino-Query-Data-Encoding` is ignored (rows always travel inline), as a
//!   server without spooling does. `GET /v1/info` answers like a coordinator.
//! - **SQL**: `SELECT`, `WITH` and `VALUES` run on SQLite with Trino's
//!   `catalog.schema.table` names mapped to SQLite tables; `SHOW CATALOGS`,
//!   `SHOW SCHEMAS [FROM c]`, `SHOW TABLES [FROM [c.]s]`, `SHOW COLUMNS FROM t`,
//!   `DESCRIBE t` and `EXPLAIN [(TYPE VALIDATE)] query` are answered from the
//!   catalog. `EXPLAIN`'s plan text contains `Estimates: {rows: N …}`. Trino's
//!   `fail(message)` function fails a query at the row where it is evaluated, which
//!   is how a test gets an error after partial data. Writes are refused.
//! - **Data**: catalog `memory`, schema `default`: `customers` (6 rows) and `orders`
//!   (50 rows); catalog `tpch`, schema `tiny`: `nation` and `region`; catalog
//!   `synthetic`, schema `big`: `rows_1k`, `rows_100k`, `rows_1m`, `rows_10m`
//!   (`id bigint, name varchar, category varchar, amount double`, row `n` being
//!   `(n, 'row-n', 'category-(n % 7)', (n % 1000) * 1.25)`), generated lazily page
//!   by page; catalog `system`, schema `runtime`: `queries`, Trino's table of the
//!   coordinator's queries, column for column, showing the queries the double has
//!   recorded; and each catalog's `information_schema`.
//! - **Impersonation and attribution**: the principal of a statement is the user of
//!   `Authorization: Basic` (any password) or the principal a test configured for a
//!   bearer token ([`DoubleState::set_bearer_principal`]); without the header, the
//!   session user (`X-Trino-User`) is its own. With [`AccessControlRules`] set, a
//!   principal running a query as another user is checked against their
//!   `impersonation` rules as Trino's file-based access control checks it, and a
//!   denied query fails with `PERMISSION_DENIED` on its first queued GET. Every
//!   accepted query's user, principal, source, client tags, client info and trace
//!   token are recorded ([`DoubleState::queries`]), and served by
//!   `system.runtime.queries` and `GET /v1/query/{queryId}` (Trino's `QueryInfo`,
//!   in part) as Trino serves them.
//! - **Faults and observation**: see [`DoubleState`]: recorded requests and queries,
//!   cancelled queries, injected statuses and empty bodies, slow pages, page sizes,
//!   required credentials.

mod access;
mod catalog;
mod engine;
mod failure;
mod recording;
mod server;
mod sql;
mod types;

pub use access::{AccessControlRules, ImpersonationRule, RulesError};
pub use recording::{QueryState, RecordedError, RecordedQuery};

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A running double, serving until it is dropped.
///
/// It dereferences to its [`DoubleState`], so `double.requests()` and
/// `double.fail_next_requests(503, 1)` read naturally in tests.
#[derive(Debug)]
pub struct TrinoDouble {
    state: Arc<DoubleState>,
    server: JoinHandle<()>,
}

impl TrinoDouble {
    /// Starts a double on a free loopback port.
    ///
    /// # Errors
    ///
    /// When no loopback port can be bound.
    pub async fn start() -> io::Result<Self> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts a double on `address` (port 0 picks a free one).
    ///
    /// # Errors
    ///
    /// When `address` cannot be bound.
    pub async fn start_on(address: SocketAddr) -> io::Result<Self> {
        let listener = TcpListener::bind(address).await?;
        let address = listener.local_addr()?;
        let state = Arc::new(DoubleState::new(address));
        let server = tokio::spawn(server::serve(listener, Arc::clone(&state)));
        Ok(Self { state, server })
    }

    /// The base URL clients connect to, such as `http://127.0.0.1:41234`.
    pub fn url(&self) -> String {
        format!("http://{}", self.state.address)
    }

    /// The bound address.
    pub fn address(&self) -> SocketAddr {
        self.state.address
    }

    /// The shared state, for observing the double from another task.
    pub fn state(&self) -> Arc<DoubleState> {
        Arc::clone(&self.state)
    }
}

impl Deref for TrinoDouble {
    type Target = DoubleState;

    fn deref(&self) -> &DoubleState {
        &self.state
    }
}

impl Drop for TrinoDouble {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// One HTTP request the double received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// `GET`, `POST`, `DELETE`, `HEAD`.
    pub method: String,
    /// The path, with the query string if there was one.
    pub path: String,
    /// Every header, names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    /// The body as text (the SQL of a `POST /v1/statement`).
    pub body: String,
}

impl RecordedRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

/// A fault to answer the next statement request with, instead of serving it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    Status(u16),
    EmptyBody,
}

/// How the double serves results; changed through [`DoubleState`]'s setters.
#[derive(Debug, Clone)]
struct Settings {
    page_rows: usize,
    page_bytes: u64,
    page_delay: Duration,
    max_wait: Duration,
    queued_polls: u64,
    estimate_budget: Duration,
    required_authorization: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            page_rows: 4096,
            // Trino's default target result size.
            page_bytes: 1024 * 1024,
            page_delay: Duration::ZERO,
            // Trino's default wait before answering a page with no data.
            max_wait: Duration::from_secs(1),
            queued_polls: 1,
            estimate_budget: Duration::from_secs(2),
            required_authorization: None,
        }
    }
}

/// Recorded requests beyond this many push out the oldest, so that a long benchmark
/// run does not grow without bound.
const MAX_RECORDED_REQUESTS: usize = 50_000;

/// What a double has seen and how it behaves, shared by its connections.
#[derive(Debug)]
pub struct DoubleState {
    address: SocketAddr,
    started: std::time::Instant,
    settings: Mutex<Settings>,
    faults: Mutex<VecDeque<Fault>>,
    requests: Mutex<VecDeque<RecordedRequest>>,
    cancelled: Mutex<Vec<String>>,
    /// `None`: no access control, so anyone may run queries as anyone.
    access_control: Mutex<Option<Arc<AccessControlRules>>>,
    bearer_principals: Mutex<HashMap<String, String>>,
    /// Shared with query workers (weakly), which read it for
    /// `system.runtime.queries`.
    queries: Arc<server::Queries>,
}

/// Locks `mutex`, ignoring poisoning: every critical section leaves the data
/// consistent, so a panic elsewhere does not make it unusable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl DoubleState {
    fn new(address: SocketAddr) -> Self {
        Self {
            address,
            started: std::time::Instant::now(),
            settings: Mutex::new(Settings::default()),
            faults: Mutex::new(VecDeque::new()),
            requests: Mutex::new(VecDeque::new()),
            cancelled: Mutex::new(Vec::new()),
            access_control: Mutex::new(None),
            bearer_principals: Mutex::new(HashMap::new()),
            queries: Arc::new(server::Queries::default()),
        }
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.requests).iter().cloned().collect()
    }

    /// The `POST /v1/statement` requests received so far.
    pub fn submitted(&self) -> Vec<RecordedRequest> {
        lock(&self.requests)
            .iter()
            .filter(|request| request.method == "POST" && request.path == "/v1/statement")
            .cloned()
            .collect()
    }

    /// Forgets the recorded requests.
    pub fn clear_requests(&self) {
        lock(&self.requests).clear();
    }

    /// Every query accepted so far (each `POST /v1/statement` that got a query id,
    /// denied ones included), in the order submitted, as it stands now: its session
    /// user, principal, source, client tags, client info, trace token, SQL, state
    /// and error.
    pub fn queries(&self) -> Vec<RecordedQuery> {
        self.queries
            .logged()
            .into_iter()
            .map(|logged| logged.query)
            .collect()
    }

    /// The query with id `query_id` (the `id` of its `QueryResults`), as it stands
    /// now.
    pub fn query(&self, query_id: &str) -> Option<RecordedQuery> {
        self.queries.recorded(query_id)
    }

    /// Enforces `rules` on the statements submitted from now on, as Trino's
    /// file-based system access control enforces a `rules.json`; `None` (the
    /// default) enforces nothing, so any principal may run queries as any user.
    ///
    /// With rules in force, an `Authorization` header the double can take no
    /// principal from (malformed Basic credentials, a bearer token without a
    /// principal) is answered 401, as by a Trino with an authenticator.
    pub fn set_access_control(&self, rules: Option<AccessControlRules>) {
        *lock(&self.access_control) = rules.map(Arc::new);
    }

    /// Enforces these impersonation rules, in order (as
    /// `{"impersonation": [...]}`; see [`Self::set_access_control`]). An empty list
    /// denies every impersonation.
    pub fn set_impersonation_rules(&self, rules: Vec<ImpersonationRule>) {
        self.set_access_control(Some(AccessControlRules::with_impersonation(rules)));
    }

    /// Makes `Authorization: Bearer <token>` authenticate as `principal`, as a
    /// Trino JWT or OAuth 2.0 authenticator maps a token to its principal.
    pub fn set_bearer_principal(&self, token: impl Into<String>, principal: impl Into<String>) {
        lock(&self.bearer_principals).insert(token.into(), principal.into());
    }

    /// The ids of the queries that received a `DELETE`, in order.
    pub fn cancelled_queries(&self) -> Vec<String> {
        lock(&self.cancelled).clone()
    }

    /// Answers the next `count` statement requests (`POST /v1/statement` and GETs of
    /// next URIs) with HTTP `status` and a short text body, without serving them.
    pub fn fail_next_requests(&self, status: u16, count: usize) {
        lock(&self.faults).extend(std::iter::repeat_n(Fault::Status(status), count));
    }

    /// Answers the next `count` statement requests with a 200 and an empty body,
    /// which Trino does under load and clients treat as a transient failure.
    pub fn send_empty_body_next(&self, count: usize) {
        lock(&self.faults).extend(std::iter::repeat_n(Fault::EmptyBody, count));
    }

    /// Rows per page at most (default 4096; pages also end at about 1 MiB).
    pub fn set_page_rows(&self, rows: usize) {
        lock(&self.settings).page_rows = rows.max(1);
    }

    /// Bytes per page at most, approximately (default 1 MiB).
    pub fn set_page_bytes(&self, bytes: u64) {
        lock(&self.settings).page_bytes = bytes.max(1);
    }

    /// Waits this long before answering each GET of an executing query (default 0),
    /// for slow queries.
    pub fn set_page_delay(&self, delay: Duration) {
        lock(&self.settings).page_delay = delay;
    }

    /// How long a GET waits for the next rows before answering with an empty
    /// RUNNING page (default 1 s, as Trino).
    pub fn set_max_wait(&self, wait: Duration) {
        lock(&self.settings).max_wait = wait;
    }

    /// How many QUEUED documents a query goes through before it runs (default 1).
    pub fn set_queued_polls(&self, polls: u64) {
        lock(&self.settings).queued_polls = polls.max(1);
    }

    /// How long `EXPLAIN` may count rows for its estimate (default 2 s).
    pub fn set_estimate_budget(&self, budget: Duration) {
        lock(&self.settings).estimate_budget = budget;
    }

    /// Requires this exact `Authorization` header on statement requests; others get
    /// 401 like a Trino with authentication configured. `None` (the default)
    /// accepts any.
    pub fn require_authorization(&self, authorization: Option<String>) {
        lock(&self.settings).required_authorization = authorization;
    }

    fn settings(&self) -> Settings {
        lock(&self.settings).clone()
    }

    fn access_control(&self) -> Option<Arc<AccessControlRules>> {
        lock(&self.access_control).clone()
    }

    fn bearer_principals(&self) -> HashMap<String, String> {
        lock(&self.bearer_principals).clone()
    }

    fn record(&self, request: RecordedRequest) {
        let mut requests = lock(&self.requests);
        if requests.len() == MAX_RECORDED_REQUESTS {
            requests.pop_front();
        }
        requests.push_back(request);
    }

    fn take_fault(&self) -> Option<Fault> {
        lock(&self.faults).pop_front()
    }

    fn record_cancel(&self, query_id: &str) {
        lock(&self.cancelled).push(query_id.to_owned());
    }
}
