//! The load generator: the same JSON-RPC requests, byte for byte, to whichever
//! server it is pointed at, over keep-alive HTTP/1.1 connections (one per
//! client), and the two ways of measuring an operation — one caller in sequence
//! for latency, many concurrent callers for a fixed time for throughput.

use std::future::Future;
use std::str::FromStr as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use crate::docket::BENCH_TOOL;
use crate::system::{CpuMeter, CpuUse};

/// The protocol version both servers speak.
const PROTOCOL_VERSION: &str = "2026-07-28";

/// One prepared request: its MCP headers and its body.
#[derive(Clone)]
pub(crate) struct Prepared {
    headers: HeaderMap,
    /// Built once; cloning shares the buffer, so sending copies nothing.
    body: Bytes,
}

impl Prepared {
    /// The request as an in-process `http::Request` to the MCP endpoint on a loopback
    /// host, for handing to the service without a connection.
    pub(crate) fn to_http(&self) -> http::Request<http_body_util::Full<Bytes>> {
        let mut request = http::Request::new(http_body_util::Full::new(self.body.clone()));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = http::Uri::from_static(docket_server::MCP_PATH);
        *request.headers_mut() = self.headers.clone();
        request
            .headers_mut()
            .insert(http::header::HOST, HeaderValue::from_static("127.0.0.1"));
        request
    }

    /// The same request with `_meta.<key>` set to `value` (a `traceparent`, say).
    pub(crate) fn with_meta(&self, key: &str, value: Value) -> anyhow::Result<Prepared> {
        let mut body: Value =
            serde_json::from_slice(&self.body).context("a request is not JSON")?;
        body["params"]["_meta"][key] = value;
        Ok(Prepared {
            headers: self.headers.clone(),
            body: Bytes::from(serde_json::to_vec(&body)?),
        })
    }
}

/// The `_meta` a client that declares the tasks extension sends on every request.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": { "io.modelcontextprotocol/tasks": {} }
        },
        "io.modelcontextprotocol/clientInfo": { "name": "docket-bench", "version": "0" }
    })
}

/// `tools/call` of `tool` from a client that declares no extension, so the call
/// is answered directly, however long it runs.
pub(crate) fn direct_call_request(tool: &str, arguments: Value) -> anyhow::Result<Prepared> {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": { "name": "docket-bench", "version": "0" }
    });
    prepare(
        "tools/call",
        tool,
        json!({ "name": tool, "arguments": arguments, "_meta": meta }),
    )
}

fn prepare(method: &str, name: &str, params: Value) -> anyhow::Result<Prepared> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.insert(
        "mcp-protocol-version",
        HeaderValue::from_static(PROTOCOL_VERSION),
    );
    headers.insert("mcp-method", HeaderValue::from_str(method)?);
    headers.insert("mcp-name", HeaderValue::from_str(name)?);
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params });
    Ok(Prepared {
        headers,
        body: Bytes::from(serde_json::to_vec(&body)?),
    })
}

/// `tools/call bench_task {}` declaring the tasks extension: answered with a
/// `CreateTaskResult`.
pub(crate) fn create_request() -> anyhow::Result<Prepared> {
    prepare(
        "tools/call",
        BENCH_TOOL,
        json!({ "name": BENCH_TOOL, "arguments": {}, "_meta": meta() }),
    )
}

/// `tools/call` of `tool` declaring the tasks extension.
pub(crate) fn task_call_request(tool: &str, arguments: Value) -> anyhow::Result<Prepared> {
    prepare(
        "tools/call",
        tool,
        json!({ "name": tool, "arguments": arguments, "_meta": meta() }),
    )
}

/// `subscriptions/listen` for `task_id`'s changes (no `Mcp-Name`: listen names nothing).
pub(crate) fn listen_request(task_id: &str) -> anyhow::Result<Prepared> {
    let mut prepared = prepare(
        "subscriptions/listen",
        task_id,
        json!({ "notifications": { "taskIds": [task_id] }, "_meta": meta() }),
    )?;
    prepared.headers.remove("mcp-name");
    Ok(prepared)
}

