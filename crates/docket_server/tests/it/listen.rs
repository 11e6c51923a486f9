//! `subscriptions/listen`: followers hear a task's end without polling, from
//! whichever replica it ended on.

use std::sync::Arc;

use docket_protocol::mrtr::{ElicitRequestParams, InputRequest, InputRequests};
use docket_protocol::tools::CallToolResult;
use docket_server::{App, Config, TaskSupport, ToolCall, ToolOutcome, ToolSpec};
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::{Backend, TASKS, TestServer, key_of, on_both_backends, read_until, users};

/// A replica over `database` with a tool that runs until it is cancelled.
async fn replica(database: &docket_storage::test_db::TestDatabase) -> TestServer {
    let store = database.connect().await;
    let yaml = "tasks: { heartbeat_interval: 100ms }\n\
                personas:\n\
                \x20 analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"]), ("bob", &["analyst"])]);
    let app = App::builder(config)
        .task_store(store.task_store())
        .tool(
            ToolSpec::new(
                "held_job",
                "Runs until cancelled.",
                json!({"type": "object"}),
            )
            .with_task_support(TaskSupport::Optional),
            |call: ToolCall| async move {
                call.cancel.cancelled().await;
                ToolOutcome::from(CallToolResult::text("stopped"))
            },
        )
        .expect("tool")
        .build()
        .expect("app");
    TestServer::start(app).await
}

on_both_backends!(a_follower_hears_a_task_end_on_another_replica);

async fn a_follower_hears_a_task_end_on_another_replica(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let a = replica(&database).await;
    // On SQLite one process is the only replica: the follower listens on it.
    let b = match backend {
        Backend::Postgres => Some(replica(&database).await),
        Backend::Sqlite => None,
    };
    let follower = b.as_ref().unwrap_or(&a);
    let rpc = |server: &TestServer, user: &str, method: &str, params: Value| {
        server
            .rpc(method, params)
            .capabilities(json!({"extensions": {TASKS: {}}}))
            .header("x-api-key", &key_of(user))
    };
    let (_, created) = rpc(
        &a,
        "alice",
        "tools/call",
        json!({"name": "held_job", "arguments": {}}),
    )
    .send()
    .await;
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();

    // Another's listen follows nothing of it: the same acknowledgement as for an
    // unknown id.
    let mut theirs = rpc(
        follower,
        "bob",
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [task_id]}}),
    )
    .response()
    .await;
    let acked = read_until(&mut theirs, |message| {
        message["method"] == "notifications/subscriptions/acknowledged"
    })
    .await;
    assert_eq!(
        acked[0]["params"]["notifications"]["taskIds"],
        json!([]),
        "{acked:?}"
    );
    drop(theirs);

    let mut listening = rpc(
        follower,
        "alice",
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [task_id, "0".repeat(32)]}}),
    )
    .response()
    .await;
    assert_eq!(listening.headers()["content-type"], "text/event-stream");
    let first = read_until(&mut listening, |message| {
        message["method"] == "notifications/tasks"
    })
    .await;
    // The acknowledgement first, naming only what it follows, then the task as it is.
    assert_eq!(
        first[0]["method"], "notifications/subscriptions/acknowledged",
        "{first:?}"
    );
    assert_eq!(
        first[0]["params"]["notifications"]["taskIds"],
        json!([task_id])
    );
    assert_eq!(
        first[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        1
    );
    let now = first.last().expect("the task");
    assert_eq!(now["params"]["taskId"], task_id.as_str());
    assert_eq!(now["params"]["status"], "working", "{now}");

    // The task ends on replica A; the follower hears it, tagged, with the task whole.
    let (status, _) = rpc(&a, "alice", "tasks/cancel", json!({"taskId": task_id}))
        .send()
        .await;
    assert_eq!(status, 200);
    let pushed = read_until(&mut listening, |message| {
        message["method"] == "notifications/tasks" && message["params"]["status"] == "cancelled"
    })
    .await;
    let ended = pushed.last().expect("the end");
    assert_eq!(ended["params"]["taskId"], task_id.as_str());
    assert_eq!(
        ended["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        1
    );
    assert!(ended["params"].get("resultType").is_none(), "{ended}");

    // Without the extension, asking about tasks is refused.
    let (status, refused) = follower
        .rpc(
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [task_id]}}),
        )
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], -32021);
}

