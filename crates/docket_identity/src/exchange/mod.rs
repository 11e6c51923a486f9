//! OAuth 2.0 Token Exchange (RFC 8693): the caller's verified access token is
//! exchanged at the identity provider's token endpoint for one whose audience is the
//! upstream, and the upstream gets only that one. The caller's own token is never
//! forwarded.
//!
//! One [`TokenExchange`] serves one connection. It posts the form of RFC 8693 §2.1
//! (`grant_type=urn:ietf:params:oauth:grant-type:token-exchange`, the caller's token
//! as an access token, the configured `audience`, `resource` and `scope`, and an
//! access token asked for), authenticated as Docket's client by HTTP Basic
//! (`client_secret_basic`, RFC 6749 §2.3.1). It accepts a bearer access token
//! (§2.2.1) and turns an OAuth error (§2.2.2) into an [`ExchangeError`] a caller may
//! read. Redirects are not followed, the whole exchange runs within a timeout, and an
//! answer longer than [`MAX_RESPONSE_BYTES`] is refused.
//!
//! Exchanged tokens are cached per caller (under a digest of the caller's token) and
//! reused until `refresh_before` before they expire; concurrent calls by one caller
//! share one exchange. The cache's clock is tokio's, so tests pause and advance it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use reqwest::Url;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde_json::{Map, Value};
use tokio::time::Instant;

use crate::secret::Secret;

mod cache;
mod config;
mod error;

pub use cache::DEFAULT_CAPACITY;
pub use config::{DEFAULT_REFRESH_BEFORE, DEFAULT_TIMEOUT, TokenExchangeConfig};
pub use error::ExchangeError;

use cache::{Cache, Cached};
use error::{MAX_DESCRIPTION_CHARS, MAX_ERROR_CHARS, caller_safe};

/// The longest answer a token endpoint may give, in bytes.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;

/// The longest an exchanged token is cached, whatever its `expires_in` says.
pub const MAX_CACHED_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// RFC 8693 §2.1's grant type.
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// The token type of the caller's token, and of the one asked for (RFC 8693 §3).
const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";
/// A JWT, which some identity providers name as the issued type of an access token.
const JWT_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:jwt";

/// The token exchange of one connection. Cheap to clone: clones share the HTTP
/// client and the cache. Its `Debug` output never shows the client secret.
#[derive(Clone)]
pub struct TokenExchange {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    token_url: Url,
    client_id: String,
    client_secret: Secret,
    /// `Basic <credentials>`, marked sensitive.
    authorization: HeaderValue,
    audience: String,
    /// The form's parameters after the caller's token: audience, resource, scope and
    /// the requested token type, already encoded, each after a `&`.
    fixed_form: String,
    refresh_before: Duration,
    timeout: Duration,
    cache: Cache,
}

impl fmt::Debug for TokenExchange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenExchange")
            .field("token_url", &self.inner.token_url.as_str())
            .field("client_id", &self.inner.client_id)
            .field("client_secret", &self.inner.client_secret)
            .field("audience", &self.inner.audience)
            .field("refresh_before", &self.inner.refresh_before)
            .finish_non_exhaustive()
    }
}

/// What the token endpoint issued.
struct Issued {
    token: Secret,
    expires_in: Option<Duration>,
}

impl TokenExchange {
    /// The exchange `config` describes, caching at most [`DEFAULT_CAPACITY`] callers;
    /// `path` prefixes each problem (`connections.crm.identity`). No I/O happens.
    ///
    /// # Errors
    /// Every problem of [`TokenExchangeConfig::problems`], or the HTTP client's.
    pub fn new(config: &TokenExchangeConfig, path: &str) -> Result<Self, Vec<String>> {
        Self::with_capacity(config, path, DEFAULT_CAPACITY)
    }

