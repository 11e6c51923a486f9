//! [`Authority`]: what the portal asks of whoever composes it — turning the
//! authorization code of a login into the person it belongs to, by the same
//! rules the tools use (identity, then persona).

use async_trait::async_trait;

/// The person a login proved, as the tools would see them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Person {
    /// The stable principal id, as Docket names owners (`oidc:<sub>`).
    pub subject: String,
    /// A name to show.
    pub display_name: String,
    /// Their roles.
    pub roles: Vec<String>,
    /// Whether their persona is the administrators'.
    pub administrator: bool,
}

/// Why a login did not give a person.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoginError {
    /// The authorization server refused the code (expired, used, not the
    /// portal's); the person starts again.
    #[error("the login was refused: {0}")]
    Refused(String),
    /// The person has no persona: they may use nothing, so no session.
    #[error("{0}")]
    NoPersona(String),
    /// The authorization server or the identity check is unavailable.
    #[error("the login could not be completed: {0}")]
    Unavailable(String),
}

/// Exchanges a login's code for the person, at Docket's authorization server.
#[async_trait]
pub trait Authority: Send + Sync {
    /// The person whose browser brought `code`, exchanged with the PKCE
    /// `verifier` for the `redirect_uri` the login used.
    ///
    /// # Errors
    /// [`LoginError`] when there is no such person.
    async fn exchange(
        &self,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<Person, LoginError>;
}
