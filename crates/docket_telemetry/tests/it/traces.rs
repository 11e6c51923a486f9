//! Spans from `tracing` reach the collector as the MCP conventions name them, parented on a
//! client's `_meta.traceparent`, linked, and their context injected into outbound headers.

use docket_otlp_collector::{ReceivedSpan, SpanKind, Value};
use docket_telemetry::LogFormat;
use docket_telemetry::context::{self, TraceContext};
use docket_telemetry::semconv;

use crate::support::{ARRIVAL, setup, setup_filtered};

const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    spans
        .iter()
        .find(|span| span.name == name)
        .unwrap_or_else(|| panic!("no span named {name} in {spans:#?}"))
}

#[tokio::test]
async fn a_request_span_is_parented_on_the_meta_traceparent_and_its_stages_on_it() {
    let setup = setup(LogFormat::Text, |config| {
        config
            .resource_attributes
            .insert("deployment.environment.name".to_owned(), "test".to_owned());
        if let Some(otlp) = config.otlp.as_mut() {
            otlp.headers
                .insert("x-api-key".to_owned(), "k-123".to_owned());
        }
    })
    .await;
    let meta = TraceContext {
        traceparent: format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"),
        tracestate: Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE".to_owned()),
    };
    setup.run(|| {
        let name = semconv::span_name("tools/call", Some("trino_export"));
        let request = tracing::info_span!(
            "mcp.request",
            otel.name = %name,
            otel.kind = "server",
            mcp.method.name = "tools/call",
            gen_ai.tool.name = "trino_export",
            gen_ai.operation.name = semconv::GEN_AI_OPERATION_EXECUTE_TOOL,
            jsonrpc.request.id = "7",
            mcp.protocol.version = "2026-07-28",
            network.transport = "tcp",
        );
        context::set_parent(&request, &meta);
        request.in_scope(|| {
            tracing::info_span!("authorize").in_scope(|| {});
            tracing::info_span!("store.statement").in_scope(|| {});
        });
    });
    let spans = setup
        .collector
        .wait_for_spans(|spans| spans.len() >= 3, ARRIVAL)
        .await
        .expect("three spans arrive");

    let request = named(&spans, "tools/call trino_export");
    assert_eq!(request.kind, SpanKind::Server);
    assert_eq!(request.trace_id, CLIENT_TRACE);
    assert_eq!(request.parent_span_id.as_deref(), Some(CLIENT_SPAN));
    for (key, value) in [
        (semconv::MCP_METHOD_NAME, "tools/call"),
        (semconv::GEN_AI_TOOL_NAME, "trino_export"),
        (semconv::GEN_AI_OPERATION_NAME, "execute_tool"),
        (semconv::JSONRPC_REQUEST_ID, "7"),
        (semconv::MCP_PROTOCOL_VERSION, "2026-07-28"),
        (semconv::NETWORK_TRANSPORT, "tcp"),
    ] {
        assert_eq!(
            request.attributes.get(key).and_then(Value::as_str),
            Some(value),
            "{key} on {request:#?}"
        );
    }
    assert_eq!(
        request.resource.get("service.name").and_then(Value::as_str),
        Some("docket-test")
    );
    assert_eq!(
        request
            .resource
            .get("deployment.environment.name")
            .and_then(Value::as_str),
        Some("test")
    );
    let headers = setup.collector.last_headers();
    assert_eq!(headers.get("x-api-key").map(String::as_str), Some("k-123"));
    assert_eq!(
        headers.get("content-type").map(String::as_str),
        Some("application/x-protobuf")
    );
    for stage in ["authorize", "store.statement"] {
        let child = named(&spans, stage);
        assert_eq!(child.trace_id, CLIENT_TRACE);
        assert_eq!(
            child.parent_span_id.as_deref(),
            Some(request.span_id.as_str())
        );
        assert_eq!(child.kind, SpanKind::Internal);
    }
    setup.telemetry.shutdown().await;
}

#[tokio::test]
async fn an_invalid_traceparent_is_ignored_and_the_span_starts_its_own_trace() {
    let setup = setup(LogFormat::Text, |_| {}).await;
    let malformed = TraceContext {
        traceparent: format!("00-{}-{CLIENT_SPAN}-01", CLIENT_TRACE.to_uppercase()),
        tracestate: None,
    };
    setup.run(|| {
        let span = tracing::info_span!("mcp.request", otel.name = "tools/list");
        context::set_parent(&span, &malformed);
        span.in_scope(|| {});
    });
    let spans = setup
        .collector
        .wait_for_spans(|spans| !spans.is_empty(), ARRIVAL)
        .await
        .expect("the span arrives");
    let span = named(&spans, "tools/list");
    assert_ne!(span.trace_id, CLIENT_TRACE.to_lowercase());
    assert_eq!(span.parent_span_id, None);
    setup.telemetry.shutdown().await;
}

#[tokio::test]
async fn a_span_links_to_another_context_without_becoming_its_child() {
    let setup = setup(LogFormat::Text, |_| {}).await;
    let creation = TraceContext {
        traceparent: format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"),
        tracestate: None,
    };
    setup.run(|| {
        let beat = tracing::info_span!("task.heartbeat");
        context::add_link(&beat, &creation);
        beat.in_scope(|| {});
    });
    let spans = setup
        .collector
        .wait_for_spans(|spans| !spans.is_empty(), ARRIVAL)
        .await
        .expect("the span arrives");
    let beat = named(&spans, "task.heartbeat");
    assert_eq!(
        beat.links,
        vec![(CLIENT_TRACE.to_owned(), CLIENT_SPAN.to_owned())]
    );
    assert_ne!(beat.trace_id, CLIENT_TRACE);
    assert_eq!(beat.parent_span_id, None);
    setup.telemetry.shutdown().await;
}

