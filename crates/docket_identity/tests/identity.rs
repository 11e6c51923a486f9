//! The token exchange against a real token endpoint on loopback (hyper): the form
//! and client authentication it sends, the answer it accepts, its per-caller cache
//! (with tokio's clock paused and advanced, not waited for), and the refusals a
//! caller reads, none of which shows a token or the client secret.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use docket_identity::connection::{IdentityConfig, Presented};
use docket_identity::exchange::{
    ExchangeError, MAX_RESPONSE_BYTES, TokenExchange, TokenExchangeConfig,
};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Map, Value, json};

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

const CLIENT_SECRET: &str = "client-s3cret/+x";

/// One request the token endpoint received.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path: String,
    authorization: String,
    content_type: String,
    form: HashMap<String, String>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A token endpoint at `/token` whose answer depends on the subject token:
/// `*-token` is exchanged (`expires_in` 300 s; `slow-token` after 100 ms),
/// `expired-token` is refused with an OAuth error that quotes it, `na-token` gets a
/// token of type `N_A`, `big-token` and `stream-token` get answers over the cap.
async fn token_endpoint() -> (String, Log) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&log);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let recorded = Arc::clone(&recorded);
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let recorded = Arc::clone(&recorded);
                    async move {
                        let header = |name: &str| {
                            request
                                .headers()
                                .get(name)
                                .and_then(|value| value.to_str().ok())
                                .unwrap_or("-")
                                .to_owned()
                        };
                        let seen = Seen {
                            method: request.method().to_string(),
                            path: request.uri().to_string(),
                            authorization: header("authorization"),
                            content_type: header("content-type"),
                            form: HashMap::new(),
                        };
                        let body = request
                            .into_body()
                            .collect()
                            .await
                            .map(|body| body.to_bytes())
                            .unwrap_or_default();
                        let seen = Seen {
                            form: parse_form(&String::from_utf8_lossy(&body)),
                            ..seen
                        };
                        let subject = seen.form.get("subject_token").cloned().unwrap_or_default();
                        let count = {
                            let mut log = recorded.lock().expect("lock");
                            log.push(seen);
                            log.len()
                        };
                        Ok::<_, Infallible>(answer(&subject, count).await)
                    }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (format!("http://{addr}/token"), log)
}

async fn answer(subject: &str, count: usize) -> hyper::Response<Body> {
    let json = |status: u16, value: Value| {
        let mut response = hyper::Response::new(Full::new(Bytes::from(value.to_string())).boxed());
        *response.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
        response
            .headers_mut()
            .insert("content-type", "application/json".parse().expect("type"));
        response
    };
    match subject {
        "expired-token" => json(
            400,
            json!({
                "error": "invalid_grant",
                "error_description": "subject token expired-token has expired\r\nX-Injected: 1",
            }),
        ),
        "na-token" => json(
            200,
            json!({"access_token": "not-for-bearing", "token_type": "N_A",
                   "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}),
        ),
        "big-token" => json(200, json!({"padding": "x".repeat(MAX_RESPONSE_BYTES)})),
        "stream-token" => {
            let chunk = Bytes::from(vec![b' '; 16 * 1024]);
            let frames = (0..8).map(move |_| Ok::<_, Infallible>(Frame::data(chunk.clone())));
            hyper::Response::new(BodyExt::boxed(StreamBody::new(futures_util::stream::iter(
                frames,
            ))))
        }
        subject => {
            if subject == "slow-token" {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            json(
                200,
                json!({
                    "access_token": format!("exchanged-{subject}-{count}"),
                    "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                    "token_type": "Bearer",
                    "expires_in": 300,
                }),
            )
        }
    }
}

/// `application/x-www-form-urlencoded` decoded; a repeated name keeps its last value.
fn parse_form(body: &str) -> HashMap<String, String> {
    body.split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(name), decode(value))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => out.push(b' '),
            b'%' if index + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).unwrap_or("zz");
                out.push(u8::from_str_radix(hex, 16).unwrap_or(b'?'));
                index += 2;
            }
            byte => out.push(byte),
        }
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn config(token_url: &str) -> TokenExchangeConfig {
    TokenExchangeConfig {
        token_url: token_url.to_owned(),
        client_id: "docket".into(),
        client_secret: docket_identity::secret::Secret::new(CLIENT_SECRET),
        audience: "crm-api".into(),
        resource: Some("https://crm.example/api".into()),
        scope: Some("crm.read crm.list".into()),
        refresh_before: Duration::from_secs(60),
        timeout: Duration::from_secs(10),
    }
}

fn exchange(token_url: &str) -> TokenExchange {
    TokenExchange::new(&config(token_url), "connections.crm.identity").expect("exchange")
}

