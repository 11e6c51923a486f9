//! The SERVER span of one MCP request (issue 37): named and attributed by the MCP
//! semantic conventions, parented on the trace the client sends, and the
//! conventions' `mcp.server.operation.duration` it records when the request ends.
//! What tasks, runs and upstreams do with the trace is [`crate::telemetry`]'s.
//!
//! A request's span starts when the request arrives, so its time includes the
//! identity check and the body read, but it is named, attributed and parented only
//! once the JSON-RPC message is read: a span cannot change its parent once it has
//! begun, so nothing enters it (and no child span starts) before then. Without
//! telemetry (no OTLP and no test subscriber) every span here is disabled and costs
//! a branch.
//!
//! What a span carries is bounded and safe: method names from the closed set the
//! metrics count, tool names only for registered tools, no argument value, no
//! credential, the earlier era's session id only as a digest (the id itself opens the
//! session), and SQL only when `telemetry.capture_statements` is on, scrubbed.

use std::net::SocketAddr;
use std::time::Instant;

use docket_protocol::jsonrpc::{Request, RequestId};
use docket_telemetry::context::{self, TraceContext};
use http::HeaderMap;
use sha2::Digest as _;
use tracing::Span;
use tracing::field::Empty;

use crate::error::McpError;
use crate::reply::Reply;
use crate::state::App;

/// The span of one MCP request and what its metric needs, from its arrival to
/// its answer.
pub(crate) struct ServerSpan {
    span: Span,
    started: Instant,
    method: Option<&'static str>,
    /// The registered tool a `tools/call` names, or the prompt of `prompts/get`.
    target: Option<String>,
    protocol_version: Option<String>,
    error_type: Option<String>,
}

impl ServerSpan {
    /// The span of a request that just arrived on `local` (else the configured
    /// address, for a mounted service) from `peer` over `version`.
    pub(crate) fn start(
        app: &App,
        peer: Option<SocketAddr>,
        local: Option<SocketAddr>,
        version: http::Version,
    ) -> Self {
        let local = local.unwrap_or(app.config().server.address);
        let protocol_version = match version {
            http::Version::HTTP_10 => "1.0",
            http::Version::HTTP_2 => "2",
            http::Version::HTTP_3 => "3",
            _ => "1.1",
        };
        let span = tracing::info_span!(
            "mcp",
            otel.name = Empty,
            otel.kind = "server",
            otel.status_code = Empty,
            "mcp.method.name" = Empty,
            "mcp.session.id" = Empty,
            "mcp.protocol.version" = Empty,
            "gen_ai.tool.name" = Empty,
            "gen_ai.operation.name" = Empty,
            "gen_ai.prompt.name" = Empty,
            "jsonrpc.request.id" = Empty,
            "error.type" = Empty,
            "rpc.response.status_code" = Empty,
            "network.transport" = "tcp",
            "network.protocol.name" = "http",
            "network.protocol.version" = protocol_version,
            "server.address" = %local.ip(),
            "server.port" = i64::from(local.port()),
            "client.address" = Empty,
            "client.port" = Empty,
            "docket.authenticate.seconds" = Empty,
        );
        if let Some(peer) = peer {
            span.record("client.address", tracing::field::display(peer.ip()));
            span.record("client.port", i64::from(peer.port()));
        }
        Self {
            span,
            started: Instant::now(),
            method: None,
            target: None,
            protocol_version: None,
            error_type: None,
        }
    }

