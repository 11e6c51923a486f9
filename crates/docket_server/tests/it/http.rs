//! The Streamable HTTP rules of the `/mcp` endpoint: one test per status code and
//! per JSON-RPC error code, in the order the transport checks them.

use serde_json::{Value, json};

use crate::support::{TestServer, post_raw};

#[tokio::test]
async fn discover_answers_with_result_type_and_server_info() {
    let server = TestServer::default_app().await;
    let (status, body) = server.rpc("server/discover", json!({})).send().await;
    assert_eq!(status, 200);
    let result = &body["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["supportedVersions"], json!(["2026-07-28"]));
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "docket"
    );
    assert!(result["ttlMs"].as_u64().is_some());
    assert_eq!(result["cacheScope"], "public");
    assert!(result["capabilities"]["tools"].is_object());
    assert!(
        result["capabilities"].get("tasks").is_none(),
        "tasks live under extensions only"
    );
}

#[tokio::test]
async fn get_and_delete_are_405() {
    let server = TestServer::default_app().await;
    for method in [
        reqwest::Method::GET,
        reqwest::Method::DELETE,
        reqwest::Method::PUT,
    ] {
        let response = server
            .http
            .request(method.clone(), server.url("/mcp"))
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status().as_u16(), 405, "{method}");
        assert_eq!(response.headers()["allow"], "POST");
    }
}

#[tokio::test]
async fn a_foreign_origin_or_host_is_403() {
    let server = TestServer::default_app().await;
    let (status, _) = server
        .rpc("server/discover", json!({}))
        .header("origin", "http://evil.example.com")
        .send()
        .await;
    assert_eq!(status, 403);
    let (status, _) = server
        .rpc("server/discover", json!({}))
        .header("host", "evil.example.com")
        .header("origin", "http://evil.example.com")
        .send()
        .await;
    assert_eq!(status, 403);
    let (status, _) = server
        .rpc("server/discover", json!({}))
        .header("host", "evil.example.com:80")
        .send()
        .await;
    assert_eq!(
        status, 403,
        "a rebinding attack carries a foreign Host without an Origin"
    );
    let origin = format!("http://{}", server.addr);
    let (status, _) = server
        .rpc("server/discover", json!({}))
        .header("origin", &origin)
        .send()
        .await;
    assert_eq!(status, 200, "the server's own loopback origin is allowed");
}

/// The rebinding guard covers every route that reveals anything: a page on a
/// rebound name reads no asset and no metrics. Only the liveness probes answer
/// whatever the Host.
#[tokio::test]
async fn every_route_but_the_probes_refuses_a_foreign_origin_or_host() {
    let server = TestServer::default_app().await;
    let http = reqwest::Client::new();
    let get = |path: &str, header: (&'static str, &'static str)| {
        http.get(server.url(path)).header(header.0, header.1).send()
    };
    for path in [
        "/metrics",
        "/assets/0123456789abcdef0123456789abcdef/content",
        "/.well-known/oauth-protected-resource",
        "/no-such-route",
    ] {
        for header in [
            ("host", "evil.example.com:80"),
            ("origin", "http://evil.example.com"),
        ] {
            let response = get(path, header).await.expect("sent");
            assert_eq!(response.status().as_u16(), 403, "{path} with {header:?}");
        }
    }
    for path in ["/healthz", "/readyz"] {
        let response = get(path, ("host", "10.0.0.7:8080")).await.expect("sent");
        assert_eq!(response.status().as_u16(), 200, "{path}");
    }
    let response = http.get(server.url("/metrics")).send().await.expect("sent");
    assert_eq!(
        response.status().as_u16(),
        200,
        "the loopback host reads metrics"
    );
}

