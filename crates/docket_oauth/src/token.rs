//! `POST /oauth/token`: the authorization code, refresh token and client
//! credentials grants (OAuth 2.1 §3.2, RFC 6749 §5.2 errors).
//!
//! - `authorization_code`: the code is taken once by its hash; a second
//!   presentation is `invalid_grant` and revokes the refresh family the first
//!   one started. The client, the redirect URI, the PKCE verifier and (when
//!   given) the resource must all match the authorization.
//! - `refresh_token`: rotated through the store; a token presented after it
//!   was replaced revokes its whole family. A login that kept the provider's
//!   refresh token (sealed after a `.` in Docket's) is refreshed at the
//!   provider first: a refusal there ends the family, and the access token
//!   carries the provider's claims as they are now.
//! - `client_credentials`: configured confidential clients only, with the
//!   subject `client:<client_id>` and their roles at the role claim; no
//!   refresh token.

use std::net::IpAddr;

use http::{HeaderMap, StatusCode};
use jsonwebtoken::{Algorithm, Header};
use serde_json::{Map, Value, json};

use crate::authorize::granted_scope;
use crate::clients::{Client, ClientKind};
use crate::config::GrantType;
use crate::events::{Event, EventKind};
use crate::flow::{CodeGrant, RefreshGrant};
use crate::params::Params;
use crate::pkce::{PkceError, verify};
use crate::reply::{Reply, json as json_reply, oauth_error};
use crate::state::{State, unavailable};
use crate::store::{Fetched, OnceKind, RefreshToken, Rotation};
use crate::tokens::{AccessToken, hash, new_secret, random_text};
use crate::upstream::{RefreshFailure, keep_claims, roles_at};

fn refuse(code: &str, description: &str) -> Reply {
    oauth_error(StatusCode::BAD_REQUEST, code, description)
}

pub(crate) async fn handle(state: &State, headers: &HeaderMap, body: &[u8], peer: IpAddr) -> Reply {
    let params = match Params::parse(body) {
        Ok(params) => params,
        Err(error) => return refuse("invalid_request", &error.to_string()),
    };
    let Some(grant_type) = params.get("grant_type") else {
        return refuse("invalid_request", "grant_type is required");
    };
    let Some(grant) = GrantType::parse(grant_type) else {
        return refuse(
            "unsupported_grant_type",
            "grant_type must be authorization_code, refresh_token or client_credentials",
        );
    };
    let client = match state.authenticate_client(headers, &params, peer).await {
        Ok(client) => client,
        Err(reply) => return reply,
    };
    if !client.allows_grant(grant) {
        state.record(
            Event::new(EventKind::Refused, peer)
                .client(&client.client_id)
                .refused(format!("token: the client may not use {}", grant.as_str())),
        );
        return refuse(
            "unauthorized_client",
            &format!("this client may not use the {} grant", grant.as_str()),
        );
    }
    if let Some(resource) = params.get("resource")
        && !state.is_own_resource(resource)
    {
        return refuse(
            "invalid_target",
            "resource is not this server's MCP endpoint",
        );
    }
    match grant {
        GrantType::AuthorizationCode => authorization_code(state, &client, &params, peer).await,
        GrantType::RefreshToken => refresh_token(state, &client, &params, peer).await,
        GrantType::ClientCredentials => client_credentials(state, &client, &params, peer).await,
    }
}

