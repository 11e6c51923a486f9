//! The OpenAPI catalogs of `api` connections (`openapi:` on a connection, the
//! `catalogs:` section): each document a connection names — a file, or an
//! `http(s)` URL — is one `Source`, shared by every connection that names
//! it. A file is read and checked when the server starts, so a broken one stops
//! the start with the line it is wrong on. A URL below the connection's own
//! base URL is fetched through the connection (its credentials, its client
//! certificate: an API usually guards its document as it guards itself); any
//! other URL through the SSRF guard (`docket_oauth::cimd::GuardedResolver`:
//! no private, loopback or link-local address unless its host is in
//! `catalogs.allowed_hosts`). Either way on first use, capped at
//! `catalogs.max_bytes`, no redirects, and again once it is older than
//! `catalogs.refresh`, with `If-None-Match` when it had an `ETag`; a failed
//! refresh keeps the version it had. Each parse is a new
//! [`Catalog`] whose version (the digest of its bytes) the tools report.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use docket_openapi::Catalog;
use serde::Deserialize;

use crate::config::{deserialize_bytes, deserialize_duration};

/// The `catalogs:` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogsConfig {
    /// The largest document read, in bytes.
    #[serde(deserialize_with = "deserialize_bytes")]
    pub max_bytes: u64,
    /// How long a fetched document is used before it is fetched again.
    #[serde(deserialize_with = "deserialize_duration")]
    pub refresh: Duration,
    /// How long fetching one may take.
    #[serde(deserialize_with = "deserialize_duration")]
    pub timeout: Duration,
    /// Hosts a document may be fetched from even at a private address.
    pub allowed_hosts: Vec<String>,
}

impl Default for CatalogsConfig {
    fn default() -> Self {
        Self {
            max_bytes: 8 << 20,
            refresh: Duration::from_secs(3600),
            timeout: Duration::from_secs(30),
            allowed_hosts: Vec::new(),
        }
    }
}

impl CatalogsConfig {
    /// Every problem of the section.
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let most = docket_openapi::MAX_DOCUMENT_BYTES as u64;
        if self.max_bytes == 0 || self.max_bytes > most {
            problems.push(format!(
                "catalogs.max_bytes: must be 1 byte to {} MiB",
                most >> 20
            ));
        }
        if self.refresh < Duration::from_secs(1) {
            problems.push("catalogs.refresh: must be at least 1s".to_owned());
        }
        if self.timeout.is_zero() {
            problems.push("catalogs.timeout: must be greater than zero".to_owned());
        }
        problems
    }
}

/// Where a document comes from.
#[derive(Clone, Debug)]
enum Origin {
    File(std::path::PathBuf),
    Url(reqwest::Url),
    /// A path below a connection's base URL, fetched through its client.
    Connection(Box<docket_export::api::ApiClient>, String),
}

/// What [`Catalogs::load`] reads of one connection.
pub(crate) struct Named<'a> {
    /// The connection's name.
    pub(crate) connection: &'a str,
    /// Its `openapi:` entries.
    pub(crate) entries: &'a [String],
    /// Its client, for documents below its base URL.
    pub(crate) client: &'a docket_export::api::ApiClient,
}

/// What a fetched document is now.
struct Fetched {
    catalog: Arc<Catalog>,
    etag: Option<String>,
    at: Instant,
}

