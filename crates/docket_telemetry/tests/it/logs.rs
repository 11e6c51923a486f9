//! Log lines carry the active span's `trace_id` and `span_id`, in both formats, and none
//! when no span is active.

use docket_telemetry::LogFormat;
use docket_telemetry::context;

use crate::support::{ARRIVAL, setup};

/// Logs one line outside any span and one inside, and returns the inside span's ids as the
/// collector received them.
async fn log_inside_and_outside(setup: &crate::support::Setup) -> (String, String) {
    let traceparent = setup.run(|| {
        tracing::info!("before any span");
        tracing::info_span!("request").in_scope(|| {
            tracing::info!(rows = 3, "inside the request");
            context::current().map(|current| current.traceparent)
        })
    });
    let spans = setup
        .collector
        .wait_for_spans(|spans| !spans.is_empty(), ARRIVAL)
        .await
        .expect("the span arrives");
    let span = &spans[0];
    assert_eq!(
        traceparent,
        Some(format!("00-{}-{}-01", span.trace_id, span.span_id))
    );
    (span.trace_id.clone(), span.span_id.clone())
}

#[tokio::test]
async fn text_lines_end_with_the_active_spans_ids() {
    let setup = setup(LogFormat::Text, |_| {}).await;
    let (trace_id, span_id) = log_inside_and_outside(&setup).await;
    let lines = setup.log_lines();
    let [before, inside] = lines.as_slice() else {
        panic!("two lines: {lines:#?}");
    };
    assert!(before.contains("before any span"), "{before}");
    assert!(!before.contains("trace_id="), "{before}");
    assert!(inside.contains("inside the request"), "{inside}");
    assert!(inside.contains("rows=3"), "{inside}");
    assert!(
        inside.ends_with(&format!(" trace_id={trace_id} span_id={span_id}")),
        "{inside}"
    );
    setup.telemetry.shutdown().await;
}

#[tokio::test]
async fn json_lines_carry_the_active_spans_ids_as_fields() {
    let setup = setup(LogFormat::Json, |_| {}).await;
    let (trace_id, span_id) = log_inside_and_outside(&setup).await;
    let lines = setup.log_lines();
    let [before, inside] = lines.as_slice() else {
        panic!("two lines: {lines:#?}");
    };
    let before: serde_json::Value = serde_json::from_str(before).expect("a JSON line");
    let inside: serde_json::Value = serde_json::from_str(inside).expect("a JSON line");
    assert_eq!(before["fields"]["message"], "before any span");
    assert_eq!(before.get("trace_id"), None);
    assert_eq!(inside["fields"]["message"], "inside the request");
    assert_eq!(inside["fields"]["rows"], 3);
    assert_eq!(inside["trace_id"], trace_id.as_str());
    assert_eq!(inside["span_id"], span_id.as_str());
    assert_eq!(inside["level"], "INFO");
    setup.telemetry.shutdown().await;
}
