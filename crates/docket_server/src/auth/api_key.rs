//! API keys: their configuration entries and the digest table the
//! [`Authenticator`](super::Authenticator) checks presented keys against.
//!
//! Keys are high-entropy secrets, so a single SHA-256 digest is enough to
//! protect them at rest in memory and cheap enough to compute per request (a
//! password hash such as bcrypt would cost milliseconds on every call). The plain
//! key is hashed once when the table is built and then dropped.

use std::collections::HashMap;
use std::fmt;

use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use std::sync::Arc;

use super::identity::{Attributes, Identity, IdentityKind};

/// Keys shorter than this are accepted but logged as a warning at start-up:
/// a fast digest only protects a key that cannot be guessed.
const RECOMMENDED_MIN_KEY_CHARS: usize = 16;

/// One entry of `auth.api_keys`.
///
/// Exactly one of `key` (the secret itself, usually `"${ENV}"`) and
/// `key_sha256` (the lower- or upper-case hex SHA-256 digest of the secret) must
/// be set. `Debug` never prints either of them.
#[derive(Clone, Default, Deserialize)]
#[serde(default)]
pub struct ApiKeyConfig {
    /// A unique name for the key's holder; the identity's subject is `apikey:<name>`.
    pub name: String,
    /// The secret key, as the client sends it.
    pub key: Option<String>,
    /// The hex SHA-256 digest of the secret key, for configurations that do not
    /// want to hold the secret itself.
    pub key_sha256: Option<String>,
    /// The holder's e-mail address, if any.
    pub email: Option<String>,
    /// The roles a caller presenting this key has.
    pub roles: Vec<String>,
    /// The session user Trino connections with `impersonation:` run this key's
    /// queries as; without it such connections refuse the key.
    pub user: Option<String>,
}

impl fmt::Debug for ApiKeyConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The digest is redacted too: for a short key it allows an offline guess.
        f.debug_struct("ApiKeyConfig")
            .field("name", &self.name)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .field(
                "key_sha256",
                &self.key_sha256.as_ref().map(|_| "<redacted>"),
            )
            .field("email", &self.email)
            .field("roles", &self.roles)
            .field("user", &self.user)
            .finish()
    }
}

impl ApiKeyConfig {
    /// The subject of this key's holder: `apikey:<name>`.
    #[must_use]
    pub fn subject(&self) -> String {
        format!("apikey:{}", self.name)
    }

    /// The SHA-256 digest of this entry's key, from whichever of `key` and
    /// `key_sha256` is set; `None` when the entry is not valid (see
    /// [`ApiKeyConfig::problems`]).
    #[must_use]
    pub fn digest(&self) -> Option<[u8; 32]> {
        match (&self.key, &self.key_sha256) {
            (Some(key), None) if !key.is_empty() => Some(sha256(key.as_bytes())),
            (None, Some(hex_digest)) => {
                let bytes = hex::decode(hex_digest.trim()).ok()?;
                <[u8; 32]>::try_from(bytes.as_slice()).ok()
            }
            _ => None,
        }
    }

    /// The problems of this one entry, each prefixed by `path` (for example
    /// `auth.api_keys[1]`). Problems that involve other entries (duplicate names
    /// or keys) are found by [`super::AuthConfig::problems`].
    #[must_use]
    pub fn problems(&self, path: &str) -> Vec<String> {
        let mut problems = Vec::new();
        if self.name.trim().is_empty() {
            problems.push(format!("{path}.name: must be set"));
        } else if self
            .name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            problems.push(format!(
                "{path}.name: must not contain spaces or control characters"
            ));
        }
        match (&self.key, &self.key_sha256) {
            (None, None) => problems.push(format!("{path}: set either key or key_sha256")),
            (Some(_), Some(_)) => {
                problems.push(format!("{path}: set either key or key_sha256, not both"));
            }
            (Some(key), None) => {
                if key.is_empty() {
                    // An unset `${ENV}` expands to an empty string; say so, since
                    // that is almost always the cause.
                    problems.push(format!(
                        "{path}.key: is empty (is the environment variable it names set?)"
                    ));
                }
            }
            (None, Some(hex_digest)) => {
                let hex_digest = hex_digest.trim();
                let is_hex_sha256 =
                    hex_digest.len() == 64 && hex_digest.bytes().all(|b| b.is_ascii_hexdigit());
                if !is_hex_sha256 {
                    problems.push(format!(
                        "{path}.key_sha256: must be 64 hexadecimal characters (a SHA-256 digest)"
                    ));
                }
            }
        }
        for (index, role) in self.roles.iter().enumerate() {
            if role.trim().is_empty() {
                problems.push(format!("{path}.roles[{index}]: must not be empty"));
            }
        }
        problems
    }
}

