//! Running a statement: each query gets a worker thread with its own freshly seeded
//! in-memory SQLite database, which steps through the result and hands pages to the
//! HTTP side through a channel of capacity one. The worker therefore runs at most
//! one page ahead of the client, so a million-row result is never held whole.
//!
//! A statement that reads `system.runtime.queries` gets that table filled, before
//! its database turns read-only, from the double's recorded queries as they stand
//! when it starts, which is what a scan of Trino's table sees.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc as std_mpsc};
use std::thread;
use std::time::{Duration, SystemTime};

use rusqlite::functions::FunctionFlags;
use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, InterruptHandle, Statement};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::catalog;
use crate::failure::Failure;
use crate::recording::{self, LoggedQuery};
use crate::sql::{self, Plan, RowsPlan, Session};
use crate::types::{TrinoType, approximate_size};

/// The recorded queries, for a statement that reads `system.runtime.queries`; only
/// called when one does.
pub(crate) type QueryLog = Box<dyn FnOnce() -> Vec<LoggedQuery> + Send>;

/// The Trino version the double claims to be, in `/v1/info` and plans.
pub(crate) const TRINO_VERSION: &str = "476";

/// Marks errors raised by the `fail()` SQL function, so they map to Trino's
/// `GENERIC_USER_ERROR` rather than to an internal error.
const FAIL_MARKER: &str = "docket-trino-double fail(): ";

/// What the worker sends to the HTTP side.
#[derive(Debug)]
pub(crate) enum Event {
    /// The next rows; the first page also carries the result's columns.
    Page {
        columns: Option<Value>,
        rows: Vec<Value>,
        bytes: u64,
    },
    /// The query failed; nothing follows.
    Failed(Failure),
}

/// How results are cut into pages.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub(crate) page_rows: usize,
    pub(crate) page_bytes: u64,
    /// How long `EXPLAIN` may count rows for its estimate.
    pub(crate) estimate_budget: Duration,
}

/// Lets the HTTP side stop a worker: the flag is checked between rows, and the
/// interrupt stops a long SQLite step (a count, a sort) at once.
#[derive(Default)]
pub(crate) struct Control {
    cancelled: AtomicBool,
    interrupt: Mutex<Option<InterruptHandle>>,
}

