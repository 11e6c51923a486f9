//! Embedding Docket: an axum application with routes of its own, and Docket's MCP endpoint
//! mounted beside them under `/docket` (so clients POST to `/docket/mcp`).
//!
//! [`App::service`] is Docket's routes as a tower service, which axum's `nest_service` mounts;
//! axum strips the prefix, so Docket sees `/mcp`. The links Docket hands out (asset downloads,
//! the protected-resource metadata) come from `server.public_base_url`, so it is set to where
//! the prefix is reached. Without [`docket_server::serve`] nothing starts Docket's background
//! work (the task runtime's heartbeat, the retention pass), so the example starts it with
//! [`App::start_background`] and ends it with [`docket_server::Background::shutdown`] beside
//! axum's own graceful shutdown. Tasks live in memory; the configuration is built in code.
//!
//! ```text
//! cargo run -p docket_server --example axum_mount                  # serve until killed
//! cargo run -p docket_server --example axum_mount -- --self-check  # what `cargo xtask test` runs
//! ```
//!
//! With `--self-check` it is its own client over HTTP: it calls the application's routes, then
//! Docket's `/healthz`, `tools/list` and `platform_info` through the prefix, checks that the
//! metadata names the prefixed endpoint and that `/mcp` without the prefix is not Docket's,
//! shuts both down, and exits non-zero if anything differs.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context as _, bail, ensure};
use axum::Router;
use axum::routing::get;
use docket_protocol::PROTOCOL_VERSION;
use docket_protocol::meta::{CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY};
use docket_server::{App, Config, MCP_PATH};
use docket_task::memory::MemoryStore;
use serde_json::{Value, json};

/// Where the application mounts Docket.
const PREFIX: &str = "/docket";

/// What the application's own `GET /hello` says.
const HELLO: &str = "hello from the host application\n";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let self_check = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--self-check") => true,
        Some(other) => bail!("unknown argument {other:?}; the only one is --self-check"),
    };

    // Bound first, so that the configuration can name the address clients reach.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;

    // The embedded default (loopback only, anonymous callers are administrators), with the
    // prefix in the public URL, and no database: the task store below lives in memory.
    let mut config = Config::embedded_default();
    config.server.address = address;
    config.server.public_base_url = Some(format!("http://{address}{PREFIX}"));
    config.database.url = None;
    let app = App::builder(config)
        .task_store(Arc::new(MemoryStore::new()))
        .build()?;
    let grace = app.config().server.shutdown.grace_period;
    let background = app.start_background();

    let router = Router::new()
        .route("/", get(index))
        .route("/hello", get(|| async { HELLO }))
        .nest_service(PREFIX, app.service());

    println!("serving http://{address}/ with Docket at http://{address}{PREFIX}{MCP_PATH}");
    if !self_check {
        println!(
            "try: cargo run -p docket -- call platform_info --url http://{address}{PREFIX}{MCP_PATH}"
        );
        axum::serve(listener, router).await?;
        return Ok(());
    }

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, router)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });
    let checked = self_check_against(address).await;
    // Stop whatever the check found: axum stops accepting and finishes its open requests
    // while Docket drains its tasks; then report the check first.
    let _ = stop.send(());
    let (served, ()) = tokio::join!(server, background.shutdown(grace));
    checked?;
    served
        .context("the server task panicked")?
        .context("the server stopped with an error")?;
    println!("self-check passed");
    Ok(())
}

/// The application's own front page.
async fn index() -> &'static str {
    "an application of its own, with Docket's MCP endpoint at /docket/mcp\n"
}