    /// Names and attributes the span for `request` and parents it on the trace the
    /// request carries: `params._meta.traceparent` (and `tracestate`) when valid,
    /// else the HTTP `traceparent` header; anything malformed or oversized is
    /// ignored. The other context, when both are valid and differ, becomes a link.
    /// `served` says whether Docket serves the method. Call it once, before the span
    /// is entered.
    pub(crate) fn request(
        &mut self,
        app: &App,
        request: &Request,
        headers: &HeaderMap,
        served: bool,
    ) {
        let method = method_name(&request.method, served);
        self.method = Some(method);
        let span = &self.span;
        span.record("mcp.method.name", method);
        match &request.id {
            RequestId::Number(number) => span.record("jsonrpc.request.id", *number),
            RequestId::String(text) if text.len() <= MAX_REQUEST_ID_BYTES => {
                span.record("jsonrpc.request.id", text.as_str())
            }
            RequestId::String(_) => span,
        };
        let name = request
            .params
            .as_ref()
            .and_then(|params| params.get("name"))
            .and_then(serde_json::Value::as_str);
        match (method, name) {
            ("tools/call", Some(tool)) if app.state.metrics.is_known_tool(tool) => {
                span.record("gen_ai.tool.name", tool);
                span.record(
                    "gen_ai.operation.name",
                    docket_telemetry::semconv::GEN_AI_OPERATION_EXECUTE_TOOL,
                );
                self.target = Some(tool.to_owned());
            }
            ("prompts/get", Some(prompt)) if prompt.len() <= MAX_TARGET_BYTES => {
                span.record("gen_ai.prompt.name", prompt);
                self.target = Some(prompt.to_owned());
            }
            _ => {}
        }
        let span_name = docket_telemetry::semconv::span_name(method, self.target.as_deref());
        span.record("otel.name", span_name.as_str());
        let (traceparent, tracestate) =
            docket_protocol::meta::trace_context(request.params.as_ref());
        let from_meta = traceparent.and_then(|traceparent| valid(traceparent, tracestate));
        let from_header = context::extract(headers);
        match (from_meta, from_header) {
            (Some(meta), header) => {
                context::set_parent(span, &meta);
                if let Some(header) = header.filter(|header| header.traceparent != meta.traceparent)
                {
                    context::add_link(span, &header);
                }
            }
            (None, Some(header)) => context::set_parent(span, &header),
            (None, None) => {}
        }
    }

    /// Records how long the identity check took. It ran before the span could be
    /// parented (the body, with `_meta`, is read only once the caller is known), so
    /// it is an attribute of the request's span rather than a child span of its own;
    /// the persona's part is the `authorize` child.
    pub(crate) fn authenticated(&self, took: std::time::Duration) {
        self.span
            .record("docket.authenticate.seconds", took.as_secs_f64());
    }

    /// Names the span for a notification (it has no id and no answer).
    pub(crate) fn notification(&mut self, method: &str) {
        let method = method_name(method, true);
        self.method = Some(method);
        self.span.record("mcp.method.name", method);
        self.span.record("otel.name", method);
    }

    /// Marks the request failed when `reply` is a tool result with `isError: true`.
    /// A stream's final message is told to the span it was handed
    /// ([`ServerSpan::hand_over`]) as it is sent ([`ServerSpan::answered_with`]).
    pub(crate) fn answered(&mut self, reply: &Reply) {
        if let Reply::Json(result) = reply {
            self.answered_with(result);
        }
    }

    /// Marks the request failed when `result` is a tool result with `isError: true`.
    pub(crate) fn answered_with(&mut self, result: &serde_json::Value) {
        if result.get("isError").and_then(serde_json::Value::as_bool) == Some(true) {
            self.failed(docket_telemetry::semconv::ERROR_TYPE_TOOL_ERROR.to_owned());
        }
    }

    /// Hands what is left of the request to the stream that answers it: the span
    /// returned ends, and records the request's duration and error, when the
    /// stream's last message is sent (or its client goes); this one then records
    /// nothing when it finishes.
    pub(crate) fn hand_over(&mut self) -> Self {
        Self {
            span: self.span.clone(),
            started: self.started,
            method: self.method.take(),
            target: self.target.take(),
            protocol_version: self.protocol_version.take(),
            error_type: self.error_type.take(),
        }
    }

    /// Marks the request failed with `error`'s JSON-RPC code.
    pub(crate) fn failed_with(&mut self, error: &McpError) {
        let (_, object) = error.to_wire();
        self.failed_with_code(object.code);
    }

