//! The provider's signing keys: which published keys this server can verify with.

use std::time::Instant;

use jsonwebtoken::jwk::{Jwk, KeyOperations, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};

/// One signing key the provider publishes.
pub(super) struct VerifyingKey {
    pub(super) key_id: Option<String>,
    /// The key's `alg`, when the provider pins one.
    pub(super) algorithm: Option<Algorithm>,
    pub(super) key: DecodingKey,
}

/// The provider's signing keys as of one fetch.
pub(super) struct KeySet {
    pub(super) keys: Vec<VerifyingKey>,
    pub(super) fetched_at: Instant,
    /// The configured issuer and the one the discovery document spells out
    /// (they differ at most by a trailing `/`).
    pub(super) accepted_issuers: Vec<String>,
}

impl KeySet {
    pub(super) fn has_key_id(&self, key_id: &str) -> bool {
        self.keys
            .iter()
            .any(|key| key.key_id.as_deref() == Some(key_id))
    }

    /// The keys that may have signed a token with `algorithm` and `key_id`.
    pub(super) fn candidates<'a>(
        &'a self,
        algorithm: Algorithm,
        key_id: Option<&'a str>,
    ) -> impl Iterator<Item = &'a VerifyingKey> + 'a {
        self.keys.iter().filter(move |key| {
            key.key.family() == algorithm.family()
                && key.algorithm.is_none_or(|pinned| pinned == algorithm)
                && key_id.is_none_or(|wanted| key.key_id.as_deref() == Some(wanted))
        })
    }
}

/// The key `jwk` stands for, if it is a public signing key this server can use.
pub(super) fn verifying_key(jwk: &Jwk) -> Option<VerifyingKey> {
    if !matches!(
        jwk.common.public_key_use,
        None | Some(PublicKeyUse::Signature)
    ) {
        return None;
    }
    if let Some(operations) = &jwk.common.key_operations
        && !operations.contains(&KeyOperations::Verify)
    {
        return None;
    }
    // A key pinned to an algorithm jsonwebtoken does not verify (RSA-OAEP, say)
    // is an encryption key: skip it.
    let algorithm = match jwk.common.key_algorithm {
        Some(pinned) => Some(Algorithm::try_from(pinned).ok()?),
        None => None,
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    // A symmetric key in a public key set would let whoever read the set mint
    // tokens; it is never used.
    if key.family() == jsonwebtoken::AlgorithmFamily::Hmac {
        return None;
    }
    Some(VerifyingKey {
        key_id: jwk.common.key_id.clone(),
        algorithm,
        key,
    })
}

/// The name jsonwebtoken gives `algorithm` (`RS256`, …).
pub(super) fn algorithm_name(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::HS256 => "HS256",
        Algorithm::HS384 => "HS384",
        Algorithm::HS512 => "HS512",
        Algorithm::ES256 => "ES256",
        Algorithm::ES384 => "ES384",
        Algorithm::RS256 => "RS256",
        Algorithm::RS384 => "RS384",
        Algorithm::RS512 => "RS512",
        Algorithm::PS256 => "PS256",
        Algorithm::PS384 => "PS384",
        Algorithm::PS512 => "PS512",
        Algorithm::EdDSA => "EdDSA",
        // `Algorithm` is non-exhaustive; an algorithm added later is not accepted
        // until this list names it.
        _ => "",
    }
}
