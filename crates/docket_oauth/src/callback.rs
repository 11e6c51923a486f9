//! `GET /oauth/callback`: the team's provider sends the browser back here.
//!
//! The pending authorization named by `state` is taken once (an unknown,
//! expired or replayed `state` is the error page: nothing says where to send
//! the browser). An `iss` that is not the provider's is a mix-up (RFC 9207)
//! and ends the sign-in, as does a missing `iss` from a provider that says
//! it sends one. Then the code is exchanged and the ID token checked
//! ([`crate::upstream`]); a person who consented to the client before gets
//! the code at once, anyone else the consent page.

use std::net::IpAddr;

use http::StatusCode;

use crate::consent;
use crate::events::{Event, EventKind};
use crate::flow::{
    Pending, SignedIn, browser_params, failed_page, issue_code, redirect_error, take_pending,
};
use crate::reply::{Reply, error_page};
use crate::state::State;
use crate::upstream::keep_claims;

pub(crate) async fn handle(state: &State, query: &str, peer: IpAddr) -> Reply {
    let params = match browser_params(query.as_bytes(), "Sign-in failed") {
        Ok(params) => params,
        Err(reply) => return *reply,
    };
    let refused = |why: &str| {
        state.record(Event::new(EventKind::Refused, peer).refused(format!("callback: {why}")));
        error_page(
            StatusCode::BAD_REQUEST,
            "Sign-in failed",
            "This sign-in is unknown, has expired or was already used. Start again from your application.",
        )
    };
    let Some(pending_id) = params.get("state") else {
        return refused("no state");
    };
    let pending = match take_pending(state, pending_id).await {
        Ok(pending) => pending,
        Err(reply) => return reply,
    };
    let Some(Pending::Login {
        authorization,
        verifier,
        nonce,
    }) = pending
    else {
        return refused("unknown, expired or replayed state");
    };
    let client_id = authorization.client_id.clone();
    let discovery = match state.upstream.discovery().await {
        Ok(discovery) => discovery,
        Err(error) => {
            tracing::warn!(%error, "the identity provider cannot be used");
            return failed_page();
        }
    };
    let issuer_matches = match params.get("iss") {
        Some(iss) => iss.trim_end_matches('/') == discovery.issuer.trim_end_matches('/'),
        None => !discovery.authorization_response_iss_parameter_supported,
    };
    if !issuer_matches {
        state.record(
            Event::new(EventKind::Refused, peer)
                .client(&client_id)
                .refused("callback: iss is missing or not the identity provider (mix-up)"),
        );
        return error_page(
            StatusCode::BAD_REQUEST,
            "Sign-in failed",
            "The answer did not come from Docket's identity provider. Start again from your application.",
        );
    }
    if params.get("error").is_some() {
        state.record(
            Event::new(EventKind::Login, peer)
                .client(&client_id)
                .refused("the identity provider refused the sign-in"),
        );
        return redirect_error(
            state,
            &authorization.redirect_uri,
            Some(&authorization.state),
            "access_denied",
            "the sign-in at the identity provider did not complete",
            false,
        );
    }
    let Some(code) = params.get("code") else {
        return refused("no code");
    };
    let login = match state.upstream.login(code, &verifier, &nonce).await {
        Ok(login) => keep_claims(
            &login.claims,
            &state.config.upstream.claims,
            &state.config.role_claim,
        )
        .map(|claims| (claims, login.refresh_token)),
        Err(error) => Err(error),
    };
    let (claims, upstream_refresh) = match login {
        Ok(login) => login,
        Err(error) => {
            state.record(
                Event::new(EventKind::Login, peer)
                    .client(&client_id)
                    .refused(error.to_string()),
            );
            return error_page(
                StatusCode::BAD_GATEWAY,
                "Sign-in failed",
                "The identity provider's answer could not be accepted. Start again from your application.",
            );
        }
    };
    let subject = claims
        .get("sub")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    // Kept sealed, so that each refresh of this login asks the provider again.
    let upstream_refresh = upstream_refresh.and_then(|token| {
        let sealed = state.sealer.seal(&token);
        if sealed.is_none() {
            tracing::warn!(
                "the provider's refresh token is too long to keep; this login's refreshes are not checked at the provider"
            );
        }
        sealed
    });
    state.record(
        Event::new(EventKind::Login, peer)
            .client(&client_id)
            .subject(&subject),
    );
    let person = SignedIn {
        subject,
        claims,
        upstream_refresh,
    };
    match state.store.consented(&person.subject, &client_id).await {
        Ok(true) => issue_code(state, authorization, person, peer, false).await,
        Ok(false) => consent::ask(state, authorization, person).await,
        Err(error) => {
            tracing::warn!(%error, "the authorization store failed");
            failed_page()
        }
    }
}
