//! Scripts cannot hurt the server: every run and draft evaluates in a child
//! process under OS limits. On the embedded default, the bombs that used to
//! abort or bloat the server (string and list repeats, deep nesting encoded,
//! infinite recursion, a call too large for its pipe, a gigabyte string in a
//! 64 MiB draft) each fail their draft with a message while the server keeps
//! answering and stays small; a run queued with a crashing source fails once,
//! and two restarts find it failed and stay up; a run's process holds no
//! socket or file of the server's and carries its limits; a run past its wall
//! time is killed and fails with that limit; a draft whose client leaves is
//! killed. On PostgreSQL with two replicas, a loop whose every tick takes
//! seconds is cancelled through the other replica, and released on SIGTERM
//! within the grace period.

use std::path::Path;
use std::time::Duration;

use docket_storage::test_db::TestDatabase;
use serde_json::{Value, json};

use crate::script_runs::{BUSY, call, start, start_run, wait_run, write_config};
use crate::support::{Replica, temp_dir};

/// An interpreter tick that takes a long time: each `in` scans a list of
/// four million values, and the interpreter looks for a cancel only every
/// thousand ticks or so.
const HEAVY_TICKS: &str = "a = list(range(4000000))\nfound = 0\nfor i in range(100000):\n    if -1 in a:\n        found += 1\n";

/// `manage_script run_draft` of `source`; its structured answer and whether it
/// is an error.
async fn draft(server: &Replica, source: &str) -> (Value, bool) {
    let answer = server
        .rpc(
            "tools/call",
            json!({"name": "manage_script",
                   "arguments": {"command": "run_draft", "source": source}}),
            false,
        )
        .await;
    let result = &answer["result"];
    (
        result["structuredContent"].clone(),
        result["isError"] == true,
    )
}

/// The server answers a tool call.
async fn answers(server: &Replica) {
    let info = server
        .rpc(
            "tools/call",
            json!({"name": "platform_info", "arguments": {}}),
            false,
        )
        .await;
    assert!(
        info["result"]["structuredContent"]["server"]["name"].is_string(),
        "{info}"
    );
}

/// A value (in kB) of the process's `/proc/<pid>/status`.
fn status_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("field")
}

/// The processes whose parent is `pid`.
fn children_of(pid: u32) -> Vec<u32> {
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // pid (comm) state ppid ...: comm may hold spaces, so read after its ')'.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        if parent == Some(pid) {
            children.push(child);
        }
    }
    children
}

#[tokio::test]
async fn the_server_outlives_every_bomb_a_draft_can_drop() {
    let dir = temp_dir("bombs");
    let mut server = Replica::start(&dir, &["--address", "127.0.0.1:0"]);
    answers(&server).await;
    let bombs: [(&str, &str, &str); 6] = [
        (
            "string repeat",
            "s = 'x' * 1000000\nt = s * 2000000000\n",
            "ran out of memory (limit 64 MiB)",
        ),
        (
            "list repeat",
            "x = [0] * 1000000 * 2000000000\n",
            "ran out of memory (limit 64 MiB)",
        ),
        (
            "deep nesting encoded",
            "x = []\nfor i in range(200000):\n    x = [x]\njson.encode(x)\n",
            "nested more than 128 levels",
        ),
        (
            "infinite recursion",
            "def f(n):\n    return f(n + 1)\nf(0)\n",
            "",
        ),
        (
            "an oversized call",
            "platform.call('platform_info', {'pad': 'x' * 17000000})\n",
            "over the 16777216 bytes one call may carry",
        ),
        (
            "a gigabyte string",
            "x = 'x' * 1000000000\n",
            "ran out of memory (limit 64 MiB)",
        ),
    ];
    for (what, source, message) in bombs {
        let (draft, is_error) = draft(&server, source).await;
        assert!(is_error, "{what}: {draft}");
        assert_eq!(draft["status"], "failed", "{what}: {draft}");
        let error = draft["error"].as_str().unwrap_or_default();
        assert!(
            !error.is_empty() && error.contains(message),
            "{what}: {error:?} should say {message:?}"
        );
        assert!(server.is_running(), "{what} took the server down");
        answers(&server).await;
    }
    // A draft still works, and none of the bombs grew the server: their memory
    // was the child's.
    let (ok, is_error) = draft(&server, "print(json.encode([[1], {'a': 2}]))").await;
    assert!(!is_error, "{ok}");
    assert_eq!(ok["log"], "[[1],{\"a\":2}]\n");
    let peak = status_kb(server.pid(), "VmHWM:");
    assert!(
        peak < 512 * 1024,
        "the server's resident peak was {peak} kB"
    );
}

