//! The outbound HTTP caller for `api` connections, and the export of one response.
//!
//! Every request goes to the connection's base URL: the caller gives a path below
//! it, and a path that could leave it (`//`, `@`, `..`, backslashes, encoded
//! separators, control characters, a query or fragment) is refused before any I/O.
//! The joined URL's scheme, host and port are checked against the base once more.
//! Redirects are never followed; the caller may not set `Authorization`, the
//! connection's key header or the headers the connection sets itself; and the
//! connection's credentials appear in no error, debug output or result.
//!
//! A connection that acts as each caller ([`ApiClient::with_caller`]) sends the
//! caller's own bearer token (an RFC 8693 exchanged one) in place of its fixed
//! credentials, and identity headers filled from the caller's claims, which callers
//! may not set either; that token is scrubbed like the connection's own secrets.
//!
//! [`ApiClient::fetch`] reads a response into memory up to a cap (for
//! `api_invoke_endpoint`); [`export_response`] (in `export`) streams one into an
//! upload chunk by chunk with a byte cap, a timeout and cancellation, so memory
//! does not grow with the size of the response. `content` decides what a stored
//! response's content type is; `pagination` reports where the next page is.

use std::fmt;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, Url};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::sink::SinkError;

mod client_credentials;
mod client_tls;
mod content;
mod export;
mod pagination;
mod scrub;

pub use client_credentials::ClientCredentials;
pub use client_tls::ClientTls;
pub use content::{declared_content_type, extension_for, is_textual, stored_content_type};
pub(crate) use export::commit_or_abort;
pub use export::{ApiExportError, ApiExportLimits, ApiExportReport, KeyFor, export_response};
pub use pagination::{PaginationHint, pagination_hint};
pub use scrub::{REDACTED, Scrubber, StreamScrubber};

/// The longest path accepted, in bytes.
pub const MAX_PATH_BYTES: usize = 2048;

/// How many leading bytes of a response are looked at to guess its type.
pub(crate) const SNIFF_BYTES: usize = 8192;

/// How a connection authenticates to its API. Its `Debug` output never shows a
/// secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum ApiAuth {
    /// No credentials.
    #[default]
    None,
    /// `Authorization: Bearer <token>`.
    Bearer {
        /// The token.
        token: String,
    },
    /// HTTP basic authentication (RFC 7617).
    Basic {
        /// The user name.
        username: String,
        /// The password.
        password: String,
    },
    /// A key in a header (such as `X-API-Key`).
    HeaderKey {
        /// The header's name.
        header: String,
        /// The key.
        value: String,
    },
    /// A key in a query parameter (such as `?api_key=`).
    QueryKey {
        /// The parameter's name.
        parameter: String,
        /// The key.
        value: String,
    },
    /// A bearer token the connection obtains with OAuth 2.0 client credentials,
    /// cached and fetched again before it expires.
    ClientCredentials(ClientCredentials),
}

impl ApiAuth {
    /// Its kind, for display: `none`, `bearer`, `basic`, `api_key`,
    /// `oauth2_client_credentials`.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            ApiAuth::None => "none",
            ApiAuth::Bearer { .. } => "bearer",
            ApiAuth::Basic { .. } => "basic",
            ApiAuth::HeaderKey { .. } | ApiAuth::QueryKey { .. } => "api_key",
            ApiAuth::ClientCredentials(_) => "oauth2_client_credentials",
        }
    }

    /// Every secret it holds, in the forms it is sent in, so callers can scrub
    /// them from what they show or store (an upstream may echo a request back);
    /// [`Scrubber`] adds their URL-encoded forms.
    fn secrets(&self) -> Vec<String> {
        use base64::Engine as _;
        match self {
            ApiAuth::None => Vec::new(),
            ApiAuth::Bearer { token } => vec![token.clone()],
            ApiAuth::Basic { username, password } => vec![
                base64::engine::general_purpose::STANDARD.encode(format!("{username}:{password}")),
                password.clone(),
            ],
            ApiAuth::HeaderKey { value, .. } | ApiAuth::QueryKey { value, .. } => {
                vec![value.clone()]
            }
            ApiAuth::ClientCredentials(credentials) => credentials.secrets(),
        }
    }
}

impl fmt::Debug for ApiAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiAuth::None => f.write_str("None"),
            ApiAuth::Bearer { .. } => f.write_str("Bearer([REDACTED])"),
            ApiAuth::Basic { username, .. } => write!(f, "Basic({username}, [REDACTED])"),
            ApiAuth::HeaderKey { header, .. } => write!(f, "HeaderKey({header}, [REDACTED])"),
            ApiAuth::QueryKey { parameter, .. } => {
                write!(f, "QueryKey({parameter}, [REDACTED])")
            }
            ApiAuth::ClientCredentials(credentials) => credentials.fmt(f),
        }
    }
}

/// Who one caller is at the connection's API: what [`ApiClient::with_caller`] adds
/// to the connection for that caller's calls. Its `Debug` output shows neither the
/// token nor the headers' values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct CallerAuth {
    /// A token sent as `Authorization: Bearer <token>` in place of the connection's
    /// own credentials, such as one exchanged for the caller's (RFC 8693).
    pub bearer: Option<String>,
    /// Identity headers (`X-User-Email: alice@example.com`, ...), set after the
    /// caller's headers; callers may not set them.
    pub headers: Vec<(String, String)>,
}

impl fmt::Debug for CallerAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("CallerAuth")
            .field("bearer", &self.bearer.as_ref().map(|_| "[REDACTED]"))
            .field("headers", &names)
            .finish()
    }
}

