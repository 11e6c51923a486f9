//! Every bound holds on the newer surfaces, played as an authenticated caller who
//! tries to blow an answer, a row or a stream up (THREATS.md, "Bounds"): a prompt
//! whose rendering multiplies its argument, stored fields past their caps, an
//! identity that opens every stream, the reads that cost spending the rate limit,
//! near names of the server's own prompts, an `initialize` that parks megabytes,
//! and the convention that every tool input declares its size.

use docket_server::{App, Config};
use docket_task::TaskStore as _;
use serde_json::{Value, json};

use crate::support::{
    Backend, StoredServer, TASKS, TestServer, key_of, on_both_backends, read_until, users,
};

/// A server with the prompt library on `database`, for alice and bob (analysts)
/// and root (an administrator), with `extra` YAML first.
async fn library_server(
    database: &docket_storage::test_db::TestDatabase,
    extra: &str,
) -> TestServer {
    let store = database.connect().await;
    let yaml = format!(
        "{extra}\
         admin: {{ persona: admin }}\n\
         personas:\n\
         \x20 analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }} }}\n\
         \x20 admin: {{ roles: [admin], tools: {{ allow: [\"*\"] }} }}\n"
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[
        ("alice", &["analyst"]),
        ("bob", &["analyst"]),
        ("root", &["admin"]),
    ]);
    let app = App::builder(config)
        .prompt_library(store.prompt_library())
        .build()
        .expect("app");
    TestServer::start(app).await
}

async fn rpc_as(server: &TestServer, user: &str, method: &str, params: Value) -> (u16, Value) {
    server
        .rpc(method, params)
        .header("x-api-key", &key_of(user))
        .send()
        .await
}

/// The whole answer to a `manage_prompt` call.
async fn manage_prompt_answer(server: &TestServer, user: &str, arguments: Value) -> Value {
    let (_, body) = rpc_as(
        server,
        user,
        "tools/call",
        json!({"name": "manage_prompt", "arguments": arguments}),
    )
    .await;
    body
}

async fn manage_prompt(server: &TestServer, user: &str, arguments: Value) -> Value {
    manage_prompt_answer(server, user, arguments).await["result"].clone()
}

/// Whether a `manage_prompt` call was refused: by the tool, or (past a size its
/// input schema declares) by the arguments' check before the tool runs.
async fn manage_prompt_refused(server: &TestServer, user: &str, arguments: Value) -> bool {
    let body = manage_prompt_answer(server, user, arguments).await;
    body["result"]["isError"] == true || body["error"]["code"] == -32602
}

