//! A collector that is down or slow costs dropped spans and nothing else: ending a span
//! returns at once, the queue never holds more than `max_queue_spans`, the drops are
//! counted, and flush and shutdown come back.

use std::time::Duration;

use docket_telemetry::LogFormat;

use crate::support::{ARRIVAL, setup};

#[tokio::test]
async fn a_collector_that_is_down_costs_the_spans_and_they_are_counted() {
    let setup = setup(LogFormat::Text, |_| {}).await;
    setup.collector.set_down(true);
    setup.run(|| {
        for index in 0..50 {
            tracing::info_span!("work", index).in_scope(|| {});
        }
    });
    assert!(
        !setup.telemetry.flush().await,
        "a refused export is not a flush"
    );
    assert_eq!(setup.telemetry.dropped_spans(), 50);
    assert_eq!(setup.telemetry.exported_spans(), 0);
    assert_eq!(setup.telemetry.queued_spans(), 0);
    assert!(setup.collector.spans().is_empty());
    assert!(setup.collector.requests() > 0, "the exporter did try");

    // The collector comes back: new spans go through, the dropped ones stay dropped.
    setup.collector.set_down(false);
    setup.run(|| tracing::info_span!("after").in_scope(|| {}));
    let spans = setup
        .collector
        .wait_for_spans(|spans| !spans.is_empty(), ARRIVAL)
        .await
        .expect("the span after the outage arrives");
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].name, "after");
    assert_eq!(setup.telemetry.dropped_spans(), 50);
    setup.telemetry.shutdown().await;
}

#[tokio::test]
async fn a_slow_collector_fills_the_bounded_queue_and_the_rest_are_dropped() {
    let setup = setup(LogFormat::Text, |config| {
        config.max_queue_spans = 8;
        if let Some(otlp) = config.otlp.as_mut() {
            otlp.timeout_seconds = 1;
        }
    })
    .await;
    setup.collector.set_slow(Duration::from_secs(600));
    let mut most_queued = 0;
    setup.run(|| {
        for index in 0..100 {
            tracing::info_span!("work", index).in_scope(|| {});
            most_queued = most_queued.max(setup.telemetry.queued_spans());
        }
    });
    assert!(most_queued <= 8, "the queue held {most_queued}");
    assert_eq!(
        setup.telemetry.dropped_spans(),
        92,
        "all but the queue's 8 are dropped while the collector stalls"
    );
    // The 8 in the queue time out at the collector and are counted too; the flush returns.
    assert!(!setup.telemetry.flush().await);
    assert_eq!(setup.telemetry.dropped_spans(), 100);
    assert_eq!(setup.telemetry.queued_spans(), 0);
    assert_eq!(setup.telemetry.exported_spans(), 0);
    // Shutting down against the stalled collector comes back too.
    setup.telemetry.shutdown().await;
}

#[tokio::test]
async fn a_collector_that_is_not_there_at_all_costs_only_the_spans() {
    let setup = setup(LogFormat::Text, |config| {
        if let Some(otlp) = config.otlp.as_mut() {
            // A port nothing listens on: the connection is refused.
            otlp.endpoint = "http://127.0.0.1:9".to_owned();
        }
    })
    .await;
    setup.run(|| {
        for index in 0..10 {
            tracing::info_span!("work", index).in_scope(|| {});
        }
    });
    assert!(!setup.telemetry.flush().await);
    assert_eq!(setup.telemetry.dropped_spans(), 10);
    setup.telemetry.shutdown().await;
}
