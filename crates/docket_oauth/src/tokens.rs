//! What the server hands out: access tokens (ES256 JWTs, `typ: at+jwt`, RFC
//! 9068's shape) and opaque secrets (codes, refresh tokens, ids: 256 bits from
//! the OS RNG, base64url), with the SHA-256 the store finds them by.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// Why [`crate::AuthorizationServer::verify_access_token`] did not accept a token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Not a token this server issued for its resource, or no longer valid;
    /// the message says which check failed.
    #[error("the access token is not valid: {0}")]
    Invalid(String),
    /// The signing keys could not be read; the caller may retry.
    #[error("the access token cannot be checked now: {0}")]
    Unavailable(String),
}

/// The OS random source failed (it does not, on a working machine).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the operating system's random source failed: {0}")]
pub struct RandomError(String);

/// `bytes` random bytes from the OS, base64url without padding.
///
/// # Errors
/// [`RandomError`] when the OS random source fails.
pub fn random_text(bytes: usize) -> Result<String, RandomError> {
    let mut buffer = vec![0_u8; bytes];
    getrandom::fill(&mut buffer).map_err(|error| RandomError(error.to_string()))?;
    Ok(URL_SAFE_NO_PAD.encode(buffer))
}

/// A new 256-bit secret (a code, a refresh token, a cookie, an id).
///
/// # Errors
/// [`RandomError`] when the OS random source fails.
pub fn new_secret() -> Result<String, RandomError> {
    random_text(32)
}

/// The SHA-256 of `secret`, lower-case hex: what the store keeps.
#[must_use]
pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Whether two secrets (or hashes) are equal, in time that depends only on
/// their lengths.
#[must_use]
pub fn same_secret(left: &str, right: &str) -> bool {
    left.len() == right.len() && bool::from(left.as_bytes().ct_eq(right.as_bytes()))
}

/// The claims every access token has, which carried upstream claims never
/// replace.
pub(crate) const RESERVED_CLAIMS: [&str; 10] = [
    "iss",
    "sub",
    "aud",
    "exp",
    "iat",
    "nbf",
    "jti",
    "client_id",
    "scope",
    "auth_time",
];

/// What an access token says, before it is signed.
pub(crate) struct AccessToken<'a> {
    pub(crate) issuer: &'a str,
    pub(crate) subject: &'a str,
    pub(crate) resource: &'a str,
    pub(crate) client_id: &'a str,
    pub(crate) scope: &'a str,
    pub(crate) issued_at: i64,
    pub(crate) ttl_seconds: u64,
    pub(crate) carried: &'a Map<String, Value>,
}

impl AccessToken<'_> {
    /// The token's claims: the carried ones, then the token's own over them.
    pub(crate) fn claims(&self, jti: String) -> Map<String, Value> {
        let mut claims: Map<String, Value> = self
            .carried
            .iter()
            .filter(|(name, _)| !RESERVED_CLAIMS.contains(&name.as_str()))
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        let expires = self
            .issued_at
            .saturating_add(i64::try_from(self.ttl_seconds).unwrap_or(i64::MAX));
        claims.insert("iss".into(), self.issuer.into());
        claims.insert("sub".into(), self.subject.into());
        claims.insert("aud".into(), self.resource.into());
        claims.insert("iat".into(), self.issued_at.into());
        claims.insert("exp".into(), expires.into());
        claims.insert("jti".into(), jti.into());
        claims.insert("client_id".into(), self.client_id.into());
        claims.insert("scope".into(), self.scope.into());
        claims
    }
}

/// The `iss` of a JWT, read without checking anything.
#[must_use]
pub fn peek_issuer(token: &str) -> Option<String> {
    let payload = token.split('.').nth(1)?;
    if token.len() > 16 * 1024 || token.split('.').count() != 3 {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(payload).ok()?;
    let claims: Map<String, Value> = serde_json::from_slice(&bytes).ok()?;
    claims.get("iss")?.as_str().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_long_random_and_hashed() {
        let one = new_secret().expect("random");
        let two = new_secret().expect("random");
        assert_eq!(one.len(), 43);
        assert_ne!(one, two);
        assert_eq!(hash("abc").len(), 64);
        assert!(same_secret(&hash("abc"), &hash("abc")));
        assert!(!same_secret(&hash("abc"), &hash("abd")));
        assert!(!same_secret("a", "ab"));
    }
}
