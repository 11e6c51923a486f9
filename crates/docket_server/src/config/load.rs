//! Loading a configuration: YAML with `${ENV}` expansion, every unknown key and
//! every type error reported at once with its key path and line, and the checks
//! across keys that no single value can make ([`Config::problems`]).
//!
//! Environment lookups are passed in as a function, because only the binary reads
//! the process environment; tests pass a map.

use std::collections::BTreeSet;

use super::schema::{Config, EMBEDDED_DATABASE_URL, StorageKind, redact_url};

/// Everything wrong with a configuration file, all at once.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the configuration has {} problem(s):\n  - {}", .problems.len(), .problems.join("\n  - "))]
pub struct ConfigError {
    /// One sentence per problem, each starting with the key path it concerns.
    pub problems: Vec<String>,
}

impl Config {
    /// The configuration `docket serve` uses without `--config`: loopback only,
    /// anonymous callers are administrators (only this machine can reach it), and
    /// tasks are kept in SQLite under `./docket-data/`.
    pub fn embedded_default() -> Self {
        let mut config = Config::default();
        config.database.url = Some(EMBEDDED_DATABASE_URL.to_owned());
        config.auth.allow_anonymous = true;
        config.auth.anonymous_roles = vec!["admin".into()];
        // The built-in `admin` persona allows every tool and connection.
        config
    }

    /// Parses a YAML configuration, expanding `${NAME}` in string values with `env`.
    ///
    /// # Errors
    /// [`ConfigError`] listing every unknown key, unset variable, type error and
    /// inconsistency found.
    pub fn from_yaml(
        text: &str,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut problems = Vec::new();
        let mut value: yaml_serde::Value = match yaml_serde::from_str(text) {
            Ok(yaml_serde::Value::Null) => yaml_serde::Value::Mapping(Default::default()),
            Ok(value) => value,
            Err(err) => {
                return Err(ConfigError {
                    problems: vec![format!("not valid YAML: {err}")],
                });
            }
        };
        expand_env(&mut value, "", env, &mut problems);
        if value
            .get("database")
            .and_then(yaml_serde::Value::as_str)
            .is_some_and(|text| text.eq_ignore_ascii_case("none"))
        {
            return Err(ConfigError {
                problems: vec![format!(
                    "database: none is not supported: tasks, scripts, audit and exports need \
                     a database; leave database: out to use the embedded SQLite database \
                     ({EMBEDDED_DATABASE_URL}), or set database.url"
                )],
            });
        }

        let Some(config) = typed(value, text, &mut problems) else {
            return Err(ConfigError { problems });
        };
        problems.extend(config.problems());
        if problems.is_empty() {
            Ok(config)
        } else {
            Err(ConfigError { problems })
        }
    }