/// Polls `get_run` until the run has failed (a hang guard, not a deadline).
async fn failed_run(server: &Replica, run_id: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let answer = server
            .rpc(
                "tools/call",
                json!({"name": "get_run", "arguments": {"run_id": run_id}}),
                false,
            )
            .await;
        let run = &answer["result"]["structuredContent"];
        if run["status"] == "failed" {
            return run.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the run stayed {answer}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A configuration on the embedded database in `dir`, with or without workers.
fn embedded(dir: &Path, name: &str, workers: bool) -> String {
    write_config(dir, name, "sqlite://./docket-data/docket.db", workers)
}

#[tokio::test]
async fn a_queued_run_that_crashes_fails_once_across_restarts() {
    let dir = temp_dir("crash-loop");
    let mut queueing = Replica::start(&dir, &["--config", &embedded(&dir, "q", false)]);
    let run_id = start_run(
        &queueing,
        "crash",
        "s = 'x' * 1000000\nt = s * 2000000000\n",
    )
    .await;
    assert_eq!(
        call(&queueing, "get_run", json!({"run_id": run_id})).await["status"],
        "queued"
    );
    queueing.signal("-TERM");
    queueing.wait();

    let config = embedded(&dir, "w", true);
    let mut first = Replica::start(&dir, &["--config", &config]);
    let failed = failed_run(&first, &run_id).await;
    assert_eq!(failed["attempt"], 1, "{failed}");
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|error| error.contains("ran out of memory (limit 256 MiB)")),
        "{failed}"
    );
    assert!(first.is_running());
    answers(&first).await;
    first.signal("-TERM");
    first.wait();

    let mut second = Replica::start(&dir, &["--config", &config]);
    answers(&second).await;
    let read = failed_run(&second, &run_id).await;
    assert_eq!(
        (&read["status"], &read["attempt"]),
        (&json!("failed"), &json!(1))
    );
    // A script's failure is the tool's error: the task completed with it.
    let task = second.get_task(&run_id).await;
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(task["result"]["isError"], true, "{task}");
    assert!(second.is_running());
}

/// The children of `pid` that hold a run: the server sets a run's limits on its process when
/// it hands the run over (a descriptor limit of 64 among them), so the children it keeps
/// started ahead, waiting for a run, are not counted.
fn run_processes_of(pid: u32) -> Vec<u32> {
    children_of(pid)
        .into_iter()
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/limits")).is_ok_and(|limits| {
                limits.lines().any(|line| {
                    line.starts_with("Max open files")
                        && line.split_whitespace().nth(3) == Some("64")
                })
            })
        })
        .collect()
}

