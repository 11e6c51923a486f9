#![doc = include_str!("../README.md")]

pub mod config;
pub mod context;
mod export;
mod logs;
pub mod metrics;
mod scrub;
pub mod semconv;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use opentelemetry::InstrumentationScope;
use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::metrics::periodic_reader_with_async_runtime::PeriodicReader;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing::Dispatch;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::FilterExt as _;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt as _;

pub use config::{OtlpConfig, OtlpProtocol, SamplerConfig, TelemetryConfig};
pub use logs::LogFormat;
pub use scrub::{MAX_STATEMENT_BYTES, scrub_statement};

use export::{QueueCounters, QueueHandle};
use metrics::{Instruments, InstrumentsLayer};

/// The longest `flush` or `shutdown` waits for the last spans and metrics to leave, both
/// together.
const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(3);

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The `telemetry:` section has problems ([`TelemetryConfig::problems`]).
    #[error("the telemetry configuration is invalid: {}", .0.join("; "))]
    Config(Vec<String>),
    /// The log filter is not a valid `tracing` filter.
    #[error("the log filter `{filter}` is invalid")]
    Filter {
        /// The filter as given.
        filter: String,
        /// What is wrong with it.
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// The OTLP exporter could not be built.
    #[error("the otlp exporter could not be built")]
    Exporter(#[source] opentelemetry_otlp::ExporterBuildError),
    /// OTLP export runs on Tokio, and no runtime was running.
    #[error("otlp export needs a running tokio runtime")]
    NoRuntime,
    /// A global `tracing` subscriber was installed before.
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled(#[source] tracing::dispatcher::SetGlobalDefaultError),
}

/// Docket's telemetry, as [`Telemetry::init`] or [`Telemetry::build`] returns it. Keep it
/// for the life of the process and end with [`Telemetry::shutdown`], which sends the last
/// spans and metrics.
#[derive(Debug)]
pub struct Telemetry {
    tracer_provider: Option<SdkTracerProvider>,
    meter_provider: Option<SdkMeterProvider>,
    queue: Option<QueueHandle>,
    counters: Arc<QueueCounters>,
}

impl Telemetry {
    /// Installs the process's global `tracing` subscriber: log lines to standard output in
    /// `logs` format filtered by `filter` (`info`, `docket_server=debug,info`), each carrying
    /// `trace_id` and `span_id` when a span is active, and, when `config.otlp` is set, the
    /// bridge of every `tracing` span to OpenTelemetry, exported over OTLP through the
    /// bounded queue. Sets the W3C trace-context propagator. Never waits for the collector.
    ///
    /// # Errors
    ///
    /// An invalid configuration or filter, an exporter that cannot be built, no Tokio
    /// runtime while OTLP is configured, or a global subscriber already installed.
    pub fn init(
        config: &TelemetryConfig,
        logs: LogFormat,
        filter: &str,
    ) -> Result<Telemetry, TelemetryError> {
        let ansi = logs == LogFormat::Text && std::io::IsTerminal::is_terminal(&std::io::stdout());
        let (dispatch, telemetry) = Self::build_inner(config, logs, filter, std::io::stdout, ansi)?;
        tracing::dispatcher::set_global_default(dispatch)
            .map_err(TelemetryError::AlreadyInstalled)?;
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        Ok(telemetry)
    }

    /// What [`Telemetry::init`] installs, without installing it: the subscriber (to use with
    /// `tracing::dispatcher::with_default` or `set_default`) writing log lines to `writer`
    /// without colours, and its telemetry. Tests build as many as they like.
    ///
    /// # Errors
    ///
    /// As [`Telemetry::init`], but never [`TelemetryError::AlreadyInstalled`].
    pub fn build<W>(
        config: &TelemetryConfig,
        logs: LogFormat,
        filter: &str,
        writer: W,
    ) -> Result<(Dispatch, Telemetry), TelemetryError>
    where
        W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
    {
        Self::build_inner(config, logs, filter, writer, false)
    }

    fn build_inner<W>(
        config: &TelemetryConfig,
        logs: LogFormat,
        filter: &str,
        writer: W,
        ansi: bool,
    ) -> Result<(Dispatch, Telemetry), TelemetryError>
    where
        W: for<'writer> MakeWriter<'writer> + Send + Sync + 'static,
    {
        let problems = config.problems("telemetry");
        if !problems.is_empty() {
            return Err(TelemetryError::Config(problems));
        }
        let log_filter = tracing_subscriber::EnvFilter::try_new(filter).map_err(|source| {
            TelemetryError::Filter {
                filter: filter.to_owned(),
                source,
            }
        })?;
        let dispatch_cell = logs::DispatchCell::default();
        let fmt_layer = match logs {
            LogFormat::Text => tracing_subscriber::fmt::layer()
                .with_ansi(ansi)
                .with_writer(writer)
                .event_format(logs::WithTraceIds {
                    inner: tracing_subscriber::fmt::format().with_ansi(ansi),
                    json: false,
                    dispatch: Arc::clone(&dispatch_cell),
                })
                .boxed(),
            LogFormat::Json => tracing_subscriber::fmt::layer()
                .json()
                .with_writer(writer)
                .event_format(logs::WithTraceIds {
                    inner: tracing_subscriber::fmt::format().json(),
                    json: true,
                    dispatch: Arc::clone(&dispatch_cell),
                })
                .boxed(),
        }
        // Log lines are events only: a line inside a span reads as it did before spans
        // (no `mcp{…}:authorize:` prefix of every span's fields), and a span costs the
        // log layer nothing. The ids at the end of a line come from the registry.
        .with_filter(
            log_filter.and(tracing_subscriber::filter::filter_fn(|metadata| {
                metadata.is_event()
            })),
        );

        let counters = Arc::new(QueueCounters::default());
        let mut telemetry = Telemetry {
            tracer_provider: None,
            meter_provider: None,
            queue: None,
            counters: Arc::clone(&counters),
        };
        let Some(otlp) = &config.otlp else {
            let subscriber = tracing_subscriber::registry().with(fmt_layer);
            return Ok((Dispatch::new(subscriber), telemetry));
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(TelemetryError::NoRuntime);
        }

        let resource = resource(config);
        let timeout = Duration::from_secs(otlp.timeout_seconds);
        let headers: HashMap<String, String> = otlp
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();

        let mut span_exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(otlp.traces_url())
            .with_timeout(timeout)
            .with_headers(headers.clone())
            .build()
            .map_err(TelemetryError::Exporter)?;
        opentelemetry_sdk::trace::SpanExporter::set_resource(&mut span_exporter, &resource);
        let (processor, queue) =
            export::start(span_exporter, counters, config.max_queue_spans, timeout);
        let tracer_provider = SdkTracerProvider::builder()
            .with_resource(resource.clone())
            .with_sampler(sampler(config.sampler))
            .with_span_processor(processor)
            .build();
        let tracer = tracer_provider.tracer_with_scope(scope());

        let metric_exporter = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(otlp.metrics_url())
            .with_timeout(timeout)
            .with_headers(headers)
            .build()
            .map_err(TelemetryError::Exporter)?;
        let reader = PeriodicReader::builder(metric_exporter, opentelemetry_sdk::runtime::Tokio)
            .with_interval(Duration::from_secs(config.metrics_interval_seconds))
            .with_timeout(timeout)
            .build();
        let meter_provider = SdkMeterProvider::builder()
            .with_resource(resource)
            .with_reader(reader)
            .build();
        let instruments = Instruments::new(&meter_provider.meter_with_scope(scope()));

        // Docket's own spans are at INFO and above; the libraries' debug spans stay out of
        // traces whatever the log filter says.
        let otel_layer = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_threads(false)
            .with_filter(LevelFilter::INFO);
        let subscriber = tracing_subscriber::registry()
            .with(fmt_layer)
            .with(otel_layer)
            // These two carry state and observe nothing; their filter says so, or the
            // subscriber would enable every span and event of every library for them.
            .with(InstrumentsLayer { instruments }.with_filter(LevelFilter::OFF))
            .with(
                logs::DispatchLayer {
                    dispatch: dispatch_cell,
                }
                .with_filter(LevelFilter::OFF),
            );
        telemetry.tracer_provider = Some(tracer_provider);
        telemetry.meter_provider = Some(meter_provider);
        telemetry.queue = Some(queue);
        Ok((Dispatch::new(subscriber), telemetry))
    }

    /// Spans given up so far: the queue was full (`max_queue_spans`), or their export failed
    /// or timed out. Unsampled spans are not counted; they were never to be sent.
    pub fn dropped_spans(&self) -> u64 {
        self.counters.dropped.load(Ordering::Relaxed)
    }

    /// Spans the collector has accepted so far.
    pub fn exported_spans(&self) -> u64 {
        self.counters.exported.load(Ordering::Relaxed)
    }

    /// Spans waiting for export or being sent now; never more than `max_queue_spans`.
    pub fn queued_spans(&self) -> usize {
        self.counters.queued.load(Ordering::Relaxed)
    }

    /// Whether spans and metrics are exported (`telemetry.otlp` is set).
    pub fn exporting(&self) -> bool {
        self.tracer_provider.is_some()
    }

    /// Sends the spans waiting now and a collection of metrics, waiting at most a few seconds;
    /// `true` when both were sent (or there is nothing to send). A collector that is down or
    /// slow makes it `false`, and costs the spans it could not take.
    pub async fn flush(&self) -> bool {
        let deadline = tokio::time::Instant::now() + SHUTDOWN_DEADLINE;
        let spans_sent = match &self.queue {
            Some(queue) => queue.flush(deadline).await,
            None => true,
        };
        let metrics_sent = match self.meter_provider.clone() {
            Some(provider) => {
                let (done, finished) = tokio::sync::oneshot::channel();
                // The reader's flush blocks until its task on the runtime has exported, so
                // it runs on a thread of its own.
                let spawned = std::thread::Builder::new()
                    .name("docket-telemetry-flush".to_owned())
                    .spawn(move || {
                        let _ = done.send(provider.force_flush().is_ok());
                    });
                spawned.is_ok()
                    && matches!(
                        tokio::time::timeout_at(deadline, finished).await,
                        Ok(Ok(true))
                    )
            }
            None => true,
        };
        spans_sent && metrics_sent
    }

    /// Sends what waits (spans, then a last collection of metrics) and stops, waiting at most
    /// a few seconds: a collector that is down or slow costs the spans still queued, never a
    /// hang.
    pub async fn shutdown(mut self) {
        let deadline = tokio::time::Instant::now() + SHUTDOWN_DEADLINE;
        if let Some(queue) = self.queue.take() {
            queue.flush(deadline).await;
        }
        if let Some(provider) = self.tracer_provider.take() {
            // The queue's processor shuts down without waiting; the worker ends with the
            // provider's last reference to it.
            let _ = provider.shutdown();
        }
        if let Some(provider) = self.meter_provider.take() {
            let (done, finished) = tokio::sync::oneshot::channel();
            shut_meter_provider_down(provider, Some(done));
            let _ = tokio::time::timeout_at(deadline, finished).await;
        }
    }
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.meter_provider.take() {
            shut_meter_provider_down(provider, None);
        }
    }
}

/// The meter provider's shutdown blocks until its reader's task (on the runtime) has sent
/// the last metrics, so it runs on a thread of its own, never on a runtime thread.
fn shut_meter_provider_down(
    provider: SdkMeterProvider,
    done: Option<tokio::sync::oneshot::Sender<()>>,
) {
    let spawned = std::thread::Builder::new()
        .name("docket-telemetry-shutdown".to_owned())
        .spawn(move || {
            let _ = provider.shutdown();
            drop(provider);
            if let Some(done) = done {
                let _ = done.send(());
            }
        });
    // Without a thread the provider is dropped at once; its metrics since the last export
    // are lost, which is all a failed shutdown may cost.
    drop(spawned);
}

fn resource(config: &TelemetryConfig) -> Resource {
    Resource::builder_empty()
        .with_service_name(config.service_name.clone())
        .with_attributes(
            config
                .resource_attributes
                .iter()
                .map(|(key, value)| KeyValue::new(key.clone(), value.clone())),
        )
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build()
}

fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("docket")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build()
}

fn sampler(config: SamplerConfig) -> Sampler {
    let root = if config.ratio >= 1.0 {
        Sampler::AlwaysOn
    } else if config.ratio <= 0.0 {
        Sampler::AlwaysOff
    } else {
        Sampler::TraceIdRatioBased(config.ratio)
    };
    if config.parent_based {
        Sampler::ParentBased(Box::new(root))
    } else {
        root
    }
}
