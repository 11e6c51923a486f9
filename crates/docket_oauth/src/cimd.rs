//! Client ID Metadata Documents: a client whose `client_id` is an https URL
//! is described by the JSON document at that URL.
//!
//! The fetch goes through an SSRF guard: the host is resolved here and every
//! loopback, private, link-local, unique-local, CGNAT, multicast, unspecified,
//! documentation and reserved address is refused (unless the host is in
//! `allowed_hosts`); the connection goes to a checked address (the resolver
//! reqwest uses is the guard, so a second lookup cannot rebind); redirects are
//! not followed; the fetch has a timeout; at most `max_bytes` are read; only
//! JSON is accepted; at most [`MAX_FETCHES`] run at once. Documents are
//! cached per replica for their `Cache-Control: max-age`, at least a minute
//! and at most a day, and at most [`MAX_CACHED`] of them.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use reqwest::Url;
use serde_json::Value;

use crate::config::MetadataDocumentConfig;
use crate::redirect::{MAX_REDIRECT_URIS, check_native, check_web};

/// The most documents cached per replica.
pub const MAX_CACHED: usize = 1000;

/// The most documents fetched at once per replica.
pub const MAX_FETCHES: usize = 16;

/// The shortest time a document is cached.
pub const MIN_CACHE: Duration = Duration::from_secs(60);

/// The longest time a document is cached.
pub const MAX_CACHE: Duration = Duration::from_secs(86_400);

/// The most bytes of a client's name.
pub const MAX_NAME_BYTES: usize = 200;

/// Why a metadata document was not accepted; the message is safe to show.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentError {
    /// The URL cannot name a document.
    #[error("the client_id is not a usable metadata document URL: {0}")]
    Url(String),
    /// The host resolves to an address the guard refuses.
    #[error(
        "the client's metadata document is at a private or reserved address ({0}), which is not fetched"
    )]
    Forbidden(String),
    /// The fetch failed (connection, timeout, status, redirect).
    #[error("the client's metadata document could not be fetched: {0}")]
    Fetch(String),
    /// The answer is larger than `max_bytes`.
    #[error("the client's metadata document is over {0} bytes")]
    TooLarge(usize),
    /// The document breaks a rule.
    #[error("the client's metadata document is invalid: {0}")]
    Invalid(String),
}

/// What Docket uses of a metadata document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientDocument {
    /// The URL, equal to the document's `client_id`.
    pub client_id: String,
    /// Its redirect URIs.
    pub redirect_uris: Vec<String>,
    /// Its `client_name`, if any.
    pub client_name: Option<String>,
    /// Whether every redirect URI is a native one (loopback or private-use).
    pub native: bool,
}