/// A replica over `database` with a tool that, each time `step` is released, moves
/// on: it says "step one" in its status message, then asks for a name, then
/// completes with it.
async fn stepping_replica(
    database: &docket_storage::test_db::TestDatabase,
    step: Arc<Notify>,
) -> TestServer {
    let store = database.connect().await;
    let yaml = "tasks: { heartbeat_interval: 100ms }\n\
                personas:\n\
                \x20 analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"])]);
    let app = App::builder(config)
        .task_store(store.task_store())
        .tool(
            ToolSpec::new(
                "stepping_job",
                "Moves on a step each time the test says so.",
                json!({"type": "object"}),
            )
            .with_task_support(TaskSupport::Optional),
            move |call: ToolCall| {
                let step = Arc::clone(&step);
                async move {
                    let task = call.task.clone().expect("runs as a task");
                    step.notified().await;
                    task.set_status_message("step one");
                    step.notified().await;
                    let mut requests = InputRequests::new();
                    requests.insert(
                        "name".into(),
                        InputRequest::Elicit(ElicitRequestParams::form(
                            "Which name?",
                            json!({"type": "object", "properties": {"name": {"type": "string"}}}),
                        )),
                    );
                    match call.request_input(requests).await {
                        Ok(answers) => ToolOutcome::from(CallToolResult::text(
                            answers["name"]["content"]["name"]
                                .as_str()
                                .unwrap_or("?")
                                .to_owned(),
                        )),
                        Err(error) => ToolOutcome::Error(error),
                    }
                }
            },
        )
        .expect("tool")
        .build()
        .expect("app");
    TestServer::start(app).await
}

on_both_backends!(a_follower_hears_every_status_change_of_a_task_on_another_replica);

/// What `reading` read, failing if it takes longer than a change can (keep-alives
/// keep a quiet stream open, so a missing push would otherwise hang).
async fn heard(reading: impl std::future::Future<Output = Vec<Value>>) -> Vec<Value> {
    tokio::time::timeout(std::time::Duration::from_secs(30), reading)
        .await
        .expect("the change was pushed")
}

/// A listener hears each change of a task, not only its end: a new status message
/// (written by a beat), the move to `input_required` and back, and the end — on
/// PostgreSQL from the replica that runs the task while it listens on another.
async fn a_follower_hears_every_status_change_of_a_task_on_another_replica(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let step = Arc::new(Notify::new());
    let a = stepping_replica(&database, Arc::clone(&step)).await;
    let b = match backend {
        Backend::Postgres => Some(stepping_replica(&database, Arc::new(Notify::new())).await),
        Backend::Sqlite => None,
    };
    let follower = b.as_ref().unwrap_or(&a);
    let rpc = |server: &TestServer, method: &str, params: Value| {
        server
            .rpc(method, params)
            .capabilities(json!({"extensions": {TASKS: {}}}))
            .header("x-api-key", &key_of("alice"))
    };
    let (_, created) = rpc(
        &a,
        "tools/call",
        json!({"name": "stepping_job", "arguments": {}}),
    )
    .send()
    .await;
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let mut listening = rpc(
        follower,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [task_id]}}),
    )
    .response()
    .await;
    let first = heard(read_until(&mut listening, |message| {
        message["method"] == "notifications/tasks"
    }))
    .await;
    assert_eq!(
        first.last().expect("the task")["params"]["status"],
        "working"
    );

    // Each step is released only once the one before was heard, so every change
    // is pushed on its own.
    step.notify_one();
    let said = heard(read_until(&mut listening, |message| {
        message["method"] == "notifications/tasks"
            && message["params"]["statusMessage"] == "step one"
    }))
    .await;
    let said = said.last().expect("the new message");
    assert_eq!(said["params"]["status"], "working", "{said}");
    assert_eq!(said["params"]["taskId"], task_id.as_str());

    step.notify_one();
    let asked = heard(read_until(&mut listening, |message| {
        message["method"] == "notifications/tasks"
            && message["params"]["status"] == "input_required"
    }))
    .await;
    let asked = asked.last().expect("the question");
    assert!(
        asked["params"]["inputRequests"]["name"].is_object(),
        "{asked}"
    );

    let (status, updated) = rpc(
        follower,
        "tasks/update",
        json!({"taskId": task_id, "inputResponses": {
            "name": {"action": "accept", "content": {"name": "orders"}}}}),
    )
    .send()
    .await;
    assert_eq!(status, 200, "{updated}");
    let ended = heard(read_until(&mut listening, |message| {
        message["method"] == "notifications/tasks" && message["params"]["status"] == "completed"
    }))
    .await;
    let ended = ended.last().expect("the end");
    assert_eq!(
        ended["params"]["result"]["content"][0]["text"], "orders",
        "{ended}"
    );
    assert_eq!(
        ended["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        1
    );
}

