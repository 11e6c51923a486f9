//! The portal's secrets: session ids and login `state`s (256 bits from the OS
//! random source, base64url without padding), the hash a store keeps of them,
//! and the PKCE challenge of a verifier.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

/// How many characters a secret has: 32 bytes in base64url without padding.
pub const SECRET_CHARS: usize = 43;

/// The OS random source failed.
#[derive(Debug, thiserror::Error)]
#[error("the OS random source failed: {0}")]
pub struct RandomError(String);

/// 256 random bits from the OS, as base64url without padding.
///
/// # Errors
/// [`RandomError`] when the OS gives no randomness.
pub fn random_secret() -> Result<String, RandomError> {
    let mut buffer = [0_u8; 32];
    getrandom::fill(&mut buffer).map_err(|error| RandomError(error.to_string()))?;
    Ok(URL_SAFE_NO_PAD.encode(buffer))
}

/// Whether `text` has the shape of a [`random_secret`]: 43 base64url
/// characters. Anything else is refused before it is hashed or looked up.
#[must_use]
pub fn is_secret_shaped(text: &str) -> bool {
    text.len() == SECRET_CHARS
        && text
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_')
}

/// The SHA-256 of `secret` in lower-case hex: what a store keeps.
#[must_use]
pub fn hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The PKCE `S256` challenge of `verifier` (RFC 7636 §4.2).
#[must_use]
pub fn pkce_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}
