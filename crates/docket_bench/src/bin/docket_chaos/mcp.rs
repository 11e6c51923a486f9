//! The soak's MCP client: JSON-RPC over Streamable HTTP, protocol revision 2026-07-28,
//! with an API key and (where asked) the tasks extension declared on the request. Every
//! answer's HTTP status is counted in the journal, every 5xx kept with its body, every
//! JSON-RPC error counted by its message.

use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::journal::{Answer, Clock, ServerError, Shared};

/// The protocol revision spoken.
const PROTOCOL_VERSION: &str = "2026-07-28";

/// How long one request may take before the soak counts it lost. Generous: the
/// machine is busy, and a direct call is at most half a second of work.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// The message the server sends for a failure inside it (`McpError::Internal`).
const INTERNAL_ERROR: &str = "internal error; see the server log";

/// A client for every replica.
#[derive(Clone)]
pub(crate) struct Mcp {
    http: reqwest::Client,
    api_key: String,
    journal: Shared,
    clock: Clock,
}

impl Mcp {
    pub(crate) fn new(api_key: &str, journal: Shared, clock: Clock) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .no_proxy()
            .tcp_nodelay(true)
            .timeout(REQUEST_TIMEOUT)
            .build()
            .context("cannot build an HTTP client")?;
        Ok(Self {
            http,
            api_key: api_key.to_owned(),
            journal,
            clock,
        })
    }

    /// Sends `method` with `params` to the MCP endpoint `url` of `process`; `tasks`
    /// declares the tasks extension. `Mcp-Name` is the tool's name or the task id.
    pub(crate) async fn request(
        &self,
        process: usize,
        url: &str,
        method: &str,
        mut params: Value,
        tasks: bool,
    ) -> Answer {
        let capabilities = if tasks {
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
        } else {
            json!({})
        };
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "docket-chaos", "version": "0"},
        });
        let name = params
            .get("name")
            .or_else(|| params.get("taskId"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        let mut request = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", PROTOCOL_VERSION)
            .header("mcp-method", method)
            .bearer_auth(&self.api_key);
        if let Some(name) = &name {
            request = request.header("mcp-name", name);
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let answer = match request.json(&body).send().await {
            Ok(response) => self.read(process, method, response).await,
            Err(error) => Answer::Lost(format!("{error:#}")),
        };
        self.count(process, method, &answer);
        answer
    }

    async fn read(&self, process: usize, method: &str, response: reqwest::Response) -> Answer {
        let status = response.status().as_u16();
        let retry_after = response.headers().contains_key("retry-after");
        let streamed = response
            .headers()
            .get("content-type")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.starts_with("text/event-stream"));
        let text = match response.text().await {
            Ok(text) => text,
            Err(error) => {
                self.status(method, status);
                return Answer::Lost(format!("the answer broke off: {error:#}"));
            }
        };
        self.status(method, status);
        if status >= 500 {
            self.journal.lock().http.server_errors.push(ServerError {
                at: self.clock.now(),
                process,
                method: method.to_owned(),
                status,
                retry_after,
                body: text.chars().take(2000).collect(),
            });
        }
        let message = if streamed {
            last_response(&text)
        } else {
            serde_json::from_str::<Value>(&text).ok()
        };
        match message {
            Some(message) => match (message.get("result"), message.get("error")) {
                (Some(result), _) => Answer::Result(result.clone()),
                (None, Some(error)) => Answer::Error {
                    code: error["code"].as_i64().unwrap_or(0),
                    message: error["message"].as_str().unwrap_or("").to_owned(),
                },
                _ => Answer::Lost(format!("HTTP {status}: no result or error in {message}")),
            },
            None => Answer::Lost(format!(
                "HTTP {status}: {}",
                text.chars().take(300).collect::<String>()
            )),
        }
    }

    fn status(&self, method: &str, status: u16) {
        *self
            .journal
            .lock()
            .http
            .statuses
            .entry((method.to_owned(), status))
            .or_default() += 1;
    }

    fn count(&self, process: usize, method: &str, answer: &Answer) {
        let mut journal = self.journal.lock();
        match answer {
            Answer::Result(_) => {}
            Answer::Error { message, .. } => {
                *journal
                    .http
                    .errors
                    .entry((method.to_owned(), category(message)))
                    .or_default() += 1;
                if message.contains(INTERNAL_ERROR) {
                    journal.http.internal_errors.push(ServerError {
                        at: self.clock.now(),
                        process,
                        method: method.to_owned(),
                        status: 200,
                        retry_after: false,
                        body: message.clone(),
                    });
                }
            }
            Answer::Lost(_) => *journal.http.lost.entry(method.to_owned()).or_default() += 1,
        }
    }
}

/// The last JSON-RPC response among the `data:` lines of an event stream.
fn last_response(text: &str) -> Option<Value> {
    let mut found = None;
    let mut data = String::new();
    for line in text.lines().chain(std::iter::once("")) {
        if let Some(rest) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        } else if line.is_empty() && !data.is_empty() {
            if let Ok(message) = serde_json::from_str::<Value>(&data)
                && message.get("id").is_some()
                && (message.get("result").is_some() || message.get("error").is_some())
            {
                found = Some(message);
            }
            data.clear();
        }
    }
    found
}

/// A refusal's message with what varies (numbers, ids, addresses) taken out, so
/// equal refusals count together.
fn category(message: &str) -> String {
    let cut: String = message.chars().take(90).collect();
    let mut out = String::new();
    let mut in_digits = false;
    for c in cut.chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            in_digits = false;
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_response_of_an_event_stream_is_read() {
        let stream = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n\
                      data: {\"jsonrpc\":\"2.0\",\"id\":1,\n\
                      data: \"result\":{\"ok\":true}}\n\n";
        let message = last_response(stream).expect("a response");
        assert_eq!(message["result"]["ok"], true);
        assert!(last_response("data: {\"method\":\"x\"}\n\n").is_none());
    }

    #[test]
    fn refusals_count_together_whatever_their_numbers() {
        assert_eq!(
            category("retry in 250ms after 3 attempts"),
            category("retry in 1000ms after 12 attempts")
        );
    }
}
