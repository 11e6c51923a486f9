//! The authorization code flow as one type per step, each kept in the store
//! between requests so that any replica serves the next step:
//!
//! 1. [`Authorization`]: a checked `/authorize` request;
//! 2. [`Pending::Login`]: waiting for the provider's callback (keyed by the
//!    `state` Docket sent to the provider);
//! 3. [`Pending::Consent`]: waiting for the person's answer on the consent
//!    page (keyed by a random id in the form, bound to a cookie);
//! 4. [`CodeGrant`]: an issued code (keyed by the code's hash), redeemed once
//!    at `/token`, for a [`SignedIn`] person;
//! 5. [`RefreshGrant`]: what a refresh-token family's access tokens carry.

use std::net::IpAddr;

use http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::events::{Event, EventKind};
use crate::params::{Params, encode};
use crate::reply::{Reply, error_page, redirect};
use crate::state::State;
use crate::store::{Fetched, OnceKind, StoreError};
use crate::tokens::{hash, new_secret};

/// A checked `/authorize` request: the client, where it gets its answer, and
/// what it asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Authorization {
    pub(crate) client_id: String,
    pub(crate) redirect_uri: String,
    pub(crate) state: String,
    pub(crate) code_challenge: String,
    pub(crate) scope: String,
    pub(crate) resource: String,
}

/// A person signed in at the provider: their subject, the claims tokens
/// carry, and the provider's refresh token sealed ([`crate::tokens::Sealer`]),
/// when Docket keeps one to check refreshes with the provider.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct SignedIn {
    pub(crate) subject: String,
    pub(crate) claims: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) upstream_refresh: Option<String>,
}

/// An authorization in flight, one of its two waits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stage", rename_all = "snake_case")]
pub(crate) enum Pending {
    /// Sent to the provider; Docket's own PKCE verifier and nonce.
    Login {
        authorization: Authorization,
        verifier: String,
        nonce: String,
    },
    /// Signed in, waiting for consent; the cookie's and the form token's hashes.
    Consent {
        authorization: Authorization,
        person: SignedIn,
        cookie_hash: String,
        csrf_hash: String,
    },
}

impl Pending {
    pub(crate) fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    pub(crate) fn from_value(value: Value) -> Option<Self> {
        serde_json::from_value(value).ok()
    }
}

/// An issued code: what `/token` checks and what the tokens carry. `family`
/// is the refresh-token family the code's redemption starts, so that a
/// replayed code revokes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct CodeGrant {
    pub(crate) authorization: Authorization,
    pub(crate) person: SignedIn,
    pub(crate) family: String,
}

/// What a refresh-token family's access tokens carry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct RefreshGrant {
    pub(crate) scope: String,
    pub(crate) resource: String,
    pub(crate) claims: Map<String, Value>,
}

/// Takes the pending authorization `id` once: `None` when it is unknown,
/// expired, already taken or unreadable.
pub(crate) async fn take_pending(state: &State, id: &str) -> Result<Option<Pending>, Reply> {
    match state
        .store
        .take_once(OnceKind::Pending, id, State::now())
        .await
    {
        Ok(Fetched::Fresh(payload)) => Ok(Pending::from_value(payload)),
        Ok(Fetched::Replayed(_) | Fetched::Missing) => Ok(None),
        Err(error) => {
            tracing::warn!(%error, "the authorization store failed");
            Err(failed_page())
        }
    }
}

/// Keeps a pending authorization under `id` for `login_ttl`, within the cap.
pub(crate) async fn keep_pending(
    state: &State,
    id: &str,
    pending: &Pending,
) -> Result<(), StoreError> {
    let kept = state
        .store
        .put_once(
            OnceKind::Pending,
            id,
            &pending.to_value(),
            State::now() + State::seconds(state.config.login_ttl),
            state.config.max_pending,
        )
        .await;
    if let Err(error) = &kept
        && !matches!(error, StoreError::Full(_))
    {
        tracing::warn!(%error, "a pending authorization could not be stored");
    }
    kept
}

/// Decodes a query or form for a browser step; the error page when it breaks a bound.
pub(crate) fn browser_params(input: &[u8], title: &str) -> Result<Params, Box<Reply>> {
    Params::parse(input).map_err(|error| {
        Box::new(error_page(
            StatusCode::BAD_REQUEST,
            title,
            &error.to_string(),
        ))
    })
}

/// The client's redirect URI with `pairs` and `iss` added to its query.
pub(crate) fn client_redirect(state: &State, redirect_uri: &str, pairs: &[(&str, &str)]) -> String {
    let iss = state.site.issuer.as_str();
    let query = encode(pairs.iter().copied().chain([("iss", iss)]));
    let separator = if redirect_uri.contains('?') { '&' } else { '?' };
    format!("{redirect_uri}{separator}{query}")
}

/// Sends the browser back to the client with an error (RFC 6749 §4.1.2.1).
pub(crate) fn redirect_error(
    state: &State,
    authorization_redirect: &str,
    client_state: Option<&str>,
    error: &str,
    description: &str,
    after_post: bool,
) -> Reply {
    let mut pairs = vec![("error", error), ("error_description", description)];
    if let Some(client_state) = client_state {
        pairs.push(("state", client_state));
    }
    redirect(
        &client_redirect(state, authorization_redirect, &pairs),
        after_post,
    )
}

/// Issues a code for a signed-in, consenting person and sends the browser
/// back to the client with `code`, `state` and `iss`.
pub(crate) async fn issue_code(
    state: &State,
    authorization: Authorization,
    person: SignedIn,
    peer: IpAddr,
    after_post: bool,
) -> Reply {
    let (Ok(code), Ok(family)) = (new_secret(), new_secret()) else {
        return failed_page();
    };
    let now = State::now();
    let grant = CodeGrant {
        authorization,
        person,
        family,
    };
    let payload = serde_json::to_value(&grant).unwrap_or(Value::Null);
    let stored = state
        .store
        .put_once(
            OnceKind::Code,
            &hash(&code),
            &payload,
            now + State::seconds(state.config.code_ttl),
            state.config.max_pending,
        )
        .await;
    let authorization = &grant.authorization;
    match stored {
        Ok(()) => {}
        Err(StoreError::Full(_)) => {
            return redirect_error(
                state,
                &authorization.redirect_uri,
                Some(&authorization.state),
                "temporarily_unavailable",
                "too many sign-ins are in progress; try again shortly",
                after_post,
            );
        }
        Err(error) => {
            tracing::warn!(%error, "an authorization code could not be stored");
            return failed_page();
        }
    }
    if let Err(error) = state
        .store
        .touch_client(&authorization.client_id, now)
        .await
    {
        tracing::warn!(%error, "a client's last use could not be noted");
    }
    state.record(
        Event::new(EventKind::CodeIssued, peer)
            .client(&authorization.client_id)
            .subject(&grant.person.subject),
    );
    redirect(
        &client_redirect(
            state,
            &authorization.redirect_uri,
            &[("code", &code), ("state", &authorization.state)],
        ),
        after_post,
    )
}

/// The page for a step that failed on Docket's side.
pub(crate) fn failed_page() -> Reply {
    error_page(
        StatusCode::SERVICE_UNAVAILABLE,
        "Sign-in failed",
        "Docket could not complete this step. Try again shortly.",
    )
}
