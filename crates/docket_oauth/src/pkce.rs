//! Proof Key for Code Exchange (RFC 7636), `S256` only: a client's challenge
//! at `/authorize` and its verifier at `/token`, and Docket's own pair towards
//! the provider.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest as _, Sha256};

/// Why a PKCE parameter was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PkceError {
    /// No `code_challenge`.
    #[error("code_challenge is required (PKCE with S256)")]
    MissingChallenge,
    /// A method other than `S256` (`plain`, or absent, which means `plain`).
    #[error("code_challenge_method must be S256")]
    UnsupportedMethod,
    /// A challenge that is not 43 base64url characters (a SHA-256).
    #[error("code_challenge must be the base64url SHA-256 of the verifier (43 characters)")]
    MalformedChallenge,
    /// A verifier that is not 43 to 128 unreserved characters.
    #[error("code_verifier must be 43 to 128 characters of A-Z a-z 0-9 - . _ ~")]
    MalformedVerifier,
    /// The verifier does not hash to the challenge.
    #[error("code_verifier does not match the code_challenge")]
    Mismatch,
}

/// Checks `/authorize`'s `code_challenge` and `code_challenge_method`.
///
/// # Errors
/// A [`PkceError`] unless the method is `S256` and the challenge has its shape.
pub fn check_challenge(challenge: Option<&str>, method: Option<&str>) -> Result<(), PkceError> {
    let challenge = challenge.ok_or(PkceError::MissingChallenge)?;
    if method != Some("S256") {
        return Err(PkceError::UnsupportedMethod);
    }
    let decoded = URL_SAFE_NO_PAD
        .decode(challenge)
        .map_err(|_| PkceError::MalformedChallenge)?;
    if challenge.len() != 43 || decoded.len() != 32 {
        return Err(PkceError::MalformedChallenge);
    }
    Ok(())
}

/// Checks a `code_verifier`'s shape (RFC 7636 §4.1).
///
/// # Errors
/// [`PkceError::MalformedVerifier`].
pub fn check_verifier(verifier: &str) -> Result<(), PkceError> {
    let unreserved = |byte: u8| byte.is_ascii_alphanumeric() || b"-._~".contains(&byte);
    if (43..=128).contains(&verifier.len()) && verifier.bytes().all(unreserved) {
        Ok(())
    } else {
        Err(PkceError::MalformedVerifier)
    }
}

/// The `S256` challenge of `verifier`.
#[must_use]
pub fn challenge_of(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// Checks that `verifier` has its shape and hashes to `challenge`, in
/// constant time.
///
/// # Errors
/// [`PkceError::MalformedVerifier`], [`PkceError::Mismatch`].
pub fn verify(verifier: &str, challenge: &str) -> Result<(), PkceError> {
    check_verifier(verifier)?;
    if crate::tokens::same_secret(&challenge_of(verifier), challenge) {
        Ok(())
    } else {
        Err(PkceError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_7636_example() {
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert_eq!(challenge_of(verifier), challenge);
        assert_eq!(verify(verifier, challenge), Ok(()));
        assert_eq!(check_challenge(Some(challenge), Some("S256")), Ok(()));
        assert_eq!(
            check_challenge(Some(challenge), Some("plain")),
            Err(PkceError::UnsupportedMethod)
        );
        assert_eq!(
            check_challenge(Some(challenge), None),
            Err(PkceError::UnsupportedMethod)
        );
        assert_eq!(
            check_challenge(None, Some("S256")),
            Err(PkceError::MissingChallenge)
        );
    }
}
