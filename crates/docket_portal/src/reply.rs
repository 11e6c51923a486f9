//! The answers every page shares: HTML with the security headers, redirects
//! that may set cookies, and the message page for refusals.

use askama::Template;
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};

/// What a handler answers.
pub(crate) type Reply = Response<Bytes>;

/// The Content-Security-Policy of every page: scripts only from the portal's
/// own files (no inline script, so text on a page can never run), events
/// only from its own origin, no frames, inline style only, forms post only
/// to the portal's own origin.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     connect-src 'self'; style-src 'unsafe-inline'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// The most bytes a rendered page may take: pages are built from bounded
/// values (names at most 512 bytes), so a bigger one is a bug, answered as
/// an error rather than sent.
pub(crate) const MAX_PAGE_BYTES: usize = 256 * 1024;

/// Adds the headers every answer to a browser carries.
fn secured(mut reply: Reply) -> Reply {
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
    // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends
    // `Origin: null` with the portal's own forms, which the origin check
    // would refuse; other sites still get no referrer.
    headers.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    reply
}

/// A page rendered from `template`.
pub(crate) fn page<T: Template>(status: StatusCode, template: &T) -> Reply {
    let body = match template.render() {
        Ok(body) if body.len() <= MAX_PAGE_BYTES => body,
        Ok(_) => {
            tracing::error!("a portal page was over its size bound");
            return message(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The page was too large to show.",
            );
        }
        Err(error) => {
            tracing::error!(%error, "a portal page did not render");
            return plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the page did not render\n",
            );
        }
    };
    let mut reply = Response::new(Bytes::from(body));
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    secured(reply)
}

/// One of the portal's own scripts.
pub(crate) fn script(source: &'static str) -> Reply {
    let mut reply = Response::new(Bytes::from_static(source.as_bytes()));
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/javascript; charset=utf-8"),
    );
    secured(reply)
}

/// Plain text, for the few answers no page fits.
fn plain(status: StatusCode, text: &'static str) -> Reply {
    let mut reply = Response::new(Bytes::from_static(text.as_bytes()));
    *reply.status_mut() = status;
    reply.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    secured(reply)
}

#[derive(Template)]
#[template(path = "message.html")]
struct MessagePage<'a> {
    title: &'a str,
    message: &'a str,
}

/// The page that says why something was refused or went wrong.
pub(crate) fn message(status: StatusCode, title: &str, message: &str) -> Reply {
    page(status, &MessagePage { title, message })
}

/// The portal's "not found", which is also its answer for what is not the
/// caller's (THREATS.md: not even its existence).
pub(crate) fn not_found() -> Reply {
    message(
        StatusCode::NOT_FOUND,
        "Not found",
        "There is nothing here, or nothing you may see.",
    )
}

/// Sends the browser to `location` (`303`, so a POST becomes a GET), setting
/// each of `cookies`.
pub(crate) fn redirect(location: &str, cookies: &[String]) -> Reply {
    let mut reply = Response::new(Bytes::new());
    *reply.status_mut() = StatusCode::SEE_OTHER;
    let headers = reply.headers_mut();
    match HeaderValue::from_str(location) {
        Ok(value) => {
            headers.insert(header::LOCATION, value);
        }
        Err(_) => return not_found(),
    }
    for cookie in cookies {
        if let Ok(value) = HeaderValue::from_str(cookie) {
            headers.append(header::SET_COOKIE, value);
        }
    }
    secured(reply)
}
