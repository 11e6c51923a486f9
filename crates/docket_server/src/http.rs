//! The HTTP layer: the accept loop (`serve`), routing, and the `/mcp` endpoint's
//! transport rules — origin and host checks, authentication, body limits, header
//! validation, and JSON or SSE answers.
//!
//! The routes are also a service of their own ([`McpService`], from [`App::service`]) that
//! an embedder mounts in its own axum, tower or hyper application, and the work that runs
//! beside requests (the task runtime, the run bridge, the retention pass) starts with
//! [`App::start_background`] and ends with [`Background::shutdown`]. `serve` is those
//! three put together around an accept loop, so both ways of serving share one code path.
//!
//! The order of the checks on `POST /mcp` is part of the contract (the conformance
//! suite tests it): origin/host (403) → credentials (401) → content type (415) →
//! body size (413) → JSON-RPC shape (400) → notifications (202) → `_meta` (400,
//! -32602) → headers (400, -32020) → protocol version (400, -32022) → method
//! (404, -32601) → the method's own checks. A request of the earlier protocol era
//! (no current-era `_meta`, and `initialize`, an `Mcp-Session-Id` or an earlier
//! `MCP-Protocol-Version`) leaves this order after the JSON-RPC shape for
//! [`crate::legacy`], as does a client's answer to the server's question in a session.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use docket_protocol::jsonrpc::{
    ClientMessage, MessageError, Request, RequestId, Response as RpcResponse,
};
use docket_protocol::legacy::versions_sentence;
use docket_protocol::meta::RequestMeta;
use docket_protocol::result::stamp_encoded_server_info;
use http::header::{ALLOW, CONTENT_TYPE, HOST, ORIGIN, WWW_AUTHENTICATE};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tracing::Instrument as _;

use crate::auth::AuthError;
use crate::dispatch;
use crate::error::McpError;
use crate::headers;
use crate::holds::Hold;
use crate::legacy;
use crate::reply::{Items, Reply, StreamItem};
use crate::request::RequestContext;
use crate::server_span::ServerSpan;
use crate::state::App;

/// The response body type: a whole JSON document or a stream of SSE frames.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// Serves `app` on `listener` until `shutdown` resolves, then stops accepting,
/// marks the app as draining and waits up to `server.shutdown.grace_period` for
/// open requests to finish.
///
/// It is [`App::start_background`], the routes of [`App::service`] on every accepted
/// connection, and [`Background::shutdown`] once `shutdown` resolves.
///
/// # Errors
/// Only when accepting connections fails in a way that cannot be retried.
pub async fn serve(
    listener: TcpListener,
    app: App,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let graceful = GracefulShutdown::new();
    let background = app.start_background();
    let limits = &app.config().server;
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The header timer also closes kept-alive connections that send nothing more.
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    // A connection over the cap is answered at once and closed, so it gets only a
    // short while to say what it wants.
    let mut overflow = hyper::server::conn::http1::Builder::new();
    overflow
        .timer(TokioTimer::new())
        .header_read_timeout(OVERFLOW_HEADER_TIMEOUT.min(limits.header_read_timeout))
        .keep_alive(false);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    // Connections answered over the cap are few at a time too: beyond these, a new
    // connection is closed at once, so a flood of sockets never piles up.
    let overflow_slots = Arc::new(Semaphore::new(OVERFLOW_CONNECTIONS));
    // The address requests arrived at, for their spans (`server.address`, `server.port`).
    let local = listener.local_addr().ok();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // Running out of file descriptors and similar are transient.
                        tracing::warn!(error = %err, "accept failed");
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        continue;
                    }
                };
                // Without TCP_NODELAY each small answer waits ~40 ms for the peer's delayed ACK.
                if let Err(err) = stream.set_nodelay(true) {
                    tracing::debug!(error = %err, "could not set TCP_NODELAY");
                }
                let io = TokioIo::new(stream);
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    let Ok(overflow_slot) = Arc::clone(&overflow_slots).try_acquire_owned() else {
                        drop(io);
                        continue;
                    };
                    let connection = overflow.serve_connection(io, service_fn(over_capacity));
                    tokio::spawn(async move {
                        let _ = connection.await;
                        drop(overflow_slot);
                    });
                    continue;
                };
                let app = app.clone();
                let service = service_fn(move |mut request: hyper::Request<Incoming>| {
                    let app = app.clone();
                    // The peer is only logged, and only here is it known: a mounted
                    // service logs its requests without one.
                    request.extensions_mut().insert(Peer(peer));
                    if let Some(local) = local {
                        request.extensions_mut().insert(Local(local));
                    }
                    // Boxed: hyper keeps room for a connection's request future as long
                    // as the connection lives, and the router's future is as large as
                    // its largest path. A connection that holds a stream open for hours
                    // should hold a pointer, not that room.
                    Box::pin(async move { Ok::<_, Infallible>(route(&app, request).await) })
                });
                let connection = builder.serve_connection(io, service);
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(err) = connection.await {
                        tracing::debug!(error = %err, "connection ended with an error");
                    }
                    drop(slot);
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    let grace = app.config().server.shutdown.grace_period;
    let tasks = background.shutdown(grace);
    tracing::info!(
        ?grace,
        "shutting down: no new tasks; waiting for open requests and running tasks"
    );
    // Open requests are waited for alongside the running tasks and script runs.
    let requests = async {
        if tokio::time::timeout(grace, graceful.shutdown())
            .await
            .is_err()
        {
            tracing::warn!("grace period over; closing the remaining connections");
        }
    };
    tokio::join!(tasks, requests);
    Ok(())
}

