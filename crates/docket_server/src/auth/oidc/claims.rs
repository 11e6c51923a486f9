//! Reading a token before and after its signature is checked: its shape, the
//! roles at a claim path, and a caller-safe reason for a failure.

use jsonwebtoken::errors::ErrorKind;
use serde_json::{Map, Value};

use crate::auth::error::AuthError;

/// Whether `token` has the shape of a compact JWS: three dot-separated
/// base64url segments, the first two non-empty.
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    let is_base64url = |segment: &str| {
        segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let mut segments = token.split('.');
    match (
        segments.next(),
        segments.next(),
        segments.next(),
        segments.next(),
    ) {
        (Some(header), Some(payload), Some(signature), None) => {
            !header.is_empty()
                && !payload.is_empty()
                && is_base64url(header)
                && is_base64url(payload)
                && is_base64url(signature)
        }
        _ => false,
    }
}

/// The caller-safe description of a token validation failure.
pub(super) fn describe(error: &jsonwebtoken::errors::Error) -> AuthError {
    AuthError::invalid(match error.kind() {
        ErrorKind::ExpiredSignature => "the token has expired".to_owned(),
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)".to_owned(),
        ErrorKind::InvalidAudience => "the token was issued for another audience".to_owned(),
        ErrorKind::InvalidIssuer => "the token was issued by another issuer".to_owned(),
        ErrorKind::InvalidSignature => "the token's signature does not verify".to_owned(),
        ErrorKind::MissingRequiredClaim(claim) => format!("the token has no `{claim}` claim"),
        ErrorKind::InvalidClaimFormat(claim) => format!("the token's `{claim}` claim is malformed"),
        ErrorKind::InvalidAlgorithm => {
            "the token's algorithm does not match its signing key".to_owned()
        }
        _ => "the token is malformed".to_owned(),
    })
}

/// The roles found at the dot path `path` in `claims`: a string is one role, an
/// array contributes its strings; anything else, or nothing there, is no roles.
pub(super) fn roles_at(claims: &Map<String, Value>, path: &[String]) -> Vec<String> {
    match lookup(claims, path) {
        Some(Value::String(role)) if !role.is_empty() => vec![role.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .filter(|role| !role.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

/// The value at `path` in `object`. At each level the longest run of segments
/// that is itself a key wins, so a claim named `https://example.com/roles` is
/// found although its name contains dots.
pub(super) fn lookup<'a>(object: &'a Map<String, Value>, path: &[String]) -> Option<&'a Value> {
    (1..=path.len()).rev().find_map(|take| {
        let value = object.get(&path[..take].join("."))?;
        match (&path[take..], value) {
            ([], value) => Some(value),
            (rest, Value::Object(inner)) => lookup(inner, rest),
            _ => None,
        }
    })
}