fn said(result: &Value) -> String {
    result["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

on_both_backends!(a_prompt_that_multiplies_its_argument_is_refused_before_it_is_rendered);

/// A template under its cap that repeats one placeholder 13 000 times, given a
/// 16 KiB argument, would render to 213 MB: `prompts/get` refuses it, naming the
/// limit, and the same prompt with a short argument still renders.
async fn a_prompt_that_multiplies_its_argument_is_refused_before_it_is_rendered(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let server = library_server(&database, "").await;
    let created = manage_prompt(
        &server,
        "alice",
        json!({"command": "create", "name": "echo", "description": "Echoes.",
               "template": "{{a}}".repeat(13_000),
               "arguments": [{"name": "a", "required": true}], "shared_with": ["*"]}),
    )
    .await;
    assert_ne!(created["isError"], true, "{created}");
    let (status, refused) = rpc_as(
        &server,
        "bob",
        "prompts/get",
        json!({"name": "echo", "arguments": {"a": "v".repeat(16 * 1024)}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("212992000 bytes") && message.contains(&(1 << 20).to_string()),
        "the size and the limit are named: {message}"
    );
    let (_, rendered) = rpc_as(
        &server,
        "bob",
        "prompts/get",
        json!({"name": "echo", "arguments": {"a": "v"}}),
    )
    .await;
    let text = rendered["result"]["messages"][0]["content"]["text"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(text, "v".repeat(13_000), "{rendered}");
}

on_both_backends!(stored_prompt_fields_have_caps_and_names_read_alike);

/// Every field a caller writes into a prompt has its cap (the description, an
/// argument's, the scripts and personas it names); a near name of a built-in
/// prompt cannot be taken; and creating a name someone holds out of sight reads
/// exactly as creating a built-in's name, never "exists".
async fn stored_prompt_fields_have_caps_and_names_read_alike(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let server = library_server(&database, "").await;
    let base = || {
        json!({"command": "create", "name": "capped", "description": "d", "template": "t {{a}}",
               "arguments": [{"name": "a"}]})
    };
    let oversized = [
        ("description", json!("d".repeat(2049))),
        (
            "arguments",
            json!([{"name": "a", "description": "d".repeat(1025)}]),
        ),
        ("scripts", json!(["s".repeat(129)])),
        ("shared_with", json!(["p".repeat(129)])),
        ("shared_with", json!(vec!["p"; 65])),
    ];
    for (field, value) in oversized {
        let mut arguments = base();
        arguments[field] = value;
        assert!(
            manage_prompt_refused(&server, "alice", arguments).await,
            "{field}"
        );
    }
    assert_ne!(
        manage_prompt(&server, "alice", base()).await["isError"],
        true
    );

    for near in [
        "Explore_Table",
        "explore_table.",
        "explore-table",
        "EXPLORETABLE",
    ] {
        let mut arguments = base();
        arguments["name"] = json!(near);
        arguments["shared_with"] = json!(["*"]);
        assert!(
            manage_prompt_refused(&server, "alice", arguments).await,
            "{near}"
        );
    }

    // alice's private prompt, and a built-in's name: bob is told the same.
    let mut private = base();
    private["name"] = json!("alices-own");
    assert_ne!(
        manage_prompt(&server, "alice", private).await["isError"],
        true
    );
    let mut taken = base();
    taken["name"] = json!("alices-own");
    let hidden = manage_prompt(&server, "bob", taken).await;
    let mut builtin = base();
    builtin["name"] = json!("explore_table");
    let reserved = manage_prompt(&server, "bob", builtin).await;
    assert_eq!(hidden["isError"], true, "{hidden}");
    assert_eq!(
        said(&hidden).replace("alices-own", "NAME"),
        said(&reserved).replace("explore_table", "NAME"),
        "{hidden} / {reserved}"
    );
    assert!(!said(&hidden).contains("exist"), "{hidden}");
}

on_both_backends!(the_reads_that_cost_spend_the_rate_limit);

/// `prompts/list`, `resources/list` and `resources/read` take a token each, as a
/// tool call does: past the burst the next read is refused with 429 and the limit
/// code, and another identity is not held back. `completion/complete`, sent on every
/// keystroke, spends only for the statements it sends Trino (the completions tests)
/// and past the budget suggests nothing instead of failing.
async fn the_reads_that_cost_spend_the_rate_limit(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let store = database.connect().await;
    let yaml = "rate_limit: { requests_per_minute: 1, burst: 3 }\n\
                personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"]), ("bob", &["analyst"])]);
    let stored = StoredServer::start_with(config, &database, false, |builder| {
        builder.prompt_library(store.prompt_library())
    })
    .await;
    let server = &stored.server;
    let reads = [
        ("prompts/list", json!({})),
        ("resources/list", json!({})),
        ("resources/read", json!({"uri": "docket://assets/nothing"})),
    ];
    for (method, params) in &reads {
        let (status, answer) = rpc_as(server, "alice", method, params.clone()).await;
        assert!(
            status != 429 && status != 404,
            "{method} is served and within the burst: {status} {answer}"
        );
    }
    let (status, refused) = rpc_as(server, "alice", "prompts/list", json!({})).await;
    assert_eq!(status, 429, "{refused}");
    assert_eq!(refused["error"]["code"], -32029, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("rate_limit"),
        "{refused}"
    );
    let (status, _) = rpc_as(server, "bob", "prompts/list", json!({})).await;
    assert_eq!(status, 200, "bob has a budget of his own");
    let (status, quiet) = rpc_as(
        server,
        "alice",
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "nothing"},
               "argument": {"name": "a", "value": ""}}),
    )
    .await;
    assert_eq!(status, 200, "{quiet}");
}