/// When the server starts to shut down, an open listen stream ends with its closing
/// response, tagged with the subscription.
#[tokio::test]
async fn a_listen_stream_ends_with_its_closing_response_on_shutdown() {
    let database = docket_storage::test_db::TestDatabase::sqlite().await;
    let server = replica(&database).await;
    let mut listening = server
        .rpc(
            "subscriptions/listen",
            json!({"notifications": {"taskIds": []}}),
        )
        .capabilities(json!({"extensions": {TASKS: {}}}))
        .header("x-api-key", &key_of("alice"))
        .response()
        .await;
    read_until(&mut listening, |message| {
        message["method"] == "notifications/subscriptions/acknowledged"
    })
    .await;
    server.app.start_draining();
    let closed = read_until(&mut listening, |message| message["id"] == 1).await;
    let last = closed.last().expect("the closing response");
    assert_eq!(last["result"]["resultType"], "complete", "{last}");
    assert_eq!(
        last["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1,
        "{last}"
    );
}

on_both_backends!(a_listener_hears_the_prompt_library_change_on_another_replica);

/// A replica over `database` serving the prompt library, announcing changes
/// through the database.
async fn library_replica(database: &docket_storage::test_db::TestDatabase) -> TestServer {
    let store = database.connect().await;
    let yaml = "personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] } }\n";
    let mut config = Config::from_yaml(yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["analyst"])]);
    let app = App::builder(config)
        .prompt_library(store.prompt_library())
        .change_feed(store.change_feed())
        .build()
        .expect("app");
    TestServer::start(app).await
}

async fn a_listener_hears_the_prompt_library_change_on_another_replica(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let a = library_replica(&database).await;
    let b = match backend {
        Backend::Postgres => Some(library_replica(&database).await),
        Backend::Sqlite => None,
    };
    let listener = b.as_ref().unwrap_or(&a);
    let mut listening = listener
        .rpc(
            "subscriptions/listen",
            json!({"notifications": {"promptsListChanged": true, "toolsListChanged": true,
                                     "resourceSubscriptions": ["docket://assets/0"]}}),
        )
        .header("x-api-key", &key_of("alice"))
        .response()
        .await;
    let acked = read_until(&mut listening, |message| {
        message["method"] == "notifications/subscriptions/acknowledged"
    })
    .await;
    // Only what is honoured: the prompt list, not the tool list (it never changes)
    // nor resource subscriptions (docs/design.md, Following).
    assert_eq!(
        acked[0]["params"]["notifications"],
        json!({"promptsListChanged": true}),
        "{acked:?}"
    );
    let (_, created) = a
        .rpc(
            "tools/call",
            json!({"name": "manage_prompt", "arguments": {"command": "create", "name": "weekly",
                   "description": "d", "template": "t", "shared_with": ["*"]}}),
        )
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert_ne!(created["result"]["isError"], true, "{created}");
    let heard = read_until(&mut listening, |message| {
        message["method"] == "notifications/prompts/list_changed"
    })
    .await;
    let changed = heard.last().expect("the change");
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1,
        "{changed}"
    );
}
