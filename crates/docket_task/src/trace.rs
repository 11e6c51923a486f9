//! The trace a task or a run belongs to: the W3C trace context of the request that
//! created it, kept with its row so that the replica that executes, cancels or ends
//! it continues that trace ([`TaskTrace`]).
//!
//! This crate only keeps the two header values; what they mean (parsing, sampling,
//! spans) is the telemetry wiring's. A value that does not fit the bounds below is
//! not kept ([`TaskTrace::new`] answers `None`), so a stored trace never grows a row
//! past them, and reading a stored one back is tolerant: a column that does not have
//! the shape [`TaskTrace::to_column`] writes reads as no trace, never an error.

/// The longest `traceparent` kept, in bytes (version `00` is 55).
pub const MAX_TRACEPARENT_BYTES: usize = 128;

/// The longest `tracestate` kept, in bytes (what W3C Trace Context asks a
/// propagator to pass on at least).
pub const MAX_TRACESTATE_BYTES: usize = 512;

/// The longest column [`TaskTrace::to_column`] writes, in bytes: the bound the
/// database's `CHECK` holds too.
pub const MAX_TRACE_COLUMN_BYTES: usize = MAX_TRACEPARENT_BYTES + 1 + MAX_TRACESTATE_BYTES;

/// The W3C trace context (`traceparent` and `tracestate`) of the request that
/// created a task or a run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskTrace {
    traceparent: String,
    tracestate: Option<String>,
}

impl TaskTrace {
    /// The trace of `traceparent` and `tracestate`, or `None` when either is
    /// empty, longer than its bound, or holds anything but visible ASCII and
    /// spaces (a header value, never a line break). An empty `tracestate` is
    /// no `tracestate`.
    #[must_use]
    pub fn new(traceparent: &str, tracestate: Option<&str>) -> Option<Self> {
        let visible = |text: &str| text.bytes().all(|byte| (0x20..0x7f).contains(&byte));
        if traceparent.is_empty()
            || traceparent.len() > MAX_TRACEPARENT_BYTES
            || !visible(traceparent)
            || traceparent.contains(' ')
        {
            return None;
        }
        let tracestate = match tracestate.map(str::trim) {
            None | Some("") => None,
            Some(state) if state.len() > MAX_TRACESTATE_BYTES || !visible(state) => return None,
            Some(state) => Some(state.to_owned()),
        };
        Some(Self {
            traceparent: traceparent.to_owned(),
            tracestate,
        })
    }

    /// The `traceparent` header value.
    #[must_use]
    pub fn traceparent(&self) -> &str {
        &self.traceparent
    }

    /// The `tracestate` header value, when there was one.
    #[must_use]
    pub fn tracestate(&self) -> Option<&str> {
        self.tracestate.as_deref()
    }

    /// The trace as one text column: the `traceparent`, then a line break and the
    /// `tracestate` when there is one (neither header value can hold a line
    /// break). At most [`MAX_TRACE_COLUMN_BYTES`].
    #[must_use]
    pub fn to_column(&self) -> String {
        match &self.tracestate {
            Some(state) => format!("{}\n{state}", self.traceparent),
            None => self.traceparent.clone(),
        }
    }

    /// Reads back what [`TaskTrace::to_column`] wrote; anything else is no trace.
    #[must_use]
    pub fn from_column(column: &str) -> Option<Self> {
        match column.split_once('\n') {
            Some((traceparent, tracestate)) => Self::new(traceparent, Some(tracestate)),
            None => Self::new(column, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARENT: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

    #[test]
    fn a_trace_round_trips_through_its_column() {
        for trace in [
            TaskTrace::new(PARENT, None),
            TaskTrace::new(PARENT, Some("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")),
        ] {
            let trace = trace.expect("within bounds");
            assert!(trace.to_column().len() <= MAX_TRACE_COLUMN_BYTES);
            assert_eq!(TaskTrace::from_column(&trace.to_column()), Some(trace));
        }
    }

    #[test]
    fn values_past_their_bounds_or_with_line_breaks_are_not_kept() {
        assert_eq!(TaskTrace::new("", None), None);
        assert_eq!(
            TaskTrace::new(&"0".repeat(MAX_TRACEPARENT_BYTES + 1), None),
            None
        );
        assert_eq!(TaskTrace::new("00-a\nb", None), None);
        assert_eq!(
            TaskTrace::new(PARENT, Some(&"a".repeat(MAX_TRACESTATE_BYTES + 1))),
            None
        );
        assert_eq!(TaskTrace::new(PARENT, Some("a=1\r\nx: y")), None);
        assert_eq!(
            TaskTrace::new(PARENT, Some("  "))
                .and_then(|trace| trace.tracestate().map(str::to_owned)),
            None
        );
        assert_eq!(TaskTrace::from_column("a\nb\nc"), None);
    }
}