impl Control {
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        if let Ok(interrupt) = self.interrupt.lock()
            && let Some(handle) = interrupt.as_ref()
        {
            handle.interrupt();
        }
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

impl std::fmt::Debug for Control {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Control")
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

/// A running query's pages, and the way back for the rows served.
#[derive(Debug)]
pub(crate) struct Feed {
    /// The pages, closed after the last one.
    pub(crate) events: mpsc::Receiver<Event>,
    spent: std_mpsc::Sender<Vec<Value>>,
}

impl Feed {
    /// Hands a served page's rows back to the query's thread, which lets them go
    /// before it makes its next page. Let go here (on a runtime worker), a page's
    /// thousands of small values wait on the allocator's arena while the query's
    /// thread allocates the next page from it: a client that asks for each page at
    /// once then got about half the rate of a slower one.
    pub(crate) fn give_back(&self, rows: Vec<Value>) {
        // The thread has ended (the last page): the rows go here after all.
        let _ = self.spent.send(rows);
    }
}

/// Starts running `sql` on a worker thread; its pages arrive on the returned
/// feed.
pub(crate) fn start(
    sql: String,
    session: Session,
    limits: Limits,
    control: Arc<Control>,
    log: QueryLog,
) -> Feed {
    let (sender, receiver) = mpsc::channel(1);
    let (spent, spent_receiver) = std_mpsc::channel();
    let worker_sender = sender.clone();
    let spawned = thread::Builder::new()
        .name("trino-double-query".to_owned())
        .spawn(move || {
            let outlet = Outlet {
                sender: &worker_sender,
                spent: &spent_receiver,
            };
            if let Err(failure) = run(&sql, &session, limits, &control, log, &outlet) {
                // A closed channel means the query was cancelled or dropped.
                let _ = outlet.sender.blocking_send(Event::Failed(failure));
            }
        });
    if spawned.is_err() {
        let _ = sender.try_send(Event::Failed(Failure::internal(
            "the Trino double could not start a query thread",
        )));
    }
    Feed {
        events: receiver,
        spent,
    }
}

/// Where a query's thread sends its pages, and hears back about those served.
struct Outlet<'a> {
    sender: &'a mpsc::Sender<Event>,
    spent: &'a std_mpsc::Receiver<Vec<Value>>,
}

fn run(
    sql: &str,
    session: &Session,
    limits: Limits,
    control: &Control,
    log: QueryLog,
    outlet: &Outlet<'_>,
) -> Result<(), Failure> {
    let plan = sql::plan(sql, session)?;
    let tables = match &plan {
        Plan::Rows(rows) => &rows.tables,
        Plan::Explain { query, .. } => &query.tables,
    };
    let runtime = tables
        .iter()
        .any(|table| catalog::is_runtime_queries(table))
        .then(log);
    let connection = open(session, runtime.as_deref()).map_err(|error| {
        Failure::internal(&format!(
            "the Trino double could not build its database: {error}"
        ))
    })?;
    if let Ok(mut interrupt) = control.interrupt.lock() {
        *interrupt = Some(connection.get_interrupt_handle());
    }
    if control.is_cancelled() {
        return Ok(());
    }
    match plan {
        Plan::Rows(rows) => stream(&connection, &rows, limits, control, outlet),
        Plan::Explain { query, validate } => {
            explain(&connection, &query, validate, limits, outlet.sender)
        }
    }
}

/// A query's database: the seeded catalogs, `system.runtime.queries` filled with
/// `runtime` when given, the session schema's tables under their bare names
/// (temporary views, so `FROM orders` works as in Trino), Trino's `fail()`
/// function, and read-only from then on.
fn open(session: &Session, runtime: Option<&[LoggedQuery]>) -> rusqlite::Result<Connection> {
    let connection = Connection::open_in_memory()?;
    connection.execute_batch(catalog::seed_sql())?;
    if let Some(queries) = runtime {
        fill_runtime_queries(&connection, queries)?;
    }
    if let (Some(catalog_name), Some(schema)) = (&session.catalog, &session.schema) {
        for table in catalog::tables_in(catalog_name, schema) {
            connection.execute_batch(&format!(
                "CREATE TEMP VIEW \"{}\" AS SELECT * FROM main.\"{}\"",
                table.name,
                table.sqlite_name()
            ))?;
        }
    }
    connection.create_scalar_function("fail", 1, FunctionFlags::SQLITE_UTF8, |context| {
        let message: String = context.get(0)?;
        Err::<bool, _>(rusqlite::Error::UserFunctionError(
            format!("{FAIL_MARKER}{message}").into(),
        ))
    })?;
    connection.pragma_update(None, "query_only", true)?;
    Ok(connection)
}

/// Inserts `queries` into `system.runtime.queries`, a row each, valued as Trino's
/// `QuerySystemTable` values them.
fn fill_runtime_queries(connection: &Connection, queries: &[LoggedQuery]) -> rusqlite::Result<()> {
    let placeholders = vec!["?"; catalog::RUNTIME_QUERIES_COLUMNS.len()].join(", ");
    let table = catalog::sqlite_name("system", "runtime", "queries");
    let mut insert =
        connection.prepare(&format!("INSERT INTO \"{table}\" VALUES ({placeholders})"))?;
    let now = SystemTime::now();
    let timestamp = |time: Option<SystemTime>| time.map(recording::trino_timestamp);
    for LoggedQuery { query, dispatched } in queries {
        let error = query.error.as_ref();
        // A query that failed before it was dispatched (a denied impersonation) was
        // never put in a resource group; every other one is in Trino's default.
        let resource_group = dispatched.then(|| "[\"global\"]".to_owned());
        insert.execute(rusqlite::params![
            query.query_id,
            query.state.as_str(),
            query.user,
            query.source,
            query.sql,
            resource_group,
            recording::millis(query.queued_time(now)),
            0_i64,
            0_i64,
            recording::trino_timestamp(query.created),
            timestamp(query.started),
            recording::trino_timestamp(query.last_heartbeat),
            timestamp(query.ended),
            error.map(|error| error.error_type.as_str()),
            error.map(|error| error.name.as_str()),
        ])?;
    }
    Ok(())
}

/// Cuts rows into pages and sends them.
struct Pages<'a> {
    sender: &'a mpsc::Sender<Event>,
    spent: &'a std_mpsc::Receiver<Vec<Value>>,
    names: Vec<String>,
    declared: Vec<Option<TrinoType>>,
    /// Fixed by the first page: declared types, else the first value's type.
    types: Option<Vec<TrinoType>>,
}

