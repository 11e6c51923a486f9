//! OpenTelemetry through the server (issue 37), received by a real OTLP/HTTP
//! collector (`docket_otlp_collector`): the span tree of a `tools/call`
//! `trino_export` task created on one replica and cancelled through another on one
//! database (PostgreSQL and SQLite), all one trace under the client's
//! `_meta.traceparent`; the Trino double and an HTTP upstream receiving the trace;
//! malformed and oversized `traceparent`s ignored; no SQL text in an attribute
//! unless `telemetry.capture_statements` is on (then scrubbed); the MCP
//! conventions' metrics.
//!
//! The tracing subscriber is per test: each builds its own telemetry
//! (`Telemetry::build`) and makes it the default of the test's one thread, on a
//! current-thread runtime, so the servers, the collector and the client all run on
//! that thread and nothing leaks into another test's spans.

use std::time::Duration;

use docket_otlp_collector::{Collector, ReceivedSpan, SpanKind, Value as OtlpValue};
use docket_server::config::Config;
use docket_telemetry::{LogFormat, OtlpConfig, Telemetry, TelemetryConfig};
use docket_trino_double::TrinoDouble;
use serde_json::{Value, json};

use crate::support::{Backend, StoredServer, TASKS, TestServer, key_of, users};
use crate::upstream::Upstream;

/// The trace the client's operation runs in, and its two spans: one around the
/// call that creates the task, one around the cancel.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_CALL_SPAN: &str = "00f067aa0ba902b7";
const CLIENT_CANCEL_SPAN: &str = "b7ad6b7169203331";

/// How long spans and metrics may take to arrive (they leave in batches; the whole
/// suite on two cores slows everything down).
const ARRIVAL: Duration = Duration::from_secs(120);

/// The baggage a client sends: something of its own that no upstream may receive.
const BAGGAGE: &str = "client.user=alice-baggage-secret";

/// A client `traceparent` of `trace` and `span`, sampled.
fn traceparent(trace: &str, span: &str) -> String {
    format!("00-{trace}-{span}-01")
}

/// A collector and a telemetry exporting to it, the telemetry's subscriber the
/// default of this thread until the guard drops.
struct Traced {
    collector: Collector,
    telemetry: Option<Telemetry>,
    _guard: tracing::dispatcher::DefaultGuard,
}

impl Traced {
    async fn start() -> Self {
        let collector = Collector::start().await;
        let config = TelemetryConfig {
            otlp: Some(OtlpConfig {
                endpoint: collector.endpoint(),
                ..OtlpConfig::default()
            }),
            metrics_interval_seconds: 1,
            ..TelemetryConfig::default()
        };
        let (dispatch, telemetry) =
            Telemetry::build(&config, LogFormat::Text, "warn", std::io::sink).expect("telemetry");
        let guard = tracing::dispatcher::set_default(&dispatch);
        Self {
            collector,
            telemetry: Some(telemetry),
            _guard: guard,
        }
    }

    /// Waits until spans named `names` have all arrived; returns every span so far.
    async fn spans_named(&self, names: &[&str]) -> Vec<ReceivedSpan> {
        let arrived = self
            .collector
            .wait_for_spans(
                |spans| {
                    names
                        .iter()
                        .all(|name| spans.iter().any(|span| span.name == *name))
                },
                ARRIVAL,
            )
            .await;
        match arrived {
            Some(spans) => spans,
            None => panic!(
                "spans {names:?} did not all arrive ({} dropped); got {:?}",
                self.telemetry.as_ref().map_or(0, Telemetry::dropped_spans),
                self.collector
                    .spans()
                    .iter()
                    .map(|span| span.name.clone())
                    .collect::<Vec<_>>()
            ),
        }
    }

    /// Waits until `mcp.server.session.duration` has arrived with one session of
    /// `version` in a point.
    async fn session_ended_once(&self, version: &str) {
        let metrics = self
            .collector
            .wait_for_metrics(
                |metrics| {
                    metrics
                        .iter()
                        .any(|metric| metric.name == "mcp.server.session.duration")
                },
                ARRIVAL,
            )
            .await
            .expect("mcp.server.session.duration arrives");
        let sessions = metrics
            .iter()
            .find(|metric| metric.name == "mcp.server.session.duration")
            .expect("the metric");
        assert!(
            sessions.points.iter().any(|point| {
                point
                    .attributes
                    .get("mcp.protocol.version")
                    .and_then(OtlpValue::as_str)
                    == Some(version)
                    && point.count == Some(1)
            }),
            "{sessions:?}"
        );
    }