    /// Inconsistencies between sections, as sentences prefixed by the key path.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = self.auth.problems();
        problems.extend(self.telemetry.problems("telemetry"));
        problems.extend(crate::persona::problems(&self.personas, &self.admin));
        problems.extend(self.rate_limit.problems());
        if let Err(connection_problems) = crate::connections::trino_connections(&self.connections) {
            problems.extend(connection_problems);
        }
        if let Err(connection_problems) = crate::connections::http_connections(&self.connections) {
            problems.extend(connection_problems);
        }
        for (name, persona) in &self.personas {
            for rule in &persona.api_routes {
                // The connection is a glob (`shop-*`); a rule no connection matches
                // is a typo.
                if !self
                    .connections
                    .keys()
                    .any(|connection| crate::persona::glob_match(&rule.connection, connection))
                {
                    problems.push(format!(
                        "personas.{name}.api_routes: connection {:?} matches no connection under connections",
                        rule.connection
                    ));
                }
            }
        }
        for origin in &self.server.allowed_origins {
            if !(origin.starts_with("http://") || origin.starts_with("https://")) {
                problems.push(format!(
                    "server.allowed_origins: {origin:?} must be an origin such as https://app.example.com"
                ));
            }
        }
        if self.tasks.heartbeat_interval.is_zero() {
            problems.push("tasks.heartbeat_interval: must be greater than zero".into());
        }
        if self.tasks.stale_after <= self.tasks.heartbeat_interval {
            problems.push("tasks.stale_after: must be longer than tasks.heartbeat_interval, or live tasks read as failed".into());
        }
        if self.scripts.lease <= self.scripts.heartbeat_interval {
            problems.push("scripts.lease: must be longer than scripts.heartbeat_interval, or running runs are taken by other workers".into());
        }
        if self.scripts.heartbeat_interval.is_zero() {
            problems.push("scripts.heartbeat_interval: must be greater than zero".into());
        }
        for (key, value) in [
            ("scripts.max_per_owner", Some(self.scripts.max_per_owner)),
            (
                "scripts.max_schedules_per_owner",
                Some(self.scripts.max_schedules_per_owner),
            ),
            (
                "scripts.worker.max_running_per_owner",
                self.scripts.worker.max_running_per_owner,
            ),
        ] {
            if value == Some(0) {
                problems.push(format!("{key}: must be at least 1"));
            }
        }
        if self.scripts.schedules.interval < std::time::Duration::from_secs(1) {
            problems.push(
                "scripts.schedules.interval: must be at least 1s (a schedule fires at most once a minute)"
                    .into(),
            );
        }
        if self.tasks.poll_interval_ms == 0 {
            problems.push("tasks.poll_interval_ms: must be greater than zero".into());
        }
        if let Some(url) = &self.database.url
            && !(url.starts_with("postgres://")
                || url.starts_with("postgresql://")
                || url.starts_with("sqlite://"))
        {
            problems.push(format!(
                "database.url: {} must start with postgres:// or sqlite://",
                redact_url(url)
            ));
        }
        if self.results.max_bytes < 1024 || self.results.default_bytes < 1024 {
            problems
                .push("results.default_bytes and results.max_bytes: must be at least 1KiB".into());
        }
        if self.results.default_bytes > self.results.max_bytes {
            problems.push("results.default_bytes: must not be more than results.max_bytes".into());
        }
        if self.results.continuation_ttl < std::time::Duration::from_secs(60)
            || self.results.continuation_ttl > std::time::Duration::from_secs(24 * 3600)
        {
            problems.push("results.continuation_ttl: must be from 1m to 24h".into());
        }
        if self.exports.default_timeout > self.exports.max_timeout {
            problems.push(
                "exports.default_timeout: must not be longer than exports.max_timeout".into(),
            );
        }
        if self.storage.kind == StorageKind::S3 && self.storage.bucket.is_none() {
            problems.push("storage.bucket: required when storage.kind is s3".into());
        }
        if self.storage.link_ttl.is_zero() || self.storage.link_ttl > super::schema::MAX_LINK_TTL {
            problems.push(
                "storage.link_ttl: must be longer than zero and at most 168h (7 days)".into(),
            );
        }
        let shares = &self.storage.shares;
        if shares.default_ttl.is_zero() || shares.max_ttl.is_zero() {
            problems.push(
                "storage.shares.default_ttl, storage.shares.max_ttl: must be longer than zero"
                    .into(),
            );
        }
        if shares.default_ttl > shares.max_ttl {
            problems.push(
                "storage.shares.default_ttl: must not be longer than storage.shares.max_ttl".into(),
            );
        }
        if shares.max_ttl > super::schema::MAX_SHARE_TTL {
            problems.push("storage.shares.max_ttl: must be at most 8760h (365 days)".into());
        }
        problems.extend(self.portal.problems(self.auth.oauth_server.is_some()));
        problems.extend(self.catalogs.problems());
        if self.server.max_connections == 0 {
            problems.push("server.max_connections: must be greater than zero".into());
        }
        if self.server.header_read_timeout.is_zero() || self.server.body_timeout.is_zero() {
            problems.push(
                "server.header_read_timeout, server.body_timeout: must be longer than zero".into(),
            );
        }
        if self.server.max_sessions_per_identity == 0 {
            problems.push("server.max_sessions_per_identity: must be at least 1".into());
        }
        if self.server.max_prompts_per_owner == 0 {
            problems.push("server.max_prompts_per_owner: must be at least 1".into());
        }
        if self.server.completion_timeout.is_zero() {
            problems.push("server.completion_timeout: must be longer than zero".into());
        }
        if self.server.session_idle_timeout < crate::legacy::MIN_IDLE_TIMEOUT {
            problems.push(format!(
                "server.session_idle_timeout: must be at least {} s",
                crate::legacy::MIN_IDLE_TIMEOUT.as_secs()
            ));
        }
        if !(1..=100).contains(&self.server.max_connection_share_percent) {
            problems.push("server.max_connection_share_percent: must be 1 to 100".into());
        }
        if self.server.max_streams_per_identity == 0 {
            problems.push("server.max_streams_per_identity: must be at least 1".into());
        }
        if self.server.max_request_bytes == 0 {
            problems.push("server.max_request_bytes: must be greater than zero".into());
        }
        let has_credentials = !self.auth.api_keys.is_empty() || self.auth.oidc.is_some();
        if !self.server.address.ip().is_loopback() && self.auth.allow_anonymous {
            problems.push(format!(
                "auth.allow_anonymous: anonymous access is only allowed on a loopback address, and server.address is {}; \
                 configure auth.api_keys or auth.oidc, or bind to 127.0.0.1",
                self.server.address
            ));
        } else if !self.server.address.ip().is_loopback() && !has_credentials {
            problems.push(format!(
                "auth: server.address {} is reachable from other machines but no credentials are configured; \
                 add auth.api_keys or auth.oidc, or bind to 127.0.0.1",
                self.server.address
            ));
        }
        problems
    }
}