    /// As [`TokenExchange::new`], caching at most `capacity` callers (at least one).
    ///
    /// # Errors
    /// As [`TokenExchange::new`].
    pub fn with_capacity(
        config: &TokenExchangeConfig,
        path: &str,
        capacity: usize,
    ) -> Result<Self, Vec<String>> {
        let problems = config.problems(path);
        if !problems.is_empty() {
            return Err(problems);
        }
        let token_url = config::check_token_url(&config.token_url)
            .map_err(|reason| vec![format!("{path}.token_url: {reason}")])?;
        // RFC 6749 §2.3.1: the id and secret are form-encoded before they are joined.
        let credentials = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            form_encode(&config.client_id),
            form_encode(config.client_secret.expose())
        ));
        let mut authorization = HeaderValue::from_str(&format!("Basic {credentials}"))
            .map_err(|_| vec![format!("{path}.client_secret: not usable in a header")])?;
        authorization.set_sensitive(true);
        let mut fixed_form = format!("&audience={}", form_encode(&config.audience));
        if let Some(resource) = &config.resource {
            fixed_form.push_str(&format!("&resource={}", form_encode(resource)));
        }
        if let Some(scope) = &config.scope {
            fixed_form.push_str(&format!("&scope={}", form_encode(scope.trim())));
        }
        fixed_form.push_str(&format!(
            "&requested_token_type={}",
            form_encode(ACCESS_TOKEN_TYPE)
        ));
        let http = reqwest::Client::builder()
            .connect_timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|error| vec![format!("{path}: the HTTP client: {error}")])?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                token_url,
                client_id: config.client_id.clone(),
                client_secret: config.client_secret.clone(),
                authorization,
                audience: config.audience.clone(),
                fixed_form,
                refresh_before: config.refresh_before,
                timeout: config.timeout,
                cache: Cache::new(capacity),
            }),
        })
    }

    /// The audience exchanged tokens are for.
    #[must_use]
    pub fn audience(&self) -> &str {
        &self.inner.audience
    }

    /// How many callers the cache holds a slot for.
    #[must_use]
    pub fn cached_callers(&self) -> usize {
        self.inner.cache.len()
    }

    /// A token for the upstream in place of `subject_token`, the caller's verified
    /// access token: the cached one while it is more than `refresh_before` from its
    /// expiry, otherwise a new exchange's. Concurrent calls with one token wait for
    /// one exchange. A token issued without `expires_in` is not cached.
    ///
    /// # Errors
    /// [`ExchangeError`], whose message a caller may read.
    pub async fn exchange(&self, subject_token: &str) -> Result<Secret, ExchangeError> {
        if subject_token.is_empty() {
            return Err(ExchangeError::NoSubjectToken);
        }
        let slot = self.inner.cache.slot(cache::key(subject_token));
        // Held while the exchange runs: the single flight for this caller.
        let mut state = slot.state.lock().await;
        if let Some(cached) = state
            .as_ref()
            .filter(|cached| cached.is_fresh(Instant::now()))
        {
            return Ok(cached.token.clone());
        }
        let sent_at = Instant::now();
        let issued = self.request(subject_token).await?;
        *state = issued.expires_in.map(|lifetime| {
            let lifetime = lifetime.min(MAX_CACHED_LIFETIME);
            let expires_at = sent_at + lifetime;
            Cached {
                token: issued.token.clone(),
                refresh_at: sent_at + lifetime.saturating_sub(self.inner.refresh_before),
                expires_at,
            }
        });
        Ok(issued.token)
    }

    /// One exchange at the token endpoint, within the timeout.
    async fn request(&self, subject_token: &str) -> Result<Issued, ExchangeError> {
        let inner = &*self.inner;
        let body = format!(
            "grant_type={}&subject_token={}&subject_token_type={}{}",
            form_encode(GRANT_TYPE),
            form_encode(subject_token),
            form_encode(ACCESS_TOKEN_TYPE),
            inner.fixed_form
        );
        let secrets = [subject_token, inner.client_secret.expose()];
        let transport = |error: &reqwest::Error| transport_error(error, &secrets);
        let exchange = async {
            let mut response = inner
                .http
                .post(inner.token_url.clone())
                .header(AUTHORIZATION, inner.authorization.clone())
                .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
                .header(ACCEPT, "application/json")
                .body(body)
                .send()
                .await
                .map_err(|error| transport(&error))?;
            let too_large = ExchangeError::TooLarge {
                limit: MAX_RESPONSE_BYTES,
            };
            if response
                .content_length()
                .is_some_and(|length| length > MAX_RESPONSE_BYTES as u64)
            {
                return Err(too_large);
            }
            let status = response.status().as_u16();
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await.map_err(|error| transport(&error))? {
                if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(too_large);
                }
                body.extend_from_slice(&chunk);
            }
            Ok((status, body))
        };
        let (status, body) = tokio::time::timeout(inner.timeout, exchange)
            .await
            .map_err(|_| ExchangeError::Timeout {
                after: inner.timeout,
            })??;
        parse_answer(status, &body, &secrets)
    }
}

