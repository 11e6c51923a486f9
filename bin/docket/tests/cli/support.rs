//! Starting `docket serve` processes and talking MCP to them.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

/// The PostgreSQL server the environment names (`DOCKET_TEST_DATABASE_URL`,
/// `DOCKET_REQUIRE_POSTGRES`): the tests read the variables, the test-database
/// helpers do not.
pub(crate) fn postgres_server() -> docket_storage::test_db::PostgresServer {
    docket_storage::test_db::PostgresServer::from_lookup(|name| std::env::var(name).ok())
}

/// A running `docket serve` process; killed when dropped.
pub(crate) struct Replica {
    child: Child,
    pub(crate) base: String,
    http: reqwest::Client,
}

/// A fresh folder under the system temp dir.
pub(crate) fn temp_dir(label: &str) -> PathBuf {
    let mut suffix = [0u8; 8];
    getrandom::fill(&mut suffix).expect("random");
    let dir = std::env::temp_dir().join(format!("docket-{label}-{}", hex::encode(suffix)));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

impl Replica {
    /// Starts `docket serve` in `dir` with `args`, and waits until it is serving.
    pub(crate) fn start(dir: &Path, args: &[&str]) -> Self {
        Self::start_program(Path::new(env!("CARGO_BIN_EXE_docket")), dir, args)
    }

    /// [`Replica::start`] with another copy of the `docket` binary.
    pub(crate) fn start_program(program: &Path, dir: &Path, args: &[&str]) -> Self {
        let mut child = Command::new(program)
            .arg("serve")
            .args(args)
            .current_dir(dir)
            .env("DOCKET_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("docket starts");
        let stderr = child.stderr.take().expect("stderr");
        let (found, url) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if !sent
                    && line.contains("docket is serving")
                    && let Some(start) = line.find("http://")
                {
                    let url: String = line[start..]
                        .chars()
                        .take_while(|c| !c.is_whitespace() && *c != '"' && *c != '\u{1b}')
                        .collect();
                    let _ = found.send(url);
                    sent = true;
                }
                // Keep draining so the process never blocks on a full pipe, and echo
                // for whoever reads a failing test's output.
                eprintln!("[docket serve] {line}");
            }
        });
        let url = url
            .recv_timeout(Duration::from_secs(120))
            .expect("docket printed its URL");
        let base = url.trim_end_matches("/mcp").to_owned();
        Self {
            child,
            base,
            http: reqwest::Client::new(),
        }
    }

    /// Sends a signal (`-KILL`, `-TERM`) to the process.
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .arg(signal)
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(status.success());
    }

    /// Waits for the process to exit; its exit status.
    pub(crate) fn wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.wait().ok()
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub(crate) fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// One JSON-RPC request with well-formed headers and `_meta`.
    pub(crate) async fn rpc(&self, method: &str, mut params: Value, tasks: bool) -> Value {
        let capabilities = if tasks {
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
        } else {
            json!({})
        };
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let name = params
            .get("name")
            .or_else(|| params.get("taskId"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut request = self
            .http
            .post(format!("{}/mcp", self.base))
            .header("content-type", "application/json")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", name);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let response = request.json(&body).send().await.expect("request sent");
        response.json().await.expect("JSON answer")
    }

    /// Starts `diagnostics_sleep` as a task; returns its id.
    pub(crate) async fn start_sleep(&self, seconds: f64) -> String {
        let answer = self
            .rpc(
                "tools/call",
                json!({"name": "diagnostics_sleep", "arguments": {"seconds": seconds}}),
                true,
            )
            .await;
        assert_eq!(answer["result"]["resultType"], "task", "{answer}");
        answer["result"]["taskId"]
            .as_str()
            .expect("taskId")
            .to_owned()
    }

    /// `tasks/get`'s result.
    pub(crate) async fn get_task(&self, task_id: &str) -> Value {
        let answer = self
            .rpc("tasks/get", json!({"taskId": task_id}), true)
            .await;
        assert!(answer.get("error").is_none(), "{answer}");
        answer["result"].clone()
    }

    /// Polls until the task reaches `status` (a guard against hanging, not a deadline).
    pub(crate) async fn wait_for(&self, task_id: &str, status: &str) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
        loop {
            let task = self.get_task(task_id).await;
            if task["status"] == status {
                return task;
            }
            assert!(tokio::time::Instant::now() < deadline, "task stayed {task}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
