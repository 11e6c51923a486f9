//! What an embedder's tracing hands the upstream clients: how to write the active
//! trace into an outbound request ([`Propagate`]), and how a statement may appear in
//! a span ([`StatementText`]). This crate knows no tracing backend; the server passes
//! its OpenTelemetry wiring's functions in, and without them nothing is added.
//!
//! Every upstream request runs in a `tracing` span of kind CLIENT named for what it
//! is (`trino POST /v1/statement`, `trino GET` for a page, `POST` for an API call),
//! with the upstream's `server.address` and `server.port`, the request method and the
//! response status: never a path, a query string, a header value, or (unless a
//! [`StatementText`] is given) the SQL.

use reqwest::header::HeaderMap;

/// Writes the active trace's `traceparent` (and `tracestate`) into an outbound
/// request's headers, replacing any there; writes nothing when no trace is active.
pub type Propagate = fn(&mut HeaderMap);

/// Turns a statement into the text a span may carry (`db.query.text`): a scrubbed
/// form without its values. Without one, no statement text is recorded.
pub type StatementText = fn(&str) -> String;

/// The host and port of `url` for a client span, with the scheme's default port.
pub(crate) fn server_of(url: &reqwest::Url) -> (String, u16) {
    (
        url.host_str().unwrap_or_default().to_owned(),
        url.port_or_known_default().unwrap_or_default(),
    )
}
