//! `GET /oauth/authorize`: checks the client's request and sends the browser
//! to the team's provider.
//!
//! An unknown client, or a redirect URI the client did not register, is the
//! error page: redirecting there would be an open redirect. Every other
//! refusal goes back to the client with `error`, `state` and `iss`. What is
//! accepted: `response_type=code`, PKCE `S256`, a `state`, a `resource` that is
//! this server, scopes this server offers.

use std::net::IpAddr;

use http::StatusCode;

use crate::clients::LookupError;
use crate::config::{GrantType, is_scope_byte};
use crate::events::{Event, EventKind};
use crate::flow::{
    Authorization, Pending, browser_params, failed_page, keep_pending, redirect_error,
};
use crate::pkce::{challenge_of, check_challenge};
use crate::reply::{Reply, error_page, redirect};
use crate::state::State;
use crate::store::StoreError;
use crate::tokens::new_secret;

/// The scope a request asked for, checked against the configured ones;
/// `None` when it names one this server does not offer. No scope means all of
/// them; `offline_access` is accepted and dropped.
pub(crate) fn granted_scope(offered: &[String], requested: Option<&str>) -> Option<String> {
    let Some(requested) = requested else {
        return Some(offered.join(" "));
    };
    let mut granted: Vec<&str> = Vec::new();
    for scope in requested.split(' ').filter(|scope| !scope.is_empty()) {
        if !scope.bytes().all(is_scope_byte) {
            return None;
        }
        if scope == "offline_access" {
            continue;
        }
        if !offered.iter().any(|offer| offer == scope) {
            return None;
        }
        if !granted.contains(&scope) {
            granted.push(scope);
        }
    }
    if granted.is_empty() {
        return Some(offered.join(" "));
    }
    Some(granted.join(" "))
}

pub(crate) async fn handle(state: &State, query: &str, peer: IpAddr) -> Reply {
    let params = match browser_params(query.as_bytes(), "Invalid sign-in request") {
        Ok(params) => params,
        Err(reply) => return *reply,
    };
    let refuse = |why: &str| {
        state.record(Event::new(EventKind::Refused, peer).refused(format!("authorize: {why}")));
    };
    let Some(client_id) = params.get("client_id") else {
        refuse("no client_id");
        return error_page(
            StatusCode::BAD_REQUEST,
            "Invalid sign-in request",
            "The application did not say who it is (client_id).",
        );
    };
    let client = match state.clients.find(state.store.as_ref(), client_id).await {
        Ok(client) => client,
        Err(LookupError::Unknown) => {
            refuse("unknown client");
            return error_page(
                StatusCode::BAD_REQUEST,
                "Unknown application",
                "This application is not registered with Docket. Start again from the application.",
            );
        }
        Err(LookupError::Document(error)) => {
            refuse("metadata document refused");
            return error_page(
                StatusCode::BAD_REQUEST,
                "Unknown application",
                &error.to_string(),
            );
        }
        Err(LookupError::Store(error)) => {
            tracing::warn!(%error, "the authorization store failed");
            return failed_page();
        }
    };
    let redirect_uri = match params.get("redirect_uri") {
        Some(uri) => uri.to_owned(),
        None if client.redirect_uris.len() == 1 && !client.native => {
            client.redirect_uris[0].clone()
        }
        None => {
            refuse("no redirect_uri");
            return error_page(
                StatusCode::BAD_REQUEST,
                "Invalid sign-in request",
                "The application did not say where to return (redirect_uri).",
            );
        }
    };
    if !client.allows_redirect(&redirect_uri) {
        state.record(
            Event::new(EventKind::Refused, peer)
                .client(&client.client_id)
                .refused("authorize: unregistered redirect_uri"),
        );
        return error_page(
            StatusCode::BAD_REQUEST,
            "Invalid sign-in request",
            "The address this request returns to is not one the application registered.",
        );
    }
    // From here on the redirect URI is the client's own: refusals go back there.
    let client_state = params.get("state");
    let back = |error: &str, description: &str| {
        state.record(
            Event::new(EventKind::Refused, peer)
                .client(&client.client_id)
                .refused(format!("authorize: {error}: {description}")),
        );
        redirect_error(
            state,
            &redirect_uri,
            client_state,
            error,
            description,
            false,
        )
    };
    if params.get("response_type") != Some("code") {
        return back("unsupported_response_type", "response_type must be code");
    }
    if !client.allows_grant(GrantType::AuthorizationCode) {
        return back(
            "unauthorized_client",
            "this client may not use the authorization code grant",
        );
    }
    if let Err(error) = check_challenge(
        params.get("code_challenge"),
        params.get("code_challenge_method"),
    ) {
        return back("invalid_request", &error.to_string());
    }
    let Some(client_state) = client_state else {
        return back("invalid_request", "state is required");
    };
    let Some(resource) = params.get("resource") else {
        return back(
            "invalid_target",
            "resource is required: this server's MCP endpoint (RFC 8707)",
        );
    };
    if !state.is_own_resource(resource) {
        return back(
            "invalid_target",
            "resource is not this server's MCP endpoint",
        );
    }
    let Some(scope) = granted_scope(&state.config.scopes, params.get("scope")) else {
        return back("invalid_scope", "a requested scope is not offered");
    };
    let (Ok(pending_id), Ok(verifier), Ok(nonce)) = (new_secret(), new_secret(), new_secret())
    else {
        return failed_page();
    };
    let challenge = challenge_of(&verifier);
    let pending = Pending::Login {
        authorization: Authorization {
            client_id: client.client_id.clone(),
            redirect_uri: redirect_uri.clone(),
            state: client_state.to_owned(),
            code_challenge: params.get("code_challenge").unwrap_or_default().to_owned(),
            scope,
            resource: state.site.resource.clone(),
        },
        verifier,
        nonce: nonce.clone(),
    };
    let upstream_url = match state
        .upstream
        .authorization_url(&pending_id, &nonce, &challenge)
        .await
    {
        Ok(url) => url,
        Err(error) => {
            tracing::warn!(%error, "the identity provider cannot be used");
            return back(
                "temporarily_unavailable",
                "the identity provider cannot be reached; try again shortly",
            );
        }
    };
    match keep_pending(state, &pending_id, &pending).await {
        Ok(()) => redirect(&upstream_url, false),
        Err(StoreError::Full(_)) => back(
            "temporarily_unavailable",
            "too many sign-ins are in progress; try again shortly",
        ),
        Err(_) => failed_page(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_offered_ones() {
        let offered = vec!["mcp".to_owned(), "admin".to_owned()];
        assert_eq!(granted_scope(&offered, None).as_deref(), Some("mcp admin"));
        assert_eq!(granted_scope(&offered, Some("mcp")).as_deref(), Some("mcp"));
        assert_eq!(
            granted_scope(&offered, Some("offline_access")).as_deref(),
            Some("mcp admin")
        );
        assert_eq!(granted_scope(&offered, Some("mcp other")), None);
    }
}