/// The SHA-256 digest of `bytes`.
fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// What the authenticator keeps of one configured key: its digest and the
/// identity it stands for. The plain key is never stored.
#[derive(Clone)]
struct ApiKeyEntry {
    digest: [u8; 32],
    identity: Arc<Identity>,
}

/// The configured API keys, indexed by the SHA-256 digest of each key.
#[derive(Clone, Default)]
pub(crate) struct ApiKeyTable {
    by_digest: HashMap<[u8; 32], ApiKeyEntry>,
}

impl fmt::Debug for ApiKeyTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiKeyTable")
            .field("keys", &self.by_digest.len())
            .finish()
    }
}

impl ApiKeyTable {
    /// Builds the table from valid entries; invalid entries are skipped (the
    /// caller has already refused a configuration with problems).
    pub(crate) fn new(keys: &[ApiKeyConfig]) -> Self {
        let mut by_digest = HashMap::with_capacity(keys.len());
        for config in keys {
            let Some(digest) = config.digest() else {
                continue;
            };
            if config
                .key
                .as_ref()
                .is_some_and(|key| key.chars().count() < RECOMMENDED_MIN_KEY_CHARS)
            {
                tracing::warn!(
                    api_key = %config.name,
                    "API key is shorter than {RECOMMENDED_MIN_KEY_CHARS} characters and could be guessed; \
                     use a long random key (for example `openssl rand -hex 32`)"
                );
            }
            let identity = Identity {
                subject: config.subject(),
                display_name: config.name.clone(),
                email: config.email.clone(),
                roles: config.roles.clone(),
                kind: IdentityKind::ApiKey,
                run: None,
                attributes: Attributes {
                    claims: Arc::new(key_claims(config)),
                    key_user: config.user.clone(),
                    token: None,
                },
            };
            by_digest.insert(
                digest,
                ApiKeyEntry {
                    digest,
                    identity: Arc::new(identity),
                },
            );
        }
        Self { by_digest }
    }

    /// The number of keys in the table.
    pub(crate) fn len(&self) -> usize {
        self.by_digest.len()
    }

    /// The identity of the key `presented`, if it is one of the configured keys.
    pub(crate) fn lookup(&self, presented: &str) -> Option<&Arc<Identity>> {
        let digest = sha256(presented.as_bytes());
        let entry = self.by_digest.get(&digest)?;
        // The map lookup already found an equal digest; this final comparison is
        // the one the security argument rests on, so it runs in constant time
        // whatever the hash map's equality does.
        bool::from(entry.digest.ct_eq(&digest)).then_some(&entry.identity)
    }
}

/// The hex SHA-256 digest of `key`, the form `key_sha256` expects.
#[must_use]
pub fn key_sha256_hex(key: &str) -> String {
    hex::encode(sha256(key.as_bytes()))
}