async fn authorization_code(
    state: &State,
    client: &Client,
    params: &Params,
    peer: IpAddr,
) -> Reply {
    let Some(code) = params.get("code") else {
        return refuse("invalid_request", "code is required");
    };
    let Some(verifier) = params.get("code_verifier") else {
        return refuse("invalid_request", "code_verifier is required (PKCE)");
    };
    let taken = match state
        .store
        .take_once(OnceKind::Code, &hash(code), State::now())
        .await
    {
        Ok(taken) => taken,
        Err(error) => return unavailable(&error),
    };
    let payload = match taken {
        Fetched::Fresh(payload) => payload,
        Fetched::Replayed(payload) => {
            let family = serde_json::from_value::<CodeGrant>(payload)
                .map(|grant| grant.family)
                .ok();
            let mut revoked = 0;
            if let Some(family) = &family {
                match state.store.revoke_family(family).await {
                    Ok(count) => revoked = count,
                    Err(error) => {
                        tracing::warn!(%error, "a replayed code's family could not be revoked")
                    }
                }
            }
            state.record(
                Event::new(EventKind::CodeReplayed, peer)
                    .client(&client.client_id)
                    .refused(format!(
                        "a used code was presented again; {revoked} refresh tokens revoked"
                    )),
            );
            return refuse("invalid_grant", "the code was already used");
        }
        Fetched::Missing => return refuse("invalid_grant", "the code is unknown or expired"),
    };
    let Ok(grant) = serde_json::from_value::<CodeGrant>(payload) else {
        return unavailable(&"a stored code cannot be read");
    };
    let authorization = &grant.authorization;
    if authorization.client_id != client.client_id {
        return refuse("invalid_grant", "the code was issued to another client");
    }
    if params.get("redirect_uri") != Some(authorization.redirect_uri.as_str()) {
        return refuse(
            "invalid_grant",
            "redirect_uri is not the one of the authorization request",
        );
    }
    match verify(verifier, &authorization.code_challenge) {
        Ok(()) => {}
        Err(PkceError::MalformedVerifier) => {
            return refuse("invalid_request", &PkceError::MalformedVerifier.to_string());
        }
        Err(error) => {
            state.record(
                Event::new(EventKind::Refused, peer)
                    .client(&client.client_id)
                    .refused("token: the PKCE verifier does not match"),
            );
            return refuse("invalid_grant", &error.to_string());
        }
    }
    let refresh = RefreshGrant {
        scope: authorization.scope.clone(),
        resource: authorization.resource.clone(),
        claims: grant.person.claims.clone(),
    };
    let Ok(refresh_secret) = new_secret() else {
        return unavailable(&"no randomness");
    };
    let refresh_secret = with_sealed(refresh_secret, grant.person.upstream_refresh.as_deref());
    let now = State::now();
    let record = RefreshToken {
        token_hash: hash(&refresh_secret),
        family: grant.family.clone(),
        client_id: client.client_id.clone(),
        subject: grant.person.subject.clone(),
        grant: serde_json::to_value(&refresh).unwrap_or(Value::Null),
        issued_at: now,
        expires_at: now + State::seconds(state.config.refresh_token_ttl),
    };
    let offers_refresh = client.allows_grant(GrantType::RefreshToken);
    if offers_refresh
        && let Err(error) = state
            .store
            .put_refresh(&record, state.config.families_per_subject)
            .await
    {
        return unavailable(&error);
    }
    if client.kind == ClientKind::Registered
        && let Err(error) = state.store.touch_client(&client.client_id, now).await
    {
        tracing::warn!(%error, "a client's last use could not be noted");
    }
    let answer = tokens_answer(
        state,
        client,
        &grant.person.subject,
        &refresh,
        offers_refresh.then_some(refresh_secret.as_str()),
    )
    .await;
    if answer.status().is_success() {
        state.record(
            Event::new(EventKind::TokenIssued, peer)
                .client(&client.client_id)
                .subject(&grant.person.subject),
        );
    }
    answer
}

