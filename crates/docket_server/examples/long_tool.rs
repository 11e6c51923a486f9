//! Embedding Docket: a service that registers its own long-running tool and gets durable MCP
//! tasks on SQLite, with no configuration file.
//!
//! The configuration is built in code ([`Config::embedded_default`]: loopback only, anonymous
//! callers are administrators), the tool is a [`ToolSpec`] plus an async function, and the task
//! store is a SQLite file that `docket_storage::connect` opens (and migrates) in a fresh
//! temporary folder. [`docket_server::serve`] is the same accept loop `docket serve` runs.
//!
//! ```text
//! cargo run -p docket_server --example long_tool                  # serve until Ctrl-C
//! cargo run -p docket_server --example long_tool -- --self-check  # what `cargo xtask test` runs
//! ```
//!
//! With `--self-check` it is also its own client, over HTTP, as any MCP client would be: it calls
//! `count_slowly` as a task (declaring `io.modelcontextprotocol/tasks` on the request), follows it
//! with `tasks/get` until it ends, checks the progress it saw and the result, reads the task's row
//! back from the SQLite file, shuts the server down, and exits non-zero if anything differs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail, ensure};
use docket_protocol::meta::{CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY};
use docket_protocol::result::ResultType;
use docket_protocol::tasks::{CreateTaskResult, GetTaskResult, TASKS_GET, TaskStatus};
use docket_protocol::tools::CallToolResult;
use docket_protocol::{PROTOCOL_VERSION, TASKS_EXTENSION};
use docket_server::{App, Config, TaskSupport, ToolCall, ToolOutcome, ToolSpec};
use docket_task::{TaskId, TaskStore};
use serde_json::{Value, json};

/// The tool this service adds to Docket's own.
const TOOL: &str = "count_slowly";

/// How long one counting step takes.
const STEP: Duration = Duration::from_millis(150);

/// How far the self-check counts: about a second and a half of work.
const COUNT_TO: u64 = 10;

/// How long the self-check waits for the task before it calls the run a failure.
const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let self_check = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--self-check") => true,
        Some(other) => bail!("unknown argument {other:?}; the only one is --self-check"),
    };

    let folder = std::env::temp_dir().join(format!("docket-long-tool-{}", random_name()?));
    let database_url = format!("sqlite://{}", folder.join("tasks.db").display());

    // The whole configuration, in code: the embedded default, tasks kept in our own file, and
    // a heartbeat short enough that the status message follows the count closely.
    let mut config = Config::embedded_default();
    config.database.url = Some(database_url.clone());
    config.tasks.heartbeat_interval = Duration::from_millis(200);
    config.tasks.poll_interval_ms = 200;

    let store = docket_storage::connect(&database_url, docket_storage::ConnectOptions::default())
        .await
        .with_context(|| format!("cannot open {database_url}"))?;
    let app = App::builder(config)
        .tool(count_slowly_spec(), count_slowly)?
        .task_store(store.task_store())
        .build()?;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    println!(
        "serving http://{address}{} with tasks in {database_url}",
        docket_server::MCP_PATH
    );

    if !self_check {
        println!(
            "try: cargo run -p docket -- call {TOOL} --arg to=20 --follow --url http://{address}/mcp"
        );
        docket_server::serve(listener, app, std::future::pending()).await?;
        return Ok(());
    }

    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(docket_server::serve(listener, app, async {
        let _ = stopped.await;
    }));
    let checked = self_check_against(address, store.task_store()).await;
    // Stop the server whatever the check found, then report the check first.
    let _ = stop.send(());
    let served = server.await.context("the server task panicked")?;
    let _ = std::fs::remove_dir_all(&folder);
    checked?;
    served.context("the server stopped with an error")?;
    println!("self-check passed");
    Ok(())
}

/// What `count_slowly` declares: its arguments, its structured result, and that a call may
/// become a task when the client asks for one.
fn count_slowly_spec() -> ToolSpec {
    let mut spec = ToolSpec::new(
        TOOL,
        "Counts to `to`, one step every 150 ms, reporting each step. Long enough to be worth \
         running as a task.",
        json!({
            "type": "object",
            "properties": {"to": {"type": "integer", "minimum": 1, "maximum": 1000}},
            "required": ["to"],
            "additionalProperties": false
        }),
    )
    .with_task_support(TaskSupport::Optional);
    spec.output_schema = Some(json!({
        "type": "object",
        "properties": {"counted": {"type": "integer"}},
        "required": ["counted"]
    }));
    spec
}

/// The tool. Docket has validated the arguments against the schema before this runs. Progress
/// goes where the call asked for it: the task's status message when it runs as a task, progress
/// notifications when the request carried a progress token. A cancel (`tasks/cancel`, or the
/// client going away from a direct call) fires `call.cancel`.
async fn count_slowly(call: ToolCall) -> ToolOutcome {
    let to = call
        .arguments
        .get("to")
        .and_then(Value::as_u64)
        .unwrap_or(1);
    for step in 1..=to {
        tokio::select! {
            () = tokio::time::sleep(STEP) => {}
            () = call.cancel.cancelled() => {
                return CallToolResult::error(format!("stopped at {} of {to}", step - 1)).into();
            }
        }
        call.progress
            .report(step, Some(to), Some(format!("counted {step} of {to}")));
    }
    CallToolResult::structured(json!({"counted": to})).into()
}