#[tokio::test]
async fn configured_origins_are_allowed() {
    let mut config = docket_server::Config::embedded_default();
    config.server.allowed_origins = vec!["https://app.example.com".into()];
    let server = TestServer::start(docket_server::App::builder(config).build().expect("app")).await;
    let (status, _) = server
        .rpc("server/discover", json!({}))
        .header("origin", "https://app.example.com")
        .send()
        .await;
    assert_eq!(status, 200);
    let (status, _) = server
        .rpc("server/discover", json!({}))
        .header("origin", "https://other.example.com")
        .send()
        .await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn an_oversized_body_is_413() {
    let mut config = docket_server::Config::embedded_default();
    config.server.max_request_bytes = 1024;
    let server = TestServer::start(docket_server::App::builder(config).build().expect("app")).await;
    let padding = "x".repeat(4096);
    let (status, _) = server
        .rpc("server/discover", json!({"padding": padding}))
        .send()
        .await;
    assert_eq!(status, 413);
    let (status, _) = server.rpc("server/discover", json!({})).send().await;
    assert_eq!(status, 200, "a body under the limit still passes");
}

#[tokio::test]
async fn a_non_json_content_type_is_415() {
    let server = TestServer::default_app().await;
    let (status, _) = server
        .rpc("server/discover", json!({}))
        .header("content-type", "text/plain")
        .send()
        .await;
    assert_eq!(status, 415);
}

#[tokio::test]
async fn a_notification_is_202_with_no_body() {
    let server = TestServer::default_app().await;
    let body =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    let response = post_raw(&server, "notifications/cancelled", body.to_string()).await;
    assert_eq!(response.status().as_u16(), 202);
    assert!(response.bytes().await.expect("body").is_empty());
}

#[tokio::test]
async fn invalid_json_is_400_parse_error_with_null_id() {
    let server = TestServer::default_app().await;
    let response = post_raw(&server, "tools/list", "{\"jsonrpc\": \"2.0\", ").await;
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await.expect("json body");
    assert_eq!(body["error"]["code"], -32700);
    assert_eq!(body["id"], Value::Null);
}

#[tokio::test]
async fn batches_and_responses_are_400_invalid_request() {
    let server = TestServer::default_app().await;
    for body in [
        json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]),
        json!({"jsonrpc": "2.0", "id": 4, "result": {}}),
        json!({"jsonrpc": "2.0", "id": 5}),
    ] {
        let response = post_raw(&server, "tools/list", body.to_string()).await;
        assert_eq!(response.status().as_u16(), 400, "{body}");
        let answer: Value = response.json().await.expect("json body");
        assert_eq!(answer["error"]["code"], -32600, "{body}");
    }
}

#[tokio::test]
async fn missing_meta_fields_are_400_invalid_params() {
    let server = TestServer::default_app().await;
    let cases = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "server/discover", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
    ];
    for body in cases {
        let response = post_raw(&server, "server/discover", body.to_string()).await;
        assert_eq!(response.status().as_u16(), 400, "{body}");
        let answer: Value = response.json().await.expect("json body");
        assert_eq!(answer["error"]["code"], -32602, "{body}");
        assert_eq!(answer["id"], body["id"], "the error echoes the request id");
    }
    let without_client_info = json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let response = post_raw(&server, "server/discover", without_client_info.to_string()).await;
    assert_eq!(response.status().as_u16(), 200, "clientInfo is optional");
}

#[tokio::test]
async fn header_problems_are_400_header_mismatch() {
    let server = TestServer::default_app().await;
    let cases = [
        (
            "missing MCP-Protocol-Version",
            server
                .rpc("tools/list", json!({}))
                .without_header("mcp-protocol-version"),
        ),
        (
            "missing Mcp-Method",
            server
                .rpc("tools/list", json!({}))
                .without_header("mcp-method"),
        ),
        (
            "wrong Mcp-Method",
            server
                .rpc("tools/list", json!({}))
                .header("mcp-method", "server/discover"),
        ),
        (
            "upper-cased Mcp-Method",
            server
                .rpc("tools/list", json!({}))
                .header("mcp-method", "TOOLS/LIST"),
        ),
        (
            "missing Mcp-Name",
            server
                .rpc("tools/call", json!({"name": "platform_info"}))
                .without_header("mcp-name"),
        ),
        (
            "wrong Mcp-Name",
            server
                .rpc("tools/call", json!({"name": "platform_info"}))
                .header("mcp-name", "list_connections"),
        ),
        (
            "broken base64",
            server
                .rpc("tools/call", json!({"name": "platform_info"}))
                .header("mcp-name", "=?base64?***?="),
        ),
    ];
    for (case, rpc) in cases {
        let (status, body) = rpc.send().await;
        assert_eq!(status, 400, "{case}");
        assert_eq!(body["error"]["code"], -32020, "{case}: {body}");
    }
}