async fn refresh_token(state: &State, client: &Client, params: &Params, peer: IpAddr) -> Reply {
    let Some(presented) = params.get("refresh_token") else {
        return refuse("invalid_request", "refresh_token is required");
    };
    // A login that kept the provider's refresh token asks the provider first:
    // the person must still have access there.
    let upstream = match presented.split_once('.') {
        None => None,
        Some((_, sealed)) => match state.sealer.open(sealed) {
            Some(token) => Some(token),
            None => return refuse("invalid_grant", UNKNOWN_REFRESH),
        },
    };
    let (fresh_claims, next_upstream) = match &upstream {
        None => (None, None),
        Some(token) => match state.upstream.refresh(token).await {
            Ok(login) => (Some(login.claims), login.refresh_token),
            Err(RefreshFailure::Unavailable(error)) => {
                tracing::warn!(%error, "a refresh could not be checked at the identity provider");
                return oauth_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "temporarily_unavailable",
                    "the identity provider cannot be reached; retry shortly",
                );
            }
            Err(RefreshFailure::Refused(why)) => {
                return end_family(state, presented, peer, &why).await;
            }
        },
    };
    let Ok(next) = new_secret() else {
        return unavailable(&"no randomness");
    };
    let sealed_next = next_upstream.and_then(|token| state.sealer.seal(&token));
    let next = with_sealed(next, sealed_next.as_deref());
    let rotation = match state
        .store
        .rotate_refresh(&hash(presented), &hash(&next), State::now())
        .await
    {
        Ok(rotation) => rotation,
        Err(error) => return unavailable(&error),
    };
    let record = match rotation {
        Rotation::Rotated(record) => record,
        Rotation::Reused(record) => {
            state.record(
                Event::new(EventKind::RefreshReused, peer)
                    .client(&record.client_id)
                    .subject(&record.subject)
                    .refused("a replaced refresh token was presented; its family is revoked"),
            );
            return refuse("invalid_grant", "the refresh token was already used");
        }
        Rotation::Missing => return refuse("invalid_grant", UNKNOWN_REFRESH),
    };
    if record.client_id != client.client_id {
        // Another client holds this client's token: treat it as stolen.
        return revoke_and_refuse(
            state,
            &record,
            EventKind::RefreshReused,
            peer,
            "a refresh token was presented by another client; its family is revoked",
            "the refresh token was issued to another client",
        )
        .await;
    }
    let Ok(mut grant) = serde_json::from_value::<RefreshGrant>(record.grant.clone()) else {
        return unavailable(&"a stored refresh token cannot be read");
    };
    if let Some(claims) = fresh_claims {
        if claims
            .get("sub")
            .is_some_and(|sub| sub.as_str() != Some(record.subject.as_str()))
        {
            return revoke_and_refuse(
                state,
                &record,
                EventKind::Refused,
                peer,
                "the identity provider answered the refresh for another person",
                "the identity provider no longer accepts this sign-in",
            )
            .await;
        }
        // The provider's claims now (its roles may have changed), when it gave any.
        if claims.contains_key("sub") {
            match keep_claims(
                &claims,
                &state.config.upstream.claims,
                &state.config.role_claim,
            ) {
                Ok(kept) => grant.claims = kept,
                Err(error) => tracing::warn!(%error, "a refresh keeps the claims of its login"),
            }
        }
    }
    if let Some(requested) = params.get("scope") {
        let offered: Vec<String> = grant.scope.split(' ').map(str::to_owned).collect();
        match granted_scope(&offered, Some(requested)) {
            Some(scope) => grant.scope = scope,
            None => return refuse("invalid_scope", "a requested scope was not granted"),
        }
    }
    let answer = tokens_answer(state, client, &record.subject, &grant, Some(&next)).await;
    if answer.status().is_success() {
        let event = Event::new(EventKind::Refreshed, peer)
            .client(&client.client_id)
            .subject(&record.subject);
        state.record(if upstream.is_some() {
            event.detail("checked at the identity provider")
        } else {
            event
        });
    }
    answer
}

/// Why a refresh token is refused when the store does not know it.
const UNKNOWN_REFRESH: &str = "the refresh token is unknown, revoked or expired";

/// `secret`, with the sealed provider refresh token after a `.` when there is one.
fn with_sealed(secret: String, sealed: Option<&str>) -> String {
    match sealed {
        Some(sealed) => format!("{secret}.{sealed}"),
        None => secret,
    }
}

/// Revokes `record`'s family and refuses with `invalid_grant`, recording an
/// event of `kind` that says `why`.
async fn revoke_and_refuse(
    state: &State,
    record: &RefreshToken,
    kind: EventKind,
    peer: IpAddr,
    why: &str,
    description: &str,
) -> Reply {
    if let Err(error) = state.store.revoke_family(&record.family).await {
        tracing::warn!(%error, "a refresh family could not be revoked");
    }
    state.record(
        Event::new(kind, peer)
            .client(&record.client_id)
            .subject(&record.subject)
            .refused(why),
    );
    refuse("invalid_grant", description)
}

