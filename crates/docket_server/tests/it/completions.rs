//! `completion/complete` for the platform's prompts: Trino catalogs, schemas and
//! tables listed live for a persona that may browse the connection (nothing is
//! sent for one that may not), the caller's script names on both backends, and the
//! bounds every provider is held to (100 values, a timeout).

use std::sync::Arc;
use std::time::Duration;

use docket_protocol::completion::CompletionReference;
use docket_server::{App, CompletionRequest, Config, PromptOutcome, PromptRequest, PromptSpec};
use docket_trino_double::TrinoDouble;
use serde_json::{Value, json};

use crate::support::{Backend, TestServer, key_of, on_both_backends, users};

/// Asks `server`, as `user`, to complete `argument` of prompt `prompt` from
/// `value`, with `context` arguments; the values suggested.
async fn complete(
    server: &TestServer,
    user: &str,
    prompt: &str,
    argument: &str,
    value: &str,
    context: Value,
) -> Value {
    let (status, body) = server
        .rpc(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": prompt},
                   "argument": {"name": argument, "value": value},
                   "context": {"arguments": context}}),
        )
        .header("x-api-key", &key_of(user))
        .send()
        .await;
    assert_eq!(status, 200, "{body}");
    body["result"]["completion"]["values"].clone()
}

/// A server with the prompt library in memory and two Trino connections on the
/// double: `warehouse` (the default) and `lake`. Analysts may use `warehouse`
/// only; outsiders only `lake`; `blind` may use `warehouse` but not browse.
async fn trino_server(double: &TrinoDouble) -> TestServer {
    trino_server_with(double, |_| {}).await
}

/// [`trino_server`] with its configuration adjusted by `adjust` first.
async fn trino_server_with(double: &TrinoDouble, adjust: impl FnOnce(&mut Config)) -> TestServer {
    let yaml = format!(
        "connections:\n\
         \x20 warehouse: {{ kind: trino, url: \"{url}\", user: docket, default: true }}\n\
         \x20 lake: {{ kind: trino, url: \"{url}\", user: docket }}\n\
         personas:\n\
         \x20 analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [warehouse] }} }}\n\
         \x20 outsider: {{ roles: [outsider], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [lake] }} }}\n\
         \x20 blind: {{ roles: [blind], tools: {{ allow: [\"*\"], deny: [trino_browse] }}, connections: {{ allow: [warehouse] }} }}\n",
        url = double.url()
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[
        ("alice", &["analyst"]),
        ("olga", &["outsider"]),
        ("bea", &["blind"]),
    ]);
    adjust(&mut config);
    let app = App::builder(config)
        .prompt_library(Arc::new(docket_catalog::memory::MemoryPrompts::new()))
        .build()
        .expect("app");
    TestServer::start(app).await
}

/// A client asks on every keystroke: past the caller's budget (`rate_limit`), a
/// completion suggests nothing and sends Trino nothing, and another caller's budget
/// is their own.
#[tokio::test]
async fn trino_names_are_held_to_each_callers_rate_limit() {
    let double = TrinoDouble::start().await.expect("double");
    let server = trino_server_with(&double, |config| {
        config.rate_limit.requests_per_minute = 1;
        config.rate_limit.burst = 2;
    })
    .await;
    for _ in 0..2 {
        assert_eq!(
            complete(&server, "alice", "explore_table", "table", "mem", json!({})).await,
            json!(["memory."])
        );
    }
    double.clear_requests();
    assert_eq!(
        complete(&server, "alice", "explore_table", "table", "mem", json!({})).await,
        json!([])
    );
    assert!(double.submitted().is_empty(), "{:?}", double.submitted());
    // Connection names need no statement and stay offered.
    assert_eq!(
        complete(
            &server,
            "alice",
            "explore_table",
            "connection",
            "ware",
            json!({})
        )
        .await,
        json!(["warehouse"])
    );
    // The owner of `lake` has a budget of their own.
    assert_eq!(
        complete(
            &server,
            "olga",
            "explore_table",
            "table",
            "mem",
            json!({"connection": "lake"})
        )
        .await,
        json!(["memory."])
    );
}

