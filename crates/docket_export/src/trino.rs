//! A Trino REST client written for exports: it submits one statement, follows
//! `nextUri` page by page, and hands each page on as it arrives, so nothing ever
//! holds a whole result (see `reference/dependencies.md` §3.3 for the protocol).
//!
//! ```no_run
//! # async fn example() -> Result<(), docket_export::trino::TrinoError> {
//! use docket_export::trino::{TrinoClient, TrinoConfig};
//!
//! let mut config = TrinoConfig::new("http://trino:8080", "docket");
//! config.catalog = Some("hive".to_owned());
//! let client = TrinoClient::new(config)?;
//! let mut stream = client.query("SELECT * FROM orders").await?;
//! while let Some(page) = stream.next_page().await? {
//!     // Write page.rows somewhere; page.columns says what they are.
//!     println!("{} rows, {} so far", page.rows.len(), page.stats.processed_rows);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! **Cancellation.** [`QueryStream::cancel`] sends Trino the `DELETE` that stops the
//! query; dropping an unfinished stream does the same from a spawned task, best
//! effort. To stop on a `tokio_util::sync::CancellationToken`, race it against the
//! next page and cancel when it wins (`next_page` is safe to abandon part way: the
//! stream only moves on once a page has fully arrived):
//!
//! ```no_run
//! # async fn example(
//! #     mut stream: docket_export::trino::QueryStream,
//! #     token: tokio_util::sync::CancellationToken,
//! # ) -> Result<(), docket_export::trino::TrinoError> {
//! loop {
//!     tokio::select! {
//!         biased;
//!         () = token.cancelled() => {
//!             stream.cancel().await?;
//!             break;
//!         }
//!         page = stream.next_page() => match page? {
//!             Some(page) => { /* write page.rows */ }
//!             None => break,
//!         },
//!     }
//! }
//! # Ok(())
//! # }
//! ```

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use reqwest::{Method, StatusCode, header};
use serde::Deserialize;
use serde_json::Value;
use tracing::Instrument as _;

use crate::cells::{Spans, TextRows};

/// How the client authenticates. Its `Debug` output never shows the secret.
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrinoAuth {
    /// No `Authorization` header (a Trino without authentication).
    #[default]
    None,
    /// HTTP basic authentication.
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// A bearer token (JWT or OAuth 2.0 access token).
    Bearer {
        /// The token.
        token: String,
    },
}

impl fmt::Debug for TrinoAuth {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => formatter.write_str("None"),
            Self::Basic { username, .. } => formatter
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
            Self::Bearer { .. } => formatter
                .debug_struct("Bearer")
                .field("token", &"<redacted>")
                .finish(),
        }
    }
}

/// Where Trino is and how to talk to it. Build it with [`TrinoConfig::new`] and set
/// the fields that differ from the defaults.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TrinoConfig {
    /// The coordinator's base URL, such as `http://trino:8080`.
    pub url: String,
    /// Sent as `X-Trino-User` with every request.
    pub user: String,
    /// The default catalog (`X-Trino-Catalog`).
    pub catalog: Option<String>,
    /// The default schema (`X-Trino-Schema`).
    pub schema: Option<String>,
    /// The client name Trino records for the query (`X-Trino-Source`).
    pub source: String,
    /// Credentials sent with every request.
    pub auth: TrinoAuth,
    /// The limit for one HTTP request, body included. Trino answers each page
    /// within about a second, so this bounds a stuck connection, not a query.
    pub request_timeout: Duration,
    /// The limit for opening a connection.
    pub connect_timeout: Duration,
    /// How often a 429, 502, 503 or 504 answer, an empty 200 answer or (for the
    /// idempotent page GETs) a refused connection is retried before giving up.
    pub max_retries: u32,
    /// The wait before the first retry; it doubles for each further one.
    pub retry_backoff: Duration,
    /// The largest answer read from Trino: a page is held whole while it is written,
    /// so a larger one is refused ([`TrinoError::Protocol`]) rather than read. Trino's
    /// pages are about a megabyte unless a client asks for more.
    pub max_response_bytes: usize,
}

impl TrinoConfig {
    /// A configuration for `url` as `user`, with the defaults: no catalog or schema,
    /// source `docket`, no authentication, 60 s per request, 10 s to connect, 5
    /// retries starting at 100 ms, and answers of at most 64 MiB.
    pub fn new(url: impl Into<String>, user: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            user: user.into(),
            catalog: None,
            schema: None,
            source: "docket".to_owned(),
            auth: TrinoAuth::None,
            request_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            max_retries: 5,
            retry_backoff: Duration::from_millis(100),
            max_response_bytes: 64 * 1024 * 1024,
        }
    }
}

