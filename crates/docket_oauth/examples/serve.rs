//! Docket's authorization server on its own: in memory, on a loopback port,
//! in front of the OpenID provider named on the command line, printing every
//! event it records.
//!
//! ```sh
//! cargo run -p docket_oauth --example serve -- \
//!     --upstream https://login.example.com --client-id docket --client-secret "$SECRET"
//! cargo run -p docket_oauth --example serve -- --self-check
//! ```
//!
//! The provider must know Docket's redirect URI, which the example prints
//! (`http://127.0.0.1:<port>/oauth/callback`). With `--self-check` it needs no
//! provider: it reads its own metadata over HTTP, registers a native client,
//! sees an authorization request without PKCE sent back to that client as
//! `invalid_request` with `state` and `iss`, and exits.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context as _, bail, ensure};
use axum::extract::{ConnectInfo, Request};
use axum::response::IntoResponse;
use docket_oauth::config::UpstreamConfig;
use docket_oauth::{AuthorizationServer, Event, EventSink, MemoryStore, OAuthServerConfig, Site};
use serde_json::{Value, json};

/// Prints each event on one line.
struct PrintEvents;

impl EventSink for PrintEvents {
    fn record(&self, event: Event) {
        println!(
            "event {} client={} subject={} success={} {}",
            event.kind.as_str(),
            event.client_id.as_deref().unwrap_or("-"),
            event.subject.as_deref().unwrap_or("-"),
            event.success,
            event.detail.as_deref().unwrap_or_default()
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let arguments: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        arguments
            .iter()
            .position(|argument| argument == flag)
            .and_then(|index| arguments.get(index + 1))
            .cloned()
    };
    let self_check = arguments.iter().any(|argument| argument == "--self-check");
    let upstream = UpstreamConfig {
        issuer: value("--upstream").unwrap_or_else(|| "https://login.example.com".to_owned()),
        client_id: value("--client-id").unwrap_or_else(|| "docket".to_owned()),
        client_secret: value("--client-secret").unwrap_or_else(|| "unused".to_owned()),
        ..UpstreamConfig::default()
    };
    if !self_check && value("--upstream").is_none() {
        bail!(
            "usage: serve --upstream ISSUER --client-id ID --client-secret SECRET | --self-check"
        );
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let config = OAuthServerConfig {
        upstream,
        ..OAuthServerConfig::default()
    };
    let server = Arc::new(AuthorizationServer::new(
        config,
        Site::at(&base),
        Arc::new(MemoryStore::new()),
        Arc::new(PrintEvents),
    )?);
    println!("authorization server at {base}; the provider's redirect URI: {base}/oauth/callback");
    let serving = tokio::spawn(serve(listener, Arc::clone(&server)));
    if self_check {
        let checked = check(&base).await;
        serving.abort();
        checked?;
        println!("self-check passed");
        return Ok(());
    }
    serving.await?;
    Ok(())
}

async fn serve(listener: tokio::net::TcpListener, server: Arc<AuthorizationServer>) {
    let app = axum::Router::new().fallback(
        move |ConnectInfo(peer): ConnectInfo<SocketAddr>, request: Request| {
            let server = Arc::clone(&server);
            async move {
                let (parts, body) = request.into_parts();
                let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
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
    let service = app.into_make_service_with_connect_info::<SocketAddr>();
    if let Err(error) = axum::serve(listener, service).await {
        eprintln!("the server stopped: {error}");
    }
}

async fn check(base: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    let metadata: Value = http
        .get(format!("{base}/.well-known/oauth-authorization-server"))
        .send()
        .await?
        .json()
        .await?;
    ensure!(
        metadata["issuer"] == base,
        "the metadata names {}",
        metadata["issuer"]
    );
    let registered: Value = http
        .post(format!("{base}/oauth/register"))
        .json(
            &json!({"application_type": "native", "client_name": "Self-check",
                      "redirect_uris": ["http://127.0.0.1/callback"]}),
        )
        .send()
        .await?
        .json()
        .await?;
    let client_id = registered["client_id"].as_str().context("a client id")?;
    println!("registered {client_id}");
    let resource = format!("{base}/mcp");
    let query = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", "http://127.0.0.1:5000/callback"),
            ("state", "s1"),
            ("resource", resource.as_str()),
        ])
        .finish();
    let answer = http
        .get(format!("{base}/oauth/authorize?{query}"))
        .send()
        .await?;
    let location = answer
        .headers()
        .get(http::header::LOCATION)
        .and_then(|value| value.to_str().ok())
        .context("a redirect back to the client")?;
    ensure!(
        location.starts_with("http://127.0.0.1:5000/callback?error=invalid_request")
            && location.contains("state=s1")
            && location.contains("iss="),
        "unexpected redirect: {location}"
    );
    println!("a request without PKCE went back refused: {location}");
    Ok(())
}
