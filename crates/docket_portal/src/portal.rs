//! [`Portal`]: the routes under `/portal`, and the sweep of what expired.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use time::OffsetDateTime;

use crate::authority::Authority;
use crate::config::PortalConfig;
use crate::reply::{Reply, message, not_found, redirect};
use crate::session::signed_in;
use crate::state::State;
use crate::store::{PortalStore, StoreError, Swept};
use crate::{callback, home, login, logout};

/// How many rows one sweep batch removes.
const SWEEP_BATCH: u32 = 500;

/// How many batches one sweep runs at most.
const MAX_SWEEP_BATCHES: u32 = 40;

/// Docket's portal.
pub struct Portal {
    state: Arc<State>,
}

impl std::fmt::Debug for Portal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Portal")
            .field("base_url", &self.state.config.base_url)
            .finish_non_exhaustive()
    }
}

impl Portal {
    /// The portal with `config`, keeping its state in `store`.
    #[must_use]
    pub fn new(config: PortalConfig, store: Arc<dyn PortalStore>) -> Self {
        Self {
            state: Arc::new(State { config, store }),
        }
    }

    /// Whether `path` is the portal's: `/portal` and everything under it.
    #[must_use]
    pub fn answers(path: &str) -> bool {
        path == "/portal" || path.starts_with("/portal/")
    }

    /// Answers one request (a path [`Self::answers`]), asking `authority` to
    /// turn a login's code into a person.
    pub async fn handle(
        &self,
        request: Request<Bytes>,
        authority: &dyn Authority,
    ) -> Response<Bytes> {
        let state = self.state.as_ref();
        let now = OffsetDateTime::now_utc();
        let (parts, body) = request.into_parts();
        let path = parts.uri.path();
        let query = parts.uri.query().unwrap_or_default();
        // A POST from a page of another origin is refused before anything is
        // read, whatever it carries: the CSRF token already stops it, and this
        // says so without touching the session (browsers send `Origin` on
        // every POST; one without it is not a browser's form).
        if parts.method == Method::POST
            && parts
                .headers
                .get(http::header::ORIGIN)
                .is_some_and(|origin| origin.as_bytes() != state.config.origin().as_bytes())
        {
            return message(
                StatusCode::FORBIDDEN,
                "Refused",
                "This form was sent from another site.",
            );
        }
        match (&parts.method, path) {
            (&Method::GET, "/portal/login") => login::handle(state, query, now).await,
            (&Method::GET, "/portal/callback") => {
                callback::handle(state, &parts.headers, query, authority, now).await
            }
            (&Method::GET, "/portal/signed-out") => home::signed_out(),
            (&Method::POST, "/portal/logout") => {
                logout::handle(state, &parts.headers, &body, now).await
            }
            (&Method::GET, "/portal" | "/portal/") => {
                match signed_in(state.store.as_ref(), &parts.headers, now).await {
                    Ok(Some(signed_in)) => home::handle(&signed_in),
                    Ok(None) => to_login(path),
                    Err(error) => unavailable(&error),
                }
            }
            _ => not_found(),
        }
    }

    /// Removes the sessions and logins that expired before `now`, in batches
    /// (the server's maintenance pass calls it). What it removed.
    ///
    /// # Errors
    /// The first [`StoreError`].
    pub async fn sweep(&self, now: OffsetDateTime) -> Result<Swept, StoreError> {
        let mut total = Swept::default();
        for _ in 0..MAX_SWEEP_BATCHES {
            let swept = self.state.store.sweep(now, SWEEP_BATCH).await?;
            total.sessions += swept.sessions;
            total.logins += swept.logins;
            if swept.sessions < u64::from(SWEEP_BATCH) && swept.logins < u64::from(SWEEP_BATCH) {
                break;
            }
        }
        Ok(total)
    }
}

/// A browser without a session goes to the login, coming back here after.
fn to_login(path: &str) -> Reply {
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("return_to", path)
        .finish();
    redirect(&format!("/portal/login?{query}"), &[])
}

fn unavailable(error: &StoreError) -> Reply {
    tracing::warn!(%error, "a portal session could not be read");
    message(
        StatusCode::SERVICE_UNAVAILABLE,
        "Unavailable",
        "The portal cannot reach its store. Try again shortly.",
    )
}
