//! Script runs with real `docket serve` processes. On the zero-configuration
//! default (SQLite), the README's walkthrough: a script saved and run with
//! `docket call run_script --follow`. Across replicas on one PostgreSQL: a run
//! started through replica A and cancelled through replica B (by `cancel_run`
//! and by `tasks/cancel`) ends cancelled; a run whose replica is killed with
//! `kill -9` is reclaimed by the other replica when its lease expires and
//! finished there; a run whose replica shuts down goes back to the queue and
//! another replica takes it.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use docket_storage::test_db::TestDatabase;
use serde_json::{Value, json};

use crate::support::{Replica, temp_dir};

/// Loops until cancelled: each of its ten million steps scans a list of 1 000, so the run
/// lasts minutes on its step budget while its heap stays flat. (A growing sum would not:
/// past 2^31 every step allocates an integer, and the run ends on the 256 MiB heap limit
/// within a second, racing whatever the test does next.)
pub(crate) const BUSY: &str =
    "a = list(range(1000))\nfor i in range(10000000):\n    if -1 in a:\n        pass\n";

/// Waits in a tool call, so a run takes a few seconds whoever runs it.
const SLOW: &str = "platform.call('diagnostics_sleep', {'seconds': 3})\nprint('done')\n";

/// A replica's configuration: a short lease so a dead replica's run is taken
/// over soon, and a rate limit the polling below never reaches; `workers: false` makes a replica that queues runs but runs none.
pub(crate) fn write_config(dir: &Path, name: &str, database_url: &str, workers: bool) -> String {
    let path = dir.join(format!("{name}.yaml"));
    let text = format!(
        "server: {{ address: \"127.0.0.1:0\", replica_id: \"{name}\", shutdown: {{ grace_period: 3s }} }}\n\
         database: {{ url: \"{database_url}\", max_connections: 4, migrate_on_start: true }}\n\
         tasks: {{ heartbeat_interval: 250ms, stale_after: 2s }}\n\
         scripts: {{ lease: 2s, heartbeat_interval: 250ms, worker: {{ enabled: {workers} }} }}\n\
         auth: {{ allow_anonymous: true, anonymous_roles: [admin] }}\n\
         rate_limit: {{ requests_per_minute: 100000, burst: 10000 }}\n\
         diagnostics: {{ enabled: true }}\n"
    );
    std::fs::write(&path, text).expect("config written");
    path.to_str().expect("utf-8 path").to_owned()
}

pub(crate) fn start(dir: &Path, name: &str, database: &TestDatabase, workers: bool) -> Replica {
    Replica::start(
        dir,
        &[
            "--config",
            &write_config(dir, name, database.url(), workers),
        ],
    )
}

/// A tool's `structuredContent`, called directly.
pub(crate) async fn call(replica: &Replica, tool: &str, arguments: Value) -> Value {
    let answer = replica
        .rpc(
            "tools/call",
            json!({"name": tool, "arguments": arguments}),
            false,
        )
        .await;
    assert!(answer["result"]["isError"].is_null(), "{answer}");
    answer["result"]["structuredContent"].clone()
}