/// `tasks/get` for `task_id`.
pub(crate) fn get_request(task_id: &str) -> anyhow::Result<Prepared> {
    prepare(
        "tasks/get",
        task_id,
        json!({ "taskId": task_id, "_meta": meta() }),
    )
}

/// A connection to one server, ready for the next request.
type Connection = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

/// Keep-alive HTTP/1.1 connections to one server's MCP endpoint, each used by one
/// request at a time; a client used by one caller at a time is one connection.
///
/// The exchanges go through hyper's connection-level client: the load generator
/// shares two cores with the servers it measures, so what it spends a call is
/// charged to every HTTP path, and a general client's per-request work (parsing
/// the URL again, looking up its pool, redirect and proxy rules) is the
/// generator's, not the server's. A clone shares the idle connections.
#[derive(Clone)]
pub(crate) struct McpClient {
    /// For answers read as they stream (`subscriptions/listen`).
    streaming: reqwest::Client,
    url: String,
    /// `host:port`, to connect to and to send as `Host`.
    authority: String,
    host: HeaderValue,
    path: http::Uri,
    idle: Arc<Mutex<Vec<Connection>>>,
}

impl McpClient {
    /// A client for the MCP endpoint at `url` (`http://host:port/path`).
    pub(crate) fn new(url: &str) -> anyhow::Result<Self> {
        let uri: http::Uri = url.parse().with_context(|| format!("bad URL {url}"))?;
        let authority = uri
            .authority()
            .with_context(|| format!("no host in {url}"))?
            .as_str()
            .to_owned();
        let streaming = reqwest::Client::builder()
            .no_proxy()
            .tcp_nodelay(true)
            .pool_max_idle_per_host(1)
            .build()
            .context("cannot build an HTTP client")?;
        Ok(Self {
            streaming,
            url: url.to_owned(),
            host: HeaderValue::from_str(&authority)?,
            authority,
            path: http::Uri::from_str(uri.path())?,
            idle: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// An idle connection (and `true`), or a new one (and `false`).
    async fn connection(&self) -> anyhow::Result<(Connection, bool)> {
        let idle = {
            let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
            std::iter::from_fn(|| idle.pop()).find(|connection| !connection.is_closed())
        };
        match idle {
            Some(connection) => Ok((connection, true)),
            None => Ok((self.connect().await?, false)),
        }
    }

    /// A new connection, its I/O driven by a task of its own.
    async fn connect(&self) -> anyhow::Result<Connection> {
        let stream = tokio::net::TcpStream::connect(&self.authority)
            .await
            .with_context(|| format!("cannot connect to {}", self.authority))?;
        stream.set_nodelay(true)?;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .context("the HTTP handshake failed")?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }

    /// One exchange on a kept-alive connection: the answer's status and whole body.
    /// A request a kept-alive connection could not send (the server closed it while
    /// it was idle) is sent once more on a new connection, as a pooling client does;
    /// one that was sent is never repeated.
    async fn exchange(
        &self,
        method: http::Method,
        path: http::Uri,
        headers: HeaderMap,
        body: Bytes,
    ) -> anyhow::Result<(http::StatusCode, Bytes)> {
        let request = || {
            let mut request = http::Request::new(Full::new(body.clone()));
            *request.method_mut() = method.clone();
            *request.uri_mut() = path.clone();
            *request.headers_mut() = headers.clone();
            request
                .headers_mut()
                .insert(http::header::HOST, self.host.clone());
            request
        };
        let (mut connection, reused) = self.connection().await?;
        let response = match send_on(&mut connection, request()).await {
            Ok(response) => response,
            Err(error) if reused && (error.is_canceled() || error.is_closed()) => {
                connection = self.connect().await?;
                send_on(&mut connection, request())
                    .await
                    .with_context(|| format!("a request to {} failed", self.url))?
            }
            Err(error) => {
                return Err(error).with_context(|| format!("a request to {} failed", self.url));
            }
        };
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .context("cannot read a response")?
            .to_bytes();
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(connection);
        Ok((status, body))
    }

    /// Sends `request`; returns the response body, failing on a non-2xx status.
    async fn send(&self, request: &Prepared) -> anyhow::Result<Bytes> {
        let (status, body) = self
            .exchange(
                http::Method::POST,
                self.path.clone(),
                request.headers.clone(),
                request.body.clone(),
            )
            .await?;
        if !status.is_success() {
            bail!(
                "{} answered {status}: {}",
                self.url,
                String::from_utf8_lossy(&body)
            );
        }
        Ok(body)
    }

    /// Sends `request` and returns the answer's bytes as they came.
    pub(crate) async fn answer(&self, request: &Prepared) -> anyhow::Result<Bytes> {
        self.send(request).await
    }

    /// Sends `request` and checks that the answer is a result of `result_type`
    /// (a substring test: parsing every answer would load the generator more
    /// than the servers).
    pub(crate) async fn expect(
        &self,
        request: &Prepared,
        result_type: ResultType,
    ) -> anyhow::Result<()> {
        let body = self.send(request).await?;
        let needle = result_type.needle();
        if !contains(&body, needle.as_bytes()) {
            bail!(
                "expected a {needle} answer, got {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(())
    }

    /// `GET /healthz` on the same connection: an HTTP exchange with no MCP and
    /// no database behind it, the floor under every MCP call's cost.
    pub(crate) async fn health(&self) -> anyhow::Result<()> {
        let (status, _) = self
            .exchange(
                http::Method::GET,
                http::Uri::from_static("/healthz"),
                HeaderMap::new(),
                Bytes::new(),
            )
            .await?;
        if !status.is_success() {
            bail!("/healthz on {} answered {status}", self.authority);
        }
        Ok(())
    }

    /// Sends `request` and returns the response unread, for an answer that streams.
    pub(crate) async fn open(&self, request: &Prepared) -> anyhow::Result<reqwest::Response> {
        let response = self
            .streaming
            .post(&self.url)
            .headers(request.headers.clone())
            .body(request.body.clone())
            .send()
            .await
            .with_context(|| format!("POST {} failed", self.url))?;
        if !response.status().is_success() {
            bail!("{} answered {}", self.url, response.status());
        }
        Ok(response)
    }

    /// Sends `request` and returns the answer's JSON-RPC message, parsed.
    pub(crate) async fn call(&self, request: &Prepared) -> anyhow::Result<Value> {
        let body = self.send(request).await?;
        json_message(&body)
    }

    /// Creates a task and returns its id (parses the whole answer).
    pub(crate) async fn create(&self, request: &Prepared) -> anyhow::Result<String> {
        let body = self.send(request).await?;
        let message = json_message(&body)?;
        match message["result"]["taskId"].as_str() {
            Some(id) if message["result"]["resultType"] == "task" => Ok(id.to_owned()),
            _ => bail!("expected a CreateTaskResult, got {message}"),
        }
    }
}

/// Sends `request` on `connection` once it is ready for one.
async fn send_on(
    connection: &mut Connection,
    request: http::Request<Full<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, hyper::Error> {
    connection.ready().await?;
    connection.send_request(request).await
}

/// What kind of result an answer must be.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ResultType {
    /// A `CreateTaskResult`.
    Task,
    /// A complete result (`tasks/get`).
    Complete,
}

impl ResultType {
    fn needle(self) -> &'static str {
        match self {
            ResultType::Task => "\"resultType\":\"task\"",
            ResultType::Complete => "\"resultType\":\"complete\"",
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// The JSON-RPC message in an answer, whether sent as JSON or as one SSE event.
fn json_message(body: &[u8]) -> anyhow::Result<Value> {
    let text = std::str::from_utf8(body).context("an answer is not UTF-8")?;
    let json = match text.trim_start().starts_with('{') {
        true => text.to_owned(),
        false => text
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(str::trim)
            .rfind(|data| data.starts_with('{'))
            .context("an SSE answer without a JSON message")?
            .to_owned(),
    };
    serde_json::from_str(&json).context("an answer is not JSON")
}

/// Latencies, how long it took to collect them, and the CPU spent meanwhile.
#[derive(Clone, Debug, Default)]
pub(crate) struct Samples {
    pub(crate) latencies: Vec<Duration>,
    pub(crate) elapsed: Duration,
    pub(crate) cpu: CpuUse,
    /// Operations per second of each merged round, in order.
    pub(crate) round_rates: Vec<f64>,
}

impl Samples {
    /// Adds one more round.
    pub(crate) fn merge(&mut self, round: Samples) {
        self.round_rates.push(round.rate());
        self.latencies.extend(round.latencies);
        self.elapsed += round.elapsed;
        self.cpu += round.cpu;
    }

    /// CPU per operation: (this process, PostgreSQL).
    pub(crate) fn cpu_per_call(&self) -> (Duration, Duration) {
        let calls = u32::try_from(self.latencies.len().max(1)).unwrap_or(u32::MAX);
        (self.cpu.process / calls, self.cpu.postgres / calls)
    }

    /// Times scheduled onto a CPU per operation: (this process's threads, PostgreSQL).
    pub(crate) fn slices_per_call(&self) -> (f64, f64) {
        let calls = self.latencies.len().max(1) as f64;
        (
            self.cpu.process_slices as f64 / calls,
            self.cpu.postgres_slices as f64 / calls,
        )
    }

    /// Operations per second.
    pub(crate) fn rate(&self) -> f64 {
        let seconds = self.elapsed.as_secs_f64();
        if seconds > 0.0 {
            self.latencies.len() as f64 / seconds
        } else {
            0.0
        }
    }

    /// The `percent` percentile (nearest rank).
    pub(crate) fn percentile(&self, percent: f64) -> Duration {
        percentile(&self.latencies, percent)
    }
}

/// The `percent` percentile of `samples` (nearest rank); zero when there are none.
pub(crate) fn percentile(samples: &[Duration], percent: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((percent / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Runs `operation` `count` times, one after another, timing each; returns the
/// timings and what each call returned.
pub(crate) async fn sequential<F, Fut, T>(
    meter: &CpuMeter,
    count: usize,
    mut operation: F,
) -> anyhow::Result<(Samples, Vec<T>)>
where
    F: FnMut(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    let mut latencies = Vec::with_capacity(count);
    let mut outputs = Vec::with_capacity(count);
    let reading = meter.start().await?;
    let started = Instant::now();
    for index in 0..count {
        let begun = Instant::now();
        outputs.push(operation(index).await?);
        latencies.push(begun.elapsed());
    }
    let elapsed = started.elapsed();
    let samples = Samples {
        latencies,
        elapsed,
        cpu: reading.stop().await?,
        round_rates: Vec::new(),
    };
    Ok((samples, outputs))
}

/// Runs one worker per element of `workers`, each calling its operation in a
/// loop until `duration` is over; every call is timed. The first failure fails
/// the measurement: numbers with errors in them are not numbers.
pub(crate) async fn concurrent<W, F, Fut>(
    meter: &CpuMeter,
    workers: W,
    duration: Duration,
) -> anyhow::Result<Samples>
where
    W: IntoIterator<Item = F>,
    F: FnMut(u64) -> Fut + Send + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send,
{
    let reading = meter.start().await?;
    let started = Instant::now();
    let deadline = started + duration;
    let mut handles = Vec::new();
    for mut operation in workers {
        handles.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut round = 0u64;
            while Instant::now() < deadline {
                let begun = Instant::now();
                operation(round).await?;
                latencies.push(begun.elapsed());
                round += 1;
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for handle in handles {
        latencies.extend(handle.await.context("a load worker panicked")??);
    }
    let elapsed = started.elapsed();
    Ok(Samples {
        latencies,
        elapsed,
        cpu: reading.stop().await?,
        round_rates: Vec::new(),
    })
}
