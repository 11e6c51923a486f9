//! What the flow tests share: Docket's authorization server served on a
//! loopback listener (axum, the request's peer passed on), in front of the
//! real OpenID provider, and a browser-like client that follows no redirect
//! by itself, so each step is seen and checked.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, bail, ensure};
use axum::extract::{ConnectInfo, Request};
use axum::response::IntoResponse;
use docket_oauth::config::{OAuthServerConfig, UpstreamConfig};
use docket_oauth::pkce::challenge_of;
use docket_oauth::{AuthorizationServer, Event, EventKind, EventSink, MemoryStore, Site};
use docket_oidc_provider::{Account, Client, GrantType, OidcProvider, ProviderConfig};
use serde_json::Value;
use tokio::net::TcpListener;

/// Docket's client secret at the provider.
pub(crate) const UPSTREAM_SECRET: &str = "docket-upstream-secret";

/// Where a test's native client says it listens.
pub(crate) const CLIENT_REDIRECT: &str = "http://127.0.0.1/client/callback";

/// Every event the server recorded.
#[derive(Default)]
pub(crate) struct Recorder(Mutex<Vec<Event>>);

impl EventSink for Recorder {
    fn record(&self, event: Event) {
        self.0.lock().expect("events").push(event);
    }
}

impl Recorder {
    pub(crate) fn kinds(&self) -> Vec<EventKind> {
        self.0
            .lock()
            .expect("events")
            .iter()
            .map(|event| event.kind)
            .collect()
    }

    pub(crate) fn all(&self) -> Vec<Event> {
        self.0.lock().expect("events").clone()
    }
}

/// A running Docket authorization server and its provider.
pub(crate) struct Docket {
    pub(crate) base: String,
    pub(crate) server: Arc<AuthorizationServer>,
    pub(crate) store: Arc<MemoryStore>,
    pub(crate) events: Arc<Recorder>,
    pub(crate) provider: OidcProvider,
    pub(crate) http: reqwest::Client,
    /// The configuration it runs with (another replica's is the same).
    pub(crate) config: OAuthServerConfig,
    _serving: tokio::task::JoinHandle<()>,
}

impl Drop for Docket {
    fn drop(&mut self) {
        self._serving.abort();
    }
}

/// Starts the provider (alice signs in at once) and Docket in front of it,
/// with `configure` changing Docket's configuration; `None` when the
/// provider cannot run here (the test then says so and passes).
pub(crate) async fn start(
    test: &str,
    configure: impl FnOnce(&mut OAuthServerConfig),
) -> anyhow::Result<Option<Docket>> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let provider_config = ProviderConfig::new()
        .account(
            "alice",
            Account::new()
                .email("alice@example.com")
                .name("Alice Example")
                .preferred_username("alice")
                .roles(["analyst"]),
        )
        .client(
            Client::new("docket", UPSTREAM_SECRET)
                .grant_types([GrantType::AuthorizationCode, GrantType::RefreshToken])
                .redirect_uris([format!("{base}/oauth/callback")]),
        )
        .auto_login("alice");
    let Some(provider) = OidcProvider::start_or_skip(provider_config, test).await? else {
        return Ok(None);
    };
    let mut config = OAuthServerConfig {
        upstream: UpstreamConfig {
            issuer: provider.issuer(),
            client_id: "docket".to_owned(),
            client_secret: UPSTREAM_SECRET.to_owned(),
            scopes: ["openid", "email", "profile", "roles"]
                .map(str::to_owned)
                .to_vec(),
            ..UpstreamConfig::default()
        },
        ..OAuthServerConfig::default()
    };
    configure(&mut config);
    let store = Arc::new(MemoryStore::new());
    let events = Arc::new(Recorder::default());
    let server = Arc::new(AuthorizationServer::new(
        config.clone(),
        Site::at(&base),
        store.clone(),
        events.clone(),
    )?);
    let serving = tokio::spawn(serve(listener, Arc::clone(&server)));
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    Ok(Some(Docket {
        base,
        server,
        store,
        events,
        provider,
        http,
        config,
        _serving: serving,
    }))
}

async fn serve(listener: TcpListener, server: Arc<AuthorizationServer>) {
    let app = axum::Router::new().fallback(
        move |ConnectInfo(peer): ConnectInfo<SocketAddr>, request: Request| {
            let server = Arc::clone(&server);
            async move {
                let (parts, body) = request.into_parts();
                let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024 * 1024).await else {
                    return http::StatusCode::PAYLOAD_TOO_LARGE.into_response();
                };
                let answer = server
                    .handle(http::Request::from_parts(parts, bytes), peer.ip())
                    .await;
                let (parts, body) = answer.into_parts();
                http::Response::from_parts(parts, axum::body::Body::from(body)).into_response()
            }
        },
    );
    let _ = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await;
}

