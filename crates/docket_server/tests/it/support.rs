//! Test support: a server on a loopback port running an [`App`], and a small MCP
//! client that sends well-formed requests unless a test says otherwise.

use std::net::SocketAddr;
use std::time::Duration;

use docket_server::auth::{ApiKeyConfig, AuthConfig};
use docket_server::{App, Config};
use docket_storage::test_db::{PostgresServer, TestDatabase};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// A running server; dropping it shuts the server down.
pub(crate) struct TestServer {
    pub(crate) addr: SocketAddr,
    pub(crate) app: App,
    pub(crate) http: reqwest::Client,
    shutdown: Option<oneshot::Sender<()>>,
    pub(crate) stopped: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
}

impl TestServer {
    /// Serves `app` on 127.0.0.1 with an ephemeral port.
    pub(crate) async fn start(app: App) -> Self {
        let served = app.clone();
        Self::serving(app, |listener, signal| {
            tokio::spawn(async move {
                docket_server::serve(listener, served, async {
                    let _ = signal.await;
                })
                .await
            })
        })
        .await
    }

    /// `app` behind a listener on 127.0.0.1 with an ephemeral port, served by `serve`
    /// until the shutdown signal it is given fires.
    async fn serving(
        app: App,
        serve: impl FnOnce(
            tokio::net::TcpListener,
            oneshot::Receiver<()>,
        ) -> tokio::task::JoinHandle<std::io::Result<()>>,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (shutdown, signal) = oneshot::channel::<()>();
        let stopped = serve(listener, signal);
        Self {
            addr,
            app,
            http: reqwest::Client::new(),
            shutdown: Some(shutdown),
            stopped: Some(stopped),
        }
    }

    /// Serves `app`'s routes alone, as an embedder mounting [`App::service`] would
    /// before calling `App::start_background`: no heartbeat, no maintenance pass, so
    /// a test sees what a read does by itself, with no sweep racing it.
    pub(crate) async fn start_without_background(app: App) -> Self {
        let router = axum::Router::new().fallback_service(app.service());
        Self::serving(app, |listener, signal| {
            tokio::spawn(async move {
                axum::serve(listener, router)
                    .with_graceful_shutdown(async {
                        let _ = signal.await;
                    })
                    .await
            })
        })
        .await
    }

    /// Serves the embedded default configuration plus nothing else.
    pub(crate) async fn default_app() -> Self {
        Self::start(
            App::builder(Config::embedded_default())
                .build()
                .expect("app"),
        )
        .await
    }

    /// Asks the server to shut down (as SIGTERM would).
    pub(crate) fn begin_shutdown(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// A request builder for `method` with every header and `_meta` field right.
    pub(crate) fn rpc(&self, method: &str, params: Value) -> Rpc {
        Rpc::new(self, method, params)
    }

    /// Calls a tool with well-formed headers; returns (status, body JSON).
    pub(crate) async fn call_tool(&self, name: &str, arguments: Value) -> (u16, Value) {
        self.rpc("tools/call", json!({"name": name, "arguments": arguments}))
            .send()
            .await
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.begin_shutdown();
    }
}

/// The `_meta` a well-behaved client sends.
pub(crate) fn meta(capabilities: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
        "io.modelcontextprotocol/clientInfo": {"name": "docket-tests", "version": "0"}
    })
}

/// One JSON-RPC request under construction.
pub(crate) struct Rpc {
    http: reqwest::Client,
    url: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Value,
}