/// One identity holds at most `server.max_streams_per_identity` listens; the next
/// is refused with 429 and a message that names the setting, someone else still
/// listens, and a closed stream frees its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_identity_cannot_hold_every_stream() {
    let database = docket_storage::test_db::TestDatabase::sqlite().await;
    let yaml = "server: { max_streams_per_identity: 2 }\n\
                personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"]), ("bob", &["analyst"])]);
    let stored = StoredServer::start(config, &database, false).await;
    let server = &stored.server;
    let listen = |user: &'static str| async move {
        server
            .rpc(
                "subscriptions/listen",
                json!({"notifications": {"taskIds": []}}),
            )
            .capabilities(json!({"extensions": {TASKS: {}}}))
            .header("x-api-key", &key_of(user))
            .response()
            .await
    };
    let acknowledged =
        |message: &Value| message["method"] == "notifications/subscriptions/acknowledged";
    let mut first = listen("alice").await;
    read_until(&mut first, acknowledged).await;
    let mut second = listen("alice").await;
    read_until(&mut second, acknowledged).await;
    let refused = listen("alice").await;
    assert_eq!(refused.status().as_u16(), 429);
    let refused: Value = refused.json().await.expect("JSON");
    assert_eq!(refused["error"]["code"], -32029, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("server.max_streams_per_identity"),
        "{refused}"
    );
    let mut bobs = listen("bob").await;
    read_until(&mut bobs, acknowledged).await;
    // A stream given up frees its place (the server notices at its next write, so
    // the test asks until the place is back, not for a time).
    drop(first);
    loop {
        let mut again = listen("alice").await;
        if again.status().as_u16() == 200 {
            read_until(&mut again, acknowledged).await;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    drop(second);
}

/// One identity holds at most its share of `server.max_connections` in requests
/// at once: with 8 connections and a quarter each, alice's two open streams are
/// her share, her next request of any kind is refused, and bob is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_identity_holds_at_most_its_share_of_the_connections() {
    let database = docket_storage::test_db::TestDatabase::sqlite().await;
    let yaml = "server: { max_connections: 8, max_connection_share_percent: 25 }\n\
                personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"]), ("bob", &["analyst"])]);
    let stored = StoredServer::start(config, &database, false).await;
    let server = &stored.server;
    let acknowledged =
        |message: &Value| message["method"] == "notifications/subscriptions/acknowledged";
    let mut streams = Vec::new();
    for _ in 0..2 {
        let mut stream = server
            .rpc(
                "subscriptions/listen",
                json!({"notifications": {"taskIds": []}}),
            )
            .capabilities(json!({"extensions": {TASKS: {}}}))
            .header("x-api-key", &key_of("alice"))
            .response()
            .await;
        read_until(&mut stream, acknowledged).await;
        streams.push(stream);
    }
    let (status, refused) = rpc_as(server, "alice", "tools/list", json!({})).await;
    assert_eq!(status, 429, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("server.max_connection_share_percent"),
        "{refused}"
    );
    let (status, _) = rpc_as(server, "bob", "tools/list", json!({})).await;
    assert_eq!(status, 200);
    drop(streams);
}

