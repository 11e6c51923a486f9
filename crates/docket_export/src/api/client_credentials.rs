//! OAuth 2.0 client credentials (RFC 6749 §4.4) for an `api` connection: the
//! connection's own client id and secret are exchanged at the authorization
//! server's token endpoint for an access token, sent as `Authorization:
//! Bearer`. The token is cached per connection and fetched again before it
//! expires (at four fifths of its lifetime, or a minute before its end,
//! whichever is sooner), and at once after the API answers 401; one fetch
//! runs at a time, so a burst of calls asks for one token. Neither the secret
//! nor any token appears in an error, a debug output or a result: each token
//! joins the connection's scrub as it arrives.

use std::fmt;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use reqwest::Url;
use serde::Deserialize;

use super::scrub::Scrubber;

/// The lifetime assumed for a token whose answer names none.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(300);

/// The most bytes of a token endpoint's answer that are read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Why no token came.
#[derive(Debug)]
pub(super) enum TokenError {
    /// The token endpoint refused or could not be reached; what happened,
    /// without any secret.
    Refused(String),
    /// The token endpoint did not answer within this long.
    Timeout(Duration),
}

/// How a connection obtains its tokens. Its `Debug` output never shows the
/// secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCredentials {
    /// The authorization server's token endpoint (`http` or `https`).
    pub token_url: String,
    /// The connection's client id.
    pub client_id: String,
    /// The connection's client secret, sent with HTTP basic authentication
    /// (`client_secret_basic`).
    pub client_secret: String,
    /// The scopes asked for, if any.
    pub scopes: Vec<String>,
    /// The resource indicator (RFC 8707) the token is for, if the server wants one.
    pub resource: Option<String>,
    /// The audience, for servers that name it so (Auth0, Okta), if any.
    pub audience: Option<String>,
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("token_url", &self.token_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &"[REDACTED]")
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

impl ClientCredentials {
    /// The secrets to scrub: the secret, and the basic-auth form it is sent in.
    pub(super) fn secrets(&self) -> Vec<String> {
        use base64::Engine as _;
        vec![
            self.client_secret.clone(),
            base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                form_encode(&self.client_id),
                form_encode(&self.client_secret)
            )),
        ]
    }

    /// Checks what can be checked without I/O.
    pub(super) fn check(&self) -> Result<Url, String> {
        let url = Url::parse(&self.token_url).map_err(|error| format!("the token url: {error}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err("the token url must be an http or https url with a host".into());
        }
        if self.client_id.is_empty() || self.client_secret.is_empty() {
            return Err("client credentials need a client id and a client secret".into());
        }
        Ok(url)
    }
}