impl Rpc {
    fn new(server: &TestServer, method: &str, mut params: Value) -> Self {
        if params.get("_meta").is_none() {
            params["_meta"] = meta(json!({}));
        }
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert(
            "accept",
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2026-07-28"),
        );
        headers.insert("mcp-method", HeaderValue::from_str(method).expect("header"));
        let name = match method {
            "tools/call" | "prompts/get" => params.get("name").and_then(Value::as_str),
            "resources/read" => params.get("uri").and_then(Value::as_str),
            "tasks/get" | "tasks/update" | "tasks/cancel" => {
                params.get("taskId").and_then(Value::as_str)
            }
            _ => None,
        };
        if let Some(name) = name {
            // A name a header cannot carry travels base64-wrapped, as clients send it.
            let value = HeaderValue::from_str(name).unwrap_or_else(|_| {
                use base64::Engine as _;
                let wrapped = format!(
                    "=?base64?{}?=",
                    base64::engine::general_purpose::STANDARD.encode(name)
                );
                HeaderValue::from_str(&wrapped).expect("header")
            });
            headers.insert("mcp-name", value);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        Self {
            http: server.http.clone(),
            url: server.url("/mcp"),
            headers,
            body,
        }
    }

    pub(crate) fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.insert(
            HeaderName::from_static(name),
            HeaderValue::from_str(value).expect("header"),
        );
        self
    }

    pub(crate) fn without_header(mut self, name: &'static str) -> Self {
        self.headers.remove(name);
        self
    }

    pub(crate) fn capabilities(mut self, capabilities: Value) -> Self {
        self.body["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = capabilities;
        self
    }

    pub(crate) async fn response(self) -> reqwest::Response {
        self.http
            .post(&self.url)
            .headers(self.headers)
            .json(&self.body)
            .send()
            .await
            .expect("request sent")
    }

    /// Sends; returns the status and the JSON body (Null for an empty or non-JSON body).
    pub(crate) async fn send(self) -> (u16, Value) {
        let response = self.response().await;
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }
}

/// Posts a raw body with the standard headers for `method`.
pub(crate) async fn post_raw(
    server: &TestServer,
    method: &str,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    server
        .http
        .post(server.url("/mcp"))
        .header("content-type", "application/json")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .body(body)
        .send()
        .await
        .expect("request sent")
}

/// Parses the `data:` lines of an SSE body into JSON messages.
pub(crate) fn sse_messages(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|data| serde_json::from_str(data.trim()).expect("each data line is one JSON message"))
        .collect()
}

/// The tasks extension's name.
pub(crate) const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Where a fixture keeps its tasks, assets and call records.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// A fresh database; `None` only when PostgreSQL is absent and not required
    /// (DOCKET_REQUIRE_POSTGRES=1 turns that into a failure).
    pub(crate) async fn database(self) -> Option<TestDatabase> {
        match self {
            Backend::Sqlite => Some(TestDatabase::sqlite().await),
            Backend::Postgres => TestDatabase::postgres(&postgres_server()).await,
        }
    }
}

/// The PostgreSQL server the environment names (`DOCKET_TEST_DATABASE_URL`,
/// `DOCKET_REQUIRE_POSTGRES`): the tests read the variables, the test-database
/// helpers do not.
pub(crate) fn postgres_server() -> PostgresServer {
    PostgresServer::from_lookup(|name| std::env::var(name).ok())
}

/// A server whose tasks, assets and call records (and scripts, when asked) live
/// in one test database, with asset files in a fresh temporary folder.
pub(crate) struct StoredServer {
    pub(crate) server: TestServer,
    pub(crate) store: docket_storage::Store,
    pub(crate) files: std::path::PathBuf,
}

impl StoredServer {
    /// Builds an app from `config` over `database` and serves it.
    pub(crate) async fn start(config: Config, database: &TestDatabase, scripts: bool) -> Self {
        Self::start_with(config, database, scripts, |builder| builder).await
    }

    /// [`StoredServer::start`], with `customize` applied to the builder last
    /// (a test's scheduler clock, say).
    pub(crate) async fn start_with(
        config: Config,
        database: &TestDatabase,
        scripts: bool,
        customize: impl FnOnce(docket_server::AppBuilder) -> docket_server::AppBuilder,
    ) -> Self {
        let store = database.connect().await;
        let files = std::env::temp_dir().join(format!(
            "docket-assets-{}",
            docket_catalog::generate_id().expect("id")
        ));
        let mut builder = App::builder(config)
            .task_store(store.task_store())
            .sessions(store.session_store())
            .principals(store.principal_store())
            .links(store.link_store())
            .spools(store.spool_store())
            .retention(store.retention());
        if scripts {
            builder = builder.scripts(store.script_store());
        }
        let app = customize(builder)
            .assets(
                store.asset_store(),
                Some(store.call_catalog()),
                std::sync::Arc::new(docket_export::sink::FilesystemSink::new(&files)),
            )
            .build()
            .expect("app");
        Self {
            server: TestServer::start(app).await,
            store,
            files,
        }
    }
}

