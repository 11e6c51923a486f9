//! OTLP messages turned into plain values a test asserts on.

use std::collections::BTreeMap;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::{metric, number_data_point};
use opentelemetry_proto::tonic::trace::v1::span;

use crate::Attributes;

/// An attribute's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A string.
    String(String),
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Double(f64),
    /// An array.
    Array(Vec<Value>),
    /// A map.
    Map(BTreeMap<String, Value>),
    /// Bytes.
    Bytes(Vec<u8>),
    /// No value.
    Empty,
}

impl Value {
    /// The string, when this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(text) => Some(text),
            _ => None,
        }
    }

    /// The integer, when this is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::Int(value) => Some(*value),
            _ => None,
        }
    }
}

/// A span's kind, as OTLP numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpanKind {
    /// Not given.
    Unspecified,
    /// Internal work.
    Internal,
    /// Serving a request.
    Server,
    /// Making a request.
    Client,
    /// Sending a message.
    Producer,
    /// Receiving a message.
    Consumer,
}

/// One span as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    /// The trace id, 32 lower-case hex digits.
    pub trace_id: String,
    /// The span id, 16 lower-case hex digits.
    pub span_id: String,
    /// The parent's span id, `None` for a root span.
    pub parent_span_id: Option<String>,
    /// The span's name.
    pub name: String,
    /// The span's kind.
    pub kind: SpanKind,
    /// Its attributes.
    pub attributes: Attributes,
    /// Its links, as (trace id, span id).
    pub links: Vec<(String, String)>,
    /// The status code: 0 unset, 1 ok, 2 error.
    pub status_code: i32,
    /// How long it lasted, from its start to its end as the exporter stamped them.
    pub duration: std::time::Duration,
    /// The resource's attributes (`service.name`, ...).
    pub resource: Attributes,
}

/// A metric's instrument kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// A gauge.
    Gauge,
    /// A sum (counter or up-down counter).
    Sum,
    /// An explicit-bucket histogram.
    Histogram,
    /// An exponential histogram.
    ExponentialHistogram,
    /// A summary.
    Summary,
    /// No data.
    Empty,
}

/// One data point of a metric.
#[derive(Debug, Clone, PartialEq)]
pub struct DataPoint {
    /// The point's attributes.
    pub attributes: Attributes,
    /// A gauge's or sum's value.
    pub value: Option<f64>,
    /// A histogram's count of measurements.
    pub count: Option<u64>,
    /// A histogram's sum of measurements.
    pub sum: Option<f64>,
    /// A histogram's explicit bucket boundaries.
    pub bucket_bounds: Vec<f64>,
    /// A histogram's count per bucket.
    pub bucket_counts: Vec<u64>,
}

/// One metric of one export.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedMetric {
    /// The metric's name.
    pub name: String,
    /// Its unit (`s`).
    pub unit: String,
    /// Its kind.
    pub kind: MetricKind,
    /// Its data points.
    pub points: Vec<DataPoint>,
    /// The resource's attributes.
    pub resource: Attributes,
}

fn value(any: Option<&AnyValue>) -> Value {
    match any.and_then(|any| any.value.as_ref()) {
        None => Value::Empty,
        Some(any_value::Value::StringValue(text)) => Value::String(text.clone()),
        Some(any_value::Value::BoolValue(flag)) => Value::Bool(*flag),
        Some(any_value::Value::IntValue(number)) => Value::Int(*number),
        Some(any_value::Value::DoubleValue(number)) => Value::Double(*number),
        Some(any_value::Value::ArrayValue(array)) => {
            Value::Array(array.values.iter().map(|item| value(Some(item))).collect())
        }
        Some(any_value::Value::KvlistValue(list)) => Value::Map(attributes(&list.values)),
        Some(any_value::Value::BytesValue(bytes)) => Value::Bytes(bytes.clone()),
        // A string-table index only means something inside a profile, which this
        // receiver does not accept.
        Some(_) => Value::Empty,
    }
}