/// Posts an earlier-era request, in the session `session` when given.
async fn legacy_post(
    server: &TestServer,
    session: Option<&str>,
    method: &str,
    params: Value,
) -> reqwest::Response {
    let mut request = server
        .http
        .post(server.url("/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(session) = session {
        request = request
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18");
    }
    request
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("sent")
}

fn initialize_params(capabilities: Value) -> Value {
    json!({"protocolVersion": "2025-06-18", "capabilities": capabilities,
           "clientInfo": {"name": "docket-tests", "version": "1"}})
}

/// Anonymous callers share one identity, but not their sessions: with one session
/// allowed per identity, a second anonymous `initialize` does not end the first
/// one's session, and each session opens only with its own id.
#[tokio::test]
async fn anonymous_sessions_do_not_evict_each_other() {
    let mut config = Config::embedded_default();
    config.server.max_sessions_per_identity = 1;
    let server = TestServer::start(App::builder(config).build().expect("app")).await;
    let open = || async {
        let response = legacy_post(&server, None, "initialize", initialize_params(json!({}))).await;
        assert_eq!(response.status().as_u16(), 200);
        response.headers()["mcp-session-id"]
            .to_str()
            .expect("id")
            .to_owned()
    };
    let first = open().await;
    let second = open().await;
    for session in [&first, &second] {
        let response = legacy_post(&server, Some(session), "ping", json!({})).await;
        assert_eq!(response.status().as_u16(), 200, "{session}");
    }
    let unknown = legacy_post(&server, Some(&"0".repeat(32)), "ping", json!({})).await;
    assert_eq!(unknown.status().as_u16(), 404);
}

/// `initialize` that declares megabytes of capabilities is refused before a
/// session is stored, naming the limit.
#[tokio::test]
async fn an_initialize_cannot_park_megabytes() {
    let server = TestServer::default_app().await;
    let padding = "x".repeat(64 * 1024);
    let response = legacy_post(
        &server,
        None,
        "initialize",
        initialize_params(json!({"experimental": {"padding": padding}})),
    )
    .await;
    assert_eq!(response.status().as_u16(), 400);
    assert!(response.headers().get("mcp-session-id").is_none());
    let body: Value = response.json().await.expect("JSON");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("16384"),
        "{body}"
    );
}

/// Every string and array in every registered tool's input schema declares its
/// size (`maxLength`, `maxItems`; an `enum` or `const` is bounded by itself): the
/// convention that keeps the next tool from forgetting it. The server has every
/// kind of connection, scripts, assets and the prompt library, so every tool is
/// registered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_input_declares_its_size() {
    let database = docket_storage::test_db::TestDatabase::sqlite().await;
    let store = database.connect().await;
    let yaml = "admin: { persona: admin }\n\
                personas:\n  admin: { roles: [admin], tools: { allow: [\"*\"] } }\n\
                connections:\n\
                \x20 warehouse: { kind: trino, url: \"http://127.0.0.1:9\", user: docket }\n\
                \x20 shop: { kind: api, base_url: \"http://127.0.0.1:9\" }\n\
                \x20 catalog: { kind: graphql, endpoint: \"http://127.0.0.1:9/graphql\" }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("root", &["admin"])]);
    let stored = StoredServer::start_with(config, &database, true, |builder| {
        builder.prompt_library(store.prompt_library())
    })
    .await;
    let (_, listed) = rpc_as(&stored.server, "root", "tools/list", json!({})).await;
    let tools = listed["result"]["tools"].as_array().expect("tools").clone();
    let names: Vec<&str> = tools
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    for expected in [
        "trino_export",
        "api_export",
        "graphql_export",
        "manage_script",
        "run_script",
        "manage_prompt",
        "list_assets",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let mut unbounded = Vec::new();
    for tool in &tools {
        let name = tool["name"].as_str().unwrap_or_default();
        docket_server::registry::unbounded_inputs(&tool["inputSchema"], name, &mut unbounded);
    }
    assert!(
        unbounded.is_empty(),
        "inputs without maxLength / maxItems:\n{}",
        unbounded.join("\n")
    );
}

/// A script's `platform.call` is held to `server.max_request_bytes`, as a request
/// is: a draft that builds a 100 000-byte argument under a 64 KiB limit fails with
/// the limit named, and the tool never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripts_call_is_held_to_the_request_size() {
    let database = docket_storage::test_db::TestDatabase::sqlite().await;
    let yaml = "server: { max_request_bytes: 65536 }\n\
                personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"])]);
    let stored = StoredServer::start(config, &database, true).await;
    let (_, answer) = rpc_as(
        &stored.server,
        "alice",
        "tools/call",
        json!({"name": "manage_script", "arguments": {"command": "run_draft",
               "source": "platform.call('platform_info', {'padding': 'a' * 100000})"}}),
    )
    .await;
    let draft = &answer["result"]["structuredContent"];
    assert_eq!(draft["status"], "failed", "{answer}");
    assert!(
        draft.to_string().contains("server.max_request_bytes"),
        "{answer}"
    );
}

