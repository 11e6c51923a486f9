//! Prometheus metrics through `prometheus-client`, served at `GET /metrics` in the
//! OpenMetrics text format.
//!
//! Every label value comes from a closed set, so no request can add a series: a
//! JSON-RPC method is one the server knows or `other`, a tool is one registered when
//! the app was built or `other`, a status is one the server answers with, an outcome
//! is a [`CallOutcome`].

use std::collections::BTreeSet;
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use docket_task::runtime::TaskRuntime;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Upper bounds of the duration histogram buckets, in seconds.
const BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The JSON-RPC methods counted by name; any other is counted as `other`.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "tasks/list",
    "tasks/result",
    "resources/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "notifications/initialized",
    "notifications/cancelled",
    "-",
];

/// The label of anything outside a closed set.
const OTHER: &str = "other";

/// `method` when it is one the metrics count by name, else `other`.
pub(crate) fn method_label(method: &str) -> &'static str {
    KNOWN_METHODS
        .iter()
        .find(|known| **known == method)
        .copied()
        .unwrap_or(OTHER)
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectionLabels {
    connection: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolLabels {
    tool: String,
    outcome: &'static str,
}

fn duration_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

/// The server's metrics.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    tool_calls: Family<ToolLabels, Counter>,
    tool_durations: Family<ToolLabels, Histogram, fn() -> Histogram>,
    /// The task runtime's own counts, brought up to date when scraped
    /// ([`Metrics::observe_tasks`]).
    heartbeat_failures: Counter,
    stale_tasks_recorded: Counter,
    tasks_running: Gauge,
    /// When each connection's client certificate expires (Unix seconds).
    certificate_expiry: Family<ConnectionLabels, Gauge>,
    /// Held while the runtime's counts are copied, so two scrapes add each once.
    observing: Mutex<()>,
    /// The tools counted by name, fixed when the app is built.
    known_tools: OnceLock<BTreeSet<String>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        let tool_calls = Family::<ToolLabels, Counter>::default();
        let tool_durations =
            Family::<ToolLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                duration_histogram,
            );
        registry.register(
            "docket_http_requests",
            "MCP requests by JSON-RPC method and HTTP status",
            requests.clone(),
        );
        registry.register(
            "docket_tool_calls",
            "Tool calls by tool and outcome",
            tool_calls.clone(),
        );
        registry.register(
            "docket_tool_call_duration_seconds",
            "Tool call duration by tool and outcome",
            tool_durations.clone(),
        );
        let heartbeat_failures = Counter::default();
        let stale_tasks_recorded = Counter::default();
        let tasks_running = Gauge::default();
        registry.register(
            "docket_task_heartbeat_failures",
            "This replica's heartbeats the task store did not take (the database unreachable or refusing)",
            heartbeat_failures.clone(),
        );
        registry.register(
            "docket_tasks_recorded_stale",
            "Running tasks of vanished replicas this replica's maintenance pass recorded failed",
            stale_tasks_recorded.clone(),
        );
        registry.register(
            "docket_tasks_running",
            "Tasks running on this replica",
            tasks_running.clone(),
        );
        let certificate_expiry = Family::<ConnectionLabels, Gauge>::default();
        registry.register(
            "docket_api_client_certificate_expiry_seconds",
            "When each api or graphql connection's client certificate (mutual TLS) expires, in Unix seconds",
            certificate_expiry.clone(),
        );
        Self {
            registry,
            requests,
            tool_calls,
            tool_durations,
            heartbeat_failures,
            stale_tasks_recorded,
            tasks_running,
            certificate_expiry,
            observing: Mutex::new(()),
            known_tools: OnceLock::new(),
        }
    }
}

/// How a tool call ended, as a metric label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// A result without `isError`.
    Ok,
    /// A result with `isError`.
    ToolError,
    /// A JSON-RPC error.
    ProtocolError,
    /// An `input_required` result.
    InputRequired,
    /// Refused by authorization or a gate.
    Refused,
    /// Answered with a task handle; the work goes on.
    TaskCreated,
}

impl CallOutcome {
    fn label(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::ToolError => "tool_error",
            CallOutcome::ProtocolError => "protocol_error",
            CallOutcome::InputRequired => "input_required",
            CallOutcome::Refused => "refused",
            CallOutcome::TaskCreated => "task_created",
        }
    }
}

impl Metrics {
    /// Fixes the tools counted by name (the app's registry, once built); calls of any
    /// other name count as `other`. Only the first call counts.
    pub fn set_known_tools(&self, tools: impl IntoIterator<Item = String>) {
        let _ = self.known_tools.set(tools.into_iter().collect());
    }

    /// Whether `tool` was registered when the app was built (so it may be a label).
    pub(crate) fn is_known_tool(&self, tool: &str) -> bool {
        self.known_tools
            .get()
            .is_some_and(|tools| tools.contains(tool))
    }

    /// Counts one HTTP request to `/mcp` by JSON-RPC method (a known one, or
    /// `other`) and status.
    pub fn record_request(&self, method: &str, status: u16) {
        let method = method_label(method);
        self.requests
            .get_or_create(&RequestLabels { method, status })
            .inc();
    }

    /// Records one tool call (a known tool by name, any other as `other`).
    pub fn record_tool_call(&self, tool: &str, outcome: CallOutcome, elapsed: Duration) {
        let known = self
            .known_tools
            .get()
            .is_some_and(|tools| tools.contains(tool));
        let labels = ToolLabels {
            tool: if known { tool } else { OTHER }.to_owned(),
            outcome: outcome.label(),
        };
        self.tool_calls.get_or_create(&labels).inc();
        self.tool_durations
            .get_or_create(&labels)
            .observe(elapsed.as_secs_f64());
    }