    /// Waits until the SERVER spans of the requests with JSON-RPC ids `ids` have all
    /// arrived; every span so far.
    async fn request_spans(&self, ids: &[i64]) -> Vec<ReceivedSpan> {
        self.collector
            .wait_for_spans(
                |spans| {
                    ids.iter()
                        .all(|id| spans.iter().any(|span| request_id(span) == Some(*id)))
                },
                ARRIVAL,
            )
            .await
            .expect("the requests' spans")
    }

    /// Sends what is left and stops.
    async fn stop(mut self) {
        if let Some(telemetry) = self.telemetry.take() {
            telemetry.shutdown().await;
        }
    }
}

fn attribute<'a>(span: &'a ReceivedSpan, key: &str) -> Option<&'a OtlpValue> {
    span.attributes.get(key)
}

fn text<'a>(span: &'a ReceivedSpan, key: &str) -> Option<&'a str> {
    attribute(span, key).and_then(OtlpValue::as_str)
}

/// The one span named `name` in `trace` (the test fails on none or several).
fn one<'a>(spans: &'a [ReceivedSpan], trace: &str, name: &str) -> &'a ReceivedSpan {
    let found: Vec<_> = spans
        .iter()
        .filter(|span| span.trace_id == trace && span.name == name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{name} in {trace}: {found:#?}\nall: {:?}",
        names(spans)
    );
    found[0]
}

fn names(spans: &[ReceivedSpan]) -> Vec<(String, String)> {
    spans
        .iter()
        .map(|span| (span.name.clone(), span.trace_id.clone()))
        .collect()
}

/// The JSON-RPC id of the request a SERVER span is of.
fn request_id(span: &ReceivedSpan) -> Option<i64> {
    attribute(span, "jsonrpc.request.id").and_then(OtlpValue::as_i64)
}

/// The span of the request with JSON-RPC id `id` (the test fails on none).
fn spans_of_request(spans: &[ReceivedSpan], id: i64) -> &ReceivedSpan {
    spans
        .iter()
        .find(|span| request_id(span) == Some(id))
        .expect("the request's span")
}

fn parent_of(span: &ReceivedSpan) -> Option<&str> {
    span.parent_span_id.as_deref()
}

/// No attribute of any span (nor of its resource) holds SQL text.
fn no_sql_in(spans: &[ReceivedSpan]) {
    for span in spans {
        assert!(
            attribute(span, "db.query.text").is_none(),
            "{}: {span:?}",
            span.name
        );
        for (key, value) in &span.attributes {
            let shown = format!("{value:?}").to_ascii_uppercase();
            assert!(
                !shown.contains("SELECT") && !shown.contains("ROWS_1M"),
                "{} carries SQL in {key}: {value:?}",
                span.name
            );
        }
    }
}

/// Two replicas of one app on `database`, exporting from `double`.
async fn replicas(
    database: &docket_storage::test_db::TestDatabase,
    double: &TrinoDouble,
    extra: &str,
) -> (StoredServer, StoredServer) {
    let yaml = format!(
        "connections:\n  warehouse: {{ kind: trino, url: \"{}\", user: docket, catalog: memory, schema: default }}\n\
         consent: {{ trino: {{ row_threshold: 1000000000000 }} }}\n\
         exports: {{ max_rows: 10000000 }}\n\
         tasks: {{ heartbeat_interval: 100ms }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n{extra}",
        double.url()
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["admin"])]);
    let a = StoredServer::start(config.clone(), database, false).await;
    let b = StoredServer::start(config, database, false).await;
    (a, b)
}

/// A `tools/call` from the client's span `span` of `trace`, declaring the tasks
/// extension, with baggage in `_meta` and in the header (accepted, never passed on).
async fn traced_call(
    server: &TestServer,
    tool: &str,
    arguments: Value,
    trace: &str,
    span: &str,
) -> Value {
    let mut rpc = server
        .rpc("tools/call", json!({"name": tool, "arguments": arguments}))
        .capabilities(json!({"extensions": {TASKS: {}}}))
        .header("x-api-key", &key_of("alice"));
    rpc.body["params"]["_meta"]["traceparent"] = json!(traceparent(trace, span));
    rpc.body["params"]["_meta"]["tracestate"] = json!("docket=test");
    rpc.body["params"]["_meta"]["baggage"] = json!(BAGGAGE);
    let (status, body) = rpc.header("baggage", BAGGAGE).send().await;
    assert_eq!(status, 200, "{body}");
    body
}

#[tokio::test]
async fn an_export_task_created_on_one_replica_and_cancelled_on_another_is_one_trace_on_sqlite() {
    an_export_task_created_on_one_replica_and_cancelled_on_another_is_one_trace(Backend::Sqlite)
        .await;
}

#[tokio::test]
async fn an_export_task_created_on_one_replica_and_cancelled_on_another_is_one_trace_on_postgres() {
    an_export_task_created_on_one_replica_and_cancelled_on_another_is_one_trace(Backend::Postgres)
        .await;
}

