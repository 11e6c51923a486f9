//! The API caller and `export_response` against a real hyper server on loopback,
//! with the filesystem sink: a response streamed whole under a key named by its
//! content type, the status kept, redirects not followed, and a cap, a cancel or
//! a timeout leaving nothing behind.

mod caller;
mod client_credentials;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use docket_export::api::{
    ApiAuth, ApiClient, ApiConfig, ApiError, ApiExportError, ApiExportLimits, ApiRequest,
    export_response,
};
use docket_export::sink::{FilesystemSink, ObjectSink};
use futures_util::TryStreamExt as _;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;

use crate::sink::{TempDir, files_under};

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// Serves `/v1/json`, `/v1/big?bytes=N` (streamed, no length), `/v1/slow`
/// (5 000 bytes every 20 ms, endless), `/v1/moved` (302); records each request's target and headers.
async fn serve() -> (String, Arc<Mutex<Vec<String>>>) {
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
                        let target = request.uri().to_string();
                        let auth = request
                            .headers()
                            .get("authorization")
                            .and_then(|value| value.to_str().ok())
                            .unwrap_or("-")
                            .to_owned();
                        recorded
                            .lock()
                            .expect("lock")
                            .push(format!("{target} {auth}"));
                        Ok::<_, Infallible>(respond(&target))
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}/v1"), seen)
}

fn respond(target: &str) -> hyper::Response<Body> {
    let mut response = match target.split('?').next().unwrap_or_default() {
        "/v1/json" => hyper::Response::new(Full::new(Bytes::from_static(b"{\"ok\":true}")).boxed()),
        "/v1/big" => {
            let total: usize = target
                .split("bytes=")
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            let chunk = Bytes::from(vec![b'x'; 16 * 1024]);
            let stream =
                futures_util::stream::iter((0..total).step_by(chunk.len()).map(move |start| {
                    Ok::<_, Infallible>(Frame::data(chunk.slice(..chunk.len().min(total - start))))
                }));
            hyper::Response::new(BodyExt::boxed(StreamBody::new(stream)))
        }
        "/v1/slow" => {
            let stream = futures_util::stream::unfold(0u32, |index| async move {
                if index > 0 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Some((
                    Ok::<_, Infallible>(Frame::data(Bytes::from("tick\n".repeat(1000)))),
                    index + 1,
                ))
            });
            hyper::Response::new(BodyExt::boxed(StreamBody::new(stream)))
        }
        "/v1/moved" => {
            let mut response =
                hyper::Response::new(Full::new(Bytes::from_static(b"moved")).boxed());
            *response.status_mut() = hyper::StatusCode::FOUND;
            response
                .headers_mut()
                .insert("location", "/v1/json".parse().expect("location"));
            response
        }
        _ => {
            let mut response = hyper::Response::new(Full::new(Bytes::from_static(b"no")).boxed());
            *response.status_mut() = hyper::StatusCode::NOT_FOUND;
            response
        }
    };
    if target.starts_with("/v1/json") {
        response
            .headers_mut()
            .insert("content-type", "application/json".parse().expect("type"));
    }
    response
}

fn client(base: &str) -> ApiClient {
    let mut config = ApiConfig::new(base);
    config.auth = ApiAuth::Bearer {
        token: "tok-123".into(),
    };
    ApiClient::new(config).expect("client")
}

fn get(path: &str) -> ApiRequest {
    ApiRequest {
        method: "GET".into(),
        path: path.into(),
        ..ApiRequest::default()
    }
}

/// `GET /big?bytes=N`.
fn big(bytes: u32) -> ApiRequest {
    ApiRequest {
        query: vec![("bytes".into(), bytes.to_string())],
        ..get("/big")
    }
}

fn limits(max_bytes: u64) -> ApiExportLimits {
    ApiExportLimits {
        max_bytes,
        timeout: Duration::from_secs(60),
    }
}

/// Exports `request` under `limits`, uncancelled, without progress.
async fn export_within(
    client: &ApiClient,
    request: &ApiRequest,
    sink: &FilesystemSink,
    limits: ApiExportLimits,
) -> Result<docket_export::api::ApiExportReport, ApiExportError> {
    export_response(
        client,
        request,
        sink,
        &key_for,
        limits,
        &CancellationToken::new(),
        &|_| {},
    )
    .await
}

