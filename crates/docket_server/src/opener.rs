//! Who is opening a link: the one place that turns a request's credentials
//! (a bearer token or an API key, `auth::Authenticator`) into the person
//! opening a share (or anything else opened from a link), or into nobody. A
//! browser with no credentials is sent to open a share for people through
//! the portal (`/portal/shares/{id}`, `portal_routes::open_share`), whose
//! session names the person as an [`Opener::Person`] too, so every link's
//! audience rule reads one answer.

use std::sync::Arc;

use http::HeaderMap;

use crate::auth::{AuthError, Identity, IdentityKind};
use crate::state::App;

/// Who is opening a link.
pub(crate) enum Opener {
    /// Nobody signed in: no credentials (or only the anonymous access a loopback
    /// server allows, which names no person).
    Nobody,
    /// A person, signed in as themselves.
    Person(Arc<Identity>),
}

/// Who the request opening a link comes from.
///
/// A request without credentials is [`Opener::Nobody`], not an error: a public
/// share opens for it, and the other audiences answer it with the challenge
/// that tells a browser or client how to sign in (a browser, with the portal
/// on, is sent to the portal instead).
///
/// # Errors
/// The [`AuthError`] of credentials that were sent and are not valid (or that
/// cannot be checked now): a wrong credential is refused, never read as nobody.
pub(crate) async fn who_is_opening(app: &App, headers: &HeaderMap) -> Result<Opener, AuthError> {
    match app.state.authenticator.authenticate(headers).await {
        Ok(identity) if identity.kind == IdentityKind::Anonymous => Ok(Opener::Nobody),
        Ok(identity) => {
            app.state.principals.seen(&identity);
            Ok(Opener::Person(identity))
        }
        Err(AuthError::MissingCredentials) => Ok(Opener::Nobody),
        Err(error) => Err(error),
    }
}