impl Pages<'_> {
    /// Sends one page; false when nobody listens any more.
    fn send(&mut self, raw: Vec<Vec<SqlValue>>, bytes: u64) -> bool {
        // The pages served since the last one are let go here, where they were made.
        while let Ok(rows) = self.spent.try_recv() {
            drop(rows);
        }
        let first = self.types.is_none();
        let declared = &self.declared;
        let types = self.types.get_or_insert_with(|| {
            declared
                .iter()
                .enumerate()
                .map(|(index, declared)| {
                    declared
                        .clone()
                        .or_else(|| {
                            raw.iter()
                                .find_map(|row| row.get(index).and_then(TrinoType::infer))
                        })
                        .unwrap_or(TrinoType::Unknown)
                })
                .collect()
        });
        let columns = first.then(|| {
            Value::Array(
                self.names
                    .iter()
                    .zip(types.iter())
                    .map(|(name, kind)| kind.column(name))
                    .collect(),
            )
        });
        let rows = raw
            .into_iter()
            .map(|row| {
                Value::Array(
                    row.into_iter()
                        .zip(types.iter())
                        .map(|(value, kind)| kind.to_json(value))
                        .collect(),
                )
            })
            .collect();
        self.sender
            .blocking_send(Event::Page {
                columns,
                rows,
                bytes,
            })
            .is_ok()
    }
}

fn prepare<'a>(connection: &'a Connection, plan: &RowsPlan) -> Result<Statement<'a>, Failure> {
    let statement = connection
        .prepare(&plan.sql)
        .map_err(|error| sqlite_failure(&error, plan))?;
    if !statement.readonly() {
        return Err(Failure::not_supported(
            (1, 1),
            "the Trino double only runs read statements",
        ));
    }
    Ok(statement)
}

fn declared_types(statement: &Statement<'_>) -> Vec<Option<TrinoType>> {
    statement
        .columns()
        .iter()
        .map(|column| column.decl_type().and_then(TrinoType::from_declared))
        .collect()
}

/// Result column names as Trino gives them: lower case, and `_colN` for an
/// expression without an alias (SQLite names those after their text).
fn column_names(statement: &Statement<'_>, plan: &RowsPlan) -> Vec<String> {
    statement
        .column_names()
        .iter()
        .enumerate()
        .map(|(index, name)| {
            if !plan.trino_column_names {
                return (*name).to_owned();
            }
            let lower = name.to_lowercase();
            let plain = lower
                .chars()
                .next()
                .is_some_and(|first| first.is_alphabetic() || first == '_')
                && lower.chars().all(|c| c.is_alphanumeric() || c == '_');
            if plan.values || !plain || matches!(lower.as_str(), "true" | "false" | "null") {
                format!("_col{index}")
            } else {
                lower
            }
        })
        .collect()
}

