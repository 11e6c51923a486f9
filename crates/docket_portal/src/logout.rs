//! `POST /portal/logout`: ends the session (its row, so every replica knows
//! at once) and clears the cookie. A CSRF-checked form, so another site
//! cannot log a person out either.

use time::OffsetDateTime;

use crate::cookie::{self, SESSION_COOKIE};
use crate::form;
use crate::reply::{Reply, message, redirect};
use crate::session::signed_in;
use crate::state::State;

pub(crate) async fn handle(
    state: &State,
    headers: &http::HeaderMap,
    body: &[u8],
    now: OffsetDateTime,
) -> Reply {
    let signed_in = match signed_in(state.store.as_ref(), headers, now).await {
        Ok(Some(signed_in)) => signed_in,
        Ok(None) => return redirect("/portal/login", &[]),
        Err(error) => {
            tracing::warn!(%error, "a portal session could not be read");
            return message(
                http::StatusCode::SERVICE_UNAVAILABLE,
                "Unavailable",
                "The portal cannot reach its store. Try again shortly.",
            );
        }
    };
    if let Err(refused) = form::checked(&signed_in, body) {
        return refused.reply();
    }
    if let Err(error) = state.store.end_session(&signed_in.session.id_hash).await {
        tracing::warn!(%error, "a portal session could not be ended");
        return message(
            http::StatusCode::SERVICE_UNAVAILABLE,
            "Unavailable",
            "The session could not be ended. Try again shortly.",
        );
    }
    tracing::info!(subject = signed_in.session.subject, "portal logout");
    let cleared = cookie::clear(SESSION_COOKIE, !state.config.insecure_loopback());
    redirect("/portal/signed-out", &[cleared])
}
