//! The memory budget: the largest requests each newer method accepts, sent to a real
//! `docket serve` process, whose peak resident memory (`VmHWM`) must stay under a
//! stated bound. Each of these once made the server allocate hundreds of megabytes
//! or abort: a prompt that repeats its argument, a patch that repeats its
//! replacement, a listing of oversized prompts, an `initialize` that parks megabytes,
//! an asset read whole, and one identity opening every stream. A refusal has to come before the
//! allocation, so the bound holds only if every size is computed first.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Replica, temp_dir};

/// The bound on the server's peak resident memory over the whole test. An idle
/// server peaks near 35 MiB here; the requests below carry up to 4 MiB each, and
/// without their bounds one of them alone asked for more than 3 GiB.
const PEAK_BOUND_KIB: u64 = 192 * 1024;

/// The server's peak resident memory so far, in KiB (`VmHWM`, Linux).
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

/// Posts one current-era request; the response, unread.
async fn post(
    http: &reqwest::Client,
    base: &str,
    method: &str,
    mut params: Value,
) -> reqwest::Response {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let mut request = http
        .post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
    {
        request = request.header("mcp-name", name);
    }
    request
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
        .send()
        .await
        .expect("request sent")
}

async fn call(http: &reqwest::Client, base: &str, tool: &str, arguments: Value) -> Value {
    let response = post(
        http,
        base,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
    .await;
    response.json().await.expect("JSON answer")
}

#[tokio::test]
async fn the_largest_requests_stay_within_the_memory_budget() {
    let dir = temp_dir("memory-budget");
    let config = dir.join("docket.yaml");
    std::fs::write(
        &config,
        "server: { address: \"127.0.0.1:0\", max_streams_per_identity: 16 }\n\
         database: { url: \"sqlite://./docket-data/docket.db\" }\n\
         auth: { allow_anonymous: true, anonymous_roles: [admin] }\n\
         rate_limit: { requests_per_minute: 100000, burst: 10000 }\n",
    )
    .expect("config written");
    let server = Replica::start(&dir, &["--config", config.to_str().expect("utf-8")]);
    let base = server.base.clone();
    let http = reqwest::Client::new();
    let at_start = peak_kib(server.pid());

    // A prompt whose template repeats one placeholder 13 000 times, rendered with a
    // 256 KiB argument: 3.3 GB if it were built.
    let created = call(
        &http,
        &base,
        "manage_prompt",
        json!({"command": "create", "name": "echo", "description": "Echoes.",
               "template": "{{a}}".repeat(13_000),
               "arguments": [{"name": "a", "required": true}], "shared_with": ["*"]}),
    )
    .await;
    assert_ne!(created["result"]["isError"], true, "{created}");
    let argument = "v".repeat(256 * 1024);
    for _ in 0..3 {
        let answer: Value = post(
            &http,
            &base,
            "prompts/get",
            json!({"name": "echo", "arguments": {"a": argument}}),
        )
        .await
        .json()
        .await
        .expect("JSON");
        assert_eq!(answer["error"]["code"], -32602, "refused: {answer}");
    }

    // Prompts with every field at its cap, listed whole.
    for index in 0..20 {
        let created = call(
            &http,
            &base,
            "manage_prompt",
            json!({"command": "create", "name": format!("wide-{index}"),
                   "description": "d".repeat(2048), "template": "t".repeat(60 * 1024),
                   "scripts": vec!["s".repeat(128); 64], "shared_with": ["*"]}),
        )
        .await;
        assert_ne!(created["result"]["isError"], true, "{created}");
    }
    let listed = post(&http, &base, "prompts/list", json!({})).await;
    assert_eq!(listed.status().as_u16(), 200);
    let _ = listed.bytes().await.expect("listing");

    // A patch that replaces each of 1 000 `x`s with 3.5 MiB, as a dry run: 3.5 GB if
    // it were built.
    let created = call(
        &http,
        &base,
        "manage_script",
        json!({"command": "create", "name": "many-x",
               "source": format!("# {}\nprint(1)\n", "x".repeat(1000))}),
    )
    .await;
    assert_ne!(created["result"]["isError"], true, "{created}");
    let patched = call(
        &http,
        &base,
        "manage_script",
        json!({"command": "patch", "name": "many-x", "dry_run": true,
               "edits": [{"find": "x", "occurrence": "all", "replace": "y".repeat(3_500_000)}]}),
    )
    .await;
    let text = patched.to_string();
    assert!(
        text.contains("PATCH_TOO_LARGE"),
        "{}",
        &text[..text.len().min(400)]
    );

    // An asset just under `server.max_resource_read_bytes`, read whole three times.
    let drafted = call(
        &http,
        &base,
        "manage_script",
        json!({"command": "run_draft",
               "source": "platform.export('big', [{'v': 'x' * 1000}] * 7000, 'jsonl')"}),
    )
    .await;
    let asset_id = drafted["result"]["structuredContent"]["result"]["outputs"][0]["asset_id"]
        .as_str()
        .unwrap_or_else(|| panic!("an asset was made: {drafted}"))
        .to_owned();
    for _ in 0..3 {
        let read: Value = post(
            &http,
            &base,
            "resources/read",
            json!({"uri": format!("docket://assets/{asset_id}")}),
        )
        .await
        .json()
        .await
        .expect("JSON");
        let text = read["result"]["contents"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.len() > 7_000_000, "read whole: {}", read["error"]);
    }

    // Ten `initialize`s, each declaring 3.9 MB of capabilities.
    let padding = "p".repeat(3_900_000);
    for _ in 0..10 {
        let response = http
            .post(format!("{base}/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"experimental": {"padding": padding}},
                    "clientInfo": {"name": "big", "version": "1"}
                }}),
            )
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status().as_u16(), 400);
    }

    // Every stream one identity may hold, and one more.
    let mut streams = Vec::new();
    for _ in 0..16 {
        let response = post(
            &http,
            &base,
            "subscriptions/listen",
            json!({"notifications": {"promptsListChanged": true}}),
        )
        .await;
        assert_eq!(response.status().as_u16(), 200);
        streams.push(response);
    }
    let refused = post(
        &http,
        &base,
        "subscriptions/listen",
        json!({"notifications": {"promptsListChanged": true}}),
    )
    .await;
    assert_eq!(refused.status().as_u16(), 429);
    // Let the streams settle (their acknowledgements written) before the reading.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let peak = peak_kib(server.pid());
    eprintln!(
        "memory budget: VmHWM {} KiB at start, {} KiB after the largest requests (bound {} KiB)",
        at_start, peak, PEAK_BOUND_KIB
    );
    assert!(
        peak < PEAK_BOUND_KIB,
        "the server peaked at {peak} KiB, over the budget of {PEAK_BOUND_KIB} KiB"
    );
    drop(streams);
}