impl App {
    /// Docket's routes (`/mcp`, `/healthz`, `/readyz`, `/metrics`, the protected-resource
    /// metadata and asset downloads) as a service to mount in an application of one's own:
    /// with axum, `Router::new().nest_service("/docket", app.service())` answers
    /// `POST /docket/mcp`. Each request is answered exactly as [`serve`] answers it.
    ///
    /// The service routes on the path it is given, so a prefix must be stripped before it
    /// (axum's `nest_service` does). The links Docket hands out — asset download URLs, the
    /// protected-resource metadata and its `WWW-Authenticate` pointer — are built from
    /// `server.public_base_url`, which an embedder mounting under a prefix sets to the URL
    /// clients reach that prefix at (`https://example.com/docket`).
    ///
    /// Start the background work with [`App::start_background`] as well: without it running
    /// tasks get no heartbeat (so they read as failed after `tasks.stale_after`), no cancel
    /// from another replica reaches them, and script runs stay queued.
    pub fn service(&self) -> McpService {
        McpService { app: self.clone() }
    }

    /// Starts what runs beside requests: the task runtime's heartbeat and maintenance
    /// pass, the run bridge's workers, and the hourly retention pass. [`serve`] calls it
    /// before it accepts a connection; an embedder that mounts [`App::service`] calls it
    /// once, from inside a tokio runtime, and keeps the [`Background`] to shut down with.
    /// A second call starts nothing more (a second heartbeat loop or a second set of
    /// run workers would exceed `scripts.worker.concurrency`); its [`Background`]
    /// still shuts the app down.
    pub fn start_background(&self) -> Background {
        let already_started = self
            .state
            .background_started
            .swap(true, std::sync::atomic::Ordering::SeqCst);
        if already_started {
            tracing::warn!("the background work was already started; starting nothing more");
            return Background {
                app: self.clone(),
                retention: tokio::spawn(async {}),
                authorization: None,
            };
        }
        if let Some(runtime) = self.task_runtime() {
            runtime.start_background();
        }
        if let Some(bridge) = self.run_bridge() {
            bridge.start();
        }
        let app = self.clone();
        let retention = tokio::spawn(async move {
            let ages = crate::retention::RetentionAges::from_config(app.config());
            tokio::time::sleep(crate::retention::FIRST_PASS_AFTER).await;
            loop {
                let report = app.delete_expired(ages).await;
                if report != crate::retention::RetentionReport::default() {
                    tracing::info!(?report, "retention pass deleted expired rows");
                }
                let principals = app
                    .forget_unseen_principals(crate::retention::principal_retention(app.config()))
                    .await;
                if principals > 0 {
                    tracing::info!(principals, "forgot principals not seen within retention");
                }
                let spools = app.delete_expired_spools().await;
                if spools > 0 {
                    tracing::info!(spools, "deleted expired result spools");
                }
                let sessions = app.end_idle_sessions().await;
                if sessions > 0 {
                    tracing::info!(sessions, "deleted idle sessions");
                }
                let shares = app.maintain_links().await;
                if shares > 0 {
                    tracing::info!(shares, "deleted ended shares");
                }
                let portal = app.sweep_portal().await;
                if portal > 0 {
                    tracing::info!(rows = portal, "swept expired portal sessions and logins");
                }
                tokio::time::sleep(crate::retention::INTERVAL).await;
            }
        });
        let authorization = self
            .state
            .authenticator
            .authorization_server()
            .map(|server| tokio::spawn(crate::oauth::maintain_forever(Arc::clone(server))));
        Background {
            app: self.clone(),
            retention,
            authorization,
        }
    }
}

/// The background work [`App::start_background`] started; [`Background::shutdown`] ends it.
///
/// Dropping it without shutting down leaves the work running until the runtime stops, and
/// running tasks then end without their outcome written (they read as failed once stale).
#[must_use = "shut the background work down with `Background::shutdown` when the app stops"]
pub struct Background {
    app: App,
    retention: tokio::task::JoinHandle<()>,
    /// The authorization server's maintenance loop, when there is one.
    authorization: Option<tokio::task::JoinHandle<()>>,
}

impl Background {
    /// Shuts down as [`serve`] does once its shutdown future resolves. At once: the
    /// retention pass stops and the app starts draining (`/readyz` answers 503, no new
    /// task-creating call is accepted). The future it returns then gives running tasks up
    /// to `grace` to finish and records the rest as failed, and releases script runs still
    /// going after `grace` back to the queue. [`serve`] passes
    /// `server.shutdown.grace_period`.
    ///
    /// Waiting for the embedder's own open requests is the embedder's part (axum's
    /// `with_graceful_shutdown`); run it alongside this future, as `serve` does.
    pub fn shutdown(self, grace: Duration) -> impl Future<Output = ()> + Send + 'static {
        self.retention.abort();
        if let Some(authorization) = &self.authorization {
            authorization.abort();
        }
        self.app.start_draining();
        let app = self.app;
        async move {
            let runs = async {
                if let Some(bridge) = app.run_bridge() {
                    bridge.shutdown(grace).await;
                }
            };
            let exports = async {
                if let Some(runtime) = app.task_runtime() {
                    runtime.drain(grace).await;
                }
            };
            tokio::join!(runs, exports);
            // What the work just done left to audit is written before the replica goes.
            if let Some(writer) = &app.state.audit {
                writer
                    .flush(app.config().server.shutdown.ending_grace)
                    .await;
            }
        }
    }
}

