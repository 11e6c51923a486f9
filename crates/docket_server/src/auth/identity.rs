//! Who a request is: the [`Identity`] authentication gives it, and how it proved
//! itself.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

/// How an [`Identity`] proved itself.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IdentityKind {
    /// A configured API key.
    ApiKey,
    /// An access token from the configured OpenID Connect provider.
    Oidc,
    /// No credentials, on a server that allows anonymous access.
    Anonymous,
    /// A managed script's run calling tools: `script:<script id>`, with the
    /// roles its version's author held when saving its source, on behalf of the
    /// script's owner (see [`Identity::on_behalf_of`]). Never from HTTP.
    Script,
}

impl IdentityKind {
    /// A short lower-case name for logs and audit rows: `apikey`, `oidc`,
    /// `anonymous`, `script`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ApiKey => "apikey",
            Self::Oidc => "oidc",
            Self::Anonymous => "anonymous",
            Self::Script => "script",
        }
    }
}

impl fmt::Display for IdentityKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who is calling, as established by the [`Authenticator`](super::Authenticator) (or, for a script
/// run, by the run bridge).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// The stable principal id: `apikey:<name>`, `oidc:<sub>`, `anonymous`, or
    /// `script:<script id>` for a script run.
    pub subject: String,
    /// A human-readable name for the caller.
    pub display_name: String,
    /// The caller's e-mail address, when known.
    pub email: Option<String>,
    /// The caller's roles; they select the persona.
    pub roles: Vec<String>,
    /// How the caller proved who it is.
    pub kind: IdentityKind,
    /// For a script run: the run, and the person on whose behalf it acts.
    /// `None` for everyone who calls in person.
    pub run: Option<RunIdentity>,
    /// What the caller's credential says about them, for acting on their behalf
    /// at upstreams (the Trino session user, identity headers, token exchange).
    pub attributes: Attributes,
}

/// What a credential says about the person presenting it, beyond the subject and
/// roles: what upstream identity (`docket_identity`) is derived from.
///
/// `Debug` never shows the token.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Attributes {
    /// The verified claims: an OIDC access token's, or for an API key
    /// `sub`, `name` and `email` of its entry. For a script run, its owner's, as
    /// last seen when they signed in.
    pub claims: Arc<Map<String, Value>>,
    /// The session user an API key's entry names (`user:`), for connections
    /// that run queries as the caller.
    pub key_user: Option<String>,
    /// The caller's own access token, kept only to exchange it (RFC 8693) for a
    /// token meant for an upstream; never forwarded as it is, never logged.
    pub token: Option<InboundToken>,
}

impl fmt::Debug for Attributes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attributes")
            .field("claims", &self.claims.keys().collect::<Vec<_>>())
            .field("key_user", &self.key_user)
            .field("token", &self.token)
            .finish()
    }
}

/// A caller's access token as it arrived. Its `Debug` output is redacted.
#[derive(Clone, PartialEq, Eq)]
pub struct InboundToken(Arc<str>);

impl InboundToken {
    /// Wraps `token`.
    #[must_use]
    pub fn new(token: &str) -> Self {
        Self(Arc::from(token))
    }

    /// The token itself, for a token exchange request only.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for InboundToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// The script run an [`Identity`] is, and on whose behalf it acts.
///
/// A run's own subject (`script:<script id>`) is who calls tools, what the
/// audit log and call records name, and what its roles are checked for. What
/// the run creates (assets) belongs to the script's owner instead, so exactly
/// those who may follow the run reach it: its starter (always the owner or an
/// administrator), the owner, and administrators.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunIdentity {
    /// The run's id, which is also its task id.
    pub run_id: String,
    /// The subject of the script's owner.
    pub owner: String,
    /// Whether a schedule started the run (its Trino queries are tagged
    /// `scheduled`).
    pub scheduled: bool,
}

impl Identity {
    /// The subject of the anonymous identity.
    pub const ANONYMOUS_SUBJECT: &'static str = "anonymous";

    /// The anonymous identity with `roles`.
    #[must_use]
    pub fn anonymous(roles: Vec<String>) -> Self {
        Self {
            subject: Self::ANONYMOUS_SUBJECT.to_owned(),
            display_name: Self::ANONYMOUS_SUBJECT.to_owned(),
            email: None,
            roles,
            kind: IdentityKind::Anonymous,
            run: None,
            attributes: Attributes::default(),
        }
    }

    /// The subject this identity acts for: what it creates belongs to them, and
    /// idempotency keys and asset visibility are theirs. A script run acts for
    /// its script's owner; everyone else for themselves.
    #[must_use]
    pub fn on_behalf_of(&self) -> &str {
        self.run.as_ref().map_or(&self.subject, |run| &run.owner)
    }

    /// Whether this identity may own tasks: everyone with credentials, and an
    /// anonymous caller only as an administrator (the embedded default's local
    /// user). Other anonymous callers share one subject, so a task of one would be
    /// every one's.
    #[must_use]
    pub fn may_own_tasks(&self, is_admin: bool) -> bool {
        self.kind != IdentityKind::Anonymous || is_admin
    }

    /// The script run this identity is, if it is one.
    #[must_use]
    pub fn run_id(&self) -> Option<&str> {
        self.run.as_ref().map(|run| run.run_id.as_str())
    }
}
