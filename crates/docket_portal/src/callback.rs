//! `GET /portal/callback`: the authorization server's answer. The `state`
//! must be the one this browser's login cookie carries and name a login in
//! flight (taken once); the code is exchanged with the login's PKCE verifier
//! for the person, and a session begins: a new random id in the cookie, only
//! its hash in the store.

use http::StatusCode;
use subtle::ConstantTimeEq as _;
use time::OffsetDateTime;

use crate::authority::{Authority, LoginError};
use crate::cookie::{self, LOGIN_COOKIE, SESSION_COOKIE};
use crate::reply::{Reply, message, redirect};
use crate::secret;
use crate::state::State;
use crate::store::PortalSession;

/// The most bytes of a code or an error description the callback reads.
const MAX_PARAMETER_BYTES: usize = 2048;

pub(crate) async fn handle(
    state: &State,
    headers: &http::HeaderMap,
    query: &str,
    authority: &dyn Authority,
    now: OffsetDateTime,
) -> Reply {
    let mut code = None;
    let mut login_state = None;
    let mut error = None;
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if value.len() > MAX_PARAMETER_BYTES {
            return refused("The login's answer was malformed.");
        }
        match key.as_ref() {
            "code" => code = Some(value.into_owned()),
            "state" => login_state = Some(value.into_owned()),
            "error" => error = Some(value.into_owned()),
            _ => {}
        }
    }
    let secure = !state.config.insecure_loopback();
    let cleared = cookie::clear(LOGIN_COOKIE, secure);
    let Some(login_state) = login_state.filter(|value| secret::is_secret_shaped(value)) else {
        return refused("The login's answer was malformed.");
    };
    // The state must be this browser's: a link that lands someone else's
    // code here (login CSRF) finds no matching cookie.
    let cookie_state = headers
        .get_all(http::header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find_map(|text| cookie::find(text, LOGIN_COOKIE));
    let same_browser = cookie_state.is_some_and(|presented| {
        presented.len() == login_state.len()
            && bool::from(presented.as_bytes().ct_eq(login_state.as_bytes()))
    });
    if !same_browser {
        return refused("This login was not started in this browser. Start again.");
    }
    let login = match state
        .store
        .take_login(&secret::hash(&login_state), now)
        .await
    {
        Ok(Some(login)) => login,
        Ok(None) => return refused("This login has expired or was used. Start again."),
        Err(error) => {
            tracing::warn!(%error, "a portal login could not be read");
            return unavailable();
        }
    };
    if error.is_some() {
        return refused("The login was not approved.");
    }
    let Some(code) = code else {
        return refused("The login's answer carried no code.");
    };
    let person = match authority
        .exchange(&code, &login.verifier, &state.config.redirect_uri())
        .await
    {
        Ok(person) => person,
        Err(LoginError::NoPersona(why)) => {
            return message(StatusCode::FORBIDDEN, "No access", &why);
        }
        Err(LoginError::Refused(why)) => {
            tracing::info!(why, "a portal login's code was refused");
            return refused("The login was refused. Start again.");
        }
        Err(error) => {
            tracing::warn!(%error, "a portal login could not be completed");
            return unavailable();
        }
    };
    let id = match secret::random_secret() {
        Ok(id) => id,
        Err(error) => {
            tracing::error!(%error, "no randomness for a portal session");
            return unavailable();
        }
    };
    let session = PortalSession {
        id_hash: secret::hash(&id),
        subject: person.subject,
        display_name: person.display_name,
        roles: person.roles,
        administrator: person.administrator,
        created_at: now,
        expires_at: now + state.config.session_ttl,
    };
    if let Err(error) = state
        .store
        .create_session(&session, state.config.sessions_per_person)
        .await
    {
        tracing::warn!(%error, "a portal session could not be kept");
        return unavailable();
    }
    tracing::info!(subject = session.subject, "portal login");
    let session_cookie = cookie::set(
        SESSION_COOKIE,
        &id,
        state.config.session_ttl.as_secs(),
        secure,
    );
    redirect(&login.return_to, &[session_cookie, cleared])
}

fn refused(why: &str) -> Reply {
    message(StatusCode::BAD_REQUEST, "Login failed", why)
}

fn unavailable() -> Reply {
    message(
        StatusCode::SERVICE_UNAVAILABLE,
        "Login unavailable",
        "The login could not be completed. Try again shortly.",
    )
}