/// Docket's HTTP routes as a service: a [`tower_service::Service`] (what axum's
/// `nest_service` and `route_service` take) and a [`hyper::service::Service`] (what
/// `hyper::server::conn::http1::Builder::serve_connection` takes), for any request body
/// of [`Bytes`] whose error converts into a boxed error. It never fails: every problem
/// is an HTTP answer. Made by [`App::service`]; cheap to clone.
///
/// Every rule of a request is applied here, `server.max_request_bytes` and
/// `server.body_timeout` included; what [`serve`] adds around connections
/// (`server.max_connections`, `server.header_read_timeout`, `TCP_NODELAY`) is the host
/// server's to set.
#[derive(Clone)]
pub struct McpService {
    app: App,
}

/// The error a request body may fail with, once boxed.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The future of one answer from [`McpService`].
type Answer = Pin<Box<dyn Future<Output = Result<hyper::Response<Body>, Infallible>> + Send>>;

/// The peer address [`serve`] puts in each request's extensions, for the request log.
/// Private, so no request from elsewhere can claim one.
#[derive(Clone, Copy)]
struct Peer(SocketAddr);

/// The address [`serve`] accepted a request's connection on, for its span.
#[derive(Clone, Copy)]
struct Local(SocketAddr);

impl McpService {
    fn answer<B>(&self, request: hyper::Request<B>) -> Answer
    where
        B: hyper::body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        let app = self.app.clone();
        Box::pin(async move { Ok(route(&app, request).await) })
    }
}

impl<B> tower_service::Service<hyper::Request<B>> for McpService
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = hyper::Response<Body>;
    type Error = Infallible;
    type Future = Answer;

    /// Always ready: a request waits for nothing but its own work.
    fn poll_ready(&mut self, _context: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: hyper::Request<B>) -> Self::Future {
        self.answer(request)
    }
}

impl<B> hyper::service::Service<hyper::Request<B>> for McpService
where
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Response = hyper::Response<Body>;
    type Error = Infallible;
    type Future = Answer;

    fn call(&self, request: hyper::Request<B>) -> Self::Future {
        self.answer(request)
    }
}

/// Connections over the cap answered at once; beyond them a connection is closed.
const OVERFLOW_CONNECTIONS: usize = 64;

/// How long a connection over the cap has to send its request's headers.
const OVERFLOW_HEADER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The answer on a connection over `server.max_connections`: `/healthz` still says
/// the process is alive; anything else is told to come back, and the connection closes.
async fn over_capacity(
    request: hyper::Request<Incoming>,
) -> Result<hyper::Response<Body>, Infallible> {
    if request.method() == Method::GET && request.uri().path() == "/healthz" {
        return Ok(plain(StatusCode::OK, "ok\n"));
    }
    let mut response = plain(
        StatusCode::SERVICE_UNAVAILABLE,
        "the server is at its connection limit; try again shortly\n",
    );
    response
        .headers_mut()
        .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    Ok(response)
}

