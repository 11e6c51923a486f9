//! `GET /oauth/jwks`: the public halves of every signing key still in use.

use http::StatusCode;

use crate::reply::{Reply, oauth_error, public_json};
use crate::state::{State, unavailable};

pub(crate) async fn handle(state: &State) -> Reply {
    // A key set without a key would make every verifier refuse every token
    // until its cache expires: make the first key now if there is none.
    if let Err(error) = state.keys.signing_key().await {
        return unavailable(&error);
    }
    match state.keys.jwks().await {
        Ok(jwks) => public_json(&jwks, 60),
        Err(error) => {
            tracing::warn!(%error, "the signing keys cannot be read");
            oauth_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "temporarily_unavailable",
                "the signing keys cannot be read; retry shortly",
            )
        }
    }
}
