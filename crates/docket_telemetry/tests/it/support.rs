//! A subscriber built by `Telemetry::build` against a fresh collector, with its log lines
//! captured.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use docket_otlp_collector::Collector;
use docket_telemetry::{LogFormat, OtlpConfig, Telemetry, TelemetryConfig};
use tracing::Dispatch;

/// How long a test waits for what it expects to arrive; it fails if nothing does.
pub(crate) const ARRIVAL: Duration = Duration::from_secs(20);

pub(crate) struct Setup {
    pub(crate) collector: Collector,
    pub(crate) dispatch: Dispatch,
    pub(crate) telemetry: Telemetry,
    pub(crate) logs: Arc<Mutex<Vec<u8>>>,
}

impl Setup {
    /// The captured log lines.
    pub(crate) fn log_lines(&self) -> Vec<String> {
        let bytes = self.logs.lock().expect("the log buffer").clone();
        String::from_utf8(bytes)
            .expect("log lines are UTF-8")
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Runs `work` with this setup's subscriber as the default.
    pub(crate) fn run<T>(&self, work: impl FnOnce() -> T) -> T {
        tracing::dispatcher::with_default(&self.dispatch, work)
    }
}

/// Log lines written into a shared buffer.
#[derive(Clone)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .expect("the log buffer")
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'writer> tracing_subscriber::fmt::MakeWriter<'writer> for Captured {
    type Writer = Captured;

    fn make_writer(&'writer self) -> Self::Writer {
        self.clone()
    }
}

/// A collector, and telemetry exporting to it, configured by `adjust`.
pub(crate) async fn setup(format: LogFormat, adjust: impl FnOnce(&mut TelemetryConfig)) -> Setup {
    setup_filtered(format, "info", adjust).await
}

/// As [`setup`], with log lines filtered by `filter`.
pub(crate) async fn setup_filtered(
    format: LogFormat,
    filter: &str,
    adjust: impl FnOnce(&mut TelemetryConfig),
) -> Setup {
    let collector = Collector::start().await;
    let mut config = TelemetryConfig {
        otlp: Some(OtlpConfig {
            endpoint: collector.endpoint(),
            ..OtlpConfig::default()
        }),
        service_name: "docket-test".to_owned(),
        ..TelemetryConfig::default()
    };
    adjust(&mut config);
    let logs = Arc::new(Mutex::new(Vec::new()));
    let (dispatch, telemetry) =
        Telemetry::build(&config, format, filter, Captured(Arc::clone(&logs)))
            .expect("the telemetry builds");
    Setup {
        collector,
        dispatch,
        telemetry,
        logs,
    }
}