fn count(log: &Log) -> usize {
    log.lock().expect("lock").len()
}

#[tokio::test]
async fn the_request_is_rfc_8693s_form_with_basic_client_authentication() {
    let (url, log) = token_endpoint().await;
    let exchanged = exchange(&url)
        .exchange("alice-token")
        .await
        .expect("exchanged");
    assert_eq!(exchanged.expose(), "exchanged-alice-token-1");
    let seen = log.lock().expect("lock")[0].clone();
    assert_eq!(
        (seen.method.as_str(), seen.path.as_str()),
        ("POST", "/token")
    );
    assert_eq!(seen.content_type, "application/x-www-form-urlencoded");
    let form = |name: &str| seen.form.get(name).map(String::as_str);
    assert_eq!(
        form("grant_type"),
        Some("urn:ietf:params:oauth:grant-type:token-exchange")
    );
    assert_eq!(form("subject_token"), Some("alice-token"));
    assert_eq!(
        form("subject_token_type"),
        Some("urn:ietf:params:oauth:token-type:access_token")
    );
    assert_eq!(
        form("requested_token_type"),
        Some("urn:ietf:params:oauth:token-type:access_token")
    );
    assert_eq!(form("audience"), Some("crm-api"));
    assert_eq!(form("resource"), Some("https://crm.example/api"));
    assert_eq!(form("scope"), Some("crm.read crm.list"));
    assert_eq!(form("client_secret"), None, "the secret went in the form");
    // client_secret_basic: the id and secret form-encoded, joined, base64 (RFC 6749 §2.3.1).
    let credentials = seen
        .authorization
        .strip_prefix("Basic ")
        .and_then(|encoded| {
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()
        })
        .map(|decoded| String::from_utf8_lossy(&decoded).into_owned());
    assert_eq!(credentials.as_deref(), Some("docket:client-s3cret%2F%2Bx"));
}

#[tokio::test]
async fn one_caller_gets_one_exchange_and_two_callers_two() {
    let (url, log) = token_endpoint().await;
    let exchange = exchange(&url);
    let first = exchange.exchange("alice-token").await.expect("first");
    let second = exchange.exchange("alice-token").await.expect("second");
    assert_eq!(first.expose(), second.expose());
    assert_eq!(count(&log), 1);
    let bob = exchange.exchange("bob-token").await.expect("bob");
    assert_ne!(bob.expose(), first.expose());
    assert_eq!(count(&log), 2);
    assert_eq!(exchange.cached_callers(), 2);

    // Concurrent calls by one caller share one exchange.
    let calls = (0..8).map(|_| {
        let exchange = exchange.clone();
        async move { exchange.exchange("slow-token").await }
    });
    let tokens: Vec<_> = futures_util::future::join_all(calls).await;
    assert!(tokens.iter().all(Result::is_ok), "{tokens:?}");
    assert_eq!(count(&log), 3);
}

#[tokio::test]
async fn a_token_is_exchanged_anew_refresh_before_its_expiry() {
    let (url, log) = token_endpoint().await;
    let exchange = exchange(&url);
    let first = exchange.exchange("alice-token").await.expect("first");
    // expires_in is 300 s and refresh_before 60 s: reused until 240 s have passed.
    // The clock is paused only to move it; the exchanges run on a running clock.
    let skip = async |seconds| {
        tokio::time::pause();
        tokio::time::advance(Duration::from_secs(seconds)).await;
        tokio::time::resume();
    };
    skip(238).await;
    let reused = exchange.exchange("alice-token").await.expect("reused");
    assert_eq!(reused.expose(), first.expose());
    assert_eq!(count(&log), 1);
    skip(3).await;
    let renewed = exchange.exchange("alice-token").await.expect("renewed");
    assert_eq!(count(&log), 2);
    assert_ne!(renewed.expose(), first.expose());
    let again = exchange.exchange("alice-token").await.expect("again");
    assert_eq!(again.expose(), renewed.expose());
    assert_eq!(count(&log), 2);
}

