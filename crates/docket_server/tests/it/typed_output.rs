//! Typed output (issue 39, item 3): every tool Docket registers declares an
//! `outputSchema`, and every answer's `structuredContent` (refusals included)
//! validates against it with a JSON Schema 2020-12 validator, beside a text block
//! for older clients. Every tool is called with real arguments against the real
//! doubles (the Trino double, the HTTP and GraphQL upstream, SQLite, the script
//! worker), in both protocol eras: stateless 2026-07-28 requests, and a
//! 2025-11-25 session opened by `initialize`. A tool that is registered but has
//! no schema, or that no call here reaches, fails the test, so a new tool cannot
//! skip its schema. A 2025-03-26 session, whose revision has no typed output,
//! gets neither the schemas nor `structuredContent`.

use std::collections::{BTreeMap, BTreeSet};

use docket_server::config::Config;
use docket_storage::test_db::TestDatabase;
use docket_trino_double::TrinoDouble;
use serde_json::{Value, json};

use crate::support::{StoredServer, TASKS, TestServer, key_of, users};
use crate::upstream::Upstream;

/// The server with every kind of tool registered, and what it stands on.
struct Fixture {
    server: TestServer,
    _double: TrinoDouble,
    _upstream: Upstream,
    _database: TestDatabase,
    _files: std::path::PathBuf,
}

async fn fixture() -> Fixture {
    let double = TrinoDouble::start().await.expect("double");
    let upstream = Upstream::start().await;
    let yaml = format!(
        "connections:\n\
         \x20 warehouse: {{ kind: trino, url: \"{}\", user: docket, catalog: memory, schema: default }}\n\
         \x20 shop: {{ kind: api, base_url: \"{}\" }}\n\
         \x20 catalog: {{ kind: graphql, endpoint: \"{}\" }}\n\
         diagnostics: {{ enabled: true }}\n\
         rate_limit: {{ requests_per_minute: 100000, burst: 100000 }}\n\
         tasks: {{ heartbeat_interval: 100ms }}\n\
         scripts: {{ heartbeat_interval: 100ms, lease: 5s }}\n",
        double.url(),
        upstream.url("/v1"),
        upstream.url("/graphql")
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["admin"])]);
    let database = TestDatabase::sqlite().await;
    let store = database.connect().await;
    let stored = StoredServer::start_with(config, &database, true, |builder| {
        builder.prompt_library(store.prompt_library())
    })
    .await;
    Fixture {
        server: stored.server,
        _double: double,
        _upstream: upstream,
        _database: database,
        _files: stored.files,
    }
}

/// How a client reaches the server: stateless requests of 2026-07-28, or a
/// session of an earlier revision.
enum Era<'a> {
    Current(&'a TestServer),
    Session {
        server: &'a TestServer,
        id: String,
        version: &'static str,
    },
}

impl<'a> Era<'a> {
    /// Opens a session of `version` as alice.
    async fn session(server: &'a TestServer, version: &'static str) -> Self {
        let response = server
            .http
            .post(server.url("/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("x-api-key", key_of("alice"))
            .json(&json!({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "typed-output-tests", "version": "1.0.0"}
                }
            }))
            .send()
            .await
            .expect("initialize sent");
        let id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|value| value.to_str().ok())
            .expect("initialize names a session")
            .to_owned();
        let body: Value = response.json().await.expect("initialize answer");
        assert_eq!(body["result"]["protocolVersion"], version, "{body}");
        Era::Session {
            server,
            id,
            version,
        }
    }

    /// The `result` of one request, as alice.
    async fn request(&self, method: &str, params: Value) -> Value {
        let body = match self {
            Era::Current(server) => {
                let (_, body) = server
                    .rpc(method, params)
                    .header("x-api-key", &key_of("alice"))
                    .send()
                    .await;
                body
            }
            Era::Session {
                server,
                id,
                version,
            } => {
                let response = server
                    .http
                    .post(server.url("/mcp"))
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .header("x-api-key", key_of("alice"))
                    .header("mcp-session-id", id.as_str())
                    .header("mcp-protocol-version", *version)
                    .json(&json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params}))
                    .send()
                    .await
                    .expect("request sent");
                let streamed = response
                    .headers()
                    .get("content-type")
                    .is_some_and(|value| value.as_bytes().starts_with(b"text/event-stream"));
                let text = response.text().await.expect("body");
                if streamed {
                    crate::support::sse_messages(&text)
                        .pop()
                        .unwrap_or(Value::Null)
                } else {
                    serde_json::from_str(&text).unwrap_or(Value::Null)
                }
            }
        };
        assert!(body.get("result").is_some(), "{method} {body}");
        body["result"].clone()
    }

    fn name(&self) -> &'static str {
        match self {
            Era::Current(_) => "2026-07-28",
            Era::Session { version, .. } => version,
        }
    }
}