/// Why talking to Trino failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrinoError {
    /// The configuration cannot work (an unparsable URL, say).
    #[error("invalid trino configuration: {message}")]
    Config {
        /// What is wrong with it.
        message: String,
    },
    /// Trino ran the query and reported an error.
    #[error("trino query {query_id} failed with {name} ({kind}): {message}")]
    Query {
        /// The query id.
        query_id: String,
        /// Trino's error name, such as `SYNTAX_ERROR` or `TABLE_NOT_FOUND`.
        name: String,
        /// Trino's error type: `USER_ERROR`, `INTERNAL_ERROR`,
        /// `INSUFFICIENT_RESOURCES` or `EXTERNAL`.
        kind: String,
        /// Trino's message (it usually starts with `line L:C:`).
        message: String,
        /// The line of the offending text, from 1.
        line: Option<u32>,
        /// The column of the offending text, from 1.
        column: Option<u32>,
    },
    /// The query was cancelled (Trino reported `USER_CANCELED`).
    #[error("trino query {query_id} was cancelled")]
    Cancelled {
        /// The query id.
        query_id: String,
    },
    /// Trino answered with an HTTP status that is not part of the protocol's happy
    /// path (after retries, for the retryable ones).
    #[error("trino answered {method} {url} with http {status}{}", detail(body))]
    Http {
        /// The request method.
        method: String,
        /// The request URL.
        url: String,
        /// The status code.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// A request did not complete within [`TrinoConfig::request_timeout`].
    #[error("trino did not answer {url} within {timeout:?}")]
    Timeout {
        /// The request URL.
        url: String,
        /// The limit that passed.
        timeout: Duration,
    },
    /// Trino could not be reached, or the connection broke.
    #[error("could not reach trino at {url}")]
    Transport {
        /// The request URL.
        url: String,
        /// The underlying error.
        #[source]
        source: reqwest::Error,
    },
    /// Trino answered something that is not a `QueryResults` document.
    #[error("trino sent a response that does not follow its protocol: {message}")]
    Protocol {
        /// What was wrong with it.
        message: String,
        /// The JSON error, when the document did not parse.
        #[source]
        source: Option<serde_json::Error>,
    },
}

impl TrinoError {
    /// The class of the failure, low in cardinality, as a span's `error.type`
    /// names it (`query`, `timeout`, `http`, …).
    #[must_use]
    pub fn error_type(&self) -> &'static str {
        match self {
            Self::Config { .. } => "config",
            Self::Query { .. } => "query",
            Self::Cancelled { .. } => "cancelled",
            Self::Http { .. } => "http",
            Self::Timeout { .. } => "timeout",
            Self::Transport { .. } => "transport",
            Self::Protocol { .. } => "protocol",
        }
    }
}

fn detail(body: &str) -> String {
    if body.is_empty() {
        String::new()
    } else {
        format!(": {body}")
    }
}

/// A result column as Trino describes it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Column {
    /// The column name.
    pub name: String,
    /// The type as text, such as `decimal(12,2)` or `varchar`.
    #[serde(rename = "type")]
    pub type_name: String,
    /// The structured type, which Trino always sends.
    #[serde(default)]
    pub type_signature: Option<TypeSignature>,
}

impl Column {
    /// The type without parameters, such as `decimal` or `varchar`.
    pub fn raw_type(&self) -> &str {
        match &self.type_signature {
            Some(signature) => &signature.raw_type,
            None => self.type_name.split('(').next().unwrap_or(&self.type_name),
        }
    }
}

/// A type and its parameters.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TypeSignature {
    /// The type without parameters, such as `decimal`.
    pub raw_type: String,
    /// The parameters: lengths, precisions, scales, nested types.
    #[serde(default)]
    pub arguments: Vec<TypeArgument>,
}

/// One type parameter.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct TypeArgument {
    /// `LONG` for a number, `TYPE` for a nested type, `NAMED_TYPE` for a row field.
    pub kind: String,
    /// The number, or the nested signature.
    pub value: Value,
}

