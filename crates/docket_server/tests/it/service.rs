//! Docket's routes as a service an embedder mounts (`App::service`): the same answers
//! `serve` gives over TCP, through both the tower and the hyper service traits, and the
//! background work an embedder starts and stops itself (`App::start_background`).

use std::time::Duration;

use bytes::Bytes;
use docket_server::App;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt as _, Full};
use serde_json::{Value, json};

use crate::support::TestServer;

/// One answer, taken apart: status, headers and the whole body.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    fn content_type(&self) -> Option<&str> {
        self.headers
            .get("content-type")
            .and_then(|value| value.to_str().ok())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }
}

/// Asks `app`'s service through `tower_service::Service`, as axum and tower call it.
async fn through_tower(app: &App, request: Request<Full<Bytes>>) -> Answer {
    use tower_service::Service;
    let mut service = app.service();
    // The service takes any body type, so readiness names the one this request has.
    std::future::poll_fn(|context| {
        Service::<Request<Full<Bytes>>>::poll_ready(&mut service, context)
    })
    .await
    .expect("always ready");
    let response = service.call(request).await.expect("never fails");
    taken_apart(response).await
}

/// Asks `app`'s service through `hyper::service::Service`, as hyper's connection calls it.
async fn through_hyper(app: &App, request: Request<Full<Bytes>>) -> Answer {
    use hyper::service::Service as _;
    let response = app.service().call(request).await.expect("never fails");
    taken_apart(response).await
}

async fn taken_apart(response: http::Response<docket_server::Body>) -> Answer {
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("a whole body").to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

/// Asks the server `serve` runs, over TCP.
async fn over_tcp(response: reqwest::Response) -> Answer {
    Answer {
        status: response.status(),
        headers: response.headers().clone(),
        body: response.bytes().await.expect("a whole body"),
    }
}

#[tokio::test]
async fn the_mounted_service_answers_as_serve_does() {
    let server = TestServer::default_app().await;

    let served = over_tcp(
        server
            .http
            .get(server.url("/healthz"))
            .send()
            .await
            .expect("sent"),
    )
    .await;
    let health = || {
        Request::get("/healthz")
            .body(Full::new(Bytes::new()))
            .expect("request")
    };
    for mounted in [
        through_tower(&server.app, health()).await,
        through_hyper(&server.app, health()).await,
    ] {
        assert_eq!(mounted.status, served.status);
        assert_eq!(mounted.content_type(), served.content_type());
        assert_eq!(mounted.body, served.body);
    }
    assert_eq!(served.body, "ok\n");

    // The very request a client sends over TCP, headers and body, handed to the service.
    let rpc = server.rpc("tools/list", json!({}));
    let body = serde_json::to_vec(&rpc.body).expect("JSON");
    let list = || {
        let mut request = Request::post(docket_server::MCP_PATH)
            .header("host", server.addr.to_string())
            .body(Full::new(Bytes::from(body.clone())))
            .expect("request");
        request.headers_mut().extend(rpc.headers.clone());
        request
    };
    let mounted = [
        through_tower(&server.app, list()).await,
        through_hyper(&server.app, list()).await,
    ];
    let served = over_tcp(rpc.response().await).await;
    assert_eq!(served.status, StatusCode::OK);
    assert_eq!(served.content_type(), Some("application/json"));
    let tools = served.json();
    assert!(
        tools["result"]["tools"]
            .as_array()
            .is_some_and(|tools| tools.iter().any(|tool| tool["name"] == "platform_info")),
        "{tools}"
    );
    for mounted in mounted {
        assert_eq!(mounted.status, served.status);
        assert_eq!(mounted.content_type(), served.content_type());
        assert_eq!(mounted.json(), tools);
    }
}

#[tokio::test]
async fn background_shutdown_drains_a_mounted_app() {
    let app = App::builder(docket_server::Config::embedded_default())
        .task_store(std::sync::Arc::new(docket_task::memory::MemoryStore::new()))
        .build()
        .expect("app");
    let background = app.start_background();
    let ready = || {
        Request::get("/readyz")
            .body(Full::new(Bytes::new()))
            .expect("request")
    };
    assert_eq!(through_tower(&app, ready()).await.status, StatusCode::OK);

    let drained = background.shutdown(Duration::from_secs(5));
    // Draining starts when shutdown is called, before its future is awaited.
    assert!(app.is_draining());
    let answer = through_tower(&app, ready()).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.body, "draining\n");
    tokio::time::timeout(Duration::from_secs(5), drained)
        .await
        .expect("nothing was running, so the drain ends at once");
}

/// A configured replica name gets a suffix of its own in every process, so a
/// restarted process is never taken for the one before it (a task is as alive
/// as its replica's row).
#[test]
fn a_configured_replica_name_is_unique_per_process() {
    let build = || {
        let mut config = docket_server::Config::embedded_default();
        config.server.replica_id = "pod-7".into();
        docket_server::App::builder(config).build().expect("app")
    };
    let (first, second) = (build(), build());
    assert!(
        first.replica_id().starts_with("pod-7-"),
        "{}",
        first.replica_id()
    );
    assert!(second.replica_id().starts_with("pod-7-"));
    assert_ne!(first.replica_id(), second.replica_id());
}
