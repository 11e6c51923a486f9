//! The answers every endpoint shares: JSON with `Cache-Control: no-store`,
//! OAuth error bodies (RFC 6749 §5.2), redirects and pages with the security
//! headers, the error page, and `429` with `Retry-After`.

use std::time::Duration;

use askama::Template;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};

/// What a handler answers.
pub(crate) type Reply = Response<Bytes>;

/// The Content-Security-Policy of every page: no script, no frames, inline
/// style only. No `form-action`: browsers apply it to the redirect that
/// follows the consent form's POST.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'";

/// The most bytes a rendered page may take (pages are built from bounded
/// input: names at most 200 bytes, ids at most 2048).
const MAX_PAGE_BYTES: usize = 64 * 1024;

fn respond(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Reply {
    let mut response = Response::new(Bytes::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

/// A JSON answer that no cache keeps.
pub(crate) fn json(status: StatusCode, value: &Value) -> Reply {
    let body = serde_json::to_vec(value).unwrap_or_default();
    respond(status, "application/json", body)
}

/// A JSON answer that may be cached for `seconds` (metadata, keys).
pub(crate) fn public_json(value: &Value, seconds: u32) -> Reply {
    let mut reply = json(StatusCode::OK, value);
    let cache = format!("public, max-age={seconds}");
    if let Ok(value) = HeaderValue::from_str(&cache) {
        reply.headers_mut().insert(header::CACHE_CONTROL, value);
    }
    reply.headers_mut().remove(header::PRAGMA);
    reply
}

/// An OAuth error (RFC 6749 §5.2, RFC 7591 §3.2.2).
pub(crate) fn oauth_error(status: StatusCode, code: &str, description: &str) -> Reply {
    json(
        status,
        &json!({ "error": code, "error_description": description }),
    )
}

/// Adds the headers every browser-facing answer carries.
pub(crate) fn secure_page(mut reply: Reply) -> Reply {
    let headers = reply.headers_mut();
    headers.insert(
        "content-security-policy",
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    reply
}

/// A redirect of the browser to `location` (`303` after a POST, else `302`).
pub(crate) fn redirect(location: &str, after_post: bool) -> Reply {
    let status = if after_post {
        StatusCode::SEE_OTHER
    } else {
        StatusCode::FOUND
    };
    let mut reply = respond(status, "text/plain; charset=utf-8", Vec::new());
    match HeaderValue::from_str(location) {
        Ok(value) => {
            reply.headers_mut().insert(header::LOCATION, value);
            secure_page(reply)
        }
        Err(_) => error_page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Sign-in failed",
            "The address to return to could not be written.",
        ),
    }
}

/// A rendered page with the security headers, or the error page when the
/// page cannot be rendered within its bound.
pub(crate) fn page(status: StatusCode, template: &impl Template) -> Reply {
    match template.render() {
        Ok(html) if html.len() <= MAX_PAGE_BYTES => secure_page(respond(
            status,
            "text/html; charset=utf-8",
            html.into_bytes(),
        )),
        Ok(_) | Err(_) => plain_error(),
    }
}

fn plain_error() -> Reply {
    secure_page(respond(
        StatusCode::INTERNAL_SERVER_ERROR,
        "text/plain; charset=utf-8",
        b"the page could not be rendered".to_vec(),
    ))
}

/// The error page: a sign-in that cannot go on, where redirecting would be
/// unsafe (an unknown client, a redirect URI it did not register, an
/// unknown or replayed state).
#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    title: &'a str,
    message: &'a str,
}

/// The error page with `title` and `message` (escaped).
pub(crate) fn error_page(status: StatusCode, title: &str, message: &str) -> Reply {
    page(status, &ErrorPage { title, message })
}

/// `429 Too Many Requests` with `Retry-After`.
pub(crate) fn too_many(wait: Duration, browser: bool) -> Reply {
    let mut reply = if browser {
        error_page(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many requests",
            "Too many sign-in attempts came from your address. Wait a minute and try again.",
        )
    } else {
        oauth_error(
            StatusCode::TOO_MANY_REQUESTS,
            "slow_down",
            "too many requests from this address; retry after the time in Retry-After",
        )
    };
    let seconds = wait.as_secs().max(1).to_string();
    if let Ok(value) = HeaderValue::from_str(&seconds) {
        reply.headers_mut().insert(header::RETRY_AFTER, value);
    }
    reply
}

/// Lets browser-based clients call a JSON endpoint (no cookies are read there).
pub(crate) fn allow_cors(mut reply: Reply) -> Reply {
    let headers = reply.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("authorization, content-type, mcp-protocol-version"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    reply
}

/// The answer to a CORS preflight.
pub(crate) fn preflight() -> Reply {
    allow_cors(respond(
        StatusCode::NO_CONTENT,
        "text/plain; charset=utf-8",
        Vec::new(),
    ))
}