/// Replaces `${NAME}` in every string scalar; `$${` writes a literal `${`.
fn expand_env(
    value: &mut yaml_serde::Value,
    path: &str,
    env: &dyn Fn(&str) -> Option<String>,
    problems: &mut Vec<String>,
) {
    match value {
        yaml_serde::Value::String(text) if text.contains("${") => match expand_string(text, env) {
            Ok(expanded) => *text = expanded,
            Err(name) => problems.push(format!(
                "{}: environment variable {name} is not set",
                if path.is_empty() { "." } else { path }
            )),
        },
        yaml_serde::Value::Sequence(items) => {
            for (index, item) in items.iter_mut().enumerate() {
                expand_env(item, &format!("{path}[{index}]"), env, problems);
            }
        }
        yaml_serde::Value::Mapping(mapping) => {
            for (key, item) in mapping.iter_mut() {
                let key = key.as_str().unwrap_or("?");
                let child = if path.is_empty() {
                    key.to_owned()
                } else {
                    format!("{path}.{key}")
                };
                expand_env(item, &child, env, problems);
            }
        }
        _ => {}
    }
}

/// Expands one string; `Err` names the first unset variable.
fn expand_string(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let tail = &rest[start..];
        if let Some(after) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
        } else if let Some(after) = tail.strip_prefix("${") {
            let Some(end) = after.find('}') else {
                out.push_str(tail);
                return Ok(out);
            };
            let name = &after[..end];
            out.push_str(&env(name).ok_or_else(|| name.to_owned())?);
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// Deserializes one configuration document, reporting every unknown key and the type
/// error it met, each with its key path and line.
fn deserialize_piece(
    piece: yaml_serde::Value,
    text: &str,
    problems: &mut BTreeSet<String>,
) -> Option<Config> {
    let mut unknown = Vec::new();
    let parsed: Result<Config, _> = serde_path_to_error::deserialize(
        serde_ignored::Deserializer::new(piece, &mut |path: serde_ignored::Path<'_>| {
            unknown.push(path.to_string());
        }),
    );
    for path in unknown {
        problems.insert(format!("{}: unknown key", at_line(text, &path)));
    }
    match parsed {
        Ok(config) => Some(config),
        Err(error) => {
            let path = error.path().to_string();
            problems.insert(format!("{}: {}", at_line(text, &path), error.into_inner()));
            None
        }
    }
}