/// What an [`ApiClient`] is built from.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// `http` or `https` URL every request goes below, such as
    /// `https://api.example/v1`. No query, fragment or credentials.
    pub base_url: String,
    /// The credentials.
    pub auth: ApiAuth,
    /// Headers sent with every request; callers may not override them.
    pub static_headers: Vec<(String, String)>,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How long one call may take: a whole exchange when the body is read into
    /// memory, the wait for the response's headers when it is streamed.
    pub call_timeout: Duration,
    /// Mutual TLS: the client certificate presented and the private CA trusted.
    pub tls: Option<ClientTls>,
}

impl ApiConfig {
    /// A configuration for `base_url` with no credentials, a 10 s connect timeout
    /// and a 60 s call timeout.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            auth: ApiAuth::None,
            static_headers: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(60),
            tls: None,
        }
    }
}

/// A request body.
#[derive(Clone, Debug, PartialEq)]
pub enum RequestBody {
    /// Sent as `application/json` unless the caller names a content type.
    Json(Value),
    /// Sent as it is (`text/plain` unless the caller names a content type).
    Text(String),
}

/// One request, as a caller describes it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApiRequest {
    /// The HTTP method, such as `GET`.
    pub method: String,
    /// The path below the base URL, starting with `/`.
    pub path: String,
    /// Query parameters, in order; a name may repeat.
    pub query: Vec<(String, String)>,
    /// Extra headers.
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<RequestBody>,
}

/// Why a call failed. No variant carries a credential.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The connection's settings are unusable.
    #[error("invalid api connection: {message}")]
    Config {
        /// What is wrong.
        message: String,
    },
    /// The path could leave the connection's base URL, or is malformed.
    #[error("the path is refused: {reason}")]
    Path {
        /// Why.
        reason: String,
    },
    /// The method is not an HTTP method.
    #[error("{method:?} is not an HTTP method")]
    Method {
        /// The method as given.
        method: String,
    },
    /// A header the caller may not set, or one that is malformed.
    #[error("the header {name:?} is refused: {reason}")]
    Header {
        /// The header's name, as given.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// A query parameter the caller may not set, or one that is malformed.
    #[error("the query parameter {name:?} is refused: {reason}")]
    Query {
        /// The parameter's name.
        name: String,
        /// Why.
        reason: &'static str,
    },
    /// The connection could not obtain its own credentials (the OAuth token
    /// endpoint refused or could not be reached).
    #[error("the API's credentials could not be obtained: {message}")]
    UpstreamAuth {
        /// What happened, without any secret.
        message: String,
    },
    /// The API could not be reached, or the exchange broke off.
    #[error("the API could not be reached: {message}")]
    Transport {
        /// What happened, without the URL.
        message: String,
    },
    /// The API did not answer in time.
    #[error("the API did not answer within {} seconds", .after.as_secs())]
    Timeout {
        /// The timeout.
        after: Duration,
    },
    /// The response is larger than allowed.
    #[error("the response is larger than the cap of {limit} bytes; narrow the request")]
    TooLarge {
        /// The cap, in bytes.
        limit: u64,
    },
    /// The call was cancelled.
    #[error("the call was cancelled")]
    Cancelled,
    /// The object store failed (exports).
    #[error("could not store the response: {0}")]
    Sink(#[from] SinkError),
}

/// A client for one `api` connection. Cheap to clone.
#[derive(Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    base: Url,
    auth: ApiAuth,
    scrubber: Scrubber,
    static_headers: HeaderMap,
    call_timeout: Duration,
    propagate: Option<crate::trace::Propagate>,
    /// The connection's token, with client credentials; shared by its clones.
    tokens: Option<std::sync::Arc<client_credentials::TokenCache>>,
    /// When the client certificate expires, with mutual TLS.
    certificate_expires: Option<time::OffsetDateTime>,
}

impl fmt::Debug for ApiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiClient")
            .field("base", &self.base.as_str())
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

/// Headers a caller may never set: credentials, the target host, and framing that
/// the client itself decides.
const FORBIDDEN_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
    "trailer",
    "keep-alive",
    "proxy-connection",
];