/// Exports `request` under a 1 MiB cap, uncancelled, without progress.
async fn export_plainly(
    client: &ApiClient,
    request: &ApiRequest,
    sink: &FilesystemSink,
) -> docket_export::api::ApiExportReport {
    export_within(client, request, sink, limits(1 << 20))
        .await
        .expect("exported")
}

fn key_for(content_type: &str) -> String {
    let extension = docket_export::api::extension_for(content_type);
    format!("a1/export.{extension}")
}

#[tokio::test]
async fn a_response_is_streamed_whole_under_a_key_named_by_its_type() {
    let (base, seen) = serve().await;
    let files = TempDir::new("api-whole");
    let sink = FilesystemSink::new(files.path());
    let progress = Mutex::new(Vec::new());
    let report = export_response(
        &client(&base),
        &get("/json"),
        &sink,
        &key_for,
        limits(1 << 20),
        &CancellationToken::new(),
        &|bytes| progress.lock().expect("lock").push(bytes),
    )
    .await
    .expect("exported");
    assert_eq!(
        (report.status, report.bytes, report.content_type.as_str()),
        (200, 11, "application/json")
    );
    assert_eq!(progress.lock().expect("lock").last(), Some(&11));
    let body: Vec<Bytes> = sink
        .open("a1/export.json")
        .await
        .expect("stored")
        .into_stream()
        .try_collect()
        .await
        .expect("read");
    assert_eq!(body.concat(), b"{\"ok\":true}");
    assert_eq!(
        seen.lock().expect("lock").as_slice(),
        ["/v1/json Bearer tok-123"]
    );

    // 300 KB without a declared type: streamed in chunks, typed from its bytes.
    let report = export_plainly(&client(&base), &big(300_000), &sink).await;
    assert_eq!(
        (report.bytes, report.content_type.as_str()),
        (300_000, "text/plain")
    );
    assert_eq!(sink.size("a1/export.txt").await.expect("size"), 300_000);
}

#[tokio::test]
async fn redirects_are_stored_as_they_come_not_followed() {
    let (base, seen) = serve().await;
    let files = TempDir::new("api-moved");
    let sink = FilesystemSink::new(files.path());
    let report = export_plainly(&client(&base), &get("/moved"), &sink).await;
    assert_eq!(report.status, 302);
    assert_eq!(
        seen.lock().expect("lock").len(),
        1,
        "the redirect was followed"
    );
}

#[tokio::test]
async fn a_cap_a_cancel_or_a_timeout_leaves_nothing_behind() {
    let (base, _) = serve().await;
    let files = TempDir::new("api-stopped");
    let sink = FilesystemSink::new(files.path());
    let client = client(&base);

    let capped = export_within(&client, &big(500_000), &sink, limits(100_000)).await;
    assert!(
        matches!(
            capped,
            Err(ApiExportError::Api(ApiError::TooLarge { limit: 100_000 }))
        ),
        "{capped:?}"
    );

    // A declared length over the cap is refused before any byte is stored.
    let declared = export_within(&client, &get("/json"), &sink, limits(5)).await;
    assert!(
        matches!(
            declared,
            Err(ApiExportError::Api(ApiError::TooLarge { limit: 5 }))
        ),
        "{declared:?}"
    );

    let cancel = CancellationToken::new();
    let cancelled = export_response(
        &client,
        &get("/slow"),
        &sink,
        &key_for,
        limits(1 << 30),
        &cancel,
        &|bytes| {
            if bytes > 8192 {
                cancel.cancel();
            }
        },
    )
    .await;
    assert!(
        cancelled.as_ref().is_err_and(ApiExportError::is_cancelled),
        "{cancelled:?}"
    );

    let timed_out = export_within(
        &client,
        &get("/slow"),
        &sink,
        ApiExportLimits {
            max_bytes: 1 << 30,
            timeout: Duration::from_millis(300),
        },
    )
    .await;
    assert!(
        matches!(timed_out, Err(ApiExportError::Timeout { .. })),
        "{timed_out:?}"
    );
    assert_eq!(files_under(files.path()), Vec::<String>::new());
}
