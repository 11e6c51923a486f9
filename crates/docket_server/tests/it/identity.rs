//! Each caller's own identity at Trino, on SQLite and PostgreSQL: a connection
//! with `impersonation:` runs every path that reaches Trino as the caller
//! (`trino_query`, `trino_explain`, `trino_browse`, `trino_describe_table`,
//! `trino_export` direct and as a task, consent's EXPLAIN, completions' SHOW, a
//! script run's `platform.query` and a scheduled run as the script's owner); a
//! caller without a session user is refused before anything is sent; every
//! Trino request is labelled (source, client tags, client info, trace token);
//! and the audit row, the call record and the result's `_meta` name the engine
//! user and the Trino query ids, so Trino's query log leads back to the call.

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use docket_run_bridge::clock::{Clock, ManualClock};
use docket_server::config::Config;
use docket_storage::test_db::TestDatabase;
use docket_trino_double::{AccessControlRules, RecordedRequest, TrinoDouble};
use serde_json::{Value, json};
use time::macros::datetime;

use crate::support::{Backend, StoredServer, TASKS, TestServer, key_of, on_both_backends, users};

on_both_backends!(
    every_path_to_trino_runs_as_the_caller,
    a_caller_without_a_session_user_is_refused_before_anything_is_sent,
    audit_rows_call_records_and_results_name_the_engine_user_and_query_ids,
    script_runs_and_scheduled_runs_run_as_the_scripts_owner,
    signed_in_callers_run_as_their_email_claim_transformed,
    trinos_refusal_of_an_impersonation_is_a_clear_tool_error,
    api_connections_carry_each_callers_exchanged_token_or_identity_headers,
);

/// A hang guard, never an assertion about speed.
const PATIENCE: Duration = Duration::from_secs(60);

async fn patiently<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {PATIENCE:?}"))
}

struct Fixture {
    server: TestServer,
    double: TrinoDouble,
    /// The access tokens of the callers who sign in (the others use API keys).
    tokens: std::collections::BTreeMap<String, String>,
    _provider: Option<docket_oidc_provider::OidcProvider>,
    clock: Arc<ManualClock>,
    audit: Arc<dyn docket_task::store::TaskStore>,
    catalog: Arc<dyn docket_catalog::CallCatalog>,
    _database: TestDatabase,
    _files: std::path::PathBuf,
}

/// The session user an API key's holder runs as: alice and bob have one,
/// carol's key names none.
const KEY_USERS: &[(&str, Option<&str>)] = &[
    ("alice", Some("alice")),
    ("bob", Some("bob")),
    ("carol", None),
];