/// One document, shared by the connections that name it.
pub(crate) struct Source {
    /// As the configuration names it.
    pub(crate) name: String,
    origin: Origin,
    current: Mutex<Option<Fetched>>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

/// Every catalog, by the connection that names it.
pub(crate) struct Catalogs {
    config: CatalogsConfig,
    http: reqwest::Client,
    of_connection: BTreeMap<String, Vec<Arc<Source>>>,
}

impl std::fmt::Debug for Catalogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalogs")
            .field(
                "connections",
                &self.of_connection.keys().collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Catalogs {
    /// The catalogs `named` (connection → its `openapi:` entries), files read
    /// and checked now.
    ///
    /// # Errors
    /// Every problem: an unreadable or invalid file (with the line), a URL
    /// that is not `http(s)` or is a forbidden address.
    pub(crate) fn load(config: &CatalogsConfig, named: &[Named<'_>]) -> Result<Self, Vec<String>> {
        let resolver = docket_oauth::cimd::GuardedResolver::new(config.allowed_hosts.clone());
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .no_proxy()
            .dns_resolver(resolver.clone())
            .user_agent("docket-catalogs")
            .build()
            .map_err(|error| vec![format!("catalogs: the HTTP client: {error}")])?;
        let mut problems = Vec::new();
        let mut sources: BTreeMap<String, Arc<Source>> = BTreeMap::new();
        let mut of_connection = BTreeMap::new();
        for named in named {
            let connection = named.connection;
            let mut list = Vec::new();
            for (index, entry) in named.entries.iter().enumerate() {
                let at = format!("connections.{connection}.openapi[{index}]");
                if let Some(source) = sources.get(entry) {
                    list.push(Arc::clone(source));
                    continue;
                }
                match Source::new(entry, config, &resolver, named.client) {
                    Ok(source) => {
                        let source = Arc::new(source);
                        sources.insert(entry.clone(), Arc::clone(&source));
                        list.push(source);
                    }
                    Err(problem) => problems.push(format!("{at}: {problem}")),
                }
            }
            of_connection.insert(connection.to_owned(), list);
        }
        if problems.is_empty() {
            Ok(Self {
                config: config.clone(),
                http,
                of_connection,
            })
        } else {
            Err(problems)
        }
    }

    /// Whether `connection` names any document.
    pub(crate) fn has(&self, connection: &str) -> bool {
        self.of_connection
            .get(connection)
            .is_some_and(|sources| !sources.is_empty())
    }

    /// Whether any connection names a document.
    pub(crate) fn any(&self) -> bool {
        self.of_connection
            .values()
            .any(|sources| !sources.is_empty())
    }

    /// The catalogs of `connection`, as they are now (URLs fetched when first
    /// used or stale).
    ///
    /// # Errors
    /// Why one could not be had (a fetch that failed with nothing kept).
    pub(crate) async fn of(&self, connection: &str) -> Result<Vec<Arc<Catalog>>, String> {
        let Some(sources) = self.of_connection.get(connection) else {
            return Ok(Vec::new());
        };
        let mut catalogs = Vec::with_capacity(sources.len());
        for source in sources {
            catalogs.push(source.current(self).await?);
        }
        Ok(catalogs)
    }
}

impl Source {
    fn new(
        entry: &str,
        config: &CatalogsConfig,
        resolver: &docket_oauth::cimd::GuardedResolver,
        client: &docket_export::api::ApiClient,
    ) -> Result<Self, String> {
        let origin = if entry.starts_with("http://") || entry.starts_with("https://") {
            let url = reqwest::Url::parse(entry).map_err(|error| format!("the URL: {error}"))?;
            if !url.username().is_empty() || url.password().is_some() {
                return Err("the URL may not hold credentials".into());
            }
            if url.query().is_some() || url.fragment().is_some() {
                return Err("the URL may not have a query or fragment".into());
            }
            match below(client.base_url(), &url) {
                Some(path) => Origin::Connection(Box::new(client.clone()), path),
                None => {
                    resolver.check_literal(url.host_str().unwrap_or_default())?;
                    Origin::Url(url)
                }
            }
        } else {
            Origin::File(std::path::PathBuf::from(entry))
        };
        let source = Self {
            name: entry.to_owned(),
            origin,
            current: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
        };
        if let Origin::File(path) = &source.origin {
            let bytes = read_file(path, config.max_bytes)?;
            let catalog = Catalog::parse(entry, &bytes).map_err(|error| error.to_string())?;
            *source.lock() = Some(Fetched {
                catalog: Arc::new(catalog),
                etag: None,
                at: Instant::now(),
            });
        }
        Ok(source)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Fetched>> {
        self.current.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The catalog, fetched first when it is a URL never fetched or stale.
    async fn current(&self, catalogs: &Catalogs) -> Result<Arc<Catalog>, String> {
        let fresh = |current: &Option<Fetched>| {
            current.as_ref().and_then(|fetched| {
                let file = matches!(self.origin, Origin::File(_));
                (file || fetched.at.elapsed() < catalogs.config.refresh)
                    .then(|| Arc::clone(&fetched.catalog))
            })
        };
        if let Some(catalog) = fresh(&self.lock()) {
            return Ok(catalog);
        }
        let _one = self.fetching.lock().await;
        if let Some(catalog) = fresh(&self.lock()) {
            return Ok(catalog);
        }
        let etag = self
            .lock()
            .as_ref()
            .and_then(|fetched| fetched.etag.clone());
        let max_bytes = catalogs.config.max_bytes;
        let fetched = match &self.origin {
            Origin::File(_) => return Err(format!("the catalog {} is not loaded", self.name)),
            Origin::Url(url) => fetch(&catalogs.http, url, etag.as_deref(), max_bytes).await,
            Origin::Connection(client, path) => {
                fetch_through(client, path, etag.as_deref(), max_bytes).await
            }
        };
        match fetched {
            Ok(Fetch::Unchanged) => {
                let mut current = self.lock();
                if let Some(fetched) = current.as_mut() {
                    fetched.at = Instant::now();
                    return Ok(Arc::clone(&fetched.catalog));
                }
                Err(format!(
                    "the catalog {} answered 304 to a first fetch",
                    self.name
                ))
            }
            Ok(Fetch::Document { bytes, etag }) => {
                let catalog = Catalog::parse(&self.name, &bytes)
                    .map_err(|error| format!("the catalog {}: {error}", self.name))?;
                let catalog = Arc::new(catalog);
                *self.lock() = Some(Fetched {
                    catalog: Arc::clone(&catalog),
                    etag,
                    at: Instant::now(),
                });
                Ok(catalog)
            }
            Err(error) => {
                // A failed refresh keeps what was had; a first fetch fails.
                let current = self.lock();
                match current.as_ref() {
                    Some(fetched) => {
                        tracing::warn!(catalog = self.name, %error, "a catalog refresh failed; the version had is kept");
                        Ok(Arc::clone(&fetched.catalog))
                    }
                    None => Err(format!(
                        "the catalog {} could not be fetched: {error}",
                        self.name
                    )),
                }
            }
        }
    }
}

/// The path of `url` below `base` (same scheme, host and port, under its
/// path), if it is below it.
fn below(base: &reqwest::Url, url: &reqwest::Url) -> Option<String> {
    let base_path = base.path().trim_end_matches('/');
    let same_origin = base.scheme() == url.scheme()
        && base.host_str() == url.host_str()
        && base.port_or_known_default() == url.port_or_known_default();
    let rest = url.path().strip_prefix(base_path)?;
    (same_origin && rest.starts_with('/')).then(|| rest.to_owned())
}

/// A document below a connection's base URL, through its client.
async fn fetch_through(
    client: &docket_export::api::ApiClient,
    path: &str,
    etag: Option<&str>,
    max_bytes: u64,
) -> Result<Fetch, String> {
    let mut headers = vec![(
        "Accept".to_owned(),
        "application/json, application/yaml, text/yaml, */*".to_owned(),
    )];
    if let Some(etag) = etag {
        headers.push(("If-None-Match".to_owned(), etag.to_owned()));
    }
    let request = docket_export::api::ApiRequest {
        method: "GET".to_owned(),
        path: path.to_owned(),
        query: Vec::new(),
        headers,
        body: None,
    };
    let answer = client
        .fetch(
            &request,
            max_bytes,
            &tokio_util::sync::CancellationToken::new(),
        )
        .await
        .map_err(|error| client.scrub(&error.to_string()))?;
    match answer.status {
        304 => Ok(Fetch::Unchanged),
        200 if answer.truncated => Err(format!("it is over catalogs.max_bytes ({max_bytes})")),
        200 => Ok(Fetch::Document {
            etag: answer
                .headers
                .get(reqwest::header::ETAG)
                .and_then(|value| value.to_str().ok())
                .filter(|value| value.len() <= 256)
                .map(str::to_owned),
            bytes: answer.body.to_vec(),
        }),
        status => Err(format!("it answered HTTP {status}")),
    }
}

/// A file's bytes, at most `max_bytes`.
fn read_file(path: &std::path::Path, max_bytes: u64) -> Result<Vec<u8>, String> {
    let size = std::fs::metadata(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?
        .len();
    if size > max_bytes {
        return Err(format!(
            "{} is {size} bytes, over catalogs.max_bytes ({max_bytes})",
            path.display()
        ));
    }
    std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))
}

/// What a fetch found.
enum Fetch {
    Unchanged,
    Document {
        bytes: Vec<u8>,
        etag: Option<String>,
    },
}

async fn fetch(
    http: &reqwest::Client,
    url: &reqwest::Url,
    etag: Option<&str>,
    max_bytes: u64,
) -> Result<Fetch, String> {
    let mut request = http.get(url.clone()).header(
        reqwest::header::ACCEPT,
        "application/json, application/yaml, text/yaml, */*",
    );
    if let Some(etag) = etag {
        request = request.header(reqwest::header::IF_NONE_MATCH, etag);
    }
    let mut response = request.send().await.map_err(|error| {
        if error.is_connect() {
            "could not connect (or the address is not a public one)".to_owned()
        } else if error.is_timeout() {
            "it did not answer in time".to_owned()
        } else {
            "the exchange broke off".to_owned()
        }
    })?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_MODIFIED {
        return Ok(Fetch::Unchanged);
    }
    if status.is_redirection() {
        return Err(format!(
            "it answered {status}, a redirect, which is not followed"
        ));
    }
    if status != reqwest::StatusCode::OK {
        return Err(format!("it answered {status}"));
    }
    if response
        .content_length()
        .is_some_and(|length| length > max_bytes)
    {
        return Err(format!("it is over catalogs.max_bytes ({max_bytes})"));
    }
    let etag = response
        .headers()
        .get(reqwest::header::ETAG)
        .and_then(|value| value.to_str().ok())
        .filter(|value| value.len() <= 256)
        .map(str::to_owned);
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|_| "the document broke off".to_owned())?
    {
        if (bytes.len() + chunk.len()) as u64 > max_bytes {
            return Err(format!("it is over catalogs.max_bytes ({max_bytes})"));
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Fetch::Document { bytes, etag })
}
