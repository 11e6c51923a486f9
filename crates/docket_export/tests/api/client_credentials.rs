//! OAuth 2.0 client credentials against a loopback server that is both the
//! token endpoint and the API: one token for a burst of calls, a new one after
//! the API answers 401, the token scrubbed wherever the API echoes it, and a
//! refusal that names the server's error and no secret.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use docket_export::api::{
    ApiAuth, ApiClient, ApiConfig, ApiError, ApiRequest, ClientCredentials, REDACTED,
};
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "s3cret-client";

/// What the server saw: token requests (their form and basic auth) and API
/// requests (their bearer).
#[derive(Default)]
struct Seen {
    token_requests: Vec<(String, String)>,
    bearers: Vec<String>,
}

/// `/token` issues `tok-1`, `tok-2`, … to `docket:s3cret-client` only;
/// `/v1/echo` answers the bearer it got; `/v1/refuse-first` answers 401 to
/// `tok-1`.
async fn serve() -> (String, Arc<Mutex<Seen>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let recorded = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let recorded = Arc::clone(&recorded);
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let recorded = Arc::clone(&recorded);
                    async move {
                        let path = request.uri().path().to_owned();
                        let authorization = request
                            .headers()
                            .get("authorization")
                            .and_then(|value| value.to_str().ok())
                            .unwrap_or_default()
                            .to_owned();
                        let body = request.into_body().collect().await.map(|b| b.to_bytes());
                        let body = String::from_utf8_lossy(&body.unwrap_or_default()).into_owned();
                        let (status, text) = answer(&recorded, &path, &authorization, body);
                        let mut response = hyper::Response::new(Full::new(Bytes::from(text)));
                        *response.status_mut() =
                            hyper::StatusCode::from_u16(status).expect("status");
                        Ok::<_, Infallible>(response)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{address}"), seen)
}

fn answer(seen: &Mutex<Seen>, path: &str, authorization: &str, body: String) -> (u16, String) {
    use base64::Engine as _;
    let mut seen = seen.lock().expect("lock");
    if path == "/token" {
        seen.token_requests.push((body, authorization.to_owned()));
        let expected = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("docket:{SECRET}"))
        );
        if authorization != expected {
            return (
                401,
                r#"{"error":"invalid_client","error_description":"client authentication failed"}"#
                    .to_owned(),
            );
        }
        let token = format!("tok-{}", seen.token_requests.len());
        return (
            200,
            format!(r#"{{"access_token":"{token}","token_type":"Bearer","expires_in":3600}}"#),
        );
    }
    let bearer = authorization.trim_start_matches("Bearer ").to_owned();
    seen.bearers.push(bearer.clone());
    match path {
        "/v1/refuse-first" if bearer == "tok-1" => (401, "{}".to_owned()),
        _ => (200, format!(r#"{{"you_sent":"{bearer}"}}"#)),
    }
}

fn client(base: &str, secret: &str) -> ApiClient {
    let mut config = ApiConfig::new(format!("{base}/v1"));
    config.auth = ApiAuth::ClientCredentials(ClientCredentials {
        token_url: format!("{base}/token"),
        client_id: "docket".to_owned(),
        client_secret: secret.to_owned(),
        scopes: vec!["read".to_owned(), "write".to_owned()],
        resource: Some("https://api.example".to_owned()),
        audience: None,
    });
    ApiClient::new(config).expect("client")
}

fn get(path: &str) -> ApiRequest {
    ApiRequest {
        method: "GET".to_owned(),
        path: path.to_owned(),
        ..ApiRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_calls_asks_for_one_token_and_sends_it() {
    let (base, seen) = serve().await;
    let client = client(&base, SECRET);
    let cancel = CancellationToken::new();
    let request = get("/echo");
    let calls = (0..10).map(|_| client.fetch(&request, 1 << 20, &cancel));
    for answer in futures_util::future::join_all(calls).await {
        assert_eq!(answer.expect("fetch").status, 200);
    }
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.token_requests.len(), 1, "one token for the burst");
    let (form, _) = &seen.token_requests[0];
    assert!(form.contains("grant_type=client_credentials"), "{form}");
    assert!(form.contains("scope=read+write"), "{form}");
    assert!(
        form.contains("resource=https%3A%2F%2Fapi.example"),
        "{form}"
    );
    assert!(
        seen.bearers.iter().all(|bearer| bearer == "tok-1"),
        "{:?}",
        seen.bearers
    );
}

#[tokio::test]
async fn a_refused_token_is_replaced_on_the_next_call() {
    let (base, seen) = serve().await;
    let client = client(&base, SECRET);
    let cancel = CancellationToken::new();
    let first = client.fetch(&get("/refuse-first"), 1 << 20, &cancel).await;
    assert_eq!(first.expect("fetch").status, 401);
    let second = client.fetch(&get("/refuse-first"), 1 << 20, &cancel).await;
    assert_eq!(second.expect("fetch").status, 200);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.token_requests.len(), 2);
    assert_eq!(seen.bearers, ["tok-1", "tok-2"]);
}

#[tokio::test]
async fn the_token_and_the_secret_are_scrubbed_from_what_the_api_echoes() {
    let (base, _) = serve().await;
    let client = client(&base, SECRET);
    let answer = client
        .fetch(&get("/echo"), 1 << 20, &CancellationToken::new())
        .await
        .expect("fetch");
    let body = String::from_utf8_lossy(&answer.body).into_owned();
    assert!(body.contains("tok-1"), "the upstream echoed it: {body}");
    let shown = client.scrub(&body);
    assert!(
        !shown.contains("tok-1") && shown.contains(REDACTED),
        "{shown}"
    );
    let stored = client.scrubber().scrub_bytes(body.as_bytes());
    assert!(!String::from_utf8_lossy(&stored).contains("tok-1"));
    assert!(!client.scrub(&format!("oops {SECRET}")).contains(SECRET));
    let printed = format!("{client:?}");
    assert!(
        !printed.contains(SECRET) && !printed.contains("tok-1"),
        "{printed}"
    );
}

#[tokio::test]
async fn a_refusal_at_the_token_endpoint_names_its_error_and_no_secret() {
    let (base, seen) = serve().await;
    let client = client(&base, "not-the-secret");
    let error = client
        .fetch(&get("/echo"), 1 << 20, &CancellationToken::new())
        .await
        .expect_err("refused");
    assert!(matches!(error, ApiError::UpstreamAuth { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("invalid_client: client authentication failed"),
        "{text}"
    );
    assert!(!text.contains("not-the-secret"), "{text}");
    assert!(
        seen.lock().expect("lock").bearers.is_empty(),
        "no call went out"
    );
}

#[test]
fn a_client_certificate_needs_https_and_a_real_certificate() {
    use docket_export::api::ClientTls;
    let mut config = ApiConfig::new("http://127.0.0.1:9/v1");
    config.tls = Some(ClientTls {
        certificate_pem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into(),
        key_pem: "secret key text".into(),
        ca_pem: None,
    });
    let error = ApiClient::new(config.clone())
        .expect_err("http")
        .to_string();
    assert!(error.contains("https"), "{error}");
    config.base_url = "https://127.0.0.1:9/v1".into();
    let error = ApiClient::new(config)
        .expect_err("no certificate")
        .to_string();
    assert!(error.contains("client certificate"), "{error}");
    assert!(!error.contains("secret key text"), "{error}");
}