impl ApiClient {
    /// A client for `config`. It never follows redirects.
    ///
    /// # Errors
    /// [`ApiError::Config`] when the base URL is not a plain `http`/`https` URL, a
    /// static header is malformed, or the HTTP client cannot be built.
    pub fn new(config: ApiConfig) -> Result<Self, ApiError> {
        let invalid = |message: String| ApiError::Config { message };
        let base =
            Url::parse(&config.base_url).map_err(|error| invalid(format!("base url: {error}")))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(invalid("the base url must be http or https".into()));
        }
        if base.host_str().is_none_or(str::is_empty) {
            return Err(invalid("the base url has no host".into()));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(invalid(
                "the base url may not have a query or fragment".into(),
            ));
        }
        if !base.username().is_empty() || base.password().is_some() {
            return Err(invalid(
                "the base url may not hold credentials; use auth".into(),
            ));
        }
        let mut static_headers = HeaderMap::new();
        for (name, value) in &config.static_headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("the static header {name:?} is not a header name")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| invalid(format!("the static header {name:?} has an invalid value")))?;
            static_headers.insert(header, value);
        }
        match &config.auth {
            ApiAuth::HeaderKey { header, value } => {
                HeaderName::from_bytes(header.as_bytes()).map_err(|_| {
                    invalid(format!("the key header {header:?} is not a header name"))
                })?;
                HeaderValue::from_str(value)
                    .map_err(|_| invalid("the api key is not a valid header value".into()))?;
            }
            ApiAuth::QueryKey { parameter, .. } if parameter.is_empty() => {
                return Err(invalid("the api key's query parameter has no name".into()));
            }
            ApiAuth::Bearer { token } => {
                HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| invalid("the bearer token is not a valid header value".into()))?;
            }
            _ => {}
        }
        let tokens = match &config.auth {
            ApiAuth::ClientCredentials(credentials) => Some(std::sync::Arc::new(
                client_credentials::TokenCache::new(credentials.clone()).map_err(invalid)?,
            )),
            _ => None,
        };
        let mut builder = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .redirect(reqwest::redirect::Policy::none());
        let mut certificate_expires = None;
        if let Some(tls) = &config.tls {
            if base.scheme() != "https" {
                return Err(invalid(
                    "a client certificate needs an https base url".into(),
                ));
            }
            let (configured, expires) = tls.apply(builder).map_err(invalid)?;
            builder = configured;
            certificate_expires = Some(expires);
        }
        let http = builder
            .build()
            .map_err(|error| invalid(format!("http client: {error}")))?;
        Ok(Self {
            http,
            base,
            scrubber: Scrubber::new(&config.auth.secrets()),
            auth: config.auth,
            static_headers,
            call_timeout: config.call_timeout,
            propagate: None,
            tokens,
            certificate_expires,
        })
    }

    /// This client writing the active trace into every request it sends (fetches,
    /// exports, GraphQL queries and exports) with `propagate`, after the caller's
    /// headers, so an upstream's own record joins the trace. No I/O happens.
    #[must_use]
    pub fn with_propagation(&self, propagate: crate::trace::Propagate) -> ApiClient {
        let mut client = self.clone();
        client.propagate = Some(propagate);
        client
    }

    /// This client acting as one caller: `caller.bearer` (when given) replaces the
    /// connection's credentials, `caller.headers` are sent with every request after the
    /// caller's own headers (a request that sets one is refused, "the connection sets
    /// it", as for static headers), and [`ApiClient::scrub`] and
    /// [`ApiClient::scrubber`] find the caller's token too. Every call through the
    /// returned client (fetches, exports, GraphQL queries and exports) uses them. The
    /// HTTP client, its connection pool and the connection's settings are shared; no
    /// I/O happens.
    ///
    /// # Errors
    /// [`ApiError::Header`] when the token is empty or not a valid header value, or an
    /// identity header is not a header name, has a value with a control character, is
    /// given twice, or is a header the connection or the client sets itself
    /// (`Authorization`, `Host`, `Cookie`, `Content-Type`, framing headers, the
    /// connection's key header or one of its static headers).
    pub fn with_caller(&self, caller: CallerAuth) -> Result<ApiClient, ApiError> {
        let mut client = self.clone();
        for (name, value) in &caller.headers {
            let refuse = |reason| {
                Err(ApiError::Header {
                    name: name.clone(),
                    reason,
                })
            };
            let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
                return refuse("it is not a header name");
            };
            if FORBIDDEN_HEADERS.contains(&header.as_str())
                || header == reqwest::header::CONTENT_TYPE
            {
                return refuse("an identity header may not be a credential or framing header");
            }
            if self
                .key_header()
                .is_some_and(|key| key.eq_ignore_ascii_case(header.as_str()))
            {
                return refuse("it carries the connection's key");
            }
            if self.static_headers.contains_key(&header) {
                return refuse("the connection sets it as a static header");
            }
            if client.static_headers.contains_key(&header) {
                return refuse("it is given twice");
            }
            let Ok(value) = HeaderValue::from_str(value) else {
                return refuse("its value contains a control character");
            };
            client.static_headers.insert(header, value);
        }
        if let Some(token) = caller.bearer {
            let valid =
                !token.is_empty() && HeaderValue::from_str(&format!("Bearer {token}")).is_ok();
            if !valid {
                return Err(ApiError::Header {
                    name: "Authorization".into(),
                    reason: "the caller's token is not a valid header value",
                });
            }
            client.scrubber = self.scrubber.with_secrets(std::slice::from_ref(&token));
            client.auth = ApiAuth::Bearer { token };
            client.tokens = None;
        }
        Ok(client)
    }

    /// The base URL every request goes below.
    #[must_use]
    pub fn base_url(&self) -> &Url {
        &self.base
    }

    /// The header that carries the connection's key, if it uses one.
    #[must_use]
    pub fn key_header(&self) -> Option<&str> {
        match &self.auth {
            ApiAuth::HeaderKey { header, .. } => Some(header),
            _ => None,
        }
    }

    /// The connection's authentication kind (`none`, `bearer`, `basic`, `api_key`,
    /// `oauth2_client_credentials`).
    #[must_use]
    pub fn auth_kind(&self) -> &'static str {
        self.auth.kind()
    }

    /// When the connection's client certificate expires, with mutual TLS.
    #[must_use]
    pub fn certificate_expires(&self) -> Option<time::OffsetDateTime> {
        self.certificate_expires
    }

    /// How long one call may take.
    #[must_use]
    pub fn call_timeout(&self) -> Duration {
        self.call_timeout
    }

    /// Replaces every credential of the connection in `text` by `[REDACTED]`, for
    /// text that came from elsewhere (an upstream error message) and is shown.
    #[must_use]
    pub fn scrub(&self, text: &str) -> String {
        self.scrubber().scrub(text)
    }

    /// The scrub of this connection's secrets, for bytes that are stored: every path
    /// from an upstream to a caller goes through it. With client credentials it
    /// finds the current token too.
    #[must_use]
    pub fn scrubber(&self) -> Scrubber {
        self.tokens
            .as_ref()
            .and_then(|tokens| tokens.scrubber())
            .unwrap_or_else(|| self.scrubber.clone())
    }

    /// The token to send, with client credentials: the cached one or a new one.
    async fn upstream_token(&self, cancel: &CancellationToken) -> Result<Option<String>, ApiError> {
        let Some(tokens) = &self.tokens else {
            return Ok(None);
        };
        tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ApiError::Cancelled),
            token = tokens.token(&self.http, self.call_timeout, &self.scrubber) => match token {
                Ok(token) => Ok(Some(token)),
                Err(client_credentials::TokenError::Refused(message)) => {
                    Err(ApiError::UpstreamAuth { message })
                }
                Err(client_credentials::TokenError::Timeout(after)) => {
                    Err(ApiError::Timeout { after })
                }
            },
        }
    }

    /// Checks `request` and builds its URL, without any I/O.
    ///
    /// # Errors
    /// [`ApiError::Path`], [`ApiError::Method`], [`ApiError::Header`] or
    /// [`ApiError::Query`] saying what is refused.
    pub fn check(&self, request: &ApiRequest) -> Result<(Method, Url, HeaderMap), ApiError> {
        let method = parse_method(&request.method)?;
        let path = normalize_path(&request.path)?;
        let base_path = self.base.path().trim_end_matches('/');
        let mut url = self.base.clone();
        url.set_path(&format!("{base_path}{path}"));
        // Setting a path cannot change the origin, but the check is cheap and makes
        // the rule explicit: every request stays on the connection's scheme, host
        // and port, below its base path.
        if url.scheme() != self.base.scheme()
            || url.host_str() != self.base.host_str()
            || url.port_or_known_default() != self.base.port_or_known_default()
            || !url.path().starts_with(base_path)
        {
            return Err(ApiError::Path {
                reason: "it leaves the connection's base URL".into(),
            });
        }
        let key_parameter = match &self.auth {
            ApiAuth::QueryKey { parameter, .. } => Some(parameter.as_str()),
            _ => None,
        };
        for (name, value) in &request.query {
            if name.is_empty() {
                return Err(ApiError::Query {
                    name: name.clone(),
                    reason: "it has no name",
                });
            }
            if Some(name.as_str()) == key_parameter {
                return Err(ApiError::Query {
                    name: name.clone(),
                    reason: "the connection sets it",
                });
            }
            if name.contains(char::is_control) || value.contains(char::is_control) {
                return Err(ApiError::Query {
                    name: name.clone(),
                    reason: "it contains a control character",
                });
            }
        }
        if !request.query.is_empty() {
            url.query_pairs_mut().extend_pairs(&request.query);
        }
        let headers = self.caller_headers(&request.headers)?;
        Ok((method, url, headers))
    }

    fn caller_headers(&self, headers: &[(String, String)]) -> Result<HeaderMap, ApiError> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let refuse = |reason| {
                Err(ApiError::Header {
                    name: name.clone(),
                    reason,
                })
            };
            let Ok(header) = HeaderName::from_bytes(name.as_bytes()) else {
                return refuse("it is not a header name");
            };
            if FORBIDDEN_HEADERS.contains(&header.as_str()) {
                return refuse("callers may not set it");
            }
            if self
                .key_header()
                .is_some_and(|key| key.eq_ignore_ascii_case(header.as_str()))
            {
                return refuse("it carries the connection's key");
            }
            if self.static_headers.contains_key(&header) {
                return refuse("the connection sets it");
            }
            let Ok(value) = HeaderValue::from_str(value) else {
                return refuse("its value contains a control character");
            };
            map.append(header, value);
        }
        Ok(map)
    }

    /// The request builder for a checked request, credentials added last so no
    /// caller header can replace them.
    fn build(
        &self,
        method: Method,
        mut url: Url,
        mut headers: HeaderMap,
        body: Option<&RequestBody>,
        token: Option<&str>,
    ) -> reqwest::RequestBuilder {
        if let Some(propagate) = self.propagate {
            propagate(&mut headers);
        }
        if let ApiAuth::QueryKey { parameter, value } = &self.auth {
            url.query_pairs_mut().append_pair(parameter, value);
        }
        let has_content_type = headers.contains_key(reqwest::header::CONTENT_TYPE);
        let mut request = self.http.request(method, url).headers(headers);
        for (name, value) in &self.static_headers {
            request = request.header(name, value);
        }
        match body {
            Some(RequestBody::Json(value)) => {
                if !has_content_type {
                    request = request.header(reqwest::header::CONTENT_TYPE, "application/json");
                }
                request = request.body(value.to_string());
            }
            Some(RequestBody::Text(text)) => {
                if !has_content_type {
                    request =
                        request.header(reqwest::header::CONTENT_TYPE, "text/plain; charset=utf-8");
                }
                request = request.body(text.clone());
            }
            None => {}
        }
        match &self.auth {
            ApiAuth::None | ApiAuth::QueryKey { .. } => request,
            ApiAuth::ClientCredentials(_) => match token {
                Some(token) => request.bearer_auth(token),
                None => request,
            },
            ApiAuth::Bearer { token } => request.bearer_auth(token),
            ApiAuth::Basic { username, password } => request.basic_auth(username, Some(password)),
            ApiAuth::HeaderKey { header, value } => request.header(header.as_str(), value.as_str()),
        }
    }

    /// Sends `request` and waits for the response's headers (within the call
    /// timeout), or for `cancel`.
    async fn send(
        &self,
        request: &ApiRequest,
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, ApiError> {
        let (method, url, headers) = self.check(request)?;
        let token = self.upstream_token(cancel).await?;
        let span = self.client_span(&method);
        let builder = span.in_scope(|| {
            self.build(
                method,
                url,
                headers,
                request.body.as_ref(),
                token.as_deref(),
            )
        });
        let response = self
            .send_built(builder, cancel, &span)
            .instrument(span.clone())
            .await?;
        self.refused_token(&response, token.as_deref());
        Ok(response)
    }

    /// Forgets a token the API answered 401 to, so the next call fetches one.
    fn refused_token(&self, response: &reqwest::Response, token: Option<&str>) {
        if response.status() == reqwest::StatusCode::UNAUTHORIZED
            && let (Some(tokens), Some(token)) = (&self.tokens, token)
        {
            tokens.forget(token);
        }
    }

    /// The client span of one request: its method and the upstream's host and
    /// port, never its path or query (they carry the caller's arguments).
    fn client_span(&self, method: &Method) -> tracing::Span {
        let (address, port) = crate::trace::server_of(&self.base);
        tracing::info_span!(
            "http",
            otel.name = method.as_str(),
            otel.kind = "client",
            "http.request.method" = method.as_str(),
            "server.address" = address,
            "server.port" = i64::from(port),
            "http.response.status_code" = tracing::field::Empty,
            "error.type" = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        )
    }

    /// Posts `body` as JSON to the base URL itself (a GraphQL endpoint).
    pub(crate) async fn post_json_to_base(
        &self,
        body: &Value,
        cancel: &CancellationToken,
    ) -> Result<reqwest::Response, ApiError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            reqwest::header::ACCEPT,
            HeaderValue::from_static("application/graphql-response+json, application/json"),
        );
        let token = self.upstream_token(cancel).await?;
        let span = self.client_span(&Method::POST);
        let builder = span.in_scope(|| {
            self.build(
                Method::POST,
                self.base.clone(),
                headers,
                Some(&RequestBody::Json(body.clone())),
                token.as_deref(),
            )
        });
        let response = self
            .send_built(builder, cancel, &span)
            .instrument(span.clone())
            .await?;
        self.refused_token(&response, token.as_deref());
        Ok(response)
    }

    async fn send_built(
        &self,
        builder: reqwest::RequestBuilder,
        cancel: &CancellationToken,
        span: &tracing::Span,
    ) -> Result<reqwest::Response, ApiError> {
        let sent = tokio::time::timeout(self.call_timeout, builder.send());
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => Err(ApiError::Cancelled),
            sent = sent => match sent {
                Ok(Ok(response)) => Ok(response),
                Ok(Err(error)) => Err(self.transport(&error)),
                Err(_) => Err(ApiError::Timeout { after: self.call_timeout }),
            },
        };
        let error_type = match &outcome {
            Ok(response) => {
                let status = response.status();
                span.record("http.response.status_code", i64::from(status.as_u16()));
                (status.is_client_error() || status.is_server_error())
                    .then(|| status.as_str().to_owned())
            }
            Err(ApiError::Cancelled) => Some("cancelled".to_owned()),
            Err(ApiError::Timeout { .. }) => Some("timeout".to_owned()),
            Err(_) => Some("transport".to_owned()),
        };
        if let Some(error_type) = error_type {
            span.record("error.type", error_type.as_str());
            span.record("otel.status_code", "error");
        }
        outcome
    }

    /// A transport error as text without the URL (which may carry a query key).
    fn transport(&self, error: &reqwest::Error) -> ApiError {
        let mut message = if error.is_connect() {
            "could not connect".to_owned()
        } else if error.is_timeout() {
            "the exchange timed out".to_owned()
        } else if error.is_body() || error.is_decode() {
            "the response body broke off".to_owned()
        } else {
            "the request failed".to_owned()
        };
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        ApiError::Transport {
            message: self.scrub(&message),
        }
    }

    /// Sends `request` and reads the response into memory, at most `cap` bytes of
    /// its body: a longer body is cut there and marked truncated (the rest is not
    /// read). The whole exchange runs within the call timeout.
    ///
    /// # Errors
    /// A refused request ([`ApiClient::check`]), [`ApiError::Transport`],
    /// [`ApiError::Timeout`] or [`ApiError::Cancelled`].
    pub async fn fetch(
        &self,
        request: &ApiRequest,
        cap: u64,
        cancel: &CancellationToken,
    ) -> Result<ApiResponse, ApiError> {
        let exchange = async {
            let response = self.send(request, cancel).await?;
            self.read_capped(response, cap, cancel).await
        };
        match tokio::time::timeout(self.call_timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(ApiError::Timeout {
                after: self.call_timeout,
            }),
        }
    }

    /// [`ApiClient::fetch`], but a body longer than `cap` is not dropped past the
    /// cut: what follows is handed back as a [`BodyRest`] to read on, unscrubbed
    /// (the caller scrubs it, as it scrubs the cut part). Only the exchange up to
    /// the cut runs within the call timeout; the reader of the rest sets its own.
    ///
    /// # Errors
    /// As [`ApiClient::fetch`].
    pub async fn fetch_continuing(
        &self,
        request: &ApiRequest,
        cap: u64,
        cancel: &CancellationToken,
    ) -> Result<(ApiResponse, Option<BodyRest>), ApiError> {
        let exchange = async {
            let response = self.send(request, cancel).await?;
            self.read_capped_keeping_rest(response, cap, cancel).await
        };
        match tokio::time::timeout(self.call_timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(ApiError::Timeout {
                after: self.call_timeout,
            }),
        }
    }

    pub(crate) async fn read_capped(
        &self,
        response: reqwest::Response,
        cap: u64,
        cancel: &CancellationToken,
    ) -> Result<ApiResponse, ApiError> {
        // The rest, when there is one, is dropped with its connection.
        self.read_capped_keeping_rest(response, cap, cancel)
            .await
            .map(|(response, _)| response)
    }

    async fn read_capped_keeping_rest(
        &self,
        mut response: reqwest::Response,
        cap: u64,
        cancel: &CancellationToken,
    ) -> Result<(ApiResponse, Option<BodyRest>), ApiError> {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let mut body = BytesMut::new();
        let mut rest = None;
        let cap = usize::try_from(cap).unwrap_or(usize::MAX);
        loop {
            let chunk = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(ApiError::Cancelled),
                chunk = response.chunk() => chunk.map_err(|error| self.transport(&error))?,
            };
            let Some(chunk) = chunk else { break };
            let room = cap.saturating_sub(body.len());
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                rest = Some(BodyRest {
                    pending: Some(chunk.slice(room..)),
                    response,
                    client: self.clone(),
                });
                break;
            }
            body.extend_from_slice(&chunk);
        }
        let response = ApiResponse {
            status,
            headers,
            body: body.freeze(),
            truncated: rest.is_some(),
        };
        Ok((response, rest))
    }
}

