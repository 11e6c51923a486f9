//! What tracing costs a request: the same request-shaped spans (a server span with the MCP
//! attributes parented on a client's traceparent, two stage spans, one injected header map)
//! timed with OTLP off, on but unsampled, and on and sampled into a real OTLP receiver. The
//! figure that matters is the time added per request; the ratio is to spans that do nothing,
//! not to a whole request, so it is large by construction.
//!
//! `cargo run --release -p docket_telemetry --example overhead [REQUESTS]`

use std::time::{Duration, Instant};

use docket_otlp_collector::Collector;
use docket_telemetry::context::{self, TraceContext};
use docket_telemetry::{LogFormat, OtlpConfig, SamplerConfig, Telemetry, TelemetryConfig};

/// One request's spans, as the server opens them.
fn request(index: u64) {
    let parent = TraceContext {
        traceparent: format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{:016x}-01", index + 1),
        tracestate: None,
    };
    let span = tracing::info_span!(
        "mcp",
        otel.name = "tools/call trino_query",
        otel.kind = "server",
        mcp.method.name = "tools/call",
        gen_ai.tool.name = "trino_query",
        gen_ai.operation.name = "execute_tool",
        jsonrpc.request.id = index,
    );
    context::set_parent(&span, &parent);
    span.in_scope(|| {
        tracing::info_span!("authorize").in_scope(|| {});
        tracing::info_span!("upstream.request").in_scope(|| {
            let mut headers = http::HeaderMap::new();
            context::inject(&mut headers);
            std::hint::black_box(headers);
        });
    });
}

async fn measure(name: &str, config: &TelemetryConfig, requests: u64) -> Duration {
    let (dispatch, telemetry) = Telemetry::build(config, LogFormat::Json, "warn", std::io::sink)
        .expect("a valid configuration");
    let started = Instant::now();
    tracing::dispatcher::with_default(&dispatch, || {
        for index in 0..requests {
            request(index);
        }
    });
    let elapsed = started.elapsed();
    let flushed = telemetry.flush().await;
    println!(
        "{name:<28} {:>8.2} µs per request   exported {:>7}  dropped {:>7}  flushed {flushed}",
        elapsed.as_secs_f64() * 1e6 / requests as f64,
        telemetry.exported_spans(),
        telemetry.dropped_spans(),
    );
    telemetry.shutdown().await;
    elapsed
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let requests: u64 = std::env::args()
        .nth(1)
        .and_then(|text| text.parse().ok())
        .unwrap_or(20_000);
    let collector = Collector::start().await;
    let otlp = OtlpConfig {
        endpoint: collector.endpoint(),
        ..OtlpConfig::default()
    };
    let off = TelemetryConfig::default();
    let unsampled = TelemetryConfig {
        otlp: Some(otlp.clone()),
        sampler: SamplerConfig {
            ratio: 0.0,
            parent_based: false,
        },
        ..TelemetryConfig::default()
    };
    let sampled = TelemetryConfig {
        otlp: Some(otlp),
        // Room for every span, so the figure is the cost of sending, not of dropping.
        max_queue_spans: usize::try_from(requests * 3)
            .unwrap_or(usize::MAX)
            .min(1_000_000),
        ..TelemetryConfig::default()
    };
    // A first pass warms allocators and callsite caches.
    measure("warm-up (off)", &off, requests / 10 + 1).await;
    let off_time = measure("off", &off, requests).await;
    let unsampled_time = measure("on, unsampled", &unsampled, requests).await;
    let sampled_time = measure("on, sampled, exported", &sampled, requests).await;
    let ratio = |time: Duration| time.as_secs_f64() / off_time.as_secs_f64();
    println!(
        "ratio to off: unsampled {:.2}, sampled {:.2} ({} spans received)",
        ratio(unsampled_time),
        ratio(sampled_time),
        collector.spans().len()
    );
}