#[tokio::test]
async fn a_runs_process_holds_only_its_pipes_and_its_limits() {
    let dir = temp_dir("child-fds");
    let server = Replica::start(&dir, &["--config", &embedded(&dir, "w", true)]);
    let run_id = start_run(
        &server,
        "busy",
        &format!("platform.call('platform_info', {{}})\n{BUSY}"),
    )
    .await;
    wait_run(&server, &run_id, "running").await;
    // The run is running once claimed; its process starts a moment later.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let child = loop {
        let children = run_processes_of(server.pid());
        if let [child] = children[..] {
            break child;
        }
        assert!(
            children.is_empty(),
            "one process for the one run: {children:?}"
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "no process for the run"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // Once the run has made its first call, the process is the sandbox's.
    loop {
        let run = call(&server, "get_run", json!({"run_id": run_id})).await;
        if run["tool_calls"].as_u64() >= Some(1) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no call: {run}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut descriptors = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{child}/fd"))
        .expect("fds")
        .flatten()
    {
        let target = std::fs::read_link(entry.path()).expect("fd target");
        descriptors.push(target.display().to_string());
    }
    assert!(
        descriptors
            .iter()
            .all(|target| !target.starts_with("socket:") && !target.starts_with('/')),
        "the run's process inherited {descriptors:?}"
    );
    assert!(
        descriptors
            .iter()
            .filter(|target| target.starts_with("pipe:"))
            .count()
            >= 3,
        "{descriptors:?}"
    );
    let limits = std::fs::read_to_string(format!("/proc/{child}/limits")).expect("limits");
    let limit = |name: &str| {
        limits
            .lines()
            .find(|line| line.starts_with(name))
            .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
            .expect("limit line")
    };
    // 256 MiB of heap plus the 768 MiB margin.
    assert!(
        limit("Max address space").contains(&(1024u64 * 1024 * 1024).to_string()),
        "{limits}"
    );
    assert!(limit("Max core file size").contains(" 0 0 "), "{limits}");
    // CPU: the 600 s wall time plus 2 s, then a hard stop a second later.
    assert!(limit("Max cpu time").contains(" 602 603 "), "{limits}");
    assert!(limit("Max file size").contains(" 0 0 "), "{limits}");
    assert!(limit("Max open files").contains(" 64 64 "), "{limits}");
    let environment = std::fs::read(format!("/proc/{child}/environ")).expect("environ");
    assert!(
        !String::from_utf8_lossy(&environment).contains("DOCKET_"),
        "the server's environment stays with the server"
    );
    call(&server, "cancel_run", json!({"run_id": run_id})).await;
    wait_run(&server, &run_id, "cancelled").await;
}

#[tokio::test]
async fn a_heavy_tick_loop_is_cancelled_through_the_other_replica_and_released_on_sigterm_on_postgres()
 {
    let Some(database) = TestDatabase::postgres(&crate::support::postgres_server()).await else {
        return;
    };
    let dir = temp_dir("heavy-ticks");
    let a = start(&dir, "a", &database, true);
    let b = start(&dir, "b", &database, false);

    // Cancelled through B: A's worker hears it and kills the process at once,
    // where the interpreter would look again only after a thousand ticks.
    let cancelled = start_run(&a, "heavy", HEAVY_TICKS).await;
    wait_run(&b, &cancelled, "running").await;
    call(&b, "cancel_run", json!({"run_id": cancelled})).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let run = call(&b, "get_run", json!({"run_id": cancelled})).await;
        if run["status"] == "cancelled" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a heavy tick outran the cancel: {run}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // SIGTERM while it runs: A stops the process within its 3 s grace period and
    // releases the run to the queue (a run left behind would stay running until
    // its lease ran out, and be counted a reclaim).
    let mut a = a;
    let released = call(
        &a,
        "run_script",
        json!({"name": "heavy", "wait_seconds": -1}),
    )
    .await["run_id"]
        .as_str()
        .expect("run id")
        .to_owned();
    wait_run(&b, &released, "running").await;
    a.signal("-TERM");
    let status = a.wait().expect("exit status");
    assert!(status.success(), "{status:?}");
    let run = call(&b, "get_run", json!({"run_id": released})).await;
    assert_eq!(run["status"], "queued", "{run}");
    assert_eq!(run["attempt"], 1, "{run}");
    call(&b, "cancel_run", json!({"run_id": released})).await;
}

#[tokio::test]
async fn a_draft_whose_client_goes_away_is_killed() {
    let dir = temp_dir("draft-gone");
    let server = Replica::start(&dir, &["--address", "127.0.0.1:0"]);
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "manage_script",
        "arguments": {"command": "run_draft",
                      "source": "a = list(range(1000000))\nfor i in range(100000):\n    if -1 in a:\n        pass\n"},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}},
    }});
    let client = reqwest::Client::new();
    let sent = client
        .post(format!("{}/mcp", server.base))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "tools/call")
        .header("mcp-name", "manage_script")
        .json(&request)
        .send();
    // The client gives up once the draft's process is running.
    let pid = server.pid();
    let watch = async {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while run_processes_of(pid).is_empty() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the draft never started"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        answer = sent => panic!("the busy draft answered: {answer:?}"),
        () = watch => {}
    }
    drop(client);
    // Few steps, each slow: only the kill ends it before its 60 s wall time.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !run_processes_of(pid).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the draft's process outlived its client"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    answers(&server).await;
}

#[tokio::test]
async fn a_run_past_its_wall_time_is_killed_and_fails_with_its_limit() {
    let dir = temp_dir("wall-time");
    let config = dir.join("docket.yaml");
    std::fs::write(
        &config,
        "server: { address: \"127.0.0.1:0\" }\n\
         database: { url: \"sqlite://./docket-data/docket.db\" }\n\
         auth: { allow_anonymous: true, anonymous_roles: [admin] }\n\
         scripts: { timeout: 2s }\n",
    )
    .expect("config written");
    let server = Replica::start(&dir, &["--config", config.to_str().expect("utf-8")]);
    // Its ticks are seconds long: the interpreter would look at its clock
    // only minutes from now.
    let run_id = start_run(&server, "heavy", HEAVY_TICKS).await;
    let failed = failed_run(&server, &run_id).await;
    assert!(
        failed["error"]
            .as_str()
            .is_some_and(|error| error.contains("time limit of 2 s")),
        "{failed}"
    );
    assert_eq!(failed["attempt"], 1, "a limit is never retried");
    assert!(
        run_processes_of(server.pid()).is_empty(),
        "its process is gone"
    );
}

/// Scripts keep running after the binary the server started from is replaced on
/// disk (an upgrade in place): each run's process is the server's own image.
#[tokio::test]
async fn runs_start_after_the_binary_is_replaced_on_disk() {
    let dir = temp_dir("replaced-binary");
    let copy = dir.join("docket-old");
    std::fs::copy(env!("CARGO_BIN_EXE_docket"), &copy).expect("copy the binary");
    let server = Replica::start_program(&copy, &dir, &["--address", "127.0.0.1:0"]);
    std::fs::remove_file(&copy).expect("remove the binary");
    let (ok, is_error) = draft(&server, "print('still here')").await;
    assert!(!is_error, "{ok}");
    assert_eq!(ok["log"], "still here\n");
}