fn stream(
    connection: &Connection,
    plan: &RowsPlan,
    limits: Limits,
    control: &Control,
    outlet: &Outlet<'_>,
) -> Result<(), Failure> {
    let mut statement = prepare(connection, plan)?;
    let mut pages = Pages {
        sender: outlet.sender,
        spent: outlet.spent,
        names: column_names(&statement, plan),
        declared: declared_types(&statement),
        types: None,
    };
    let width = pages.names.len();
    let mut rows = statement
        .query([])
        .map_err(|error| sqlite_failure(&error, plan))?;
    let mut page = Vec::new();
    let mut page_bytes = 0;
    loop {
        if control.is_cancelled() {
            return Ok(());
        }
        match rows.next() {
            Ok(Some(row)) => {
                let mut values = Vec::with_capacity(width);
                for index in 0..width {
                    let value: SqlValue = row
                        .get(index)
                        .map_err(|error| sqlite_failure(&error, plan))?;
                    page_bytes += approximate_size(&value);
                    values.push(value);
                }
                page.push(values);
                if page.len() >= limits.page_rows || page_bytes >= limits.page_bytes {
                    if !pages.send(std::mem::take(&mut page), page_bytes) {
                        return Ok(());
                    }
                    page_bytes = 0;
                }
            }
            Ok(None) => {
                // An empty result still tells the client its columns.
                if !page.is_empty() || pages.types.is_none() {
                    pages.send(page, page_bytes);
                }
                return Ok(());
            }
            Err(error) => {
                if control.is_cancelled() {
                    return Ok(());
                }
                // Rows before the failure reach the client first, as they do when a
                // Trino query fails part way through.
                if !page.is_empty() && !pages.send(page, page_bytes) {
                    return Ok(());
                }
                return Err(sqlite_failure(&error, plan));
            }
        }
    }
}

fn single_value(sender: &mpsc::Sender<Event>, name: &str, kind: &TrinoType, value: Value) {
    let _ = sender.blocking_send(Event::Page {
        columns: Some(Value::Array(vec![kind.column(name)])),
        rows: vec![Value::Array(vec![value])],
        bytes: 8,
    });
}

fn explain(
    connection: &Connection,
    plan: &RowsPlan,
    validate: bool,
    limits: Limits,
    sender: &mpsc::Sender<Event>,
) -> Result<(), Failure> {
    let statement = prepare(connection, plan)?;
    if validate {
        single_value(sender, "Valid", &TrinoType::Boolean, Value::Bool(true));
        return Ok(());
    }
    let names = column_names(&statement, plan);
    let layout: Vec<String> = names
        .iter()
        .zip(declared_types(&statement))
        .map(|(name, kind)| {
            // Views (the synthetic tables) declare no types; the catalog knows them.
            let kind = kind
                .or_else(|| {
                    plan.tables.iter().find_map(|table| {
                        let (_, declared) =
                            table.columns.iter().find(|(column, _)| column == name)?;
                        TrinoType::from_declared(declared)
                    })
                })
                .unwrap_or(TrinoType::Unknown);
            format!("{name}:{}", kind.name())
        })
        .collect();
    drop(statement);
    let rows = estimate_rows(connection, plan, limits.estimate_budget)
        .map_or_else(|| "?".to_owned(), |rows| rows.to_string());
    let tables: Vec<String> = plan
        .tables
        .iter()
        .map(|table| format!("{}:{}:{}", table.catalog, table.schema, table.name))
        .collect();
    let names = names.join(", ");
    let layout = layout.join(", ");
    let tables = if tables.is_empty() {
        "values".to_owned()
    } else {
        tables.join(", ")
    };
    let text = format!(
        "Trino version: {TRINO_VERSION}\n\
         Fragment 0 [SINGLE]\n\
         \x20   Output layout: [{names}]\n\
         \x20   Output partitioning: SINGLE []\n\
         \x20   Output[columnNames = [{names}]]\n\
         \x20   │   Layout: [{layout}]\n\
         \x20   │   Estimates: {{rows: {rows} (?), cpu: ?, memory: 0B, network: ?}}\n\
         \x20   └─ TableScan[table = {tables}]\n\
         \x20          Layout: [{layout}]\n\
         \x20          Estimates: {{rows: {rows} (?), cpu: ?, memory: 0B, network: 0B}}\n"
    );
    single_value(
        sender,
        "Query Plan",
        &TrinoType::Varchar(None),
        Value::String(text),
    );
    Ok(())
}