/// Routes one HTTP request. The request is taken apart first, so that what the
/// answer's future holds across an await (the headers) is `Sync` whatever the body is.
async fn route<B>(app: &App, request: hyper::Request<B>) -> hyper::Response<Body>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    // The authorization server's routes are reached from other origins by
    // design (a host's web page fetching a token, the provider sending the
    // browser back); they defend themselves with PKCE, client authentication and
    // a consent form bound to the browser, so only the Host is checked here.
    if let Some(server) = app.state.authenticator.authorization_server()
        && crate::oauth::answers(&parts.method, &path)
    {
        if let Err(reason) = check_host(app, &parts.headers) {
            tracing::info!(reason, path, "refused a request for a foreign host");
            return plain(StatusCode::FORBIDDEN, &format!("{reason}\n"));
        }
        let peer = parts.extensions.get::<Peer>().map(|peer| peer.0.ip());
        let body_timeout = app.config().server.body_timeout;
        let (parts, bytes) = crate::oauth::answer(server, parts, body, peer, body_timeout)
            .await
            .into_parts();
        return hyper::Response::from_parts(parts, BodyExt::boxed_unsync(Full::new(bytes)));
    }
    // The portal's pages are navigations of the person's own browser, from
    // the provider's and the authorization server's pages too; they defend
    // themselves with a SameSite session cookie and a CSRF token on every
    // form, so only the Host is checked here.
    if let Some(portal) = &app.state.portal
        && docket_portal::Portal::answers(&path)
    {
        if let Err(reason) = check_host(app, &parts.headers) {
            tracing::info!(reason, path, "refused a request for a foreign host");
            return plain(StatusCode::FORBIDDEN, &format!("{reason}\n"));
        }
        // The work page's live statuses stream, and shares opened by the
        // session's person; everything else is a page.
        if parts.method == http::Method::GET && path == crate::portal_events::PATH {
            let query = parts.uri.query().unwrap_or_default();
            return crate::portal_events::answer_events(app, portal, &parts.headers, query).await;
        }
        if parts.method == http::Method::GET
            && let Some(id) = path.strip_prefix(crate::portal_routes::SHARES)
        {
            let peer = parts.extensions.get::<Peer>().map(|peer| peer.0.ip());
            return match crate::portal_routes::open_share(app, portal, &parts.headers, id, peer)
                .await
            {
                Ok(answer) => answer,
                Err(refused) => link_answer(app, Err(refused)),
            };
        }
        // An embedder's service may have no peer address; such requests
        // share one rate-limit bucket at the token endpoint.
        let peer = parts.extensions.get::<Peer>().map_or(
            std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
            |peer| peer.0.ip(),
        );
        let (parts, bytes) = crate::portal_routes::answer(app, portal, parts, body, peer)
            .await
            .into_parts();
        return hyper::Response::from_parts(parts, BodyExt::boxed_unsync(Full::new(bytes)));
    }
    // The DNS-rebinding guard covers every route that answers with more than a
    // liveness word: a page in a browser must not read assets or metrics.
    if !matches!(path.as_str(), "/healthz" | "/readyz")
        && let Err(reason) = check_origin_and_host(app, &parts.headers)
    {
        tracing::info!(
            reason,
            path,
            "refused a request from a foreign origin or host"
        );
        if path == MCP_PATH {
            app.state.metrics.record_request("-", 403);
        }
        return plain(StatusCode::FORBIDDEN, &format!("{reason}\n"));
    }
    match (&parts.method, path.as_str()) {
        (&Method::POST, MCP_PATH) => {
            let started = Instant::now();
            let peer = parts.extensions.get::<Peer>().map(|peer| peer.0);
            let local = parts.extensions.get::<Local>().map(|local| local.0);
            let mut server_span = ServerSpan::start(app, peer, local, parts.version);
            let (method, response) = handle_mcp(app, parts, body, &mut server_span).await;
            server_span.finish();
            app.state
                .metrics
                .record_request(&method, response.status().as_u16());
            tracing::debug!(
                peer = peer.map(tracing::field::display),
                method,
                status = response.status().as_u16(),
                elapsed = ?started.elapsed(),
                "mcp request"
            );
            response
        }
        // An earlier-era client ends its session; without one, DELETE is 405 as the
        // current era asks.
        (&Method::DELETE, MCP_PATH) if legacy::session_id(&parts.headers).is_some() => {
            let identity = match authenticate(app, &parts.headers).await {
                Ok(identity) => identity,
                Err(err) => return auth_failure(app, &err),
            };
            match legacy::end_session(app, &identity, &parts.headers).await {
                Ok(()) => empty(StatusCode::OK),
                Err(refusal) => refusal_response(None, refusal),
            }
        }
        // No listen stream is offered (the earlier era allows 405 for GET too).
        (_, MCP_PATH) => {
            let mut response = plain(
                StatusCode::METHOD_NOT_ALLOWED,
                "the MCP endpoint accepts POST (and DELETE with an Mcp-Session-Id)\n",
            );
            response
                .headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST"));
            response
        }
        (&Method::GET, "/healthz") => plain(StatusCode::OK, "ok\n"),
        (&Method::GET, "/readyz") if app.is_draining() => {
            plain(StatusCode::SERVICE_UNAVAILABLE, "draining\n")
        }
        (&Method::GET, "/readyz") => plain(StatusCode::OK, "ready\n"),
        (&Method::GET, "/metrics") => {
            if let Some(runtime) = app.task_runtime() {
                app.state.metrics.observe_tasks(runtime);
            }
            let mut response = full(StatusCode::OK, app.state.metrics.render());
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            response
        }
        (&Method::GET, "/.well-known/oauth-protected-resource")
        | (&Method::GET, "/.well-known/oauth-protected-resource/mcp") => {
            let resource = format!("{}{MCP_PATH}", app.config().server.base_url());
            json_response(
                StatusCode::OK,
                &app.state
                    .authenticator
                    .protected_resource_metadata(&resource),
            )
        }
        (&Method::GET, path) if path.starts_with("/assets/") && path.ends_with("/content") => {
            let id = path
                .trim_start_matches("/assets/")
                .trim_end_matches("/content")
                .to_owned();
            // A query makes it a signed link, opened with no header; without
            // one the owner's (or an administrator's) credentials open it.
            match parts.uri.query() {
                Some(query) => {
                    let peer = parts.extensions.get::<Peer>().map(|peer| peer.0.ip());
                    link_answer(
                        app,
                        crate::downloads::open_signed(app, &id, query, peer).await,
                    )
                }
                None => asset_content(app, &parts.headers, &id).await,
            }
        }
        (&Method::GET, path) if path.starts_with("/shares/") => {
            let id = path.trim_start_matches("/shares/").to_owned();
            let peer = parts.extensions.get::<Peer>().map(|peer| peer.0.ip());
            let opened = crate::downloads::open_share(app, &parts.headers, &id, peer).await;
            // A browser with no credentials opens a share for people through
            // the portal, whose session says who they are.
            if let Err(crate::downloads::Refused::Auth(AuthError::MissingCredentials)) = &opened
                && app.state.portal.is_some()
                && accepts_html(&parts.headers)
            {
                return crate::portal_routes::to_portal_share(&id);
            }
            link_answer(app, opened)
        }
        _ => plain(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// Whether the request is a browser's navigation (it takes HTML).
fn accepts_html(headers: &HeaderMap) -> bool {
    headers
        .get_all(http::header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|value| value.contains("text/html"))
}

/// Who the request's credentials say it is. A caller signed in with an OIDC
/// token has their claims remembered in the principal directory (in the
/// background, when they changed or are an hour old) for their script runs.
async fn authenticate(
    app: &App,
    headers: &HeaderMap,
) -> Result<Arc<crate::auth::Identity>, AuthError> {
    let identity = app.state.authenticator.authenticate(headers).await?;
    app.state.principals.seen(&identity);
    Ok(identity)
}

/// `GET /assets/{id}/content`: the asset's bytes, streamed, to its owner and
/// administrators. Everyone else gets the 404 an unknown id gets.
async fn asset_content(app: &App, headers: &HeaderMap, id: &str) -> hyper::Response<Body> {
    let not_found = || plain(StatusCode::NOT_FOUND, "not found\n");
    let Some(assets) = &app.state.assets else {
        return not_found();
    };
    let identity = match authenticate(app, headers).await {
        Ok(identity) => identity,
        Err(err) => return auth_failure(app, &err),
    };
    // A download holds its connection for as long as it streams.
    let hold = match app.state.holds.enter(&identity.subject) {
        Ok(hold) => hold,
        Err(refused) => {
            let mut response = plain(StatusCode::TOO_MANY_REQUESTS, &format!("{refused}\n"));
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
            return response;
        }
    };
    let is_admin = app
        .state
        .personas
        .resolve(&identity.roles)
        .is_some_and(|persona| persona.is_admin);
    let asset = match crate::assets::visible_asset(assets, id, &identity.subject, is_admin).await {
        Ok(Some(asset)) => asset,
        Ok(None) => return not_found(),
        Err(err) => {
            tracing::error!(error = %err, "could not read an asset row");
            return plain(
                StatusCode::SERVICE_UNAVAILABLE,
                "the asset store is unavailable\n",
            );
        }
    };
    let content = match assets.sink.open(&asset.storage_key).await {
        Ok(content) => content,
        Err(err) => {
            tracing::error!(error = %err, asset = asset.id, "could not open an asset's bytes");
            return not_found();
        }
    };
    crate::downloads::attachment(&asset, content, hold)
}

/// The answer to opening a signed link or a share.
fn link_answer(
    app: &App,
    answer: Result<hyper::Response<Body>, crate::downloads::Refused>,
) -> hyper::Response<Body> {
    use crate::downloads::Refused;
    let refused = match answer {
        Ok(response) => return response,
        Err(refused) => refused,
    };
    let mut response = match refused {
        // Unknown, forged, revoked, not for this person, or its asset is gone:
        // one answer, so a link's holder learns nothing about the others.
        Refused::NotFound => plain(StatusCode::NOT_FOUND, "not found\n"),
        Refused::Expired => plain(
            StatusCode::GONE,
            "this link has expired; ask its owner for a new one\n",
        ),
        Refused::TooMany(retry_after) => {
            let mut response = plain(
                StatusCode::TOO_MANY_REQUESTS,
                "too many links opened from this address; try again shortly\n",
            );
            response.headers_mut().insert(
                http::header::RETRY_AFTER,
                HeaderValue::from(retry_after.as_secs().max(1)),
            );
            response
        }
        Refused::Auth(error) => auth_failure(app, &error),
        Refused::Busy(reason) => {
            let mut response = plain(StatusCode::TOO_MANY_REQUESTS, &format!("{reason}\n"));
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
            response
        }
        Refused::Unavailable => plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "the store is unavailable; try again\n",
        ),
    };
    // Refusals of links are pages a browser shows: they too load nothing.
    response.headers_mut().insert(
        http::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(crate::downloads::SANDBOX_CSP),
    );
    response.headers_mut().insert(
        http::header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// Handles `POST /mcp`; returns the JSON-RPC method (or `-`) for metrics. Once the
/// message is read, the rest runs in the request's span (`server_span`).
async fn handle_mcp<B>(
    app: &App,
    parts: Parts,
    body: B,
    server_span: &mut ServerSpan,
) -> (String, hyper::Response<Body>)
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let unknown = || "-".to_owned();
    let authenticating = Instant::now();
    let identity = match authenticate(app, &parts.headers).await {
        Ok(identity) => identity,
        Err(err) => return (unknown(), closing(auth_failure(app, &err))),
    };
    server_span.authenticated(authenticating.elapsed());
    // Taken before the body is read: a slow upload holds a connection too.
    let hold = match app.state.holds.enter(&identity.subject) {
        Ok(hold) => hold,
        Err(refused) => {
            let refused = McpError::Limited(refused.to_string());
            return (unknown(), closing(error_response(app, None, &refused)));
        }
    };
    if let Some(content_type) = parts.headers.get(CONTENT_TYPE) {
        let is_json = content_type
            .to_str()
            .map(|value| {
                value
                    .trim()
                    .to_ascii_lowercase()
                    .starts_with("application/json")
            })
            .unwrap_or(false);
        if !is_json {
            return (
                unknown(),
                closing(plain(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "send the JSON-RPC message as application/json\n",
                )),
            );
        }
    }
    let limit = app.config().server.max_request_bytes;
    let body_timeout = app.config().server.body_timeout;
    let Ok(collected) =
        tokio::time::timeout(body_timeout, Limited::new(body, limit).collect()).await
    else {
        let message = format!(
            "the request body did not arrive within {} s\n",
            body_timeout.as_secs_f64()
        );
        return (
            unknown(),
            closing(plain(StatusCode::REQUEST_TIMEOUT, &message)),
        );
    };
    let bytes = match collected {
        Ok(collected) => collected.to_bytes(),
        Err(err) if err.is::<http_body_util::LengthLimitError>() => {
            let message = format!("the request body is larger than {limit} bytes\n");
            return (
                unknown(),
                closing(plain(StatusCode::PAYLOAD_TOO_LARGE, &message)),
            );
        }
        Err(err) => {
            tracing::debug!(error = %err, "could not read the request body");
            return (
                unknown(),
                closing(plain(
                    StatusCode::BAD_REQUEST,
                    "could not read the request body\n",
                )),
            );
        }
    };
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) => message,
        Err(err) => {
            return (
                unknown(),
                error_response(app, None, &McpError::Parse(err.to_string())),
            );
        }
    };
    // Inside a session of the earlier era, a client answers the server's requests
    // (elicitation) with a JSON-RPC response.
    if legacy::session_id(&parts.headers).is_some() && legacy::is_response(&message) {
        let response = match legacy::answer(app, &identity, &parts.headers, message).await {
            Ok(()) => empty(StatusCode::ACCEPTED),
            Err(refusal) => refusal_response(None, refusal),
        };
        return (unknown(), response);
    }
    let request = match ClientMessage::from_value(message) {
        Ok(ClientMessage::Request(request)) => request,
        Ok(ClientMessage::Notification(notification)) => {
            server_span.notification(&notification.method);
            // A notification that names a session is accepted only inside it.
            if let Err(refusal) = legacy::notification(app, &identity, &parts.headers).await {
                return (notification.method, refusal_response(None, refusal));
            }
            tracing::debug!(method = notification.method, "notification accepted");
            return (notification.method, empty(StatusCode::ACCEPTED));
        }
        Err(MessageError::Parse(detail)) => {
            return (
                unknown(),
                error_response(app, None, &McpError::Parse(detail)),
            );
        }
        Err(MessageError::Invalid { id, reason }) => {
            return (
                unknown(),
                error_response(app, id, &McpError::InvalidRequest(reason)),
            );
        }
    };
    let served = dispatch::is_known_method(app, &request.method);
    server_span.request(app, &request, &parts.headers, served);
    let span = server_span.span().clone();
    answer_request(app, identity, parts, request, hold, server_span)
        .instrument(span)
        .await
}

