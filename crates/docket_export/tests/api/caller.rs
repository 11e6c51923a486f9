//! A client acting as one caller (`ApiClient::with_caller`) against a real hyper
//! upstream: the upstream sees the caller's bearer and identity headers and never
//! the connection's fixed credential, through fetches, exports and GraphQL alike,
//! and the caller's token echoed back is scrubbed from what is shown and stored.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use docket_export::api::{
    ApiAuth, ApiClient, ApiConfig, ApiError, ApiExportLimits, ApiRequest, CallerAuth, REDACTED,
    export_response,
};
use docket_export::graphql::{
    GraphqlExportLimits, GraphqlExportPlan, GraphqlFormat, GraphqlRequest, execute, export_query,
};
use docket_export::sink::{FilesystemSink, ObjectSink};
use futures_util::TryStreamExt as _;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::sink::TempDir;

const FIXED_KEY: &str = "fixed-key-s3cret";
const CALLER_TOKEN: &str = "caller-t0ken/abc+def";

/// The headers an upstream request carried that matter here.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Seen {
    authorization: String,
    api_key: String,
    tenant: String,
    user_email: String,
    user: String,
}

/// An upstream whose every answer echoes the request's `Authorization` header: a
/// JSON object below `/v1`, a GraphQL answer at `/graphql`.
async fn echoing_upstream() -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let recorded = Arc::clone(&recorded);
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<_>| {
                    let recorded = Arc::clone(&recorded);
                    async move {
                        let header = |name: &str| {
                            request
                                .headers()
                                .get_all(name)
                                .iter()
                                .filter_map(|value| value.to_str().ok())
                                .collect::<Vec<_>>()
                                .join(" | ")
                        };
                        let seen = Seen {
                            authorization: header("authorization"),
                            api_key: header("x-api-key"),
                            tenant: header("x-tenant"),
                            user_email: header("x-user-email"),
                            user: header("x-user"),
                        };
                        let body = if request.uri().path() == "/graphql" {
                            json!({"data": {"me": {"sent": seen.authorization}}})
                        } else {
                            json!({"you_sent": seen.authorization})
                        };
                        recorded.lock().expect("lock").push(seen);
                        let mut response =
                            hyper::Response::new(Full::new(Bytes::from(body.to_string())).boxed());
                        response
                            .headers_mut()
                            .insert("content-type", "application/json".parse().expect("type"));
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}"), seen)
}

fn connection(base: &str) -> ApiClient {
    let mut config = ApiConfig::new(base);
    config.auth = ApiAuth::HeaderKey {
        header: "X-API-Key".into(),
        value: FIXED_KEY.into(),
    };
    config.static_headers = vec![("X-Tenant".into(), "acme".into())];
    ApiClient::new(config).expect("client")
}

fn as_alice(client: &ApiClient) -> ApiClient {
    client
        .with_caller(CallerAuth {
            bearer: Some(CALLER_TOKEN.into()),
            headers: vec![
                ("X-User-Email".into(), "alice@example.com".into()),
                ("X-User".into(), "alice".into()),
            ],
        })
        .expect("caller client")
}

fn get(path: &str) -> ApiRequest {
    ApiRequest {
        method: "GET".into(),
        path: path.into(),
        ..ApiRequest::default()
    }
}

fn alice_seen() -> Seen {
    Seen {
        authorization: format!("Bearer {CALLER_TOKEN}"),
        api_key: String::new(),
        tenant: "acme".into(),
        user_email: "alice@example.com".into(),
        user: "alice".into(),
    }
}

async fn stored(sink: &FilesystemSink, key: &str) -> String {
    let chunks: Vec<Bytes> = sink
        .open(key)
        .await
        .expect("stored")
        .into_stream()
        .try_collect()
        .await
        .expect("read");
    String::from_utf8_lossy(&chunks.concat()).into_owned()
}