/// The claims an API key stands for: `sub`, `name` and, when set, `email` and
/// `preferred_username` (its `user:`), so identity headers read the same paths
/// for keys as for tokens.
pub(crate) fn key_claims(config: &ApiKeyConfig) -> serde_json::Map<String, serde_json::Value> {
    let mut claims = serde_json::Map::new();
    claims.insert("sub".into(), config.subject().into());
    claims.insert("name".into(), config.name.clone().into());
    if let Some(email) = &config.email {
        claims.insert("email".into(), email.clone().into());
    }
    if let Some(user) = &config.user {
        claims.insert("preferred_username".into(), user.clone().into());
    }
    claims
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_key(name: &str, key: &str) -> ApiKeyConfig {
        ApiKeyConfig {
            name: name.to_owned(),
            key: Some(key.to_owned()),
            roles: vec!["analyst".to_owned()],
            ..ApiKeyConfig::default()
        }
    }

    #[test]
    fn key_and_key_sha256_give_the_same_digest() {
        let plain = with_key("alice", "correct-horse-battery-staple");
        let hashed = ApiKeyConfig {
            name: "alice".to_owned(),
            key_sha256: Some(key_sha256_hex("correct-horse-battery-staple").to_uppercase()),
            ..ApiKeyConfig::default()
        };
        assert!(plain.digest().is_some());
        assert_eq!(plain.digest(), hashed.digest());
        // The well-known SHA-256 of "abc" pins the digest to SHA-256 itself.
        assert_eq!(
            key_sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn problems_name_key_xor_key_sha256() {
        let both = ApiKeyConfig {
            key_sha256: Some(key_sha256_hex("x")),
            ..with_key("alice", "a-long-enough-secret")
        };
        assert_eq!(
            both.problems("auth.api_keys[1]"),
            vec!["auth.api_keys[1]: set either key or key_sha256, not both"]
        );
        let neither = ApiKeyConfig {
            name: "bob".to_owned(),
            ..ApiKeyConfig::default()
        };
        assert_eq!(
            neither.problems("auth.api_keys[0]"),
            vec!["auth.api_keys[0]: set either key or key_sha256"]
        );
        assert_eq!(neither.digest(), None);
        assert_eq!(both.digest(), None);
    }

    #[test]
    fn problems_reject_bad_digests_empty_keys_and_names() {
        let short_digest = ApiKeyConfig {
            name: "carol".to_owned(),
            key_sha256: Some("abc123".to_owned()),
            ..ApiKeyConfig::default()
        };
        assert_eq!(
            short_digest.problems("p"),
            vec!["p.key_sha256: must be 64 hexadecimal characters (a SHA-256 digest)"]
        );
        assert_eq!(short_digest.digest(), None);

        let not_hex = ApiKeyConfig {
            key_sha256: Some("g".repeat(64)),
            ..short_digest
        };
        assert_eq!(not_hex.problems("p").len(), 1);

        let empty_key = with_key("dave", "");
        assert_eq!(
            empty_key.problems("p"),
            vec!["p.key: is empty (is the environment variable it names set?)"]
        );
        assert_eq!(empty_key.digest(), None);

        let bad_name = ApiKeyConfig {
            roles: vec![String::new()],
            ..with_key("", "a-long-enough-secret")
        };
        assert_eq!(
            bad_name.problems("p"),
            vec!["p.name: must be set", "p.roles[0]: must not be empty"]
        );
        assert!(
            with_key("eve", "a-long-enough-secret")
                .problems("p")
                .is_empty()
        );
    }

    #[test]
    fn problems_never_echo_the_secret() {
        let config = ApiKeyConfig {
            key_sha256: Some("zz-not-a-digest".to_owned()),
            ..with_key("frank", "s3cret-value-that-must-not-leak")
        };
        for problem in config.problems("p") {
            assert!(!problem.contains("s3cret-value"), "{problem}");
            assert!(!problem.contains("zz-not-a-digest"), "{problem}");
        }
    }

    #[test]
    fn table_finds_keys_by_digest_only() {
        let table = ApiKeyTable::new(&[
            with_key("alice", "alice-key-0123456789"),
            ApiKeyConfig {
                name: "bob".to_owned(),
                key_sha256: Some(key_sha256_hex("bob-key-0123456789")),
                ..ApiKeyConfig::default()
            },
        ]);
        assert_eq!(table.len(), 2);
        let alice = table
            .lookup("alice-key-0123456789")
            .map(|i| i.subject.as_str());
        assert_eq!(alice, Some("apikey:alice"));
        let bob = table
            .lookup("bob-key-0123456789")
            .map(|i| i.subject.as_str());
        assert_eq!(bob, Some("apikey:bob"));
        assert!(table.lookup("alice-key-012345678").is_none());
        assert!(table.lookup("").is_none());
        assert!(!format!("{table:?}").contains("alice"));
    }

    #[test]
    fn debug_redacts_key_and_digest() {
        let config = ApiKeyConfig {
            email: Some("alice@example.com".to_owned()),
            ..with_key("alice", "super-secret-api-key")
        };
        let debug = format!("{config:?}");
        assert!(!debug.contains("super-secret-api-key"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
        assert!(debug.contains("alice@example.com"), "{debug}");
        let hashed = ApiKeyConfig {
            key: None,
            key_sha256: Some(key_sha256_hex("super-secret-api-key")),
            ..config
        };
        assert!(!format!("{hashed:?}").contains(&key_sha256_hex("super-secret-api-key")));
    }
}
