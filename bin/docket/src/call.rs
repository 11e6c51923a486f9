//! `docket call`: a small MCP client. It declares the tasks extension, prints a
//! direct result readably, and follows a task with `tasks/get` at the server's
//! poll interval and at once whenever the server pushes a change on a
//! `subscriptions/listen` stream, showing one live progress line; Ctrl-C cancels
//! the task and waits for its end.

use std::io::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

const PROTOCOL_VERSION: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// What `docket call` was asked to do.
pub(crate) struct CallArgs {
    pub(crate) tool: String,
    pub(crate) args: Vec<String>,
    pub(crate) url: String,
    pub(crate) api_key: Option<String>,
    pub(crate) follow: bool,
    pub(crate) json: bool,
}

struct Client {
    http: reqwest::Client,
    url: String,
    api_key: Option<String>,
    next_id: u64,
}

impl Client {
    async fn request(
        &mut self,
        method: &str,
        mut params: Value,
        name: Option<&str>,
    ) -> anyhow::Result<Value> {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "docket-call", "version": env!("CARGO_PKG_VERSION")},
        });
        self.next_id += 1;
        let body =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL_VERSION)
            .header("mcp-method", method);
        if let Some(name) = name {
            request = request.header("mcp-name", header_value(name));
        }
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request
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
        let text = response.text().await.context("the answer was cut off")?;
        let message = if is_stream {
            // The last data line is the response; earlier ones are notifications.
            text.lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                .find(|message| message.get("id").is_some())
        } else {
            serde_json::from_str(&text).ok()
        };
        let Some(message) = message else {
            bail!("the server answered HTTP {status}: {}", text.trim());
        };
        if let Some(error) = message.get("error") {
            bail!(
                "{} (JSON-RPC error {})",
                error["message"].as_str().unwrap_or("unknown error"),
                error["code"]
            );
        }
        Ok(message["result"].clone())
    }
}

impl Client {
    /// Opens `subscriptions/listen` for `task_id`: each `notifications/tasks` the server
    /// pushes arrives as a `()` on the receiver, so the follower reads the task at once
    /// instead of at its next poll. `None` when the server does not offer it (the
    /// follower then only polls).
    async fn listen(&mut self, task_id: &str) -> Option<tokio::sync::mpsc::Receiver<()>> {
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": self.next_id, "method": "subscriptions/listen",
        "params": {
            "notifications": {"taskIds": [task_id]},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}},
                "io.modelcontextprotocol/clientInfo": {"name": "docket-call", "version": env!("CARGO_PKG_VERSION")},
            }
        }});
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL_VERSION)
            .header("mcp-method", "subscriptions/listen");
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let mut response = request.json(&body).send().await.ok()?;
        let streams = response.status().is_success()
            && response
                .headers()
                .get("content-type")
                .and_then(|value| value.to_str().ok())
                .is_some_and(|value| value.starts_with("text/event-stream"));
        if !streams {
            return None;
        }
        let (changes, receiver) = tokio::sync::mpsc::channel(8);
        tokio::spawn(async move {
            let mut pending = String::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                pending.push_str(&String::from_utf8_lossy(&chunk));
                // Whole events only; a partial one waits for the rest.
                while let Some(end) = pending.find("\n\n") {
                    let event: String = pending.drain(..end + 2).collect();
                    let pushed = event
                        .lines()
                        .filter_map(|line| line.strip_prefix("data:"))
                        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
                        .any(|message| message["method"] == "notifications/tasks");
                    if pushed && changes.send(()).await.is_err() {
                        return;
                    }
                }
            }
        });
        Some(receiver)
    }
}

/// Header values with characters a header cannot carry travel base64-wrapped.
fn header_value(value: &str) -> String {
    let plain = value.chars().all(|c| c.is_ascii_graphic() || c == ' ') && value.trim() == value;
    if plain {
        value.to_owned()
    } else {
        use base64::Engine as _;
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

/// `key=value` pairs; a value that parses as JSON (numbers, booleans, objects) is
/// taken as JSON, anything else as a string.
fn parse_arguments(pairs: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut arguments = Map::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("--arg {pair:?} must look like key=value");
        };
        let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        arguments.insert(key.to_owned(), value);
    }
    Ok(arguments)
}

/// Runs `docket call`; returns whether the tool succeeded.
pub(crate) async fn run(args: CallArgs) -> anyhow::Result<bool> {
    let mut client = Client {
        http: reqwest::Client::new(),
        url: args.url.clone(),
        api_key: args.api_key.clone(),
        next_id: 0,
    };
    let discover = client.request("server/discover", json!({}), None).await?;
    let tasks_offered = discover["capabilities"]["extensions"].get(TASKS).is_some();
    let arguments = parse_arguments(&args.args)?;
    let result = client
        .request(
            "tools/call",
            json!({"name": args.tool, "arguments": arguments}),
            Some(&args.tool),
        )
        .await?;
    match result["resultType"].as_str() {
        Some("task") if tasks_offered || result.get("taskId").is_some() => {
            let task_id = result["taskId"]
                .as_str()
                .context("the task handle has no taskId")?
                .to_owned();
            if !args.follow {
                if args.json {
                    println!("{result}");
                } else {
                    println!(
                        "task {task_id} is {}; follow it with --follow",
                        result["status"].as_str().unwrap_or("working")
                    );
                }
                return Ok(true);
            }
            let poll = result["pollIntervalMs"].as_u64().unwrap_or(1000);
            follow(
                &mut client,
                &task_id,
                Duration::from_millis(poll.max(100)),
                args.json,
            )
            .await
        }
        Some("input_required") => {
            println!("the tool asks for input, which `docket call` cannot give:");
            println!(
                "{}",
                serde_json::to_string_pretty(&result["inputRequests"]).unwrap_or_default()
            );
            Ok(false)
        }
        _ => Ok(print_result(&result, args.json)),
    }
}