    /// Records when `connection`'s client certificate expires.
    pub(crate) fn record_certificate_expiry(
        &self,
        connection: &str,
        expires: time::OffsetDateTime,
    ) {
        self.certificate_expiry
            .get_or_create(&ConnectionLabels {
                connection: connection.to_owned(),
            })
            .set(expires.unix_timestamp());
    }

    /// Brings the task series up to date with `runtime`'s counts (its failed heartbeats,
    /// the stale tasks it recorded, the tasks it runs); the `/metrics` route calls it before
    /// [`Metrics::render`].
    pub fn observe_tasks(&self, runtime: &TaskRuntime) {
        let _observing = self
            .observing
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let catch_up = |counter: &Counter, now: u64| {
            let seen = counter.get();
            if now > seen {
                counter.inc_by(now - seen);
            }
        };
        catch_up(&self.heartbeat_failures, runtime.heartbeat_failures());
        catch_up(&self.stale_tasks_recorded, runtime.stale_tasks_recorded());
        self.tasks_running
            .set(i64::try_from(runtime.running_count()).unwrap_or(i64::MAX));
    }

    /// The OpenMetrics text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use docket_task::memory::{FlakyStore, MemoryStore};
    use docket_task::runtime::RuntimeConfig;
    use docket_task::store::AuditContext;
    use docket_task::{NewTask, TaskId, TaskStore};

    use super::*;

    /// The value of the one sample `series` (no labels) in `text`.
    fn sample(text: &str, series: &str) -> u64 {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{series} ")))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {series} in {text}"))
    }

    #[tokio::test]
    async fn failed_heartbeats_are_counted_once_however_often_they_are_scraped() {
        let store = Arc::new(FlakyStore::default());
        let runtime = TaskRuntime::new(
            Arc::clone(&store) as Arc<dyn TaskStore>,
            RuntimeConfig {
                replica_id: "replica-a".into(),
                heartbeat_interval: Duration::from_millis(10),
                ..RuntimeConfig::default()
            },
        );
        store.set_failing(true);
        runtime.start_background();
        while runtime.heartbeat_failures() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let metrics = Metrics::default();
        metrics.observe_tasks(&runtime);
        metrics.observe_tasks(&runtime);
        let text = metrics.render();
        let counted = sample(&text, "docket_task_heartbeat_failures_total");
        assert!(
            (2..=runtime.heartbeat_failures()).contains(&counted),
            "{counted} of {} failures: {text}",
            runtime.heartbeat_failures()
        );
        assert_eq!(sample(&text, "docket_tasks_running"), 0, "{text}");
        assert_eq!(sample(&text, "docket_tasks_recorded_stale_total"), 0);
    }

    #[tokio::test]
    async fn tasks_of_a_vanished_replica_recorded_failed_are_counted() {
        let store: Arc<dyn TaskStore> = Arc::new(MemoryStore::default());
        store
            .create(NewTask {
                id: TaskId::generate().expect("id"),
                tool: "export".into(),
                arguments: serde_json::json!({}),
                owner: "alice".into(),
                extra_follower: None,
                replica_id: "replica-gone".into(),
                status_message: None,
                retention: None,
                poll_interval_ms: 1000,
                audit: AuditContext {
                    persona: None,
                    connection: None,
                    arguments: serde_json::json!({}),
                },
                trace_context: None,
            })
            .await
            .expect("create");
        let runtime = TaskRuntime::new(
            Arc::clone(&store),
            RuntimeConfig {
                replica_id: "replica-a".into(),
                heartbeat_interval: Duration::from_millis(1),
                stale_after: Duration::from_millis(5),
                ..RuntimeConfig::default()
            },
        );
        // The vanished replica never beats again: once stale_after has passed, a pass
        // records its task failed.
        while runtime.stale_tasks_recorded() == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            runtime.maintain().await;
        }
        let metrics = Metrics::default();
        metrics.observe_tasks(&runtime);
        assert_eq!(
            sample(&metrics.render(), "docket_tasks_recorded_stale_total"),
            1
        );
    }

    #[test]
    fn counters_and_histograms_render() {
        let metrics = Metrics::default();
        metrics.set_known_tools(["greet".to_owned()]);
        metrics.record_request("tools/call", 200);
        metrics.record_request("tools/call", 200);
        metrics.record_tool_call("greet", CallOutcome::Ok, Duration::from_millis(30));
        let text = metrics.render();
        assert!(
            text.contains("docket_http_requests_total{method=\"tools/call\",status=\"200\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("docket_tool_calls_total{tool=\"greet\",outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("{le=\"0.025\",tool=\"greet\",outcome=\"ok\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("{le=\"0.05\",tool=\"greet\",outcome=\"ok\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn labels_come_from_closed_sets() {
        let metrics = Metrics::default();
        metrics.set_known_tools(["greet".to_owned()]);
        for index in 0..100 {
            metrics.record_request(&format!("method-{index}-{}", "x".repeat(index)), 400);
            metrics.record_tool_call(
                &format!("tool-{index}"),
                CallOutcome::Refused,
                Duration::ZERO,
            );
        }
        let text = metrics.render();
        let series = |name: &str| {
            text.lines()
                .filter(|line| line.starts_with(name))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            series("docket_http_requests_total"),
            ["docket_http_requests_total{method=\"other\",status=\"400\"} 100"]
        );
        assert_eq!(
            series("docket_tool_calls_total"),
            ["docket_tool_calls_total{tool=\"other\",outcome=\"refused\"} 100"]
        );
    }
}