/// Checks that `url` may name a metadata document: https, a host, a path
/// other than `/`, no query, fragment, user name or dot segments.
///
/// # Errors
/// [`DocumentError::Url`].
pub fn check_document_url(url: &str) -> Result<Url, DocumentError> {
    let bad = |why: &str| DocumentError::Url(why.to_owned());
    if url.len() > crate::store::MAX_KEY_BYTES {
        return Err(bad("it is over 2048 bytes"));
    }
    let parsed = Url::parse(url).map_err(|_| bad("it is not an absolute URL"))?;
    if parsed.scheme() != "https" {
        return Err(bad("it is not https"));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(bad("it has no host"));
    }
    if parsed.path() == "/" || parsed.path().is_empty() {
        return Err(bad("it has no path"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() || url.contains(['?', '#']) {
        return Err(bad("it has a query or a fragment"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("it has a user name"));
    }
    if parsed.as_str() != url {
        return Err(bad(
            "it is not in normal form (dot segments, case, escapes)",
        ));
    }
    Ok(parsed)
}

/// Reads a document fetched from `url`.
///
/// # Errors
/// [`DocumentError::Invalid`] unless it is a JSON object whose `client_id` is
/// `url`, with 1 to 10 https or native redirect URIs, no secret, and
/// `token_endpoint_auth_method` absent or `none`.
pub fn parse_document(url: &str, body: &[u8]) -> Result<ClientDocument, DocumentError> {
    let bad = |why: String| DocumentError::Invalid(why);
    let value: Value =
        serde_json::from_slice(body).map_err(|_| bad("it is not JSON".to_owned()))?;
    let Value::Object(document) = value else {
        return Err(bad("it is not a JSON object".to_owned()));
    };
    match document.get("client_id") {
        Some(Value::String(id)) if id == url => {}
        Some(Value::String(_)) => {
            return Err(bad(
                "its client_id is not the URL it was fetched from".to_owned()
            ));
        }
        _ => return Err(bad("it has no client_id".to_owned())),
    }
    if document.contains_key("client_secret") || document.contains_key("client_secret_expires_at") {
        return Err(bad("it carries a client secret".to_owned()));
    }
    match document.get("token_endpoint_auth_method") {
        None => {}
        Some(Value::String(method)) if method == "none" => {}
        Some(_) => {
            return Err(bad(
                "its token_endpoint_auth_method is not none (only public clients are named by documents)".to_owned(),
            ));
        }
    }
    if let Some(grants) = document.get("grant_types") {
        let allowed =
            |grant: &Value| matches!(grant.as_str(), Some("authorization_code" | "refresh_token"));
        if !grants
            .as_array()
            .is_some_and(|grants| grants.iter().all(allowed))
        {
            return Err(bad(
                "its grant_types may only be authorization_code and refresh_token".to_owned(),
            ));
        }
    }
    if !only_code_responses(document.get("response_types")) {
        return Err(bad("its response_types may only be code".to_owned()));
    }
    let Some(Value::Array(uris)) = document.get("redirect_uris") else {
        return Err(bad("it has no redirect_uris array".to_owned()));
    };
    if uris.is_empty() || uris.len() > MAX_REDIRECT_URIS {
        return Err(bad(format!(
            "it has 1 to {MAX_REDIRECT_URIS} redirect_uris, not {}",
            uris.len()
        )));
    }
    let mut redirect_uris = Vec::with_capacity(uris.len());
    let mut native = true;
    for uri in uris {
        let Some(uri) = uri.as_str() else {
            return Err(bad("its redirect_uris are strings".to_owned()));
        };
        if check_native(uri).is_err() {
            native = false;
            check_web(uri).map_err(|why| bad(format!("redirect_uris: {why}")))?;
        }
        redirect_uris.push(uri.to_owned());
    }
    let client_name = read_client_name(document.get("client_name")).map_err(bad)?;
    Ok(ClientDocument {
        client_id: url.to_owned(),
        redirect_uris,
        client_name,
        native,
    })
}

/// A client's `client_name` (absent, or 1 to [`MAX_NAME_BYTES`] bytes, trimmed).
///
/// # Errors
/// Why it is not usable.
pub fn read_client_name(value: Option<&Value>) -> Result<Option<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name)) if name.len() <= MAX_NAME_BYTES && !name.trim().is_empty() => {
            Ok(Some(name.trim().to_owned()))
        }
        Some(_) => Err(format!(
            "client_name is a string of 1 to {MAX_NAME_BYTES} bytes"
        )),
    }
}

/// Whether a client's `response_types` is absent or only `code`.
#[must_use]
pub fn only_code_responses(value: Option<&Value>) -> bool {
    value.is_none_or(|types| {
        types
            .as_array()
            .is_some_and(|types| !types.is_empty() && types.iter().all(|kind| kind == "code"))
    })
}

/// Whether the guard refuses to connect to `ip`.
#[must_use]
pub fn is_forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return forbidden_v4(v4);
            }
            let segments = v6.segments();
            // NAT64 (64:ff9b::/96) embeds an IPv4 address.
            if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                let [a, b] = segments[6].to_be_bytes();
                let [c, d] = segments[7].to_be_bytes();
                return forbidden_v4(Ipv4Addr::new(a, b, c, d));
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (segments[0] & 0xfe00) == 0xfc00 // unique local
                || (segments[0] & 0xffc0) == 0xfe80 // link local
                || (segments[0] & 0xffc0) == 0xfec0 // site local (deprecated)
                || (segments[0] == 0x2001 && segments[1] == 0x0db8) // documentation
                || (segments[0] == 0x2001 && segments[1] < 0x0200) // IETF protocol assignments
                || segments[0] == 0x2002 // 6to4
                || segments[..7] == [0, 0, 0, 0, 0, 0, 0] // IPv4-compatible, deprecated
                || segments[..4] == [0x0100, 0, 0, 0] // discard only
        }
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        || (a == 100 && (64..128).contains(&b)) // CGNAT
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || a >= 240 // reserved
}

/// The resolver reqwest connects through: it drops the addresses the guard
/// refuses, so the connection goes to a checked one. Other outbound fetches of
/// URLs Docket is given (OpenAPI catalogs) connect through it too.
#[derive(Clone, Debug)]
pub struct GuardedResolver {
    allowed_hosts: Arc<Vec<String>>,
}

impl GuardedResolver {
    /// A resolver that refuses private, loopback and other non-public
    /// addresses ([`is_forbidden`]) for every host but `allowed_hosts`.
    #[must_use]
    pub fn new(allowed_hosts: Vec<String>) -> Self {
        Self {
            allowed_hosts: Arc::new(allowed_hosts),
        }
    }

