//! Dev-only: a real OTLP/HTTP receiver for Docket's tests.
//!
//! [`Collector::start`] listens on `127.0.0.1:0` and accepts `POST /v1/traces` and
//! `POST /v1/metrics` with `application/x-protobuf` bodies, decoded with the official
//! `opentelemetry-proto` message types, exactly as an OpenTelemetry Collector's OTLP/HTTP
//! receiver would. It keeps what arrived ([`Collector::spans`], [`Collector::metrics`]) and
//! can be made to fail ([`Collector::set_down`]: every request answers 503) or to stall
//! ([`Collector::set_slow`]) for the fault tests.

mod decode;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use prost::Message as _;
use tokio::net::TcpListener;
use tokio::sync::Notify;

pub use decode::{DataPoint, MetricKind, ReceivedMetric, ReceivedSpan, SpanKind, Value};

/// The largest request body the collector reads.
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// A running receiver; it stops when dropped.
#[derive(Debug)]
pub struct Collector {
    address: SocketAddr,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
}

#[derive(Debug, Default)]
struct Shared {
    state: Mutex<State>,
    arrived: Notify,
}

#[derive(Debug, Default)]
struct State {
    spans: Vec<ReceivedSpan>,
    metrics: Vec<ReceivedMetric>,
    down: bool,
    slow: Duration,
    /// Export requests answered, whatever the answer.
    requests: u64,
    /// The headers of the last request accepted, by lower-case name.
    last_headers: BTreeMap<String, String>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked while holding the lock has failed already; its data is still
        // what arrived.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Collector {
    /// Starts a receiver on `127.0.0.1:0`, on the current Tokio runtime.
    ///
    /// # Panics
    ///
    /// When no loopback port can be bound: a test cannot run without one.
    pub async fn start() -> Collector {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("the collector binds a loopback port");
        let address = listener
            .local_addr()
            .expect("a bound listener has an address");
        let shared = Arc::new(Shared::default());
        let server = tokio::spawn(serve(listener, Arc::clone(&shared)));
        Collector {
            address,
            shared,
            server,
        }
    }