#[tokio::test]
async fn trino_names_are_completed_for_a_persona_that_may_browse_the_connection() {
    let double = TrinoDouble::start().await.expect("double");
    let server = trino_server(&double).await;

    // A table is completed a part at a time on the default connection.
    assert_eq!(
        complete(&server, "alice", "explore_table", "table", "mem", json!({})).await,
        json!(["memory."])
    );
    let schemas = complete(
        &server,
        "alice",
        "explore_table",
        "table",
        "tpch.",
        json!({}),
    )
    .await;
    assert!(
        schemas
            .as_array()
            .is_some_and(|names| names.contains(&json!("tpch.tiny."))),
        "{schemas}"
    );
    assert_eq!(
        complete(
            &server,
            "alice",
            "explore_table",
            "table",
            "memory.default.or",
            json!({})
        )
        .await,
        json!(["memory.default.orders"])
    );
    // The context's connection, catalog and schema narrow it.
    assert_eq!(
        complete(
            &server,
            "alice",
            "explore_table",
            "table",
            "na",
            json!({"connection": "warehouse", "catalog": "tpch", "schema": "tiny"})
        )
        .await,
        json!(["nation"])
    );
    assert_eq!(
        complete(
            &server,
            "alice",
            "export_query",
            "schema",
            "ti",
            json!({"catalog": "tpch"})
        )
        .await,
        json!(["tiny"])
    );
    assert_eq!(
        complete(
            &server,
            "alice",
            "explore_table",
            "connection",
            "",
            json!({})
        )
        .await,
        json!(["warehouse"]),
        "only the connections the persona may use"
    );
    assert_eq!(
        complete(&server, "alice", "export_query", "format", "js", json!({})).await,
        json!(["json", "jsonl"])
    );

    // A persona that may not use the connection, or may not browse, an unknown
    // connection and a name that is no name: no values, and nothing reaches Trino.
    double.clear_requests();
    for (user, context, typed) in [
        ("olga", json!({}), "mem"),
        ("olga", json!({"connection": "warehouse"}), "mem"),
        ("bea", json!({}), "mem"),
        ("alice", json!({"connection": "lake"}), "mem"),
        ("alice", json!({"connection": "nowhere"}), "mem"),
        ("alice", json!({}), "mem'; DROP"),
    ] {
        assert_eq!(
            complete(
                &server,
                user,
                "explore_table",
                "table",
                typed,
                context.clone()
            )
            .await,
            json!([]),
            "{user} {context}"
        );
    }
    assert!(double.submitted().is_empty(), "{:?}", double.submitted());

    // A library prompt's arguments are completed by their names too.
    let (_, created) = server
        .rpc(
            "tools/call",
            json!({"name": "manage_prompt", "arguments": {"command": "create", "name": "sizes",
                   "description": "Sizes of a schema's tables.",
                   "template": "Size every table of {{catalog}}.{{schema}}.",
                   "arguments": [{"name": "catalog"}, {"name": "schema"}]}}),
        )
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert_ne!(created["result"]["isError"], true, "{created}");
    assert_eq!(
        complete(&server, "alice", "sizes", "catalog", "tp", json!({})).await,
        json!(["tpch"])
    );
}

on_both_backends!(script_names_are_completed_from_the_scripts_the_caller_may_list);

