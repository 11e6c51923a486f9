//! W3C Trace Context: the `traceparent` and `tracestate` a client sends (in `_meta` or as
//! HTTP headers), stored with tasks and runs, and sent on to upstreams.
//!
//! Parsing is strict and never fails loudly: anything malformed or oversized is `None` (or
//! `false`), and the span it was meant for simply starts a trace of its own.

use std::str::FromStr as _;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
};
use serde::{Deserialize, Serialize};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The length of a version `00` traceparent.
const TRACEPARENT_LENGTH: usize = 55;
/// The longest traceparent of a future version Docket reads; longer ones are ignored.
pub const MAX_TRACEPARENT_BYTES: usize = 256;
/// The longest tracestate Docket reads or sends (W3C: at least 512 must be propagated).
pub const MAX_TRACESTATE_BYTES: usize = 512;
/// The most list members a tracestate may have.
pub const MAX_TRACESTATE_MEMBERS: usize = 32;

/// A trace context as it is stored with a task or a run and sent to an upstream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceContext {
    /// The W3C `traceparent`, `00-{trace id}-{span id}-{flags}`.
    pub traceparent: String,
    /// The W3C `tracestate`, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// The parsed traceparent, `None` when it is not valid.
    pub fn parent(&self) -> Option<TraceParent> {
        parse_traceparent(&self.traceparent)
    }

    /// The OpenTelemetry span context this names (remote), `None` when the traceparent is
    /// not valid. An invalid tracestate is left out, not a reason to drop the parent.
    pub fn span_context(&self) -> Option<SpanContext> {
        let parent = self.parent()?;
        // The members alone, without the empty ones and the spaces the grammar allows:
        // OpenTelemetry's own parser counts empty members against its limit of 32.
        let state = self
            .tracestate
            .as_deref()
            .filter(|text| tracestate_ok(text))
            .map(|text| {
                text.split(',')
                    .map(|member| member.trim_matches([' ', '\t']))
                    .filter(|member| !member.is_empty())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .and_then(|text| TraceState::from_str(&text).ok())
            .unwrap_or_default();
        Some(SpanContext::new(
            TraceId::from_bytes(parent.trace_id.to_be_bytes()),
            SpanId::from_bytes(parent.parent_id.to_be_bytes()),
            TraceFlags::new(parent.flags),
            true,
            state,
        ))
    }

    /// The trace context of a span context, `None` when it is not valid.
    pub fn from_span_context(context: &SpanContext) -> Option<Self> {
        if !context.is_valid() {
            return None;
        }
        let traceparent = format!(
            "00-{}-{}-{:02x}",
            context.trace_id(),
            context.span_id(),
            context.trace_flags().to_u8() & 0x01
        );
        let state = context.trace_state().header();
        Some(Self {
            traceparent,
            tracestate: (!state.is_empty() && tracestate_ok(&state)).then_some(state),
        })
    }
}

/// A parsed `traceparent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    /// The version (`00` today; later versions are read by the version 00 rules).
    pub version: u8,
    /// The trace id, never zero.
    pub trace_id: u128,
    /// The caller's span id, never zero.
    pub parent_id: u64,
    /// The trace flags; bit 0 is `sampled`.
    pub flags: u8,
}

impl TraceParent {
    /// Whether the caller recorded this trace.
    pub fn sampled(&self) -> bool {
        self.flags & 0x01 == 0x01
    }

    /// The trace id as 32 lower-case hex digits.
    pub fn trace_id_hex(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    /// The parent span id as 16 lower-case hex digits.
    pub fn parent_id_hex(&self) -> String {
        format!("{:016x}", self.parent_id)
    }
}

/// Parses a `traceparent` by W3C Trace Context level 1: `00-` + 32 hex digits + `-` + 16 +
/// `-` + 2, lower-case only, neither id all zeros, exactly 55 bytes for version `00`. A later
/// version (not `ff`) is read by the same layout and may carry more after a `-` (printable
/// ASCII only), up to [`MAX_TRACEPARENT_BYTES`]. Anything else is `None`, never an error.
pub fn parse_traceparent(text: &str) -> Option<TraceParent> {
    let bytes = text.as_bytes();
    if bytes.len() < TRACEPARENT_LENGTH || bytes.len() > MAX_TRACEPARENT_BYTES {
        return None;
    }
    let version = u8::try_from(lower_hex(&bytes[0..2])?).ok()?;
    if version == 0xff {
        return None;
    }
    if version == 0 && bytes.len() != TRACEPARENT_LENGTH {
        return None;
    }
    if version != 0 && bytes.len() > TRACEPARENT_LENGTH {
        // What a later version adds follows a `-`, in printable ASCII: no
        // control character (a newline, say) is ever taken in.
        let rest = &bytes[TRACEPARENT_LENGTH..];
        if rest[0] != b'-' || !rest.iter().all(|byte| (0x20..=0x7e).contains(byte)) {
            return None;
        }
    }
    if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
        return None;
    }
    let trace_id = lower_hex(&bytes[3..35])?;
    let parent_id = u64::try_from(lower_hex(&bytes[36..52])?).ok()?;
    let flags = u8::try_from(lower_hex(&bytes[53..55])?).ok()?;
    if trace_id == 0 || parent_id == 0 {
        return None;
    }
    Some(TraceParent {
        version,
        trace_id,
        parent_id,
        flags,
    })
}

/// The value of up to 32 lower-case hex digits; `None` for anything else.
fn lower_hex(digits: &[u8]) -> Option<u128> {
    if digits.is_empty() || digits.len() > 32 {
        return None;
    }
    let mut value: u128 = 0;
    for &digit in digits {
        let nibble = match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            _ => return None,
        };
        value = (value << 4) | u128::from(nibble);
    }
    Some(value)
}