/// Calls the application's routes and Docket's through the prefix, and checks the answers.
async fn self_check_against(address: SocketAddr) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let base = format!("http://{address}");

    let hello = get_text(&http, &format!("{base}/hello")).await?;
    ensure!(hello == HELLO, "GET /hello answered {hello:?}");
    let index = get_text(&http, &format!("{base}/")).await?;
    ensure!(index.contains("/docket/mcp"), "GET / answered {index:?}");
    println!("  the application's own routes answer");

    let health = get_text(&http, &format!("{base}{PREFIX}/healthz")).await?;
    ensure!(health == "ok\n", "GET {PREFIX}/healthz answered {health:?}");

    let client = Client {
        http: http.clone(),
        url: format!("{base}{PREFIX}{MCP_PATH}"),
    };
    let listed = client.request("tools/list", None, json!({})).await?;
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .context("tools/list has no tools array")?
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    println!("  tools/list through {PREFIX}: {}", names.join(", "));
    ensure!(
        names.contains(&"platform_info"),
        "tools/list does not offer platform_info"
    );

    let info = client
        .request(
            "tools/call",
            Some("platform_info"),
            json!({"name": "platform_info", "arguments": {}}),
        )
        .await?;
    let info = &info["structuredContent"];
    println!(
        "  platform_info: server {} {}, persona {}, tasks enabled {}",
        info["server"]["name"],
        info["server"]["version"],
        info["persona"],
        info["tasks"]["enabled"]
    );
    ensure!(
        info["server"]["name"] == "docket",
        "platform_info answered {info}"
    );
    ensure!(
        info["tasks"]["enabled"] == true,
        "tasks are off although the app has a task store: {info}"
    );

    // Links come from `server.public_base_url`, so they carry the prefix.
    let metadata: Value = serde_json::from_str(
        &get_text(
            &http,
            &format!("{base}{PREFIX}/.well-known/oauth-protected-resource"),
        )
        .await?,
    )
    .context("the protected-resource metadata is not JSON")?;
    let resource = format!("{base}{PREFIX}{MCP_PATH}");
    ensure!(
        metadata["resource"] == resource.as_str(),
        "the metadata names {} instead of {resource}",
        metadata["resource"]
    );

    // Outside the prefix, `/mcp` is the application's (which has no such route).
    let outside = http
        .post(format!("{base}{MCP_PATH}"))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await?
        .status();
    ensure!(
        outside == reqwest::StatusCode::NOT_FOUND,
        "POST {MCP_PATH} outside the prefix answered {outside}"
    );
    println!("  links name {resource}; {MCP_PATH} outside the prefix is not Docket's");
    Ok(())
}

/// `GET url`, expecting 200 and a text body.
async fn get_text(http: &reqwest::Client, url: &str) -> anyhow::Result<String> {
    let response = http
        .get(url)
        .send()
        .await
        .with_context(|| format!("cannot reach {url}"))?;
    let status = response.status();
    let text = response.text().await?;
    ensure!(status.is_success(), "GET {url} answered {status}: {text}");
    Ok(text)
}

/// Just enough of an MCP client: one JSON-RPC request per POST, with the headers and `_meta`
/// the 2026-07-28 transport requires. None of the calls here reports progress, so every
/// answer is a JSON document, never an SSE stream.
struct Client {
    http: reqwest::Client,
    url: String,
}

impl Client {
    /// Sends `method` and returns its result. `name` goes in `Mcp-Name` (a tool's name).
    async fn request(
        &self,
        method: &str,
        name: Option<&str>,
        mut params: Value,
    ) -> anyhow::Result<Value> {
        params["_meta"] = json!({
            PROTOCOL_VERSION_KEY: PROTOCOL_VERSION,
            CLIENT_CAPABILITIES_KEY: {},
            CLIENT_INFO_KEY: {"name": "axum_mount-self-check", "version": env!("CARGO_PKG_VERSION")},
        });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL_VERSION)
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        let response = request
            .json(&body)
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.url))?;
        let status = response.status();
        let text = response.text().await?;
        let message: Value = serde_json::from_str(&text)
            .with_context(|| format!("HTTP {status} with no JSON answer: {text}"))?;
        if let Some(error) = message.get("error") {
            bail!("{method} failed: {error}");
        }
        ensure!(status.is_success(), "{method} answered HTTP {status}");
        Ok(message["result"].clone())
    }
}
