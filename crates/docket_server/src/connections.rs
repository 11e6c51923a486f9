//! Typed connection settings. `connections:` entries keep their kind-specific keys
//! as raw YAML; each kind's parser turns them into what its tools need and reports
//! every problem, unknown keys included.

use std::collections::BTreeMap;
use std::time::Duration;

use docket_export::api::{ApiAuth, ApiClient, ApiConfig};
use docket_export::readonly::ReadOnlyRules;
use docket_export::trino::{TrinoAuth, TrinoClient, TrinoConfig};
use docket_identity::connection::{Identity as UpstreamIdentity, IdentityConfig};
use docket_identity::user::{ImpersonationConfig, UserMapping};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::config::{ConnectionConfig, ConnectionKind, deserialize_bytes, deserialize_duration};

/// When a Trino connection asks the user before running a statement.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ConsentMode {
    /// Only when `EXPLAIN` estimates more rows than `consent.trino.row_threshold`.
    #[default]
    Threshold,
    /// Before every query and export.
    Always,
    /// Never.
    Never,
}

#[derive(Deserialize)]
#[serde(default)]
struct TrinoSettings {
    url: String,
    user: String,
    catalog: Option<String>,
    schema: Option<String>,
    source: Option<String>,
    auth: Option<AuthMap>,
    #[serde(deserialize_with = "deserialize_duration")]
    timeout: Duration,
    consent: ConsentMode,
    default: bool,
    readonly: ReadOnlySettings,
    impersonation: Option<ImpersonationConfig>,
}

/// `readonly:` of a Trino connection: what it allows beyond plain reads.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct ReadOnlySettings {
    /// Table functions statements may call, by name (`system.query`); none by default.
    allowed_table_functions: Vec<String>,
}

impl Default for TrinoSettings {
    fn default() -> Self {
        Self {
            url: String::new(),
            user: String::new(),
            catalog: None,
            schema: None,
            source: None,
            auth: None,
            timeout: Duration::from_secs(60),
            consent: ConsentMode::Threshold,
            default: false,
            readonly: ReadOnlySettings::default(),
            impersonation: None,
        }
    }
}

/// A Trino connection ready for the tools.
#[derive(Clone, Debug)]
pub(crate) struct TrinoConnection {
    /// Its name in `connections:`.
    pub name: String,
    /// The client.
    pub client: TrinoClient,
    /// When to ask before running.
    pub consent: ConsentMode,
    /// Whether calls without a `connection` argument use it.
    pub is_default: bool,
    /// What the read-only gate allows on it beyond plain reads.
    pub readonly: ReadOnlyRules,
    /// Whom queries run as when the connection impersonates its callers;
    /// `None` runs every query as its configured `user:`.
    pub impersonation: Option<UserMapping>,
}

