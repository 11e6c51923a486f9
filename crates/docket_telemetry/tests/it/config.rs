//! `telemetry:` as the server reads it from YAML: the smallest form, the defaults, unknown
//! keys refused, problems named by path, header values never printed.

use docket_telemetry::{OtlpProtocol, TelemetryConfig};

fn read(yaml: &str) -> Result<TelemetryConfig, yaml_serde::Error> {
    yaml_serde::from_str(yaml)
}

#[test]
fn the_smallest_form_turns_otlp_on_with_the_defaults() {
    let config = read("otlp: { endpoint: \"http://collector:4318\" }").expect("valid YAML");
    let otlp = config.otlp.as_ref().expect("otlp is set");
    assert_eq!(otlp.endpoint, "http://collector:4318");
    assert_eq!(otlp.protocol, OtlpProtocol::HttpProtobuf);
    assert_eq!(otlp.traces_url(), "http://collector:4318/v1/traces");
    assert_eq!(otlp.metrics_url(), "http://collector:4318/v1/metrics");
    assert_eq!(otlp.timeout_seconds, 10);
    assert_eq!(config.service_name, "docket");
    assert_eq!(config.sampler.ratio, 1.0);
    assert!(config.sampler.parent_based);
    assert!(!config.capture_statements);
    assert_eq!(config.max_queue_spans, 2048);
    assert_eq!(config.metrics_interval_seconds, 60);
    assert!(config.problems("telemetry").is_empty());
    assert_eq!(read("{}").expect("empty"), TelemetryConfig::default());
    assert_eq!(TelemetryConfig::default().otlp, None, "off by default");
}

#[test]
fn every_key_is_read_and_unknown_keys_are_refused() {
    let config = read(
        r#"
otlp:
  endpoint: "https://otel.example.com/"
  protocol: http/protobuf
  headers: { x-api-key: "s3cret-value" }
  timeout_seconds: 5
service_name: docket-eu
resource_attributes: { deployment.environment.name: prod }
sampler: { ratio: 0.25, parent_based: false }
capture_statements: true
max_queue_spans: 100
metrics_interval_seconds: 15
"#,
    )
    .expect("valid YAML");
    assert!(
        config.problems("telemetry").is_empty(),
        "{:?}",
        config.problems("telemetry")
    );
    assert_eq!(
        config
            .otlp
            .as_ref()
            .map(|otlp| otlp.traces_url())
            .as_deref(),
        Some("https://otel.example.com/v1/traces")
    );
    assert_eq!(config.sampler.ratio, 0.25);
    assert!(!config.sampler.parent_based);

    for unknown in [
        "otlp: { endpoint: \"http://c:4318\", insecure: true }",
        "sampling: 0.5",
        "sampler: { ratio: 0.5, kind: always }",
        "otlp: { endpoint: \"http://c:4318\", protocol: grpc }",
    ] {
        assert!(read(unknown).is_err(), "{unknown} is refused");
    }
}

#[test]
fn header_values_never_appear_in_debug_output() {
    let config = read(
        "otlp: { endpoint: \"http://c:4318\", headers: { authorization: \"Bearer abc123\" } }",
    )
    .expect("valid YAML");
    let printed = format!("{config:?}");
    assert!(printed.contains("authorization"), "{printed}");
    assert!(!printed.contains("abc123"), "{printed}");
}

#[test]
fn problems_name_each_key_under_the_path() {
    let config = read(
        r#"
otlp: { endpoint: "ftp://collector", timeout_seconds: 0, headers: { "bad header": "x", ok: "line\nbreak" } }
service_name: ""
sampler: { ratio: 1.5 }
max_queue_spans: 0
metrics_interval_seconds: 0
"#,
    )
    .expect("valid YAML");
    let problems = config.problems("telemetry");
    for key in [
        "telemetry.otlp.endpoint:",
        "telemetry.otlp.timeout_seconds:",
        "telemetry.otlp.headers: `bad header`",
        "telemetry.otlp.headers.ok:",
        "telemetry.service_name:",
        "telemetry.sampler.ratio:",
        "telemetry.max_queue_spans:",
        "telemetry.metrics_interval_seconds:",
    ] {
        assert!(
            problems.iter().any(|problem| problem.starts_with(key)),
            "{key} in {problems:#?}"
        );
    }
    assert!(
        !problems.iter().any(|problem| problem.contains("line")),
        "a header value is never echoed: {problems:#?}"
    );
    for endpoint in [
        "http://collector:4318/v1/traces",
        "http://user:pw@collector:4318",
        "http://collector:4318?x=1",
        "collector:4318",
        "http://",
    ] {
        let config = read(&format!("otlp: {{ endpoint: \"{endpoint}\" }}")).expect("valid YAML");
        assert!(
            !config.problems("telemetry").is_empty(),
            "{endpoint} is refused"
        );
    }
}

#[test]
fn service_name_is_set_in_one_place() {
    let config = read("resource_attributes: { service.name: other }").expect("valid YAML");
    let problems = config.problems("telemetry");
    assert!(
        problems
            .iter()
            .any(|problem| problem.contains("telemetry.service_name")),
        "{problems:#?}"
    );
}

#[tokio::test]
async fn an_invalid_configuration_or_filter_is_an_error_not_a_panic() {
    let config = read("sampler: { ratio: -1 }").expect("valid YAML");
    let error = docket_telemetry::Telemetry::build(
        &config,
        docket_telemetry::LogFormat::Text,
        "info",
        std::io::sink,
    )
    .expect_err("a negative ratio");
    assert!(
        error.to_string().contains("telemetry.sampler.ratio"),
        "{error}"
    );
    let error = docket_telemetry::Telemetry::build(
        &TelemetryConfig::default(),
        docket_telemetry::LogFormat::Text,
        "docket=notalevel",
        std::io::sink,
    )
    .expect_err("a bad filter");
    assert!(error.to_string().contains("docket=notalevel"), "{error}");
}

#[test]
fn otlp_without_a_runtime_is_an_error() {
    let config = read("otlp: { endpoint: \"http://c:4318\" }").expect("valid YAML");
    let error = docket_telemetry::Telemetry::build(
        &config,
        docket_telemetry::LogFormat::Text,
        "info",
        std::io::sink,
    )
    .expect_err("no runtime");
    assert!(
        matches!(error, docket_telemetry::TelemetryError::NoRuntime),
        "{error}"
    );
}

#[test]
fn init_installs_the_global_subscriber_once() {
    // The only test that installs a global subscriber: every other test scopes its own.
    let config = TelemetryConfig::default();
    let telemetry =
        docket_telemetry::Telemetry::init(&config, docket_telemetry::LogFormat::Json, "warn")
            .expect("the first install");
    assert!(!telemetry.exporting());
    let again =
        docket_telemetry::Telemetry::init(&config, docket_telemetry::LogFormat::Text, "warn")
            .expect_err("a second install");
    assert!(
        matches!(again, docket_telemetry::TelemetryError::AlreadyInstalled(_)),
        "{again}"
    );
}
