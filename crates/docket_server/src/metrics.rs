//! Prometheus metrics, written by hand: a few counters and one histogram do not
//! justify a metrics framework. Served as text at `GET /metrics`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// Upper bounds of the duration histogram buckets, in seconds.
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The server's metrics.
#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// (method, status) → count.
    requests: BTreeMap<(String, u16), u64>,
    /// (tool, outcome) → histogram.
    tool_calls: BTreeMap<(String, &'static str), Histogram>,
}

#[derive(Debug, Default)]
struct Histogram {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
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
    /// Counts one HTTP request to `/mcp` by JSON-RPC method (or `-`) and status.
    pub fn record_request(&self, method: &str, status: u16) {
        if let Ok(mut inner) = self.inner.lock() {
            *inner
                .requests
                .entry((method.to_owned(), status))
                .or_default() += 1;
        }
    }

    /// Records one tool call.
    pub fn record_tool_call(&self, tool: &str, outcome: CallOutcome, elapsed: Duration) {
        if let Ok(mut inner) = self.inner.lock() {
            let histogram = inner
                .tool_calls
                .entry((tool.to_owned(), outcome.label()))
                .or_default();
            if histogram.counts.is_empty() {
                histogram.counts = vec![0; BUCKETS.len()];
            }
            let seconds = elapsed.as_secs_f64();
            for (count, bound) in histogram.counts.iter_mut().zip(BUCKETS) {
                if seconds <= *bound {
                    *count += 1;
                }
            }
            histogram.sum += seconds;
            histogram.count += 1;
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let Ok(inner) = self.inner.lock() else {
            return out;
        };
        out.push_str(
            "# HELP docket_http_requests_total MCP requests by JSON-RPC method and HTTP status.\n",
        );
        out.push_str("# TYPE docket_http_requests_total counter\n");
        for ((method, status), count) in &inner.requests {
            let _ = writeln!(
                out,
                "docket_http_requests_total{{method=\"{}\",status=\"{status}\"}} {count}",
                escape(method)
            );
        }
        out.push_str("# HELP docket_tool_calls_total Tool calls by tool and outcome.\n");
        out.push_str("# TYPE docket_tool_calls_total counter\n");
        for ((tool, outcome), histogram) in &inner.tool_calls {
            let _ = writeln!(
                out,
                "docket_tool_calls_total{{tool=\"{}\",outcome=\"{outcome}\"}} {}",
                escape(tool),
                histogram.count
            );
        }
        out.push_str(
            "# HELP docket_tool_call_duration_seconds Tool call duration by tool and outcome.\n",
        );
        out.push_str("# TYPE docket_tool_call_duration_seconds histogram\n");
        for ((tool, outcome), histogram) in &inner.tool_calls {
            let labels = format!("tool=\"{}\",outcome=\"{outcome}\"", escape(tool));
            for (count, bound) in histogram.counts.iter().zip(BUCKETS) {
                let _ = writeln!(
                    out,
                    "docket_tool_call_duration_seconds_bucket{{{labels},le=\"{bound}\"}} {count}"
                );
            }
            let _ = writeln!(
                out,
                "docket_tool_call_duration_seconds_bucket{{{labels},le=\"+Inf\"}} {}",
                histogram.count
            );
            let _ = writeln!(
                out,
                "docket_tool_call_duration_seconds_sum{{{labels}}} {}",
                histogram.sum
            );
            let _ = writeln!(
                out,
                "docket_tool_call_duration_seconds_count{{{labels}}} {}",
                histogram.count
            );
        }
        out
    }
}

/// Escapes a label value.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_histograms_render() {
        let metrics = Metrics::default();
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
        assert!(text.contains("le=\"0.025\"} 0"), "{text}");
        assert!(text.contains("le=\"0.05\"} 1"), "{text}");
    }
}