#[tokio::test]
async fn the_upstream_sees_the_callers_bearer_and_headers_and_never_the_fixed_key() {
    let (origin, seen) = echoing_upstream().await;
    let connection = connection(&format!("{origin}/v1"));
    let alice = as_alice(&connection);
    let cancel = CancellationToken::new();

    let response = alice
        .fetch(&get("/echo"), 1 << 20, &cancel)
        .await
        .expect("fetched");
    let body = String::from_utf8_lossy(&response.body).into_owned();
    // The echo comes back as sent; what is shown goes through the caller's scrub.
    assert!(body.contains("caller-t0ken"), "{body}");
    let shown = alice.scrub(&body);
    assert!(!shown.contains("caller-t0ken"), "{shown}");
    assert!(shown.contains(REDACTED), "{shown}");
    assert!(
        !connection.scrub(&body).contains(REDACTED),
        "the connection's scrub changed"
    );

    let files = TempDir::new("api-caller");
    let sink = FilesystemSink::new(files.path());
    let report = export_response(
        &alice,
        &get("/echo"),
        &sink,
        &|_| "a1/echo.json".to_owned(),
        ApiExportLimits {
            max_bytes: 1 << 20,
            timeout: std::time::Duration::from_secs(30),
        },
        &cancel,
        &|_| {},
    )
    .await
    .expect("exported");
    assert_eq!(report.status, 200);
    let exported = stored(&sink, "a1/echo.json").await;
    assert!(!exported.contains("caller-t0ken"), "{exported}");
    assert!(exported.contains(REDACTED), "{exported}");

    // The connection itself is unchanged: its key, no caller's identity.
    connection
        .fetch(&get("/echo"), 1 << 20, &cancel)
        .await
        .expect("fetched");

    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0], alice_seen());
    assert_eq!(seen[1], alice_seen());
    assert_eq!(
        seen[2],
        Seen {
            authorization: String::new(),
            api_key: FIXED_KEY.into(),
            tenant: "acme".into(),
            user_email: String::new(),
            user: String::new(),
        }
    );
}

#[tokio::test]
async fn graphql_calls_and_exports_go_as_the_caller_too() {
    let (origin, seen) = echoing_upstream().await;
    let alice = as_alice(&connection(&format!("{origin}/graphql")));
    let cancel = CancellationToken::new();
    let request = GraphqlRequest {
        query: "query { me { sent } }".into(),
        variables: Map::new(),
        operation_name: None,
    };
    let answer = execute(&alice, &request, 1 << 20, &cancel)
        .await
        .expect("answered");
    assert_eq!(
        answer.data.pointer("/me/sent").and_then(Value::as_str),
        Some(format!("Bearer {CALLER_TOKEN}").as_str())
    );

    let files = TempDir::new("graphql-caller");
    let sink = FilesystemSink::new(files.path());
    let upload = sink.begin("a2/me.json").await.expect("upload");
    export_query(
        &alice,
        GraphqlExportPlan {
            request,
            pagination: None,
            format: GraphqlFormat::Json,
        },
        upload,
        GraphqlExportLimits {
            max_bytes: 1 << 20,
            max_response_bytes: 1 << 20,
            timeout: std::time::Duration::from_secs(30),
        },
        &cancel,
        &|_, _, _| {},
    )
    .await
    .expect("exported");
    let exported = stored(&sink, "a2/me.json").await;
    assert!(!exported.contains("caller-t0ken"), "{exported}");
    assert!(exported.contains(REDACTED), "{exported}");

    let seen = seen.lock().expect("lock").clone();
    assert_eq!(seen, [alice_seen(), alice_seen()]);
}

#[tokio::test]
async fn a_caller_may_not_set_the_identity_headers_themselves() {
    let (origin, seen) = echoing_upstream().await;
    let alice = as_alice(&connection(&format!("{origin}/v1")));
    let spoofed = ApiRequest {
        headers: vec![("x-user-email".into(), "bob@example.com".into())],
        ..get("/echo")
    };
    let refused = alice
        .fetch(&spoofed, 1 << 20, &CancellationToken::new())
        .await;
    assert!(
        matches!(
            &refused,
            Err(ApiError::Header {
                reason: "the connection sets it",
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(seen.lock().expect("lock").is_empty());
}