/// An answer as a test reads it.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) location: Option<String>,
    pub(crate) headers: http::HeaderMap,
    pub(crate) body: String,
}

impl Answer {
    pub(crate) fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_str(&self.body).with_context(|| format!("not JSON: {}", self.body))
    }

    /// The OAuth `error` of a JSON answer.
    pub(crate) fn error(&self) -> String {
        self.json()
            .ok()
            .and_then(|json| json["error"].as_str().map(str::to_owned))
            .unwrap_or_default()
    }

    /// A query parameter of the redirect's location.
    pub(crate) fn location_param(&self, name: &str) -> Option<String> {
        query_param(self.location.as_deref()?, name)
    }

    /// The value of a hidden form field of a page.
    pub(crate) fn hidden(&self, name: &str) -> Option<String> {
        let marker = format!("name=\"{name}\" value=\"");
        let start = self.body.find(&marker)? + marker.len();
        let end = self.body[start..].find('"')? + start;
        Some(self.body[start..end].to_owned())
    }
}

pub(crate) fn query_param(url: &str, name: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// A browser: keeps cookies (by name, for every port of 127.0.0.1, as a
/// browser does for one host) and follows nothing by itself.
#[derive(Default)]
pub(crate) struct Browser {
    cookies: BTreeMap<String, String>,
}

impl Browser {
    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn keep_cookies(&mut self, headers: &http::HeaderMap) {
        for value in headers.get_all(http::header::SET_COOKIE) {
            let Ok(value) = value.to_str() else { continue };
            let pair = value.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                let expired = value.is_empty()
                    || value_has_attribute(value, "max-age=0")
                    || value_has_attribute(pair, "max-age=0");
                if expired {
                    self.cookies.remove(name.trim());
                } else {
                    self.cookies
                        .insert(name.trim().to_owned(), value.to_owned());
                }
            }
        }
    }

    pub(crate) async fn get(
        &mut self,
        http: &reqwest::Client,
        url: &str,
    ) -> anyhow::Result<Answer> {
        let response = http
            .get(url)
            .header(http::header::COOKIE, self.cookie_header())
            .send()
            .await
            .with_context(|| format!("GET {url}"))?;
        self.read(url, response).await
    }

    pub(crate) async fn post_form(
        &mut self,
        http: &reqwest::Client,
        url: &str,
        form: &[(&str, &str)],
    ) -> anyhow::Result<Answer> {
        let response = http
            .post(url)
            .header(http::header::COOKIE, self.cookie_header())
            .header(
                http::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .body(encode(form))
            .send()
            .await
            .with_context(|| format!("POST {url}"))?;
        self.read(url, response).await
    }

    async fn read(&mut self, url: &str, response: reqwest::Response) -> anyhow::Result<Answer> {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        self.keep_cookies(&headers);
        let location = headers
            .get(http::header::LOCATION)
            .and_then(|value| value.to_str().ok())
            .map(|location| resolve(url, location));
        let body = response.text().await?;
        Ok(Answer {
            status,
            location,
            headers,
            body,
        })
    }

    /// Follows redirects from `url` until an answer that is not a redirect,
    /// or a redirect to `stop_at` (the client's redirect URI), which is not
    /// followed.
    pub(crate) async fn follow(
        &mut self,
        http: &reqwest::Client,
        url: &str,
        stop_at: &str,
    ) -> anyhow::Result<Answer> {
        let mut next = url.to_owned();
        for _ in 0..20 {
            let answer = self.get(http, &next).await?;
            match &answer.location {
                Some(location) if (300..400).contains(&answer.status) => {
                    if location.starts_with(stop_at) {
                        return Ok(answer);
                    }
                    next.clone_from(location);
                }
                _ => return Ok(answer),
            }
        }
        bail!("more than 20 redirects from {url}")
    }
}

fn value_has_attribute(text: &str, attribute: &str) -> bool {
    text.to_ascii_lowercase().contains(attribute)
}

fn resolve(base: &str, location: &str) -> String {
    reqwest::Url::parse(base)
        .and_then(|base| base.join(location))
        .map_or_else(|_| location.to_owned(), |url| url.to_string())
}

pub(crate) fn encode(pairs: &[(&str, &str)]) -> String {
    let mut serializer = form_urlencoded::Serializer::new(String::new());
    for (name, value) in pairs {
        serializer.append_pair(name, value);
    }
    serializer.finish()
}

/// A client's side of one authorization request.
pub(crate) struct AuthRequest {
    pub(crate) client_id: String,
    pub(crate) redirect_uri: String,
    pub(crate) state: String,
    pub(crate) verifier: String,
    pub(crate) resource: String,
}

impl AuthRequest {
    pub(crate) fn new(docket: &Docket, client_id: &str, redirect_uri: &str) -> Self {
        Self {
            client_id: client_id.to_owned(),
            redirect_uri: redirect_uri.to_owned(),
            state: format!("state-{}", rand_text()),
            verifier: format!("verifier-{}-{}", rand_text(), rand_text()),
            resource: format!("{}/mcp", docket.base),
        }
    }

    /// The `/authorize` URL, with `changes` replacing or removing (empty
    /// value) parameters.
    pub(crate) fn url(&self, docket: &Docket, changes: &[(&str, &str)]) -> String {
        let challenge = challenge_of(&self.verifier);
        let mut pairs: Vec<(&str, &str)> = vec![
            ("response_type", "code"),
            ("client_id", &self.client_id),
            ("redirect_uri", &self.redirect_uri),
            ("state", &self.state),
            ("code_challenge", &challenge),
            ("code_challenge_method", "S256"),
            ("resource", &self.resource),
            ("scope", "mcp"),
        ];
        for (name, value) in changes {
            pairs.retain(|(existing, _)| existing != name);
            if !value.is_empty() {
                pairs.push((name, value));
            }
        }
        format!("{}/oauth/authorize?{}", docket.base, encode(&pairs))
    }
}

fn rand_text() -> String {
    docket_oauth::tokens::random_text(16).expect("random")
}

/// Registers a native client by DCR; its id.
pub(crate) async fn register_native(docket: &Docket, name: &str) -> anyhow::Result<String> {
    let answer = docket
        .http
        .post(format!("{}/oauth/register", docket.base))
        .json(&serde_json::json!({
            "application_type": "native",
            "client_name": name,
            "redirect_uris": [CLIENT_REDIRECT],
        }))
        .send()
        .await?;
    ensure!(
        answer.status() == 201,
        "registration answered {}",
        answer.status()
    );
    let body: Value = answer.json().await?;
    Ok(body["client_id"]
        .as_str()
        .context("a client_id")?
        .to_owned())
}

/// Runs a request through the provider's login and (when asked) Docket's
/// consent page; the final redirect to the client.
pub(crate) async fn authorize(
    docket: &Docket,
    browser: &mut Browser,
    request: &AuthRequest,
    redirect_port: &str,
) -> anyhow::Result<Answer> {
    let stop_at = redirect_port;
    let answer = browser
        .follow(&docket.http, &request.url(docket, &[]), stop_at)
        .await?;
    if answer.status == 200 && answer.body.contains("name=\"decision\"") {
        let pending = answer
            .hidden("pending")
            .context("the consent form's pending id")?;
        let csrf = answer.hidden("csrf").context("the consent form's token")?;
        return browser
            .post_form(
                &docket.http,
                &format!("{}/oauth/consent", docket.base),
                &[
                    ("pending", &pending),
                    ("csrf", &csrf),
                    ("decision", "approve"),
                ],
            )
            .await;
    }
    Ok(answer)
}

/// Posts a form to the token endpoint; the answer.
pub(crate) async fn token(docket: &Docket, form: &[(&str, &str)]) -> anyhow::Result<Answer> {
    Browser::default()
        .post_form(&docket.http, &format!("{}/oauth/token", docket.base), form)
        .await
}

/// Redeems a code as a public client.
pub(crate) async fn redeem(
    docket: &Docket,
    request: &AuthRequest,
    redirect_uri: &str,
    code: &str,
) -> anyhow::Result<Answer> {
    token(
        docket,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &request.client_id),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", &request.verifier),
        ],
    )
    .await
}

