//! What the server hands out: access tokens (ES256 JWTs, `typ: at+jwt`, RFC
//! 9068's shape) and opaque secrets (codes, refresh tokens, ids: 256 bits from
//! the OS RNG, base64url), with the SHA-256 the store finds them by; and the
//! [`Sealer`] that keeps the provider's refresh token inside Docket's own.

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

/// The most bytes of a provider's refresh token Docket keeps (sealed inside
/// its own refresh token); a longer one is not kept, and refreshes of that
/// login are not checked at the provider.
pub const MAX_UPSTREAM_REFRESH_BYTES: usize = 2800;

/// What the sealed part of a refresh token is bound to.
const SEAL_AAD: &[u8] = b"docket_oauth: a provider refresh token";

/// Seals the provider's refresh token into the refresh token Docket hands
/// out (`<secret>.<sealed>`), so that the database never holds it and every
/// replica can open it: AES-256-GCM with a random nonce, under a key derived
/// (HKDF-SHA256) from Docket's client secret at the provider and its issuer.
/// Changing that secret ends the re-checked refreshes of earlier logins.
pub struct Sealer {
    key: aws_lc_rs::aead::RandomizedNonceKey,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(<redacted>)")
    }
}

impl Sealer {
    /// The sealer of a server that is `issuer` and authenticates at its
    /// provider with `client_secret`.
    ///
    /// # Errors
    /// A message when the key cannot be derived (it can, on a working machine).
    pub fn new(client_secret: &str, issuer: &str) -> Result<Self, String> {
        use aws_lc_rs::hkdf;
        let mut key = [0_u8; 32];
        hkdf::Salt::new(hkdf::HKDF_SHA256, b"docket_oauth refresh seal v1")
            .extract(client_secret.as_bytes())
            .expand(&[issuer.as_bytes()], hkdf::HKDF_SHA256)
            .and_then(|okm| okm.fill(&mut key))
            .map_err(|_| "the sealing key cannot be derived".to_owned())?;
        let key = aws_lc_rs::aead::RandomizedNonceKey::new(&aws_lc_rs::aead::AES_256_GCM, &key)
            .map_err(|_| "the sealing key cannot be made".to_owned())?;
        Ok(Self { key })
    }

    /// `plain` sealed, base64url; `None` when it is over
    /// [`MAX_UPSTREAM_REFRESH_BYTES`].
    #[must_use]
    pub fn seal(&self, plain: &str) -> Option<String> {
        if plain.len() > MAX_UPSTREAM_REFRESH_BYTES {
            return None;
        }
        let mut data = plain.as_bytes().to_vec();
        let nonce = self
            .key
            .seal_in_place_append_tag(aws_lc_rs::aead::Aad::from(SEAL_AAD), &mut data)
            .ok()?;
        let mut sealed = nonce.as_ref().to_vec();
        sealed.extend_from_slice(&data);
        Some(URL_SAFE_NO_PAD.encode(sealed))
    }

    /// The text `sealed` holds, if this sealer sealed it.
    #[must_use]
    pub fn open(&self, sealed: &str) -> Option<String> {
        let mut bytes = URL_SAFE_NO_PAD.decode(sealed).ok()?;
        if bytes.len() < 12 {
            return None;
        }
        let mut data = bytes.split_off(12);
        let nonce = aws_lc_rs::aead::Nonce::try_assume_unique_for_key(&bytes).ok()?;
        let plain = self
            .key
            .open_in_place(nonce, aws_lc_rs::aead::Aad::from(SEAL_AAD), &mut data)
            .ok()?;
        String::from_utf8(plain.to_vec()).ok()
    }
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

    #[test]
    fn sealed_text_opens_only_with_its_key() {
        let sealer = Sealer::new("secret", "https://docket.example.com").expect("a key");
        let sealed = sealer.seal("upstream-refresh").expect("small");
        assert_ne!(
            sealed,
            sealer.seal("upstream-refresh").expect("small"),
            "random nonces"
        );
        assert_eq!(sealer.open(&sealed).as_deref(), Some("upstream-refresh"));
        let other = Sealer::new("other", "https://docket.example.com").expect("a key");
        assert_eq!(other.open(&sealed), None);
        let mut tampered = sealed.clone();
        tampered.replace_range(20..21, if &sealed[20..21] == "A" { "B" } else { "A" });
        assert_eq!(sealer.open(&tampered), None);
        assert!(
            sealer
                .seal(&"x".repeat(MAX_UPSTREAM_REFRESH_BYTES + 1))
                .is_none()
        );
    }
}
