//! What the authorization server tells its embedder happened: registrations,
//! logins, consents, codes, tokens, reuse detected, revocations and refusals.
//! `docket_server` writes each as an audit row whose tool name is
//! [`EventKind::as_str`]. An event never carries a secret or a token.

use std::net::IpAddr;

/// Receives every event, on the request's task: keep it quick (queue it).
pub trait EventSink: Send + Sync {
    /// Takes one event.
    fn record(&self, event: Event);
}

/// An [`EventSink`] that drops everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn record(&self, _event: Event) {}
}

/// One thing that happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// What.
    pub kind: EventKind,
    /// The client concerned, when known.
    pub client_id: Option<String>,
    /// The person (the provider's `sub`) or the client's own subject, when known.
    pub subject: Option<String>,
    /// The caller's address.
    pub peer: Option<IpAddr>,
    /// Whether it went through.
    pub success: bool,
    /// Why, for a refusal, or a short note; never a secret or a token.
    pub detail: Option<String>,
}

impl Event {
    /// An event of `kind` that went through.
    #[must_use]
    pub fn new(kind: EventKind, peer: IpAddr) -> Self {
        Self {
            kind,
            client_id: None,
            subject: None,
            peer: Some(peer),
            success: true,
            detail: None,
        }
    }

    /// Names the client.
    #[must_use]
    pub fn client(mut self, client_id: &str) -> Self {
        self.client_id = Some(client_id.to_owned());
        self
    }

    /// Names the subject.
    #[must_use]
    pub fn subject(mut self, subject: &str) -> Self {
        self.subject = Some(subject.to_owned());
        self
    }

    /// Marks it refused, saying why.
    #[must_use]
    pub fn refused(mut self, detail: impl Into<String>) -> Self {
        self.success = false;
        self.detail = Some(detail.into());
        self
    }

    /// Adds a note.
    #[must_use]
    pub fn detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

/// The kinds of event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// A client registered (RFC 7591).
    Registered,
    /// A person signed in at the provider.
    Login,
    /// A person consented to a client (or declined).
    Consent,
    /// An authorization code was issued.
    CodeIssued,
    /// Tokens were issued for a code.
    TokenIssued,
    /// A refresh token was rotated.
    Refreshed,
    /// A replaced refresh token was presented: its family is revoked.
    RefreshReused,
    /// A used code was presented again: what it issued is revoked.
    CodeReplayed,
    /// A confidential client got a token for itself.
    ClientCredentials,
    /// A token was revoked (RFC 7009).
    Revoked,
    /// A request was refused (rate limits, bad requests, failed logins).
    Refused,
}

impl EventKind {
    /// The event's name: `oauth.register`, `oauth.login`, ...
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Registered => "oauth.register",
            Self::Login => "oauth.login",
            Self::Consent => "oauth.consent",
            Self::CodeIssued => "oauth.code",
            Self::TokenIssued => "oauth.token",
            Self::Refreshed => "oauth.refresh",
            Self::RefreshReused => "oauth.refresh_reused",
            Self::CodeReplayed => "oauth.code_replayed",
            Self::ClientCredentials => "oauth.client_credentials",
            Self::Revoked => "oauth.revoke",
            Self::Refused => "oauth.refused",
        }
    }
}