/// Answers a JSON-RPC request that was read, in its span.
async fn answer_request(
    app: &App,
    identity: Arc<crate::auth::Identity>,
    parts: Parts,
    request: Request,
    mut hold: Hold,
    server_span: &mut ServerSpan,
) -> (String, hyper::Response<Body>) {
    let method = request.method.clone();
    // The streams that live as long as their client wants count against its
    // identity's streams; the others end with their answer.
    if matches!(method.as_str(), crate::listen::METHOD | "tasks/result")
        && let Err(refused) = hold.open_stream()
    {
        let refused = McpError::Limited(refused.to_string());
        server_span.failed_with(&refused);
        return (method, error_response(app, Some(request.id), &refused));
    }
    if legacy::is_legacy(&request.method, request.params.as_ref(), &parts.headers) {
        if let Some(session) = legacy::session_id(&parts.headers) {
            server_span.session(session);
        }
        if let Some(version) = parts
            .headers
            .get(headers::PROTOCOL_VERSION)
            .and_then(|value| value.to_str().ok())
        {
            server_span.protocol_version(version.trim());
        }
        let id = request.id.clone();
        let response = match Box::pin(legacy::handle(app, identity, parts.headers, request)).await {
            Ok(answer) => {
                server_span.answered(&answer.reply);
                legacy_response(app, id, answer, hold, server_span)
            }
            Err(refusal) => {
                server_span.failed_with_code(refusal.error.code);
                refusal_response(Some(id), refusal)
            }
        };
        return (method, response);
    }
    let meta = match validate(app, &request, &parts.headers) {
        Ok(meta) => meta,
        Err(err) => {
            server_span.failed_with(&err);
            return (method, error_response(app, Some(request.id), &err));
        }
    };
    server_span.protocol_version(&meta.protocol_version);
    let context = RequestContext {
        identity,
        meta,
        headers: parts.headers,
        run_id: None,
    };
    let id = request.id.clone();
    let reply = dispatch::dispatch(app, context, request).await;
    match &reply {
        Ok(reply) => server_span.answered(reply),
        Err(err) => server_span.failed_with(err),
    }
    let response = match reply {
        Ok(Reply::Json(result)) => result_response(app, id, result),
        Ok(Reply::Encoded(result)) => encoded_result_response(&id, &result),
        Ok(Reply::Stream(receiver)) => sse_response(
            app,
            id,
            receiver,
            Era::Current,
            hold,
            server_span.hand_over(),
        ),
        Err(err) => error_response(app, Some(id), &err),
    };
    (method, response)
}