/// The typed configuration, or every problem with it. When the whole document does not
/// deserialize, each key below each section is tried on its own, so one bad value never
/// hides another.
fn typed(value: yaml_serde::Value, text: &str, problems: &mut Vec<String>) -> Option<Config> {
    let mut found = BTreeSet::new();
    if let Some(config) = deserialize_piece(value.clone(), text, &mut found) {
        problems.extend(found);
        return Some(config);
    }
    // Without the values that fail, the rest is checked too (its consistency
    // problems are reported alongside).
    let mut pruned = value.clone();
    if let yaml_serde::Value::Mapping(top) = &value {
        for (key, section) in top {
            let single = |inner: yaml_serde::Value| {
                let mut mapping = yaml_serde::Mapping::new();
                mapping.insert(key.clone(), inner);
                yaml_serde::Value::Mapping(mapping)
            };
            match section {
                yaml_serde::Value::Mapping(entries) if !entries.is_empty() => {
                    for (inner_key, inner_value) in entries {
                        let mut mapping = yaml_serde::Mapping::new();
                        mapping.insert(inner_key.clone(), inner_value.clone());
                        let piece = single(yaml_serde::Value::Mapping(mapping));
                        if deserialize_piece(piece, text, &mut found).is_none()
                            && let Some(yaml_serde::Value::Mapping(entries)) = pruned.get_mut(key)
                        {
                            entries.remove(inner_key);
                        }
                    }
                }
                other => {
                    if deserialize_piece(single(other.clone()), text, &mut found).is_none()
                        && let yaml_serde::Value::Mapping(top) = &mut pruned
                    {
                        top.remove(key);
                    }
                }
            }
        }
    }
    if let Some(rest) = deserialize_piece(pruned, text, &mut BTreeSet::new()) {
        found.extend(rest.problems());
    }
    problems.extend(found);
    None
}

