//! The MCP semantic conventions' metrics (`mcp.server.operation.duration`,
//! `mcp.server.session.duration`), recorded into the meter of the subscriber in effect.
//!
//! The instruments travel with the `tracing` subscriber [`crate::Telemetry`] builds (as one of
//! its layers), so a test's subscriber records into its own collector and a process without
//! OTLP records nothing: every function here is a no-op then. Callers pass attribute values
//! from closed sets (method names Docket serves, tool names it registered, error codes), so a
//! metric's cardinality stays bounded.

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter};
use tracing::Subscriber;
use tracing_subscriber::Layer;

use crate::semconv;

/// The instruments, built once per meter provider.
#[derive(Debug, Clone)]
pub(crate) struct Instruments {
    operation: Histogram<f64>,
    session: Histogram<f64>,
}

impl Instruments {
    pub(crate) fn new(meter: &Meter) -> Self {
        let boundaries = semconv::DURATION_BUCKETS_SECONDS.to_vec();
        Self {
            operation: meter
                .f64_histogram(semconv::MCP_SERVER_OPERATION_DURATION)
                .with_unit(semconv::DURATION_UNIT)
                .with_description(
                    "MCP request or notification duration as observed on the receiver from the time it was received until the result or ack is sent.",
                )
                .with_boundaries(boundaries.clone())
                .build(),
            session: meter
                .f64_histogram(semconv::MCP_SERVER_SESSION_DURATION)
                .with_unit(semconv::DURATION_UNIT)
                .with_description("The duration of the MCP session as observed on the MCP server.")
                .with_boundaries(boundaries)
                .build(),
        }
    }
}

/// The layer that carries the instruments inside a subscriber; it observes nothing.
pub(crate) struct InstrumentsLayer {
    pub(crate) instruments: Instruments,
}

impl<S: Subscriber> Layer<S> for InstrumentsLayer {}

fn with_instruments(record: impl FnOnce(&Instruments)) {
    let instruments = tracing::dispatcher::get_default(|dispatch| {
        dispatch
            .downcast_ref::<InstrumentsLayer>()
            .map(|layer| layer.instruments.clone())
    });
    if let Some(instruments) = instruments {
        record(&instruments);
    }
}

/// `error.type` (only on failure), `mcp.protocol.version`, and the attributes every MCP
/// metric carries for Docket's one transport, Streamable HTTP.
fn outcome_attributes(
    attributes: &mut Vec<KeyValue>,
    error_type: Option<&str>,
    protocol_version: Option<&str>,
) {
    if let Some(error_type) = error_type {
        attributes.push(KeyValue::new(semconv::ERROR_TYPE, error_type.to_owned()));
    }
    if let Some(version) = protocol_version {
        attributes.push(KeyValue::new(
            semconv::MCP_PROTOCOL_VERSION,
            version.to_owned(),
        ));
    }
    attributes.push(KeyValue::new(semconv::NETWORK_TRANSPORT, "tcp"));
    attributes.push(KeyValue::new(semconv::NETWORK_PROTOCOL_NAME, "http"));
}

/// Records one MCP request's duration in `mcp.server.operation.duration`. `tool_or_target`
/// is the tool's name on `tools/call` (`gen_ai.tool.name`, with `gen_ai.operation.name` =
/// `execute_tool`) or the prompt's on `prompts/get` (`gen_ai.prompt.name`); other methods'
/// targets are not metric attributes. `error_type` is set only when the request failed.
pub fn record_operation(
    method: &str,
    tool_or_target: Option<&str>,
    error_type: Option<&str>,
    protocol_version: Option<&str>,
    seconds: f64,
) {
    with_instruments(|instruments| {
        let mut attributes = vec![KeyValue::new(semconv::MCP_METHOD_NAME, method.to_owned())];
        match (method, tool_or_target) {
            ("tools/call", Some(tool)) => {
                attributes.push(KeyValue::new(semconv::GEN_AI_TOOL_NAME, tool.to_owned()));
                attributes.push(KeyValue::new(
                    semconv::GEN_AI_OPERATION_NAME,
                    semconv::GEN_AI_OPERATION_EXECUTE_TOOL,
                ));
            }
            ("prompts/get", Some(prompt)) => {
                attributes.push(KeyValue::new(
                    semconv::GEN_AI_PROMPT_NAME,
                    prompt.to_owned(),
                ));
            }
            _ => {}
        }
        outcome_attributes(&mut attributes, error_type, protocol_version);
        instruments.operation.record(seconds.max(0.0), &attributes);
    });
}

/// Records one MCP session's duration in `mcp.server.session.duration`; `error_type` only
/// when the session ended with an error.
pub fn record_session(protocol_version: Option<&str>, error_type: Option<&str>, seconds: f64) {
    with_instruments(|instruments| {
        let mut attributes = Vec::with_capacity(4);
        outcome_attributes(&mut attributes, error_type, protocol_version);
        instruments.session.record(seconds.max(0.0), &attributes);
    });
}
