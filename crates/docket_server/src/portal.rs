//! Docket's portal (`docket_portal`) as the server composes it: the `portal:`
//! configuration section, the portal's client at Docket's own authorization
//! server, the person a login proves (by the identity and persona rules the
//! tools use), its routes behind the HTTP endpoint, and its sweep in the
//! retention pass.
//!
//! The portal is a confidential client of the authorization server
//! (`auth.oauth_server`), configured here rather than by the operator: its id
//! is [`PORTAL_CLIENT_ID`], its one redirect URI `{base}/portal/callback`, and
//! its secret an HMAC of the upstream client secret, so every replica with the
//! same configuration derives the same one and nobody has to keep another
//! secret. The code is exchanged in process (the token endpoint's handler is
//! called directly), so the secret never crosses a network.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use docket_oauth::OAuthServerConfig;
use docket_oauth::config::{ConfiguredClient, GrantType};
use docket_oauth::rate::{Limited as Endpoint, RateLimiter};
use docket_portal::{Authority, LoginError, Person, Portal, PortalConfig, PortalStore};
use hmac::{KeyInit, Mac};
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::config::deserialize_duration;
use crate::state::App;

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
fn client_secret(upstream_secret: &str) -> String {
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
    portal: Arc<Portal>,
    login_starts: RateLimiter,
}

/// The portal, when `portal.enabled`, keeping its state in `store` (this
/// process's memory without one).
pub(crate) fn build(
    config: &crate::Config,
    store: Option<Arc<dyn PortalStore>>,
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
    })
}

/// The authority a portal request logs in with: the app's authorization
/// server and identity rules, for the browser at `peer` (whose rate limit the
/// token exchange counts against).
struct ServerAuthority<'a> {
    app: &'a App,
    peer: IpAddr,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
}

#[async_trait]
impl Authority for ServerAuthority<'_> {
    async fn exchange(
        &self,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<Person, LoginError> {
        let state = &self.app.state;
        let (Some(server), Some(server_config)) = (
            state.authenticator.authorization_server(),
            state.config.auth.oauth_server.as_ref(),
        ) else {
            return Err(LoginError::Unavailable(
                "no authorization server is configured".to_owned(),
            ));
        };
        let secret = client_secret(&server_config.upstream.client_secret);
        let form: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_verifier", verifier)
            .append_pair("client_id", PORTAL_CLIENT_ID)
            .append_pair("client_secret", &secret)
            .finish();
        let request = http::Request::post("/oauth/token")
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Bytes::from(form))
            .map_err(|error| LoginError::Unavailable(error.to_string()))?;
        let answer = server.handle(request, self.peer).await;
        if answer.status() != StatusCode::OK {
            let why = String::from_utf8_lossy(answer.body()).into_owned();
            return Err(
                if answer.status().is_server_error()
                    || answer.status() == StatusCode::TOO_MANY_REQUESTS
                {
                    LoginError::Unavailable(why)
                } else {
                    LoginError::Refused(why)
                },
            );
        }
        let token: TokenAnswer = serde_json::from_slice(answer.body())
            .map_err(|error| LoginError::Unavailable(format!("the token answer: {error}")))?;
        // The token is checked as any caller's would be: the same identity,
        // the same persona.
        let mut headers = HeaderMap::new();
        let bearer = HeaderValue::from_str(&format!("Bearer {}", token.access_token))
            .map_err(|error| LoginError::Unavailable(error.to_string()))?;
        headers.insert(AUTHORIZATION, bearer);
        let identity = state
            .authenticator
            .authenticate(&headers)
            .await
            .map_err(|error| LoginError::Refused(error.to_string()))?;
        state.principals.seen(&identity);
        let Some(persona) = state.personas.resolve(&identity.roles) else {
            return Err(LoginError::NoPersona(
                "Your account has no persona in Docket, so there is nothing here for you. Ask \
                 an administrator for access."
                    .to_owned(),
            ));
        };
        Ok(Person {
            subject: identity.subject.clone(),
            display_name: identity.display_name.clone(),
            roles: identity.roles.clone(),
            administrator: persona.is_admin,
        })
    }
}

/// Answers one request to the portal.
pub(crate) async fn answer<B>(
    app: &App,
    portal: &ComposedPortal,
    parts: http::request::Parts,
    body: B,
    peer: IpAddr,
) -> http::Response<Bytes>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if parts.method == http::Method::GET
        && parts.uri.path() == "/portal/login"
        && let Err(wait) = portal.login_starts.check(Endpoint::Authorize, peer)
    {
        let mut response = plain(
            StatusCode::TOO_MANY_REQUESTS,
            "too many logins started from this address; try again shortly\n",
        );
        if let Ok(value) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, value);
        }
        return response;
    }
    let body_timeout = app.config().server.body_timeout;
    let collected = tokio::time::timeout(
        body_timeout,
        Limited::new(body, docket_portal::MAX_FORM_BYTES).collect(),
    )
    .await;
    let bytes = match collected {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the form is larger than the portal reads\n",
            );
        }
        Ok(Err(_)) | Err(_) => {
            return plain(StatusCode::BAD_REQUEST, "the request body did not arrive\n");
        }
    };
    let request = http::Request::from_parts(parts, bytes);
    portal
        .portal
        .handle(request, &ServerAuthority { app, peer })
        .await
}

fn plain(status: StatusCode, text: &'static str) -> http::Response<Bytes> {
    let mut response = http::Response::new(Bytes::from_static(text.as_bytes()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

impl App {
    /// Removes the portal's expired sessions and logins (the retention pass
    /// runs it); how many rows went.
    pub(crate) async fn sweep_portal(&self) -> u64 {
        let Some(portal) = &self.state.portal else {
            return 0;
        };
        match portal.portal.sweep(time::OffsetDateTime::now_utc()).await {
            Ok(swept) => swept.sessions + swept.logins,
            Err(error) => {
                tracing::warn!(%error, "the portal's sweep failed");
                0
            }
        }
    }
}