/// The transport-level checks of a request, in the order the contract fixes.
fn validate(app: &App, request: &Request, headers: &HeaderMap) -> Result<RequestMeta, McpError> {
    let meta = RequestMeta::from_params(request.params.as_ref())
        .map_err(|err| McpError::InvalidMeta(format!("{}; {}", err.0, versions_sentence())))?;
    let header = |result: Result<(), String>| result.map_err(McpError::HeaderMismatch);
    header(headers::require_match(
        headers,
        headers::PROTOCOL_VERSION,
        "MCP-Protocol-Version",
        &meta.protocol_version,
    ))?;
    header(headers::require_match(
        headers,
        headers::METHOD,
        "Mcp-Method",
        &request.method,
    ))?;
    if let Some(name) = dispatch::routing_name(&request.method, request.params.as_ref()) {
        header(headers::require_match(
            headers,
            headers::NAME,
            "Mcp-Name",
            &name,
        ))?;
    }
    if !docket_protocol::SUPPORTED_VERSIONS.contains(&meta.protocol_version.as_str()) {
        return Err(McpError::UnsupportedVersion(meta.protocol_version));
    }
    if !dispatch::is_known_method(app, &request.method) {
        return Err(McpError::MethodNotFound(request.method.clone()));
    }
    Ok(meta)
}