/// A token request and the status and error it must be refused with.
pub(crate) type Refusal<'a> = (&'a [(&'a str, &'a str)], u16, &'a str);

/// Posts each form to the token endpoint and checks the status and error it
/// is refused with.
pub(crate) async fn expect_token_errors(
    docket: &Docket,
    cases: &[Refusal<'_>],
) -> anyhow::Result<()> {
    for (form, status, error) in cases {
        let answer = token(docket, form).await?;
        ensure!(
            (answer.status, answer.error().as_str()) == (*status, *error),
            "{form:?} answered {} {}, not {status} {error}",
            answer.status,
            answer.body
        );
    }
    Ok(())
}

/// Presents a refresh token as a public client.
pub(crate) async fn present_refresh(
    docket: &Docket,
    client_id: &str,
    refresh_token: &str,
) -> anyhow::Result<Answer> {
    token(
        docket,
        &[
            ("grant_type", "refresh_token"),
            ("client_id", client_id),
            ("refresh_token", refresh_token),
        ],
    )
    .await
}

/// The provider's discovery document.
pub(crate) async fn provider_discovery(docket: &Docket) -> anyhow::Result<Value> {
    Ok(docket
        .http
        .get(docket.provider.discovery_url())
        .send()
        .await?
        .json()
        .await?)
}