/// Calls the tool as a task over HTTP, follows it to its end, and checks what it saw.
async fn self_check_against(address: SocketAddr, tasks: Arc<dyn TaskStore>) -> anyhow::Result<()> {
    let client = Client {
        http: reqwest::Client::new(),
        url: format!("http://{address}{}", docket_server::MCP_PATH),
    };
    let started: CreateTaskResult = client
        .request(
            "tools/call",
            TOOL,
            json!({"name": TOOL, "arguments": {"to": COUNT_TO}}),
        )
        .await?;
    ensure!(
        started.result_type == ResultType::Task,
        "the call did not become a task"
    );
    let task_id = started.task.task_id;
    println!("{TOOL} became task {task_id}");

    let poll = Duration::from_millis(started.task.poll_interval_ms.unwrap_or(200));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut progress_seen = Vec::new();
    let finished = loop {
        let task: GetTaskResult = client
            .request(TASKS_GET, &task_id, json!({"taskId": task_id}))
            .await?;
        if let Some(message) = &task.task.status_message
            && task.task.status == TaskStatus::Working
            && progress_seen.last() != Some(message)
        {
            println!("  statusMessage: {message}");
            progress_seen.push(message.clone());
        }
        if task.task.status != TaskStatus::Working {
            break task;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the task was still working after {PATIENCE:?}"
        );
        tokio::time::sleep(poll).await;
    };

    ensure!(
        finished.task.status == TaskStatus::Completed,
        "the task ended {:?}, error {:?}",
        finished.task.status,
        finished.detail.error
    );
    let result: CallToolResult = serde_json::from_value(
        finished
            .detail
            .result
            .context("a completed task carries its result")?,
    )?;
    println!(
        "  completed: {}",
        result.structured_content.clone().unwrap_or_default()
    );
    ensure!(!result.is_error(), "the tool reported an error");
    ensure!(
        result.structured_content == Some(json!({"counted": COUNT_TO})),
        "expected {{\"counted\": {COUNT_TO}}}"
    );
    ensure!(
        progress_seen
            .iter()
            .any(|message| message.starts_with("counted ")),
        "no progress reached the task's status message while it worked"
    );

    // The task is a row in the SQLite file, not state in this process.
    let id = TaskId::from_client(&task_id).context("Docket mints well-formed ids")?;
    let (row, _) = tasks
        .get(&id)
        .await?
        .context("the task has no row in the database")?;
    println!(
        "  stored: {} with {}",
        row.status.as_str(),
        row.result
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default()
    );
    ensure!(
        row.status == docket_task::TaskStatus::Completed,
        "the row says {}",
        row.status.as_str()
    );
    Ok(())
}

/// Just enough of an MCP client: one JSON-RPC request per POST, with the headers and `_meta`
/// the 2026-07-28 transport requires, declaring the tasks extension on every request.
struct Client {
    http: reqwest::Client,
    url: String,
}

impl Client {
    /// Sends `method` and reads its result as `T`. `name` goes in `Mcp-Name` (the tool's name
    /// or the task's id); every name here is plain ASCII, so none needs base64.
    async fn request<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        name: &str,
        mut params: Value,
    ) -> anyhow::Result<T> {
        params["_meta"] = json!({
            PROTOCOL_VERSION_KEY: PROTOCOL_VERSION,
            CLIENT_CAPABILITIES_KEY: {"extensions": {TASKS_EXTENSION: {}}},
            CLIENT_INFO_KEY: {"name": "long_tool-self-check", "version": env!("CARGO_PKG_VERSION")},
        });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let response = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL_VERSION)
            .header("mcp-method", method)
            .header("mcp-name", name)
            .json(&body)
            .send()
            .await
            .with_context(|| format!("cannot reach {}", self.url))?;
        let status = response.status();
        let is_stream = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        let text = response.text().await?;
        let message: Value = if is_stream {
            // Notifications come first; the message with an id is the response.
            text.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                .find(|message| message.get("id").is_some())
                .ok_or_else(|| anyhow!("the stream carried no response: {text}"))?
        } else {
            serde_json::from_str(&text)
                .with_context(|| format!("HTTP {status} with no JSON answer: {text}"))?
        };
        if let Some(error) = message.get("error") {
            bail!("{method} failed: {error}");
        }
        serde_json::from_value(message["result"].clone())
            .with_context(|| format!("an unexpected {method} result: {}", message["result"]))
    }
}

/// A name no other run of this example uses.
fn random_name() -> anyhow::Result<String> {
    Ok(TaskId::generate()
        .map_err(|err| anyhow!("cannot draw a random name: {err}"))?
        .to_string())
}