/// Trino's `StatementStats`: where the query is and how much it has read.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[non_exhaustive]
pub struct Stats {
    /// `QUEUED`, `PLANNING`, `STARTING`, `RUNNING`, `FINISHING`, `FINISHED` or
    /// `FAILED`; informational only.
    pub state: String,
    /// Whether the query waits in a queue.
    pub queued: bool,
    /// Whether its work has been scheduled on workers.
    pub scheduled: bool,
    /// Workers involved.
    pub nodes: u64,
    /// Splits in total.
    pub total_splits: u64,
    /// Splits waiting.
    pub queued_splits: u64,
    /// Splits running.
    pub running_splits: u64,
    /// Splits done.
    pub completed_splits: u64,
    /// CPU time spent.
    pub cpu_time_millis: u64,
    /// Wall time spent by all threads.
    pub wall_time_millis: u64,
    /// Time spent queued.
    pub queued_time_millis: u64,
    /// Time since the query was submitted.
    pub elapsed_time_millis: u64,
    /// Rows read by the query so far (input, not output rows).
    pub processed_rows: u64,
    /// Bytes read by the query so far.
    pub processed_bytes: u64,
    /// Bytes read from storage.
    pub physical_input_bytes: u64,
    /// The most memory the query held.
    pub peak_memory_bytes: u64,
    /// Bytes spilled to disk.
    pub spilled_bytes: u64,
    /// Completed splits in percent, once the query is scheduled.
    pub progress_percentage: Option<f64>,
}

/// One response's worth of a result.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Page {
    /// The result's columns, once Trino has sent them (every page after that
    /// shares the same list).
    pub columns: Option<Arc<[Column]>>,
    /// The rows of this page, in column order, as Trino's JSON encodes them (wide
    /// integers, decimals, dates and timestamps are strings). Often empty.
    pub rows: Vec<Vec<Value>>,
    /// The query's statistics as of this page.
    pub stats: Stats,
}

/// A page as [`QueryStream::next_text_page`] gives it: [`Page`] with its rows still
/// Trino's JSON text.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TextPage {
    /// As [`Page::columns`].
    pub columns: Option<Arc<[Column]>>,
    /// The rows of this page, each cell read from the text as it is used.
    pub rows: TextRows,
    /// As [`Page::stats`].
    pub stats: Stats,
}

/// A small result read whole by [`QueryStream::collect`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Collected {
    /// The query id.
    pub query_id: String,
    /// The columns (empty if Trino sent none).
    pub columns: Arc<[Column]>,
    /// The rows, at most the limit.
    pub rows: Vec<Vec<Value>>,
    /// Whether the result had more rows than the limit (the query was then
    /// cancelled).
    pub truncated: bool,
    /// The statistics of the last page read.
    pub stats: Stats,
}

/// Who one caller's queries run as and how they are labelled for Trino's query
/// log: the headers [`TrinoClient::with_session`] adds to a client's requests.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct Session {
    /// The session user (`X-Trino-User`) in place of [`TrinoConfig::user`]: the
    /// person a connection with impersonation runs queries as. The connection's
    /// own credentials still authenticate the principal, and Trino's access
    /// control decides whether it may impersonate this user.
    pub user: Option<String>,
    /// `X-Trino-Client-Tags`, sent with each statement.
    pub client_tags: Vec<String>,
    /// `X-Trino-Client-Info`, sent with each statement.
    pub client_info: Option<String>,
    /// `X-Trino-Trace-Token`, sent with each statement.
    pub trace_token: Option<String>,
    /// Where the id of each submitted query is written down, if anywhere.
    pub query_ids: Option<Arc<QueryIds>>,
    /// Writes the active trace into every request (`traceparent`, so Trino's own
    /// tracing joins the trace), when tracing is on.
    pub propagate: Option<crate::trace::Propagate>,
    /// The form of a statement its span may carry as `db.query.text`; none
    /// without it.
    pub statement_text: Option<crate::trace::StatementText>,
}

/// The ids of the queries a caller's session submitted, in order: at most
/// [`QueryIds::LIMIT`] of them, and how many more there were.
#[derive(Debug, Default)]
pub struct QueryIds {
    recorded: Mutex<(Vec<String>, u64)>,
}

impl QueryIds {
    /// The most ids kept; later ones are only counted.
    pub const LIMIT: usize = 32;

    fn record(&self, id: &str) {
        let mut recorded = self.recorded.lock().unwrap_or_else(PoisonError::into_inner);
        if recorded.0.len() < Self::LIMIT {
            recorded.0.push(id.to_owned());
        } else {
            recorded.1 += 1;
        }
    }

