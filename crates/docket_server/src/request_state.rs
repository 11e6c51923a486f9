//! Integrity protection for `requestState`, the opaque string an `input_required`
//! result hands the client and the client echoes on its retry.
//!
//! The state is attacker-controlled on the way back, so it is sealed with
//! HMAC-SHA-256 under a server secret and bound to the caller, the tool, a digest of
//! the arguments and an expiry. A state that was altered, belongs to another caller
//! or call, or has expired is refused.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use docket_protocol::JsonObject;
use hmac::{KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

type HmacSha256 = hmac::Hmac<Sha256>;

/// The time now in seconds since the Unix epoch, as seals count it.
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// How long a sealed state stays valid, in seconds.
pub(crate) const STATE_LIFETIME_SECONDS: u64 = 15 * 60;

/// The secret key states are sealed with.
#[derive(Clone)]
pub(crate) struct RequestStateKey([u8; 32]);

impl std::fmt::Debug for RequestStateKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RequestStateKey(<redacted>)")
    }
}

/// What a sealed state is bound to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Binding<'a> {
    /// The caller's subject.
    pub subject: &'a str,
    /// The tool called.
    pub tool: &'a str,
    /// The call's arguments.
    pub arguments: &'a JsonObject,
}

/// Why a state was refused. Deliberately coarse: the client learns only that it is invalid.
#[non_exhaustive]
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StateError {
    /// Not a sealed state, or its seal does not verify.
    #[error("requestState is malformed or has been tampered with")]
    Tampered,
    /// Sealed for another caller, tool or set of arguments.
    #[error("requestState belongs to a different call")]
    Foreign,
    /// Sealed too long ago.
    #[error("requestState has expired; call the tool again without it")]
    Expired,
}

#[derive(Serialize, Deserialize)]
struct Sealed {
    v: u8,
    sub: String,
    tool: String,
    args: String,
    exp: u64,
    state: Value,
}

impl RequestStateKey {
    /// A key of 32 bytes from the operating system's random source.
    ///
    /// # Errors
    /// When the OS random source fails.
    pub(crate) fn random() -> Result<Self, getrandom::Error> {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key)?;
        Ok(Self(key))
    }

    /// A key derived from a configured secret, so every replica shares it.
    pub(crate) fn from_secret(secret: &str) -> Self {
        Self(Sha256::digest(secret.as_bytes()).into())
    }

    /// Seals `state` for `binding`, valid until `now_unix + STATE_LIFETIME_SECONDS`.
    pub(crate) fn seal(&self, binding: Binding<'_>, state: &Value, now_unix: u64) -> String {
        let sealed = Sealed {
            v: 1,
            sub: binding.subject.to_owned(),
            tool: binding.tool.to_owned(),
            args: arguments_digest(binding.arguments),
            exp: now_unix.saturating_add(STATE_LIFETIME_SECONDS),
            state: state.clone(),
        };
        // Serializing a struct of strings and a Value cannot fail.
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&sealed).unwrap_or_default());
        let tag = URL_SAFE_NO_PAD.encode(self.mac(payload.as_bytes()).finalize().into_bytes());
        format!("{payload}.{tag}")
    }

    /// Verifies and opens a sealed state.
    ///
    /// # Errors
    /// [`StateError`] when the seal fails, the binding differs, or the state expired.
    pub(crate) fn open(
        &self,
        token: &str,
        binding: Binding<'_>,
        now_unix: u64,
    ) -> Result<Value, StateError> {
        let (payload, tag) = token.split_once('.').ok_or(StateError::Tampered)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| StateError::Tampered)?;
        // `verify_slice` compares in constant time.
        self.mac(payload.as_bytes())
            .verify_slice(&tag)
            .map_err(|_| StateError::Tampered)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| StateError::Tampered)?;
        let sealed: Sealed = serde_json::from_slice(&bytes).map_err(|_| StateError::Tampered)?;
        if sealed.v != 1 {
            return Err(StateError::Tampered);
        }
        if sealed.sub != binding.subject
            || sealed.tool != binding.tool
            || sealed.args != arguments_digest(binding.arguments)
        {
            return Err(StateError::Foreign);
        }
        if now_unix > sealed.exp {
            return Err(StateError::Expired);
        }
        Ok(sealed.state)
    }

    fn mac(&self, payload: &[u8]) -> HmacSha256 {
        // HMAC accepts keys of any length, so this cannot fail for 32 bytes.
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
        mac.update(payload);
        mac
    }
}

/// SHA-256 of the arguments' JSON; object keys serialize in sorted order.
fn arguments_digest(arguments: &JsonObject) -> String {
    let bytes = serde_json::to_vec(arguments).unwrap_or_default();
    hex::encode(Sha256::digest(&bytes))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn arguments(value: Value) -> JsonObject {
        match value {
            Value::Object(object) => object,
            _ => JsonObject::new(),
        }
    }

    #[test]
    fn a_sealed_state_opens_for_the_same_call_only() {
        let key = RequestStateKey::from_secret("test secret");
        let args = arguments(json!({"sql": "select 1"}));
        let binding = Binding {
            subject: "apikey:alice",
            tool: "trino_query",
            arguments: &args,
        };
        let token = key.seal(binding, &json!({"step": 2}), 1000);
        assert_eq!(key.open(&token, binding, 1001), Ok(json!({"step": 2})));

        let other_args = arguments(json!({"sql": "select 2"}));
        let foreign = [
            Binding {
                subject: "apikey:bob",
                ..binding
            },
            Binding {
                tool: "trino_export",
                ..binding
            },
            Binding {
                arguments: &other_args,
                ..binding
            },
        ];
        for binding in foreign {
            assert_eq!(key.open(&token, binding, 1001), Err(StateError::Foreign));
        }
        assert_eq!(
            key.open(&token, binding, 1000 + STATE_LIFETIME_SECONDS + 1),
            Err(StateError::Expired)
        );
    }

    #[test]
    fn tampering_is_detected() {
        let key = RequestStateKey::from_secret("test secret");
        let args = JsonObject::new();
        let binding = Binding {
            subject: "anonymous",
            tool: "t",
            arguments: &args,
        };
        let token = key.seal(binding, &json!({"admin": false}), 0);
        let (payload, tag) = token.split_once('.').expect("two parts");

        let forged_payload = URL_SAFE_NO_PAD.encode(
            String::from_utf8(URL_SAFE_NO_PAD.decode(payload).expect("b64"))
                .expect("utf8")
                .replace("false", "true"),
        );
        for bad in [
            format!("{forged_payload}.{tag}"),
            format!("{payload}.{}", URL_SAFE_NO_PAD.encode([0u8; 32])),
            payload.to_owned(),
            "not a state".to_owned(),
            String::new(),
        ] {
            assert_eq!(
                key.open(&bad, binding, 0),
                Err(StateError::Tampered),
                "{bad}"
            );
        }
        let other_key = RequestStateKey::from_secret("another secret");
        assert_eq!(
            other_key.open(&token, binding, 0),
            Err(StateError::Tampered)
        );
    }
}
