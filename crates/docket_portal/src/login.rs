//! `GET /portal/login`: starts a login. A fresh `state` and PKCE verifier,
//! the login kept in the store under the state's hash (so the callback may
//! land on any replica), the state in a short-lived cookie (so only this
//! browser may finish it), and the browser sent to Docket's authorization
//! server.

use http::StatusCode;
use time::OffsetDateTime;

use crate::cookie::{self, LOGIN_COOKIE};
use crate::reply::{Reply, message, redirect};
use crate::secret;
use crate::state::State;
use crate::store::{PendingLogin, StoreError};

/// The portal path to come back to: `return_to` when it is a path under
/// `/portal` that cannot be read as another origin, else `/portal`.
#[must_use]
pub fn safe_return_to(return_to: Option<&str>) -> String {
    match return_to {
        Some(path)
            if (path == "/portal" || path.starts_with("/portal/"))
                && path.len() <= 1024
                && !path.contains("//")
                && !path.contains('\\')
                && path.bytes().all(|byte| byte.is_ascii_graphic()) =>
        {
            path.to_owned()
        }
        _ => "/portal".to_owned(),
    }
}

pub(crate) async fn handle(state: &State, query: &str, now: OffsetDateTime) -> Reply {
    let return_to = form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "return_to")
        .map(|(_, value)| value.into_owned());
    let return_to = safe_return_to(return_to.as_deref());
    let (login_state, verifier) = match (secret::random_secret(), secret::random_secret()) {
        (Ok(login_state), Ok(verifier)) => (login_state, verifier),
        (Err(error), _) | (_, Err(error)) => {
            tracing::error!(%error, "no randomness for a portal login");
            return unavailable();
        }
    };
    let login_ttl = state.config.login_ttl;
    let login = PendingLogin {
        state_hash: secret::hash(&login_state),
        verifier: verifier.clone(),
        return_to,
        created_at: now,
        expires_at: now + login_ttl,
    };
    match state
        .store
        .begin_login(&login, state.config.max_pending_logins)
        .await
    {
        Ok(()) => {}
        Err(StoreError::Full(_)) => {
            return message(
                StatusCode::SERVICE_UNAVAILABLE,
                "Too many logins",
                "Too many logins are in progress. Try again in a few minutes.",
            );
        }
        Err(error) => {
            tracing::warn!(%error, "a portal login could not be kept");
            return unavailable();
        }
    }
    let config = &state.config;
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("response_type", "code")
        .append_pair("client_id", &config.client_id)
        .append_pair("redirect_uri", &config.redirect_uri())
        .append_pair("code_challenge", &secret::pkce_challenge(&verifier))
        .append_pair("code_challenge_method", "S256")
        .append_pair("state", &login_state)
        .append_pair("resource", &format!("{}/mcp", config.base_url))
        .finish();
    let location = format!("{}/oauth/authorize?{query}", config.base_url);
    let cookie = cookie::set(
        LOGIN_COOKIE,
        &login_state,
        login_ttl.as_secs(),
        !config.insecure_loopback(),
    );
    redirect(&location, &[cookie])
}

fn unavailable() -> Reply {
    message(
        StatusCode::SERVICE_UNAVAILABLE,
        "Login unavailable",
        "The login could not be started. Try again shortly.",
    )
}