/// Whether `text` is a `tracestate` Docket accepts: at most [`MAX_TRACESTATE_BYTES`] bytes and
/// [`MAX_TRACESTATE_MEMBERS`] members, each `key=value` by the W3C grammar (simple keys of up
/// to 256 characters or `tenant@system` keys, values of up to 256 printable characters not
/// ending in a space), keys unique, at least one member. Empty members between commas are
/// allowed, as the grammar allows them.
pub fn tracestate_ok(text: &str) -> bool {
    if text.len() > MAX_TRACESTATE_BYTES {
        return false;
    }
    let mut keys: Vec<&str> = Vec::new();
    for member in text.split(',') {
        let member = member.trim_matches([' ', '\t']);
        if member.is_empty() {
            continue;
        }
        let Some((key, value)) = member.split_once('=') else {
            return false;
        };
        if !key_ok(key) || !value_ok(value) || keys.contains(&key) {
            return false;
        }
        keys.push(key);
        if keys.len() > MAX_TRACESTATE_MEMBERS {
            return false;
        }
    }
    !keys.is_empty()
}

fn key_char(byte: u8) -> bool {
    matches!(byte, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'*' | b'/')
}

fn key_ok(key: &str) -> bool {
    let bytes = key.as_bytes();
    match key.split_once('@') {
        None => {
            (1..=256).contains(&bytes.len())
                && bytes[0].is_ascii_lowercase()
                && bytes.iter().all(|&byte| key_char(byte))
        }
        Some((tenant, system)) => {
            let (tenant, system) = (tenant.as_bytes(), system.as_bytes());
            (1..=241).contains(&tenant.len())
                && (tenant[0].is_ascii_lowercase() || tenant[0].is_ascii_digit())
                && tenant.iter().all(|&byte| key_char(byte))
                && (1..=14).contains(&system.len())
                && system[0].is_ascii_lowercase()
                && system.iter().all(|&byte| key_char(byte))
        }
    }
}

fn value_ok(value: &str) -> bool {
    let bytes = value.as_bytes();
    let non_blank = |byte: u8| matches!(byte, 0x21..=0x2b | 0x2d..=0x3c | 0x3e..=0x7e);
    match bytes.split_last() {
        None => false,
        Some((&last, rest)) => {
            bytes.len() <= 256
                && non_blank(last)
                && rest.iter().all(|&byte| byte == b' ' || non_blank(byte))
        }
    }
}

/// Parents `span` on a remote context (a client's `_meta.traceparent`, a stored task's
/// context). An invalid context is ignored: the span keeps its own parent.
pub fn set_parent(span: &tracing::Span, context: &TraceContext) {
    if let Some(remote) = context.span_context() {
        // An error here means the span is already started or not known to the OpenTelemetry
        // layer (telemetry off); either way the span keeps its parent, as documented.
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
}

/// Links `span` to a context without parenting on it (the HTTP request's context when
/// `_meta` named the parent, a task's creation from a later beat). Invalid contexts are
/// ignored.
pub fn add_link(span: &tracing::Span, context: &TraceContext) {
    if let Some(remote) = context.span_context() {
        span.add_link(remote);
    }
}

/// The trace context of the active span, for storing with a task or sending upstream;
/// `None` when no span is active or telemetry is off. A span that is not traced (below
/// INFO) passes on the context of its nearest traced ancestor.
pub fn current() -> Option<TraceContext> {
    tracing::dispatcher::get_default(|dispatch| {
        let current = dispatch.current_span();
        let span_context = nearest_traced(dispatch, current.id()?)?;
        TraceContext::from_span_context(&span_context)
    })
}

/// The OpenTelemetry span context of `id`'s span or, when that one is not traced, of its
/// nearest ancestor that is.
pub(crate) fn nearest_traced(
    dispatch: &tracing::Dispatch,
    id: &tracing::span::Id,
) -> Option<SpanContext> {
    use tracing_subscriber::registry::LookupSpan as _;
    let registry = dispatch.downcast_ref::<tracing_subscriber::Registry>()?;
    let span = registry.span(id)?;
    span.scope().find_map(|ancestor| {
        let context = tracing_opentelemetry::get_otel_context(&ancestor.id(), dispatch)?;
        let span_context = context.span().span_context().clone();
        span_context.is_valid().then_some(span_context)
    })
}

/// Writes the active span's `traceparent` (and `tracestate`) into outbound headers,
/// replacing any there; writes nothing when no span is active.
pub fn inject(headers: &mut http::HeaderMap) {
    let Some(context) = current() else {
        return;
    };
    if let Ok(value) = http::HeaderValue::from_str(&context.traceparent) {
        headers.insert(TRACEPARENT_HEADER, value);
    }
    headers.remove(TRACESTATE_HEADER);
    if let Some(state) = context.tracestate
        && let Ok(value) = http::HeaderValue::from_str(&state)
    {
        headers.insert(TRACESTATE_HEADER, value);
    }
}

/// The header (and `_meta` key) of the trace parent.
pub const TRACEPARENT_HEADER: &str = "traceparent";
/// The header (and `_meta` key) of the trace state.
pub const TRACESTATE_HEADER: &str = "tracestate";

/// Reads a trace context from request headers, `None` unless the traceparent is valid; an
/// invalid tracestate is dropped.
pub fn extract(headers: &http::HeaderMap) -> Option<TraceContext> {
    let traceparent = headers.get(TRACEPARENT_HEADER)?.to_str().ok()?;
    parse_traceparent(traceparent)?;
    let tracestate = headers
        .get(TRACESTATE_HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|text| tracestate_ok(text))
        .map(str::to_owned);
    Some(TraceContext {
        traceparent: traceparent.to_owned(),
        tracestate,
    })
}
