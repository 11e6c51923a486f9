//! What the portal needs to know: where it is served, the client id it logs
//! in as, and its lifetimes and caps.

use std::time::Duration;

/// The portal's settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortalConfig {
    /// Docket's public base URL (`https://docket.example`), without a
    /// trailing slash: the portal is at `{base_url}/portal`, the
    /// authorization server at `{base_url}/oauth/…`.
    pub base_url: String,
    /// The client id the portal has at Docket's authorization server.
    pub client_id: String,
    /// How long a session lives from login, whatever happens.
    pub session_ttl: Duration,
    /// How long a login may take from the portal's redirect to its callback.
    pub login_ttl: Duration,
    /// The most sessions one person keeps; a new login ends the oldest.
    pub sessions_per_person: u32,
    /// The most logins in flight at once, everyone's together.
    pub max_pending_logins: u64,
}

impl PortalConfig {
    /// The defaults at `base_url` for `client_id`: sessions of eight hours,
    /// ten minutes to log in, ten sessions a person, 10 000 logins in flight.
    #[must_use]
    pub fn new(base_url: &str, client_id: &str) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            client_id: client_id.to_owned(),
            session_ttl: Duration::from_secs(8 * 3600),
            login_ttl: Duration::from_secs(600),
            sessions_per_person: 10,
            max_pending_logins: 10_000,
        }
    }

    /// Where the authorization server sends the browser back.
    #[must_use]
    pub fn redirect_uri(&self) -> String {
        format!("{}/portal/callback", self.base_url)
    }

    /// The origin of the base URL (`scheme://host[:port]`), which a form
    /// the portal served posts from.
    #[must_use]
    pub fn origin(&self) -> &str {
        let after_scheme = self.base_url.find("://").map_or(0, |at| at + 3);
        match self.base_url[after_scheme..].find('/') {
            Some(slash) => &self.base_url[..after_scheme + slash],
            None => &self.base_url,
        }
    }

    /// Whether cookies may go without `Secure`: only for plain http on a
    /// loopback host, where browsers would not send a `Secure` cookie back.
    #[must_use]
    pub fn insecure_loopback(&self) -> bool {
        let Some(rest) = self.base_url.strip_prefix("http://") else {
            return false;
        };
        let authority = rest.split('/').next().unwrap_or_default();
        let host = match authority.strip_prefix('[') {
            Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
            None => authority.split(':').next().unwrap_or_default(),
        };
        host == "localhost"
            || host == "::1"
            || host
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|address| address.is_loopback())
    }
}
