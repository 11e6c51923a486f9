//! Why a token exchange failed, in sentences a caller may read: they name the
//! identity provider's `error` and `error_description`, never a token or the client
//! secret.

use std::time::Duration;

/// The longest `error` code shown, in characters.
pub(crate) const MAX_ERROR_CHARS: usize = 64;

/// The longest `error_description` (or other text from the identity provider) shown,
/// in characters.
pub(crate) const MAX_DESCRIPTION_CHARS: usize = 300;

/// Why a token exchange failed. No variant carries a token or the client secret:
/// text from the identity provider is cut short, stripped of control characters and
/// scrubbed of both before it is kept.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExchangeError {
    /// The caller presented no token to exchange.
    #[error(
        "this connection acts as the caller by exchanging the caller's access token, and the caller presented none"
    )]
    NoSubjectToken,
    /// The identity provider refused the exchange with an OAuth error (RFC 8693 §2.2.2).
    #[error(
        "the identity provider refused to exchange the caller's token for this connection (HTTP {status}): {error}{}",
        .description.as_deref().map(|text| format!(": {text}")).unwrap_or_default()
    )]
    Refused {
        /// The HTTP status of the answer.
        status: u16,
        /// The OAuth `error` code, such as `invalid_grant`.
        error: String,
        /// The `error_description`, if any.
        description: Option<String>,
    },
    /// The token endpoint answered with an error status and no OAuth error.
    #[error("the token endpoint answered HTTP {status} without an OAuth error")]
    Status {
        /// The HTTP status.
        status: u16,
    },
    /// The answer is not a token exchange response.
    #[error("the token endpoint's answer is not a usable token exchange response: {reason}")]
    Malformed {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The issued token is not a bearer token (RFC 8693 `N_A`, or a proof-of-possession
    /// type), so it cannot be sent as `Authorization: Bearer`.
    #[error(
        "the identity provider issued a token of type {token_type:?}, which cannot be sent as a bearer token"
    )]
    NotBearer {
        /// The `token_type` it gave.
        token_type: String,
    },
    /// The issued token is not an access token (an ID token, say).
    #[error(
        "the identity provider issued a {issued_token_type:?}, not an access token for this connection"
    )]
    NotAccessToken {
        /// The `issued_token_type` it gave.
        issued_token_type: String,
    },
    /// The answer is larger than allowed.
    #[error("the token endpoint's answer is larger than {limit} bytes")]
    TooLarge {
        /// The cap, in bytes.
        limit: usize,
    },
    /// The token endpoint did not answer in time.
    #[error("the token endpoint did not answer within {} seconds", .after.as_secs_f64())]
    Timeout {
        /// The timeout.
        after: Duration,
    },
    /// The token endpoint could not be reached, or the exchange broke off.
    #[error("the token endpoint could not be reached: {message}")]
    Transport {
        /// What happened.
        message: String,
    },
}

/// Text from the identity provider as it may be shown: every `secret` replaced by
/// `[REDACTED]`, control characters dropped, at most `max` characters.
pub(crate) fn caller_safe(text: &str, secrets: &[&str], max: usize) -> String {
    // Control characters go first, so none can hide a secret from the replacement.
    let mut text: String = text.chars().filter(|c| !c.is_control()).collect();
    for secret in secrets.iter().filter(|secret| !secret.is_empty()) {
        text = text.replace(secret, "[REDACTED]");
    }
    let mut shown: String = text.chars().take(max).collect();
    if text.chars().count() > max {
        shown.push('…');
    }
    shown.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_text_is_scrubbed_stripped_and_bounded() {
        assert_eq!(
            caller_safe(
                "bad token abc.def\r\n for client s3cret",
                &["abc.def", "s3cret", ""],
                100
            ),
            "bad token [REDACTED] for client [REDACTED]"
        );
        assert_eq!(
            caller_safe(&"x".repeat(500), &[], 10),
            format!("{}…", "x".repeat(10))
        );
        let refused = ExchangeError::Refused {
            status: 400,
            error: "invalid_grant".into(),
            description: Some("subject token expired".into()),
        };
        assert_eq!(
            refused.to_string(),
            "the identity provider refused to exchange the caller's token for this connection \
             (HTTP 400): invalid_grant: subject token expired"
        );
    }
}