/// The span tree of a `trino_export` task: created on replica A under the client's
/// `_meta.traceparent`, its work on A, its cancel sent to replica B. Every span of
/// it is in the client's trace, each under the right parent; the cancel on B joins
/// the task's own trace (parented on the creating request's span the task row
/// keeps) and links to B's request; Trino receives the trace; no attribute holds
/// SQL; and `mcp.server.operation.duration` arrives with the conventions' names.
async fn an_export_task_created_on_one_replica_and_cancelled_on_another_is_one_trace(
    backend: Backend,
) {
    let traced = Traced::start().await;
    let Some(database) = backend.database().await else {
        return;
    };
    let double = TrinoDouble::start().await.expect("double");
    double.set_page_rows(100);
    double.set_page_delay(Duration::from_millis(100));
    let (a, b) = replicas(&database, &double, "").await;

    let created = traced_call(
        &a.server,
        "trino_export",
        json!({"sql": "SELECT * FROM synthetic.big.rows_1m", "format": "csv", "name": "traced"}),
        CLIENT_TRACE,
        CLIENT_CALL_SPAN,
    )
    .await;
    let task_id = created["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    // Rows flow on A, then the cancel goes to B, from another span of the client.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !a.server.task_as("alice", &task_id).await["statusMessage"]
        .as_str()
        .is_some_and(|message| message.contains("rows,"))
    {
        assert!(tokio::time::Instant::now() < deadline, "no rows flowed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut cancel = b
        .server
        .rpc("tasks/cancel", json!({"taskId": task_id}))
        .capabilities(json!({"extensions": {TASKS: {}}}))
        .header("x-api-key", &key_of("alice"));
    cancel.body["params"]["_meta"]["traceparent"] =
        json!(traceparent(CLIENT_TRACE, CLIENT_CANCEL_SPAN));
    let (status, body) = cancel.send().await;
    assert_eq!(status, 200, "{body}");
    a.server.wait_task_as("alice", &task_id, "cancelled").await;

    let spans = traced
        .spans_named(&[
            "tools/call trino_export",
            "tasks/cancel",
            "task run",
            "task cancel",
            "finish call_tasks",
            "request_cancel call_tasks",
            "trino export",
        ])
        .await;
    let call = one(&spans, CLIENT_TRACE, "tools/call trino_export");
    assert_eq!(call.kind, SpanKind::Server);
    assert_eq!(
        parent_of(call),
        Some(CLIENT_CALL_SPAN),
        "the client's span is the root's parent"
    );
    assert_eq!(text(call, "mcp.method.name"), Some("tools/call"));
    assert_eq!(text(call, "gen_ai.tool.name"), Some("trino_export"));
    assert_eq!(text(call, "gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(text(call, "mcp.protocol.version"), Some("2026-07-28"));
    assert_eq!(
        attribute(call, "jsonrpc.request.id").and_then(OtlpValue::as_i64),
        Some(1)
    );
    assert_eq!(text(call, "network.transport"), Some("tcp"));
    assert_eq!(
        attribute(call, "server.port").and_then(OtlpValue::as_i64),
        Some(i64::from(a.server.addr.port())),
        "replica A served the call"
    );
    assert!(attribute(call, "error.type").is_none());
    assert!(
        matches!(
            attribute(call, "docket.authenticate.seconds"),
            Some(OtlpValue::Double(seconds)) if *seconds >= 0.0
        ),
        "the identity check's time: {call:?}"
    );
    for stage in ["authorize", "consent", "create call_tasks", "task run"] {
        assert_eq!(
            parent_of(one(&spans, CLIENT_TRACE, stage)),
            Some(call.span_id.as_str()),
            "{stage} is a child of the call"
        );
    }
    let work = one(&spans, CLIENT_TRACE, "task run");
    assert_eq!(text(work, "docket.task.id"), Some(task_id.as_str()));
    assert_eq!(text(work, "docket.task.status"), Some("cancelled"));
    let export = one(&spans, CLIENT_TRACE, "trino export");
    assert_eq!(parent_of(export), Some(work.span_id.as_str()));
    assert_eq!(
        parent_of(one(&spans, CLIENT_TRACE, "finish call_tasks")),
        Some(work.span_id.as_str())
    );
    let pages: Vec<_> = spans
        .iter()
        .filter(|span| span.name == "trino GET" && span.trace_id == CLIENT_TRACE)
        .collect();
    // The export's pages, and the consent's EXPLAIN's.
    let consent = one(&spans, CLIENT_TRACE, "consent");
    assert!(
        pages
            .iter()
            .any(|page| parent_of(page) == Some(export.span_id.as_str())),
        "the export's pages are spans"
    );
    for page in &pages {
        assert_eq!(page.kind, SpanKind::Client);
        assert!(
            [export.span_id.as_str(), consent.span_id.as_str()]
                .contains(&parent_of(page).unwrap_or_default()),
            "{page:?}"
        );
        assert_eq!(text(page, "db.system.name"), Some("trino"));
    }
    let writes: Vec<_> = spans
        .iter()
        .filter(|span| span.name == "sink write" && span.trace_id == CLIENT_TRACE)
        .collect();
    assert!(!writes.is_empty(), "the sink's writes are spans");
    assert!(
        writes
            .iter()
            .all(|write| parent_of(write) == Some(export.span_id.as_str()))
    );
    // The submission of the export's statement is a child of the export, and the
    // consent's EXPLAIN one of the consent.
    let submissions: Vec<_> = spans
        .iter()
        .filter(|span| span.name == "trino POST /v1/statement" && span.trace_id == CLIENT_TRACE)
        .collect();
    assert!(
        submissions
            .iter()
            .any(|span| parent_of(span) == Some(export.span_id.as_str()))
    );

    // The cancel, on B: its request under the client's other span, and the cancel
    // itself in the task's trace under the creating request, linked to B's request.
    let cancel = one(&spans, CLIENT_TRACE, "tasks/cancel");
    assert_eq!(cancel.kind, SpanKind::Server);
    assert_eq!(parent_of(cancel), Some(CLIENT_CANCEL_SPAN));
    assert_eq!(
        attribute(cancel, "server.port").and_then(OtlpValue::as_i64),
        Some(i64::from(b.server.addr.port())),
        "replica B served the cancel"
    );
    let cancelling = one(&spans, CLIENT_TRACE, "task cancel");
    assert_eq!(
        parent_of(cancelling),
        Some(call.span_id.as_str()),
        "the cancel continues the trace the task row keeps"
    );
    assert!(
        cancelling
            .links
            .contains(&(CLIENT_TRACE.to_owned(), cancel.span_id.clone())),
        "{:?}",
        cancelling.links
    );
    assert_eq!(
        parent_of(one(&spans, CLIENT_TRACE, "request_cancel call_tasks")),
        Some(cancelling.span_id.as_str())
    );

    // A's beats while the task ran link to the trace the task keeps.
    let call_span = call.span_id.clone();
    traced
        .collector
        .wait_for_spans(
            |spans| {
                spans.iter().any(|span| {
                    span.name == "task heartbeat"
                        && span
                            .links
                            .contains(&(CLIENT_TRACE.to_owned(), call_span.clone()))
                })
            },
            ARRIVAL,
        )
        .await
        .expect("a beat linked to the task's trace");

    // Every span of the task's work is in the one trace.
    for span in spans.iter().filter(|span| {
        matches!(
            span.name.as_str(),
            "task run"
                | "task cancel"
                | "trino export"
                | "trino GET"
                | "sink write"
                | "finish call_tasks"
                | "request_cancel call_tasks"
                | "create call_tasks"
        )
    }) {
        assert_eq!(span.trace_id, CLIENT_TRACE, "{} left the trace", span.name);
    }
    no_sql_in(&spans);

    // Trino received the trace: the trace token, the client info and traceparent.
    let submitted = double.submitted();
    let export_request = submitted
        .iter()
        .find(|request| {
            request
                .header("x-trino-trace-token")
                .is_some_and(|token| token.starts_with(&format!("00-{CLIENT_TRACE}-")))
        })
        .unwrap_or_else(|| panic!("no statement carried the trace: {submitted:?}"));
    assert!(
        export_request
            .header("x-trino-client-info")
            .is_some_and(|info| info.contains(CLIENT_TRACE)),
        "{export_request:?}"
    );
    assert!(
        double.requests().iter().any(|request| {
            request.method == "GET"
                && request
                    .header("traceparent")
                    .is_some_and(|parent| parent.starts_with(&format!("00-{CLIENT_TRACE}-")))
        }),
        "page fetches carry traceparent"
    );

    // The conventions' metrics, with their names and attributes.
    let metrics = traced
        .collector
        .wait_for_metrics(
            |metrics| {
                metrics.iter().any(|metric| {
                    metric.name == "mcp.server.operation.duration"
                        && metric.points.iter().any(|point| {
                            point
                                .attributes
                                .get("gen_ai.tool.name")
                                .and_then(OtlpValue::as_str)
                                == Some("trino_export")
                        })
                })
            },
            ARRIVAL,
        )
        .await
        .expect("mcp.server.operation.duration arrives");
    let operation = metrics
        .iter()
        .find(|metric| metric.name == "mcp.server.operation.duration")
        .expect("the metric");
    assert_eq!(operation.unit, "s");
    let point = operation
        .points
        .iter()
        .find(|point| {
            point
                .attributes
                .get("gen_ai.tool.name")
                .and_then(OtlpValue::as_str)
                == Some("trino_export")
        })
        .expect("the call's point");
    assert_eq!(
        point
            .attributes
            .get("mcp.method.name")
            .and_then(OtlpValue::as_str),
        Some("tools/call")
    );
    assert_eq!(
        point
            .attributes
            .get("mcp.protocol.version")
            .and_then(OtlpValue::as_str),
        Some("2026-07-28")
    );
    assert!(point.bucket_bounds.contains(&0.01) && point.bucket_bounds.contains(&300.0));
    traced.stop().await;
}

/// A `traceparent` that is malformed or oversized is ignored, never an error:
/// one in `_meta` gives way to the HTTP header's, and with neither valid the
/// request's span starts a trace of its own. A valid `_meta` one wins over the
/// header, which becomes a link.
#[tokio::test]
async fn malformed_and_oversized_traceparents_are_ignored() {
    let traced = Traced::start().await;
    let database = Backend::Sqlite.database().await.expect("SQLite");
    let double = TrinoDouble::start().await.expect("double");
    let (a, _b) = replicas(&database, &double, "").await;
    let header_trace = "0af7651916cd43dd8448eb211c80319c";
    let header_span = "b9c7c989f97918e1";
    let meta_trace = "11111111111111111111111111111111";
    let meta_span = "2222222222222222";
    let oversized = format!(
        "{}{}",
        traceparent(meta_trace, meta_span),
        "-00".repeat(100)
    );
    let cases: [(i64, Option<String>, Option<String>); 4] = [
        (
            11,
            Some("00-ZZ7651916cd43dd8448eb211c80319c-b9c7c989f97918e1-01".into()),
            Some(traceparent(header_trace, header_span)),
        ),
        (12, Some(oversized), None),
        (
            13,
            Some(traceparent(meta_trace, meta_span)),
            Some(traceparent(header_trace, header_span)),
        ),
        (
            14,
            Some("00-00000000000000000000000000000000-0000000000000000-01".into()),
            Some("garbage".into()),
        ),
    ];
    for (id, meta, header) in &cases {
        let mut rpc = a
            .server
            .rpc(
                "tools/call",
                json!({"name": "platform_info", "arguments": {}}),
            )
            .header("x-api-key", &key_of("alice"));
        rpc.body["id"] = json!(id);
        if let Some(meta) = meta {
            rpc.body["params"]["_meta"]["traceparent"] = json!(meta);
        }
        if let Some(header) = header {
            rpc = rpc.header("traceparent", header);
        }
        let (status, body) = rpc.send().await;
        assert_eq!(status, 200, "{body}");
        assert!(body["result"]["isError"] != true, "{body}");
    }
    let spans = traced.request_spans(&[11, 12, 13, 14]).await;
    let of = |id: i64| spans_of_request(&spans, id);
    let malformed_meta = of(11);
    assert_eq!(malformed_meta.name, "tools/call platform_info");
    assert_eq!(malformed_meta.trace_id, header_trace);
    assert_eq!(parent_of(malformed_meta), Some(header_span));
    let oversized = of(12);
    assert_ne!(oversized.trace_id, meta_trace);
    assert_eq!(parent_of(oversized), None, "a trace of its own");
    let both = of(13);
    assert_eq!(both.trace_id, meta_trace);
    assert_eq!(parent_of(both), Some(meta_span));
    assert!(
        both.links
            .contains(&(header_trace.to_owned(), header_span.to_owned()))
    );
    let zeros = of(14);
    assert_eq!(parent_of(zeros), None);
    assert_ne!(zeros.trace_id, "00000000000000000000000000000000");
    traced.stop().await;
}

/// A request answered as an SSE stream (a `trino_query` that reports progress) is
/// a span until its final message: it lasts as long as the stream, not until the
/// response's headers, and a tool error in the final message is its `error.type`,
/// in the span and in `mcp.server.operation.duration`.
#[tokio::test]
async fn a_streamed_answer_ends_its_span_with_its_last_message() {
    let traced = Traced::start().await;
    let database = Backend::Sqlite.database().await.expect("SQLite");
    let double = TrinoDouble::start().await.expect("double");
    double.set_page_rows(10);
    let page_delay = Duration::from_millis(150);
    double.set_page_delay(page_delay);
    let (a, _b) = replicas(&database, &double, "").await;
    let stream = |id: i64, sql: &str| {
        let mut rpc = a
            .server
            .rpc(
                "tools/call",
                json!({"name": "trino_query", "arguments": {"sql": sql, "limit": 40}}),
            )
            .header("x-api-key", &key_of("alice"));
        rpc.body["id"] = json!(id);
        rpc.body["params"]["_meta"]["progressToken"] = json!(format!("p-{id}"));
        rpc.response()
    };
    for (id, sql) in [
        (21, "SELECT * FROM synthetic.big.rows_1m"),
        (22, "SELECT * FROM memory.default.no_such_table"),
    ] {
        let response = stream(id, sql).await;
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let body = response.text().await.expect("the whole stream");
        assert!(body.contains("\"result\""), "{body}");
    }
    let spans = traced.request_spans(&[21, 22]).await;
    let of = |id: i64| spans_of_request(&spans, id);
    let rows = of(21);
    assert_eq!(rows.name, "tools/call trino_query");
    assert!(
        rows.duration >= page_delay * 3,
        "four pages of 10 rows, each {page_delay:?} apart, are all in the span: {:?}",
        rows.duration
    );
    assert!(attribute(rows, "error.type").is_none(), "{rows:?}");
    let failed = of(22);
    assert_eq!(text(failed, "error.type"), Some("tool_error"), "{failed:?}");
    let metrics = traced
        .collector
        .wait_for_metrics(
            |metrics| {
                metrics.iter().any(|metric| {
                    metric.name == "mcp.server.operation.duration"
                        && metric.points.iter().any(|point| {
                            point
                                .attributes
                                .get("error.type")
                                .and_then(OtlpValue::as_str)
                                == Some("tool_error")
                        })
                })
            },
            ARRIVAL,
        )
        .await;
    assert!(
        metrics.is_some(),
        "the streamed tool error is the operation's error.type"
    );
    traced.stop().await;
}

/// An HTTP API call carries the trace to its upstream: the `traceparent` it
/// receives names the call's CLIENT span, which is a child of the request's span,
/// and that span carries the method and host but not the path or the query.
#[tokio::test]
async fn an_http_upstream_receives_the_trace() {
    let traced = Traced::start().await;
    let database = Backend::Sqlite.database().await.expect("SQLite");
    let upstream = Upstream::start().await;
    let yaml = format!(
        "connections:\n  open: {{ kind: api, base_url: \"{}\" }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n",
        upstream.url("/v1")
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["admin"])]);
    let stored = StoredServer::start(config, &database, false).await;
    let trace = "5bf92f3577b34da6a3ce929d0e0e4737";
    let body = traced_call(
        &stored.server,
        "api_invoke_endpoint",
        json!({"connection": "open", "method": "GET", "path": "/echo", "query_params": {"secret_q": "v1"}}),
        trace,
        CLIENT_CALL_SPAN,
    )
    .await;
    assert_eq!(body["result"]["structuredContent"]["status"], 200, "{body}");
    let spans = traced
        .spans_named(&["tools/call api_invoke_endpoint", "GET"])
        .await;
    let call = one(&spans, trace, "tools/call api_invoke_endpoint");
    let client = one(&spans, trace, "GET");
    assert_eq!(client.kind, SpanKind::Client);
    assert_eq!(text(client, "http.request.method"), Some("GET"));
    assert_eq!(text(client, "server.address"), Some("127.0.0.1"));
    assert_eq!(
        attribute(client, "http.response.status_code").and_then(OtlpValue::as_i64),
        Some(200)
    );
    let mut ancestor = parent_of(client).map(str::to_owned);
    while let Some(id) = ancestor.clone() {
        if id == call.span_id {
            break;
        }
        ancestor = spans
            .iter()
            .find(|span| span.span_id == id)
            .and_then(|span| parent_of(span).map(str::to_owned));
    }
    assert_eq!(
        ancestor.as_deref(),
        Some(call.span_id.as_str()),
        "under the call"
    );
    let seen = upstream.seen();
    assert_eq!(
        seen[0].header("traceparent"),
        Some(format!("00-{trace}-{}-01", client.span_id).as_str()),
        "the upstream's parent is the call's client span"
    );
    assert_eq!(
        seen[0].header("baggage"),
        None,
        "the client's baggage stays with Docket"
    );
    for span in &spans {
        for value in span.attributes.values() {
            let shown = format!("{value:?}");
            assert!(
                !shown.contains("/echo")
                    && !shown.contains("secret_q")
                    && !shown.contains("alice-baggage-secret"),
                "{span:?}"
            );
        }
    }
    traced.stop().await;
}

/// With `telemetry.capture_statements` on, the statement's span carries it as
/// `db.query.text`, scrubbed of its values.
#[tokio::test]
async fn captured_statements_are_scrubbed() {
    let traced = Traced::start().await;
    let database = Backend::Sqlite.database().await.expect("SQLite");
    let double = TrinoDouble::start().await.expect("double");
    let (a, _b) = replicas(
        &database,
        &double,
        "telemetry: { capture_statements: true }\n",
    )
    .await;
    let trace = "6bf92f3577b34da6a3ce929d0e0e4738";
    let body = traced_call(
        &a.server,
        "trino_query",
        json!({"sql": "SELECT orderkey FROM memory.default.orders WHERE comment = 'private note' AND orderkey < 7", "limit": 5}),
        trace,
        CLIENT_CALL_SPAN,
    )
    .await;
    assert!(body["result"]["isError"] != true, "{body}");
    let spans = traced.spans_named(&["trino POST /v1/statement"]).await;
    let statements: Vec<_> = spans
        .iter()
        .filter(|span| span.trace_id == trace && span.name == "trino POST /v1/statement")
        .filter_map(|span| text(span, "db.query.text"))
        .collect();
    assert!(!statements.is_empty(), "{:?}", names(&spans));
    for statement in statements {
        assert!(statement.contains("orderkey"), "{statement}");
        assert!(
            !statement.contains("private note") && !statement.contains('7'),
            "{statement}"
        );
    }
    traced.stop().await;
}

/// A script run is one trace with the request that queued it: the worker that
/// claims it parents the run on the trace its row keeps, and the evaluation and
/// each `platform.call` (with the whole pipeline of the call) are its children.
#[tokio::test]
async fn a_script_run_is_one_trace_with_the_request_that_queued_it() {
    let traced = Traced::start().await;
    let database = Backend::Sqlite.database().await.expect("SQLite");
    let yaml = "scripts: { heartbeat_interval: 100ms, lease: 5s }\n\
                personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] }, connections: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["admin"])]);
    let stored = StoredServer::start(config, &database, true).await;
    let (_, created) = stored
        .server
        .rpc(
            "tools/call",
            json!({"name": "manage_script", "arguments": {"command": "create", "name": "traced",
                   "source": "info = platform.call(\"platform_info\", {})\nresult = 1"}}),
        )
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert!(created["result"]["isError"] != true, "{created}");
    let trace = "7bf92f3577b34da6a3ce929d0e0e4739";
    let ran = traced_call(
        &stored.server,
        "run_script",
        json!({"name": "traced"}),
        trace,
        CLIENT_CALL_SPAN,
    )
    .await;
    assert!(ran["result"]["isError"] != true, "{ran}");
    // The worker's own span closes only once the run's ending is written, which
    // under a loaded machine can come long after the evaluation (about one run
    // in six waited past the arrival window); the evaluation shows the worker
    // continued the trace, and the worker's span is checked when it is there.
    let spans = traced
        .spans_named(&[
            "tools/call run_script",
            "script evaluate",
            "platform.call platform_info",
        ])
        .await;
    let call = one(&spans, trace, "tools/call run_script");
    assert_eq!(parent_of(call), Some(CLIENT_CALL_SPAN));
    let evaluate = one(&spans, trace, "script evaluate");
    let worker_span = parent_of(evaluate).expect("the evaluation has a parent");
    assert_ne!(
        worker_span,
        call.span_id.as_str(),
        "the evaluation runs under the worker's span, not the request's"
    );
    if let Some(run) = spans
        .iter()
        .find(|span| span.trace_id == trace && span.name == "script run")
    {
        assert_eq!(run.span_id, worker_span);
        assert_eq!(
            parent_of(run),
            Some(call.span_id.as_str()),
            "the worker continues the trace the run row keeps"
        );
    }
    let platform_call = one(&spans, trace, "platform.call platform_info");
    assert_eq!(parent_of(platform_call), Some(evaluate.span_id.as_str()));
    assert!(
        spans.iter().any(|span| span.trace_id == trace
            && span.name == "authorize"
            && parent_of(span) == Some(platform_call.span_id.as_str())),
        "the call's pipeline is under it: {:?}",
        names(&spans)
    );
    traced.stop().await;
}

/// A session of the earlier era: its requests' spans name the session by a digest
/// (never the id itself, which opens it), and its end records
/// `mcp.server.session.duration` with the negotiated version.
#[tokio::test]
async fn an_earlier_era_session_is_named_by_digest_and_its_duration_recorded() {
    let traced = Traced::start().await;
    let database = Backend::Sqlite.database().await.expect("SQLite");
    let double = TrinoDouble::start().await.expect("double");
    let (a, _b) = replicas(&database, &double, "").await;
    let post = |session: Option<&str>, message: Value| {
        let mut request = a
            .server
            .http
            .post(a.server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .header("x-api-key", key_of("alice"))
            .json(&message);
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.send()
    };
    let opened = post(
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "telemetry-tests", "version": "1"}}}),
    )
    .await
    .expect("initialize");
    let session = opened
        .headers()
        .get("mcp-session-id")
        .and_then(|value| value.to_str().ok())
        .expect("a session")
        .to_owned();
    let listed = post(
        Some(&session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
    )
    .await
    .expect("tools/list");
    assert_eq!(listed.status(), 200);
    let ended = a
        .server
        .http
        .delete(a.server.url("/mcp"))
        .header("x-api-key", key_of("alice"))
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-11-25")
        .send()
        .await
        .expect("delete");
    assert_eq!(ended.status(), 200);
    let spans = traced.spans_named(&["tools/list"]).await;
    let list = spans
        .iter()
        .find(|span| span.name == "tools/list")
        .expect("the list");
    let digest = text(list, "mcp.session.id").expect("the session's digest");
    assert_eq!(digest.len(), 32);
    assert_ne!(digest, session);
    assert_eq!(text(list, "mcp.protocol.version"), Some("2025-11-25"));
    for span in &spans {
        for value in span.attributes.values() {
            assert!(!format!("{value:?}").contains(&session), "{span:?}");
        }
    }
    traced.session_ended_once("2025-11-25").await;
    traced.stop().await;
}

/// A session the idle sweep ends records `mcp.server.session.duration` too, as one
/// its client ends: each swept session once, with its negotiated version.
#[tokio::test]
async fn a_session_ended_by_the_idle_sweep_records_its_duration() {
    let traced = Traced::start().await;
    let database = Backend::Sqlite.database().await.expect("SQLite");
    let double = TrinoDouble::start().await.expect("double");
    let (a, _b) = replicas(&database, &double, "server: { session_idle_timeout: 1s }\n").await;
    let opened = a
        .server
        .http
        .post(a.server.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("x-api-key", key_of("alice"))
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "telemetry-tests", "version": "1"}}}),
        )
        .send()
        .await
        .expect("initialize");
    assert!(opened.headers().contains_key("mcp-session-id"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(a.server.app.end_idle_sessions().await, 1);
    assert_eq!(a.server.app.end_idle_sessions().await, 0, "ended once");
    traced.session_ended_once("2025-06-18").await;
    traced.stop().await;
}

/// The maintenance pass that records a vanished replica's task failed does it in a
/// span of that task's own trace, parented on the span that created it.
#[tokio::test]
async fn the_sweep_records_a_stale_task_in_its_own_trace() {
    let traced = Traced::start().await;
    let database = Backend::Sqlite.database().await.expect("SQLite");
    let yaml = "tasks: { heartbeat_interval: 100ms, stale_after: 400ms }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["admin"])]);
    let survivor = StoredServer::start(config, &database, false).await;
    // A task of a replica that never beat again: only its own stamp ages.
    let mut task = docket_task::testing::new_task("trino_export");
    task.replica_id = "vanished-replica".to_owned();
    task.trace_context =
        docket_task::TaskTrace::new(&traceparent(CLIENT_TRACE, CLIENT_CALL_SPAN), None);
    survivor
        .store
        .task_store()
        .create(task.clone())
        .await
        .expect("create");
    let spans = traced.spans_named(&["task recorded stale"]).await;
    let recorded = one(&spans, CLIENT_TRACE, "task recorded stale");
    assert_eq!(parent_of(recorded), Some(CLIENT_CALL_SPAN));
    assert_eq!(text(recorded, "docket.task.id"), Some(task.id.as_str()));
    let (read, _) = survivor
        .store
        .task_store()
        .get(&task.id)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(read.status, docket_task::TaskStatus::Failed);
    traced.stop().await;
}

/// A collector that is down costs the server nothing but the spans it could not
/// take: every request is answered as before, and the spans are dropped and
/// counted, never waited for.
#[tokio::test]
async fn a_collector_that_is_down_costs_only_dropped_spans() {
    let traced = Traced::start().await;
    traced.collector.set_down(true);
    let database = Backend::Sqlite.database().await.expect("SQLite");
    let double = TrinoDouble::start().await.expect("double");
    let (a, _b) = replicas(&database, &double, "").await;
    for _ in 0..5 {
        let (status, body) = a
            .server
            .rpc(
                "tools/call",
                json!({"name": "platform_info", "arguments": {}}),
            )
            .header("x-api-key", &key_of("alice"))
            .send()
            .await;
        assert_eq!(status, 200, "{body}");
        assert!(body["result"]["isError"] != true, "{body}");
    }
    let telemetry = traced.telemetry.as_ref().expect("telemetry");
    let deadline = tokio::time::Instant::now() + ARRIVAL;
    while telemetry.dropped_spans() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no span was counted dropped"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        traced.collector.spans().is_empty(),
        "a down collector keeps nothing"
    );
    traced.stop().await;
}
