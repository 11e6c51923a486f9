//! [`Portal`]: the routes under `/portal`, and the sweep of what expired.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use time::OffsetDateTime;

use crate::authority::{Authority, Person};
use crate::config::PortalConfig;
use crate::desk::Desk;
use crate::reply::{Reply, message, not_found, redirect};
use crate::session::{SignedIn, signed_in};
use crate::state::State;
use crate::store::{PortalStore, StoreError, Swept};
use crate::{admin, callback, exports, form, home, library, login, logout, nav, work};

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

    /// The person the request's session cookie belongs to, if it names a
    /// live session: for the routes the composing server answers itself (the
    /// live events of the work page).
    ///
    /// # Errors
    /// [`StoreError`] when the sessions cannot be read.
    pub async fn person(&self, headers: &http::HeaderMap) -> Result<Option<Person>, StoreError> {
        let found = signed_in(
            self.state.store.as_ref(),
            headers,
            OffsetDateTime::now_utc(),
        )
        .await?;
        Ok(found.as_ref().map(nav::person))
    }

    /// Answers one request (a path [`Self::answers`]), asking `authority` to
    /// turn a login's code into a person and `desk` for what the pages show.
    pub async fn handle(
        &self,
        request: Request<Bytes>,
        authority: &dyn Authority,
        desk: &dyn Desk,
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
            (&Method::GET, "/portal/static/work.js") => work::script(),
            (&Method::GET | &Method::POST, _) => {
                let signed_in = match signed_in(state.store.as_ref(), &parts.headers, now).await {
                    Ok(Some(signed_in)) => signed_in,
                    Ok(None) if parts.method == Method::GET && is_page(path) => {
                        return to_login(path);
                    }
                    Ok(None) if parts.method == Method::GET => return not_found(),
                    Ok(None) => return redirect("/portal/login", &[]),
                    Err(error) => return unavailable(&error),
                };
                if parts.method == Method::POST {
                    // The token is checked before anything else is read.
                    return match form::checked(&signed_in, &body) {
                        Ok(form) => post(&signed_in, desk, path, &form).await,
                        Err(refused) => refused.reply(),
                    };
                }
                get(&signed_in, desk, path, query).await
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

/// A signed-in GET.
async fn get(signed_in: &SignedIn, desk: &dyn Desk, path: &str, query: &str) -> Reply {
    let path = path.trim_end_matches('/');
    match path {
        "/portal" => home::handle(signed_in),
        "/portal/work" => work::show(signed_in, desk, query).await,
        "/portal/exports" => exports::list(signed_in, desk, query).await,
        "/portal/scripts" => library::scripts(signed_in, desk).await,
        "/portal/prompts" => library::prompts(signed_in, desk).await,
        "/portal/admin" => admin::show(signed_in, desk, query).await,
        _ => match segments(path).as_slice() {
            ["exports", id] => exports::show(signed_in, desk, id, query).await,
            ["scripts", name] => library::script(signed_in, desk, name, query).await,
            _ => not_found(),
        },
    }
}

/// A signed-in POST whose CSRF token was the session's.
async fn post(
    signed_in: &SignedIn,
    desk: &dyn Desk,
    path: &str,
    form: &form::CheckedForm,
) -> Reply {
    match segments(path).as_slice() {
        ["work", "cancel"] => work::cancel(signed_in, desk, form).await,
        ["work", "cancel-run"] => work::cancel(signed_in, desk, form).await,
        ["exports", id, "share"] => exports::share(signed_in, desk, id, form).await,
        ["exports", id, "revoke"] => exports::revoke(signed_in, desk, id, form).await,
        _ => not_found(),
    }
}

/// Whether `path` is under one of the portal's pages (a browser without a
/// session is sent to log in for these; anything else is not found).
fn is_page(path: &str) -> bool {
    matches!(
        segments(path.trim_end_matches('/')).first().copied(),
        None | Some("work" | "exports" | "scripts" | "prompts" | "admin")
    )
}

/// The segments of `path` after `/portal/`.
fn segments(path: &str) -> Vec<&str> {
    path.strip_prefix("/portal/")
        .map(|rest| rest.split('/').collect())
        .unwrap_or_default()
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