/// A session in use never expires: with a 4 s idle timeout, one pinged every half
/// second for 6 s is still open (its last use is written every quarter of the
/// timeout, not only once a minute).
#[tokio::test]
async fn a_session_in_use_outlives_its_idle_timeout() {
    let mut config = Config::embedded_default();
    config.server.session_idle_timeout = std::time::Duration::from_secs(4);
    let server = TestServer::start(App::builder(config).build().expect("app")).await;
    let response = legacy_post(&server, None, "initialize", initialize_params(json!({}))).await;
    let session = response.headers()["mcp-session-id"]
        .to_str()
        .expect("id")
        .to_owned();
    for _ in 0..12 {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let ping = legacy_post(&server, Some(&session), "ping", json!({})).await;
        assert_eq!(ping.status().as_u16(), 200, "a used session expired");
    }
}

on_both_backends!(a_consent_runs_its_statement_once_on_any_replica);

/// Two replicas share one database and one `request_state_secret`: a consent
/// asked and answered on one runs its statement there, and the same sealed answer
/// replayed to the other runs nothing (a 2025-era session refuses the same).
async fn a_consent_runs_its_statement_once_on_any_replica(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let double = docket_trino_double::TrinoDouble::start()
        .await
        .expect("double");
    let yaml = format!(
        "server: {{ request_state_secret: shared-between-replicas }}\n\
         connections:\n  warehouse: {{ kind: trino, url: \"{}\", user: docket, consent: always }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n",
        double.url()
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"])]);
    let first = StoredServer::start(config.clone(), &database, false).await;
    let second = StoredServer::start(config, &database, false).await;
    let caps = json!({"elicitation": {}});
    let arguments = json!({"sql": "SELECT 1"});
    let call = |server: &TestServer, params: Value| {
        server
            .rpc("tools/call", params)
            .capabilities(caps.clone())
            .header("x-api-key", &key_of("alice"))
            .send()
    };
    let (_, asked) = call(
        &first.server,
        json!({"name": "trino_query", "arguments": arguments}),
    )
    .await;
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("asked: {asked}"))
        .to_owned();
    let answered = json!({"name": "trino_query", "arguments": arguments, "requestState": state,
        "inputResponses": {"consent": {"action": "accept", "content": {"proceed": true}}}});
    let (_, ran) = call(&first.server, answered.clone()).await;
    assert_eq!(ran["result"]["resultType"], "complete", "{ran}");
    assert_ne!(ran["result"]["isError"], true, "{ran}");
    double.clear_requests();
    let (_, replayed) = call(&second.server, answered).await;
    assert_eq!(replayed["result"]["isError"], true, "{replayed}");
    assert!(replayed.to_string().contains("already used"), "{replayed}");
    let ran_again: Vec<String> = double
        .submitted()
        .iter()
        .map(|request| request.body.clone())
        .filter(|sql| !sql.starts_with("EXPLAIN"))
        .collect();
    assert!(ran_again.is_empty(), "{ran_again:?}");
}

/// An asset store whose first `refusals` creates answer "unavailable", the first of
/// them after committing (an answer lost on the way back, as a cut connection loses
/// it): the database briefly away at the moment an export records its asset.
struct BrieflyAway {
    inner: std::sync::Arc<dyn docket_catalog::AssetStore>,
    refusals: std::sync::atomic::AtomicU32,
}