/// The rest of a response body past the cut [`ApiClient::fetch_continuing`] made,
/// read on chunk by chunk. Dropping it closes the connection.
pub struct BodyRest {
    response: reqwest::Response,
    /// The part of the chunk that crossed the cut.
    pending: Option<Bytes>,
    client: ApiClient,
}

impl fmt::Debug for BodyRest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyRest").finish_non_exhaustive()
    }
}

impl BodyRest {
    /// The next bytes of the body, `None` at its end.
    ///
    /// # Errors
    /// [`ApiError::Transport`] when the body breaks off.
    pub async fn next_chunk(&mut self) -> Result<Option<Bytes>, ApiError> {
        if let Some(pending) = self.pending.take() {
            return Ok(Some(pending));
        }
        self.response
            .chunk()
            .await
            .map_err(|error| self.client.transport(&error))
    }
}

/// A response read into memory by [`ApiClient::fetch`].
#[derive(Clone, Debug)]
pub struct ApiResponse {
    /// The HTTP status.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body, or its first `cap` bytes.
    pub body: Bytes,
    /// Whether the body was longer than the cap.
    pub truncated: bool,
}

impl ApiResponse {
    /// The declared content type without parameters, lower case.
    #[must_use]
    pub fn content_type(&self) -> Option<String> {
        declared_content_type(&self.headers)
    }
}