/// Saves `source` as `name` and starts it as a task; returns the run id.
pub(crate) async fn start_run(replica: &Replica, name: &str, source: &str) -> String {
    call(
        replica,
        "manage_script",
        json!({"command": "create", "name": name, "source": source}),
    )
    .await;
    let answer = replica
        .rpc(
            "tools/call",
            json!({"name": "run_script", "arguments": {"name": name}}),
            true,
        )
        .await;
    assert_eq!(answer["result"]["resultType"], "task", "{answer}");
    answer["result"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned()
}

/// Polls `get_run` until the run is `status` (a hang guard, not a deadline).
pub(crate) async fn wait_run(replica: &Replica, run_id: &str, status: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let run = call(replica, "get_run", json!({"run_id": run_id})).await;
        if run["status"] == status {
            return run;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run stayed {run}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_run_started_on_a_and_cancelled_through_b_ends_cancelled_on_postgres() {
    let Some(database) = TestDatabase::postgres(&crate::support::postgres_server()).await else {
        return;
    };
    let dir = temp_dir("run-cancel");
    // Only A runs scripts, so the run is A's; B only takes the cancels.
    let a = start(&dir, "a", &database, true);
    let b = start(&dir, "b", &database, false);

    let by_tool = start_run(&a, "busy", BUSY).await;
    wait_run(&b, &by_tool, "running").await;
    let working = b.get_task(&by_tool).await;
    assert_eq!(working["status"], "working");
    assert!(
        working["statusMessage"]
            .as_str()
            .is_some_and(|message| message.starts_with("running")),
        "{working}"
    );
    call(&b, "cancel_run", json!({"run_id": by_tool})).await;
    let cancelled = b.wait_for(&by_tool, "cancelled").await;
    assert!(cancelled.get("result").is_none());

    let answer = a
        .rpc(
            "tools/call",
            json!({"name": "run_script", "arguments": {"name": "busy"}}),
            true,
        )
        .await;
    let by_task = answer["result"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned();
    wait_run(&b, &by_task, "running").await;
    let ack = b
        .rpc("tasks/cancel", json!({"taskId": by_task}), true)
        .await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    a.wait_for(&by_task, "cancelled").await;
    let run = wait_run(&a, &by_task, "cancelled").await;
    assert_eq!(run["attempt"], 1, "A ran it once and stopped it");
}

#[tokio::test]
async fn a_killed_replicas_run_is_reclaimed_and_finished_by_the_other_on_postgres() {
    let Some(database) = TestDatabase::postgres(&crate::support::postgres_server()).await else {
        return;
    };
    let dir = temp_dir("run-kill");
    let mut a = start(&dir, "a", &database, true);
    let run_id = start_run(&a, "slow", SLOW).await;
    wait_run(&a, &run_id, "running").await;
    // B starts only now, so the run is certainly A's.
    let b = start(&dir, "b", &database, true);
    a.signal("-KILL");
    a.wait();

    let done = wait_run(&b, &run_id, "succeeded").await;
    assert_eq!(done["attempt"], 2, "{done}");
    assert!(
        done["log"].as_str().is_some_and(|log| log.contains("done")),
        "{done}"
    );
    let task = b.wait_for(&run_id, "completed").await;
    assert_eq!(
        task["result"]["structuredContent"]["run_id"],
        run_id.as_str()
    );
}

#[tokio::test]
async fn the_embedded_default_runs_a_script_followed_by_docket_call() {
    let dir = temp_dir("run-zero-config");
    let server = Replica::start(&dir, &["--address", "127.0.0.1:0"]);
    let docket_call = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_docket"))
            .arg("call")
            .args(args)
            .arg("--url")
            .arg(format!("{}/mcp", server.base))
            .output()
            .expect("docket call runs")
    };
    let source = "source=\nme = platform.call(\"platform_info\", {})\ntotal = 0\nfor i in range(2000):\n    total += i\nprint(\"total\", total)\n";
    let saved = docket_call(&[
        "manage_script",
        "--arg",
        "command=create",
        "--arg",
        "name=count",
        "--arg",
        source,
    ]);
    assert!(saved.status.success(), "{saved:?}");
    let followed = docket_call(&["run_script", "--arg", "name=count", "--follow"]);
    assert!(followed.status.success(), "{followed:?}");
    let stdout = String::from_utf8_lossy(&followed.stdout);
    assert!(stdout.contains("\"status\": \"succeeded\""), "{stdout}");
    assert!(stdout.contains("total 1999000"), "{stdout}");
    assert!(stdout.contains("\"tool_calls\": 1"), "{stdout}");
}

#[tokio::test]
async fn a_run_on_a_replica_that_shuts_down_is_released_to_another_on_postgres() {
    let Some(database) = TestDatabase::postgres(&crate::support::postgres_server()).await else {
        return;
    };
    let dir = temp_dir("run-release");
    let mut a = start(&dir, "a", &database, true);
    let run_id = start_run(&a, "busy", BUSY).await;
    wait_run(&a, &run_id, "running").await;
    let b = start(&dir, "b", &database, true);
    a.signal("-TERM");
    a.wait();
    // Released, not failed: B takes it as a second attempt.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let run = call(&b, "get_run", json!({"run_id": run_id})).await;
        assert_ne!(run["status"], "failed", "{run}");
        if run["status"] == "running" && run["attempt"] == 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run stayed {run}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    call(&b, "cancel_run", json!({"run_id": run_id})).await;
    wait_run(&b, &run_id, "cancelled").await;
}
