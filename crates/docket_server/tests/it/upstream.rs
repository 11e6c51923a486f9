//! Real upstreams for the API and GraphQL tools, on a loopback port: a hyper HTTP
//! server whose routes sit below `/v1` (echo, pages with `Link` and cursors, a
//! binary body, a large streamed body, a slow endless body, a failing endpoint, a
//! redirect, an untyped body) and, at `/graphql`, a real async-graphql schema with
//! Relay-style item pages. Every request is recorded, so tests can show what
//! reached the upstream, and what never did.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_graphql::{EmptyMutation, EmptySubscription, Object, Schema, SimpleObject};
use bytes::Bytes;
use futures_util::StreamExt as _;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

/// One request as the upstream received it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) method: String,
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) headers: Vec<(String, String)>,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    }
}

#[derive(Default)]
struct State {
    seen: Mutex<Vec<Seen>>,
    /// Slow bodies whose client went away before they ended.
    abandoned: AtomicUsize,
    /// The version `/v1/openapi.json` serves (its ETag is `"v<n>"`).
    openapi_version: AtomicUsize,
}

/// The running upstream; dropping it stops it.
pub(crate) struct Upstream {
    pub(crate) addr: SocketAddr,
    state: Arc<State>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    pub(crate) async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(State::default());
        let schema = Schema::build(Query, EmptyMutation, EmptySubscription).finish();
        let served = Arc::clone(&state);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = Arc::clone(&served);
                let schema = schema.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |request| {
                        let state = Arc::clone(&state);
                        let schema = schema.clone();
                        async move { Ok::<_, Infallible>(route(addr, &state, &schema, request).await) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self { addr, state, task }
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Every request received so far.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().expect("lock").clone()
    }

    /// Makes `/v1/openapi.json` serve version `version` (1 at start: one
    /// operation; 2: two).
    pub(crate) fn set_openapi_version(&self, version: usize) {
        self.state.openapi_version.store(version, Ordering::SeqCst);
    }

    /// How many slow bodies were abandoned by their client.
    pub(crate) fn abandoned(&self) -> usize {
        self.state.abandoned.load(Ordering::SeqCst)
    }
}

fn respond(
    status: u16,
    content_type: Option<&str>,
    body: impl Into<Bytes>,
) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(Full::new(body.into()).boxed());
    *response.status_mut() = hyper::StatusCode::from_u16(status).expect("status");
    if let Some(content_type) = content_type {
        response.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            content_type.parse().expect("content type"),
        );
    }
    response
}

fn json_response(value: &Value) -> hyper::Response<Body> {
    respond(200, Some("application/json"), value.to_string())
}

fn parameter<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Counts a slow body as abandoned when it is dropped before it ends.
struct AbandonGuard(Arc<State>);

impl Drop for AbandonGuard {
    fn drop(&mut self) {
        self.0.abandoned.fetch_add(1, Ordering::SeqCst);
    }
}