/// Every Trino connection, or every problem found in their settings.
///
/// # Errors
/// One sentence per problem, prefixed by the key path.
pub(crate) fn trino_connections(
    connections: &BTreeMap<String, ConnectionConfig>,
) -> Result<Vec<TrinoConnection>, Vec<String>> {
    let mut problems = Vec::new();
    let mut parsed = Vec::new();
    for (name, connection) in connections
        .iter()
        .filter(|(_, c)| c.kind == ConnectionKind::Trino)
    {
        let path = format!("connections.{name}");
        let Some(settings) =
            parse_settings::<TrinoSettings>(&path, connection, "a trino", &mut problems)
        else {
            continue;
        };
        if settings.url.is_empty() {
            problems.push(format!("{path}.url: required for a trino connection"));
            continue;
        }
        if !reqwest::Url::parse(&settings.url)
            .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
        {
            problems.push(format!(
                "{path}.url: {:?} is not an http:// or https:// URL",
                settings.url
            ));
            continue;
        }
        if settings.user.is_empty() {
            problems.push(format!(
                "{path}.user: required (the X-Trino-User queries run as)"
            ));
            continue;
        }
        let mut config = TrinoConfig::new(settings.url, settings.user);
        config.catalog = settings.catalog;
        config.schema = settings.schema;
        if let Some(source) = settings.source {
            config.source = source;
        }
        // The per-request timeout bounds one HTTP exchange (a page), never a whole
        // export: exports page on for as long as their own timeout allows.
        config.request_timeout = settings.timeout;
        // A mapping with one key, as for api connections: yaml_serde reads an
        // externally tagged enum only from a YAML tag, never from `{ bearer: … }`.
        config.auth = match settings.auth {
            None => TrinoAuth::None,
            Some(AuthMap {
                bearer: Some(token),
                basic: None,
                api_key: None,
                client_credentials: None,
            }) => TrinoAuth::Bearer { token },
            Some(AuthMap {
                bearer: None,
                basic: Some(BasicSettings { username, password }),
                api_key: None,
                client_credentials: None,
            }) => TrinoAuth::Basic { username, password },
            Some(_) => {
                problems.push(format!("{path}.auth: name exactly one of bearer or basic"));
                continue;
            }
        };
        let impersonation = match settings
            .impersonation
            .as_ref()
            .map(|config| UserMapping::compile(config, &format!("{path}.impersonation")))
        {
            None => None,
            Some(Ok(mapping)) => Some(mapping),
            Some(Err(found)) => {
                problems.extend(found);
                continue;
            }
        };
        match TrinoClient::new(config) {
            Ok(client) => parsed.push(TrinoConnection {
                impersonation,
                name: name.clone(),
                client,
                consent: settings.consent,
                is_default: settings.default,
                readonly: ReadOnlyRules {
                    allowed_table_functions: settings.readonly.allowed_table_functions,
                },
            }),
            Err(err) => problems.push(format!("{path}: {err}")),
        }
    }
    if parsed
        .iter()
        .filter(|connection| connection.is_default)
        .count()
        > 1
    {
        problems.push("connections: more than one trino connection says default: true".into());
    }
    if problems.is_empty() {
        Ok(parsed)
    } else {
        Err(problems)
    }
}

/// A connection's kind-specific settings, with every unknown key and type error
/// reported as a problem (`None` when they could not be read at all). `kind` names
/// the kind with its article, as in `a trino`.
fn parse_settings<T: DeserializeOwned>(
    path: &str,
    connection: &ConnectionConfig,
    kind: &str,
    problems: &mut Vec<String>,
) -> Option<T> {
    let mapping: yaml_serde::Mapping = connection
        .settings
        .iter()
        .map(|(key, value)| (yaml_serde::Value::String(key.clone()), value.clone()))
        .collect();
    let mut unknown = Vec::new();
    let settings: Result<T, _> =
        serde_ignored::deserialize(yaml_serde::Value::Mapping(mapping), |key| {
            unknown.push(key.to_string())
        });
    problems.extend(
        unknown
            .into_iter()
            .map(|key| format!("{path}.{key}: unknown key for {kind} connection")),
    );
    match settings {
        Ok(settings) => Some(settings),
        Err(err) => {
            problems.push(format!("{path}: {err}"));
            None
        }
    }
}

/// The settings of an `api` or `graphql` connection.
#[derive(Deserialize)]
#[serde(default)]
struct HttpSettings {
    /// `api` only.
    base_url: Option<String>,
    /// `graphql` only.
    endpoint: Option<String>,
    auth: HttpAuthSettings,
    headers: BTreeMap<String, String>,
    /// `api` only.
    methods: Option<Vec<String>>,
    /// `api` only.
    paths: Option<Vec<String>>,
    #[serde(deserialize_with = "deserialize_duration")]
    connect_timeout: Duration,
    #[serde(deserialize_with = "deserialize_duration")]
    call_timeout: Duration,
    #[serde(deserialize_with = "deserialize_bytes")]
    max_response_bytes: u64,
    /// Whose credential calls carry: the connection's own (`fixed`), or each
    /// caller's (`token_exchange`, `headers`).
    identity: IdentityConfig,
    /// Mutual TLS: the client certificate and key, and a private CA.
    tls: Option<TlsSettings>,
    /// `api` only: the OpenAPI documents that describe it (files or URLs).
    openapi: Vec<String>,
}

