//! The keys access tokens are signed with: ES256 (P-256) made with aws-lc-rs,
//! kept in the store as PKCS#8, rotated by [`crate::AuthorizationServer::maintain`]
//! and published at `/oauth/jwks`.
//!
//! Each replica caches the keys and reads the store again when the cache is a
//! minute old, or when a token names a key it does not know (at most once
//! every few seconds, so forged `kid`s cannot hammer the database).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair as _};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{DecodingKey, EncodingKey};
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::store::{OAuthStore, SigningKey, StoreError};

/// How long the cached keys are used before the store is read again.
const CACHE_FOR: Duration = Duration::from_secs(60);

/// How often an unknown `kid` may make the store be read again.
const UNKNOWN_KID_EVERY: Duration = Duration::from_secs(5);

/// Makes a new P-256 signing key, created at `now`.
///
/// # Errors
/// [`StoreError::Invalid`] when the crypto library fails to make one (it does
/// not, on a working machine).
pub fn generate(now: OffsetDateTime) -> Result<SigningKey, StoreError> {
    let document =
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &SystemRandom::new())
            .map_err(|_| StoreError::Invalid("no P-256 key could be generated".to_owned()))?;
    let der = document.as_ref();
    let kid =
        crate::tokens::random_text(12).map_err(|error| StoreError::Invalid(error.to_string()))?;
    let public_jwk = public_jwk(der, &kid)?;
    Ok(SigningKey {
        kid,
        private_pkcs8: STANDARD.encode(der),
        public_jwk,
        created_at: now,
    })
}

fn public_jwk(pkcs8: &[u8], kid: &str) -> Result<Value, StoreError> {
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8)
        .map_err(|_| StoreError::Corrupt(format!("signing key {kid} is not P-256 PKCS#8")))?;
    let point = pair.public_key().as_ref();
    // An uncompressed point: 0x04, then x and y of 32 bytes each.
    if point.len() != 65 || point[0] != 4 {
        return Err(StoreError::Corrupt(format!(
            "signing key {kid} has an unexpected public point"
        )));
    }
    Ok(json!({
        "kty": "EC",
        "crv": "P-256",
        "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
        "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
        "kid": kid,
        "alg": "ES256",
        "use": "sig",
    }))
}

/// A key ready to sign and verify.
pub(crate) struct LoadedKey {
    pub(crate) kid: String,
    pub(crate) encoding: EncodingKey,
    pub(crate) decoding: DecodingKey,
    pub(crate) public_jwk: Value,
}

fn load(key: &SigningKey) -> Result<LoadedKey, StoreError> {
    let der = STANDARD
        .decode(&key.private_pkcs8)
        .map_err(|_| StoreError::Corrupt(format!("signing key {} is not base64", key.kid)))?;
    let public_jwk = public_jwk(&der, &key.kid)?;
    let coordinate = |name: &str| public_jwk[name].as_str().unwrap_or_default().to_owned();
    let decoding = DecodingKey::from_ec_components(&coordinate("x"), &coordinate("y"))
        .map_err(|error| StoreError::Corrupt(format!("signing key {}: {error}", key.kid)))?;
    Ok(LoadedKey {
        kid: key.kid.clone(),
        encoding: EncodingKey::from_ec_der(&der),
        decoding,
        public_jwk,
    })
}

#[derive(Default)]
struct Cache {
    /// Newest first.
    keys: Vec<Arc<LoadedKey>>,
    loaded_at: Option<Instant>,
    forced_at: Option<Instant>,
}

/// One replica's view of the signing keys.
pub(crate) struct KeyRing {
    store: Arc<dyn OAuthStore>,
    cache: Mutex<Cache>,
}

impl KeyRing {
    pub(crate) fn new(store: Arc<dyn OAuthStore>) -> Self {
        Self {
            store,
            cache: Mutex::new(Cache::default()),
        }
    }

    fn cached(&self) -> (Vec<Arc<LoadedKey>>, bool) {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let fresh = cache
            .loaded_at
            .is_some_and(|loaded| loaded.elapsed() < CACHE_FOR);
        (cache.keys.clone(), fresh)
    }

    async fn reload(&self) -> Result<Vec<Arc<LoadedKey>>, StoreError> {
        let stored = self.store.signing_keys().await?;
        let mut keys = Vec::with_capacity(stored.len());
        for key in &stored {
            match load(key) {
                Ok(loaded) => keys.push(Arc::new(loaded)),
                Err(error) => {
                    tracing::warn!(kid = %key.kid, %error, "a signing key cannot be used")
                }
            }
        }
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        cache.keys.clone_from(&keys);
        cache.loaded_at = Some(Instant::now());
        Ok(keys)
    }

