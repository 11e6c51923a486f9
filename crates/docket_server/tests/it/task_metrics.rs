//! The task runtime's series on `GET /metrics` (docs/operations.md, "Alert rules"):
//! the tasks running on this replica, its failed heartbeats and the stale tasks it
//! recorded, brought up to date when scraped.

use serde_json::json;

use crate::support::{TASKS, TestServer, key_of, users};

/// The value of the unlabelled sample `series` in `text`.
fn sample(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{series} ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {text}"))
}

async fn scrape(server: &TestServer) -> String {
    server
        .http
        .get(server.url("/metrics"))
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("text")
}

#[tokio::test]
async fn a_running_task_shows_on_metrics_and_its_end_takes_it_off() {
    let database = docket_storage::test_db::TestDatabase::sqlite().await;
    let store = database.connect().await;
    let mut config =
        docket_server::Config::from_yaml("diagnostics: { enabled: true }\n", &|_| None)
            .expect("config");
    config.auth = users(&[("alice", &["admin"])]);
    let app = docket_server::App::builder(config)
        .task_store(store.task_store())
        .build()
        .expect("app");
    let server = TestServer::start(app).await;
    let before = scrape(&server).await;
    assert_eq!(sample(&before, "docket_tasks_running"), 0, "{before}");
    assert_eq!(sample(&before, "docket_task_heartbeat_failures_total"), 0);
    assert_eq!(sample(&before, "docket_tasks_recorded_stale_total"), 0);

    let (status, created) = server
        .rpc(
            "tools/call",
            json!({"name": "diagnostics_sleep", "arguments": {"seconds": 60}}),
        )
        .capabilities(json!({"extensions": {TASKS: {}}}))
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert_eq!(status, 200, "{created}");
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let running = scrape(&server).await;
    assert_eq!(sample(&running, "docket_tasks_running"), 1, "{running}");

    server.cancel_task_as("alice", &task_id).await;
    server.wait_task_as("alice", &task_id, "cancelled").await;
    // The task leaves the runtime's registry once its work has stopped, just after its
    // ending is written.
    loop {
        let after = scrape(&server).await;
        if sample(&after, "docket_tasks_running") == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
