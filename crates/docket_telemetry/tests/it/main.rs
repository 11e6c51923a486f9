//! docket_telemetry's one integration test binary: spans, links, injected headers, metrics
//! and log lines checked at a real OTLP/HTTP receiver, the queue's bounds against a
//! collector that is down or slow, the configuration, and property tests of the parsers.

mod config;
mod faults;
mod logs;
mod metrics;
mod properties;
mod scrub;
mod support;
mod traces;