    /// The keys, newest first (from the cache while it is fresh).
    pub(crate) async fn keys(&self) -> Result<Vec<Arc<LoadedKey>>, StoreError> {
        match self.cached() {
            (keys, true) => Ok(keys),
            (_, false) => self.reload().await,
        }
    }

    /// The key to sign with: the newest, made now if there is none yet.
    pub(crate) async fn signing_key(&self) -> Result<Arc<LoadedKey>, StoreError> {
        if let Some(newest) = self.keys().await?.into_iter().next() {
            return Ok(newest);
        }
        let key = generate(OffsetDateTime::now_utc())?;
        // Another replica may add its own first key at the same moment; either is fine.
        self.store.add_signing_key(&key, None).await?;
        self.reload()
            .await?
            .into_iter()
            .next()
            .ok_or_else(|| StoreError::Unavailable("no signing key could be stored".to_owned()))
    }

    /// The key `kid` names, reading the store again (rate-limited) when it is
    /// not cached.
    pub(crate) async fn find(&self, kid: &str) -> Result<Option<Arc<LoadedKey>>, StoreError> {
        let keys = self.keys().await?;
        if let Some(key) = keys.iter().find(|key| key.kid == kid) {
            return Ok(Some(Arc::clone(key)));
        }
        let may_force = {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            let allowed = cache
                .forced_at
                .is_none_or(|forced| forced.elapsed() >= UNKNOWN_KID_EVERY);
            if allowed {
                cache.forced_at = Some(Instant::now());
            }
            allowed
        };
        if !may_force {
            return Ok(None);
        }
        Ok(self.reload().await?.into_iter().find(|key| key.kid == kid))
    }

    /// The JSON Web Key Set of every key still published.
    pub(crate) async fn jwks(&self) -> Result<Value, StoreError> {
        let keys = self.keys().await?;
        let keys: Vec<Value> = keys.iter().map(|key| key.public_jwk.clone()).collect();
        Ok(json!({ "keys": keys }))
    }

    /// Adds a key when there is none or the newest is older than `rotation`
    /// (compare-and-set), and removes the keys that stopped signing (a newer
    /// key exists) more than `access_token_ttl` ago, so that no unexpired
    /// token loses its key; whether a key was added, and how many were
    /// removed.
    pub(crate) async fn rotate(
        &self,
        now: OffsetDateTime,
        rotation: time::Duration,
        access_token_ttl: time::Duration,
    ) -> Result<(bool, u64), StoreError> {
        let stored = self.store.signing_keys().await?;
        let newest = stored.first();
        let due = newest.is_none_or(|key| key.created_at + rotation <= now);
        let added = if due {
            let key = generate(now)?;
            self.store
                .add_signing_key(&key, newest.map(|key| key.kid.as_str()))
                .await?
        } else {
            false
        };
        let stored = if added {
            self.store.signing_keys().await?
        } else {
            stored
        };
        // Newest first: a key stopped signing when the key before it was made.
        let cutoff = stored.windows(2).find_map(|pair| {
            (pair[0].created_at + access_token_ttl <= now)
                .then(|| pair[1].created_at + time::Duration::nanoseconds(1))
        });
        let removed = match cutoff {
            Some(cutoff) => self.store.remove_signing_keys_before(cutoff).await?,
            None => 0,
        };
        if added || removed > 0 {
            self.reload().await?;
        }
        Ok((added, removed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_loads_and_publishes_its_public_half() {
        let key = generate(OffsetDateTime::now_utc()).expect("a key");
        let loaded = load(&key).expect("loads");
        assert_eq!(loaded.public_jwk, key.public_jwk);
        assert_eq!(key.public_jwk["crv"], "P-256");
        assert!(key.public_jwk.get("d").is_none());
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(loaded.kid.clone());
        let token = jsonwebtoken::encode(
            &header,
            &json!({"sub": "x", "exp": 4_000_000_000_u64}),
            &loaded.encoding,
        )
        .expect("signs");
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::ES256);
        validation.validate_aud = false;
        let decoded =
            jsonwebtoken::decode::<Value>(&token, &loaded.decoding, &validation).expect("verifies");
        assert_eq!(decoded.claims["sub"], "x");
    }
}