#[tokio::test]
async fn header_values_are_trimmed_and_base64_decoded() {
    let server = TestServer::default_app().await;
    let (status, body) = server
        .rpc("tools/call", json!({"name": "platform_info"}))
        .header("mcp-name", "  platform_info  ")
        .send()
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = server
        .rpc("tools/call", json!({"name": "platform_info"}))
        .header("mcp-name", "=?base64?cGxhdGZvcm1faW5mbw==?=")
        .send()
        .await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test]
async fn a_header_and_meta_version_mismatch_is_32020_before_the_version_check() {
    let server = TestServer::default_app().await;
    let mut rpc = server.rpc("server/discover", json!({}));
    rpc.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let (status, body) = rpc.send().await;
    assert_eq!(
        (status, body["error"]["code"].clone()),
        (400, json!(-32020))
    );
}

#[tokio::test]
async fn an_unsupported_version_is_400_with_supported_and_requested() {
    let server = TestServer::default_app().await;
    let mut rpc = server
        .rpc("server/discover", json!({}))
        .header("mcp-protocol-version", "v999.0.0");
    rpc.body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let (status, body) = rpc.send().await;
    assert_eq!(status, 400);
    assert_eq!(body["error"]["code"], -32022);
    assert_eq!(body["error"]["data"]["requested"], "v999.0.0");
    assert_eq!(body["error"]["data"]["supported"], json!(["2026-07-28"]));
}

#[tokio::test]
async fn unknown_and_removed_methods_are_404_method_not_found() {
    let server = TestServer::default_app().await;
    for method in [
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "unknown/method",
        "tasks/list",
        "tasks/result",
    ] {
        let (status, body) = server.rpc(method, json!({})).send().await;
        assert_eq!(status, 404, "{method}");
        assert_eq!(body["error"]["code"], -32601, "{method}");
        assert_eq!(body["id"], 1, "{method}");
    }
}

#[tokio::test]
async fn unknown_tools_are_invalid_params() {
    let server = TestServer::default_app().await;
    let (status, body) = server.call_tool("no_such_tool", json!({})).await;
    assert_eq!(status, 200);
    assert_eq!(body["error"]["code"], -32602);
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no_such_tool"))
    );
}

/// Whatever a caller sends — random methods, unknown tools, hostile names — the
/// metrics keep the same series: every label comes from a closed set.
#[tokio::test]
async fn no_request_adds_a_metric_series() {
    let server = TestServer::default_app().await;
    let series = || async {
        let text = server
            .http
            .get(server.url("/metrics"))
            .send()
            .await
            .expect("sent")
            .text()
            .await
            .expect("text");
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .map(|line| {
                line.rsplit_once(' ')
                    .map_or(line, |(name, _)| name)
                    .to_owned()
            })
            .collect::<std::collections::BTreeSet<String>>()
    };
    // One of each kind first, so the series that may exist do.
    server.call_tool("platform_info", json!({})).await;
    server.rpc("no/such/method", json!({})).send().await;
    server.call_tool("no_such_tool", json!({})).await;
    let before = series().await;
    for index in 0..40 {
        let noise = format!("m-{index}-\"{}", "x".repeat(index * 100));
        server.rpc(&noise, json!({})).send().await;
        server.call_tool(&format!("tool-{index}"), json!({})).await;
    }
    let after = series().await;
    assert_eq!(before, after);
    assert!(
        after
            .iter()
            .any(|series| series.contains("method=\"other\"")),
        "{after:?}"
    );
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let mut server = TestServer::default_app().await;
    let health = server
        .http
        .get(server.url("/healthz"))
        .send()
        .await
        .expect("sent");
    assert_eq!(health.status().as_u16(), 200);
    let ready = server
        .http
        .get(server.url("/readyz"))
        .send()
        .await
        .expect("sent");
    assert_eq!(ready.status().as_u16(), 200);

    server.call_tool("platform_info", json!({})).await;
    let metrics = server
        .http
        .get(server.url("/metrics"))
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("docket_http_requests_total{method=\"tools/call\",status=\"200\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("docket_tool_calls_total{tool=\"platform_info\",outcome=\"ok\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(
            "docket_tool_call_duration_seconds_count{tool=\"platform_info\",outcome=\"ok\"} 1"
        ),
        "{metrics}"
    );

    server.app.start_draining();
    let draining = server
        .http
        .get(server.url("/readyz"))
        .send()
        .await
        .expect("sent");
    assert_eq!(draining.status().as_u16(), 503);
    server.begin_shutdown();
    let stopped = server
        .stopped
        .take()
        .expect("running")
        .await
        .expect("joined");
    assert!(stopped.is_ok());
}