    /// Records the protocol version the request is written in.
    pub(crate) fn protocol_version(&mut self, version: &str) {
        if docket_protocol::SUPPORTED_VERSIONS.contains(&version)
            || docket_protocol::legacy::LEGACY_VERSIONS.contains(&version)
        {
            self.span.record("mcp.protocol.version", version);
            self.protocol_version = Some(version.to_owned());
        }
    }

    /// Records the earlier era's session, as a digest: its id opens the session, so
    /// it never leaves the process itself.
    pub(crate) fn session(&self, id: &str) {
        self.span
            .record("mcp.session.id", session_digest(id).as_str());
    }

    /// Marks the request failed with a JSON-RPC error `code`.
    pub(crate) fn failed_with_code(&mut self, code: i64) {
        self.span.record("rpc.response.status_code", code);
        self.failed(code.to_string());
    }

    /// Marks the request failed with `error_type` (a JSON-RPC code as text, or
    /// `tool_error` for a tool result with `isError: true`).
    pub(crate) fn failed(&mut self, error_type: String) {
        self.span.record("error.type", error_type.as_str());
        self.span.record("otel.status_code", "error");
        self.error_type = Some(error_type);
    }

    /// The span, to run the request's work in.
    pub(crate) fn span(&self) -> &Span {
        &self.span
    }

    /// Records the request's `mcp.server.operation.duration`, when its method was
    /// known; the span ends when the last clone of it is dropped.
    pub(crate) fn finish(self) {
        let Some(method) = self.method else {
            return;
        };
        let target = (method == "tools/call")
            .then_some(self.target.as_deref())
            .flatten();
        docket_telemetry::metrics::record_operation(
            method,
            target,
            self.error_type.as_deref(),
            self.protocol_version.as_deref(),
            self.started.elapsed().as_secs_f64(),
        );
    }
}

/// The longest request id a span carries; a longer one is left out.
const MAX_REQUEST_ID_BYTES: usize = 128;

/// The longest prompt name a span is named with.
const MAX_TARGET_BYTES: usize = 128;

/// `method` when Docket serves it (a closed set), else `other`: a span's name and
/// a metric's attribute never take a caller's free text.
fn method_name(method: &str, served: bool) -> &'static str {
    let label = crate::metrics::method_label(method);
    if label != "other" {
        return label;
    }
    // The features' methods are served but not counted by name in Prometheus.
    const SERVED: &[&str] = &[
        "subscriptions/listen",
        "completion/complete",
        "resources/templates/list",
        "resources/subscribe",
        "resources/unsubscribe",
        "logging/setLevel",
    ];
    SERVED
        .iter()
        .find(|known| served && **known == method)
        .copied()
        .unwrap_or("other")
}

/// A trace context from a `traceparent` and `tracestate` as sent, `None` unless the
/// `traceparent` is valid; an invalid `tracestate` is dropped.
fn valid(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
    context::parse_traceparent(traceparent)?;
    Some(TraceContext {
        traceparent: traceparent.to_owned(),
        tracestate: tracestate
            .filter(|state| context::tracestate_ok(state))
            .map(str::to_owned),
    })
}

/// The first 128 bits of the session id's SHA-256, in hex.
fn session_digest(id: &str) -> String {
    let digest = sha2::Sha256::digest(id.as_bytes());
    hex::encode(&digest[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_context_is_valid_only_with_a_valid_traceparent() {
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        assert!(valid(parent, None).is_some());
        assert_eq!(
            valid(parent, Some("not a state")).and_then(|context| context.tracestate),
            None
        );
        for malformed in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
        ] {
            assert!(valid(malformed, None).is_none(), "{malformed}");
        }
        assert!(valid(&format!("{parent}{}", "-0".repeat(200)), None).is_none());
    }

    #[test]
    fn a_session_is_named_by_a_digest() {
        let digest = session_digest("0123456789abcdef0123456789abcdef");
        assert_eq!(digest.len(), 32);
        assert!(!digest.contains("0123456789abcdef"));
    }
}
