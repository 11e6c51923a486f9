//! `POST /oauth/revoke` (RFC 7009): a refresh token revokes its whole family;
//! an unknown token is answered `200` all the same (§2.2). An access token is
//! not revoked: it is answered `200` and lives at most `access_token_ttl`
//! (ten minutes by default), as it is checked by signature alone. A login
//! whose refreshes are checked at the provider has the provider's refresh
//! token revoked there too (best effort, RFC 7009 at the provider).

use std::net::IpAddr;

use http::{HeaderMap, StatusCode};
use serde_json::json;

use crate::events::{Event, EventKind};
use crate::params::Params;
use crate::reply::{Reply, json as json_reply, oauth_error};
use crate::state::{State, unavailable};
use crate::tokens::hash;

pub(crate) async fn handle(state: &State, headers: &HeaderMap, body: &[u8], peer: IpAddr) -> Reply {
    let params = match Params::parse(body) {
        Ok(params) => params,
        Err(error) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                &error.to_string(),
            );
        }
    };
    let client = match state.authenticate_client(headers, &params, peer).await {
        Ok(client) => client,
        Err(reply) => return reply,
    };
    let Some(token) = params.get("token") else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "token is required",
        );
    };
    match state.store.revoke_refresh(&hash(token)).await {
        Ok(Some(_family)) => {
            state.record(
                Event::new(EventKind::Revoked, peer)
                    .client(&client.client_id)
                    .detail("a refresh-token family"),
            );
            // A login checked at the provider ends there too.
            let upstream = token
                .split_once('.')
                .and_then(|(_, sealed)| state.sealer.open(sealed));
            if let Some(upstream) = upstream
                && let Err(error) = state.upstream.revoke(&upstream).await
            {
                tracing::warn!(%error, "the provider's refresh token could not be revoked");
            }
        }
        Ok(None) => {}
        Err(error) => return unavailable(&error),
    }
    json_reply(StatusCode::OK, &json!({}))
}
