//! Several `docket serve` replicas on one PostgreSQL: a task created on one is read
//! on another at once, a cancel crosses replicas, a killed replica's tasks read as
//! failed and are audited by a survivor, and SIGTERM drains.
//!
//! PostgreSQL only: SQLite serves one replica.

use std::path::Path;
use std::sync::Arc;

use docket_storage::TaskStore;
use docket_storage::test_db::TestDatabase;

use crate::support::{Replica, temp_dir};

/// A schema of its own on the test PostgreSQL, or None (skip) when it is not
/// reachable and not required.
async fn database() -> Option<TestDatabase> {
    TestDatabase::postgres(&crate::support::postgres_server()).await
}

fn write_config(dir: &Path, name: &str, database_url: &str) -> String {
    let path = dir.join(format!("{name}.yaml"));
    let text = format!(
        "server: {{ address: \"127.0.0.1:0\", replica_id: \"{name}\", shutdown: {{ grace_period: 3s }} }}\n\
         database: {{ url: \"{database_url}\", max_connections: 4, migrate_on_start: true }}\n\
         tasks: {{ heartbeat_interval: 250ms, stale_after: 2s }}\n\
         auth: {{ allow_anonymous: true, anonymous_roles: [admin] }}\n\
         diagnostics: {{ enabled: true }}\n"
    );
    std::fs::write(&path, text).expect("config written");
    path.to_str().expect("utf-8 path").to_owned()
}

/// Two replicas, A and B, on one schema.
async fn two_replicas(label: &str) -> Option<(TestDatabase, Replica, Replica)> {
    let database = database().await?;
    let dir = temp_dir(label);
    let a = Replica::start(
        &dir,
        &["--config", &write_config(&dir, "a", database.url())],
    );
    let b = Replica::start(
        &dir,
        &["--config", &write_config(&dir, "b", database.url())],
    );
    Some((database, a, b))
}

#[tokio::test]
async fn a_task_created_on_one_replica_is_read_on_another_at_once_on_postgres() {
    let Some((_database, a, b)) = two_replicas("read-anywhere").await else {
        return;
    };
    let id = a.start_sleep(0.5).await;
    let seen = b.get_task(&id).await;
    assert_eq!(seen["taskId"], id.as_str());
    assert!(
        seen["status"] == "working" || seen["status"] == "completed",
        "{seen}"
    );
    let done = b.wait_for(&id, "completed").await;
    assert_eq!(done["result"]["structuredContent"]["slept_seconds"], 0.5);
}

#[tokio::test]
async fn a_cancel_taken_by_another_replica_stops_the_work_on_postgres() {
    let Some((_database, a, b)) = two_replicas("cross-cancel").await else {
        return;
    };
    let id = a.start_sleep(600.0).await;
    let ack = b
        .rpc("tasks/cancel", serde_json::json!({"taskId": id}), true)
        .await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let cancelled = a.wait_for(&id, "cancelled").await;
    assert!(cancelled.get("result").is_none());
}

#[tokio::test]
async fn a_killed_replicas_task_reads_as_failed_and_a_survivor_audits_it_on_postgres() {
    let Some((database, mut a, b)) = two_replicas("kill").await else {
        return;
    };
    let id = a.start_sleep(600.0).await;
    a.signal("-KILL");
    a.wait();
    let failed = b.wait_for(&id, "failed").await;
    assert!(
        failed["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("call the tool again")),
        "{failed}"
    );

    // B's maintenance pass records the failure and writes the one audit row.
    let store: Arc<dyn TaskStore> = database.store().await;
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        let rows = store
            .audit_for_tool("diagnostics_sleep", 10)
            .await
            .expect("audit");
        if !rows.is_empty() {
            assert_eq!(rows.len(), 1, "{rows:?}");
            assert_eq!(rows[0].outcome, "failed");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no replica audited the lost task"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn sigterm_lets_short_work_finish_and_records_long_work_as_failed_on_postgres() {
    let Some((_database, mut a, b)) = two_replicas("sigterm").await else {
        return;
    };
    let short = a.start_sleep(1.0).await;
    let long = a.start_sleep(600.0).await;
    a.signal("-TERM");
    a.wait();
    let short = b.get_task(&short).await;
    assert_eq!(short["status"], "completed", "{short}");
    let long = b.get_task(&long).await;
    assert_eq!(long["status"], "failed", "{long}");
    assert!(
        long["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("shut down")),
        "{long}"
    );
}