/// The issued token in the token endpoint's answer, or why there is none. `secrets`
/// are kept out of every message.
fn parse_answer(status: u16, body: &[u8], secrets: &[&str]) -> Result<Issued, ExchangeError> {
    let object: Option<Map<String, Value>> = match serde_json::from_slice(body) {
        Ok(Value::Object(object)) => Some(object),
        _ => None,
    };
    let text = |key: &str| {
        object
            .as_ref()
            .and_then(|object| object.get(key))
            .and_then(Value::as_str)
    };
    if let Some(error) = text("error") {
        return Err(ExchangeError::Refused {
            status,
            error: caller_safe(error, secrets, MAX_ERROR_CHARS),
            description: text("error_description")
                .map(|description| caller_safe(description, secrets, MAX_DESCRIPTION_CHARS))
                .filter(|description| !description.is_empty()),
        });
    }
    if !(200..300).contains(&status) {
        return Err(ExchangeError::Status { status });
    }
    let malformed = |reason| Err(ExchangeError::Malformed { reason });
    let Some(object) = &object else {
        return malformed("the body is not a JSON object");
    };
    let Some(token) = text("access_token").filter(|token| !token.is_empty()) else {
        return malformed("it has no access_token");
    };
    // RFC 6750's b64token is visible ASCII; anything else cannot go into a header.
    if !token.bytes().all(|byte| (0x21..=0x7e).contains(&byte)) {
        return malformed("the access_token cannot be sent in a header");
    }
    let shown = [secrets, &[token]].concat();
    let Some(token_type) = text("token_type") else {
        return malformed("it has no token_type");
    };
    if !token_type.eq_ignore_ascii_case("bearer") {
        return Err(ExchangeError::NotBearer {
            token_type: caller_safe(token_type, &shown, MAX_ERROR_CHARS),
        });
    }
    if let Some(issued) = text("issued_token_type")
        && issued != ACCESS_TOKEN_TYPE
        && issued != JWT_TOKEN_TYPE
    {
        return Err(ExchangeError::NotAccessToken {
            issued_token_type: caller_safe(issued, &shown, MAX_DESCRIPTION_CHARS),
        });
    }
    let expires_in = match object.get("expires_in") {
        None | Some(Value::Null) => None,
        Some(Value::Number(number)) => match number.as_u64() {
            Some(seconds) => Some(seconds),
            None => match number.as_f64() {
                Some(seconds) if seconds.is_finite() && seconds >= 0.0 => {
                    // Whole seconds, saturating: the cache caps the lifetime anyway.
                    Some(seconds as u64)
                }
                _ => return malformed("expires_in is not a number of seconds"),
            },
        },
        // Some identity providers send it as a string.
        Some(Value::String(seconds)) => match seconds.trim().parse::<u64>() {
            Ok(seconds) => Some(seconds),
            Err(_) => return malformed("expires_in is not a number of seconds"),
        },
        Some(_) => return malformed("expires_in is not a number of seconds"),
    };
    Ok(Issued {
        token: Secret::new(token),
        expires_in: expires_in
            .map(|seconds| Duration::from_secs(seconds.min(MAX_CACHED_LIFETIME.as_secs()))),
    })
}