async fn route(
    addr: SocketAddr,
    state: &Arc<State>,
    schema: &Schema<Query, EmptyMutation, EmptySubscription>,
    request: hyper::Request<Incoming>,
) -> hyper::Response<Body> {
    let (parts, body) = request.into_parts();
    let query = parts.uri.query().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let path = parts.uri.path().to_owned();
    state.seen.lock().expect("lock").push(Seen {
        method: parts.method.to_string(),
        path: path.clone(),
        query: query.clone(),
        headers: headers.clone(),
    });
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    match path.as_str() {
        "/graphql" => {
            let request: async_graphql::Request = match serde_json::from_slice(&body) {
                Ok(request) => request,
                Err(_) => return respond(400, Some("text/plain"), "not a GraphQL request"),
            };
            let authorization = headers
                .iter()
                .find(|(name, _)| name == "authorization")
                .map(|(_, value)| value.clone())
                .unwrap_or_default();
            let response = schema
                .execute(request.data(EchoedAuthorization(authorization)))
                .await;
            respond(
                200,
                Some("application/json"),
                serde_json::to_vec(&response).expect("response"),
            )
        }
        "/v1/openapi.json" => {
            let version = state.openapi_version.load(Ordering::SeqCst).max(1);
            let etag = format!("\"v{version}\"");
            if headers
                .iter()
                .any(|(name, value)| name == "if-none-match" && *value == etag)
            {
                return respond(304, None, "");
            }
            let mut paths = json!({"/items": {"get": {"operationId": "list_items", "summary": "List items", "responses": {"200": {"description": "ok"}}}}});
            if version > 1 {
                paths["/orders"] = json!({"get": {"operationId": "list_orders", "summary": "List orders", "responses": {"200": {"description": "ok"}}}});
            }
            let mut response = json_response(
                &json!({"openapi": "3.1.0", "info": {"title": "shop", "version": version.to_string()}, "paths": paths}),
            );
            response
                .headers_mut()
                .insert(hyper::header::ETAG, etag.parse().expect("etag"));
            response
        }
        "/v1/echo" => json_response(&json!({
            "method": parts.method.as_str(),
            "query": query,
            "headers": headers
                .into_iter()
                .map(|(name, value)| (name, Value::String(value)))
                .collect::<serde_json::Map<String, Value>>(),
            "body": String::from_utf8_lossy(&body),
        })),
        "/v1/items" => {
            let page: u32 = parameter(&query, "page")
                .and_then(|page| page.parse().ok())
                .unwrap_or(1);
            let items: Vec<Value> = (1..=2).map(|i| json!({"id": (page - 1) * 2 + i})).collect();
            let mut response = json_response(
                &json!({"items": items, "meta": {"next_cursor": format!("p{}", page + 1)}}),
            );
            let link = format!(
                "<http://{addr}/v1/items?page={}>; rel=\"next\", <http://{addr}/v1/items?page=1>; rel=\"first\"",
                page + 1
            );
            response
                .headers_mut()
                .insert(hyper::header::LINK, link.parse().expect("link"));
            response
        }
        "/v1/feed" => json_response(
            &json!({"data": [1, 2], "paging": {"hasMore": true, "nextCursor": "feed-2"}}),
        ),
        "/v1/binary" => {
            let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
            png.extend((0..=255u8).cycle().take(4000));
            respond(200, Some("image/png"), png)
        }
        "/v1/untyped" => respond(200, None, "{\"a\":1}\n{\"a\":2}\n"),
        "/v1/fail" => respond(
            503,
            Some("application/json"),
            "{\"error\":\"down for maintenance\"}",
        ),
        "/v1/redirect" => {
            let mut response = respond(302, Some("text/plain"), "moved");
            response.headers_mut().insert(
                hyper::header::LOCATION,
                format!("http://{addr}/v1/echo?redirected=1")
                    .parse()
                    .expect("location"),
            );
            response
        }
        "/v1/big" => {
            let total: usize = parameter(&query, "bytes")
                .and_then(|bytes| bytes.parse().ok())
                .unwrap_or(0);
            let chunk = Bytes::from(b"0123456789abcdef,".repeat(4096));
            let chunks = total.div_ceil(chunk.len());
            let stream = futures_util::stream::iter(0..chunks).map(move |index| {
                let end = ((index + 1) * chunk.len()).min(total) - index * chunk.len();
                Ok::<_, Infallible>(Frame::data(chunk.slice(..end)))
            });
            let mut response = hyper::Response::new(BodyExt::boxed(StreamBody::new(stream)));
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                "text/csv".parse().expect("content type"),
            );
            response
        }
        "/v1/slow" => {
            // `chunks` lines 20 ms apart; without it, endless: it ends only when the
            // client goes away (which the guard counts).
            let chunks: u64 = parameter(&query, "chunks")
                .and_then(|chunks| chunks.parse().ok())
                .unwrap_or(u64::MAX);
            let guard = AbandonGuard(Arc::clone(state));
            let stream =
                futures_util::stream::unfold((0u64, guard), move |(index, guard)| async move {
                    if index >= chunks {
                        std::mem::forget(guard);
                        return None;
                    }
                    if index > 0 {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    let line = Bytes::from(format!("line {index:04}\n").repeat(80));
                    Some((Ok::<_, Infallible>(Frame::data(line)), (index + 1, guard)))
                });
            let mut response = hyper::Response::new(BodyExt::boxed(StreamBody::new(stream)));
            response.headers_mut().insert(
                hyper::header::CONTENT_TYPE,
                "text/plain".parse().expect("content type"),
            );
            response
        }
        _ => respond(
            404,
            Some("application/json"),
            "{\"error\":\"no such route\"}",
        ),
    }
}

/// The GraphQL schema: five items, paged Relay-style, plus a field that fails.
struct Query;

#[derive(SimpleObject)]
struct Item {
    id: i32,
    name: String,
}

#[derive(SimpleObject)]
#[graphql(name = "PageInfo")]
struct PageInfo {
    has_next_page: bool,
    end_cursor: Option<String>,
}

#[derive(SimpleObject)]
struct ItemConnection {
    nodes: Vec<Item>,
    page_info: PageInfo,
}

const ITEMS: i32 = 5;

/// The `Authorization` header a GraphQL request came with.
struct EchoedAuthorization(String);

#[Object]
impl Query {
    async fn hello(&self) -> &str {
        "world"
    }

    /// The request's `Authorization` header, echoed: an upstream that leaks it.
    async fn authorization(&self, context: &async_graphql::Context<'_>) -> String {
        context
            .data_opt::<EchoedAuthorization>()
            .map(|echoed| echoed.0.clone())
            .unwrap_or_default()
    }

    /// Answers after ten minutes: only a cancel ends a query of it in a test.
    async fn slow(&self) -> &str {
        tokio::time::sleep(Duration::from_secs(600)).await;
        "late"
    }

    /// Always fails, to show GraphQL errors beside data.
    async fn boom(&self) -> async_graphql::Result<String> {
        Err("boom failed on purpose".into())
    }

    /// Items after the cursor `c<id>`, `first` at a time.
    async fn items(
        &self,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<ItemConnection> {
        let start = match after {
            None => 0,
            Some(cursor) => cursor
                .strip_prefix('c')
                .and_then(|id| id.parse::<i32>().ok())
                .ok_or("bad cursor")?,
        };
        let first = first.unwrap_or(2).max(1);
        let nodes: Vec<Item> = (start + 1..=(start + first).min(ITEMS))
            .map(|id| Item {
                id,
                name: format!("item {id}"),
            })
            .collect();
        let last = nodes.last().map_or(start, |item| item.id);
        Ok(ItemConnection {
            page_info: PageInfo {
                has_next_page: last < ITEMS,
                end_cursor: Some(format!("c{last}")),
            },
            nodes,
        })
    }
}