/// Polls a task to its end with one live progress line on stderr; the first
/// Ctrl-C sends `tasks/cancel` and keeps following until the task has ended.
async fn follow(
    client: &mut Client,
    task_id: &str,
    poll: Duration,
    json: bool,
) -> anyhow::Result<bool> {
    let started = Instant::now();
    let mut cancel_sent = false;
    let interrupt = tokio::signal::ctrl_c();
    tokio::pin!(interrupt);
    // `ctrl_c` listens from its first poll on: poll it once before anything is shown,
    // so a Ctrl-C pressed as soon as the first status line appears is caught instead
    // of ending the process with the task left running.
    let first =
        std::future::poll_fn(|context| std::task::Poll::Ready(interrupt.as_mut().poll(context)))
            .await;
    let mut interrupted = match first {
        std::task::Poll::Ready(result) => {
            result.context("cannot listen for Ctrl-C")?;
            true
        }
        std::task::Poll::Pending => false,
    };
    // Told of each change at once where the server offers it; polling stays, for a
    // server that does not and for a stream that breaks.
    let mut changes = client.listen(task_id).await;
    loop {
        let task = client
            .request("tasks/get", json!({"taskId": task_id}), Some(task_id))
            .await?;
        let status = task["status"].as_str().unwrap_or("unknown").to_owned();
        // A task without a status message shows `status · 1.0s`, not an empty field.
        let message = task["statusMessage"].as_str().unwrap_or("");
        let shown = match message.trim() {
            "" => String::new(),
            text => format!(" · {text}"),
        };
        let mut stderr = std::io::stderr();
        let _ = write!(
            stderr,
            "\r\x1b[2K{status}{shown} · {:.1}s",
            started.elapsed().as_secs_f64()
        );
        let _ = stderr.flush();
        match status.as_str() {
            "completed" => {
                let _ = writeln!(stderr);
                return Ok(print_result(&task["result"], json));
            }
            "failed" => {
                let _ = writeln!(stderr);
                if json {
                    println!("{task}");
                } else {
                    println!(
                        "failed: {}",
                        task["error"]["message"].as_str().unwrap_or(message)
                    );
                }
                return Ok(false);
            }
            "cancelled" => {
                let _ = writeln!(stderr);
                println!("cancelled");
                return Ok(false);
            }
            "input_required" => {
                let _ = writeln!(stderr);
                println!("the task waits for input, which `docket call` cannot give:");
                println!(
                    "{}",
                    serde_json::to_string_pretty(&task["inputRequests"]).unwrap_or_default()
                );
            }
            _ => {}
        }
        if !interrupted {
            let changed = async {
                match changes.as_mut() {
                    Some(changes) => changes.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = tokio::time::sleep(poll) => continue,
                pushed = changed => {
                    if pushed.is_none() {
                        // The stream ended: poll from now on.
                        changes = None;
                    }
                    continue;
                }
                result = &mut interrupt => {
                    result.context("cannot listen for Ctrl-C")?;
                    interrupted = true;
                }
            }
        }
        if !cancel_sent {
            let _ = writeln!(std::io::stderr(), "\ncancelling {task_id} …");
            client
                .request("tasks/cancel", json!({"taskId": task_id}), Some(task_id))
                .await?;
            cancel_sent = true;
        } else {
            tokio::time::sleep(poll).await;
        }
    }
}

/// Prints a `CallToolResult`: its text blocks (or its structured content), or the
/// raw JSON with `--json`. Returns whether it is a success.
fn print_result(result: &Value, json: bool) -> bool {
    let is_error = result["isError"] == Value::Bool(true);
    if json {
        println!("{result}");
        return !is_error;
    }
    let mut printed = false;
    for block in result["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => {
                match block["text"]
                    .as_str()
                    .and_then(|text| serde_json::from_str::<Value>(text).ok())
                {
                    Some(parsed) if parsed.is_object() || parsed.is_array() => {
                        println!(
                            "{}",
                            serde_json::to_string_pretty(&parsed).unwrap_or_default()
                        );
                    }
                    _ => println!("{}", block["text"].as_str().unwrap_or_default()),
                }
                printed = true;
            }
            Some(kind) => {
                println!(
                    "[{kind} content: {}]",
                    block["mimeType"].as_str().unwrap_or("no media type")
                );
                printed = true;
            }
            None => {}
        }
    }
    if !printed && let Some(structured) = result.get("structuredContent") {
        println!(
            "{}",
            serde_json::to_string_pretty(structured).unwrap_or_default()
        );
    }
    !is_error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_json_when_they_parse_and_strings_otherwise() {
        let parsed = parse_arguments(&[
            "seconds=1.5".into(),
            "name=orders".into(),
            "flag=true".into(),
            "sql=select 1".into(),
        ])
        .expect("valid");
        assert_eq!(parsed["seconds"], json!(1.5));
        assert_eq!(parsed["name"], json!("orders"));
        assert_eq!(parsed["flag"], json!(true));
        assert_eq!(parsed["sql"], json!("select 1"));
        assert!(parse_arguments(&["novalue".into()]).is_err());
    }

    #[test]
    fn unusual_names_are_base64_wrapped() {
        assert_eq!(header_value("platform_info"), "platform_info");
        assert_eq!(header_value("élève"), "=?base64?w6lsw6h2ZQ==?=");
    }
}