/// A transport error as a sentence without the URL, with its causes, kept free of
/// `secrets`.
fn transport_error(error: &reqwest::Error, secrets: &[&str]) -> ExchangeError {
    let mut message = if error.is_connect() {
        "could not connect".to_owned()
    } else if error.is_timeout() {
        "the exchange timed out".to_owned()
    } else if error.is_body() || error.is_decode() {
        "the answer broke off".to_owned()
    } else {
        "the request failed".to_owned()
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    ExchangeError::Transport {
        message: caller_safe(&message, secrets, MAX_DESCRIPTION_CHARS),
    }
}

/// `text` as `application/x-www-form-urlencoded` carries it.
fn form_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => {
                encoded.push(char::from(byte));
            }
            b' ' => encoded.push('+'),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_encoded() {
        assert_eq!(form_encode("a b+c/d=e&f~"), "a+b%2Bc%2Fd%3De%26f%7E");
        assert_eq!(form_encode("é"), "%C3%A9");
    }

    #[test]
    fn answers_are_parsed_and_checked() {
        let parse = |status, body: &str| parse_answer(status, body.as_bytes(), &["subj", "sec"]);
        let issued = parse(
            200,
            r#"{"access_token":"new.tok","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"bearer","expires_in":"300"}"#,
        )
        .expect("issued");
        assert_eq!(issued.token.expose(), "new.tok");
        assert_eq!(issued.expires_in, Some(Duration::from_secs(300)));
        let issued = parse(
            200,
            r#"{"access_token":"t","token_type":"Bearer","expires_in":1e300}"#,
        )
        .expect("issued");
        assert_eq!(issued.expires_in, Some(MAX_CACHED_LIFETIME));
        assert_eq!(
            parse(200, r#"{"access_token":"t","token_type":"BEARER"}"#)
                .map(|issued| issued.expires_in)
                .ok(),
            Some(None)
        );
        for (body, wanted) in [
            ("not json", "not a JSON object"),
            (r#"{"token_type":"Bearer"}"#, "no access_token"),
            (r#"{"access_token":"a b","token_type":"Bearer"}"#, "header"),
            (r#"{"access_token":"t"}"#, "no token_type"),
            (
                r#"{"access_token":"t","token_type":"Bearer","expires_in":-1}"#,
                "expires_in",
            ),
            (
                r#"{"access_token":"t","token_type":"Bearer","expires_in":[1]}"#,
                "expires_in",
            ),
        ] {
            let error = parse(200, body).err().map(|error| error.to_string());
            assert!(
                error.as_deref().is_some_and(|error| error.contains(wanted)),
                "{body}: {error:?}"
            );
        }
        assert!(matches!(
            parse(200, r#"{"access_token":"t","token_type":"N_A"}"#),
            Err(ExchangeError::NotBearer { .. })
        ));
        assert!(matches!(
            parse(
                200,
                r#"{"access_token":"t","token_type":"Bearer","issued_token_type":"urn:ietf:params:oauth:token-type:id_token"}"#
            ),
            Err(ExchangeError::NotAccessToken { .. })
        ));
        assert_eq!(
            parse(502, "<html>").err(),
            Some(ExchangeError::Status { status: 502 })
        );
        let refused = parse(
            400,
            r#"{"error":"invalid_grant","error_description":"token subj for client sec\nis bad"}"#,
        )
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
        assert!(refused.contains("invalid_grant"), "{refused}");
        assert!(refused.contains("is bad"), "{refused}");
        assert!(
            !refused.contains("subj") && !refused.contains("sec "),
            "{refused}"
        );
    }
}
