//! What every endpoint reads: the configuration, the site, the store, the
//! event sink, the keys, the clients, the provider, the rate limiter and the
//! sealer of the provider's refresh tokens, and
//! the small steps several endpoints share (looking up and authenticating a
//! client, recording an event).

use std::net::IpAddr;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use http::{HeaderMap, StatusCode, header};
use time::OffsetDateTime;

use crate::clients::{Client, ClientAuth, Clients, LookupError};
use crate::config::{OAuthServerConfig, Site};
use crate::events::{Event, EventKind, EventSink};
use crate::keys::KeyRing;
use crate::params::Params;
use crate::rate::RateLimiter;
use crate::reply::{Reply, oauth_error};
use crate::store::OAuthStore;
use crate::tokens::Sealer;
use crate::upstream::Upstream;

/// The shared state of one replica's authorization server.
pub(crate) struct State {
    pub(crate) config: OAuthServerConfig,
    pub(crate) site: Site,
    pub(crate) store: Arc<dyn OAuthStore>,
    pub(crate) events: Arc<dyn EventSink>,
    pub(crate) keys: KeyRing,
    pub(crate) clients: Clients,
    pub(crate) upstream: Upstream,
    pub(crate) limiter: RateLimiter,
    pub(crate) sealer: Sealer,
}

impl State {
    pub(crate) fn record(&self, event: Event) {
        self.events.record(event);
    }

    pub(crate) fn now() -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }

    /// Seconds as a `time::Duration`.
    pub(crate) fn seconds(seconds: u64) -> time::Duration {
        time::Duration::seconds(i64::try_from(seconds).unwrap_or(i64::MAX))
    }

    /// The redirect URI the provider sends the browser back to.
    pub(crate) fn callback_uri(site: &Site) -> String {
        format!("{}/oauth/callback", site.issuer)
    }

    /// Whether `resource` names this server's resource (a trailing slash is
    /// tolerated).
    pub(crate) fn is_own_resource(&self, resource: &str) -> bool {
        resource == self.site.resource
            || resource.strip_suffix('/') == Some(self.site.resource.as_str())
    }

    /// The client of a token or revocation request, authenticated per its
    /// kind (RFC 6749 §2.3): a confidential client by `client_secret_basic`
    /// or `client_secret_post`, a public one by its `client_id` alone.
    pub(crate) async fn authenticate_client(
        &self,
        headers: &HeaderMap,
        params: &Params,
        peer: IpAddr,
    ) -> Result<Client, Reply> {
        let basic = match basic_credentials(headers) {
            Ok(basic) => basic,
            Err(why) => return Err(invalid_client(why)),
        };
        let posted_secret = params.get("client_secret");
        let (client_id, secret) = match (&basic, params.get("client_id")) {
            (Some((id, secret)), posted) => {
                if posted.is_some_and(|posted| posted != id) || posted_secret.is_some() {
                    return Err(oauth_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_request",
                        "the client authenticated in two ways",
                    ));
                }
                (id.clone(), Some(secret.clone()))
            }
            (None, Some(id)) => (id.to_owned(), posted_secret.map(str::to_owned)),
            (None, None) => {
                return Err(invalid_client(
                    "client authentication is required (client_id)",
                ));
            }
        };
        let client = match self.clients.find(self.store.as_ref(), &client_id).await {
            Ok(client) => client,
            Err(LookupError::Unknown) => return Err(invalid_client("unknown client")),
            Err(LookupError::Document(error)) => return Err(invalid_client(&error.to_string())),
            Err(LookupError::Store(error)) => return Err(unavailable(&error)),
        };
        // Some public clients send `Basic base64(id:)`: an empty secret is none.
        let secret = secret.filter(|secret| !secret.is_empty());
        let authenticated = match (&client.auth, &secret) {
            (ClientAuth::None, None) => true,
            (ClientAuth::None, Some(_)) => false,
            (ClientAuth::Secret(_), Some(secret)) => client.secret_matches(secret),
            (ClientAuth::Secret(_), None) => false,
        };
        if !authenticated {
            self.record(
                Event::new(EventKind::Refused, peer)
                    .client(&client.client_id)
                    .refused("client authentication failed"),
            );
            return Err(invalid_client("client authentication failed"));
        }
        Ok(client)
    }
}

/// `401 invalid_client` with a `WWW-Authenticate: Basic` challenge.
pub(crate) fn invalid_client(description: &str) -> Reply {
    let mut reply = oauth_error(StatusCode::UNAUTHORIZED, "invalid_client", description);
    reply.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        http::HeaderValue::from_static("Basic realm=\"docket\""),
    );
    reply
}

/// `503 temporarily_unavailable` for a store that failed (logged, not shown).
pub(crate) fn unavailable(error: &dyn std::fmt::Display) -> Reply {
    tracing::warn!(%error, "the authorization store failed");
    oauth_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "temporarily_unavailable",
        "the authorization server cannot reach its store; retry shortly",
    )
}

/// The `Authorization: Basic` credentials, each part form-decoded.
fn basic_credentials(headers: &HeaderMap) -> Result<Option<(String, String)>, &'static str> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let value = value
        .to_str()
        .map_err(|_| "the Authorization header is not text")?;
    let Some((scheme, encoded)) = value.split_once(' ') else {
        return Err("the Authorization header is not Basic");
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err("the Authorization header is not Basic");
    }
    if encoded.len() > 8 * 1024 {
        return Err("the Authorization header is too long");
    }
    let decoded = STANDARD
        .decode(encoded.trim())
        .map_err(|_| "the Basic credentials are not base64")?;
    let decoded = String::from_utf8(decoded).map_err(|_| "the Basic credentials are not UTF-8")?;
    let (id, secret) = decoded
        .split_once(':')
        .ok_or("the Basic credentials have no colon")?;
    let decode = |part: &str| -> String {
        form_urlencoded::parse(format!("x={part}").as_bytes())
            .next()
            .map(|(_, value)| value.into_owned())
            .unwrap_or_default()
    };
    Ok(Some((decode(id), decode(secret))))
}
