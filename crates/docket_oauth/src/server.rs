//! [`AuthorizationServer`]: the routes, the verification of the tokens it
//! issued, and the maintenance pass (key rotation, reaping, purging).

use std::net::IpAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::cimd::DocumentFetcher;
use crate::clients::Clients;
use crate::config::{ConfigError, OAuthServerConfig, Site};
use crate::events::{Event, EventKind, EventSink};
use crate::keys::KeyRing;
use crate::rate::{Limited, RateLimiter};
use crate::reply::{allow_cors, oauth_error, preflight, public_json, too_many};
use crate::state::State;
use crate::store::{OAuthStore, StoreError};
use crate::tokens::{Sealer, TokenError, peek_issuer};
use crate::upstream::Upstream;
use crate::{authorize, callback, consent, jwks, metadata, register, revoke, token};

/// The most bytes of a request body any route reads.
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// The most bytes of an access token [`AuthorizationServer::verify_access_token`] reads.
pub const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// How many rows one maintenance batch reaps or purges.
const BATCH: u32 = 500;

/// How many batches one maintenance pass runs at most, per kind.
const MAX_BATCHES: u32 = 40;

/// What one [`AuthorizationServer::maintain`] pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Maintenance {
    /// Whether a new signing key was made.
    pub key_added: bool,
    /// How many old signing keys were removed.
    pub keys_removed: u64,
    /// How many unused or idle registered clients were removed.
    pub clients_reaped: u64,
    /// How many expired one-shot records and refresh tokens were removed.
    pub records_purged: u64,
}

/// Docket's OAuth 2.1 authorization server.
pub struct AuthorizationServer {
    state: Arc<State>,
}

impl std::fmt::Debug for AuthorizationServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthorizationServer")
            .field("issuer", &self.state.site.issuer)
            .finish_non_exhaustive()
    }
}

/// The routes, as (method, path).
const ROUTES: [(&str, &str); 8] = [
    ("GET", "/.well-known/oauth-authorization-server"),
    ("GET", "/oauth/jwks"),
    ("GET", "/oauth/authorize"),
    ("GET", "/oauth/callback"),
    ("POST", "/oauth/consent"),
    ("POST", "/oauth/token"),
    ("POST", "/oauth/register"),
    ("POST", "/oauth/revoke"),
];

/// The routes browser-based clients call from another origin (CORS).
const CORS_PATHS: [&str; 5] = [
    "/.well-known/oauth-authorization-server",
    "/oauth/jwks",
    "/oauth/token",
    "/oauth/register",
    "/oauth/revoke",
];

impl AuthorizationServer {
    /// A server for `site` with `config`, keeping its state in `store` and
    /// telling `events` what happens. Contacts nobody: the provider is
    /// discovered at the first sign-in.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] with every problem of `config`,
    /// [`ConfigError::Site`] for an unusable site, [`ConfigError::Http`] when
    /// an HTTP client cannot be built (an unreadable `ca_file`).
    pub fn new(
        config: OAuthServerConfig,
        site: Site,
        store: Arc<dyn OAuthStore>,
        events: Arc<dyn EventSink>,
    ) -> Result<Self, ConfigError> {
        let problems = config.problems("auth.oauth_server");
        if !problems.is_empty() {
            return Err(ConfigError::Invalid(problems));
        }
        site.check()?;
        let documents = DocumentFetcher::new(&config.client_metadata_documents)
            .map_err(|why| ConfigError::Http(format!("client_metadata_documents: {why}")))?;
        let upstream = Upstream::new(&config.upstream, State::callback_uri(&site))
            .map_err(|why| ConfigError::Http(format!("upstream: {why}")))?;
        let sealer = Sealer::new(&config.upstream.client_secret, &site.issuer).map_err(|why| {
            ConfigError::Invalid(vec![format!(
                "auth.oauth_server.upstream.client_secret: {why}"
            )])
        })?;
        let state = State {
            clients: Clients::new(&config.clients, documents),
            keys: KeyRing::new(Arc::clone(&store)),
            limiter: RateLimiter::new(config.rate_limits.clone()),
            upstream,
            sealer,
            config,
            site,
            store,
            events,
        };
        Ok(Self {
            state: Arc::new(state),
        })
    }

    /// Whether `method` and `path` are one of this server's routes (and the
    /// CORS preflights of the JSON ones).
    #[must_use]
    pub fn answers(method: &Method, path: &str) -> bool {
        ROUTES.iter().any(|(route_method, route_path)| {
            method.as_str() == *route_method && path == *route_path
        }) || (method == Method::OPTIONS && CORS_PATHS.contains(&path))
    }