/// The provider refused to refresh the login behind `presented`: its family
/// ends (found by rotating it once more), and the refresh is refused.
async fn end_family(state: &State, presented: &str, peer: IpAddr, why: &str) -> Reply {
    let Ok(throwaway) = new_secret() else {
        return unavailable(&"no randomness");
    };
    let rotation = state
        .store
        .rotate_refresh(&hash(presented), &hash(&throwaway), State::now())
        .await;
    match rotation {
        Ok(Rotation::Rotated(record)) => {
            revoke_and_refuse(
                state,
                &record,
                EventKind::Refused,
                peer,
                &format!("refresh: {why}; the family is revoked"),
                "the identity provider no longer accepts this sign-in",
            )
            .await
        }
        // A replaced token (whose provider token the provider refused, having
        // rotated it): reuse, as without the provider.
        Ok(Rotation::Reused(record)) => {
            state.record(
                Event::new(EventKind::RefreshReused, peer)
                    .client(&record.client_id)
                    .subject(&record.subject)
                    .refused("a replaced refresh token was presented; its family is revoked"),
            );
            refuse("invalid_grant", "the refresh token was already used")
        }
        Ok(Rotation::Missing) => refuse("invalid_grant", UNKNOWN_REFRESH),
        Err(error) => unavailable(&error),
    }
}

async fn client_credentials(
    state: &State,
    client: &Client,
    params: &Params,
    peer: IpAddr,
) -> Reply {
    if client.kind != ClientKind::Configured {
        return refuse(
            "unauthorized_client",
            "only configured confidential clients may use client_credentials",
        );
    }
    let Some(scope) = granted_scope(&state.config.scopes, params.get("scope")) else {
        return refuse("invalid_scope", "a requested scope is not offered");
    };
    let subject = format!("client:{}", client.client_id);
    let grant = RefreshGrant {
        scope,
        resource: state.site.resource.clone(),
        claims: roles_at(&state.config.role_claim, &client.roles),
    };
    let answer = tokens_answer(state, client, &subject, &grant, None).await;
    if answer.status().is_success() {
        state.record(
            Event::new(EventKind::ClientCredentials, peer)
                .client(&client.client_id)
                .subject(&subject),
        );
    }
    answer
}

/// Signs an access token for `subject` and answers it, with `refresh` when
/// one was issued.
async fn tokens_answer(
    state: &State,
    client: &Client,
    subject: &str,
    grant: &RefreshGrant,
    refresh: Option<&str>,
) -> Reply {
    let token = match sign_access_token(state, client, subject, grant).await {
        Ok(token) => token,
        Err(reply) => return reply,
    };
    let mut answer = json!({
        "access_token": token,
        "token_type": "Bearer",
        "expires_in": state.config.access_token_ttl,
        "scope": grant.scope,
    });
    if let (Some(refresh), Value::Object(map)) = (refresh, &mut answer) {
        map.insert("refresh_token".into(), refresh.into());
    }
    json_reply(StatusCode::OK, &answer)
}

async fn sign_access_token(
    state: &State,
    client: &Client,
    subject: &str,
    grant: &RefreshGrant,
) -> Result<String, Reply> {
    let key = state
        .keys
        .signing_key()
        .await
        .map_err(|error| unavailable(&error))?;
    let jti = random_text(16).map_err(|error| unavailable(&error))?;
    let empty = Map::new();
    let carried = if grant.claims.is_empty() {
        &empty
    } else {
        &grant.claims
    };
    let claims = AccessToken {
        issuer: &state.site.issuer,
        subject,
        resource: &grant.resource,
        client_id: &client.client_id,
        scope: &grant.scope,
        issued_at: State::now().unix_timestamp(),
        ttl_seconds: state.config.access_token_ttl,
        carried,
    }
    .claims(jti);
    let mut header = Header::new(Algorithm::ES256);
    header.typ = Some("at+jwt".to_owned());
    header.kid = Some(key.kid.clone());
    jsonwebtoken::encode(&header, &claims, &key.encoding).map_err(|error| unavailable(&error))
}