    /// The base URL to configure as `telemetry.otlp.endpoint` (`http://127.0.0.1:PORT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every span received so far, in arrival order.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.shared.state().spans.clone()
    }

    /// Every metric received so far, one entry per metric per export, in arrival order.
    pub fn metrics(&self) -> Vec<ReceivedMetric> {
        self.shared.state().metrics.clone()
    }

    /// The headers of the last request accepted, by lower-case name (values that are not
    /// text are left out).
    pub fn last_headers(&self) -> BTreeMap<String, String> {
        self.shared.state().last_headers.clone()
    }

    /// Export requests answered so far (accepted or refused).
    pub fn requests(&self) -> u64 {
        self.shared.state().requests
    }

    /// Waits until `predicate` holds for the spans received, and returns them; `None` when
    /// `timeout` passed first.
    pub async fn wait_for_spans(
        &self,
        predicate: impl Fn(&[ReceivedSpan]) -> bool,
        timeout: Duration,
    ) -> Option<Vec<ReceivedSpan>> {
        self.wait_for(|state| &state.spans, predicate, timeout)
            .await
    }

    /// Waits until `predicate` holds for the metrics received, and returns them; `None` when
    /// `timeout` passed first.
    pub async fn wait_for_metrics(
        &self,
        predicate: impl Fn(&[ReceivedMetric]) -> bool,
        timeout: Duration,
    ) -> Option<Vec<ReceivedMetric>> {
        self.wait_for(|state| &state.metrics, predicate, timeout)
            .await
    }

    async fn wait_for<T: Clone>(
        &self,
        select: impl Fn(&State) -> &Vec<T>,
        predicate: impl Fn(&[T]) -> bool,
        timeout: Duration,
    ) -> Option<Vec<T>> {
        let waiting = async {
            loop {
                let arrived = self.shared.arrived.notified();
                {
                    let state = self.shared.state();
                    let received = select(&state);
                    if predicate(received) {
                        return received.clone();
                    }
                }
                arrived.await;
            }
        };
        tokio::time::timeout(timeout, waiting).await.ok()
    }

    /// While `down`, every request is answered `503 Service Unavailable` and nothing is kept.
    pub fn set_down(&self, down: bool) {
        self.shared.state().down = down;
    }

    /// Every request waits this long before it is read and answered (zero: not at all).
    pub fn set_slow(&self, delay: Duration) {
        self.shared.state().slow = delay;
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _peer)) = listener.accept().await else {
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let shared = Arc::clone(&shared);
                async move { Ok::<_, Infallible>(answer(request, &shared).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn answer(request: Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    let (down, slow) = {
        let state = shared.state();
        (state.down, state.slow)
    };
    if !slow.is_zero() {
        tokio::time::sleep(slow).await;
    }
    let outcome = if down {
        Err((StatusCode::SERVICE_UNAVAILABLE, "the collector is down"))
    } else {
        receive(request, shared).await
    };
    shared.state().requests += 1;
    shared.arrived.notify_waiters();
    match outcome {
        Ok(body) => response(StatusCode::OK, "application/x-protobuf", body),
        Err((status, message)) => response(status, "text/plain", Bytes::from(message)),
    }
}

async fn receive(
    request: Request<Incoming>,
    shared: &Shared,
) -> Result<Bytes, (StatusCode, &'static str)> {
    let signal = match (request.method(), request.uri().path()) {
        (&Method::POST, "/v1/traces") => Signal::Traces,
        (&Method::POST, "/v1/metrics") => Signal::Metrics,
        (&Method::POST, _) => return Err((StatusCode::NOT_FOUND, "no such signal")),
        _ => return Err((StatusCode::METHOD_NOT_ALLOWED, "only POST")),
    };
    let protobuf = request
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/x-protobuf"));
    if !protobuf {
        return Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "only application/x-protobuf",
        ));
    }
    let headers: BTreeMap<String, String> = request
        .headers()
        .iter()
        .filter_map(|(name, value)| {
            Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned()))
        })
        .collect();
    let body = Limited::new(request.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|_| (StatusCode::PAYLOAD_TOO_LARGE, "the body is too large"))?
        .to_bytes();
    match signal {
        Signal::Traces => {
            use opentelemetry_proto::tonic::collector::trace::v1::{
                ExportTraceServiceRequest, ExportTraceServiceResponse,
            };
            let export = ExportTraceServiceRequest::decode(body)
                .map_err(|_| (StatusCode::BAD_REQUEST, "not an ExportTraceServiceRequest"))?;
            let spans = decode::spans(export);
            let mut state = shared.state();
            state.spans.extend(spans);
            state.last_headers = headers;
            drop(state);
            Ok(Bytes::from(
                ExportTraceServiceResponse::default().encode_to_vec(),
            ))
        }
        Signal::Metrics => {
            use opentelemetry_proto::tonic::collector::metrics::v1::{
                ExportMetricsServiceRequest, ExportMetricsServiceResponse,
            };
            let export = ExportMetricsServiceRequest::decode(body).map_err(|_| {
                (
                    StatusCode::BAD_REQUEST,
                    "not an ExportMetricsServiceRequest",
                )
            })?;
            let metrics = decode::metrics(export);
            let mut state = shared.state();
            state.metrics.extend(metrics);
            state.last_headers = headers;
            drop(state);
            Ok(Bytes::from(
                ExportMetricsServiceResponse::default().encode_to_vec(),
            ))
        }
    }
}

enum Signal {
    Traces,
    Metrics,
}

fn response(status: StatusCode, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

/// Attributes by key, as the decoded spans and metrics carry them.
pub type Attributes = BTreeMap<String, Value>;