    /// The ids kept, and how many more queries there were.
    pub fn snapshot(&self) -> (Vec<String>, u64) {
        self.recorded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A connection to one Trino coordinator. Cheap to clone; clones share the HTTP
/// connection pool.
#[derive(Clone, Debug)]
pub struct TrinoClient {
    inner: Arc<Inner>,
    session: Arc<Session>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    config: TrinoConfig,
    statement_url: reqwest::Url,
}

impl TrinoClient {
    /// A client for `config`.
    ///
    /// # Errors
    ///
    /// [`TrinoError::Config`] when the URL is not an `http` or `https` URL or the
    /// HTTP client cannot be built.
    pub fn new(config: TrinoConfig) -> Result<Self, TrinoError> {
        let invalid = |message: String| TrinoError::Config { message };
        let mut base = reqwest::Url::parse(&config.url)
            .map_err(|error| invalid(format!("url `{}`: {error}", config.url)))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "url `{}` is not an http or https url",
                config.url
            )));
        }
        // Joining onto a base without a trailing slash would drop its last segment
        // (a Trino behind a path prefix).
        if !base.path().ends_with('/') {
            base.set_path(&format!("{}/", base.path()));
        }
        let statement_url = base
            .join("v1/statement")
            .map_err(|error| invalid(format!("url `{}`: {error}", config.url)))?;
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|error| invalid(format!("http client: {error}")))?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                config,
                statement_url,
            }),
            session: Arc::default(),
        })
    }

    /// This client with `session`'s user and labels on every request; it shares
    /// the connection pool.
    #[must_use]
    pub fn with_session(&self, session: Session) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            session: Arc::new(session),
        }
    }

    /// The session user queries run as: the session's, else the configuration's.
    pub fn session_user(&self) -> &str {
        self.session
            .user
            .as_deref()
            .unwrap_or(&self.inner.config.user)
    }

    /// Submits `sql` (one statement; trailing semicolons and whitespace are
    /// dropped, since Trino rejects them) and returns the stream of its pages.
    ///
    /// # Errors
    ///
    /// [`TrinoError::Http`], [`TrinoError::Timeout`], [`TrinoError::Transport`] or
    /// [`TrinoError::Protocol`] when the statement could not be submitted, and
    /// [`TrinoError::Query`] when Trino rejected it at once.
    pub async fn query(&self, sql: &str) -> Result<QueryStream, TrinoError> {
        let sql = sql.trim_end_matches(|c: char| c == ';' || c.is_whitespace());
        let url = self.inner.statement_url.as_str();
        let first = self
            .inner
            .exchange(&self.session, Method::POST, url, Some(sql), false)
            .await?;
        if let Some(ids) = &self.session.query_ids {
            ids.record(&first.id);
        }
        Ok(QueryStream {
            client: self.clone(),
            query_id: first.id.clone(),
            info_uri: first.info_uri.clone(),
            next_uri: first.next_uri.clone(),
            pending: Some(first),
            columns: None,
            stats: Stats::default(),
        })
    }
}

/// What came back in place of a document, and may go away if asked again.
enum Transient {
    Status(StatusCode, String),
    EmptyBody,
    Refused(reqwest::Error),
}

impl Inner {
    /// One protocol request with the session headers and credentials; retries what
    /// the protocol says to retry.
    async fn exchange(
        &self,
        session: &Session,
        method: Method,
        url: &str,
        sql: Option<&str>,
        idempotent: bool,
    ) -> Result<QueryResults, TrinoError> {
        let span = self.span(session, &method, sql);
        let exchanged = self
            .exchange_in_span(session, method, url, sql, idempotent, &span)
            .instrument(span.clone())
            .await;
        if let Err(error) = &exchanged {
            span.record("otel.status_code", "error");
            span.record("error.type", error.error_type());
        }
        exchanged
    }

