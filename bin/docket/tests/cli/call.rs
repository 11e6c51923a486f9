//! `docket call` against a real server: a direct result, a task followed to its
//! result with a progress line, and Ctrl-C cancelling the task it follows.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use crate::support::{Replica, temp_dir};

fn sqlite_server(label: &str) -> Replica {
    sqlite_server_polled_every(label, 100)
}

fn sqlite_server_polled_every(label: &str, poll_interval_ms: u64) -> Replica {
    let dir = temp_dir(label);
    let config = dir.join("docket.yaml");
    std::fs::write(
        &config,
        format!(
            "server: {{ address: \"127.0.0.1:0\" }}\n\
             database: {{ url: \"sqlite://./docket-data/docket.db\" }}\n\
             auth: {{ allow_anonymous: true, anonymous_roles: [admin] }}\n\
             tasks: {{ poll_interval_ms: {poll_interval_ms} }}\n\
             diagnostics: {{ enabled: true }}\n"
        ),
    )
    .expect("config written");
    Replica::start(&dir, &["--config", config.to_str().expect("utf-8 path")])
}

fn docket_call(server: &Replica, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_docket"));
    command
        .arg("call")
        .args(args)
        .arg("--url")
        .arg(format!("{}/mcp", server.base));
    command
}

#[tokio::test]
async fn a_direct_result_is_printed() {
    let server = sqlite_server("call-direct");
    let output = docket_call(&server, &["platform_info"])
        .output()
        .expect("docket call runs");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("\"persona\": \"admin\""), "{stdout}");

    let output = docket_call(&server, &["platform_info", "--json"])
        .output()
        .expect("docket call runs");
    let raw: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("--json prints JSON");
    assert_eq!(raw["resultType"], "complete");
}

#[tokio::test]
async fn a_task_is_followed_with_a_progress_line_to_its_result() {
    let server = sqlite_server("call-follow");
    let output = docket_call(
        &server,
        &["diagnostics_sleep", "--arg", "seconds=1.5", "--follow"],
    )
    .output()
    .expect("docket call runs");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("\"slept_seconds\": 1.5"), "{stdout}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("working ·"),
        "a live progress line: {stderr}"
    );
    assert!(stderr.contains("completed ·"), "{stderr}");
}

/// With a poll interval of ten minutes, the follower still learns of the end as it
/// happens: the server pushes it on the listen stream. Polling alone would not end
/// before the hang guard.
#[tokio::test]
async fn a_followed_task_ends_when_the_server_says_not_at_the_next_poll() {
    let server = sqlite_server_polled_every("call-listen", 600_000);
    let mut child = docket_call(
        &server,
        &["diagnostics_sleep", "--arg", "seconds=0.5", "--follow"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("docket call runs");
    let hang_guard = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child's status") {
            break status;
        }
        if hang_guard.elapsed() > std::time::Duration::from_secs(120) {
            let _ = child.kill();
            panic!("the follower waited for its next poll instead of hearing the end");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("stdout read");
    assert!(status.success(), "{stdout}");
    assert!(stdout.contains("\"slept_seconds\": 0.5"), "{stdout}");
}

#[tokio::test]
async fn ctrl_c_cancels_the_followed_task() {
    let server = sqlite_server("call-cancel");
    let mut child = docket_call(
        &server,
        &["diagnostics_sleep", "--arg", "seconds=600", "--follow"],
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .expect("docket call starts");
    // Wait for the first progress line: the task exists and is being followed.
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut seen = Vec::new();
    loop {
        let mut chunk = Vec::new();
        let read = stderr
            .read_until(b's', &mut chunk)
            .expect("stderr readable");
        assert!(
            read > 0,
            "docket call ended early: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend(chunk);
        if String::from_utf8_lossy(&seen).contains("working ·") {
            break;
        }
    }
    let status = Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .expect("kill runs");
    assert!(status.success());
    let status = child.wait().expect("docket call exits");
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).expect("stderr readable");
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut stdout)
        .expect("stdout readable");
    assert!(!status.success(), "a cancelled task is not a success");
    assert!(stdout.contains("cancelled"), "{stdout} {rest}");

    // The server agrees: the task ended cancelled.
    let seen = String::from_utf8_lossy(&seen).to_string() + &rest;
    let task_id: String = seen
        .split("cancelling ")
        .nth(1)
        .expect("docket call says which task it cancels")
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    assert!(
        task_id
            .strip_prefix("task_")
            .is_some_and(|digits| digits.len() == 32),
        "{seen}"
    );
    let task = server.get_task(&task_id).await;
    assert_eq!(task["status"], "cancelled", "{task}");
}
