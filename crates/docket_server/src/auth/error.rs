//! Why a request could not be given an identity, and how a 401 answer says so.

use std::error::Error as StdError;

/// Why a request could not be given an identity.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// The request carried no credentials and anonymous access is off.
    #[error("no credentials: send `Authorization: Bearer <token>` or `X-API-Key: <key>`")]
    MissingCredentials,
    /// The request carried credentials that are not valid.
    #[error("invalid credentials: {reason}")]
    InvalidCredentials {
        /// Why, in words safe to show the caller; never contains the credential.
        reason: String,
    },
    /// The credentials could not be checked because the identity provider (its
    /// discovery document or its keys) could not be reached.
    #[error("authentication is temporarily unavailable: {reason}")]
    Unavailable {
        /// What could not be reached, safe to show the caller.
        reason: String,
        /// The underlying failure, when there is one.
        #[source]
        source: Option<Box<dyn StdError + Send + Sync>>,
    },
    /// The `auth:` configuration is not valid; the message lists every problem.
    #[error("invalid auth configuration: {0}")]
    Config(String),
}

impl AuthError {
    /// An [`AuthError::InvalidCredentials`] with `reason`.
    pub(crate) fn invalid(reason: impl Into<String>) -> Self {
        Self::InvalidCredentials {
            reason: reason.into(),
        }
    }

    /// The `WWW-Authenticate` header value for a 401 answer to this error
    /// (RFC 6750 §3, RFC 9728 §5.1), pointing the client at the protected-resource
    /// metadata URL. `None` for errors that are not the caller's to fix
    /// ([`AuthError::Unavailable`], [`AuthError::Config`]).
    #[must_use]
    pub fn www_authenticate(&self, resource_metadata_url: &str) -> Option<String> {
        let metadata = quoted(resource_metadata_url);
        match self {
            Self::MissingCredentials => Some(format!("Bearer resource_metadata={metadata}")),
            Self::InvalidCredentials { reason } => Some(format!(
                "Bearer error=\"invalid_token\", error_description={}, resource_metadata={metadata}",
                quoted(reason)
            )),
            Self::Unavailable { .. } | Self::Config(_) => None,
        }
    }
}

/// `text` as an RFC 7230 quoted-string.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            // A header value cannot hold control characters; drop them rather
            // than produce a header hyper would refuse.
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
