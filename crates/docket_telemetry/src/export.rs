//! The bounded export queue: finished spans wait here for the OTLP exporter, at most
//! `max_queue_spans` of them (those being sent included); when the queue is full, or an
//! export fails or times out, spans are dropped and counted. Ending a span never waits.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use tokio::sync::{mpsc, oneshot};
use tracing::instrument::WithSubscriber as _;

/// The most spans one export request carries.
const MAX_BATCH_SPANS: usize = 512;
/// How long a span may wait for more to fill its batch.
const BATCH_DELAY: Duration = Duration::from_millis(500);

/// What the queue's numbers are, shared by the processor, its worker and `Telemetry`.
#[derive(Debug, Default)]
pub(crate) struct QueueCounters {
    /// Spans waiting or being sent.
    pub(crate) queued: AtomicUsize,
    /// Spans given up: the queue was full, or their export failed or timed out.
    pub(crate) dropped: AtomicU64,
    /// Spans the collector accepted.
    pub(crate) exported: AtomicU64,
}

enum Message {
    Span(Box<SpanData>),
    /// Send everything before this message; answer whether all of it was accepted.
    Flush(oneshot::Sender<bool>),
}

/// The span processor the tracer provider calls: hands finished, sampled spans to the worker
/// through an unbounded channel whose length `queued` bounds.
#[derive(Debug)]
pub(crate) struct QueueProcessor {
    sender: mpsc::UnboundedSender<Message>,
    counters: Arc<QueueCounters>,
    max_queue_spans: usize,
}

/// The handle `Telemetry` keeps to flush the queue.
#[derive(Debug, Clone)]
pub(crate) struct QueueHandle {
    sender: mpsc::UnboundedSender<Message>,
}

impl QueueHandle {
    /// Asks the worker to send what waits, and waits until `deadline` at most; `true` when
    /// the collector accepted all of it.
    pub(crate) async fn flush(&self, deadline: tokio::time::Instant) -> bool {
        let (done, finished) = oneshot::channel();
        if self.sender.send(Message::Flush(done)).is_err() {
            return false;
        }
        matches!(
            tokio::time::timeout_at(deadline, finished).await,
            Ok(Ok(true))
        )
    }
}

/// Starts the worker on the current Tokio runtime and returns the processor and a handle.
pub(crate) fn start<E>(
    exporter: E,
    counters: Arc<QueueCounters>,
    max_queue_spans: usize,
    export_timeout: Duration,
) -> (QueueProcessor, QueueHandle)
where
    E: SpanExporter + 'static,
{
    let (sender, receiver) = mpsc::unbounded_channel();
    let worker = Worker {
        exporter,
        receiver,
        counters: Arc::clone(&counters),
        batch_size: max_queue_spans.clamp(1, MAX_BATCH_SPANS),
        export_timeout,
        failed_since_flush: false,
    };
    // The exporter's own HTTP client emits tracing events; none of them may become spans
    // that are exported in turn, so the worker runs with no subscriber at all.
    tokio::spawn(
        worker
            .run()
            .with_subscriber(tracing::subscriber::NoSubscriber::default()),
    );
    (
        QueueProcessor {
            sender: sender.clone(),
            counters,
            max_queue_spans,
        },
        QueueHandle { sender },
    )
}

impl SpanProcessor for QueueProcessor {
    fn on_start(&self, _span: &mut Span, _cx: &Context) {}

    fn on_end(&self, span: SpanData) {
        if !span.span_context.is_sampled() {
            return;
        }
        let admitted = self
            .counters
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |queued| {
                (queued < self.max_queue_spans).then_some(queued + 1)
            })
            .is_ok();
        if !admitted {
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.sender.send(Message::Span(Box::new(span))).is_err() {
            self.counters.queued.fetch_sub(1, Ordering::AcqRel);
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        // Flushing waits, which a synchronous call on a runtime thread must not do;
        // `Telemetry::shutdown` flushes through the handle with a deadline instead.
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        Ok(())
    }
}

struct Worker<E> {
    exporter: E,
    receiver: mpsc::UnboundedReceiver<Message>,
    counters: Arc<QueueCounters>,
    batch_size: usize,
    export_timeout: Duration,
    /// Whether an export failed since the last flush, which the flush then reports.
    failed_since_flush: bool,
}

impl<E: SpanExporter> Worker<E> {
    async fn run(mut self) {
        let mut batch: Vec<SpanData> = Vec::with_capacity(self.batch_size);
        loop {
            let message = if batch.is_empty() {
                self.receiver.recv().await
            } else {
                match tokio::time::timeout(BATCH_DELAY, self.receiver.recv()).await {
                    Ok(message) => message,
                    Err(_elapsed) => {
                        // A failed export is counted; the worker goes on with the next.
                        let _ = self.export(&mut batch).await;
                        continue;
                    }
                }
            };
            match message {
                Some(Message::Span(span)) => {
                    batch.push(*span);
                    if batch.len() >= self.batch_size {
                        let _ = self.export(&mut batch).await;
                    }
                }
                Some(Message::Flush(done)) => {
                    // Everything ended before the flush was asked for is in `batch` already.
                    let accepted = self.export(&mut batch).await && !self.failed_since_flush;
                    self.failed_since_flush = false;
                    let _ = done.send(accepted);
                }
                None => {
                    let _ = self.export(&mut batch).await;
                    return;
                }
            }
        }
    }

    /// Sends `batch` (emptying it); `true` when the collector accepted it or it was empty.
    async fn export(&mut self, batch: &mut Vec<SpanData>) -> bool {
        if batch.is_empty() {
            return true;
        }
        let spans = std::mem::replace(batch, Vec::with_capacity(self.batch_size));
        let count = spans.len();
        let outcome = tokio::time::timeout(self.export_timeout, self.exporter.export(spans)).await;
        let accepted = matches!(outcome, Ok(Ok(())));
        if accepted {
            self.counters
                .exported
                .fetch_add(count as u64, Ordering::Relaxed);
        } else {
            self.counters
                .dropped
                .fetch_add(count as u64, Ordering::Relaxed);
            self.failed_since_flush = true;
        }
        self.counters.queued.fetch_sub(count, Ordering::AcqRel);
        accepted
    }
}