/// `application/x-www-form-urlencoded` encoding of one value, which RFC 6749
/// §2.3.1 asks of the id and secret before they are joined for basic auth.
fn form_encode(value: &str) -> String {
    form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// A token and when to fetch the next one.
struct Cached {
    token: String,
    refresh_at: Instant,
    /// The connection's scrub with this token in it.
    scrubber: Scrubber,
}

/// The token of one connection, shared by its clients.
pub(super) struct TokenCache {
    credentials: ClientCredentials,
    token_url: Url,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
    current: Mutex<Option<Cached>>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<u64>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

impl TokenCache {
    /// The cache for `credentials`.
    ///
    /// # Errors
    /// Why the credentials cannot be used.
    pub(super) fn new(credentials: ClientCredentials) -> Result<Self, String> {
        let token_url = credentials.check()?;
        Ok(Self {
            credentials,
            token_url,
            fetching: tokio::sync::Mutex::new(()),
            current: Mutex::new(None),
        })
    }

    fn live(&self) -> Option<String> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current
            .as_ref()
            .filter(|cached| Instant::now() < cached.refresh_at)
            .map(|cached| cached.token.clone())
    }

    /// The scrub with the current token, if there is one.
    pub(super) fn scrubber(&self) -> Option<Scrubber> {
        let current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        current.as_ref().map(|cached| cached.scrubber.clone())
    }

    /// Forgets the token (the API refused it), so the next call fetches one.
    pub(super) fn forget(&self, token: &str) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|cached| cached.token == token) {
            *current = None;
        }
    }

    /// A live token: the cached one, or a new one from the token endpoint.
    ///
    /// # Errors
    /// [`TokenError`] when the token endpoint refuses, cannot be reached or
    /// does not answer in time.
    pub(super) async fn token(
        &self,
        http: &reqwest::Client,
        timeout: Duration,
        scrubber: &Scrubber,
    ) -> Result<String, TokenError> {
        if let Some(token) = self.live() {
            return Ok(token);
        }
        let _one_at_a_time = self.fetching.lock().await;
        // Another call may have fetched it while this one waited.
        if let Some(token) = self.live() {
            return Ok(token);
        }
        let asked_at = Instant::now();
        let answer = tokio::time::timeout(timeout, self.fetch(http))
            .await
            .map_err(|_| TokenError::Timeout(timeout))??;
        let lifetime = answer
            .expires_in
            .map_or(DEFAULT_LIFETIME, Duration::from_secs);
        // Fetched again at four fifths of its life, or a minute before its end.
        let early = (lifetime / 5).max(Duration::from_secs(60)).min(lifetime);
        let refresh_at = asked_at + lifetime.saturating_sub(early);
        let token = answer.access_token;
        *self.current.lock().unwrap_or_else(PoisonError::into_inner) = Some(Cached {
            token: token.clone(),
            refresh_at,
            scrubber: scrubber.with_secrets(std::slice::from_ref(&token)),
        });
        Ok(token)
    }

    async fn fetch(&self, http: &reqwest::Client) -> Result<TokenAnswer, TokenError> {
        let failed = TokenError::Refused;
        let credentials = &self.credentials;
        // Built before any await: the serializer is not `Send`.
        let form = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            form.append_pair("grant_type", "client_credentials");
            if !credentials.scopes.is_empty() {
                form.append_pair("scope", &credentials.scopes.join(" "));
            }
            if let Some(resource) = &credentials.resource {
                form.append_pair("resource", resource);
            }
            if let Some(audience) = &credentials.audience {
                form.append_pair("audience", audience);
            }
            form.finish()
        };
        let response = http
            .post(self.token_url.clone())
            .basic_auth(
                form_encode(&credentials.client_id),
                Some(form_encode(&credentials.client_secret)),
            )
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(form)
            .send()
            .await
            .map_err(|error| {
                failed(if error.is_connect() {
                    "could not connect to the token endpoint".to_owned()
                } else {
                    "the token endpoint's exchange broke off".to_owned()
                })
            })?;
        let status = response.status();
        let body = read_capped(response).await.map_err(failed)?;
        if !status.is_success() {
            let why = serde_json::from_slice::<ErrorAnswer>(&body).map_or_else(
                |_| format!("HTTP {status}"),
                |error| match error.error_description {
                    Some(description) => format!("{}: {description}", error.error),
                    None => error.error,
                },
            );
            return Err(failed(format!("the token endpoint refused: {why}")));
        }
        let answer: TokenAnswer = serde_json::from_slice(&body)
            .map_err(|_| failed("the token endpoint's answer is not a token".to_owned()))?;
        if answer.access_token.is_empty()
            || reqwest::header::HeaderValue::from_str(&format!("Bearer {}", answer.access_token))
                .is_err()
        {
            return Err(failed(
                "the token endpoint's token is not a valid header value".to_owned(),
            ));
        }
        if answer
            .token_type
            .as_deref()
            .is_some_and(|kind| !kind.eq_ignore_ascii_case("bearer"))
        {
            return Err(failed(
                "the token endpoint gave a token that is not a bearer token".to_owned(),
            ));
        }
        Ok(answer)
    }
}

/// A response's body, at most [`MAX_ANSWER_BYTES`].
async fn read_capped(mut response: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|_| "the token endpoint's answer broke off".to_owned())?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err("the token endpoint's answer is too large".to_owned());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