/// Refuses a request whose `Origin` (when present) or `Host` is not loopback, the
/// configured public URL, or an allowed origin. This is the DNS-rebinding guard.
fn check_origin_and_host(app: &App, headers: &HeaderMap) -> Result<(), String> {
    let server = &app.config().server;
    let allowed_origin = |origin: &str| {
        let origin = origin.trim_end_matches('/');
        is_loopback_authority(authority_of(origin))
            || server
                .allowed_origins
                .iter()
                .any(|allowed| allowed.trim_end_matches('/').eq_ignore_ascii_case(origin))
            || server
                .public_base_url
                .as_deref()
                .is_some_and(|base| same_origin(base, origin))
    };
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin
            .to_str()
            .map_err(|_| "the Origin header is not valid".to_owned())?;
        if !allowed_origin(origin) {
            return Err(format!("origin {origin:?} is not allowed"));
        }
    }
    check_host(app, headers)
}

/// Refuses a `Host` that is not this server's (DNS rebinding).
fn check_host(app: &App, headers: &HeaderMap) -> Result<(), String> {
    let server = &app.config().server;
    if let Some(host) = headers.get(HOST) {
        let host = host
            .to_str()
            .map_err(|_| "the Host header is not valid".to_owned())?;
        let allowed_host = is_loopback_authority(host)
            || host.eq_ignore_ascii_case(&server.address.to_string())
            || server
                .public_base_url
                .as_deref()
                .is_some_and(|base| authority_of(base).eq_ignore_ascii_case(host))
            || server
                .allowed_origins
                .iter()
                .any(|origin| authority_of(origin).eq_ignore_ascii_case(host));
        if !allowed_host {
            return Err(format!("host {host:?} is not allowed"));
        }
    }
    Ok(())
}

/// `scheme://authority/...` → `authority`.
fn authority_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    rest.split('/').next().unwrap_or(rest)
}

fn same_origin(base: &str, origin: &str) -> bool {
    let scheme = |url: &str| {
        url.split_once("://")
            .map(|(scheme, _)| scheme.to_ascii_lowercase())
    };
    scheme(base) == scheme(origin) && authority_of(base).eq_ignore_ascii_case(authority_of(origin))
}