/// `warehouse` impersonates its callers by the `email` claim (an API key names
/// its user in its entry); `careful` does too and asks before every statement.
async fn fixture(backend: Backend) -> Option<Fixture> {
    let database = backend.database().await?;
    let double = TrinoDouble::start().await.expect("double");
    // Ada and Bo sign in at a real OpenID provider; alice, bob and carol use
    // API keys.
    let provider = docket_oidc_provider::OidcProvider::start_or_skip(provider_config(), "identity")
        .await
        .expect("the OpenID provider starts");
    let mut tokens = std::collections::BTreeMap::new();
    if let Some(provider) = &provider {
        for account in ["ada", "bo"] {
            let token = provider
                .user_token(account, "docket", DOCKET_RESOURCE)
                .await
                .expect("a token");
            tokens.insert(account.to_owned(), token);
        }
    }
    let oidc = provider.as_ref().map_or(String::new(), |provider| {
        format!(
            "auth: {{ oidc: {{ issuer: \"{}\", audience: \"{DOCKET_RESOURCE}\" }} }}\n",
            provider.issuer()
        )
    });
    let connection = |name: &str, extra: &str| {
        format!(
            "  {name}: {{ kind: trino, url: \"{}\", user: docket, catalog: memory, schema: default, \
             source: docket-tests, impersonation: {{ user_claim: email, transforms: [strip_domain, lowercase] }}{extra} }}\n",
            double.url()
        )
    };
    let yaml = format!(
        "connections:\n{}{}{oidc}\
         tasks: {{ heartbeat_interval: 100ms }}\n\
         scripts: {{ heartbeat_interval: 100ms, lease: 5s, schedules: {{ interval: 10s }} }}\n\
         rate_limit: {{ requests_per_minute: 100000, burst: 10000 }}\n\
         consent: {{ trino: {{ row_threshold: 1000000000 }} }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n",
        connection("warehouse", ", default: true"),
        connection("careful", ", consent: always"),
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    let oidc = config.auth.oidc.take();
    config.auth = users(
        &KEY_USERS
            .iter()
            .map(|(name, _)| (*name, &["analyst"][..]))
            .collect::<Vec<_>>(),
    );
    for key in &mut config.auth.api_keys {
        key.user = KEY_USERS
            .iter()
            .find(|(name, _)| *name == key.name)
            .and_then(|(_, user)| user.map(str::to_owned));
    }
    config.auth.oidc = oidc;
    let clock = Arc::new(ManualClock::new(datetime!(2026-06-01 03:59:30 UTC)));
    let driven = Arc::clone(&clock) as Arc<dyn Clock>;
    let stored = StoredServer::start_with(config, &database, true, move |builder| {
        builder
            .schedule_clock(driven)
            .prompt_library(Arc::new(docket_catalog::memory::MemoryPrompts::new()))
    })
    .await;
    Some(Fixture {
        server: stored.server,
        double,
        tokens,
        _provider: provider,
        clock,
        audit: stored.store.task_store(),
        catalog: stored.store.call_catalog(),
        _database: database,
        _files: stored.files,
    })
}

impl Fixture {
    /// Sends as `user`: with their access token when they signed in, else
    /// with their API key.
    async fn send(&self, user: &str, method: &str, params: Value, capabilities: Value) -> Value {
        let rpc = self.server.rpc(method, params).capabilities(capabilities);
        let rpc = match self.tokens.get(user) {
            Some(token) => rpc.header("authorization", &format!("Bearer {token}")),
            None => rpc.header("x-api-key", &key_of(user)),
        };
        let (_, body) = rpc.send().await;
        body.get("result").cloned().unwrap_or(body)
    }

    async fn call(&self, user: &str, tool: &str, arguments: Value) -> Value {
        self.send(
            user,
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
            json!({}),
        )
        .await
    }

    /// The statements submitted since the last look, and forgets them.
    fn take_submitted(&self) -> Vec<RecordedRequest> {
        let submitted = self.double.submitted();
        self.double.clear_requests();
        submitted
    }

    async fn wait_task(&self, user: &str, task_id: &str) -> Value {
        patiently("the task's end", async {
            loop {
                let task = self
                    .send(
                        user,
                        "tasks/get",
                        json!({"taskId": task_id}),
                        json!({"extensions": {TASKS: {}}}),
                    )
                    .await;
                if matches!(
                    task["status"].as_str(),
                    Some("completed" | "failed" | "cancelled")
                ) {
                    return task;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }

    /// The audit rows of `tool`, once `done` holds for them.
    async fn audit_until(
        &self,
        tool: &str,
        done: impl Fn(&[docket_task::store::AuditEntry]) -> bool,
    ) -> Vec<docket_task::store::AuditEntry> {
        patiently("the audit rows", async {
            loop {
                let rows = self.audit.audit_for_tool(tool, 100).await.expect("audit");
                if done(&rows) {
                    return rows;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }
}

/// The client tags a statement carried.
fn tags(request: &RecordedRequest) -> Vec<String> {
    request
        .header("x-trino-client-tags")
        .unwrap_or_default()
        .split(',')
        .map(str::to_owned)
        .collect()
}

/// Checks that every statement in `submitted` ran as `user`, labelled with
/// `tool`, and that there was at least one.
fn all_as(submitted: &[RecordedRequest], user: &str, tool: &str) {
    assert!(
        !submitted.is_empty(),
        "{tool} as {user} sent nothing: {submitted:?}"
    );
    for statement in submitted {
        assert_eq!(
            statement.header("x-trino-user"),
            Some(user),
            "{tool}: {}",
            statement.body
        );
        assert_eq!(statement.header("x-trino-source"), Some("docket-tests"));
        let tags = tags(statement);
        assert!(tags.contains(&format!("tool={tool}")), "{tool}: {tags:?}");
        assert!(tags.contains(&"persona=analyst".to_owned()), "{tags:?}");
        let info: Value =
            serde_json::from_str(statement.header("x-trino-client-info").unwrap_or("null"))
                .expect("client info is JSON");
        assert!(info["call"].is_string(), "{info}");
        assert_eq!(
            statement.header("x-trino-trace-token"),
            info["call"].as_str(),
            "the trace token is the call id"
        );
    }
}

async fn every_path_to_trino_runs_as_the_caller(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let mut users_seen = BTreeSet::new();
    // Two API-key callers and, where Node is there, two who signed in with
    // different e-mail claims (Ada@Example.com, bo@corp.example).
    let callers: Vec<String> = ["alice", "bob"]
        .into_iter()
        .map(str::to_owned)
        .chain(f.tokens.keys().cloned())
        .collect();
    for user in callers.iter().map(String::as_str) {
        let sql = json!({"sql": "SELECT orderkey FROM memory.default.orders ORDER BY orderkey", "limit": 3});
        let result = f.call(user, "trino_query", sql.clone()).await;
        assert_eq!(result["isError"], Value::Null, "{result}");
        all_as(&f.take_submitted(), user, "trino_query");

        let result = f
            .call(user, "trino_explain", json!({"sql": sql["sql"]}))
            .await;
        assert_eq!(result["isError"], Value::Null, "{result}");
        let submitted = f.take_submitted();
        assert!(!submitted.is_empty(), "{result}");
        all_as(&submitted, user, "trino_explain");

        let result = f
            .call(user, "trino_browse", json!({"catalog": "memory"}))
            .await;
        assert_eq!(result["isError"], Value::Null, "{result}");
        all_as(&f.take_submitted(), user, "trino_browse");

        let result = f
            .call(
                user,
                "trino_describe_table",
                json!({"table": "memory.default.orders"}),
            )
            .await;
        assert_eq!(result["isError"], Value::Null, "{result}");
        all_as(&f.take_submitted(), user, "trino_describe_table");

        let export = json!({"sql": "SELECT orderkey FROM memory.default.orders", "format": "csv", "name": format!("{user}-orders")});
        let result = f.call(user, "trino_export", export.clone()).await;
        assert_eq!(result["isError"], Value::Null, "{result}");
        all_as(&f.take_submitted(), user, "trino_export");

        let created = f
            .send(
                user,
                "tools/call",
                json!({"name": "trino_export", "arguments": export}),
                json!({"extensions": {TASKS: {}}}),
            )
            .await;
        let task_id = created["taskId"].as_str().expect("a task").to_owned();
        let done = f.wait_task(user, &task_id).await;
        assert_eq!(done["status"], "completed", "{done}");
        let submitted = f.take_submitted();
        all_as(&submitted, user, "trino_export");
        // Consent's EXPLAIN ran before the task existed; the export's query
        // names its task.
        let last = submitted.last().expect("the export's query");
        let info: Value =
            serde_json::from_str(last.header("x-trino-client-info").unwrap_or("null"))
                .expect("client info");
        assert_eq!(info["task"], json!(task_id), "a task's statements name it");

        // Consent's EXPLAIN runs as the caller, before anything else.
        let asked = f
            .send(
                user,
                "tools/call",
                json!({"name": "trino_query", "arguments": {"sql": "SELECT 1", "connection": "careful"}}),
                json!({"elicitation": {}}),
            )
            .await;
        assert_eq!(asked["resultType"], "input_required", "{asked}");
        let submitted = f.take_submitted();
        all_as(&submitted, user, "trino_query");
        assert!(
            submitted[0].body.starts_with("EXPLAIN"),
            "{}",
            submitted[0].body
        );

        // So does the SHOW a completion lists names with.
        let completed = f
            .send(
                user,
                "completion/complete",
                json!({"ref": {"type": "ref/prompt", "name": "explore_table"},
                       "argument": {"name": "table", "value": "mem"},
                       "context": {"arguments": {}}}),
                json!({}),
            )
            .await;
        assert_eq!(
            completed["completion"]["values"],
            json!(["memory."]),
            "{completed}"
        );
        all_as(&f.take_submitted(), user, "completion/complete");
        users_seen.insert(user);
    }
    assert_eq!(users_seen.len(), callers.len());
    assert!(users_seen.len() >= 2);
}

async fn a_caller_without_a_session_user_is_refused_before_anything_is_sent(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    for (tool, arguments) in [
        ("trino_query", json!({"sql": "SELECT 1"})),
        ("trino_explain", json!({"sql": "SELECT 1"})),
        ("trino_browse", json!({})),
        (
            "trino_describe_table",
            json!({"table": "memory.default.orders"}),
        ),
        (
            "trino_export",
            json!({"sql": "SELECT 1", "format": "csv", "name": "x"}),
        ),
        (
            "trino_query",
            json!({"sql": "SELECT 1", "connection": "careful"}),
        ),
    ] {
        let result = f.call("carol", tool, arguments).await;
        assert_eq!(result["isError"], true, "{tool}: {result}");
        let message = result["structuredContent"]["error"]["message"]
            .as_str()
            .unwrap_or_default();
        assert!(
            message.contains("\"carol\"") && message.contains("`user`"),
            "{tool}: {message}"
        );
    }
    assert!(f.take_submitted().is_empty(), "nothing reached Trino");
}

async fn audit_rows_call_records_and_results_name_the_engine_user_and_query_ids(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    let result = f
        .call("alice", "trino_query", json!({"sql": "SELECT 1 AS one"}))
        .await;
    let upstream = &result["_meta"]["io.docket/upstream"];
    assert_eq!(upstream["engine_user"], "alice", "{result}");
    let submitted = f.take_submitted();
    let info: Value =
        serde_json::from_str(submitted[0].header("x-trino-client-info").unwrap_or("null"))
            .expect("client info");
    assert_eq!(upstream["call_id"], info["call"]);
    // Consent's EXPLAIN and the query itself.
    let query_ids = upstream["query_ids"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(query_ids.len(), 2, "{upstream}");
    assert_eq!(submitted.len(), 2);

    let rows = f
        .audit_until("trino_query", |rows| {
            rows.iter().any(|row| row.subject == "apikey:alice")
        })
        .await;
    let row = rows
        .iter()
        .find(|row| row.subject == "apikey:alice")
        .expect("alice's row");
    assert_eq!(row.engine_user.as_deref(), Some("alice"));
    assert_eq!(
        row.call_id.as_ref().map(|id| json!(id)),
        Some(info["call"].clone())
    );
    assert_eq!(
        row.upstream_ids
            .iter()
            .map(|id| json!(id))
            .collect::<Vec<_>>(),
        query_ids
    );

    // An export task's row and its call record name them too.
    let created = f
        .send(
            "bob",
            "tools/call",
            json!({"name": "trino_export", "arguments": {"sql": "SELECT orderkey FROM memory.default.orders", "format": "csv", "name": "bobs"}}),
            json!({"extensions": {TASKS: {}}}),
        )
        .await;
    let task_id = created["taskId"].as_str().expect("a task").to_owned();
    let done = f.wait_task("bob", &task_id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["_meta"]["io.docket/upstream"]["engine_user"], "bob",
        "{done}"
    );
    let rows = f
        .audit_until("trino_export", |rows| {
            rows.iter().any(|row| row.subject == "apikey:bob")
        })
        .await;
    let row = rows
        .iter()
        .find(|row| row.subject == "apikey:bob")
        .expect("bob's row");
    assert_eq!(row.engine_user.as_deref(), Some("bob"), "{row:?}");
    // Consent's EXPLAIN and the export's query.
    assert_eq!(row.upstream_ids.len(), 2, "{row:?}");
    assert_eq!(
        row.call_id.as_ref(),
        done["result"]["_meta"]["io.docket/upstream"]["call_id"]
            .as_str()
            .map(str::to_owned)
            .as_ref()
    );
    let records = f.catalog.recent(None, 100).await.expect("records");
    let record = records
        .iter()
        .find(|record| record.task_id.as_deref() == Some(task_id.as_str()))
        .expect("the export's call record");
    assert_eq!(record.engine_user.as_deref(), Some("bob"));
    assert_eq!(record.upstream_ids, row.upstream_ids);
}

/// A script that queries Trino once.
const QUERY_SCRIPT: &str = "rows = platform.query(\"SELECT 1 AS one\")\nprint(rows[\"rows\"])\n";

async fn script_runs_and_scheduled_runs_run_as_the_scripts_owner(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    for user in ["alice", "bob"] {
        let created = f
            .call(
                user,
                "manage_script",
                json!({"command": "create", "name": "probe", "source": QUERY_SCRIPT}),
            )
            .await;
        assert_ne!(created["isError"], true, "{created}");
        let ran = f.call(user, "run_script", json!({"name": "probe"})).await;
        assert_eq!(ran["structuredContent"]["status"], "succeeded", "{ran}");
        let submitted = f.take_submitted();
        all_as(&submitted, user, "trino_query");
        assert!(!tags(&submitted[0]).contains(&"scheduled".to_owned()));
        let info: Value =
            serde_json::from_str(submitted[0].header("x-trino-client-info").unwrap_or("null"))
                .expect("client info");
        assert_eq!(info["run"], ran["structuredContent"]["run_id"], "{info}");
    }

    let set = f
        .call(
            "alice",
            "manage_script",
            json!({"command": "schedule_set", "name": "probe", "cron": "* * * * *"}),
        )
        .await;
    assert_ne!(set["isError"], true, "{set}");
    f.clock.advance(Duration::from_secs(60));
    let submitted = patiently("the scheduled run's query", async {
        loop {
            let submitted = f.double.submitted();
            if !submitted.is_empty() {
                return submitted;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    all_as(&submitted, "alice", "trino_query");
    assert!(
        tags(&submitted[0]).contains(&"scheduled".to_owned()),
        "{:?}",
        tags(&submitted[0])
    );
}

/// The resource Docket's tokens are issued for.
const DOCKET_RESOURCE: &str = "http://127.0.0.1/docket";

/// A real OpenID provider with two people whose e-mail addresses differ in
/// case and domain, and Docket's client.
fn provider_config() -> docket_oidc_provider::ProviderConfig {
    use docket_oidc_provider::{Account, Client, ProviderConfig, Resource};
    ProviderConfig::new()
        .account(
            "alice",
            Account::new().email("Alice@Example.com").roles(["analyst"]),
        )
        .account(
            "bob",
            Account::new().email("bob@corp.example").roles(["analyst"]),
        )
        .account("nomail", Account::new().roles(["analyst"]))
        .account(
            "ada",
            Account::new().email("Ada@Example.com").roles(["analyst"]),
        )
        .account(
            "bo",
            Account::new().email("bo@corp.example").roles(["analyst"]),
        )
        .client(Client::new("docket", "docket-test-secret"))
        .resource(DOCKET_RESOURCE, Resource::new())
}

async fn signed_in_callers_run_as_their_email_claim_transformed(backend: Backend) {
    let Some(provider) =
        docket_oidc_provider::OidcProvider::start_or_skip(provider_config(), "identity")
            .await
            .expect("the OpenID provider starts")
    else {
        return;
    };
    let Some(database) = backend.database().await else {
        return;
    };
    let double = TrinoDouble::start().await.expect("double");
    let yaml = format!(
        "connections:\n  warehouse: {{ kind: trino, url: \"{}\", user: docket, catalog: memory, schema: default, \
         source: docket-tests, impersonation: {{ user_claim: email, transforms: [strip_domain, lowercase], deny: [root] }} }}\n\
         auth: {{ oidc: {{ issuer: \"{}\", audience: \"{DOCKET_RESOURCE}\" }} }}\n\
         consent: {{ trino: {{ row_threshold: 1000000000 }} }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n",
        double.url(),
        provider.issuer(),
    );
    let config = Config::from_yaml(&yaml, &|_| None).expect("config");
    let stored = StoredServer::start(config, &database, false).await;
    let query = |token: String| {
        let server = &stored.server;
        async move {
            let (_, body) = server
                .rpc(
                    "tools/call",
                    json!({"name": "trino_query", "arguments": {"sql": "SELECT 1 AS one"}}),
                )
                .header("authorization", &format!("Bearer {token}"))
                .send()
                .await;
            body["result"].clone()
        }
    };
    let mut seen = Vec::new();
    for (account, user) in [("alice", "alice"), ("bob", "bob")] {
        let token = provider
            .user_token(account, "docket", DOCKET_RESOURCE)
            .await
            .expect("a token from the provider");
        let result = query(token).await;
        assert_eq!(result["isError"], Value::Null, "{account}: {result}");
        assert_eq!(result["_meta"]["io.docket/upstream"]["engine_user"], user);
        let submitted = double.submitted();
        double.clear_requests();
        all_as(&submitted, user, "trino_query");
        seen.push(user);
    }
    assert_eq!(seen, ["alice", "bob"], "two callers, two session users");

    // A person whose token has no e-mail claim is refused by the claim's name,
    // and nothing reaches Trino.
    let token = provider
        .user_token("nomail", "docket", DOCKET_RESOURCE)
        .await
        .expect("a token");
    let refused = query(token).await;
    assert_eq!(refused["isError"], true, "{refused}");
    let message = refused["structuredContent"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("`email`"), "{message}");
    assert!(double.submitted().is_empty(), "{:?}", double.submitted());
}

async fn trinos_refusal_of_an_impersonation_is_a_clear_tool_error(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let double = TrinoDouble::start().await.expect("double");
    // Trino's file-based access control: Docket's principal may act as alice only.
    double.set_access_control(Some(
        AccessControlRules::from_json(
            r#"{"impersonation": [{"original_user": "docket", "new_user": "alice", "allow": true}]}"#,
        )
        .expect("rules"),
    ));
    let yaml = format!(
        "connections:\n  warehouse: {{ kind: trino, url: \"{}\", user: docket, catalog: memory, schema: default, \
         auth: {{ basic: {{ username: docket, password: docket-secret }} }}, impersonation: {{ user_claim: email }} }}\n\
         consent: {{ trino: {{ row_threshold: 1000000000 }} }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n",
        double.url(),
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"]), ("bob", &["analyst"])]);
    for key in &mut config.auth.api_keys {
        key.user = Some(key.name.clone());
    }
    let stored = StoredServer::start(config, &database, false).await;
    let call = |user: &'static str, tool: &'static str, arguments: Value| {
        let server = &stored.server;
        async move {
            let (_, body) = server
                .rpc("tools/call", json!({"name": tool, "arguments": arguments}))
                .header("x-api-key", &key_of(user))
                .send()
                .await;
            body
        }
    };
    let allowed = call("alice", "trino_query", json!({"sql": "SELECT 1 AS one"})).await;
    assert_eq!(allowed["result"]["isError"], Value::Null, "{allowed}");

    for (tool, arguments) in [
        ("trino_query", json!({"sql": "SELECT 1 AS one"})),
        ("trino_explain", json!({"sql": "SELECT 1 AS one"})),
        (
            "trino_export",
            json!({"sql": "SELECT 1 AS one", "format": "csv", "name": "denied"}),
        ),
    ] {
        let denied = call("bob", tool, arguments).await;
        // A tool error, never a JSON-RPC (internal) error.
        assert!(denied.get("error").is_none(), "{tool}: {denied}");
        let result = &denied["result"];
        assert_eq!(result["isError"], true, "{tool}: {result}");
        let text = result.to_string();
        assert!(
            text.contains("Access Denied: User docket cannot impersonate user bob"),
            "{tool}: {text}"
        );
    }
    let users: BTreeSet<String> = double
        .queries()
        .iter()
        .map(|query| format!("{}:{}", query.user, query.state.as_str()))
        .collect();
    assert!(users.iter().any(|u| u.starts_with("bob:")), "{users:?}");
    assert!(
        double
            .queries()
            .iter()
            .filter(|query| query.user == "bob")
            .all(|query| query
                .error
                .as_ref()
                .is_some_and(|e| e.name == "PERMISSION_DENIED")),
        "every one of bob's queries was refused by Trino"
    );
}

/// The audience of the API upstream's exchanged tokens.
const SHOP_AUDIENCE: &str = "http://127.0.0.1/shop";

async fn api_connections_carry_each_callers_exchanged_token_or_identity_headers(backend: Backend) {
    use docket_oidc_provider::{Account, ExchangePolicy, Resource, jwt_claims};
    let config = provider_config()
        .account(
            "mallory",
            Account::new()
                .email("mallory@corp.example")
                .roles(["analyst"]),
        )
        .resource(SHOP_AUDIENCE, Resource::new())
        .token_exchange(
            ExchangePolicy::new()
                .allow("docket", SHOP_AUDIENCE)
                .refuse_account("mallory")
                .expires_in(300),
        );
    let Some(provider) = docket_oidc_provider::OidcProvider::start_or_skip(config, "identity")
        .await
        .expect("the OpenID provider starts")
    else {
        return;
    };
    let Some(database) = backend.database().await else {
        return;
    };
    let upstream = crate::upstream::Upstream::start().await;
    let exchange = format!(
        "{{ mode: token_exchange, token_url: \"{}\", client_id: docket, client_secret: \"${{EXCHANGE_SECRET}}\", audience: \"{SHOP_AUDIENCE}\" }}",
        provider.token_endpoint()
    );
    let yaml = format!(
        "connections:\n\
         \x20 crm: {{ kind: api, base_url: \"{base}\", identity: {exchange} }}\n\
         \x20 gateway: {{ kind: api, base_url: \"{base}\", identity: {{ mode: headers, headers: {{ X-User-Email: \"{{email}}\" }} }} }}\n\
         \x20 catalog: {{ kind: graphql, endpoint: \"{graphql}\", identity: {exchange} }}\n\
         auth:\n\
         \x20 oidc: {{ issuer: \"{issuer}\", audience: \"{DOCKET_RESOURCE}\" }}\n\
         \x20 api_keys: [{{ name: ci, key: ci-key-0123456789abcdef, email: ci@corp.example, roles: [analyst] }}]\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n",
        base = upstream.url("/v1"),
        graphql = upstream.url("/graphql"),
        issuer = provider.issuer(),
    );
    let env = |name: &str| (name == "EXCHANGE_SECRET").then(|| "docket-test-secret".to_owned());
    let config = Config::from_yaml(&yaml, &env).expect("config");
    let stored = StoredServer::start(config, &database, false).await;
    let call = |credential: (&'static str, String), tool: &'static str, arguments: Value| {
        let server = &stored.server;
        async move {
            let (_, body) = server
                .rpc("tools/call", json!({"name": tool, "arguments": arguments}))
                .header(credential.0, &credential.1)
                .send()
                .await;
            body["result"].clone()
        }
    };
    let echo = json!({"connection": "crm", "method": "GET", "path": "/echo"});

    for account in ["alice", "bob"] {
        let token = provider
            .user_token(account, "docket", DOCKET_RESOURCE)
            .await
            .expect("a token");
        let bearer = ("authorization", format!("Bearer {token}"));
        let before = upstream.seen().len();
        let result = call(bearer.clone(), "api_invoke_endpoint", echo.clone()).await;
        assert_eq!(result["isError"], Value::Null, "{account}: {result}");
        let seen = upstream.seen();
        let request = seen.get(before).expect("the upstream was called");
        let sent = request
            .header("authorization")
            .and_then(|value| value.strip_prefix("Bearer "))
            .expect("a bearer token reached the upstream")
            .to_owned();
        assert_ne!(sent, token, "the caller's own token is never forwarded");
        let claims = jwt_claims(&sent).expect("a JWT");
        assert_eq!(claims["aud"], SHOP_AUDIENCE, "{claims:?}");
        assert_eq!(claims["sub"], account);
        assert_eq!(claims["act"]["sub"], "docket");
        // The echo of what was sent comes back scrubbed of the exchanged token.
        let text = result.to_string();
        assert!(!text.contains(&sent) && !text.contains(&token), "{text}");
        assert!(text.contains("[REDACTED]"), "{text}");

        // A second call reuses the exchanged token: one exchange per caller.
        call(bearer.clone(), "api_invoke_endpoint", echo.clone()).await;
        assert_eq!(
            seen_bearer(&upstream.seen()),
            Some(sent.clone()),
            "the cached exchanged token"
        );
        assert_eq!(provider.exchanges(account).await.expect("counts"), 1);

        // GraphQL connections exchange the same way.
        let before = upstream.seen().len();
        let result = call(
            bearer.clone(),
            "graphql_query",
            json!({"connection": "catalog", "query": "{ __typename }"}),
        )
        .await;
        assert_ne!(result["isError"], true, "{result}");
        let graphql = upstream.seen();
        let graphql_token = graphql[before..]
            .iter()
            .find_map(|seen| seen.header("authorization"))
            .and_then(|value| value.strip_prefix("Bearer "))
            .expect("a bearer token reached the GraphQL upstream");
        assert_ne!(graphql_token, token);
        assert_eq!(
            jwt_claims(graphql_token).expect("a JWT")["aud"],
            SHOP_AUDIENCE
        );

        // An upstream that trusts Docket as its gateway gets identity headers.
        let before = upstream.seen().len();
        let result = call(
            bearer,
            "api_invoke_endpoint",
            json!({"connection": "gateway", "method": "GET", "path": "/echo"}),
        )
        .await;
        assert_eq!(result["isError"], Value::Null, "{result}");
        let seen = upstream.seen();
        let expected = if account == "alice" {
            "Alice@Example.com"
        } else {
            "bob@corp.example"
        };
        assert_eq!(seen[before].header("x-user-email"), Some(expected));
        assert_eq!(seen[before].header("authorization"), None);
    }

    // The identity provider refuses mallory's exchange: a clear tool error that
    // names the refusal, and the upstream is not called.
    let token = provider
        .user_token("mallory", "docket", DOCKET_RESOURCE)
        .await
        .expect("a token");
    let before = upstream.seen().len();
    let refused = call(
        ("authorization", format!("Bearer {token}")),
        "api_invoke_endpoint",
        echo.clone(),
    )
    .await;
    assert_eq!(refused["isError"], true, "{refused}");
    let text = refused.to_string();
    assert!(text.contains("invalid_grant"), "{text}");
    assert!(!text.contains(&token), "{text}");
    assert_eq!(upstream.seen().len(), before);

    // An API key has no token to exchange, but has claims for identity headers.
    let key = ("x-api-key", "ci-key-0123456789abcdef".to_owned());
    let refused = call(key.clone(), "api_invoke_endpoint", echo).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(upstream.seen().len(), before);
    let result = call(
        key,
        "api_invoke_endpoint",
        json!({"connection": "gateway", "method": "GET", "path": "/echo"}),
    )
    .await;
    assert_eq!(result["isError"], Value::Null, "{result}");
    assert_eq!(
        upstream
            .seen()
            .last()
            .and_then(|seen| seen.header("x-user-email")),
        Some("ci@corp.example")
    );
}

/// The bearer token of the last request an upstream saw.
fn seen_bearer(seen: &[crate::upstream::Seen]) -> Option<String> {
    seen.last()?
        .header("authorization")?
        .strip_prefix("Bearer ")
        .map(str::to_owned)
}