/// The plan's row estimate: the exact count when SQLite finds it within `budget`,
/// else the size of the largest synthetic table read (as Trino estimates a scan from
/// table statistics), else unknown.
fn estimate_rows(connection: &Connection, plan: &RowsPlan, budget: Duration) -> Option<u64> {
    let handle = connection.get_interrupt_handle();
    let (finished, wait) = std_mpsc::channel::<()>();
    let timer = thread::Builder::new()
        .name("trino-double-estimate".to_owned())
        .spawn(move || {
            if let Err(std_mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(budget) {
                handle.interrupt();
            }
        });
    let counted =
        connection.query_row(&format!("SELECT count(*) FROM ({})", plan.sql), [], |row| {
            row.get::<_, i64>(0)
        });
    drop(finished);
    if let Ok(timer) = timer {
        let _ = timer.join();
    }
    match counted {
        Ok(count) => u64::try_from(count).ok(),
        Err(_) => plan
            .tables
            .iter()
            .filter_map(|table| catalog::synthetic_rows(table))
            .max(),
    }
}

/// Maps a SQLite error to the Trino failure a real coordinator would report for the
/// same mistake, placed in the client's text where possible.
fn sqlite_failure(error: &rusqlite::Error, plan: &RowsPlan) -> Failure {
    let (message, offset) = match error {
        rusqlite::Error::SqlInputError { msg, offset, .. } => {
            (msg.clone(), usize::try_from(*offset).ok())
        }
        rusqlite::Error::SqliteFailure(_, Some(message)) => (message.clone(), None),
        other => (other.to_string(), None),
    };
    if let Some(at) = message.find(FAIL_MARKER) {
        return Failure::generic_user(&message[at + FAIL_MARKER.len()..]);
    }
    let located = offset.and_then(|offset| plan.original_position(offset));
    let place = |word: &str| located.or_else(|| plan.position_of(word));
    if let Some(name) = message.strip_prefix("no such table: ") {
        let table = name.rsplit('.').next().unwrap_or(name);
        return Failure::user(
            "TABLE_NOT_FOUND",
            46,
            place(table),
            &format!("Table '{}{table}' does not exist", plan.session_prefix),
        );
    }
    if let Some(name) = message.strip_prefix("no such column: ") {
        let column = name.rsplit('.').next().unwrap_or(name);
        return Failure::user(
            "COLUMN_NOT_FOUND",
            47,
            place(column),
            &format!("Column '{name}' cannot be resolved"),
        );
    }
    if let Some(name) = message.strip_prefix("no such function: ") {
        return Failure::user(
            "FUNCTION_NOT_FOUND",
            6,
            place(name),
            &format!("Function '{}' not registered", name.to_lowercase()),
        );
    }
    if let Some(rest) = message.strip_prefix("near \"")
        && let Some((near, _)) = rest.split_once("\": syntax error")
    {
        return Failure::syntax(
            place(near).unwrap_or((1, 1)),
            &format!("mismatched input '{near}'"),
        );
    }
    if message.contains("incomplete input") {
        return Failure::syntax(plan.end_position(), "mismatched input '<EOF>'");
    }
    if let Some(token) = message.strip_prefix("unrecognized token: ") {
        let token = token.trim_matches('"');
        return Failure::syntax(
            place(token).unwrap_or((1, 1)),
            &format!("token recognition error at: '{token}'"),
        );
    }
    if message.contains("readonly database") || message.starts_with("cannot modify") {
        return Failure::not_supported((1, 1), "the Trino double only runs read statements");
    }
    if message.contains("syntax error") {
        return Failure::syntax(located.unwrap_or((1, 1)), &message);
    }
    Failure::internal(&message)
}