/// Whether `host[:port]` names this machine's loopback interface.
fn is_loopback_authority(authority: &str) -> bool {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        authority
            .rsplit_once(':')
            .map_or(authority, |(host, port)| {
                if port.chars().all(|c| c.is_ascii_digit()) {
                    host
                } else {
                    authority
                }
            })
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn auth_failure(app: &App, error: &AuthError) -> hyper::Response<Body> {
    let metadata = format!(
        "{}/.well-known/oauth-protected-resource{MCP_PATH}",
        app.config().server.base_url()
    );
    match error.www_authenticate(&metadata) {
        Some(challenge) => {
            tracing::info!(error = %error, "refused a request without valid credentials");
            let mut response = plain(StatusCode::UNAUTHORIZED, &format!("{error}\n"));
            if let Ok(value) = HeaderValue::from_str(&challenge) {
                response.headers_mut().insert(WWW_AUTHENTICATE, value);
            }
            response
        }
        None => {
            tracing::error!(error = %error, "could not check credentials");
            plain(StatusCode::SERVICE_UNAVAILABLE, &format!("{error}\n"))
        }
    }
}

fn result_response(app: &App, id: RequestId, result: Value) -> hyper::Response<Body> {
    let result = stamp_encoded_server_info(result, &app.state.server_info_json);
    json_response(StatusCode::OK, &RpcResponse::result(id, result))
}

/// The JSON-RPC response around a result [`Reply::Encoded`] already holds, written
/// without decoding it again.
fn encoded_result_response(id: &RequestId, result: &[u8]) -> hyper::Response<Body> {
    let mut bytes = Vec::with_capacity(result.len() + 48);
    bytes.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    // A request id is a string or an integer: encoding it cannot fail.
    let _ = serde_json::to_writer(&mut bytes, id);
    bytes.extend_from_slice(br#","result":"#);
    bytes.extend_from_slice(result);
    bytes.push(b'}');
    let mut response = full(StatusCode::OK, bytes);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn error_response(app: &App, id: Option<RequestId>, error: &McpError) -> hyper::Response<Body> {
    let _ = app;
    let (status, object) = error.to_wire();
    json_response(status, &RpcResponse::error(id, object))
}

/// The protocol era an answer is written for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Era {
    /// 2026-07-28: results carry `resultType` and the server's info in `_meta`.
    Current,
    /// 2025-11-25 and older (a session): results in that era's shape.
    Legacy,
}

/// An earlier-era answer: the result in that era's shape, and the session header
/// when `initialize` opened one.
fn legacy_response(
    app: &App,
    id: RequestId,
    answer: legacy::Answer,
    hold: Hold,
    server_span: &mut ServerSpan,
) -> hyper::Response<Body> {
    let mut response = match answer.reply {
        Reply::Json(result) => json_response(
            StatusCode::OK,
            &RpcResponse::result(id, legacy::result_shape(result)),
        ),
        Reply::Encoded(bytes) => match serde_json::from_slice(&bytes) {
            Ok(result) => json_response(
                StatusCode::OK,
                &RpcResponse::result(id, legacy::result_shape(result)),
            ),
            Err(err) => error_response(app, Some(id), &McpError::Internal(err.to_string())),
        },
        Reply::Stream(receiver) => sse_response(
            app,
            id,
            receiver,
            Era::Legacy,
            hold,
            server_span.hand_over(),
        ),
    };
    if let Some(session) = answer.new_session
        && let Ok(value) = HeaderValue::from_str(&session)
    {
        response
            .headers_mut()
            .insert(docket_protocol::legacy::SESSION_HEADER, value);
    }
    response
}

/// An earlier-era refusal: its status and JSON-RPC error.
fn refusal_response(id: Option<RequestId>, refusal: legacy::Refusal) -> hyper::Response<Body> {
    json_response(refusal.status, &RpcResponse::error(id, refusal.error))
}

/// Answers as an SSE stream of `items`: one compact `data:` line per message,
/// keep-alive comments while waiting (their failed write is how a vanished client
/// is noticed), and the end of the stream after the final answer. The connection
/// polls the stream as it writes: no task or channel stands between them. The
/// caller's `hold` lasts as long as the stream, and so does the request's span
/// (`server_span`, handed over): its duration and error are the final message's.
fn sse_response(
    app: &App,
    id: RequestId,
    items: Items,
    era: Era,
    hold: Hold,
    server_span: ServerSpan,
) -> hyper::Response<Body> {
    let keepalive = app.state.sse_keepalive;
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + keepalive, keepalive);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    crate::sse::response(SseFrames {
        app: app.clone(),
        id,
        items,
        era,
        ticker,
        server_span: Some(server_span),
        _hold: hold,
    })
}

/// An SSE answer's frames (see [`sse_response`]).
struct SseFrames {
    app: App,
    id: RequestId,
    items: Items,
    era: Era,
    ticker: tokio::time::Interval,
    /// Until the final answer (or the end of `items`).
    server_span: Option<ServerSpan>,
    _hold: Hold,
}

impl SseFrames {
    /// A message's frame; the request's span is finished with the final answer.
    fn frame(&mut self, item: StreamItem) -> Bytes {
        match item {
            StreamItem::Notification(notification) => sse_frame(&notification),
            StreamItem::Message(message) => sse_frame(&message),
            StreamItem::Result(result) => {
                if let Some(mut span) = self.server_span.take() {
                    span.answered_with(&result);
                    span.finish();
                }
                let result = match self.era {
                    Era::Current => {
                        stamp_encoded_server_info(result, &self.app.state.server_info_json)
                    }
                    Era::Legacy => legacy::result_shape(result),
                };
                sse_frame(&RpcResponse::result(self.id.clone(), result))
            }
            StreamItem::Error(error) => {
                if let Some(mut span) = self.server_span.take() {
                    span.failed_with_code(error.code);
                    span.finish();
                }
                sse_frame(&RpcResponse::error(Some(self.id.clone()), error))
            }
        }
    }
}

impl futures_util::Stream for SseFrames {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        // After the final answer, the stream ends.
        if self.server_span.is_none() {
            return Poll::Ready(None);
        }
        match self.items.as_mut().poll_next(cx) {
            Poll::Ready(Some(item)) => return Poll::Ready(Some(self.frame(item))),
            Poll::Ready(None) => {
                if let Some(span) = self.server_span.take() {
                    span.finish();
                }
                return Poll::Ready(None);
            }
            Poll::Pending => {}
        }
        match self.ticker.poll_tick(cx) {
            Poll::Ready(_) => Poll::Ready(Some(Bytes::from_static(b": keep-alive\n\n"))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl Drop for SseFrames {
    /// The client went away before the final answer: the request ends here, and
    /// dropping `items` tells its producer.
    fn drop(&mut self) {
        if let Some(span) = self.server_span.take() {
            span.finish();
        }
    }
}

fn sse_frame(message: &impl serde::Serialize) -> Bytes {
    let json = serde_json::to_string(message).unwrap_or_default();
    Bytes::from(format!("event: message\ndata: {json}\n\n"))
}

fn json_response(status: StatusCode, body: &impl serde::Serialize) -> hyper::Response<Body> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut response = full(status, bytes);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn plain(status: StatusCode, text: &str) -> hyper::Response<Body> {
    let mut response = full(status, text.to_owned());
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// `response` with `Connection: close`: for an answer sent before the request's
/// body was read (or while it was cut off), after which the connection cannot be
/// used again. Saying so lets a client's pool open a new connection for its next
/// request instead of sending it into one the server is closing.
fn closing(mut response: hyper::Response<Body>) -> hyper::Response<Body> {
    response
        .headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

fn empty(status: StatusCode) -> hyper::Response<Body> {
    full(status, Bytes::new())
}

fn full(status: StatusCode, body: impl Into<Bytes>) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(BodyExt::boxed_unsync(Full::new(body.into())));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_authorities_are_recognised() {
        for authority in [
            "127.0.0.1:8080",
            "localhost",
            "LOCALHOST:1",
            "[::1]:80",
            "127.0.0.2",
        ] {
            assert!(is_loopback_authority(authority), "{authority}");
        }
        for authority in [
            "evil.example.com",
            "evil.example.com:8080",
            "10.0.0.1:80",
            "localhost.evil.com",
        ] {
            assert!(!is_loopback_authority(authority), "{authority}");
        }
        assert_eq!(authority_of("http://127.0.0.1:9/x"), "127.0.0.1:9");
    }
}