    /// Answers one request of `peer` (a route [`Self::answers`]); anything
    /// else is `404`.
    pub async fn handle(&self, request: Request<Bytes>, peer: IpAddr) -> Response<Bytes> {
        let state = self.state.as_ref();
        let (parts, body) = request.into_parts();
        let path = parts.uri.path();
        let query = parts.uri.query().unwrap_or_default();
        if parts.method == Method::OPTIONS && CORS_PATHS.contains(&path) {
            return preflight();
        }
        if body.len() > MAX_BODY_BYTES {
            return oauth_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid_request",
                "the request body is over 16 KiB",
            );
        }
        let limited = |endpoint: Limited, browser: bool| {
            state.limiter.check(endpoint, peer).err().map(|wait| {
                state.record(
                    Event::new(EventKind::Refused, peer).refused(format!("rate limit of {path}")),
                );
                too_many(wait, browser)
            })
        };
        match (parts.method.as_str(), path) {
            ("GET", "/.well-known/oauth-authorization-server") => {
                allow_cors(public_json(&self.metadata(), 300))
            }
            ("GET", "/oauth/jwks") => allow_cors(jwks::handle(state).await),
            ("GET", "/oauth/authorize") => match limited(Limited::Authorize, true) {
                Some(reply) => reply,
                None => authorize::handle(state, query, peer).await,
            },
            ("GET", "/oauth/callback") => match limited(Limited::Authorize, true) {
                Some(reply) => reply,
                None => callback::handle(state, query, peer).await,
            },
            ("POST", "/oauth/consent") => match limited(Limited::Authorize, true) {
                Some(reply) => reply,
                None => consent::handle(state, &parts.headers, &body, peer).await,
            },
            ("POST", "/oauth/token") => allow_cors(match limited(Limited::Token, false) {
                Some(reply) => reply,
                None => token::handle(state, &parts.headers, &body, peer).await,
            }),
            ("POST", "/oauth/register") => allow_cors(match limited(Limited::Register, false) {
                Some(reply) => reply,
                None => register::handle(state, &body, peer).await,
            }),
            ("POST", "/oauth/revoke") => allow_cors(match limited(Limited::Token, false) {
                Some(reply) => reply,
                None => revoke::handle(state, &parts.headers, &body, peer).await,
            }),
            _ => oauth_error(StatusCode::NOT_FOUND, "not_found", "no such route"),
        }
    }

    /// The issuer: Docket's public base URL.
    #[must_use]
    pub fn issuer(&self) -> &str {
        &self.state.site.issuer
    }

    /// The authorization server metadata (RFC 8414).
    #[must_use]
    pub fn metadata(&self) -> Value {
        metadata::document(&self.state.site, &self.state.config)
    }

    /// Whether `token` says (unverified) that this server issued it: the
    /// resource server's choice of verifier, not a check.
    #[must_use]
    pub fn is_own_token(&self, token: &str) -> bool {
        peek_issuer(token).is_some_and(|issuer| issuer == self.state.site.issuer)
    }

    /// Verifies an access token this server issued: ES256 by a published key,
    /// `typ: at+jwt`, this issuer, the audience of this server's resource, not
    /// expired. Its claims.
    ///
    /// # Errors
    /// [`TokenError::Invalid`] naming the failed check,
    /// [`TokenError::Unavailable`] when the keys cannot be read.
    pub async fn verify_access_token(&self, token: &str) -> Result<Map<String, Value>, TokenError> {
        let state = self.state.as_ref();
        if token.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::Invalid("it is too long".to_owned()));
        }
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| TokenError::Invalid("it is not a JWT".to_owned()))?;
        if header.alg != Algorithm::ES256 {
            return Err(TokenError::Invalid(
                "it is not signed with ES256".to_owned(),
            ));
        }
        if !header
            .typ
            .as_deref()
            .is_some_and(|typ| typ.eq_ignore_ascii_case("at+jwt"))
        {
            return Err(TokenError::Invalid(
                "it is not an access token (typ at+jwt)".to_owned(),
            ));
        }
        let kid = header
            .kid
            .ok_or_else(|| TokenError::Invalid("it names no key".to_owned()))?;
        let key = state
            .keys
            .find(&kid)
            .await
            .map_err(|error| TokenError::Unavailable(error.to_string()))?
            .ok_or_else(|| TokenError::Invalid("it names an unknown key".to_owned()))?;
        let mut validation = Validation::new(Algorithm::ES256);
        validation.set_issuer(&[state.site.issuer.as_str()]);
        validation.set_audience(&[state.site.resource.as_str()]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = 30;
        jsonwebtoken::decode::<Map<String, Value>>(token, &key.decoding, &validation)
            .map(|decoded| decoded.claims)
            .map_err(|error| TokenError::Invalid(error.to_string()))
    }

    /// One maintenance pass at `now` (every replica may run it, say once a
    /// minute): adds a signing key when there is none or the newest is older
    /// than `signing_key_rotation` (compare-and-set, so replicas agree),
    /// removes keys that stopped signing more than `access_token_ttl` ago, reaps
    /// unused and idle clients, and purges expired records in batches.
    ///
    /// # Errors
    /// The first [`StoreError`].
    pub async fn maintain(&self, now: OffsetDateTime) -> Result<Maintenance, StoreError> {
        let state = self.state.as_ref();
        let config = &state.config;
        let rotation = State::seconds(config.signing_key_rotation);
        let ttl = State::seconds(config.access_token_ttl);
        let (key_added, keys_removed) = state.keys.rotate(now, rotation, ttl).await?;
        let mut maintenance = Maintenance {
            key_added,
            keys_removed,
            ..Maintenance::default()
        };
        let unused_before = now - State::seconds(config.registration.unused_after);
        let idle_before = now - State::seconds(config.registration.idle_after);
        for _ in 0..MAX_BATCHES {
            let reaped = state
                .store
                .reap_clients(unused_before, idle_before, BATCH)
                .await?;
            maintenance.clients_reaped += reaped;
            if reaped < u64::from(BATCH) {
                break;
            }
        }
        for _ in 0..MAX_BATCHES {
            let purged = state.store.purge_expired(now, BATCH).await?;
            maintenance.records_purged += purged;
            if purged < u64::from(BATCH) {
                break;
            }
        }
        Ok(maintenance)
    }
}