/// `tls:` of an `api` or `graphql` connection: PEM files.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TlsSettings {
    /// The client certificate (then its chain).
    client_certificate: String,
    /// Its private key.
    client_key: String,
    /// A private CA, the only root the server's certificate may chain to.
    #[serde(default)]
    ca: Option<String>,
}

/// `auth.client_credentials:`: OAuth 2.0 client credentials.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClientCredentialsSettings {
    token_url: String,
    client_id: String,
    client_secret: String,
    #[serde(default)]
    scopes: Vec<String>,
    #[serde(default)]
    resource: Option<String>,
    #[serde(default)]
    audience: Option<String>,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            base_url: None,
            endpoint: None,
            auth: HttpAuthSettings::Word("none".to_owned()),
            headers: BTreeMap::new(),
            methods: None,
            paths: None,
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(60),
            max_response_bytes: 10 << 20,
            identity: IdentityConfig::default(),
            tls: None,
            openapi: Vec::new(),
        }
    }
}

/// `auth:` of an `api` or `graphql` connection: `none`, or a mapping with exactly
/// one of `bearer: TOKEN`, `basic: {username, password}`,
/// `api_key: {header | query, value}` and `client_credentials: {token_url,
/// client_id, client_secret, scopes, resource, audience}`.
#[derive(Deserialize)]
#[serde(untagged)]
enum HttpAuthSettings {
    Word(String),
    Map(AuthMap),
}

#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct AuthMap {
    bearer: Option<String>,
    basic: Option<BasicSettings>,
    api_key: Option<ApiKeySettings>,
    client_credentials: Option<Box<ClientCredentialsSettings>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BasicSettings {
    username: String,
    password: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApiKeySettings {
    header: Option<String>,
    query: Option<String>,
    value: String,
}

/// The most bytes of one PEM file a connection reads.
const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// The PEM files of `tls`, read now (a missing or unreadable one is a problem
/// naming its key, never its contents).
fn read_tls(
    tls: TlsSettings,
    path: &str,
    problems: &mut Vec<String>,
) -> Option<docket_export::api::ClientTls> {
    let mut read = |key: &str, file: &str| -> Option<String> {
        let size = std::fs::metadata(file).map(|meta| meta.len());
        match size {
            Ok(size) if size > MAX_PEM_BYTES => {
                problems.push(format!("{path}.{key}: {file} is larger than 1 MiB"));
                None
            }
            Ok(_) => match std::fs::read_to_string(file) {
                Ok(text) => Some(text),
                Err(error) => {
                    problems.push(format!("{path}.{key}: cannot read {file}: {error}"));
                    None
                }
            },
            Err(error) => {
                problems.push(format!("{path}.{key}: cannot read {file}: {error}"));
                None
            }
        }
    };
    let certificate_pem = read("client_certificate", &tls.client_certificate);
    let key_pem = read("client_key", &tls.client_key);
    let ca_pem = match &tls.ca {
        Some(ca) => Some(read("ca", ca)?),
        None => None,
    };
    Some(docket_export::api::ClientTls {
        certificate_pem: certificate_pem?,
        key_pem: key_pem?,
        ca_pem,
    })
}

/// The methods an `api` connection allows when it names none: reads only.
const DEFAULT_API_METHODS: &[&str] = &["GET", "HEAD"];

/// An `api` or `graphql` connection ready for the tools.
#[derive(Clone, Debug)]
pub(crate) struct HttpConnection {
    /// Its name in `connections:`.
    pub name: String,
    /// `api` or `graphql`.
    pub kind: ConnectionKind,
    /// The client; for `graphql`, its base URL is the endpoint.
    pub client: ApiClient,
    /// The methods callers may use (`api`; `graphql` always posts).
    pub methods: Vec<String>,
    /// Path globs callers may reach (`api`); empty means any path.
    pub paths: Vec<String>,
    /// The most bytes of a response read into memory.
    pub max_response_bytes: u64,
    /// Whose identity calls carry (see `docket_identity::connection`).
    pub identity: UpstreamIdentity,
    /// The OpenAPI documents that describe it (`api` only), as configured.
    pub openapi: Vec<String>,
}

/// Every `api` and `graphql` connection, or every problem found in their settings.
///
/// # Errors
/// One sentence per problem, prefixed by the key path. Problems never quote a
/// credential.
pub(crate) fn http_connections(
    connections: &BTreeMap<String, ConnectionConfig>,
) -> Result<Vec<HttpConnection>, Vec<String>> {
    let mut problems = Vec::new();
    let mut parsed = Vec::new();
    for (name, connection) in connections
        .iter()
        .filter(|(_, c)| matches!(c.kind, ConnectionKind::Api | ConnectionKind::Graphql))
    {
        let path = format!("connections.{name}");
        let kind = connection.kind;
        let Some(settings) =
            parse_settings::<HttpSettings>(&path, connection, with_article(kind), &mut problems)
        else {
            continue;
        };
        if let Some(connection) = http_connection(name, kind, settings, &path, &mut problems) {
            parsed.push(connection);
        }
    }
    if problems.is_empty() {
        Ok(parsed)
    } else {
        Err(problems)
    }
}

/// `an api`, `a graphql`, `a trino`.
fn with_article(kind: ConnectionKind) -> &'static str {
    match kind {
        ConnectionKind::Api => "an api",
        ConnectionKind::Graphql => "a graphql",
        ConnectionKind::Trino => "a trino",
    }
}

