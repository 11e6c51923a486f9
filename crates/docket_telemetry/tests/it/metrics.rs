//! The MCP metrics reach the collector with the conventions' names, unit, attributes and
//! bucket boundaries; without OTLP they are no-ops.

use docket_otlp_collector::{MetricKind, ReceivedMetric, Value};
use docket_telemetry::semconv;
use docket_telemetry::{LogFormat, Telemetry, TelemetryConfig, metrics};

use crate::support::{ARRIVAL, setup};

fn attribute<'a>(point: &'a docket_otlp_collector::DataPoint, key: &str) -> Option<&'a str> {
    point.attributes.get(key).and_then(Value::as_str)
}

fn find<'a>(metrics: &'a [ReceivedMetric], name: &str) -> Option<&'a ReceivedMetric> {
    metrics.iter().rev().find(|metric| metric.name == name)
}

#[tokio::test]
async fn operation_and_session_durations_arrive_as_the_conventions_name_them() {
    let setup = setup(LogFormat::Text, |_| {}).await;
    setup.run(|| {
        metrics::record_operation(
            "tools/call",
            Some("trino_export"),
            None,
            Some("2026-07-28"),
            0.25,
        );
        metrics::record_operation(
            "tools/call",
            Some("trino_export"),
            Some(semconv::ERROR_TYPE_TOOL_ERROR),
            Some("2026-07-28"),
            3.0,
        );
        metrics::record_operation("prompts/get", Some("summarize"), None, None, 0.01);
        metrics::record_operation("tools/list", Some("ignored"), Some("-32602"), None, 0.001);
        metrics::record_session(Some("2025-11-25"), None, 42.0);
    });
    assert!(
        setup.telemetry.flush().await,
        "the flush reaches the collector"
    );
    let received = setup
        .collector
        .wait_for_metrics(
            |metrics| {
                find(metrics, semconv::MCP_SERVER_OPERATION_DURATION).is_some()
                    && find(metrics, semconv::MCP_SERVER_SESSION_DURATION).is_some()
            },
            ARRIVAL,
        )
        .await
        .expect("both metrics arrive");

    let operation = find(&received, semconv::MCP_SERVER_OPERATION_DURATION).expect("operation");
    assert_eq!(operation.unit, "s");
    assert_eq!(operation.kind, MetricKind::Histogram);
    assert_eq!(operation.points.len(), 4, "{operation:#?}");
    for point in &operation.points {
        assert_eq!(
            point.bucket_bounds,
            semconv::DURATION_BUCKETS_SECONDS.to_vec()
        );
        assert_eq!(point.count, Some(1));
        assert_eq!(attribute(point, semconv::NETWORK_TRANSPORT), Some("tcp"));
        assert_eq!(
            attribute(point, semconv::NETWORK_PROTOCOL_NAME),
            Some("http")
        );
    }
    let failed = operation
        .points
        .iter()
        .find(|point| attribute(point, semconv::ERROR_TYPE) == Some("tool_error"))
        .expect("the failed tool call");
    assert_eq!(
        attribute(failed, semconv::MCP_METHOD_NAME),
        Some("tools/call")
    );
    assert_eq!(
        attribute(failed, semconv::GEN_AI_TOOL_NAME),
        Some("trino_export")
    );
    assert_eq!(
        attribute(failed, semconv::GEN_AI_OPERATION_NAME),
        Some("execute_tool")
    );
    assert_eq!(
        attribute(failed, semconv::MCP_PROTOCOL_VERSION),
        Some("2026-07-28")
    );
    assert_eq!(failed.sum, Some(3.0));
    let prompt = operation
        .points
        .iter()
        .find(|point| attribute(point, semconv::MCP_METHOD_NAME) == Some("prompts/get"))
        .expect("the prompt");
    assert_eq!(
        attribute(prompt, semconv::GEN_AI_PROMPT_NAME),
        Some("summarize")
    );
    assert_eq!(attribute(prompt, semconv::GEN_AI_OPERATION_NAME), None);
    assert_eq!(attribute(prompt, semconv::ERROR_TYPE), None);
    let listing = operation
        .points
        .iter()
        .find(|point| attribute(point, semconv::MCP_METHOD_NAME) == Some("tools/list"))
        .expect("the listing");
    assert_eq!(attribute(listing, semconv::GEN_AI_TOOL_NAME), None);
    assert_eq!(attribute(listing, semconv::ERROR_TYPE), Some("-32602"));

    let session = find(&received, semconv::MCP_SERVER_SESSION_DURATION).expect("session");
    assert_eq!(session.unit, "s");
    assert_eq!(session.kind, MetricKind::Histogram);
    let [point] = session.points.as_slice() else {
        panic!("one session point: {session:#?}");
    };
    assert_eq!(
        point.bucket_bounds,
        semconv::DURATION_BUCKETS_SECONDS.to_vec()
    );
    assert_eq!(
        attribute(point, semconv::MCP_PROTOCOL_VERSION),
        Some("2025-11-25")
    );
    assert_eq!(attribute(point, semconv::ERROR_TYPE), None);
    assert_eq!(point.sum, Some(42.0));
    assert_eq!(
        session.resource.get("service.name").and_then(Value::as_str),
        Some("docket-test")
    );
    setup.telemetry.shutdown().await;
}

#[tokio::test]
async fn without_otlp_recording_is_a_no_op_and_no_context_exists() {
    let (dispatch, telemetry) = Telemetry::build(
        &TelemetryConfig::default(),
        LogFormat::Text,
        "info",
        std::io::sink,
    )
    .expect("telemetry without otlp builds, even outside a runtime's needs");
    assert!(!telemetry.exporting());
    let current = tracing::dispatcher::with_default(&dispatch, || {
        metrics::record_operation("tools/call", Some("x"), None, None, 1.0);
        metrics::record_session(None, None, 1.0);
        tracing::info_span!("request").in_scope(docket_telemetry::context::current)
    });
    assert_eq!(current, None);
    assert!(telemetry.flush().await);
    telemetry.shutdown().await;
}