#[async_trait::async_trait]
impl docket_catalog::AssetStore for BrieflyAway {
    async fn create_or_get(
        &self,
        asset: docket_catalog::NewAsset,
    ) -> Result<docket_catalog::CreateOutcome, docket_catalog::CatalogError> {
        use std::sync::atomic::Ordering;
        let left = self.refusals.load(Ordering::SeqCst);
        if left == 0 {
            return self.inner.create_or_get(asset).await;
        }
        self.refusals.store(left - 1, Ordering::SeqCst);
        if left == 2 {
            // This one commits, and its answer is lost.
            self.inner.create_or_get(asset).await?;
        }
        Err(docket_catalog::CatalogError::Unavailable(
            "connection reset".into(),
        ))
    }
    async fn find_by_idempotency_key(
        &self,
        owner: &str,
        key: &str,
    ) -> Result<Option<docket_catalog::Asset>, docket_catalog::CatalogError> {
        self.inner.find_by_idempotency_key(owner, key).await
    }
    async fn get(
        &self,
        id: &str,
    ) -> Result<Option<docket_catalog::Asset>, docket_catalog::CatalogError> {
        self.inner.get(id).await
    }
    async fn list(
        &self,
        owner: Option<&str>,
        limit: u32,
        before: Option<&docket_catalog::PageCursor>,
    ) -> Result<Vec<docket_catalog::Asset>, docket_catalog::CatalogError> {
        self.inner.list(owner, limit, before).await
    }
    async fn delete(&self, id: &str) -> Result<bool, docket_catalog::CatalogError> {
        self.inner.delete(id).await
    }
}

on_both_backends!(an_asset_whose_bytes_are_written_survives_a_brief_outage);

/// An export whose bytes are written while the database is briefly away keeps its
/// asset: the row is tried again (for `tasks.stale_after`), an attempt that
/// committed although its answer was lost is found and kept, and the bytes are
/// not deleted. (It once failed "could not record the asset" and deleted them.)
async fn an_asset_whose_bytes_are_written_survives_a_brief_outage(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let store = database.connect().await;
    let yaml = "personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"])]);
    let files = std::env::temp_dir().join(format!(
        "docket-assets-{}",
        docket_catalog::generate_id().expect("id")
    ));
    let away = std::sync::Arc::new(BrieflyAway {
        inner: store.asset_store(),
        refusals: std::sync::atomic::AtomicU32::new(2),
    });
    let app = App::builder(config)
        .task_store(store.task_store())
        .sessions(store.session_store())
        .scripts(store.script_store())
        .assets(
            away,
            Some(store.call_catalog()),
            std::sync::Arc::new(docket_export::sink::FilesystemSink::new(&files)),
        )
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    let (_, answer) = rpc_as(
        &server,
        "alice",
        "tools/call",
        json!({"name": "manage_script", "arguments": {"command": "run_draft",
               "source": "platform.export('kept', [{'a': 1}, {'a': 2}], 'csv')"}}),
    )
    .await;
    let draft = &answer["result"]["structuredContent"];
    assert_eq!(draft["status"], "succeeded", "{answer}");
    let asset_id = draft["result"]["outputs"][0]["asset_id"]
        .as_str()
        .unwrap_or_else(|| panic!("an asset: {answer}"));
    let asset = store
        .asset_store()
        .get(asset_id)
        .await
        .expect("read")
        .expect("the row is there");
    let listed = store
        .asset_store()
        .list(Some(&asset.owner), 10, None)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1, "one row, not two: {listed:?}");
    let bytes = crate::support::files_under(&files);
    assert_eq!(bytes.len(), 1, "the bytes are kept: {bytes:?}");
}

/// A call's audit row survives a store that is briefly away when the call ends: it
/// is tried again (for `tasks.stale_after`) instead of once, so "audited once" holds
/// for every call. (Rows of calls made by runs were missing after a soak.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_row_is_written_after_a_brief_outage() {
    let store = std::sync::Arc::new(docket_task::memory::FlakyStore::default());
    let app = App::builder(Config::embedded_default())
        .task_store(std::sync::Arc::clone(&store) as std::sync::Arc<dyn docket_task::TaskStore>)
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    store.set_failing(true);
    let (status, answer) = server
        .rpc(
            "tools/call",
            json!({"name": "platform_info", "arguments": {}}),
        )
        .send()
        .await;
    assert_eq!(status, 200, "{answer}");
    // The row's first attempts fail; then the store is back.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    store.set_failing(false);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let rows = store
            .audit_for_tool("platform_info", 10)
            .await
            .expect("audit");
        if !rows.is_empty() {
            assert_eq!(rows.len(), 1, "{rows:?}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the audit row was never written"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