    /// Refuses a URL host that is a forbidden IP literal (literals never reach
    /// a resolver), unless it is allowed.
    ///
    /// # Errors
    /// Why the host is refused.
    pub fn check_literal(&self, host: &str) -> Result<(), String> {
        if is_allowed(host, &self.allowed_hosts) {
            return Ok(());
        }
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<IpAddr>() {
            Ok(ip) if is_forbidden(ip) => Err(format!(
                "{ip} is not a public address (allow the host to reach it)"
            )),
            _ => Ok(()),
        }
    }
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let allowed = self.allowed_hosts.clone();
        Box::pin(async move {
            let kept = resolve_checked(&host, &allowed)
                .await
                .map_err(|error| Box::new(error) as Box<dyn std::error::Error + Send + Sync>)?;
            Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

fn is_allowed(host: &str, allowed_hosts: &[String]) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    allowed_hosts
        .iter()
        .any(|allowed| allowed.eq_ignore_ascii_case(bare) || allowed.eq_ignore_ascii_case(host))
}

/// The addresses of `host` the guard lets through.
async fn resolve_checked(
    host: &str,
    allowed_hosts: &[String],
) -> Result<Vec<SocketAddr>, DocumentError> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, 443))
        .await
        .map_err(|error| DocumentError::Fetch(format!("{host} does not resolve: {error}")))?
        .take(32)
        .collect();
    if is_allowed(host, allowed_hosts) {
        return Ok(addresses);
    }
    let kept: Vec<SocketAddr> = addresses
        .iter()
        .copied()
        .filter(|address| !is_forbidden(address.ip()))
        .collect();
    match (kept.is_empty(), addresses.first()) {
        (false, _) => Ok(kept),
        (true, Some(address)) => Err(DocumentError::Forbidden(format!(
            "{host} resolves to {}",
            address.ip()
        ))),
        (true, None) => Err(DocumentError::Fetch(format!("{host} has no address"))),
    }
}

struct Cached {
    document: ClientDocument,
    until: Instant,
}

/// Fetches and caches metadata documents, per replica.
pub(crate) struct DocumentFetcher {
    http: reqwest::Client,
    config: MetadataDocumentConfig,
    cache: Mutex<HashMap<String, Cached>>,
    /// At most [`MAX_FETCHES`] fetches at once per replica.
    fetches: tokio::sync::Semaphore,
}

impl DocumentFetcher {
    pub(crate) fn new(config: &MetadataDocumentConfig) -> Result<Self, String> {
        let resolver = GuardedResolver::new(config.allowed_hosts.clone());
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(config.timeout))
            .connect_timeout(Duration::from_secs(config.timeout))
            .no_proxy()
            .dns_resolver(resolver)
            .user_agent("docket-oauth");
        if let Some(path) = &config.ca_file {
            let pem = std::fs::read(path)
                .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
            let certificate = reqwest::Certificate::from_pem(&pem)
                .map_err(|error| format!("{} is not a PEM certificate: {error}", path.display()))?;
            builder = builder.add_root_certificate(certificate);
        }
        let http = builder.build().map_err(|error| error.to_string())?;
        Ok(Self {
            http,
            config: config.clone(),
            cache: Mutex::new(HashMap::new()),
            fetches: tokio::sync::Semaphore::new(MAX_FETCHES),
        })
    }

    /// The document at `url`, from the cache or fetched now.
    pub(crate) async fn fetch(&self, url: &str) -> Result<ClientDocument, DocumentError> {
        if !self.config.enabled {
            return Err(DocumentError::Url(
                "metadata documents are turned off on this server".to_owned(),
            ));
        }
        let parsed = check_document_url(url)?;
        if let Some(document) = self.cached(url) {
            return Ok(document);
        }
        let host = parsed.host_str().unwrap_or_default();
        let allowed = is_allowed(host, &self.config.allowed_hosts);
        if !allowed {
            // IP literals never reach the resolver; names are checked here for
            // a clear refusal, and again by the resolver at connect.
            let bare = host.trim_start_matches('[').trim_end_matches(']');
            match bare.parse::<IpAddr>() {
                Ok(ip) if is_forbidden(ip) => {
                    return Err(DocumentError::Forbidden(ip.to_string()));
                }
                Ok(_) => {}
                Err(_) => {
                    resolve_checked(host, &self.config.allowed_hosts).await?;
                }
            }
        }
        let wait = Duration::from_secs(self.config.timeout);
        let Ok(Ok(_permit)) = tokio::time::timeout(wait, self.fetches.acquire()).await else {
            return Err(DocumentError::Fetch(
                "too many metadata documents are being fetched; try again shortly".to_owned(),
            ));
        };
        let (document, max_age) = self.download(&parsed, url).await?;
        self.remember(url, &document, max_age);
        Ok(document)
    }

    async fn download(
        &self,
        parsed: &Url,
        url: &str,
    ) -> Result<(ClientDocument, Duration), DocumentError> {
        let limit = self.config.max_bytes;
        let mut response = self
            .http
            .get(parsed.clone())
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|error| fetch_error(&error))?;
        let status = response.status();
        if status.is_redirection() {
            return Err(DocumentError::Fetch(format!(
                "it answered {status}, a redirect, which is not followed"
            )));
        }
        if status != reqwest::StatusCode::OK {
            return Err(DocumentError::Fetch(format!("it answered {status}")));
        }
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        let essence = content_type.split(';').next().unwrap_or_default().trim();
        if essence != "application/json" && !essence.ends_with("+json") {
            return Err(DocumentError::Invalid(format!(
                "it is served as {essence:?}, not application/json"
            )));
        }
        if response
            .content_length()
            .is_some_and(|length| length > limit as u64)
        {
            return Err(DocumentError::TooLarge(limit));
        }
        let max_age = cache_lifetime(response.headers());
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| fetch_error(&error))?
        {
            if body.len() + chunk.len() > limit {
                return Err(DocumentError::TooLarge(limit));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((parse_document(url, &body)?, max_age))
    }

    fn cached(&self, url: &str) -> Option<ClientDocument> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache
            .get(url)
            .filter(|cached| cached.until > Instant::now())
            .map(|cached| cached.document.clone())
    }

    fn remember(&self, url: &str, document: &ClientDocument, max_age: Duration) {
        let now = Instant::now();
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= MAX_CACHED && !cache.contains_key(url) {
            cache.retain(|_, cached| cached.until > now);
            if cache.len() >= MAX_CACHED
                && let Some(soonest) = cache
                    .iter()
                    .min_by_key(|(_, cached)| cached.until)
                    .map(|(key, _)| key.clone())
            {
                cache.remove(&soonest);
            }
        }
        cache.insert(
            url.to_owned(),
            Cached {
                document: document.clone(),
                until: now + max_age,
            },
        );
    }
}

