//! The consent page and `POST /oauth/consent`.
//!
//! The page names the client (its name, id and the host it returns to) and
//! offers approve and deny. It is bound to the browser that signed in: a
//! random cookie (HttpOnly, SameSite=Lax, Path=/oauth under the issuer's
//! path, Secure unless Docket runs on http loopback) whose hash is in the
//! pending record, and a CSRF token in the form whose hash is there too. The POST takes the record once,
//! checks both, and on approval stores the consent and issues the code.

use std::net::IpAddr;

use askama::Template;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Map, Value};

use crate::clients::ClientKind;
use crate::events::{Event, EventKind};
use crate::flow::{
    Authorization, Pending, SignedIn, browser_params, failed_page, issue_code, keep_pending,
    redirect_error, take_pending,
};
use crate::reply::{Reply, error_page, page};
use crate::state::State;
use crate::store::StoreError;
use crate::tokens::{hash, new_secret, same_secret};

/// The consent page.
#[derive(Template)]
#[template(path = "consent.html")]
struct ConsentPage<'a> {
    client_name: &'a str,
    client_id: &'a str,
    redirect_host: &'a str,
    person: &'a str,
    notes: &'a [&'a str],
    action: &'a str,
    pending: &'a str,
    csrf: &'a str,
}

/// What the page warns about a client Docket has not verified.
fn consent_notes(kind: ClientKind, client_id: &str, redirect_host: &str) -> Vec<&'static str> {
    let mut notes = Vec::new();
    match kind {
        ClientKind::Configured => {}
        ClientKind::Registered => notes.push(
            "Docket has not verified this application: it registered itself. Allow it only if you started this sign-in from it.",
        ),
        ClientKind::Document => {
            notes.push(
                "Docket has not verified this application: it describes itself at the address shown as its client id. Allow it only if you started this sign-in from it.",
            );
            let document_host = reqwest::Url::parse(client_id)
                .ok()
                .and_then(|url| url.host_str().map(str::to_owned));
            let loopback = crate::config::is_loopback_host(redirect_host);
            if !loopback && document_host.as_deref() != Some(redirect_host) {
                notes.push(
                    "It returns to another host than the one that describes it.",
                );
            }
        }
    }
    notes
}

/// The cookie's path: `/oauth` under the issuer's own path (an embedder may
/// mount Docket under a prefix).
fn cookie_path(state: &State) -> String {
    let prefix = reqwest::Url::parse(&state.site.issuer)
        .map(|url| url.path().trim_end_matches('/').to_owned())
        .unwrap_or_default();
    format!("{prefix}/oauth")
}

/// The cookie that binds the consent of `pending` to this browser.
fn cookie_name(pending: &str) -> String {
    format!("docket_consent_{}", &hash(pending)[..16])
}

/// Who the page says is signed in.
fn shown_name(claims: &Map<String, Value>, subject: &str) -> String {
    ["email", "preferred_username", "name"]
        .iter()
        .find_map(|name| claims.get(*name).and_then(Value::as_str))
        .unwrap_or(subject)
        .to_owned()
}