/// Calls tools in one era and holds each answer to its tool's declared schema.
struct Checker<'a> {
    era: Era<'a>,
    validators: BTreeMap<String, jsonschema::Validator>,
    /// Each tool's declared schema, to explain a mismatch branch by branch.
    schemas: BTreeMap<String, Value>,
    /// The tools answered with a success that validated.
    succeeded: BTreeSet<String>,
    /// The tools answered with a refusal that validated.
    refused: BTreeSet<String>,
}

impl<'a> Checker<'a> {
    /// Lists the tools in `era` and compiles every declared output schema; a tool
    /// without one fails here.
    async fn new(era: Era<'a>) -> Self {
        let listed = era.request("tools/list", json!({})).await;
        let mut validators = BTreeMap::new();
        let mut schemas = BTreeMap::new();
        let mut missing = Vec::new();
        for tool in listed["tools"].as_array().expect("tools") {
            let name = tool["name"].as_str().expect("name").to_owned();
            let Some(schema) = tool.get("outputSchema") else {
                missing.push(name);
                continue;
            };
            assert_eq!(schema["type"], "object", "{name}: {schema}");
            jsonschema::draft202012::meta::validate(schema)
                .unwrap_or_else(|err| panic!("{name}'s outputSchema is no 2020-12 schema: {err}"));
            // Clients of 2025-06-18, which names no dialect, often validate with
            // draft-07 tools: the schemas use only what both read alike.
            jsonschema::draft7::meta::validate(schema)
                .unwrap_or_else(|err| panic!("{name}'s outputSchema is no draft-07 schema: {err}"));
            let validator = jsonschema::draft202012::new(schema)
                .unwrap_or_else(|err| panic!("{name}'s outputSchema does not compile: {err}"));
            validators.insert(name.clone(), validator);
            schemas.insert(name, schema.clone());
        }
        assert!(
            missing.is_empty(),
            "{}: tools without an outputSchema: {missing:?}",
            era.name()
        );
        Self {
            era,
            validators,
            schemas,
            succeeded: BTreeSet::new(),
            refused: BTreeSet::new(),
        }
    }

    /// Calls `tool`, checks the answer, and returns its `structuredContent`.
    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self
            .era
            .request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await;
        self.check(tool, &result)
    }

    /// Checks one `CallToolResult` of `tool` (a direct answer, or a task's
    /// result) and returns its `structuredContent`.
    fn check(&mut self, tool: &str, result: &Value) -> Value {
        let era = self.era.name();
        let structured = result
            .get("structuredContent")
            .unwrap_or_else(|| panic!("{era} {tool}: no structuredContent in {result}"))
            .clone();
        assert!(
            result["content"]
                .as_array()
                .is_some_and(|blocks| blocks.iter().any(|block| block["type"] == "text")),
            "{era} {tool}: no text block for older clients in {result}"
        );
        let validator = self
            .validators
            .get(tool)
            .unwrap_or_else(|| panic!("{era}: {tool} is not listed"));
        let mut problems: Vec<String> = validator
            .iter_errors(&structured)
            .map(|error| format!("{}: {error}", error.instance_path()))
            .collect();
        if !problems.is_empty() {
            // "Not valid under any of anyOf" says little: say why for each branch.
            for branch in self.schemas[tool]["anyOf"].as_array().into_iter().flatten() {
                let branch = jsonschema::draft202012::new(branch).expect("branch compiles");
                problems.extend(
                    branch
                        .iter_errors(&structured)
                        .map(|error| format!("  {}: {error}", error.instance_path())),
                );
            }
        }
        assert!(
            problems.is_empty(),
            "{era} {tool}: structuredContent does not match the outputSchema: {problems:?}\n{structured}"
        );
        if result["isError"] == true {
            self.refused.insert(tool.to_owned());
        } else {
            self.succeeded.insert(tool.to_owned());
        }
        structured
    }

    /// Every listed tool answered at least one success here.
    fn every_tool_was_exercised(&self) {
        let listed: BTreeSet<&String> = self.validators.keys().collect();
        let reached: BTreeSet<&String> = self.succeeded.iter().collect();
        let unreached: Vec<&&String> = listed.difference(&reached).collect();
        assert!(
            unreached.is_empty(),
            "{}: no successful call of {unreached:?}; add one to typed_output.rs",
            self.era.name()
        );
        assert!(
            self.refused.len() >= 3,
            "refusals checked: {:?}",
            self.refused
        );
    }
}

/// A script that queries the warehouse and prints.
const SCRIPT: &str = "rows = platform.query('SELECT 1 AS one')\nprint(json.encode(rows))\n";