#[tokio::test]
async fn refusals_reach_the_caller_as_sentences_without_secrets() {
    let (url, _) = token_endpoint().await;
    let exchange = exchange(&url);
    let refused = exchange
        .exchange("expired-token")
        .await
        .expect_err("refused");
    let message = refused.to_string();
    assert!(
        matches!(&refused, ExchangeError::Refused { status: 400, error, .. } if error == "invalid_grant"),
        "{refused:?}"
    );
    assert!(message.contains("invalid_grant"), "{message}");
    assert!(message.contains("has expired"), "{message}");
    assert!(!message.contains("expired-token"), "{message}");
    assert!(
        !message.contains('\n') && !message.contains('\r'),
        "{message}"
    );
    assert!(!format!("{refused:?}").contains("expired-token"));

    let not_bearer = exchange.exchange("na-token").await.expect_err("refused");
    assert!(
        matches!(&not_bearer, ExchangeError::NotBearer { token_type } if token_type == "N_A"),
        "{not_bearer:?}"
    );
    assert!(!not_bearer.to_string().contains("not-for-bearing"));

    for subject in ["big-token", "stream-token"] {
        let too_large = exchange.exchange(subject).await.expect_err("refused");
        assert_eq!(
            too_large,
            ExchangeError::TooLarge {
                limit: MAX_RESPONSE_BYTES
            },
            "{subject}"
        );
    }
    assert_eq!(
        exchange.exchange("").await.expect_err("refused"),
        ExchangeError::NoSubjectToken
    );

    // Nothing listens here: a transport error, naming no secret.
    let nowhere = self::exchange("http://127.0.0.1:9/token");
    let unreachable = nowhere.exchange("alice-token").await.expect_err("refused");
    let shown = format!("{unreachable} {unreachable:?}");
    assert!(
        !shown.contains("alice-token") && !shown.contains(CLIENT_SECRET),
        "{shown}"
    );
}

#[tokio::test]
async fn a_slow_token_endpoint_times_out() {
    let (url, _) = token_endpoint().await;
    let slow = TokenExchange::new(
        &TokenExchangeConfig {
            timeout: Duration::from_millis(20),
            ..config(&url)
        },
        "c",
    )
    .expect("exchange");
    let timed_out = slow.exchange("slow-token").await.expect_err("timed out");
    assert!(
        matches!(timed_out, ExchangeError::Timeout { .. }),
        "{timed_out:?}"
    );
}

#[test]
fn no_secret_is_in_debug_output() {
    let config = config("https://idp.example/token");
    let exchange = TokenExchange::new(&config, "c").expect("exchange");
    let shown = format!("{config:?} {exchange:?}");
    assert!(!shown.contains(CLIENT_SECRET), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    let refused = TokenExchange::new(
        &TokenExchangeConfig {
            token_url: "http://idp.example/token".into(),
            ..config
        },
        "connections.crm.identity",
    )
    .expect_err("plain http off loopback");
    assert!(
        refused[0].starts_with("connections.crm.identity.token_url:"),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_connection_in_token_exchange_mode_gives_the_caller_a_bearer() {
    let (url, log) = token_endpoint().await;
    let config: IdentityConfig = serde_json::from_value(json!({
        "mode": "token_exchange",
        "token_url": url,
        "client_id": "docket",
        "client_secret": CLIENT_SECRET,
        "audience": "crm-api",
    }))
    .expect("config");
    assert!(config.problems("c").is_empty());
    let identity = config.compile("c").expect("compiled");
    let claims = Map::new();
    let credential = identity
        .credential(Presented::AccessToken {
            token: "carol-token",
            claims: &claims,
        })
        .await
        .expect("credential")
        .expect("per caller");
    assert_eq!(
        credential.bearer.as_ref().map(|token| token.expose()),
        Some("exchanged-carol-token-1")
    );
    assert!(credential.headers.is_empty());
    assert!(!format!("{credential:?}").contains("exchanged-carol"));
    let seen = log.lock().expect("lock")[0].clone();
    assert_eq!(seen.form.get("scope"), None);
    assert_eq!(seen.form.get("resource"), None);
}

#[test]
fn the_yaml_shape_of_each_mode_reads() {
    let read = |yaml: &str| yaml_serde::from_str::<IdentityConfig>(yaml).map_err(|e| e.to_string());
    let exchange = read(
        "mode: token_exchange\n\
         token_url: https://idp.example/realms/acme/protocol/openid-connect/token\n\
         client_id: docket\n\
         client_secret: s3cret\n\
         audience: crm-api\n\
         resource: https://crm.example/api\n\
         scope: crm.read\n\
         refresh_before: 2m\n",
    );
    match &exchange {
        Ok(IdentityConfig::TokenExchange(config)) => {
            assert_eq!(config.refresh_before, Duration::from_secs(120));
            assert!(
                config.problems("c").is_empty(),
                "{:?}",
                config.problems("c")
            );
        }
        other => panic!("{other:?}"),
    }
    let headers = read(
        "mode: headers\nheaders: { X-User-Email: \"{email}\", X-User: \"{preferred_username}\" }\n",
    );
    match &headers {
        Ok(config @ IdentityConfig::Headers(_)) => assert!(config.problems("c").is_empty()),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        read("mode: fixed\n"),
        Ok(IdentityConfig::Fixed {})
    ));
    assert!(read("mode: fixed\naudience: x\n").is_err());
    assert!(read("mode: token_exchange\ntoken_url: https://i/t\n").is_err());
}
