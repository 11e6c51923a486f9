//! Log lines in Docket's two formats, each carrying `trace_id` and `span_id` when a span is
//! active: text lines end with ` trace_id=… span_id=…`, JSON lines gain the two fields.

use std::fmt;
use std::sync::{Arc, OnceLock};

use tracing::dispatcher::WeakDispatch;
use tracing::{Dispatch, Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The subscriber a formatter works in. A formatter runs inside the dispatcher's call, where
/// `tracing`'s own "current dispatcher" is deliberately empty (against re-entry), so the
/// subscriber is remembered when it is registered ([`DispatchLayer`]).
pub(crate) type DispatchCell = Arc<OnceLock<WeakDispatch>>;

/// A formatter that adds the active span's ids to what `inner` writes.
pub(crate) struct WithTraceIds<F> {
    pub(crate) inner: F,
    pub(crate) json: bool,
    pub(crate) dispatch: DispatchCell,
}

/// The layer that tells the formatter which subscriber it is part of; it observes nothing.
pub(crate) struct DispatchLayer {
    pub(crate) dispatch: DispatchCell,
}

impl<S: Subscriber> Layer<S> for DispatchLayer {
    fn on_register_dispatch(&self, subscriber: &Dispatch) {
        let _ = self.dispatch.set(subscriber.downgrade());
    }
}

/// The active span's trace and span ids as hex, when it has a valid OpenTelemetry context.
fn active_ids(dispatch: &DispatchCell) -> Option<(String, String)> {
    let dispatch = dispatch.get()?.upgrade()?;
    let current = dispatch.current_span();
    let span_context = crate::context::nearest_traced(&dispatch, current.id()?)?;
    Some((
        span_context.trace_id().to_string(),
        span_context.span_id().to_string(),
    ))
}

impl<S, N, F> FormatEvent<S, N> for WithTraceIds<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let Some((trace_id, span_id)) = active_ids(&self.dispatch) else {
            return self.inner.format_event(ctx, writer, event);
        };
        let mut line = String::new();
        self.inner
            .format_event(ctx, Writer::new(&mut line), event)?;
        if self.json {
            // The JSON formatter writes one object; the ids go in first.
            match line.strip_prefix('{') {
                Some(rest) => {
                    let separator = if rest.trim_start().starts_with('}') {
                        ""
                    } else {
                        ","
                    };
                    write!(
                        writer,
                        "{{\"trace_id\":\"{trace_id}\",\"span_id\":\"{span_id}\"{separator}{rest}"
                    )
                }
                None => writer.write_str(&line),
            }
        } else {
            let body = line.strip_suffix('\n').unwrap_or(&line);
            writeln!(writer, "{body} trace_id={trace_id} span_id={span_id}")
        }
    }
}