/// Script-name arguments (`write_script`'s `name`, a library prompt's `script`)
/// are completed from the scripts `manage_script list` shows the caller: their
/// own, everyone's for an administrator, none for a persona without
/// `manage_script`.
async fn script_names_are_completed_from_the_scripts_the_caller_may_list(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let store = database.connect().await;
    let yaml = "personas:\n\
                \x20 analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n\
                \x20 reader: { roles: [reader], tools: { allow: [\"*\"], deny: [manage_script] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[
        ("alice", &["analyst"]),
        ("bob", &["analyst"]),
        ("rita", &["reader"]),
        ("root", &["admin"]),
    ]);
    let app = App::builder(config)
        .task_store(store.task_store())
        .scripts(store.script_store())
        .prompt_library(store.prompt_library())
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    let call = |user: &'static str, tool: &'static str, arguments: Value| {
        let server = &server;
        async move {
            let (_, body) = server
                .rpc("tools/call", json!({"name": tool, "arguments": arguments}))
                .header("x-api-key", &key_of(user))
                .send()
                .await;
            assert_ne!(body["result"]["isError"], true, "{body}");
        }
    };
    for (user, name) in [
        ("alice", "daily_report"),
        ("alice", "daily_load"),
        ("alice", "weekly"),
        ("bob", "daily_bob"),
    ] {
        call(
            user,
            "manage_script",
            json!({"command": "create", "name": name, "source": "print('hi')"}),
        )
        .await;
    }
    call(
        "alice",
        "manage_prompt",
        json!({"command": "create", "name": "rerun", "description": "Run a script again.",
               "template": "Run {{script}} again.", "arguments": [{"name": "script"}],
               "shared_with": ["*"]}),
    )
    .await;
    for (user, prompt, argument, expected) in [
        (
            "alice",
            "write_script",
            "name",
            json!(["daily_load", "daily_report"]),
        ),
        (
            "alice",
            "rerun",
            "script",
            json!(["daily_load", "daily_report"]),
        ),
        ("bob", "rerun", "script", json!(["daily_bob"])),
        (
            "root",
            "write_script",
            "name",
            json!(["daily_bob", "daily_load", "daily_report"]),
        ),
        ("rita", "rerun", "script", json!([])),
        ("alice", "write_script", "goal", json!([])),
    ] {
        assert_eq!(
            complete(&server, user, prompt, argument, "daily", json!({})).await,
            expected,
            "{user} {prompt} {argument}"
        );
    }

    // Each listing reads the database, so it spends the caller's budget (the one tool
    // calls spend): past it, a script name gets no suggestions, quietly.
    let mut exhausted = false;
    for _ in 0..200 {
        if complete(&server, "bob", "rerun", "script", "daily", json!({})).await == json!([]) {
            exhausted = true;
            break;
        }
    }
    assert!(
        exhausted,
        "script names were completed past bob's rate limit"
    );
}

/// An embedder's provider is held to the same bounds: at most 100 values (the rest
/// said by `hasMore`), and no values once it takes longer than the timeout.
#[tokio::test]
async fn every_provider_is_capped_and_timed_out() {
    let mut config = Config::from_yaml(
        "server: { completion_timeout: 200ms }\n\
         personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n",
        &|_| None,
    )
    .expect("config");
    config.auth = users(&[("alice", &["analyst"])]);
    let app = App::builder(config)
        .prompt(
            PromptSpec::new("many", "Many values.")
                .with_argument("value", "A value.", false)
                .with_argument("slow", "A value that takes long.", false),
            |_request: PromptRequest| async move {
                Ok(PromptOutcome::Messages {
                    description: None,
                    messages: Vec::new(),
                })
            },
        )
        .expect("prompt")
        .completion(
            CompletionReference::Prompt {
                name: "many".to_owned(),
            },
            |request: CompletionRequest| async move {
                if request.argument == "slow" {
                    tokio::time::sleep(Duration::from_secs(120)).await;
                }
                (0..150).map(|index| format!("v{index}")).collect()
            },
        )
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    let (_, many) = server
        .rpc(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "many"},
                   "argument": {"name": "value", "value": ""}}),
        )
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    let completion = &many["result"]["completion"];
    assert_eq!(
        completion["values"].as_array().map(Vec::len),
        Some(100),
        "{many}"
    );
    assert_eq!(completion["hasMore"], true);
    let slow = tokio::time::timeout(
        Duration::from_secs(60),
        complete(&server, "alice", "many", "slow", "", json!({})),
    )
    .await
    .expect("answered once the timeout passed");
    assert_eq!(slow, json!([]));
}