#[tokio::test]
async fn inject_writes_the_active_spans_context_and_current_returns_it() {
    let setup = setup(LogFormat::Text, |_| {}).await;
    let parent = TraceContext {
        traceparent: format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"),
        tracestate: Some("congo=t61rcWkgMzE".to_owned()),
    };
    let (headers, current, outside) = setup.run(|| {
        let upstream = tracing::info_span!("upstream.request", otel.kind = "client");
        context::set_parent(&upstream, &parent);
        let (headers, current) = upstream.in_scope(|| {
            let mut headers = http::HeaderMap::new();
            headers.insert("traceparent", http::HeaderValue::from_static("stale"));
            context::inject(&mut headers);
            (headers, context::current())
        });
        (headers, current, context::current())
    });
    assert_eq!(outside, None, "no span is active outside");
    let spans = setup
        .collector
        .wait_for_spans(|spans| !spans.is_empty(), ARRIVAL)
        .await
        .expect("the span arrives");
    let upstream = named(&spans, "upstream.request");
    assert_eq!(upstream.kind, SpanKind::Client);
    let expected = format!("00-{CLIENT_TRACE}-{}-01", upstream.span_id);
    assert_eq!(
        headers
            .get("traceparent")
            .and_then(|value| value.to_str().ok()),
        Some(expected.as_str())
    );
    assert_eq!(
        headers
            .get("tracestate")
            .and_then(|value| value.to_str().ok()),
        Some("congo=t61rcWkgMzE")
    );
    let current = current.expect("a context inside the span");
    assert_eq!(current.traceparent, expected);
    assert_eq!(context::extract(&headers), Some(current));
    setup.telemetry.shutdown().await;
}

#[tokio::test]
async fn an_unsampled_caller_is_followed_and_nothing_is_exported() {
    let setup = setup(LogFormat::Text, |_| {}).await;
    let unsampled = TraceContext {
        traceparent: format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-00"),
        tracestate: None,
    };
    let injected = setup.run(|| {
        let request = tracing::info_span!("mcp.request", otel.name = "tools/list");
        context::set_parent(&request, &unsampled);
        request.in_scope(context::current)
    });
    setup.run(|| tracing::info_span!("sampled").in_scope(|| {}));
    let spans = setup
        .collector
        .wait_for_spans(|spans| !spans.is_empty(), ARRIVAL)
        .await
        .expect("the sampled span arrives");
    assert_eq!(
        spans
            .iter()
            .map(|span| span.name.as_str())
            .collect::<Vec<_>>(),
        vec!["sampled"],
        "the unsampled request is not exported"
    );
    let injected = injected.expect("an unsampled span still has a context to pass on");
    assert!(
        injected
            .traceparent
            .starts_with(&format!("00-{CLIENT_TRACE}-"))
    );
    assert!(injected.traceparent.ends_with("-00"));
    assert_eq!(setup.telemetry.dropped_spans(), 0);
    setup.telemetry.shutdown().await;
}

#[tokio::test]
async fn a_span_below_info_passes_its_traced_parents_context_on() {
    // Logged at DEBUG, so the inner span exists for the log lines, but only spans at INFO
    // and above are traced.
    let setup = setup_filtered(LogFormat::Text, "debug", |_| {}).await;
    let (outer, inner) = setup.run(|| {
        tracing::info_span!("upstream.request").in_scope(|| {
            let outer = context::current();
            let inner = tracing::debug_span!("connection").in_scope(|| {
                tracing::info!("connected");
                context::current()
            });
            (outer, inner)
        })
    });
    let outer = outer.expect("the traced span's context");
    assert_eq!(
        inner.as_ref(),
        Some(&outer),
        "the untraced span passes its parent's on"
    );
    let spans = setup
        .collector
        .wait_for_spans(|spans| !spans.is_empty(), ARRIVAL)
        .await
        .expect("the traced span arrives");
    assert_eq!(
        spans
            .iter()
            .map(|span| span.name.as_str())
            .collect::<Vec<_>>(),
        vec!["upstream.request"]
    );
    let line = setup
        .log_lines()
        .into_iter()
        .find(|line| line.contains("connected"))
        .expect("the line inside the untraced span");
    assert!(
        line.ends_with(&format!(
            " trace_id={} span_id={}",
            spans[0].trace_id, spans[0].span_id
        )),
        "{line}"
    );
    setup.telemetry.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_from_tasks_on_several_threads_all_arrive_in_their_traces() {
    use tracing::instrument::WithSubscriber as _;

    let setup = setup(LogFormat::Json, |_| {}).await;
    let mut tasks = Vec::new();
    for task in 0..4u32 {
        let work = async move {
            for step in 0..50u32 {
                let span = tracing::info_span!("step", task, step);
                let parent = async {
                    tokio::task::yield_now().await;
                    tracing::info_span!("stage").in_scope(|| {});
                };
                tracing::Instrument::instrument(parent, span).await;
            }
        };
        tasks.push(tokio::spawn(work.with_subscriber(setup.dispatch.clone())));
    }
    for task in tasks {
        task.await.expect("the task finishes");
    }
    let spans = setup
        .collector
        .wait_for_spans(|spans| spans.len() >= 400, ARRIVAL)
        .await
        .expect("every span arrives");
    assert_eq!(spans.len(), 400);
    for stage in spans.iter().filter(|span| span.name == "stage") {
        let parent = spans
            .iter()
            .find(|span| Some(&span.span_id) == stage.parent_span_id.as_ref())
            .expect("each stage's parent arrived");
        assert_eq!(parent.name, "step");
        assert_eq!(parent.trace_id, stage.trace_id);
    }
    assert_eq!(setup.telemetry.dropped_spans(), 0);
    setup.telemetry.shutdown().await;
}
