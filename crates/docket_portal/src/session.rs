//! Who the browser is: the session its cookie names, if it is live.

use http::HeaderMap;
use time::OffsetDateTime;

use crate::cookie::{self, SESSION_COOKIE};
use crate::secret;
use crate::store::{PortalSession, PortalStore, StoreError};

/// A browser with a live session.
#[derive(Clone, Debug)]
pub(crate) struct SignedIn {
    /// The secret id its cookie carries (the CSRF token derives from it).
    pub(crate) id: String,
    /// The stored session.
    pub(crate) session: PortalSession,
}

/// The secret session id the request's cookie carries, if it has the shape
/// of one.
pub(crate) fn presented_id(headers: &HeaderMap) -> Option<String> {
    // Several Cookie headers are allowed (HTTP/2 splits them); each is read.
    let mut found = None;
    for value in headers.get_all(http::header::COOKIE) {
        let Ok(text) = value.to_str() else {
            continue;
        };
        if let Some(id) = cookie::find(text, SESSION_COOKIE) {
            if found.is_some() {
                return None;
            }
            found = Some(id.to_owned());
        }
    }
    found.filter(|id| secret::is_secret_shaped(id))
}

/// The request's live session, if any.
pub(crate) async fn signed_in(
    store: &dyn PortalStore,
    headers: &HeaderMap,
    now: OffsetDateTime,
) -> Result<Option<SignedIn>, StoreError> {
    let Some(id) = presented_id(headers) else {
        return Ok(None);
    };
    Ok(store
        .session(&secret::hash(&id), now)
        .await?
        .map(|session| SignedIn { id, session }))
}