/// `path` with the line of the file it is on, when it can be found: `tasks.enabled
/// (line 3)`. Each segment is looked for after the line of the one before it, as a
/// key (`segment:`) in block or flow style.
fn at_line(text: &str, path: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut from = 0;
    let mut found = None;
    for segment in path.split('.').filter(|segment| !segment.is_empty()) {
        let segment = segment.split('[').next().unwrap_or(segment);
        if segment.is_empty() || segment == "?" {
            continue;
        }
        let key = format!("{segment}:");
        let at = lines.iter().enumerate().skip(from).find(|(_, line)| {
            line.match_indices(&key).any(|(index, _)| {
                line[..index]
                    .chars()
                    .last()
                    .is_none_or(|before| matches!(before, ' ' | '{' | ',' | '-' | '"'))
            })
        });
        match at {
            Some((index, _)) => {
                from = index;
                found = Some(index + 1);
            }
            None => break,
        }
    }
    match found {
        Some(line) => format!("{path} (line {line})"),
        None => path.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::time::Duration;

    use crate::config::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "ALICE_KEY" => Some("s3cret-alice".into()),
            _ => None,
        }
    }

    #[test]
    fn without_a_database_section_the_embedded_database_is_used_and_none_is_refused() {
        let config =
            Config::from_yaml("server: { address: \"127.0.0.1:9000\" }\n", &env).expect("valid");
        assert_eq!(config.database.url.as_deref(), Some(EMBEDDED_DATABASE_URL));
        let refused = Config::from_yaml("database: none\n", &env).expect_err("refused");
        assert!(
            refused.problems[0].starts_with("database: none is not supported"),
            "{refused:?}"
        );
    }

    /// Every problem is reported with its key path and line; one bad value hides
    /// no other, type errors included.
    #[test]
    fn every_problem_names_its_key_and_line() {
        let text = "tasks: { enabled: maybe }\n\
                    database:\n  url: \"mysql://db/docket\"\n\
                    server:\n  max_connections: many\n  shutdown: { grace_period: soon }\n\
                    connections:\n  w: { kind: trino, url: \"not a url\", user: docket }\n  \
                    x: { kind: trino, url: \"http://trino:8080\" }\n\
                    nonsense: 1\n";
        let problems = Config::from_yaml(text, &env).expect_err("invalid").problems;
        let expect = [
            "tasks.enabled (line 1): invalid type: string \"maybe\", expected a boolean",
            "server.max_connections (line 5): invalid type",
            "server.shutdown.grace_period (line 6):",
            "database.url: mysql://db/docket must start with",
            "connections.w.url: \"not a url\" is not an http:// or https:// URL",
            "connections.x.user: required",
            "nonsense (line 10): unknown key",
        ];
        for expected in expect {
            assert!(
                problems.iter().any(|problem| problem.starts_with(expected)),
                "{expected:?} missing from {problems:#?}"
            );
        }
    }

    /// `telemetry:` in its smallest form turns OTLP on; its problems are named by
    /// key, an unknown key under it as well.
    #[test]
    fn telemetry_is_configured_and_checked() {
        let config = Config::from_yaml(
            "telemetry: { otlp: { endpoint: \"http://collector:4318\" } }\n",
            &env,
        )
        .expect("valid");
        let otlp = config.telemetry.otlp.expect("otlp on");
        assert_eq!(otlp.endpoint, "http://collector:4318");
        assert!(!config.telemetry.capture_statements, "off by default");
        assert!(Config::default().telemetry.otlp.is_none(), "off without it");
        let problems = Config::from_yaml(
            "telemetry: { otlp: { endpoint: \"collector\" }, sampler: { ratio: 2.0 }, max_queue_spans: 0 }\n",
            &env,
        )
        .expect_err("invalid")
        .problems;
        for expected in [
            "telemetry.otlp.endpoint:",
            "telemetry.sampler.ratio:",
            "telemetry.max_queue_spans:",
        ] {
            assert!(
                problems.iter().any(|problem| problem.starts_with(expected)),
                "{expected:?} missing from {problems:#?}"
            );
        }
        let unknown = Config::from_yaml("telemetry: { endpoint: \"http://c:4318\" }\n", &env)
            .expect_err("an unknown key")
            .problems;
        assert!(
            unknown
                .iter()
                .any(|problem| problem.starts_with("telemetry")),
            "{unknown:?}"
        );
    }

    #[test]
    fn an_empty_file_is_the_default() {
        let config = Config::from_yaml("", &env).expect("valid");
        assert_eq!(
            config.server.address,
            SocketAddr::from(([127, 0, 0, 1], 8080))
        );
        assert_eq!(config.server.shutdown.grace_period, Duration::from_secs(25));
        assert!(!config.auth.allow_anonymous);
    }

    #[test]
    fn env_references_are_expanded() {
        let text =
            "auth:\n  api_keys:\n    - { name: alice, key: \"${ALICE_KEY}\", roles: [analyst] }\n";
        let config = Config::from_yaml(text, &env).expect("valid");
        assert_eq!(config.auth.api_keys[0].key.as_deref(), Some("s3cret-alice"));
        assert_eq!(expand_string("a$${b}c", &env).as_deref(), Ok("a${b}c"));
        assert_eq!(expand_string("cost $5", &env).as_deref(), Ok("cost $5"));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let text = "server:\n  adress: 1\n  shutdown: { grace_period: 3s }\nfoo: 1\nauth:\n  api_keys:\n    - { name: bob, key: \"${MISSING}\" }\n";
        let err = Config::from_yaml(text, &env).expect_err("invalid");
        let all = err.problems.join("\n");
        assert!(all.contains("server.adress (line 2): unknown key"), "{all}");
        assert!(all.contains("foo (line 4): unknown key"), "{all}");
        assert!(
            all.contains("auth.api_keys[0].key: environment variable MISSING is not set"),
            "{all}"
        );
    }

    #[test]
    fn anonymous_access_off_loopback_is_refused() {
        let text = "server: { address: \"0.0.0.0:8080\" }\nauth: { allow_anonymous: true }\n";
        let err = Config::from_yaml(text, &env).expect_err("invalid");
        assert!(err.problems.iter().any(|p| p.contains("loopback")), "{err}");
        let no_credentials = Config::from_yaml("server: { address: \"0.0.0.0:8080\" }\n", &env)
            .expect_err("invalid");
        assert!(
            no_credentials.problems[0].contains("no credentials"),
            "{no_credentials}"
        );
    }

    #[test]
    fn the_per_owner_script_caps_and_worker_share_are_at_least_one() {
        let text = "scripts: { max_per_owner: 0, max_schedules_per_owner: 0, \
                    worker: { max_running_per_owner: 0 } }\n";
        let err = Config::from_yaml(text, &env).expect_err("invalid");
        for key in [
            "scripts.max_per_owner",
            "scripts.max_schedules_per_owner",
            "scripts.worker.max_running_per_owner",
        ] {
            assert!(
                err.problems.iter().any(|p| p.starts_with(key)),
                "{key}: {err}"
            );
        }
        let config =
            Config::from_yaml("scripts: { worker: { concurrency: 8 } }\n", &env).expect("valid");
        assert_eq!(
            (
                config.scripts.max_per_owner,
                config.scripts.max_schedules_per_owner
            ),
            (200, 20)
        );
        assert_eq!(
            config.scripts.worker.running_share(),
            7,
            "one worker is left to others"
        );
        assert_eq!(
            Config::from_yaml("scripts: { worker: { concurrency: 1 } }\n", &env)
                .expect("valid")
                .scripts
                .worker
                .running_share(),
            1
        );
    }

    #[test]
    fn the_per_identity_limits_and_a_usable_idle_timeout_are_required() {
        let text = "server: { session_idle_timeout: 400ms, max_connection_share_percent: 0, \
                    max_streams_per_identity: 0 }\n";
        let err = Config::from_yaml(text, &env).expect_err("invalid");
        for key in [
            "server.session_idle_timeout",
            "server.max_connection_share_percent",
            "server.max_streams_per_identity",
        ] {
            assert!(
                err.problems.iter().any(|p| p.starts_with(key)),
                "{key}: {err}"
            );
        }
        let fine = "server: { session_idle_timeout: 8s, max_connection_share_percent: 100 }\n";
        Config::from_yaml(fine, &env).expect("valid");
    }

    #[test]
    fn database_passwords_are_not_printed() {
        let text = "database: { url: \"postgres://docket:hunter2@db:5432/docket\" }\n";
        let config = Config::from_yaml(text, &env).expect("valid");
        let printed = format!("{config:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert!(
            printed.contains("postgres://docket:***@db:5432/docket"),
            "{printed}"
        );
        assert_eq!(
            redact_url("sqlite://./docket-data/docket.db"),
            "sqlite://./docket-data/docket.db"
        );
    }

    #[test]
    fn task_timings_must_leave_room_for_heartbeats() {
        let err = Config::from_yaml("tasks: { heartbeat_interval: 5s, stale_after: 2s }\n", &env)
            .expect_err("invalid");
        assert!(
            err.problems
                .iter()
                .any(|p| p.starts_with("tasks.stale_after")),
            "{err}"
        );
        let config = Config::from_yaml(
            "tasks: { heartbeat_interval: 200ms, stale_after: 1s }\n",
            &env,
        )
        .expect("valid");
        assert_eq!(config.tasks.heartbeat_interval, Duration::from_millis(200));
    }

    #[test]
    fn the_scheduler_interval_has_a_floor_and_schedules_parse() {
        let err = Config::from_yaml("scripts: { schedules: { interval: 0s } }\n", &env)
            .expect_err("invalid");
        assert!(
            err.problems
                .iter()
                .any(|p| p.starts_with("scripts.schedules.interval")),
            "{err}"
        );
        let config = Config::from_yaml(
            "scripts: { schedules: { enabled: false, interval: 30s } }\n",
            &env,
        )
        .expect("valid");
        assert!(!config.scripts.schedules.enabled);
        assert_eq!(config.scripts.schedules.interval, Duration::from_secs(30));
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("100MiB"), Ok(100 << 20));
        assert_eq!(parse_bytes("512kb"), Ok(512 << 10));
        assert_eq!(parse_bytes("42"), Ok(42));
        assert!(parse_bytes("5 parsecs").is_err());
        let config =
            Config::from_yaml("exports: { max_bytes: 10MiB, max_rows: 5 }\n", &env).expect("valid");
        assert_eq!(config.exports.max_bytes, 10 << 20);
        let err = Config::from_yaml("storage: { kind: s3 }\n", &env).expect_err("invalid");
        assert!(
            err.problems.iter().any(|p| p.starts_with("storage.bucket")),
            "{err}"
        );
    }

    #[test]
    fn link_lifetimes_are_bounded() {
        let env = |_: &str| None;
        let config = Config::from_yaml("{}\n", &env).expect("defaults");
        assert_eq!(config.storage.link_ttl, Duration::from_secs(3600));
        assert!(config.storage.shares.default_ttl <= config.storage.shares.max_ttl);
        let config = Config::from_yaml(
            "storage: { link_ttl: 168h, shares: { default_ttl: 1h, max_ttl: 8760h } }\n",
            &env,
        )
        .expect("at the bounds");
        assert_eq!(config.storage.link_ttl, MAX_LINK_TTL);
        for (yaml, key) in [
            ("storage: { link_ttl: 169h }\n", "storage.link_ttl"),
            ("storage: { link_ttl: 0s }\n", "storage.link_ttl"),
            (
                "storage: { shares: { default_ttl: 240h, max_ttl: 24h } }\n",
                "storage.shares.default_ttl",
            ),
            (
                "storage: { shares: { max_ttl: 8761h } }\n",
                "storage.shares.max_ttl",
            ),
        ] {
            let err = Config::from_yaml(yaml, &env).expect_err(yaml);
            assert!(
                err.problems.iter().any(|problem| problem.starts_with(key)),
                "{yaml}: {err}"
            );
        }
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("30"), Ok(Duration::from_secs(30)));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("").is_err());
    }

    #[test]
    fn connection_settings_are_not_printed() {
        let text = "connections:\n  shop: { kind: api, base_url: \"https://x\", auth: { bearer: hunter2 } }\n";
        let config = Config::from_yaml(text, &env).expect("valid");
        let printed = format!("{config:?}");
        assert!(!printed.contains("hunter2"), "{printed}");
        assert_eq!(config.connections["shop"].kind, ConnectionKind::Api);
    }

    /// YAML built from the keys the loader knows, with values of every shape.
    fn config_yaml() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let value = prop_oneof![
            Just("true".to_owned()),
            Just("0".to_owned()),
            Just("-1".to_owned()),
            Just("18446744073709551616".to_owned()),
            Just("\"10s\"".to_owned()),
            Just("\"${UNSET}\"".to_owned()),
            Just("[]".to_owned()),
            Just("{}".to_owned()),
            Just("[a, {b: c}]".to_owned()),
            Just("~".to_owned()),
            "[a-z0-9 :]{0,8}".prop_map(|text| format!("\"{text}\"")),
        ];
        let key = proptest::sample::select(vec![
            "server.address",
            "server.shutdown.grace_period",
            "database.url",
            "tasks.heartbeat_interval",
            "tasks.stale_after",
            "scripts.lease",
            "scripts.max_reclaims",
            "auth.allow_anonymous",
            "auth.api_keys",
            "personas.p.roles",
            "personas.p.tools",
            "connections.c.kind",
            "connections.c.url",
            "exports.max_bytes",
            "rate_limit.burst",
            "unknown.key",
        ]);
        proptest::collection::vec((key, value), 0..8).prop_map(|pairs| {
            let mut text = String::new();
            for (key, value) in pairs {
                let parts: Vec<&str> = key.split('.').collect();
                let (last, parents) = parts.split_last().unwrap_or((&"x", &[]));
                let nested = parents
                    .iter()
                    .rev()
                    .fold(format!("{last}: {value}"), |inner, parent| {
                        format!("{parent}: {{ {inner} }}")
                    });
                text.push_str(&nested);
                text.push('\n');
            }
            text
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Whatever a configuration file holds, the loader answers a configuration
        /// or its problems; it never panics.
        #[test]
        fn no_configuration_panics_the_loader(text in config_yaml()) {
            if let Ok(config) = Config::from_yaml(&text, &env) {
                let _ = config.problems();
            }
        }

        #[test]
        fn no_text_panics_the_loader(text in "\\PC{0,200}") {
            let _ = Config::from_yaml(&text, &env);
        }
    }
}
