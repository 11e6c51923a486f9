//! What the portal answers, as the server serves it (`crate::portal` is what
//! it is built from): the person a login proves, by the identity and persona
//! rules the tools use, the routes behind the HTTP endpoint, and the sweep in
//! the retention pass.

use std::net::IpAddr;

use async_trait::async_trait;
use bytes::Bytes;
use docket_oauth::rate::Limited as Endpoint;
use docket_portal::{Authority, LoginError, Person};
use http::header::{AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde::Deserialize;

use crate::portal::{ComposedPortal, PORTAL_CLIENT_ID, client_secret};
use crate::state::App;

/// The authority a portal request logs in with: the app's authorization
/// server and identity rules, for the browser at `peer` (whose rate limit the
/// token exchange counts against).
struct ServerAuthority<'a> {
    app: &'a App,
    peer: IpAddr,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
}

#[async_trait]
impl Authority for ServerAuthority<'_> {
    async fn exchange(
        &self,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<Person, LoginError> {
        let state = &self.app.state;
        let (Some(server), Some(server_config)) = (
            state.authenticator.authorization_server(),
            state.config.auth.oauth_server.as_ref(),
        ) else {
            return Err(LoginError::Unavailable(
                "no authorization server is configured".to_owned(),
            ));
        };
        let secret = client_secret(&server_config.upstream.client_secret);
        let form: String = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_verifier", verifier)
            .append_pair("client_id", PORTAL_CLIENT_ID)
            .append_pair("client_secret", &secret)
            .finish();
        let request = http::Request::post("/oauth/token")
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Bytes::from(form))
            .map_err(|error| LoginError::Unavailable(error.to_string()))?;
        let answer = server.handle(request, self.peer).await;
        if answer.status() != StatusCode::OK {
            let why = String::from_utf8_lossy(answer.body()).into_owned();
            return Err(
                if answer.status().is_server_error()
                    || answer.status() == StatusCode::TOO_MANY_REQUESTS
                {
                    LoginError::Unavailable(why)
                } else {
                    LoginError::Refused(why)
                },
            );
        }
        let token: TokenAnswer = serde_json::from_slice(answer.body())
            .map_err(|error| LoginError::Unavailable(format!("the token answer: {error}")))?;
        // The token is checked as any caller's would be: the same identity,
        // the same persona.
        let mut headers = HeaderMap::new();
        let bearer = HeaderValue::from_str(&format!("Bearer {}", token.access_token))
            .map_err(|error| LoginError::Unavailable(error.to_string()))?;
        headers.insert(AUTHORIZATION, bearer);
        let identity = state
            .authenticator
            .authenticate(&headers)
            .await
            .map_err(|error| LoginError::Refused(error.to_string()))?;
        state.principals.seen(&identity);
        let Some(persona) = state.personas.resolve(&identity.roles) else {
            return Err(LoginError::NoPersona(
                "Your account has no persona in Docket, so there is nothing here for you. Ask \
                 an administrator for access."
                    .to_owned(),
            ));
        };
        Ok(Person {
            subject: identity.subject.clone(),
            display_name: identity.display_name.clone(),
            roles: identity.roles.clone(),
            administrator: persona.is_admin,
        })
    }
}

/// Where a share for people is opened by the portal's session (the share id
/// follows).
pub(crate) const SHARES: &str = "/portal/shares/";

