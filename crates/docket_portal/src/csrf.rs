//! CSRF tokens: every form that changes something carries a token derived
//! from the session's secret id, and every POST is refused unless the token
//! it carries is the session's.
//!
//! The token is a keyed digest of the session id, which only the browser
//! holding the `HttpOnly` cookie has: another site's page can neither read
//! the cookie nor the portal's pages (no CORS), so it cannot produce the
//! token. Nothing is stored; a new session has a new token.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq as _;

/// The name of the form field that carries the token.
pub const FIELD: &str = "csrf";

/// The domain separation of the derivation, so the token is never the
/// session id's stored hash or any other digest of it.
const CONTEXT: &[u8] = b"docket_portal csrf v1\0";

/// The CSRF token of the session whose secret id is `session_id`.
#[must_use]
pub fn token(session_id: &str) -> String {
    let mut digest = Sha256::new();
    digest.update(CONTEXT);
    digest.update(session_id.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.finalize())
}

/// Whether `presented` is the session's token, compared in constant time.
#[must_use]
pub fn matches(session_id: &str, presented: &str) -> bool {
    let expected = token(session_id);
    expected.len() == presented.len() && bool::from(expected.as_bytes().ct_eq(presented.as_bytes()))
}
