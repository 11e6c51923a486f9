//! The HTTP side: routing, Trino's statement resources (queued and executing) with
//! their token rules, cancellation, heartbeats, `/v1/info`, and `/v1/query/{id}`.
//!
//! A submission is where Trino's session is made: the authenticated principal is
//! read from `Authorization`, and when it differs from `X-Trino-User` the access
//! control rules decide whether it may impersonate that user. As in Trino, where
//! the check runs when the query is dispatched, a denied query is still accepted
//! (QUEUED, with a next URI) and its first queued GET reports it FAILED with
//! `PERMISSION_DENIED` and no next URI.

use std::collections::HashMap;
use std::convert::Infallible;
use std::hash::{BuildHasher as _, Hasher as _, RandomState};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, Method, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::access::{self, Credentials};
use crate::engine::{self, Control, Event, Limits, QueryLog, TRINO_VERSION};
use crate::failure::Failure;
use crate::recording::{self, LoggedQuery, QueryState, RecordedError, RecordedQuery};
use crate::sql::Session;
use crate::{DoubleState, Fault, RecordedRequest, lock};

/// The queries a double knows, by id. Finished queries stay, so that a repeated GET
/// of their last token still gets its document, as from Trino.
#[derive(Debug, Default)]
pub(crate) struct Queries {
    by_id: Mutex<HashMap<String, Arc<Query>>>,
    next_number: AtomicU64,
    coordinator_id: std::sync::OnceLock<String>,
}

impl Queries {
    fn get(&self, id: &str) -> Option<Arc<Query>> {
        lock(&self.by_id).get(id).cloned()
    }

    /// Every query's record, in the order they were submitted.
    pub(crate) fn logged(&self) -> Vec<LoggedQuery> {
        let mut queries: Vec<Arc<Query>> = lock(&self.by_id).values().cloned().collect();
        queries.sort_by_key(|query| query.number);
        queries.iter().map(|query| query.logged()).collect()
    }

    /// The record of query `id`.
    pub(crate) fn recorded(&self, id: &str) -> Option<RecordedQuery> {
        self.get(id).map(|query| query.logged().query)
    }

    /// A query number and an id shaped like Trino's: `20261130_142501_00001_abcde`.
    fn new_id(&self) -> (u64, String) {
        let number = self.next_number.fetch_add(1, Ordering::Relaxed);
        let coordinator = self.coordinator_id.get_or_init(|| {
            random_hex(5)
                .bytes()
                .map(|digit| char::from(b'a' + digit % 26))
                .collect()
        });
        let now = time::OffsetDateTime::now_utc();
        let id = format!(
            "{:04}{:02}{:02}_{:02}{:02}{:02}_{number:05}_{coordinator}",
            now.year(),
            u8::from(now.month()),
            now.day(),
            now.hour(),
            now.minute(),
            now.second()
        );
        (number, id)
    }
}

/// `length` hex digits from the standard library's randomly keyed hasher; slugs
/// only need to be unguessable by accident, not by an attacker.
fn random_hex(length: usize) -> String {
    let mut text = String::new();
    while text.len() < length {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_usize(text.len());
        text.push_str(&format!("{:016x}", hasher.finish()));
    }
    text.truncate(length);
    text
}

/// One submitted statement.
#[derive(Debug)]
struct Query {
    /// The order of submission.
    number: u64,
    id: String,
    slug: String,
    created: Instant,
    /// The failure the query met when it was dispatched, before it could run (a
    /// denied impersonation); its first queued GET reports it.
    rejection: Option<Failure>,
    record: Mutex<RecordedQuery>,
    control: Arc<Control>,
    /// Wakes a GET that is waiting for rows when a DELETE arrives.
    cancelled: Notify,
    progress: tokio::sync::Mutex<Progress>,
}