fn http_connection(
    name: &str,
    kind: ConnectionKind,
    settings: HttpSettings,
    path: &str,
    problems: &mut Vec<String>,
) -> Option<HttpConnection> {
    let before = problems.len();
    let (url_key, url, misplaced) = match kind {
        ConnectionKind::Graphql => (
            "endpoint",
            settings.endpoint,
            [
                ("base_url", settings.base_url.is_some()),
                ("methods", settings.methods.is_some()),
                ("paths", settings.paths.is_some()),
                ("openapi", !settings.openapi.is_empty()),
            ],
        ),
        _ => (
            "base_url",
            settings.base_url,
            [
                ("endpoint", settings.endpoint.is_some()),
                ("methods", false),
                ("paths", false),
                ("openapi", false),
            ],
        ),
    };
    for (key, _) in misplaced.iter().filter(|(_, present)| *present) {
        problems.push(format!(
            "{path}.{key}: unknown key for {} connection",
            with_article(kind)
        ));
    }
    let methods: Vec<String> = settings.methods.unwrap_or_else(|| {
        DEFAULT_API_METHODS
            .iter()
            .map(|method| (*method).to_owned())
            .collect()
    });
    for (index, method) in methods.iter().enumerate() {
        if method.is_empty() || !method.bytes().all(|byte| byte.is_ascii_uppercase()) {
            problems.push(format!(
                "{path}.methods[{index}]: must be an upper-case HTTP method such as GET"
            ));
        }
    }
    let paths = settings.paths.unwrap_or_default();
    for (index, glob) in paths.iter().enumerate() {
        if !glob.starts_with('/') && !glob.starts_with('*') {
            problems.push(format!("{path}.paths[{index}]: must start with / (or *)"));
        }
    }
    if settings.max_response_bytes == 0 {
        problems.push(format!(
            "{path}.max_response_bytes: must be greater than zero"
        ));
    }
    if settings.call_timeout.is_zero() {
        problems.push(format!("{path}.call_timeout: must be greater than zero"));
    }
    let auth = match settings.auth {
        HttpAuthSettings::Word(word) if word == "none" => ApiAuth::None,
        HttpAuthSettings::Word(_) => {
            problems.push(format!(
                "{path}.auth: must be none or a mapping with bearer, basic, api_key or client_credentials"
            ));
            ApiAuth::None
        }
        HttpAuthSettings::Map(map) => {
            match (map.bearer, map.basic, map.api_key, map.client_credentials) {
                (Some(token), None, None, None) => ApiAuth::Bearer { token },
                (None, Some(BasicSettings { username, password }), None, None) => {
                    ApiAuth::Basic { username, password }
                }
                (None, None, None, Some(settings)) => {
                    ApiAuth::ClientCredentials(docket_export::api::ClientCredentials {
                        token_url: settings.token_url,
                        client_id: settings.client_id,
                        client_secret: settings.client_secret,
                        scopes: settings.scopes,
                        resource: settings.resource,
                        audience: settings.audience,
                    })
                }
                (
                    None,
                    None,
                    Some(ApiKeySettings {
                        header,
                        query,
                        value,
                    }),
                    None,
                ) => match (header, query) {
                    (Some(header), None) => ApiAuth::HeaderKey { header, value },
                    (None, Some(parameter)) => ApiAuth::QueryKey { parameter, value },
                    _ => {
                        problems.push(format!(
                            "{path}.auth.api_key: name exactly one of header or query"
                        ));
                        ApiAuth::None
                    }
                },
                _ => {
                    problems.push(format!(
                    "{path}.auth: name exactly one of bearer, basic, api_key or client_credentials"
                ));
                    ApiAuth::None
                }
            }
        }
    };
    let identity = match settings.identity.compile(&format!("{path}.identity")) {
        Ok(identity) => identity,
        Err(found) => {
            problems.extend(found);
            UpstreamIdentity::Fixed
        }
    };
    if matches!(identity, UpstreamIdentity::TokenExchange(_)) && auth != ApiAuth::None {
        problems.push(format!(
            "{path}.auth: must be none when identity.mode is token_exchange: each caller's exchanged token is the credential"
        ));
    }
    if let UpstreamIdentity::Headers(templates) = &identity {
        for name in templates.names() {
            if settings
                .headers
                .keys()
                .any(|fixed| fixed.eq_ignore_ascii_case(name))
            {
                problems.push(format!(
                    "{path}.identity.headers.{name}: also one of the connection's headers; name it once"
                ));
            }
        }
    }
    let Some(url) = url.filter(|url| !url.is_empty()) else {
        problems.push(format!(
            "{path}.{url_key}: required for {} connection",
            with_article(kind)
        ));
        return None;
    };
    let tls = settings
        .tls
        .and_then(|tls| read_tls(tls, &format!("{path}.tls"), problems));
    let config = ApiConfig {
        base_url: url,
        auth,
        static_headers: settings.headers.into_iter().collect(),
        connect_timeout: settings.connect_timeout,
        call_timeout: settings.call_timeout,
        tls,
    };
    let client = match ApiClient::new(config) {
        Ok(client) => client,
        Err(err) => {
            problems.push(format!("{path}: {err}"));
            return None;
        }
    };
    (problems.len() == before).then(|| HttpConnection {
        name: name.to_owned(),
        kind,
        client,
        methods: if kind == ConnectionKind::Graphql {
            vec!["POST".to_owned()]
        } else {
            methods
        },
        paths,
        max_response_bytes: settings.max_response_bytes,
        identity,
        openapi: settings.openapi,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn parse(connections: &str) -> Result<Vec<HttpConnection>, Vec<String>> {
        let text = format!("connections:\n{connections}");
        let env = |name: &str| (name == "TOKEN").then(|| "t0ken-value".to_owned());
        let config = Config::from_yaml(&text, &env);
        match config {
            Ok(config) => http_connections(&config.connections),
            Err(err) => Err(err.problems),
        }
    }

    #[test]
    fn api_and_graphql_connections_parse_with_defaults() {
        let parsed = parse(
            "  shop: { kind: api, base_url: \"https://api.example/v1\", auth: { bearer: \"${TOKEN}\" } }\n\
             \x20 open: { kind: api, base_url: \"http://127.0.0.1:9\", auth: none, methods: [GET, POST], paths: [\"/a*\"] }\n\
             \x20 gql: { kind: graphql, endpoint: \"https://api.example/graphql\", max_response_bytes: 1MiB, call_timeout: 5s }\n",
        )
        .expect("valid");
        let shop = parsed.iter().find(|c| c.name == "shop").expect("shop");
        assert_eq!(shop.methods, ["GET", "HEAD"]);
        assert!(shop.paths.is_empty());
        assert_eq!(shop.max_response_bytes, 10 << 20);
        assert_eq!(shop.client.auth_kind(), "bearer");
        assert!(!format!("{shop:?}").contains("t0ken-value"));
        let open = parsed.iter().find(|c| c.name == "open").expect("open");
        assert_eq!((open.methods.len(), open.paths.len()), (2, 1));
        let gql = parsed.iter().find(|c| c.name == "gql").expect("gql");
        assert_eq!(gql.methods, ["POST"]);
        assert_eq!(gql.client.call_timeout(), Duration::from_secs(5));
    }

    #[test]
    fn every_problem_is_reported_without_the_secret() {
        let problems = parse(
            "  a: { kind: api }\n\
             \x20 b: { kind: api, base_url: \"ftp://x\" }\n\
             \x20 c: { kind: api, base_url: \"https://x\", auth: { api_key: { header: X-Key, query: key, value: \"${TOKEN}\" } } }\n\
             \x20 d: { kind: graphql, endpoint: \"https://x\", base_url: \"https://y\", methods: [GET] }\n\
             \x20 e: { kind: api, base_url: \"https://x\", methods: [get], paths: [items] }\n\
             \x20 f: { kind: api, base_url: \"https://x\", auth: { bearer: \"${TOKEN}\", basic: { username: u, password: p } } }\n\
             \x20 g: { kind: api, base_url: \"https://x\", retries: 3 }\n",
        )
        .expect_err("invalid");
        let text = problems.join("\n");
        for expected in [
            "connections.a.base_url: required for an api connection",
            "connections.b: invalid api connection: the base url must be http or https",
            "connections.c.auth.api_key: name exactly one of header or query",
            "connections.d.base_url: unknown key for a graphql connection",
            "connections.d.methods: unknown key for a graphql connection",
            "connections.e.methods[0]: must be an upper-case HTTP method such as GET",
            "connections.e.paths[0]: must start with / (or *)",
            "connections.f.auth: name exactly one of bearer, basic, api_key or client_credentials",
            "connections.g.retries: unknown key for an api connection",
        ] {
            assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
        }
        assert!(!text.contains("t0ken-value"), "{text}");
    }

    #[test]
    fn api_route_connections_are_globs_that_must_match_a_connection() {
        let yaml = |pattern: &str| {
            format!(
                "connections:\n  shop-eu: {{ kind: api, base_url: \"https://x\" }}\n\
                 personas:\n  p: {{ roles: [r], api_routes: [{{ connection: \"{pattern}\", action: deny }}] }}\n"
            )
        };
        assert!(Config::from_yaml(&yaml("shop-*"), &|_| None).is_ok());
        let problems = Config::from_yaml(&yaml("shoq-*"), &|_| None)
            .expect_err("a typo")
            .problems;
        assert_eq!(
            problems,
            [
                "personas.p.api_routes: connection \"shoq-*\" matches no connection under connections"
            ]
        );
    }

    #[test]
    fn trino_auth_is_a_mapping_with_bearer_or_basic() {
        let parse = |auth: &str| {
            let text = format!(
                "connections:\n  w: {{ kind: trino, url: \"http://t:8080\", user: d, auth: {auth} }}\n"
            );
            let config = Config::from_yaml(&text, &|_| None).map_err(|err| err.problems)?;
            trino_connections(&config.connections)
        };
        assert!(parse("{ basic: { username: u, password: p } }").is_ok());
        assert!(parse("{ bearer: t }").is_ok());
        let problems =
            parse("{ bearer: t, basic: { username: u, password: p } }").expect_err("two kinds");
        assert_eq!(
            problems,
            ["connections.w.auth: name exactly one of bearer or basic"]
        );
    }
}
