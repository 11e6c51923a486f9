//! The `telemetry:` section of Docket's configuration: where traces and metrics go, how
//! they are sampled, and the bounds of the export queue.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

/// `telemetry:` in Docket's YAML. Without `otlp`, traces and metrics stay in the process
/// (the default); log lines are written either way.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// Where traces and metrics are exported; `None` turns both off.
    pub otlp: Option<OtlpConfig>,
    /// `service.name` of the resource every span and metric carries.
    pub service_name: String,
    /// Further resource attributes (`deployment.environment.name: prod`).
    pub resource_attributes: BTreeMap<String, String>,
    /// Which traces are recorded.
    pub sampler: SamplerConfig,
    /// Whether spans may carry SQL text (scrubbed of literals, see [`crate::scrub_statement`]).
    /// Off by default: no statement text and no argument value leaves in an attribute.
    pub capture_statements: bool,
    /// At most this many finished spans wait for export; beyond it spans are dropped and
    /// counted ([`crate::Telemetry::dropped_spans`]), never buffered or waited for.
    pub max_queue_spans: usize,
    /// How often metrics are exported.
    pub metrics_interval_seconds: u64,
}

/// The default `service.name`.
pub const DEFAULT_SERVICE_NAME: &str = "docket";

/// The largest accepted `max_queue_spans`: a bound on the memory a stalled collector costs.
pub const MAX_QUEUE_SPANS_LIMIT: usize = 1_000_000;

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            otlp: None,
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            resource_attributes: BTreeMap::new(),
            sampler: SamplerConfig::default(),
            capture_statements: false,
            max_queue_spans: 2048,
            metrics_interval_seconds: 60,
        }
    }
}

/// OTLP export: over HTTP with protobuf bodies, to `{endpoint}/v1/traces` and
/// `{endpoint}/v1/metrics`.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OtlpConfig {
    /// The collector's base URL, `http://collector:4318`.
    pub endpoint: String,
    /// The wire protocol; only `http/protobuf`.
    pub protocol: OtlpProtocol,
    /// Headers every export request carries (an API key for a hosted backend). Their values
    /// never appear in `Debug` output.
    pub headers: BTreeMap<String, String>,
    /// How long one export request may take before it is abandoned (and its spans counted
    /// as dropped).
    pub timeout_seconds: u64,
}

impl Default for OtlpConfig {
    fn default() -> Self {
        Self {
            endpoint: String::new(),
            protocol: OtlpProtocol::HttpProtobuf,
            headers: BTreeMap::new(),
            timeout_seconds: 10,
        }
    }
}

impl fmt::Debug for OtlpConfig {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: BTreeMap<&str, &str> = self
            .headers
            .keys()
            .map(|name| (name.as_str(), "<redacted>"))
            .collect();
        formatter
            .debug_struct("OtlpConfig")
            .field("endpoint", &self.endpoint)
            .field("protocol", &self.protocol)
            .field("headers", &headers)
            .field("timeout_seconds", &self.timeout_seconds)
            .finish()
    }
}

impl OtlpConfig {
    /// The URL spans are posted to.
    pub fn traces_url(&self) -> String {
        format!("{}/v1/traces", self.endpoint.trim_end_matches('/'))
    }

    /// The URL metrics are posted to.
    pub fn metrics_url(&self) -> String {
        format!("{}/v1/metrics", self.endpoint.trim_end_matches('/'))
    }
}

/// The OTLP wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum OtlpProtocol {
    /// OTLP over HTTP with protobuf bodies (`http/protobuf`).
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

/// Head sampling: which new traces are recorded.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SamplerConfig {
    /// The share of new traces recorded, from 0.0 to 1.0.
    pub ratio: f64,
    /// Whether a request that arrives with a trace context follows its caller's sampling
    /// decision instead of the ratio.
    pub parent_based: bool,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        Self {
            ratio: 1.0,
            parent_based: true,
        }
    }
}

impl TelemetryConfig {
    /// Everything wrong with this section, each naming its key under `path`
    /// (`telemetry.otlp.endpoint: ...`); empty when the section is usable.
    pub fn problems(&self, path: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if self.service_name.trim().is_empty() {
            problems.push(format!("{path}.service_name: must not be empty"));
        }
        if self.service_name.len() > 255 {
            problems.push(format!("{path}.service_name: at most 255 bytes"));
        }
        if self.resource_attributes.len() > 64 {
            problems.push(format!("{path}.resource_attributes: at most 64 attributes"));
        }
        if self.resource_attributes.contains_key("service.name") {
            problems.push(format!(
                "{path}.resource_attributes: `service.name` is set by {path}.service_name"
            ));
        }
        for (key, value) in &self.resource_attributes {
            if key.is_empty() || key.len() > 255 {
                problems.push(format!(
                    "{path}.resource_attributes: a key must have 1 to 255 bytes"
                ));
            }
            if value.len() > 4096 {
                problems.push(format!(
                    "{path}.resource_attributes.{key}: at most 4096 bytes"
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.sampler.ratio) {
            problems.push(format!(
                "{path}.sampler.ratio: must be between 0.0 and 1.0, is {}",
                self.sampler.ratio
            ));
        }
        if self.max_queue_spans == 0 || self.max_queue_spans > MAX_QUEUE_SPANS_LIMIT {
            problems.push(format!(
                "{path}.max_queue_spans: must be between 1 and {MAX_QUEUE_SPANS_LIMIT}"
            ));
        }
        if self.metrics_interval_seconds == 0 || self.metrics_interval_seconds > 86_400 {
            problems.push(format!(
                "{path}.metrics_interval_seconds: must be between 1 and 86400"
            ));
        }
        if let Some(otlp) = &self.otlp {
            problems.extend(otlp.problems(&format!("{path}.otlp")));
        }
        problems
    }
}

impl OtlpConfig {
    fn problems(&self, path: &str) -> Vec<String> {
        let mut problems = Vec::new();
        let endpoint = self.endpoint.as_str();
        let scheme_ok = endpoint.starts_with("http://") || endpoint.starts_with("https://");
        let host = endpoint
            .split_once("://")
            .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""))
            .unwrap_or("");
        if !scheme_ok || host.is_empty() {
            problems.push(format!(
                "{path}.endpoint: must be an http:// or https:// URL such as http://collector:4318"
            ));
        }
        if endpoint.contains(['?', '#']) || host.contains('@') {
            problems.push(format!(
                "{path}.endpoint: must not carry a query, a fragment or credentials (put them in headers)"
            ));
        }
        if endpoint.trim_end_matches('/').ends_with("/v1/traces") {
            problems.push(format!(
                "{path}.endpoint: is the collector's base URL; Docket adds /v1/traces and /v1/metrics"
            ));
        }
        if self.timeout_seconds == 0 || self.timeout_seconds > 300 {
            problems.push(format!("{path}.timeout_seconds: must be between 1 and 300"));
        }
        if self.headers.len() > 32 {
            problems.push(format!("{path}.headers: at most 32 headers"));
        }
        for (name, value) in &self.headers {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                problems.push(format!("{path}.headers: `{name}` is not a header name"));
            }
            // The value is not echoed: it is usually a credential.
            if http::HeaderValue::from_str(value).is_err() {
                problems.push(format!(
                    "{path}.headers.{name}: the value is not a valid header value"
                ));
            }
        }
        problems
    }
}