/// Shows the consent page for a signed-in person.
pub(crate) async fn ask(state: &State, authorization: Authorization, person: SignedIn) -> Reply {
    let client = match state
        .clients
        .find(state.store.as_ref(), &authorization.client_id)
        .await
    {
        Ok(client) => client,
        Err(error) => {
            tracing::warn!(%error, "the client went away during its sign-in");
            return failed_page();
        }
    };
    let (Ok(pending_id), Ok(cookie), Ok(csrf)) = (new_secret(), new_secret(), new_secret()) else {
        return failed_page();
    };
    let redirect_host = reqwest::Url::parse(&authorization.redirect_uri)
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned))
        .unwrap_or_else(|| {
            authorization
                .redirect_uri
                .split(':')
                .next()
                .unwrap_or_default()
                .to_owned()
        });
    let shown_person = shown_name(&person.claims, &person.subject);
    let pending = Pending::Consent {
        authorization,
        person,
        cookie_hash: hash(&cookie),
        csrf_hash: hash(&csrf),
    };
    match keep_pending(state, &pending_id, &pending).await {
        Ok(()) => {}
        Err(StoreError::Full(_)) => {
            return error_page(
                StatusCode::SERVICE_UNAVAILABLE,
                "Too many sign-ins",
                "Too many sign-ins are in progress. Try again shortly.",
            );
        }
        Err(_) => return failed_page(),
    }
    let notes = consent_notes(client.kind, &client.client_id, &redirect_host);
    let action = format!("{}/oauth/consent", state.site.issuer);
    let mut reply = page(
        StatusCode::OK,
        &ConsentPage {
            client_name: client.display_name(),
            client_id: &client.client_id,
            redirect_host: &redirect_host,
            person: &shown_person,
            notes: &notes,
            action: &action,
            pending: &pending_id,
            csrf: &csrf,
        },
    );
    let secure = if state.site.is_http_loopback() {
        ""
    } else {
        "; Secure"
    };
    let cookie = format!(
        "{}={cookie}; Path={}; Max-Age={}; HttpOnly; SameSite=Lax{secure}",
        cookie_name(&pending_id),
        cookie_path(state),
        state.config.login_ttl
    );
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        reply.headers_mut().append(header::SET_COOKIE, value);
    }
    reply
}

/// The value of the cookie `name`, if the request carries it.
fn cookie_value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key == name).then_some(value)
        })
}

pub(crate) async fn handle(state: &State, headers: &HeaderMap, body: &[u8], peer: IpAddr) -> Reply {
    let refused = |why: &str| {
        state.record(Event::new(EventKind::Refused, peer).refused(format!("consent: {why}")));
        error_page(
            StatusCode::BAD_REQUEST,
            "Consent failed",
            "This consent is unknown, has expired, was already answered or came from another browser. Start again from your application.",
        )
    };
    let params = match browser_params(body, "Consent failed") {
        Ok(params) => params,
        Err(reply) => return *reply,
    };
    let (Some(pending_id), Some(csrf), Some(decision)) = (
        params.get("pending"),
        params.get("csrf"),
        params.get("decision"),
    ) else {
        return refused("the form is incomplete");
    };
    let Some(cookie) = cookie_value(headers, &cookie_name(pending_id)) else {
        return refused("no consent cookie");
    };
    let pending = match take_pending(state, pending_id).await {
        Ok(pending) => pending,
        Err(reply) => return reply,
    };
    let Some(Pending::Consent {
        authorization,
        person,
        cookie_hash,
        csrf_hash,
    }) = pending
    else {
        return refused("unknown, expired or answered consent");
    };
    if !same_secret(&hash(cookie), &cookie_hash) || !same_secret(&hash(csrf), &csrf_hash) {
        return refused("the cookie or the form token does not match");
    }
    let mut reply = match decision {
        "approve" => {
            if let Err(error) = state
                .store
                .put_consent(&person.subject, &authorization.client_id, State::now())
                .await
            {
                tracing::warn!(%error, "a consent could not be stored");
                return failed_page();
            }
            state.record(
                Event::new(EventKind::Consent, peer)
                    .client(&authorization.client_id)
                    .subject(&person.subject),
            );
            issue_code(state, authorization, person, peer, true).await
        }
        _ => {
            state.record(
                Event::new(EventKind::Consent, peer)
                    .client(&authorization.client_id)
                    .subject(&person.subject)
                    .refused("the person declined"),
            );
            redirect_error(
                state,
                &authorization.redirect_uri,
                Some(&authorization.state),
                "access_denied",
                "the person declined",
                true,
            )
        }
    };
    let expired = format!(
        "{}=; Path={}; Max-Age=0; HttpOnly; SameSite=Lax",
        cookie_name(pending_id),
        cookie_path(state)
    );
    if let Ok(value) = HeaderValue::from_str(&expired) {
        reply.headers_mut().append(header::SET_COOKIE, value);
    }
    reply
}
