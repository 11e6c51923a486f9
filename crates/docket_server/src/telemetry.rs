//! The trace context Docket keeps and passes on (issue 37): the trace a task or a
//! run keeps ([`current_trace`]) and how later work joins it ([`parent_on`],
//! [`link_to`], [`join_task_trace`], [`join_run_trace`]), what the upstream clients
//! write into their requests ([`propagate`]), and the earlier era's session metric.
//! The request's own span is `server_span`'s; the subscriber, the export, the
//! parsing of `traceparent` and the instruments are `docket_telemetry`'s. Every
//! function here does nothing when no span is recorded (telemetry off).

use docket_task::TaskTrace;
use docket_telemetry::context::{self, TraceContext};
use http::HeaderMap;
use tracing::Span;

/// The trace of the active span as a task or a run keeps it, `None` when no span is
/// recorded (telemetry off, or the trace not sampled and not propagated).
pub(crate) fn current_trace() -> Option<TaskTrace> {
    let current = context::current()?;
    TaskTrace::new(&current.traceparent, current.tracestate.as_deref())
}

/// A stored trace as the telemetry reads it.
fn trace_context(trace: &TaskTrace) -> TraceContext {
    TraceContext {
        traceparent: trace.traceparent().to_owned(),
        tracestate: trace.tracestate().map(str::to_owned),
    }
}

/// Parents `span` on a stored trace (the replica that runs a queued run, the cancel
/// of a task another replica created).
pub(crate) fn parent_on(span: &Span, trace: &TaskTrace) {
    context::set_parent(span, &trace_context(trace));
}

/// Links `span` to a stored trace without parenting on it; what the task runtime's
/// beats use ([`docket_task::runtime::TaskRuntime::link_traces_with`]).
pub(crate) fn link_to(span: &Span, trace: &TaskTrace) {
    context::add_link(span, &trace_context(trace));
}

/// Parents `span` on a task's stored trace (when it has one) and links it to the
/// active span's, so work done for a task in another request (its cancel) is one
/// trace with the task and leads back to the request that did it.
pub(crate) fn join_task_trace(span: &Span, trace: Option<&TaskTrace>) {
    let Some(trace) = trace else {
        return;
    };
    let current = context::current();
    parent_on(span, trace);
    if let Some(current) = current.filter(|current| current.traceparent != trace.traceparent()) {
        context::add_link(span, &current);
    }
}

/// Parents a run's span on the trace its row keeps (`docket_run_bridge::JoinTrace`);
/// a column that does not read as a trace leaves the span a root.
pub(crate) fn join_run_trace(span: &Span, column: &str) {
    if let Some(trace) = TaskTrace::from_column(column) {
        parent_on(span, &trace);
    }
}

/// Writes the active span's trace into outbound headers: what the upstream clients
/// call before each request (`docket_export::trace::Propagate`).
pub(crate) fn propagate(headers: &mut HeaderMap) {
    context::inject(headers);
}

/// The trace id of the active span, for an upstream's client info.
pub(crate) fn current_trace_id() -> Option<String> {
    context::current()?
        .parent()
        .map(|parent| parent.trace_id_hex())
}

/// The earlier era's session `protocol_version` ended after `seconds`: its
/// `mcp.server.session.duration`.
pub(crate) fn session_ended(protocol_version: &str, seconds: f64) {
    docket_telemetry::metrics::record_session(Some(protocol_version), None, seconds);
}
