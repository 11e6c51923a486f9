//! Every change is a form POST, and every form POST passes here first: the
//! body is bounded and decoded, and the CSRF token it carries must be the
//! session's, or nothing happens.

use http::StatusCode;

use crate::csrf;
use crate::reply::{Reply, message};
use crate::session::SignedIn;

/// The most bytes of a form body the portal reads.
pub const MAX_FORM_BYTES: usize = 16 * 1024;

/// A decoded form whose CSRF token was the session's.
#[derive(Debug)]
pub(crate) struct CheckedForm {
    fields: Vec<(String, String)>,
}

impl CheckedForm {
    /// The first value of `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Why a form was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Over [`MAX_FORM_BYTES`].
    TooLarge,
    /// No token, several, or not the session's.
    Forged,
}

impl Refusal {
    /// The page that says so.
    pub(crate) fn reply(self) -> Reply {
        match self {
            Self::TooLarge => message(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Too large",
                "The form was larger than the portal reads.",
            ),
            Self::Forged => message(
                StatusCode::FORBIDDEN,
                "Refused",
                "This form was not sent from your portal session. Reload the page and try again.",
            ),
        }
    }
}

/// Decodes `body` and checks its CSRF token against `signed_in`'s session.
pub(crate) fn checked(signed_in: &SignedIn, body: &[u8]) -> Result<CheckedForm, Refusal> {
    if body.len() > MAX_FORM_BYTES {
        return Err(Refusal::TooLarge);
    }
    let fields: Vec<(String, String)> = form_urlencoded::parse(body)
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    let presented = fields
        .iter()
        .filter(|(key, _)| key == csrf::FIELD)
        .map(|(_, value)| value.as_str())
        .collect::<Vec<_>>();
    match presented.as_slice() {
        [token] if csrf::matches(&signed_in.id, token) => Ok(CheckedForm { fields }),
        _ => Err(Refusal::Forged),
    }
}
