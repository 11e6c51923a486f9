//! Who is opening a link: the one place that turns a browser's request for a
//! share (or anything else opened from a link) into an identity, or into
//! nobody. Today a person is known by the credentials the MCP endpoint takes (a
//! bearer token or an API key, `auth::Authenticator`); the portal's session
//! cookie is to be recognised here too, so that every link's audience rule
//! reads one answer.

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
/// that tells a browser or client how to sign in. This is the function to extend
/// when the portal's session cookie arrives: a valid session is a
/// [`Opener::Person`] as a bearer token is.
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