    /// The client span of one protocol request: a statement's submission or a page.
    fn span(&self, session: &Session, method: &Method, sql: Option<&str>) -> tracing::Span {
        let (address, port) = crate::trace::server_of(&self.statement_url);
        let name = match sql {
            Some(_) => "trino POST /v1/statement",
            None => "trino GET",
        };
        let span = tracing::info_span!(
            "trino",
            otel.name = name,
            otel.kind = "client",
            "db.system.name" = "trino",
            "http.request.method" = method.as_str(),
            "server.address" = address,
            "server.port" = i64::from(port),
            "http.response.status_code" = tracing::field::Empty,
            "db.query.text" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        if let (Some(sql), Some(text)) = (sql, session.statement_text) {
            span.record("db.query.text", text(sql));
        }
        span
    }

    async fn exchange_in_span(
        &self,
        session: &Session,
        method: Method,
        url: &str,
        sql: Option<&str>,
        idempotent: bool,
        span: &tracing::Span,
    ) -> Result<QueryResults, TrinoError> {
        let mut attempt = 0;
        loop {
            let transient = match self.request(session, method.clone(), url, sql).send().await {
                Err(error) if idempotent && error.is_connect() => Transient::Refused(error),
                Err(error) => return Err(self.transport_error(url, error)),
                Ok(response) => {
                    let status = response.status();
                    span.record("http.response.status_code", i64::from(status.as_u16()));
                    let body = self.read_body(response, &method, url).await?;
                    if status == StatusCode::OK {
                        if !body.iter().all(u8::is_ascii_whitespace) {
                            return parse_results(body);
                        }
                        Transient::EmptyBody
                    } else {
                        let text = body_start(&body);
                        if !matches!(status.as_u16(), 429 | 502 | 503 | 504) {
                            return Err(http_error(&method, url, status, text));
                        }
                        Transient::Status(status, text)
                    }
                }
            };
            if attempt >= self.config.max_retries {
                return Err(match transient {
                    Transient::Status(status, text) => http_error(&method, url, status, text),
                    Transient::EmptyBody => TrinoError::Protocol {
                        message: format!("{method} {url} was answered with an empty body"),
                        source: None,
                    },
                    Transient::Refused(error) => self.transport_error(url, error),
                });
            }
            tokio::time::sleep(self.backoff(attempt)).await;
            attempt += 1;
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        self.config
            .retry_backoff
            .saturating_mul(2_u32.saturating_pow(attempt))
            .min(Duration::from_secs(2))
    }

    fn request(
        &self,
        session: &Session,
        method: Method,
        url: &str,
        sql: Option<&str>,
    ) -> reqwest::RequestBuilder {
        let config = &self.config;
        let user = session.user.as_deref().unwrap_or(&config.user);
        let mut trace = reqwest::header::HeaderMap::new();
        if let Some(propagate) = session.propagate {
            propagate(&mut trace);
        }
        let mut request = self
            .http
            .request(method, url)
            .headers(trace)
            .header("X-Trino-User", user)
            .header("X-Trino-Source", &config.source);
        if let Some(sql) = sql {
            request = request
                .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
                .body(sql.to_owned());
            if let Some(catalog) = &config.catalog {
                request = request.header("X-Trino-Catalog", catalog);
            }
            if let Some(schema) = &config.schema {
                request = request.header("X-Trino-Schema", schema);
            }
            // The labels Trino's query log keeps: sent with the statement only.
            if !session.client_tags.is_empty() {
                request = request.header("X-Trino-Client-Tags", session.client_tags.join(","));
            }
            if let Some(info) = &session.client_info {
                request = request.header("X-Trino-Client-Info", info);
            }
            if let Some(token) = &session.trace_token {
                request = request.header("X-Trino-Trace-Token", token);
            }
        }
        // Trino authenticates every request, page GETs and DELETEs included.
        match &config.auth {
            TrinoAuth::None => request,
            TrinoAuth::Basic { username, password } => request.basic_auth(username, Some(password)),
            TrinoAuth::Bearer { token } => request.bearer_auth(token),
        }
    }

    /// An answer's whole body, refused once it passes
    /// [`TrinoConfig::max_response_bytes`] (by its `Content-Length`, or as it arrives).
    async fn read_body(
        &self,
        mut response: reqwest::Response,
        method: &Method,
        url: &str,
    ) -> Result<Bytes, TrinoError> {
        let limit = self.config.max_response_bytes;
        let too_large = || TrinoError::Protocol {
            message: format!(
                "{method} {url} was answered with more than {limit} bytes (max_response_bytes)"
            ),
            source: None,
        };
        let announced = response.content_length().unwrap_or(0);
        if announced > limit as u64 {
            return Err(too_large());
        }
        let mut body = BytesMut::with_capacity(announced as usize);
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| self.transport_error(url, error))?
        {
            if body.len() + chunk.len() > limit {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body.freeze())
    }

    fn transport_error(&self, url: &str, error: reqwest::Error) -> TrinoError {
        if error.is_timeout() {
            TrinoError::Timeout {
                url: url.to_owned(),
                timeout: self.config.request_timeout,
            }
        } else {
            TrinoError::Transport {
                url: url.to_owned(),
                source: error,
            }
        }
    }

    /// `DELETE uri`, which Trino answers with 204 No Content.
    async fn delete(&self, session: &Session, uri: &str) -> Result<(), TrinoError> {
        let mut attempt = 0;
        loop {
            let response = self
                .request(session, Method::DELETE, uri, None)
                .send()
                .await
                .map_err(|error| self.transport_error(uri, error))?;
            let status = response.status();
            if status == StatusCode::NO_CONTENT {
                return Ok(());
            }
            let retryable = matches!(status.as_u16(), 429 | 502 | 503 | 504);
            if !retryable || attempt >= self.config.max_retries {
                let body = response.bytes().await.unwrap_or_default();
                return Err(http_error(&Method::DELETE, uri, status, body_start(&body)));
            }
            tokio::time::sleep(self.backoff(attempt)).await;
            attempt += 1;
        }
    }
}

fn http_error(method: &Method, url: &str, status: StatusCode, body: String) -> TrinoError {
    TrinoError::Http {
        method: method.to_string(),
        url: url.to_owned(),
        status: status.as_u16(),
        body,
    }
}

/// The start of an error body, enough to say what went wrong.
fn body_start(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Trino's `QueryResults` document, as far as the client needs it: read with its rows
/// as [`Spans`] borrowed from the body, then kept with them as [`TextRows`].
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryResults<Rows = TextRows> {
    id: String,
    #[serde(default)]
    info_uri: Option<String>,
    #[serde(default)]
    next_uri: Option<String>,
    #[serde(default)]
    columns: Option<Vec<Column>>,
    #[serde(default = "Option::default")]
    data: Option<Rows>,
    stats: Stats,
    #[serde(default)]
    error: Option<QueryError>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryError {
    #[serde(default)]
    message: String,
    #[serde(default)]
    error_name: String,
    #[serde(default)]
    error_type: String,
    #[serde(default)]
    error_location: Option<ErrorLocation>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ErrorLocation {
    line_number: u32,
    column_number: u32,
}

/// Reads a `QueryResults` document in one pass, its rows kept as the body's text.
fn parse_results(body: Bytes) -> Result<QueryResults, TrinoError> {
    let protocol = |message: String, source| TrinoError::Protocol { message, source };
    let text = String::from_utf8(Vec::from(body)).map_err(|error| {
        protocol(
            format!("a QueryResults document that is not UTF-8 ({error})"),
            None,
        )
    })?;
    let document: QueryResults<Spans<'_>> = serde_json::from_str(&text).map_err(|error| {
        protocol(
            format!("not a QueryResults document ({error})"),
            Some(error),
        )
    })?;
    let QueryResults {
        id,
        info_uri,
        next_uri,
        columns,
        data,
        stats,
        error,
    } = document;
    let located = match data {
        Some(spans) => Some(
            spans
                .locate(&text)
                .map_err(|error| protocol(error.to_string(), None))?,
        ),
        None => None,
    };
    Ok(QueryResults {
        id,
        info_uri,
        next_uri,
        columns,
        data: located.map(|located| TextRows::new(text, located)),
        stats,
        error,
    })
}

impl QueryError {
    fn into_error(self, query_id: &str) -> TrinoError {
        if self.error_name == "USER_CANCELED" {
            return TrinoError::Cancelled {
                query_id: query_id.to_owned(),
            };
        }
        TrinoError::Query {
            query_id: query_id.to_owned(),
            name: self.error_name,
            kind: self.error_type,
            message: self.message,
            line: self.error_location.as_ref().map(|at| at.line_number),
            column: self.error_location.as_ref().map(|at| at.column_number),
        }
    }
}

/// A running query, read one page at a time with [`QueryStream::next_page`].
///
/// It holds at most one page. Dropping it before the end cancels the query (a
/// `DELETE` from a spawned task, when a tokio runtime is there to run it).
#[derive(Debug)]
pub struct QueryStream {
    client: TrinoClient,
    query_id: String,
    info_uri: Option<String>,
    next_uri: Option<String>,
    /// The answer to the submission, handed out by the first `next_page`.
    pending: Option<QueryResults>,
    columns: Option<Arc<[Column]>>,
    stats: Stats,
}

impl QueryStream {
    /// The query id Trino assigned.
    pub fn query_id(&self) -> &str {
        &self.query_id
    }

    /// The query's page in Trino's web UI.
    pub fn info_uri(&self) -> Option<&str> {
        self.info_uri.as_deref()
    }

    /// The columns, once Trino has sent them.
    pub fn columns(&self) -> Option<&Arc<[Column]>> {
        self.columns.as_ref()
    }

    /// The statistics of the latest page: state, rows and bytes processed, progress.
    pub fn progress(&self) -> &Stats {
        &self.stats
    }

    /// Whether Trino has sent the last page.
    pub fn is_finished(&self) -> bool {
        self.pending.is_none() && self.next_uri.is_none()
    }

    /// The next page, or `None` once the query has finished successfully. Pages
    /// may be empty while the query is queued or running.
    ///
    /// # Errors
    ///
    /// [`TrinoError::Query`] when the query failed and [`TrinoError::Cancelled`]
    /// when it was cancelled (the stream has then ended), or the transport errors
    /// of [`TrinoClient::query`] (the stream can then still be cancelled).
    pub async fn next_page(&mut self) -> Result<Option<Page>, TrinoError> {
        let Some(page) = self.next_text_page().await? else {
            return Ok(None);
        };
        let rows = page
            .rows
            .to_values()
            .map_err(|error| TrinoError::Protocol {
                message: format!("a page's rows could not be decoded ({error})"),
                source: Some(error),
            })?;
        Ok(Some(Page {
            columns: page.columns,
            rows,
            stats: page.stats,
        }))
    }

    /// The next page as [`next_page`](Self::next_page) gives it, its rows kept as
    /// Trino's text: cheaper for a page that is written out once, as an export's is.
    ///
    /// # Errors
    ///
    /// Those of [`next_page`](Self::next_page).
    pub async fn next_text_page(&mut self) -> Result<Option<TextPage>, TrinoError> {
        let results = match self.pending.take() {
            Some(results) => results,
            None => {
                let Some(uri) = self.next_uri.clone() else {
                    return Ok(None);
                };
                let client = &self.client;
                client
                    .inner
                    .exchange(&client.session, Method::GET, &uri, None, true)
                    .await?
            }
        };
        self.next_uri = results.next_uri;
        if self.columns.is_none()
            && let Some(columns) = results.columns
        {
            self.columns = Some(columns.into());
        }
        self.stats = results.stats;
        if let Some(error) = results.error {
            // A failed query has no next page; there is nothing left to cancel.
            self.next_uri = None;
            return Err(error.into_error(&self.query_id));
        }
        Ok(Some(TextPage {
            columns: self.columns.clone(),
            rows: results.data.unwrap_or_default(),
            stats: self.stats.clone(),
        }))
    }

    /// Cancels the query: `DELETE` on the next URI, which Trino answers with 204.
    /// Does nothing for a query that has finished.
    ///
    /// # Errors
    ///
    /// When Trino could not be reached or answered anything but 204.
    ///
    /// Cancellation-safe: the next URI is let go only once the `DELETE` has been
    /// answered, so if this future is dropped midway (the task running it was
    /// aborted), dropping the stream still sends the `DELETE`.
    pub async fn cancel(mut self) -> Result<(), TrinoError> {
        self.pending = None;
        let Some(uri) = self.next_uri.clone() else {
            return Ok(());
        };
        let outcome = self.client.inner.delete(&self.client.session, &uri).await;
        self.next_uri = None;
        outcome
    }

    /// Reads up to `limit` rows; if the result has more, cancels the query and
    /// says so with [`Collected::truncated`]. For small results such as a preview.
    ///
    /// # Errors
    ///
    /// Those of [`QueryStream::next_page`].
    pub async fn collect(mut self, limit: usize) -> Result<Collected, TrinoError> {
        let mut rows: Vec<Vec<Value>> = Vec::new();
        let mut truncated = false;
        while let Some(page) = self.next_page().await? {
            let room = limit - rows.len();
            if page.rows.len() > room {
                rows.extend(page.rows.into_iter().take(room));
                truncated = true;
                break;
            }
            rows.extend(page.rows);
        }
        let collected = Collected {
            query_id: self.query_id.clone(),
            columns: self.columns.clone().unwrap_or_else(|| Arc::from([])),
            rows,
            truncated,
            stats: self.stats.clone(),
        };
        if truncated && let Err(error) = self.cancel().await {
            // The rows are complete either way; an uncancelled query ends on
            // Trino's abandoned-query timeout.
            tracing::debug!(%error, "could not cancel a truncated trino query");
        }
        Ok(collected)
    }
}

impl Drop for QueryStream {
    fn drop(&mut self) {
        let Some(uri) = self.next_uri.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let client = self.client.clone();
        runtime.spawn(async move {
            if let Err(error) = client.inner.delete(&client.session, &uri).await {
                tracing::debug!(%error, "could not cancel a dropped trino query");
            }
        });
    }
}

/// The row estimate of an `EXPLAIN` plan's root: the first `Estimates: {rows: N`
/// in the text, or `None` when Trino could not estimate (`rows: ?`) or the text
/// has no estimate.
pub fn explain_estimated_rows(plan: &str) -> Option<u64> {
    let (_, rest) = plan.split_once("Estimates: {rows: ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_secrets() {
        let mut config = TrinoConfig::new("http://trino:8080", "docket");
        config.auth = TrinoAuth::Basic {
            username: "alice".to_owned(),
            password: "hunter2".to_owned(),
        };
        let shown = format!("{config:?}");
        assert!(
            shown.contains("alice") && !shown.contains("hunter2"),
            "{shown}"
        );
        config.auth = TrinoAuth::Bearer {
            token: "s3cr3t".to_owned(),
        };
        assert!(!format!("{config:?}").contains("s3cr3t"));
    }

    #[test]
    fn statement_url_keeps_a_path_prefix() {
        let client = TrinoClient::new(TrinoConfig::new("http://gateway/trino", "docket"))
            .expect("valid configuration");
        assert_eq!(
            client.inner.statement_url.as_str(),
            "http://gateway/trino/v1/statement"
        );
        let error =
            TrinoClient::new(TrinoConfig::new("ftp://trino", "docket")).expect_err("not http");
        assert!(matches!(error, TrinoError::Config { .. }), "{error}");
    }

    #[test]
    fn estimates_are_read_from_the_plan_root() {
        let plan = "Fragment 0 [SINGLE]\n    Output[columnNames = [id]]\n    │   Estimates: {rows: 1000000 (8.58MB), cpu: ?, memory: 0B, network: ?}\n        Estimates: {rows: 5 (?)}";
        assert_eq!(explain_estimated_rows(plan), Some(1_000_000));
        assert_eq!(
            explain_estimated_rows("Estimates: {rows: ? (?), cpu: ?}"),
            None
        );
        assert_eq!(explain_estimated_rows("no plan"), None);
    }

    #[test]
    fn errors_name_trino_error_and_position() {
        let error = QueryError {
            message: "line 1:10: mismatched input 'FORM'".to_owned(),
            error_name: "SYNTAX_ERROR".to_owned(),
            error_type: "USER_ERROR".to_owned(),
            error_location: Some(ErrorLocation {
                line_number: 1,
                column_number: 10,
            }),
        }
        .into_error("q1");
        assert_eq!(
            error.to_string(),
            "trino query q1 failed with SYNTAX_ERROR (USER_ERROR): line 1:10: mismatched input 'FORM'"
        );
        assert!(matches!(
            error,
            TrinoError::Query {
                line: Some(1),
                column: Some(10),
                ..
            }
        ));
    }

    #[test]
    fn a_document_is_read_in_one_pass_with_its_rows_as_text() {
        let body = r#"{"id":"q1","stats":{"state":"RUNNING"},"data":[[1,"a\"b"],[null,{"k":[2]}]],"nextUri":"http://t/2"}"#;
        let results = parse_results(Bytes::from(body)).expect("a document");
        assert_eq!(results.next_uri.as_deref(), Some("http://t/2"));
        let rows = results.data.expect("rows");
        assert_eq!(
            rows.to_values().expect("values"),
            [
                vec![serde_json::json!(1), serde_json::json!("a\"b")],
                vec![Value::Null, serde_json::json!({"k": [2]})],
            ]
        );
        for bad in [
            r#"{"id":"q1","stats":{"state":"RUNNING"},"data":[1,2]}"#.as_bytes(),
            br#"{"id":"q1","stats":{"state":"RUNNING"},"data":[["\x"]]}"#,
            b"{\"id\":\"q1\",\"stats\":{\"state\":\"RUNNING\"},\"data\":[[\"\xff\"]]}",
        ] {
            let error = parse_results(Bytes::copy_from_slice(bad)).expect_err("refused");
            assert!(matches!(error, TrinoError::Protocol { .. }), "{error}");
        }
    }
}
