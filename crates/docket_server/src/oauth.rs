//! Docket's own authorization server (`docket_oauth`) as the server composes it:
//! its routes behind the HTTP endpoint, its events as audit rows, and the loop
//! that keeps its keys, clients and records in shape.
//!
//! The protocol is all in `docket_oauth`; this module only moves bytes and rows.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use docket_oauth::{AuthorizationServer, Event, EventKind, EventSink};
use docket_task::audit::AuditWriter;
use docket_task::store::{AuditContext, AuditEntry};
use http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_MAX_AGE,
};
use http::{HeaderValue, Method, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde_json::json;
use time::OffsetDateTime;

/// The largest request body an authorization-server endpoint reads: a
/// registration is at most 16 KiB, a token or consent form far less.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024;

/// How often the authorization server's maintenance pass runs: new signing keys
/// when the newest is due, old keys retired, unused clients reaped, expired
/// codes, logins and refresh tokens deleted.
pub(crate) const MAINTENANCE_INTERVAL: Duration = Duration::from_secs(60);

/// Whether `method` and `path` are one of the authorization server's, or a
/// CORS preflight for one.
pub(crate) fn answers(method: &Method, path: &str) -> bool {
    if method == Method::OPTIONS {
        return cross_origin(path);
    }
    AuthorizationServer::answers(method, path)
}

/// The endpoints a client running in a web page calls with `fetch` (so they
/// answer any origin: what protects them is PKCE and client authentication,
/// not where the request comes from). The browser steps (`/oauth/authorize`,
/// the callback, the consent form) are navigations and get no CORS headers.
fn cross_origin(path: &str) -> bool {
    matches!(
        path,
        "/.well-known/oauth-authorization-server"
            | "/oauth/jwks"
            | "/oauth/token"
            | "/oauth/register"
            | "/oauth/revoke"
    )
}

/// Answers one request to the authorization server.
pub(crate) async fn answer<B>(
    server: &AuthorizationServer,
    parts: http::request::Parts,
    body: B,
    peer: Option<IpAddr>,
    body_timeout: Duration,
) -> http::Response<Bytes>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let path = parts.uri.path().to_owned();
    if parts.method == Method::OPTIONS {
        let mut response = http::Response::new(Bytes::new());
        *response.status_mut() = StatusCode::NO_CONTENT;
        let headers = response.headers_mut();
        headers.insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        headers.insert(
            ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST"),
        );
        headers.insert(
            ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type, mcp-protocol-version"),
        );
        headers.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
        return response;
    }
    let collected =
        tokio::time::timeout(body_timeout, Limited::new(body, MAX_BODY_BYTES).collect()).await;
    let bytes = match collected {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
            return text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("the request body is larger than {MAX_BODY_BYTES} bytes\n"),
            );
        }
        Ok(Err(_)) => {
            return text(
                StatusCode::BAD_REQUEST,
                "could not read the request body\n".to_owned(),
            );
        }
        Err(_) => {
            return text(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time\n".to_owned(),
            );
        }
    };
    // An embedder's service may have no peer address; such requests share one
    // rate-limit bucket.
    let peer = peer.unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let request = http::Request::from_parts(parts, bytes);
    let mut response = server.handle(request, peer).await;
    if cross_origin(&path) {
        response
            .headers_mut()
            .insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    }
    response
}

fn text(status: StatusCode, message: String) -> http::Response<Bytes> {
    let mut response = http::Response::new(Bytes::from(message));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// The authorization server's events as audit rows: the event's name as the
/// row's tool (`oauth.login`, `oauth.refresh_reused`, …), the person as its
/// subject (`oidc:<sub>`, as their calls are audited), the client and the
/// address in its context. Without an audit log they are only logged, and so
/// are refusals that name no client.
pub(crate) struct AuditEvents {
    pub(crate) writer: Option<Arc<AuditWriter>>,
}

impl EventSink for AuditEvents {
    fn record(&self, event: Event) {
        let tool = event.kind.as_str();
        tracing::info!(
            event = tool,
            client = event.client_id.as_deref(),
            success = event.success,
            "authorization server event"
        );
        let Some(writer) = &self.writer else {
            return;
        };
        // A refusal that names no client (a rate limit, a malformed request)
        // comes from whoever is on the network and is only logged: audit rows
        // written at an attacker's pace would be the flood the limits stop.
        if event.kind == EventKind::Refused && event.client_id.is_none() {
            return;
        }
        let subject = match &event.subject {
            Some(subject) => format!("oidc:{subject}"),
            None => "anonymous".to_owned(),
        };
        writer.write(AuditEntry {
            tool: tool.to_owned(),
            subject,
            context: AuditContext {
                persona: None,
                connection: None,
                arguments: json!({
                    "client_id": event.client_id,
                    "peer": event.peer.map(|peer| peer.to_string()),
                }),
            },
            success: event.success,
            outcome: if event.success {
                "completed"
            } else {
                "refused"
            }
            .to_owned(),
            error_message: event.detail,
            duration_ms: 0,
            call_id: None,
            engine_user: None,
            upstream_ids: Vec::new(),
        });
    }
}

/// Runs the maintenance pass now (so a signing key exists before the first
/// login) and then every [`MAINTENANCE_INTERVAL`], until aborted.
pub(crate) async fn maintain_forever(server: Arc<AuthorizationServer>) {
    loop {
        match server.maintain(OffsetDateTime::now_utc()).await {
            Ok(report) => tracing::debug!(?report, "authorization server maintenance"),
            Err(error) => {
                tracing::warn!(%error, "the authorization server's maintenance pass failed");
            }
        }
        tokio::time::sleep(MAINTENANCE_INTERVAL).await;
    }
}