fn attributes(pairs: &[KeyValue]) -> Attributes {
    pairs
        .iter()
        .map(|pair| (pair.key.clone(), value(pair.value.as_ref())))
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn kind(number: i32) -> SpanKind {
    match span::SpanKind::try_from(number) {
        Ok(span::SpanKind::Internal) => SpanKind::Internal,
        Ok(span::SpanKind::Server) => SpanKind::Server,
        Ok(span::SpanKind::Client) => SpanKind::Client,
        Ok(span::SpanKind::Producer) => SpanKind::Producer,
        Ok(span::SpanKind::Consumer) => SpanKind::Consumer,
        Ok(span::SpanKind::Unspecified) | Err(_) => SpanKind::Unspecified,
    }
}

pub(crate) fn spans(export: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut received = Vec::new();
    for resource_spans in export.resource_spans {
        let resource = resource_spans
            .resource
            .map(|resource| attributes(&resource.attributes))
            .unwrap_or_default();
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                received.push(ReceivedSpan {
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty())
                        .then(|| hex(&span.parent_span_id)),
                    name: span.name,
                    kind: kind(span.kind),
                    attributes: attributes(&span.attributes),
                    links: span
                        .links
                        .iter()
                        .map(|link| (hex(&link.trace_id), hex(&link.span_id)))
                        .collect(),
                    status_code: span.status.map(|status| status.code).unwrap_or_default(),
                    duration: std::time::Duration::from_nanos(
                        span.end_time_unix_nano
                            .saturating_sub(span.start_time_unix_nano),
                    ),
                    resource: resource.clone(),
                });
            }
        }
    }
    received
}

pub(crate) fn metrics(export: ExportMetricsServiceRequest) -> Vec<ReceivedMetric> {
    let mut received = Vec::new();
    for resource_metrics in export.resource_metrics {
        let resource = resource_metrics
            .resource
            .map(|resource| attributes(&resource.attributes))
            .unwrap_or_default();
        for scope_metrics in resource_metrics.scope_metrics {
            for metric in scope_metrics.metrics {
                let (kind, points) = data_points(metric.data);
                received.push(ReceivedMetric {
                    name: metric.name,
                    unit: metric.unit,
                    kind,
                    points,
                    resource: resource.clone(),
                });
            }
        }
    }
    received
}

fn number(point: &opentelemetry_proto::tonic::metrics::v1::NumberDataPoint) -> DataPoint {
    DataPoint {
        attributes: attributes(&point.attributes),
        value: point.value.map(|value| match value {
            number_data_point::Value::AsDouble(number) => number,
            #[expect(clippy::cast_precision_loss, reason = "test values are small integers")]
            number_data_point::Value::AsInt(number) => number as f64,
        }),
        count: None,
        sum: None,
        bucket_bounds: Vec::new(),
        bucket_counts: Vec::new(),
    }
}

/// A point with a count and a sum (a histogram's or a summary's), without buckets.
fn counted(pairs: &[KeyValue], count: u64, sum: Option<f64>) -> DataPoint {
    DataPoint {
        attributes: attributes(pairs),
        value: None,
        count: Some(count),
        sum,
        bucket_bounds: Vec::new(),
        bucket_counts: Vec::new(),
    }
}

fn data_points(data: Option<metric::Data>) -> (MetricKind, Vec<DataPoint>) {
    match data {
        None => (MetricKind::Empty, Vec::new()),
        Some(metric::Data::Gauge(gauge)) => (
            MetricKind::Gauge,
            gauge.data_points.iter().map(number).collect(),
        ),
        Some(metric::Data::Sum(sum)) => (
            MetricKind::Sum,
            sum.data_points.iter().map(number).collect(),
        ),
        Some(metric::Data::Histogram(histogram)) => (
            MetricKind::Histogram,
            histogram
                .data_points
                .iter()
                .map(|point| DataPoint {
                    bucket_bounds: point.explicit_bounds.clone(),
                    bucket_counts: point.bucket_counts.clone(),
                    ..counted(&point.attributes, point.count, point.sum)
                })
                .collect(),
        ),
        Some(metric::Data::ExponentialHistogram(histogram)) => (
            MetricKind::ExponentialHistogram,
            histogram
                .data_points
                .iter()
                .map(|point| counted(&point.attributes, point.count, point.sum))
                .collect(),
        ),
        Some(metric::Data::Summary(summary)) => (
            MetricKind::Summary,
            summary
                .data_points
                .iter()
                .map(|point| counted(&point.attributes, point.count, Some(point.sum)))
                .collect(),
        ),
    }
}