#[tokio::test]
async fn every_result_carries_result_type_and_server_info() {
    let server = TestServer::default_app().await;
    for (method, params) in [
        ("server/discover", json!({})),
        ("tools/list", json!({})),
        (
            "tools/call",
            json!({"name": "platform_info", "arguments": {}}),
        ),
        (
            "tools/call",
            json!({"name": "list_connections", "arguments": {}}),
        ),
    ] {
        let (status, body) = server.rpc(method, params).send().await;
        assert_eq!(status, 200, "{method}");
        assert_eq!(body["result"]["resultType"], "complete", "{method}");
        assert_eq!(
            body["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "docket",
            "{method}"
        );
    }
}

/// A server with small connection limits.
async fn limited_server(
    configure: impl FnOnce(&mut docket_server::config::ServerConfig),
) -> TestServer {
    let mut config = docket_server::Config::embedded_default();
    configure(&mut config.server);
    TestServer::start(docket_server::App::builder(config).build().expect("app")).await
}

/// Reads until the server closes the connection (a hang guard, not a deadline);
/// what it sent before closing.
async fn read_until_closed(stream: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt as _;
    let mut received = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(30), stream.read(&mut buffer))
                .await
                .expect("the server closed the connection");
        match read {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&received).into_owned(),
            Ok(count) => received.extend_from_slice(&buffer[..count]),
        }
    }
}

/// A socket that sends half a request, and one that sends nothing, are closed
/// once the header timeout passes; a body that stops coming is answered 408.
#[tokio::test]
async fn slow_and_silent_connections_are_closed() {
    use tokio::io::AsyncWriteExt as _;
    let server = limited_server(|server| {
        server.header_read_timeout = std::time::Duration::from_millis(300);
        server.body_timeout = std::time::Duration::from_millis(300);
    })
    .await;
    let mut half = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    half.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .expect("write");
    let mut silent = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    read_until_closed(&mut half).await;
    read_until_closed(&mut silent).await;

    let mut slow_body = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    slow_body
        .write_all(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"jsonrpc\"",
        )
        .await
        .expect("write");
    let answer = read_until_closed(&mut slow_body).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
}

/// Beyond `max_connections`, a new connection is answered at once — `/healthz` with
/// 200, the rest with 503 — and the server serves again as soon as a slot frees.
#[tokio::test]
async fn connections_over_the_cap_are_answered_not_queued() {
    let server = limited_server(|server| server.max_connections = 2).await;
    let held = [
        tokio::net::TcpStream::connect(server.addr)
            .await
            .expect("connect"),
        tokio::net::TcpStream::connect(server.addr)
            .await
            .expect("connect"),
    ];
    // The accept loop takes the two held connections before the next ones.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let refused = loop {
        let fresh = reqwest::Client::new();
        let (status, _) = server.rpc("server/discover", json!({})).send().await;
        if status == 503 {
            break fresh;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cap never applied"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let health = refused
        .get(server.url("/healthz"))
        .send()
        .await
        .expect("sent");
    assert_eq!(health.status().as_u16(), 200);
    let mcp = refused
        .post(server.url("/mcp"))
        .body("{}")
        .send()
        .await
        .expect("sent");
    assert_eq!(mcp.status().as_u16(), 503);
    assert_eq!(mcp.headers()["retry-after"], "1");
    drop(held);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (status, _) = server.rpc("server/discover", json!({})).send().await;
        if status == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the slots never freed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Connections over the cap are answered a few at a time: with 64 of them waiting
/// to send their request, one more is closed without an answer.
#[tokio::test]
async fn a_flood_over_the_cap_is_closed_not_piled_up() {
    use tokio::io::AsyncWriteExt as _;
    let server = limited_server(|server| server.max_connections = 1).await;
    let _held = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    // The accept loop takes the held connection first; then 64 wait over the cap.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut waiting = Vec::new();
    for _ in 0..64 {
        waiting.push(
            tokio::net::TcpStream::connect(server.addr)
                .await
                .expect("connect"),
        );
    }
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let mut one_more = tokio::net::TcpStream::connect(server.addr)
        .await
        .expect("connect");
    let _ = one_more
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await;
    assert_eq!(
        read_until_closed(&mut one_more).await,
        "",
        "closed unanswered"
    );
    drop(waiting);
}