/// Runs each named `async fn(Backend)` as two tests, `<name>::sqlite` and
/// `<name>::postgres`, on a multi-threaded runtime as the server runs (a script
/// run's evaluator thread waits on host calls that the runtime must drive).
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$name(crate::support::Backend::Sqlite).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$name(crate::support::Backend::Postgres).await;
            }
        }
    )*};
}
pub(crate) use on_both_backends;

/// The API key of the test user `user`.
pub(crate) fn key_of(user: &str) -> String {
    format!("{user}-key-0123456789abcdef")
}

/// API-key users with their roles, each with the key [`key_of`] gives.
pub(crate) fn users(users: &[(&str, &[&str])]) -> AuthConfig {
    AuthConfig {
        api_keys: users
            .iter()
            .map(|(name, roles)| ApiKeyConfig {
                name: (*name).into(),
                key: Some(key_of(name)),
                key_sha256: None,
                email: None,
                roles: roles.iter().map(|role| (*role).to_owned()).collect(),
                user: None,
            })
            .collect(),
        ..AuthConfig::default()
    }
}

impl TestServer {
    /// Calls a tool as `user`, declaring `capabilities`; returns the whole answer.
    pub(crate) async fn call_as(
        &self,
        user: &str,
        tool: &str,
        arguments: Value,
        capabilities: Value,
    ) -> Value {
        let (_, body) = self
            .rpc("tools/call", json!({"name": tool, "arguments": arguments}))
            .capabilities(capabilities)
            .header("x-api-key", &key_of(user))
            .send()
            .await;
        body
    }

    /// `tasks/get` as `user`; returns the answer's `result`.
    pub(crate) async fn task_as(&self, user: &str, task_id: &str) -> Value {
        let (_, body) = self
            .rpc("tasks/get", json!({"taskId": task_id}))
            .capabilities(json!({"extensions": {TASKS: {}}}))
            .header("x-api-key", &key_of(user))
            .send()
            .await;
        body["result"].clone()
    }

    /// `tasks/cancel` as `user`.
    pub(crate) async fn cancel_task_as(&self, user: &str, task_id: &str) {
        self.rpc("tasks/cancel", json!({"taskId": task_id}))
            .capabilities(json!({"extensions": {TASKS: {}}}))
            .header("x-api-key", &key_of(user))
            .send()
            .await;
    }

    /// Polls the task until it has `status` (for two minutes at most).
    pub(crate) async fn wait_task_as(&self, user: &str, task_id: &str, status: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        loop {
            let task = self.task_as(user, task_id).await;
            if task["status"] == status {
                return task;
            }
            assert!(tokio::time::Instant::now() < deadline, "task stayed {task}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `GET /assets/{id}/content` as `user`.
    pub(crate) async fn download_as(&self, user: &str, asset_id: &str) -> reqwest::Response {
        self.http
            .get(self.url(&format!("/assets/{asset_id}/content")))
            .header("x-api-key", key_of(user))
            .send()
            .await
            .expect("sent")
    }
}

/// Every file below `root`, recursively (none when it does not exist).
pub(crate) fn files_under(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                folders.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found
}

/// Reads SSE messages from `response` until `wanted` says stop; returns them all.
pub(crate) async fn read_until(
    response: &mut reqwest::Response,
    wanted: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let mut text = String::new();
    loop {
        let messages = crate::support::sse_messages(&text);
        if messages.iter().any(&wanted) {
            return messages;
        }
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(20), response.chunk())
            .await
            .expect("the stream went quiet")
            .expect("a chunk")
            .expect("the stream ended early");
        text.push_str(std::str::from_utf8(&chunk).expect("utf-8"));
        // Only whole events are parsed.
        if !text.ends_with("\n\n") {
            continue;
        }
    }
}