/// Answers one request to the portal.
pub(crate) async fn answer<B>(
    app: &App,
    portal: &ComposedPortal,
    parts: http::request::Parts,
    body: B,
    peer: IpAddr,
) -> http::Response<Bytes>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    if parts.method == http::Method::GET
        && parts.uri.path() == "/portal/login"
        && let Err(wait) = portal.login_starts.check(Endpoint::Authorize, peer)
    {
        let mut response = plain(
            StatusCode::TOO_MANY_REQUESTS,
            "too many logins started from this address; try again shortly\n",
        );
        if let Ok(value) = HeaderValue::from_str(&wait.as_secs().max(1).to_string()) {
            response
                .headers_mut()
                .insert(http::header::RETRY_AFTER, value);
        }
        return response;
    }
    let body_timeout = app.config().server.body_timeout;
    let collected = tokio::time::timeout(
        body_timeout,
        Limited::new(body, docket_portal::MAX_FORM_BYTES).collect(),
    )
    .await;
    let bytes = match collected {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(error)) if error.is::<http_body_util::LengthLimitError>() => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the form is larger than the portal reads\n",
            );
        }
        Ok(Err(_)) | Err(_) => {
            return plain(StatusCode::BAD_REQUEST, "the request body did not arrive\n");
        }
    };
    let request = http::Request::from_parts(parts, bytes);
    let desk = crate::portal_desk::ServerDesk {
        app,
        viewer: &portal.viewer,
        oversight: portal.oversight.as_ref(),
    };
    portal
        .portal
        .handle(request, &ServerAuthority { app, peer }, &desk)
        .await
}

fn plain(status: StatusCode, text: &'static str) -> http::Response<Bytes> {
    let mut response = http::Response::new(Bytes::from_static(text.as_bytes()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

impl App {
    /// Removes the portal's expired sessions and logins (the retention pass
    /// runs it); how many rows went.
    pub(crate) async fn sweep_portal(&self) -> u64 {
        let Some(portal) = &self.state.portal else {
            return 0;
        };
        match portal.portal.sweep(time::OffsetDateTime::now_utc()).await {
            Ok(swept) => swept.sessions + swept.logins,
            Err(error) => {
                tracing::warn!(%error, "the portal's sweep failed");
                0
            }
        }
    }
}

/// Sends a browser to open share `id` through the portal, whose session says
/// who is opening (the portal's cookie is scoped to `/portal`).
pub(crate) fn to_portal_share(id: &str) -> hyper::Response<crate::sse::Body> {
    let mut response = see_other();
    // The id is checked where the share is opened; here it only must make a
    // header value, and a path below the portal.
    let id: String = id
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(64)
        .collect();
    if let Ok(location) = HeaderValue::from_str(&format!("{SHARES}{id}")) {
        response
            .headers_mut()
            .insert(http::header::LOCATION, location);
    }
    response
}

/// `GET /portal/shares/{id}`: the share opened by the session's person (a
/// browser without a session is sent to log in and comes back here).
///
/// # Errors
/// What opening the share refused.
pub(crate) async fn open_share(
    app: &App,
    portal: &ComposedPortal,
    headers: &http::HeaderMap,
    id: &str,
    peer: Option<std::net::IpAddr>,
) -> Result<hyper::Response<crate::sse::Body>, crate::downloads::Refused> {
    let person = match portal.portal.person(headers).await {
        Ok(Some(person)) => person,
        Ok(None) => {
            let mut response = see_other();
            let back: String = form_urlencoded::Serializer::new(String::new())
                .append_pair("return_to", &format!("{SHARES}{id}"))
                .finish();
            if let Ok(location) = HeaderValue::from_str(&format!("/portal/login?{back}")) {
                response
                    .headers_mut()
                    .insert(http::header::LOCATION, location);
            }
            return Ok(response);
        }
        Err(error) => {
            tracing::warn!(%error, "a portal session could not be read");
            return Err(crate::downloads::Refused::Unavailable);
        }
    };
    let identity = crate::portal_desk::identity_of(app, &person)
        .await
        .map_err(|_| crate::downloads::Refused::Unavailable)?;
    crate::downloads::open_share_by(
        app,
        crate::downloads::Opening::Known(crate::opener::Opener::Person(identity)),
        id,
        peer,
    )
    .await
}

/// An empty `303`, its location to be set.
fn see_other() -> hyper::Response<crate::sse::Body> {
    let mut response = hyper::Response::new(http_body_util::BodyExt::boxed_unsync(
        http_body_util::Full::new(Bytes::new()),
    ));
    *response.status_mut() = StatusCode::SEE_OTHER;
    response
}