/// A reqwest failure as a refusal: the guard's own refusal when that is the cause.
fn fetch_error(error: &reqwest::Error) -> DocumentError {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    let mut innermost = String::new();
    while let Some(cause) = source {
        if let Some(refusal) = cause.downcast_ref::<DocumentError>() {
            return refusal.clone();
        }
        innermost = cause.to_string();
        source = cause.source();
    }
    if error.is_timeout() {
        return DocumentError::Fetch("it did not answer in time".to_owned());
    }
    // The innermost cause says what an operator needs (a refused connection,
    // an untrusted certificate); it holds no secret.
    let cause = crate::params::cut(&innermost, 200);
    DocumentError::Fetch(if error.is_connect() {
        format!("the connection failed ({cause})")
    } else {
        format!("the request failed ({cause})")
    })
}

/// How long a document may be cached per its `Cache-Control`, within
/// [`MIN_CACHE`] and [`MAX_CACHE`].
#[must_use]
pub fn cache_lifetime(headers: &http::HeaderMap) -> Duration {
    let max_age = headers
        .get_all(http::header::CACHE_CONTROL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .find_map(|directive| {
            let (name, value) = directive.trim().split_once('=')?;
            name.trim()
                .eq_ignore_ascii_case("max-age")
                .then(|| value.trim().trim_matches('"').parse::<u64>().ok())
                .flatten()
        })
        .unwrap_or(0);
    Duration::from_secs(max_age).clamp(MIN_CACHE, MAX_CACHE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_refuses_private_and_reserved_addresses() {
        for address in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.51.100.1",
            "203.0.113.9",
            "::1",
            "::",
            "fc00::1",
            "fd12::1",
            "fe80::1",
            "ff02::1",
            "2001:db8::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
        ] {
            let ip: IpAddr = address.parse().expect("an address");
            assert!(is_forbidden(ip), "{address} is refused");
        }
        for address in ["93.184.216.34", "2606:4700::1111", "1.1.1.1"] {
            let ip: IpAddr = address.parse().expect("an address");
            assert!(!is_forbidden(ip), "{address} is allowed");
        }
    }

    #[test]
    fn documents_name_themselves() {
        let url = "https://app.example.com/oauth/client.json";
        let body = serde_json::json!({
            "client_id": url, "client_name": "App",
            "redirect_uris": ["http://127.0.0.1/callback"],
        });
        let document = parse_document(url, body.to_string().as_bytes()).expect("valid");
        assert!(document.native);
        let other = serde_json::json!({"client_id": "https://evil.example/x", "redirect_uris": ["https://a.example/cb"]});
        assert!(parse_document(url, other.to_string().as_bytes()).is_err());
        assert!(check_document_url("https://app.example.com/").is_err());
        assert!(check_document_url("https://app.example.com/a/../b").is_err());
        assert!(check_document_url("http://app.example.com/a").is_err());
    }
}