#[derive(Debug)]
struct Progress {
    events: Option<engine::Feed>,
    /// The executing token the next new document is for; `None` once finished.
    next_token: Option<u64>,
    /// The last executing document, which a repeated GET of its token gets again.
    last: Option<(u64, Bytes)>,
    columns: Option<Value>,
    pages: u64,
    processed_rows: u64,
    processed_bytes: u64,
    running_since: Option<Instant>,
}

/// Accepts connections until the task is aborted.
pub(crate) async fn serve(listener: TcpListener, state: Arc<DoubleState>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of file descriptors and the like: wait instead of spinning.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let state = Arc::clone(&state);
                async move { Ok::<_, Infallible>(handle(&state, request).await) }
            });
            // A client that goes away mid-request is not the double's problem.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

type HttpResponse = Response<Full<Bytes>>;

fn respond(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> HttpResponse {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    if let Ok(value) = header::HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

fn text(status: StatusCode, body: &str) -> HttpResponse {
    respond(status, "text/plain", body.to_owned())
}

fn json_response(body: Bytes) -> HttpResponse {
    respond(StatusCode::OK, "application/json", body)
}

fn query_not_found() -> HttpResponse {
    text(StatusCode::NOT_FOUND, "Query not found")
}

async fn handle(state: &DoubleState, request: hyper::Request<Incoming>) -> HttpResponse {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let path_and_query = request
        .uri()
        .path_and_query()
        .map_or_else(|| path.clone(), |value| value.as_str().to_owned());
    let headers = request.headers().clone();
    let body = match request.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => return text(StatusCode::BAD_REQUEST, "could not read the request body"),
    };
    state.record(RecordedRequest {
        method: method.to_string(),
        path: path_and_query,
        headers: headers
            .iter()
            .map(|(name, value)| {
                (
                    name.as_str().to_owned(),
                    String::from_utf8_lossy(value.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    if let ["v1", "info", rest @ ..] = segments.as_slice() {
        return match (&method, rest) {
            (&Method::GET, []) => info(state),
            (&Method::GET, ["state"]) => json_response(Bytes::from_static(b"\"ACTIVE\"")),
            _ => text(StatusCode::NOT_FOUND, "Not Found"),
        };
    }
    if let (&Method::GET, ["v1", "query", id]) = (&method, segments.as_slice()) {
        return match state.queries.get(id) {
            Some(query) => {
                let base = base_url(&headers, state);
                json_response(Bytes::from(query.info(&base).to_string()))
            }
            // Trino's QueryResource answers an unknown (or purged) query with 410.
            None => respond(StatusCode::GONE, "text/plain", Bytes::new()),
        };
    }
    if segments.first() != Some(&"v1") || segments.get(1) != Some(&"statement") {
        return text(StatusCode::NOT_FOUND, "Not Found");
    }
    let settings = state.settings();
    if let Some(required) = &settings.required_authorization {
        let sent = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok());
        if sent != Some(required.as_str()) {
            return unauthorized(required.starts_with("Bearer"), "Unauthorized");
        }
    }
    let base = base_url(&headers, state);
    match (&method, &segments[2..]) {
        (&Method::POST, []) => {
            if let Some(fault) = injected(state) {
                return fault;
            }
            submit(state, &headers, &body, &base)
        }
        (&Method::GET, ["queued", id, slug, token]) => {
            if let Some(fault) = injected(state) {
                return fault;
            }
            match find(state, id, slug, token) {
                Some((query, token)) => {
                    query.heartbeat();
                    queued(&query, token, settings.queued_polls, &base)
                }
                None => query_not_found(),
            }
        }
        (&Method::GET, ["executing", id, slug, token]) => {
            if let Some(fault) = injected(state) {
                return fault;
            }
            match find(state, id, slug, token) {
                Some((query, token)) => {
                    query.heartbeat();
                    executing(&query, token, state, &base).await
                }
                None => query_not_found(),
            }
        }
        (&Method::DELETE, ["queued" | "executing", id, slug, token]) => {
            match find(state, id, slug, token) {
                Some((query, _)) => {
                    query.control.cancel();
                    query.cancelled.notify_waiters();
                    query.end(Some(&Failure::user_canceled()));
                    state.record_cancel(&query.id);
                    respond(StatusCode::NO_CONTENT, "text/plain", Bytes::new())
                }
                None => query_not_found(),
            }
        }
        // The Python client's heartbeat while it downloads spooled segments.
        (&Method::HEAD, ["queued" | "executing", id, slug, token]) => {
            match find(state, id, slug, token) {
                Some((query, _)) => {
                    query.heartbeat();
                    respond(StatusCode::OK, "application/json", Bytes::new())
                }
                None => query_not_found(),
            }
        }
        _ => text(StatusCode::NOT_FOUND, "Not Found"),
    }
}

/// 401, with the challenge of the scheme the client should use.
fn unauthorized(bearer: bool, body: &str) -> HttpResponse {
    let mut response = text(StatusCode::UNAUTHORIZED, body);
    let scheme = if bearer {
        "Bearer realm=\"Trino\""
    } else {
        "Basic realm=\"Trino\""
    };
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static(scheme),
    );
    response
}

fn injected(state: &DoubleState) -> Option<HttpResponse> {
    match state.take_fault()? {
        Fault::Status(status) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            Some(text(
                status,
                status.canonical_reason().unwrap_or("injected failure"),
            ))
        }
        Fault::EmptyBody => Some(respond(StatusCode::OK, "application/json", Bytes::new())),
    }
}

/// The base of the URIs the double hands out: the host the client used, like the
/// request-relative URIs Trino builds.
fn base_url(headers: &HeaderMap, state: &DoubleState) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|value| value.to_str().ok())
        .map_or_else(|| state.address.to_string(), str::to_owned);
    format!("http://{host}")
}

fn find(state: &DoubleState, id: &str, slug: &str, token: &str) -> Option<(Arc<Query>, u64)> {
    let token = token.parse().ok()?;
    let query = state.queries.get(id)?;
    (query.slug == slug).then_some((query, token))
}

fn info(state: &DoubleState) -> HttpResponse {
    let body = json!({
        "nodeVersion": { "version": TRINO_VERSION },
        "environment": "docket-trino-double",
        "coordinator": true,
        "starting": false,
        "uptime": succinct_duration(state.started.elapsed()),
    });
    json_response(Bytes::from(body.to_string()))
}

/// A duration as airlift's `Duration.succinctDuration` prints it: `12.34s`, `3.50m`.
fn succinct_duration(duration: Duration) -> String {
    let seconds = duration.as_secs_f64();
    if seconds < 1.0 {
        format!("{:.2}ms", seconds * 1000.0)
    } else if seconds < 60.0 {
        format!("{seconds:.2}s")
    } else if seconds < 3600.0 {
        format!("{:.2}m", seconds / 60.0)
    } else if seconds < 86_400.0 {
        format!("{:.2}h", seconds / 3600.0)
    } else {
        format!("{:.2}d", seconds / 86_400.0)
    }
}

/// A header's value as text, trimmed; `None` when absent or blank. Bytes that are
/// not UTF-8 are replaced rather than dropping the header.
fn header_string(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .map(|value| String::from_utf8_lossy(value.as_bytes()).trim().to_owned())
        .filter(|value| !value.is_empty())
}

/// `X-Trino-Client-Tags` as Trino splits it: at commas, trimmed, empty tags left
/// out, over every instance of the header.
fn client_tags(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("x-trino-client-tags")
        .iter()
        .flat_map(|value| {
            String::from_utf8_lossy(value.as_bytes())
                .split(',')
                .map(str::trim)
                .filter(|tag| !tag.is_empty())
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

fn submit(state: &DoubleState, headers: &HeaderMap, body: &[u8], base: &str) -> HttpResponse {
    let Some(user) = header_string(headers, "x-trino-user") else {
        return text(StatusCode::BAD_REQUEST, "User must be set");
    };
    let sql = String::from_utf8_lossy(body).into_owned();
    if sql.trim().is_empty() {
        return text(StatusCode::BAD_REQUEST, "SQL statement is empty");
    }
    let authorization = headers
        .get(header::AUTHORIZATION)
        .map(|value| value.as_bytes());
    let rules = state.access_control();
    let principal = match access::authenticate(authorization, &state.bearer_principals()) {
        Credentials::Absent => None,
        Credentials::Principal(principal) => Some(principal),
        // With access control in force the double authenticates like a Trino with
        // an authenticator configured; without, it ignores what it cannot read.
        Credentials::Unusable(reason) if rules.is_some() => {
            let bearer = authorization.is_some_and(|value| value.starts_with(b"Bearer"));
            return unauthorized(bearer, &format!("Unauthorized: {reason}"));
        }
        Credentials::Unusable(_) => None,
    };
    // Trino checks impersonation only when the authenticated user is not the
    // session user, and only when access control is configured here.
    let rejection = match (&principal, &rules) {
        (Some(original), Some(rules)) if *original != user => {
            match rules.can_impersonate(original, &user) {
                Ok(true) => None,
                Ok(false) => Some(Failure::permission_denied(&format!(
                    "User {original} cannot impersonate user {user}"
                ))),
                Err(error) => Some(Failure::internal(&error.to_string())),
            }
        }
        _ => None,
    };
    let session = Session {
        catalog: header_string(headers, "x-trino-catalog").map(|catalog| catalog.to_lowercase()),
        schema: header_string(headers, "x-trino-schema").map(|schema| schema.to_lowercase()),
    };
    let (number, id) = state.queries.new_id();
    let now = SystemTime::now();
    let mut record = RecordedQuery {
        query_id: id.clone(),
        sql: sql.clone(),
        user,
        principal,
        source: header_string(headers, "x-trino-source"),
        client_tags: client_tags(headers),
        client_info: header_string(headers, "x-trino-client-info"),
        trace_token: header_string(headers, "x-trino-trace-token"),
        catalog: session.catalog.clone(),
        schema: session.schema.clone(),
        state: QueryState::Queued,
        error: None,
        created: now,
        started: None,
        last_heartbeat: now,
        ended: None,
    };
    let control = Arc::new(Control::default());
    let events = match &rejection {
        // A query failed at dispatch never runs.
        Some(failure) => {
            record.state = QueryState::Failed;
            record.error = Some(RecordedError::from(failure));
            record.ended = Some(now);
            None
        }
        None => {
            let settings = state.settings();
            Some(engine::start(
                sql,
                session,
                Limits {
                    page_rows: settings.page_rows,
                    page_bytes: settings.page_bytes,
                    estimate_budget: settings.estimate_budget,
                },
                Arc::clone(&control),
                query_log(state, &record),
            ))
        }
    };
    let query = Arc::new(Query {
        number,
        id,
        slug: format!("y{}", random_hex(32)),
        created: Instant::now(),
        rejection,
        record: Mutex::new(record),
        control,
        cancelled: Notify::new(),
        progress: tokio::sync::Mutex::new(Progress {
            events,
            next_token: Some(0),
            last: None,
            columns: None,
            pages: 0,
            processed_rows: 0,
            processed_bytes: 0,
            running_since: None,
        }),
    });
    lock(&state.queries.by_id).insert(query.id.clone(), Arc::clone(&query));
    let next = format!("{base}/v1/statement/queued/{}/{}/1", query.id, query.slug);
    let document = query.document(base, &QUEUED_PROGRESS, "QUEUED", Some(next), None, None);
    json_response(Bytes::from(document.to_string()))
}

/// What a statement that reads `system.runtime.queries` sees: every recorded query,
/// itself RUNNING (the worker may start before the query is registered, so its own
/// record is added if missing). It holds the queries weakly, so that a worker does
/// not keep a dropped double alive.
fn query_log(state: &DoubleState, own: &RecordedQuery) -> QueryLog {
    let queries = Arc::downgrade(&state.queries);
    let own = own.clone();
    Box::new(move || {
        let mut logged = queries
            .upgrade()
            .map(|queries| queries.logged())
            .unwrap_or_default();
        if !logged
            .iter()
            .any(|entry| entry.query.query_id == own.query_id)
        {
            logged.push(LoggedQuery {
                query: own.clone(),
                dispatched: true,
            });
        }
        for entry in &mut logged {
            if entry.query.query_id == own.query_id && entry.query.state == QueryState::Queued {
                entry.query.state = QueryState::Running;
                entry.query.started.get_or_insert_with(SystemTime::now);
            }
        }
        logged
    })
}

/// The progress of a query that has not started: what QUEUED documents report.
const QUEUED_PROGRESS: Progress = Progress {
    events: None,
    next_token: None,
    last: None,
    columns: None,
    pages: 0,
    processed_rows: 0,
    processed_bytes: 0,
    running_since: None,
};

fn queued(query: &Query, token: u64, queued_polls: u64, base: &str) -> HttpResponse {
    if let Some(failure) = &query.rejection {
        let document = query.document(base, &QUEUED_PROGRESS, "FAILED", None, None, Some(failure));
        return json_response(Bytes::from(document.to_string()));
    }
    if query.control.is_cancelled() {
        let failure = Failure::user_canceled();
        let document = query.document(base, &QUEUED_PROGRESS, "FAILED", None, None, Some(&failure));
        return json_response(Bytes::from(document.to_string()));
    }
    let next = if token < queued_polls {
        format!(
            "{base}/v1/statement/queued/{}/{}/{}",
            query.id,
            query.slug,
            token + 1
        )
    } else {
        format!(
            "{base}/v1/statement/executing/{}/{}/0",
            query.id, query.slug
        )
    };
    let document = query.document(base, &QUEUED_PROGRESS, "QUEUED", Some(next), None, None);
    json_response(Bytes::from(document.to_string()))
}

/// What a GET of an executing token found.
enum Outcome {
    Rows(Vec<Value>),
    Waiting,
    Finished,
    Failed(Failure),
}

async fn executing(query: &Query, token: u64, state: &DoubleState, base: &str) -> HttpResponse {
    if let Some(failure) = &query.rejection {
        let document = query.document(base, &QUEUED_PROGRESS, "FAILED", None, None, Some(failure));
        return json_response(Bytes::from(document.to_string()));
    }
    let settings = state.settings();
    let mut guard = query.progress.lock().await;
    // A plain reference, so that the borrows of its fields below stay apart.
    let progress = &mut *guard;
    // Trino's token rules (io.trino.server.protocol.Query#getCachedResult).
    if let Some((last_token, document)) = &progress.last {
        if token == *last_token {
            return json_response(document.clone());
        }
        if token < *last_token {
            return text(StatusCode::GONE, "Gone");
        }
    }
    if progress.next_token != Some(token) {
        return query_not_found();
    }
    progress.running_since.get_or_insert_with(Instant::now);
    query.start();
    if !settings.page_delay.is_zero() && !query.control.is_cancelled() {
        tokio::select! {
            () = tokio::time::sleep(settings.page_delay) => {}
            () = query.cancelled.notified() => {}
        }
    }
    let outcome = if query.control.is_cancelled() {
        Outcome::Failed(Failure::user_canceled())
    } else {
        match progress.events.as_mut() {
            None => Outcome::Finished,
            Some(feed) => tokio::select! {
                event = feed.events.recv() => match event {
                    Some(Event::Page { columns, rows, bytes }) => {
                        if columns.is_some() {
                            progress.columns = columns;
                        }
                        progress.pages += 1;
                        progress.processed_rows += rows.len() as u64;
                        progress.processed_bytes += bytes;
                        Outcome::Rows(rows)
                    }
                    Some(Event::Failed(failure)) => Outcome::Failed(failure),
                    None => Outcome::Finished,
                },
                () = tokio::time::sleep(settings.max_wait) => Outcome::Waiting,
                () = query.cancelled.notified() => Outcome::Failed(Failure::user_canceled()),
            },
        }
    };
    let next = format!(
        "{base}/v1/statement/executing/{}/{}/{}",
        query.id,
        query.slug,
        token + 1
    );
    let document = match outcome {
        Outcome::Rows(rows) => {
            query.document(base, progress, "RUNNING", Some(next), Some(rows), None)
        }
        Outcome::Waiting => query.document(base, progress, "RUNNING", Some(next), None, None),
        Outcome::Finished => {
            query.end(None);
            query.document(base, progress, "FINISHED", None, None, None)
        }
        Outcome::Failed(failure) => {
            query.end(Some(&failure));
            query.document(base, progress, "FAILED", None, None, Some(&failure))
        }
    };
    let finished = document.get("nextUri").is_none();
    let body = Bytes::from(document.to_string());
    if let (Value::Object(mut document), Some(feed)) = (document, &progress.events)
        && let Some(Value::Array(rows)) = document.remove("data")
    {
        feed.give_back(rows);
    }
    if finished {
        // Dropping the receiver ends the worker if it is still producing.
        progress.events = None;
        progress.next_token = None;
    } else {
        progress.next_token = Some(token + 1);
    }
    progress.last = Some((token, body.clone()));
    json_response(body)
}

impl Query {
    fn update(&self, change: impl FnOnce(&mut RecordedQuery)) {
        change(&mut lock(&self.record));
    }

    /// A client asked about the query.
    fn heartbeat(&self) {
        self.update(|record| record.last_heartbeat = SystemTime::now());
    }

    /// A client fetched an executing page: the query runs.
    fn start(&self) {
        self.update(|record| {
            if record.state == QueryState::Queued {
                record.state = QueryState::Running;
                record.started = Some(SystemTime::now());
            }
        });
    }

    /// The query finished, or failed with `failure`; the first end is final.
    fn end(&self, failure: Option<&Failure>) {
        self.update(|record| {
            if record.state.is_done() {
                return;
            }
            record.state = if failure.is_some() {
                QueryState::Failed
            } else {
                QueryState::Finished
            };
            record.error = failure.map(RecordedError::from);
            record.ended = Some(SystemTime::now());
        });
    }

    fn logged(&self) -> LoggedQuery {
        LoggedQuery {
            query: lock(&self.record).clone(),
            dispatched: self.rejection.is_none(),
        }
    }

    /// The query as `GET /v1/query/{queryId}` shows it: the fields of Trino's
    /// `QueryInfo` (and of its `session`) the double records.
    fn info(&self, base: &str) -> Value {
        let LoggedQuery { query, dispatched } = self.logged();
        let mut info = json!({
            "queryId": query.query_id,
            "session": {
                "queryId": query.query_id,
                "user": query.user,
                "originalUser": query.original_user(),
                "principal": query.principal,
                "source": query.source,
                "catalog": query.catalog,
                "schema": query.schema,
                "traceToken": query.trace_token,
                "clientInfo": query.client_info,
                "clientTags": query.client_tags,
            },
            "state": query.state.as_str(),
            "self": format!("{base}/v1/query/{}", query.query_id),
            "query": query.sql,
            "queryStats": {
                "createTime": recording::iso_timestamp(query.created),
                "executionStartTime": query.started.map(recording::iso_timestamp),
                "lastHeartbeat": recording::iso_timestamp(query.last_heartbeat),
                "endTime": query.ended.map(recording::iso_timestamp),
            },
            "resourceGroupId": dispatched.then(|| json!(["global"])),
            "scheduled": query.started.is_some(),
            "finalQueryInfo": query.state.is_done(),
        });
        if let Some(error) = &query.error {
            info["errorType"] = json!(error.error_type);
            info["errorCode"] = json!({
                "code": error.code,
                "name": error.name,
                "type": error.error_type,
            });
            info["failureInfo"] = json!({ "message": error.message });
        }
        info
    }

    /// A `QueryResults` document.
    fn document(
        &self,
        base: &str,
        progress: &Progress,
        state: &str,
        next: Option<String>,
        data: Option<Vec<Value>>,
        error: Option<&Failure>,
    ) -> Value {
        let mut document = json!({
            "id": self.id,
            "infoUri": format!("{base}/ui/query.html?{}", self.id),
            "stats": self.stats(progress, state),
            "warnings": [],
        });
        if let Some(next) = next {
            document["nextUri"] = Value::String(next);
        }
        if let Some(columns) = &progress.columns {
            document["columns"] = columns.clone();
        }
        if let Some(data) = data {
            document["data"] = Value::Array(data);
        }
        if let Some(error) = error {
            document["error"] = error.to_json();
        }
        document
    }

    /// Every `StatementStats` field, with splits standing in for pages so that
    /// `progressPercentage` moves and reaches 100 at the end.
    fn stats(&self, progress: &Progress, state: &str) -> Value {
        let millis = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        let elapsed = millis(self.created.elapsed());
        let queued_time = progress.running_since.map_or(elapsed, |since| {
            millis(since.saturating_duration_since(self.created))
        });
        // A query failed at dispatch was never scheduled.
        let scheduled = state != "QUEUED" && self.rejection.is_none();
        let done = matches!(state, "FINISHED" | "FAILED");
        let total_splits = match (scheduled, done) {
            (false, _) => 0,
            (true, true) => progress.pages.max(1),
            (true, false) => progress.pages + 1,
        };
        let completed_splits = if done { total_splits } else { progress.pages };
        let running_splits = total_splits - completed_splits;
        let cpu_time = elapsed.saturating_sub(queued_time);
        let peak_memory = if scheduled { 1024 * 1024 } else { 0 };
        let mut stats = json!({
            "state": state,
            "queued": state == "QUEUED",
            "scheduled": scheduled,
            "nodes": u64::from(scheduled),
            "totalSplits": total_splits,
            "queuedSplits": 0,
            "runningSplits": running_splits,
            "completedSplits": completed_splits,
            "cpuTimeMillis": cpu_time,
            "wallTimeMillis": cpu_time,
            "queuedTimeMillis": queued_time,
            "elapsedTimeMillis": elapsed,
            "finishingTimeMillis": 0,
            "physicalInputTimeMillis": 0,
            "processedRows": progress.processed_rows,
            "processedBytes": progress.processed_bytes,
            "physicalInputBytes": progress.processed_bytes,
            "physicalWrittenBytes": 0,
            "internalNetworkInputBytes": 0,
            "peakMemoryBytes": peak_memory,
            "spilledBytes": 0,
        });
        if scheduled {
            let percentage = if total_splits == 0 {
                0.0
            } else {
                completed_splits as f64 * 100.0 / total_splits as f64
            };
            stats["progressPercentage"] = json!(percentage);
            stats["runningPercentage"] = json!(100.0 - percentage);
            stats["rootStage"] = json!({
                "stageId": "0",
                "state": state,
                "done": done,
                "nodes": 1,
                "totalSplits": total_splits,
                "queuedSplits": 0,
                "runningSplits": running_splits,
                "completedSplits": completed_splits,
                "cpuTimeMillis": cpu_time,
                "wallTimeMillis": cpu_time,
                "processedRows": progress.processed_rows,
                "processedBytes": progress.processed_bytes,
                "physicalInputBytes": progress.processed_bytes,
                "failedTasks": 0,
                "coordinatorOnly": false,
                "subStages": [],
            });
        }
        stats
    }
}
