//! A real client SDK sends `_meta.traceparent` (issue 37, "proof with real parts"):
//! `rmcp`, the official Rust SDK, connects by `server/discover` and calls a tool with
//! W3C trace context that it writes into the request's `_meta` itself
//! (`RequestParamsMeta::set_traceparent`, `set_tracestate`), sharing no code with
//! Docket; the server's SERVER span for the call arrives at a real OTLP/HTTP receiver
//! (`docket_otlp_collector`) in the client's trace, parented on the client's span.
//!
//! As in `telemetry.rs`, the subscriber is this test's own (`Telemetry::build`), the
//! default of its one thread on a current-thread runtime, where the server, the
//! collector and the client all run.

use std::time::Duration;

use docket_otlp_collector::{Collector, ReceivedSpan, SpanKind};
use docket_telemetry::{LogFormat, OtlpConfig, Telemetry, TelemetryConfig};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, Implementation,
    ProtocolVersion, RequestParamsMeta as _,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt as _};

use crate::support::TestServer;

/// The client's trace and the span around its call.
const CLIENT_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const CLIENT_SPAN: &str = "b7ad6b7169203331";

/// How long the spans may take to arrive (they leave in batches).
const ARRIVAL: Duration = Duration::from_secs(60);

fn text<'a>(span: &'a ReceivedSpan, key: &str) -> Option<&'a str> {
    span.attributes
        .get(key)
        .and_then(docket_otlp_collector::Value::as_str)
}

#[tokio::test]
async fn the_rust_sdk_sends_traceparent_in_meta_and_the_server_span_continues_its_trace() {
    let collector = Collector::start().await;
    let config = TelemetryConfig {
        otlp: Some(OtlpConfig {
            endpoint: collector.endpoint(),
            ..OtlpConfig::default()
        }),
        ..TelemetryConfig::default()
    };
    let (dispatch, telemetry) =
        Telemetry::build(&config, LogFormat::Text, "warn", std::io::sink).expect("telemetry");
    let _guard = tracing::dispatcher::set_default(&dispatch);
    let server = TestServer::default_app().await;

    let info = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("docket-telemetry-rmcp", "0"),
    );
    let transport = StreamableHttpClientTransport::from_uri(server.url("/mcp"));
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = info
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .expect("rmcp connects by server/discover");

    let mut params = CallToolRequestParams::new("platform_info");
    params.set_traceparent(&format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01"));
    params.set_tracestate("rmcp=sdk");
    match client.call_tool_once(params).await.expect("tools/call") {
        CallToolResponse::Complete(result) => {
            assert_ne!(result.is_error, Some(true), "{result:?}");
        }
        other => panic!("platform_info answers at once: {other:?}"),
    }

    let name = "tools/call platform_info";
    let spans = collector
        .wait_for_spans(
            |spans| {
                spans
                    .iter()
                    .any(|span| span.name == name && span.trace_id == CLIENT_TRACE)
            },
            ARRIVAL,
        )
        .await
        .unwrap_or_else(|| {
            let arrived: Vec<_> = collector
                .spans()
                .into_iter()
                .map(|span| (span.name, span.trace_id))
                .collect();
            panic!("no {name} span in the client's trace arrived; got {arrived:?}")
        });
    let call: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|span| span.name == name && span.trace_id == CLIENT_TRACE)
        .collect();
    assert_eq!(call.len(), 1, "{call:#?}");
    let call = call[0];
    assert_eq!(call.kind, SpanKind::Server, "{call:?}");
    assert_eq!(
        call.parent_span_id.as_deref(),
        Some(CLIENT_SPAN),
        "the server span is the SDK client's span's child: {call:?}"
    );
    assert_eq!(
        text(call, "mcp.method.name"),
        Some("tools/call"),
        "{call:?}"
    );
    assert_eq!(
        text(call, "gen_ai.tool.name"),
        Some("platform_info"),
        "{call:?}"
    );
    assert_eq!(
        text(call, "mcp.protocol.version"),
        Some("2026-07-28"),
        "{call:?}"
    );
    // The server/discover that opened the connection carried no trace context: it
    // starts a trace of its own, never the client's.
    assert!(
        spans
            .iter()
            .filter(|span| span.trace_id == CLIENT_TRACE && span.parent_span_id.is_none())
            .count()
            == 0,
        "nothing in the client's trace is a root: {spans:#?}"
    );

    client.cancel().await.expect("the client closes");
    drop(server);
    telemetry.shutdown().await;
}