/// Calls each `(tool, arguments)` in turn.
async fn each(checker: &mut Checker<'_>, calls: Vec<(&str, Value)>) {
    for (tool, arguments) in calls {
        checker.call(tool, arguments).await;
    }
}

/// Calls every tool, with refusals among them, and checks every answer.
async fn exercise(checker: &mut Checker<'_>, suffix: &str) {
    let orders = "SELECT orderkey FROM memory.default.orders ORDER BY orderkey";
    // A result cut at its limit, and a refusal before Trino sees anything.
    let cut = checker
        .call("trino_query", json!({"sql": orders, "limit": 2}))
        .await;
    assert_eq!(cut["truncated"], true, "{cut}");
    // The next page of the same result, read by its cursor.
    let cursor = cut["cursor"]
        .as_str()
        .expect("a cut answer carries a cursor");
    let next = checker
        .call("trino_query", json!({"cursor": cursor, "limit": 2}))
        .await;
    assert_eq!(next["rows"][0][0], 3, "{next}");
    let refused = checker
        .call(
            "trino_query",
            json!({"sql": "DELETE FROM memory.default.orders"}),
        )
        .await;
    assert_eq!(refused["error"]["code"], "read_only", "{refused}");
    let exported = checker
        .call(
            "trino_export",
            json!({"sql": format!("{orders} LIMIT 5"), "format": "csv", "name": format!("orders-{suffix}")}),
        )
        .await;
    let asset_id = exported["asset_id"].as_str().expect("asset id").to_owned();
    let graphql = |query: &str| json!({"connection": "catalog", "query": query});
    each(
        checker,
        vec![
            ("platform_info", json!({})),
            ("list_connections", json!({})),
            ("list_connections", json!({"kind": "graphql"})),
            ("trino_query", json!({"sql": "SELECT 1 AS one"})),
            ("trino_explain", json!({"sql": "SELECT 1"})),
            ("trino_browse", json!({})),
            ("trino_browse", json!({"catalog": "memory"})),
            ("trino_browse", json!({"catalog": "memory", "schema": "default"})),
            ("trino_describe_table", json!({"table": "memory.default.orders"})),
            ("api_invoke_endpoint", json!({"connection": "shop", "method": "GET", "path": "/echo"})),
            ("api_invoke_endpoint", json!({"connection": "shop", "method": "GET", "path": "/items"})),
            (
                "api_export",
                json!({"connection": "shop", "method": "GET", "path": "/echo", "name": format!("echo-{suffix}")}),
            ),
            ("graphql_query", graphql("{ hello }")),
            // GraphQL errors beside data, and a document refused before any I/O.
            ("graphql_query", graphql("query Both { hello boom }")),
            ("graphql_query", graphql("mutation { hello }")),
            (
                "graphql_export",
                json!({"connection": "catalog", "query": "{ hello }", "name": format!("hello-{suffix}"), "format": "json"}),
            ),
            ("list_assets", json!({"limit": 2})),
            ("get_asset", json!({"asset_id": asset_id})),
            ("diagnostics_sleep", json!({"seconds": 0})),
        ],
    )
    .await;
    let unknown = checker
        .call(
            "get_asset",
            json!({"asset_id": "0123456789abcdef0123456789abcdef"}),
        )
        .await;
    assert_eq!(unknown["error"]["code"], "not_found", "{unknown}");

    let share = checker
        .call(
            "share_asset",
            json!({"command": "create", "asset_id": asset_id, "audience": "public", "expires_in_seconds": 3600}),
        )
        .await;
    let share_id = share["share_id"].as_str().expect("share id").to_owned();
    each(
        checker,
        vec![
            ("share_asset", json!({"command": "list"})),
            (
                "share_asset",
                json!({"command": "revoke", "share_id": share_id}),
            ),
        ],
    )
    .await;

    // Scripts: authoring, a run to its end, its reads and its cancel.
    let script = format!("typed-{suffix}");
    let manage = |arguments: Value| ("manage_script", arguments);
    each(
        checker,
        vec![
            manage(json!({"command": "create", "name": script, "source": SCRIPT})),
            manage(json!({"command": "get", "name": script})),
            manage(json!({"command": "list"})),
            manage(json!({"command": "validate", "source": "print(1)"})),
            manage(json!({"command": "validate", "source": "for x in"})),
            manage(json!({"command": "outline", "name": script})),
            manage(json!({"command": "help"})),
            manage(json!({"command": "run_draft", "source": "print(2)"})),
        ],
    )
    .await;
    let run = checker
        .call("run_script", json!({"name": script, "wait_seconds": 60}))
        .await;
    assert_eq!(run["status"], "succeeded", "{run}");
    let run_id = run["run_id"].as_str().expect("run id").to_owned();
    let queued = checker
        .call("run_script", json!({"name": script, "wait_seconds": -1}))
        .await;
    assert!(queued["run_id"].is_string(), "{queued}");
    let gone = format!("{script}-gone");
    each(
        checker,
        vec![
            manage(json!({"command": "update", "name": script, "description": "Typed."})),
            manage(json!({"command": "patch", "name": script, "dry_run": true,
                          "edits": [{"find": "print(", "replace": "print("}]})),
            manage(json!({"command": "diff", "name": script, "from_version": 1, "to_version": 2})),
            manage(json!({"command": "stats", "name": script})),
            manage(json!({"command": "runs", "name": script})),
            manage(json!({"command": "get_run", "run_id": run_id})),
            manage(json!({"command": "schedule_set", "name": script, "cron": "@daily"})),
            manage(json!({"command": "schedule_list"})),
            manage(json!({"command": "schedule_disable", "name": script})),
            manage(json!({"command": "schedule_enable", "name": script})),
            manage(json!({"command": "create", "name": gone, "source": "print(3)"})),
            manage(json!({"command": "delete", "name": gone})),
        ],
    )
    .await;

    // The prompt library, and the reads of the run.
    let prompt = format!("typed-{suffix}");
    let prompts = |arguments: Value| ("manage_prompt", arguments);
    each(
        checker,
        vec![
            ("get_run", json!({"run_id": run_id})),
            ("list_runs", json!({"limit": 5})),
            ("cancel_run", json!({"run_id": run_id})),
            (
                "get_run",
                json!({"run_id": "run_0123456789abcdef0123456789abcdef"}),
            ),
            prompts(
                json!({"command": "create", "name": prompt, "description": "Counts rows.",
                           "template": "Count the rows of {{table}}.",
                           "arguments": [{"name": "table", "required": true}]}),
            ),
            prompts(json!({"command": "get", "name": prompt})),
            prompts(json!({"command": "list"})),
            prompts(json!({"command": "delete", "name": prompt})),
            prompts(json!({"command": "get", "name": prompt})),
        ],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_tool_answers_what_its_output_schema_declares_in_both_eras() {
    let f = fixture().await;

    let mut current = Checker::new(Era::Current(&f.server)).await;
    exercise(&mut current, "current").await;
    // An export that runs as a task ends with the same result, held to the same
    // schema, inside tasks/get.
    let (_, created) = f
        .server
        .rpc(
            "tools/call",
            json!({"name": "trino_export", "arguments": {
                "sql": "SELECT orderkey FROM memory.default.orders ORDER BY orderkey LIMIT 3",
                "format": "json", "name": "orders-task"}}),
        )
        .capabilities(json!({"extensions": {TASKS: {}}}))
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    let task_id = created["result"]["taskId"].as_str().expect("a task");
    let task = f.server.wait_task_as("alice", task_id, "completed").await;
    let exported = current.check("trino_export", &task["result"]);
    assert_eq!(exported["row_count"], 3, "{exported}");
    current.every_tool_was_exercised();

    let session = Era::session(&f.server, "2025-11-25").await;
    let mut earlier = Checker::new(session).await;
    exercise(&mut earlier, "session").await;
    earlier.every_tool_was_exercised();
    assert_eq!(
        current.validators.keys().collect::<Vec<_>>(),
        earlier.validators.keys().collect::<Vec<_>>(),
        "both eras list the same tools"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_of_2025_03_26_gets_no_typed_output() {
    let f = fixture().await;
    let era = Era::session(&f.server, "2025-03-26").await;
    let listed = era.request("tools/list", json!({})).await;
    let tools = listed["tools"].as_array().expect("tools");
    assert!(!tools.is_empty());
    for tool in tools {
        assert!(tool.get("outputSchema").is_none(), "{tool}");
    }
    for (tool, arguments) in [
        ("platform_info", json!({})),
        ("trino_query", json!({"sql": "SELECT 1 AS one"})),
        (
            "get_asset",
            json!({"asset_id": "0123456789abcdef0123456789abcdef"}),
        ),
    ] {
        let result = era
            .request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await;
        assert!(
            result.get("structuredContent").is_none(),
            "{tool}: {result}"
        );
        // The text block still carries the same JSON.
        let text = result["content"][0]["text"].as_str().expect("text");
        assert!(!text.is_empty(), "{tool}: {result}");
    }
    // A session of 2025-06-18 keeps both.
    let era = Era::session(&f.server, "2025-06-18").await;
    let listed = era.request("tools/list", json!({})).await;
    assert!(
        listed["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .all(|tool| tool["outputSchema"]["type"] == "object"),
        "{listed}"
    );
    let result = era
        .request(
            "tools/call",
            json!({"name": "platform_info", "arguments": {}}),
        )
        .await;
    assert!(result["structuredContent"].is_object(), "{result}");
}