fn parse_method(method: &str) -> Result<Method, ApiError> {
    let valid = !method.is_empty()
        && method.len() <= 20
        && method.bytes().all(|byte| byte.is_ascii_uppercase());
    if !valid {
        return Err(ApiError::Method {
            method: method.to_owned(),
        });
    }
    Method::from_bytes(method.as_bytes()).map_err(|_| ApiError::Method {
        method: method.to_owned(),
    })
}

/// Checks a caller's path; see [`normalize_path`], whose form is what every rule
/// matches and what is sent.
///
/// # Errors
/// [`ApiError::Path`] saying which rule it breaks.
pub fn check_path(path: &str) -> Result<(), ApiError> {
    normalize_path(path).map(drop)
}

/// Characters a path carries as they are: RFC 3986's unreserved characters, the
/// sub-delimiters, `:` and the `/` between segments.
fn is_plain_path_byte(byte: u8) -> bool {
    is_unreserved(byte) || b"!$&'()*+,;=:/".contains(&byte)
}

fn is_unreserved(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"-._~".contains(&byte)
}

/// The one form of a caller's path that every rule (the connection's `paths`, a
/// persona's `api_routes`) matches and that is sent upstream: percent-escapes of
/// unreserved characters decoded (`%69` is `i`), every other escape in upper case
/// (a reserved character and its escape stay different paths, as RFC 3986 says),
/// and characters a path cannot carry (a space, non-ASCII) escaped.
///
/// Refused: a path that does not start with `/` (an absolute URL, say); an empty
/// (`//`), `.` or `..` segment, however encoded; `@`, a backslash, `?` or `#`, raw or
/// encoded (query parameters go in the query); an encoded `/` or `%` (a separator or
/// a second round of decoding upstream could change what the rules saw); a control
/// character (CR, LF, NUL), raw or encoded; a malformed escape; more than
/// [`MAX_PATH_BYTES`].
///
/// # Errors
/// [`ApiError::Path`] saying which rule it breaks.
pub fn normalize_path(path: &str) -> Result<String, ApiError> {
    let refuse = |reason: &str| {
        Err(ApiError::Path {
            reason: reason.to_owned(),
        })
    };
    if path.len() > MAX_PATH_BYTES {
        return refuse("it is longer than 2048 bytes");
    }
    if !path.starts_with('/') {
        return refuse("it must start with / (a path below the connection, not a URL)");
    }
    let bytes = path.as_bytes();
    let mut normal = String::with_capacity(path.len());
    let mut index = 0;
    while index < bytes.len() {
        let byte = bytes[index];
        let (value, encoded) = if byte == b'%' {
            let hex = bytes
                .get(index + 1..index + 3)
                .and_then(|pair| std::str::from_utf8(pair).ok())
                .and_then(|pair| u8::from_str_radix(pair, 16).ok());
            let Some(value) = hex else {
                return refuse("it contains a malformed percent escape");
            };
            index += 3;
            (value, true)
        } else {
            index += 1;
            (byte, false)
        };
        match value {
            0..=0x1f | 0x7f => return refuse("it contains a control character"),
            b'@' => return refuse("it contains @"),
            b'\\' => return refuse("it contains a backslash"),
            b'?' | b'#' => {
                return refuse("it contains ? or #; pass query parameters in query_params");
            }
            b'/' | b'%' if encoded => {
                return refuse("it contains an encoded / or %, which could be read twice");
            }
            value if is_unreserved(value) || (!encoded && is_plain_path_byte(value)) => {
                normal.push(char::from(value));
            }
            value => normal.push_str(&format!("%{value:02X}")),
        }
    }
    for segment in normal.split('/').skip(1) {
        if segment == "." || segment == ".." {
            return refuse("it contains a . or .. segment");
        }
    }
    if normal.contains("//") {
        return refuse("it contains //");
    }
    Ok(normal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_paths_are_refused() {
        for path in [
            "",
            "items",
            "https://evil.example/x",
            "//evil.example/x",
            "/a//b",
            "/a/../b",
            "/..",
            "/a/%2e%2e/b",
            "/a/.%2E/b",
            "/a/./b",
            "/user@evil.example",
            "/a\r\nX-Injected: 1",
            "/a\nb",
            "/a\0b",
            "/a%0d%0ab",
            "/a%00",
            "/a%2fb",
            "/a\\b",
            "/a?b=c",
            "/a#frag",
        ] {
            assert!(check_path(path).is_err(), "{path:?} was accepted");
        }
        for path in [
            "/",
            "/items",
            "/items/42",
            "/a-b_c.d/e~f",
            "/search%20x",
            "/v1.2/x",
        ] {
            assert!(check_path(path).is_ok(), "{path:?} was refused");
        }
        assert!(check_path(&format!("/{}", "a".repeat(MAX_PATH_BYTES))).is_err());
    }

    #[test]
    fn paths_have_one_form() {
        for (path, normal) in [
            ("/items/%69nternal", "/items/internal"),
            ("/items/%69%6E%74ernal/x", "/items/internal/x"),
            ("/%7e/%2D", "/~/-"),
            ("/search%20x", "/search%20x"),
            ("/search x", "/search%20x"),
            ("/caf\u{e9}", "/caf%C3%A9"),
            ("/a%3ab", "/a%3Ab"),
            ("/a:b;c=d", "/a:b;c=d"),
        ] {
            assert_eq!(
                normalize_path(path).ok().as_deref(),
                Some(normal),
                "{path:?}"
            );
        }
        for path in [
            "/a/%2e%2E/b",
            "/a/%2E",
            "/a%2Fb",
            "/a%25b",
            "/a%40b",
            "/a%3Fb",
            "/a%23b",
            "/a%5cb",
            "/a%zzb",
            "/a%2",
            "/a%7f",
            "/a%09b",
        ] {
            assert!(normalize_path(path).is_err(), "{path:?} was accepted");
        }
    }

    /// Every way of writing a character of a path that means that character: escaped
    /// in lower or upper case, and, for an unreserved character, as it is. (A reserved
    /// character and its escape are different paths, RFC 3986 §6.2.2.2.)
    fn spellings(byte: u8) -> Vec<String> {
        let mut ways = vec![format!("%{byte:02x}"), format!("%{byte:02X}")];
        if is_unreserved(byte) {
            ways.push(char::from(byte).to_string());
        }
        ways
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// However a path is spelled, it has one normal form; that form is its own
        /// normal form, and holds no way to leave the base path or split a segment.
        #[test]
        fn every_spelling_of_a_path_normalises_alike(
            segments in proptest::collection::vec(
                proptest::collection::vec(
                    (proptest::sample::select(b"abcxyzABC019-._~!$&'()*+,;=: ".to_vec()), 0usize..3),
                    1..6,
                ),
                1..5,
            ),
        ) {
            let plain: String = segments
                .iter()
                .map(|segment| {
                    let text: String = segment.iter().map(|(byte, _)| spellings(*byte)[0].clone()).collect();
                    format!("/{text}")
                })
                .collect();
            let spelled: String = segments
                .iter()
                .map(|segment| {
                    let text: String = segment
                        .iter()
                        .map(|(byte, way)| {
                            let ways = spellings(*byte);
                            ways[way % ways.len()].clone()
                        })
                        .collect();
                    format!("/{text}")
                })
                .collect();
            let normal = normalize_path(&plain).ok();
            proptest::prop_assert_eq!(normalize_path(&spelled).ok(), normal.clone());
            if let Some(normal) = normal {
                proptest::prop_assert_eq!(normalize_path(&normal).ok(), Some(normal.clone()));
                proptest::prop_assert!(!normal.contains("//"));
                proptest::prop_assert!(normal.split('/').skip(1).all(|s| s != "." && s != ".."));
                let lower = normal.to_ascii_lowercase();
                proptest::prop_assert!(!lower.contains("%2f") && !lower.contains("%25"));
            }
        }

        #[test]
        fn no_text_makes_the_normaliser_panic(path in "/\\PC{0,100}") {
            let _ = normalize_path(&path);
        }
    }

    fn client(base: &str, auth: ApiAuth) -> ApiClient {
        let mut config = ApiConfig::new(base);
        config.auth = auth;
        config.static_headers = vec![("X-Tenant".into(), "acme".into())];
        ApiClient::new(config).expect("client")
    }

    #[test]
    fn urls_stay_below_the_base() {
        let client = client("https://api.example/v1/", ApiAuth::None);
        let request = ApiRequest {
            method: "GET".into(),
            path: "/items".into(),
            query: vec![("q".into(), "a b&c".into()), ("q".into(), "d".into())],
            ..ApiRequest::default()
        };
        let (method, url, _) = client.check(&request).expect("checked");
        assert_eq!(method, Method::GET);
        assert_eq!(url.as_str(), "https://api.example/v1/items?q=a+b%26c&q=d");
        for method in ["get", "G ET", "", "GET\r\n"] {
            let request = ApiRequest {
                method: method.into(),
                path: "/x".into(),
                ..ApiRequest::default()
            };
            assert!(matches!(
                client.check(&request),
                Err(ApiError::Method { .. })
            ));
        }
    }

    #[test]
    fn callers_cannot_set_credentials_or_the_connections_headers() {
        let client = client(
            "https://api.example",
            ApiAuth::HeaderKey {
                header: "X-API-Key".into(),
                value: "s3cret".into(),
            },
        );
        for name in [
            "Authorization",
            "authorization",
            "x-api-key",
            "X-Tenant",
            "Host",
            "Cookie",
        ] {
            let request = ApiRequest {
                method: "GET".into(),
                path: "/x".into(),
                headers: vec![(name.into(), "v".into())],
                ..ApiRequest::default()
            };
            assert!(
                matches!(client.check(&request), Err(ApiError::Header { .. })),
                "{name} was accepted"
            );
        }
        let injected = ApiRequest {
            method: "GET".into(),
            path: "/x".into(),
            headers: vec![("X-Ok".into(), "a\r\nAuthorization: b".into())],
            ..ApiRequest::default()
        };
        assert!(client.check(&injected).is_err());
        let query_key = client_with_query_key();
        let request = ApiRequest {
            method: "GET".into(),
            path: "/x".into(),
            query: vec![("key".into(), "mine".into())],
            ..ApiRequest::default()
        };
        assert!(matches!(
            query_key.check(&request),
            Err(ApiError::Query { .. })
        ));
    }

    fn client_with_query_key() -> ApiClient {
        client(
            "https://api.example",
            ApiAuth::QueryKey {
                parameter: "key".into(),
                value: "s3cret".into(),
            },
        )
    }

    #[test]
    fn secrets_stay_out_of_debug_output_and_scrubbed_text() {
        let client = client_with_query_key();
        assert!(!format!("{client:?}").contains("s3cret"));
        assert_eq!(client.scrub("bad key s3cret"), "bad key [REDACTED]");
        let basic = ApiAuth::Basic {
            username: "u".into(),
            password: "pw-123".into(),
        };
        assert!(!format!("{basic:?}").contains("pw-123"));
    }

    #[test]
    fn a_caller_cannot_take_over_the_connections_headers() {
        let client = client(
            "https://api.example",
            ApiAuth::HeaderKey {
                header: "X-API-Key".into(),
                value: "s3cret".into(),
            },
        );
        let with = |name: &str, value: &str| {
            client.with_caller(CallerAuth {
                bearer: None,
                headers: vec![(name.into(), value.into())],
            })
        };
        for (name, value) in [
            ("Authorization", "x"),
            ("host", "x"),
            ("Content-Type", "x"),
            ("X-API-Key", "x"),
            ("X-Tenant", "x"),
            ("Bad Name", "x"),
            ("X-User", "a\r\nX-Injected: 1"),
        ] {
            assert!(
                matches!(with(name, value), Err(ApiError::Header { .. })),
                "{name}: {value:?} was accepted"
            );
        }
        let twice = client.with_caller(CallerAuth {
            bearer: None,
            headers: vec![("X-User".into(), "a".into()), ("x-user".into(), "b".into())],
        });
        assert!(matches!(twice, Err(ApiError::Header { .. })));
        for token in ["", "a\nb"] {
            let bad = client.with_caller(CallerAuth {
                bearer: Some(token.into()),
                headers: Vec::new(),
            });
            assert!(matches!(bad, Err(ApiError::Header { .. })), "{token:?}");
        }

        let caller = client
            .with_caller(CallerAuth {
                bearer: Some("caller-tok".into()),
                headers: vec![("X-User".into(), "alice".into())],
            })
            .expect("caller client");
        assert_eq!(caller.auth_kind(), "bearer");
        assert_eq!(caller.key_header(), None);
        assert_eq!(caller.scrub("s3cret caller-tok"), "[REDACTED] [REDACTED]");
        assert_eq!(client.scrub("caller-tok"), "caller-tok");
        assert!(!format!("{caller:?}").contains("caller-tok"));
        let request = ApiRequest {
            method: "GET".into(),
            path: "/x".into(),
            headers: vec![("X-User".into(), "mallory".into())],
            ..ApiRequest::default()
        };
        assert!(matches!(
            caller.check(&request),
            Err(ApiError::Header {
                reason: "the connection sets it",
                ..
            })
        ));
        let auth = CallerAuth {
            bearer: Some("caller-tok".into()),
            headers: vec![("X-User".into(), "alice@example.com".into())],
        };
        let shown = format!("{auth:?}");
        assert!(
            !shown.contains("caller-tok") && !shown.contains("alice"),
            "{shown}"
        );
    }

    #[test]
    fn bad_base_urls_are_refused() {
        for base in [
            "ftp://x",
            "not a url",
            "https://user:pw@api.example",
            "https://api.example/?a=b",
        ] {
            assert!(ApiClient::new(ApiConfig::new(base)).is_err(), "{base}");
        }
    }
}
