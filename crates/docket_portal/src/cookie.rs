//! The portal's cookies: reading one by name from a `Cookie` header, and the
//! `Set-Cookie` values that set and clear them.
//!
//! Every cookie is `HttpOnly` (no script reads it), `SameSite=Lax` (another
//! site's form POST does not carry it), scoped to `/portal`, and `Secure`
//! unless the portal is served over plain http on a loopback address, where a
//! browser would not send a `Secure` cookie back.

/// The session cookie: the session id, whose hash names the stored session.
pub const SESSION_COOKIE: &str = "docket_portal";

/// The login cookie: the `state` of the login in flight, so the callback
/// accepts only the browser that started it (no login CSRF).
pub const LOGIN_COOKIE: &str = "docket_portal_login";

/// The most bytes of a `Cookie` header the portal reads.
pub const MAX_COOKIE_HEADER_BYTES: usize = 8 * 1024;

/// The value of the cookie called `name` in a `Cookie` header (RFC 6265
/// §5.4: `name=value` pairs separated by `;`), or `None` when it is absent,
/// the header is too long, or the name appears more than once (a cookie set
/// by a sibling path or subdomain must not shadow the real one silently).
#[must_use]
pub fn find<'h>(header: &'h str, name: &str) -> Option<&'h str> {
    if header.len() > MAX_COOKIE_HEADER_BYTES {
        return None;
    }
    let mut found = None;
    for pair in header.split(';') {
        let Some((key, value)) = pair.split_once('=') else {
            continue;
        };
        if key.trim() == name {
            if found.is_some() {
                return None;
            }
            found = Some(value.trim().trim_matches('"'));
        }
    }
    found
}

/// A `Set-Cookie` value for `name=value` that lives `max_age_seconds`.
#[must_use]
pub fn set(name: &str, value: &str, max_age_seconds: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    format!(
        "{name}={value}; Path=/portal; Max-Age={max_age_seconds}; HttpOnly; SameSite=Lax{secure}"
    )
}

/// A `Set-Cookie` value that removes the cookie called `name`.
#[must_use]
pub fn clear(name: &str, secure: bool) -> String {
    set(name, "", 0, secure)
}
