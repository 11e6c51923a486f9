//! Docket's portal (`docket_portal`) as the server composes it: the `portal:`
//! configuration section, the portal's client at Docket's own authorization
//! server, and the portal the app keeps. What it answers, and the person a
//! login proves, are `portal_routes`.
//!
//! The portal is a confidential client of the authorization server
//! (`auth.oauth_server`), configured here rather than by the operator: its id
//! is [`PORTAL_CLIENT_ID`], its one redirect URI `{base}/portal/callback`, and
//! its secret an HMAC of the upstream client secret, so every replica with the
//! same configuration derives the same one and nobody has to keep another
//! secret. The code is exchanged in process (the token endpoint's handler is
//! called directly), so the secret never crosses a network.

use std::sync::Arc;
use std::time::Duration;

use docket_oauth::OAuthServerConfig;
use docket_oauth::config::{ConfiguredClient, GrantType};
use docket_oauth::rate::RateLimiter;
use docket_portal::{Portal, PortalConfig, PortalStore};
use hmac::{KeyInit, Mac};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::config::deserialize_duration;

/// The portal's client id at Docket's authorization server.
pub const PORTAL_CLIENT_ID: &str = "docket-portal";

/// The shortest and longest `portal.session_ttl`.
const SESSION_TTL_RANGE: (Duration, Duration) = (
    Duration::from_secs(5 * 60),
    Duration::from_secs(30 * 86_400),
);

/// The `portal:` section.
#[derive(Clone, Debug, Deserialize)]
#[serde(default)]
pub struct PortalSection {
    /// Whether `/portal` is served (it needs `auth.oauth_server`).
    pub enabled: bool,
    /// How long a portal session lives from login, whatever happens.
    #[serde(deserialize_with = "deserialize_duration")]
    pub session_ttl: Duration,
    /// The most portal sessions one person keeps; a new login ends the oldest.
    pub sessions_per_person: u32,
}

impl Default for PortalSection {
    fn default() -> Self {
        Self {
            enabled: false,
            session_ttl: Duration::from_secs(8 * 3600),
            sessions_per_person: 10,
        }
    }
}

impl PortalSection {
    /// Every problem of the section, given whether `auth.oauth_server` is
    /// configured.
    pub(crate) fn problems(&self, has_authorization_server: bool) -> Vec<String> {
        let mut problems = Vec::new();
        if self.enabled && !has_authorization_server {
            problems.push(
                "portal.enabled: needs auth.oauth_server (people log in to the portal through \
                 Docket's authorization server)"
                    .to_owned(),
            );
        }
        let (shortest, longest) = SESSION_TTL_RANGE;
        if self.session_ttl < shortest || self.session_ttl > longest {
            problems.push("portal.session_ttl: must be 5m to 30d".to_owned());
        }
        if self.sessions_per_person == 0 {
            problems.push("portal.sessions_per_person: must be at least 1".to_owned());
        }
        problems
    }
}

/// The portal's client secret: an HMAC of the upstream client secret, the
/// same on every replica with the same configuration.
pub(crate) fn client_secret(upstream_secret: &str) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = <hmac::Hmac<Sha256> as KeyInit>::new_from_slice(upstream_secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes any key length"));
    mac.update(b"docket_portal client secret v1");
    hex::encode(mac.finalize().into_bytes())
}

/// `server_config` with the portal's client added, when the portal is on.
pub(crate) fn with_portal_client(
    server_config: &OAuthServerConfig,
    section: &PortalSection,
    base_url: &str,
) -> OAuthServerConfig {
    let mut server_config = server_config.clone();
    if section.enabled {
        let secret = client_secret(&server_config.upstream.client_secret);
        server_config.clients.push(ConfiguredClient {
            client_id: PORTAL_CLIENT_ID.to_owned(),
            client_secret_sha256: hex::encode(Sha256::digest(secret.as_bytes())),
            redirect_uris: vec![format!("{base_url}/portal/callback")],
            grant_types: vec![GrantType::AuthorizationCode],
            roles: Vec::new(),
            name: Some("Docket portal".to_owned()),
        });
    }
    server_config
}

/// The portal as the server serves it: the pages, and the per-address limit
/// on starting logins (each start keeps a row until it expires, so an
/// address that starts logins without end would fill the cap of logins in
/// flight for everyone).
pub(crate) struct ComposedPortal {
    /// The pages.
    pub(crate) portal: Arc<Portal>,
    /// Logins started, per address.
    pub(crate) login_starts: RateLimiter,
    /// Where the export viewer remembers its places in this process.
    pub(crate) viewer: Arc<docket_export::view::Viewer>,
    /// The audit log and replicas, for administrators' pages.
    pub(crate) oversight: Option<Arc<dyn docket_task::oversight::Oversight>>,
}

/// The portal, when `portal.enabled`, keeping its state in `store` (this
/// process's memory without one).
pub(crate) fn build(
    config: &crate::Config,
    store: Option<Arc<dyn PortalStore>>,
    oversight: Option<Arc<dyn docket_task::oversight::Oversight>>,
) -> Option<ComposedPortal> {
    let section = &config.portal;
    let server_config = config.auth.oauth_server.as_ref()?;
    if !section.enabled {
        return None;
    }
    let mut portal_config = PortalConfig::new(&config.server.base_url(), PORTAL_CLIENT_ID);
    portal_config.session_ttl = section.session_ttl;
    portal_config.sessions_per_person = section.sessions_per_person;
    let store = store
        .unwrap_or_else(|| Arc::new(docket_portal::MemoryStore::new()) as Arc<dyn PortalStore>);
    Some(ComposedPortal {
        portal: Arc::new(Portal::new(portal_config, store)),
        // The same per-address budget as the authorization server's
        // `/oauth/authorize`, which each login goes on to.
        login_starts: RateLimiter::new(server_config.rate_limits.clone()),
        viewer: Arc::new(docket_export::view::Viewer::new()),
        oversight,
    })
}
