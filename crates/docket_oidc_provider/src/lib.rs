//! A real OpenID provider for Docket's tests: panva's `oidc-provider` on Node
//! (`testing/oidc-provider`), started on a free loopback port per [`OidcProvider`].
//!
//! - **Tokens**: access tokens are RS256 JWTs (`typ: at+jwt`) for a configured [`Resource`],
//!   signed with a key the provider generates at startup and publishes at its `jwks_uri`, with
//!   `iss`, `sub`, `aud` (the resource), `exp`, `iat`, `jti`, `client_id`, `scope` and every
//!   claim of the [`Account`].
//! - **Users**: [`OidcProvider::user_token`] and [`OidcProvider::login`] run the authorization
//!   code flow with PKCE S256 through the provider's own endpoints (`/auth`, its login and
//!   consent interaction, `/token`), driven by the provider's test route `POST /test/login`:
//!   the token is one the provider issued, never one signed by hand. A flow the test does not
//!   drive itself (a browser-like client sent to `/auth` by an authorization server in front of
//!   this provider) signs in as the `login_hint` account, else as
//!   [`ProviderConfig::auto_login`], else through a form (`POST /interaction/<uid>/login`,
//!   `account=<id>`); consent is always given.
//! - **Clients**: [`OidcProvider::client_credentials_token`].
//! - **Token exchange** (RFC 8693), added with oidc-provider's `registerGrantType`:
//!   [`OidcProvider::exchange_token`] makes a request as a client would, the
//!   [`ExchangePolicy`] decides, and [`OidcProvider::exchanges`] counts the requests per
//!   subject so that a test can see a cache at work.
//!
//! # Installing and skipping
//!
//! The npm project is installed once into `target/oidc-provider/` with `npm ci` (see
//! [`cache_dir`]). Without Node or npm, or when the install fails, [`OidcProvider::start`]
//! returns an error that is an [`Unavailable`] (`error.is::<Unavailable>()`), and
//! [`OidcProvider::start_or_skip`] says so on the terminal and returns `None`. With
//! `DOCKET_REQUIRE_OIDC_PROVIDER=1` ([`REQUIRE_VAR`], set by `.ci/run`) that is an ordinary
//! error instead: in CI a missing provider fails, it never skips.

mod config;
mod install;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};

pub use config::{
    Account, Client, ClientAuthMethod, DEFAULT_ACCESS_TOKEN_TTL, DEFAULT_EXCHANGE_EXPIRES_IN,
    DEFAULT_REDIRECT_URI, ExchangePolicy, GrantType, ProviderConfig, Resource,
};

/// The environment variable that makes a provider that cannot be installed or started a
/// failure rather than a skip (`1` means required).
pub const REQUIRE_VAR: &str = "DOCKET_REQUIRE_OIDC_PROVIDER";

/// The RFC 8693 grant type.
pub const TOKEN_EXCHANGE_GRANT: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// The RFC 8693 token type of an access token (`subject_token_type`, `issued_token_type`).
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// A hang guard for the provider's start (`node` loading oidc-provider and generating a key).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A hang guard for one HTTP request to the provider.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How much of the provider's standard error is kept for error messages.
const STDERR_KEPT: usize = 16 * 1024;

/// Where the npm project is installed: `target/oidc-provider/` of the workspace (or of an
/// absolute `CARGO_TARGET_DIR`).
pub fn cache_dir() -> PathBuf {
    install::cache_root()
}

/// The provider cannot run on this machine (no Node or npm, or `npm ci` failed) and
/// [`REQUIRE_VAR`] is not `1`: a test may skip, saying so.
#[derive(Debug, Clone)]
pub struct Unavailable {
    /// Why, for the notice.
    pub reason: String,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the OpenID provider for tests is unavailable: {} ({REQUIRE_VAR}=1 makes this a \
             failure)",
            self.reason
        )
    }
}

impl std::error::Error for Unavailable {}

/// An OAuth error response of the provider (RFC 6749 §5.2): a refusal, not a transport
/// failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuthError {
    /// The HTTP status.
    pub status: u16,
    /// `error`, for example `invalid_grant`.
    pub error: String,
    /// `error_description`, when given.
    pub description: Option<String>,
}

impl fmt::Display for OAuthError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HTTP {}: {}", self.status, self.error)?;
        if let Some(description) = &self.description {
            write!(f, ": {description}")?;
        }
        Ok(())
    }
}

impl std::error::Error for OAuthError {}

/// A token endpoint's successful answer.
///
/// `Debug` leaves the tokens out.
#[derive(Clone, Deserialize)]
pub struct TokenResponse {
    /// `access_token`.
    pub access_token: String,
    /// `token_type` (`Bearer`).
    pub token_type: String,
    /// `expires_in`, in seconds.
    pub expires_in: Option<u64>,
    /// `scope`, when the provider says it.
    pub scope: Option<String>,
    /// `id_token` (the authorization code flow with the `openid` scope).
    pub id_token: Option<String>,
    /// `refresh_token` (with the `offline_access` scope and the refresh-token grant).
    pub refresh_token: Option<String>,
    /// `issued_token_type` (token exchange).
    pub issued_token_type: Option<String>,
}

impl fmt::Debug for TokenResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redacted = |token: &Option<String>| token.as_ref().map(|_| "<redacted>");
        f.debug_struct("TokenResponse")
            .field("access_token", &"<redacted>")
            .field("token_type", &self.token_type)
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .field("id_token", &redacted(&self.id_token))
            .field("refresh_token", &redacted(&self.refresh_token))
            .field("issued_token_type", &self.issued_token_type)
            .finish()
    }
}

/// How many token-exchange requests the provider answered for one subject, since it started.
/// A request counts once its subject token is verified.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct ExchangeCount {
    /// Answered with a token.
    pub issued: u64,
    /// Refused (policy, target, scope).
    pub refused: u64,
}

/// A token exchange request (RFC 8693 §2.1) as a client makes it.
///
/// `Debug` leaves the subject token out.
#[derive(Clone)]
pub struct ExchangeRequest {
    /// The client that authenticates (with its configured secret and method).
    pub client_id: String,
    /// `subject_token`: an access token.
    pub subject_token: String,
    /// `audience`, when set.
    pub audience: Option<String>,
    /// `resource`, when set.
    pub resource: Option<String>,
    /// `scope`, when set.
    pub scope: Option<String>,
}

impl ExchangeRequest {
    /// A request of `client_id` to exchange `subject_token` for a token whose audience is
    /// `audience`.
    pub fn new(
        client_id: impl Into<String>,
        subject_token: impl Into<String>,
        audience: impl Into<String>,
    ) -> Self {
        Self {
            client_id: client_id.into(),
            subject_token: subject_token.into(),
            audience: Some(audience.into()),
            resource: None,
            scope: None,
        }
    }

    /// Sets `scope`.
    #[must_use]
    pub fn scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }
}

impl fmt::Debug for ExchangeRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExchangeRequest")
            .field("client_id", &self.client_id)
            .field("subject_token", &"<redacted>")
            .field("audience", &self.audience)
            .field("resource", &self.resource)
            .field("scope", &self.scope)
            .finish()
    }
}

/// The claims of a JWT, decoded without checking its signature (for assertions on tokens the
/// provider issued; verify with the provider's [`OidcProvider::jwks_uri`] where that
/// matters).
///
/// # Errors
///
/// When `token` is not three dot-separated parts or its payload is not base64url JSON.
pub fn jwt_claims(token: &str) -> anyhow::Result<serde_json::Map<String, Value>> {
    let mut parts = token.split('.');
    let (Some(_), Some(payload), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        bail!("not a JWT: expected three dot-separated parts");
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .context("a JWT payload that is not base64url")?;
    serde_json::from_slice(&bytes).context("a JWT payload that is not a JSON object")
}

/// A running provider: a `node` child process, killed when this is dropped (and exiting on
/// its own when its standard input, held here, closes).
pub struct OidcProvider {
    issuer: String,
    http: reqwest::Client,
    clients: BTreeMap<String, Client>,
    stderr: Arc<Mutex<String>>,
    // Dropped first: the provider exits when its standard input closes.
    _stdin: ChildStdin,
    _child: Child,
}

impl fmt::Debug for OidcProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcProvider")
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

enum StartError {
    Unavailable(String),
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for StartError {
    fn from(error: anyhow::Error) -> Self {
        Self::Failed(error)
    }
}

impl OidcProvider {
    /// Installs the npm project if needed, starts the provider with `config` on a free port
    /// of 127.0.0.1, and waits until it listens.
    ///
    /// # Errors
    ///
    /// An [`Unavailable`] when Node or npm is missing or the install fails and
    /// [`REQUIRE_VAR`] is not `1`; otherwise any failure, with the provider's standard error
    /// when it exited (for example because `config` was refused).
    pub async fn start(config: ProviderConfig) -> anyhow::Result<Self> {
        let required = std::env::var(REQUIRE_VAR).is_ok_and(|value| value == "1");
        match Self::try_start(config).await {
            Ok(provider) => Ok(provider),
            Err(StartError::Failed(error)) => Err(error),
            Err(StartError::Unavailable(reason)) if required => Err(anyhow!(
                "{REQUIRE_VAR}=1 but the OpenID provider for tests cannot run: {reason}"
            )),
            Err(StartError::Unavailable(reason)) => Err(Unavailable { reason }.into()),
        }
    }

    /// [`start`](Self::start), except that an [`Unavailable`] provider is said on the
    /// terminal (past libtest's capture) and answered with `None`, so
    /// that the test named `test` can return early.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start), less [`Unavailable`].
    pub async fn start_or_skip(config: ProviderConfig, test: &str) -> anyhow::Result<Option<Self>> {
        match Self::start(config).await {
            Ok(provider) => Ok(Some(provider)),
            Err(error) => match error.downcast::<Unavailable>() {
                Ok(unavailable) => {
                    announce_skip(test, &unavailable);
                    Ok(None)
                }
                Err(error) => Err(error),
            },
        }
    }

    async fn try_start(config: ProviderConfig) -> Result<Self, StartError> {
        let mut clients = BTreeMap::new();
        for client in &config.clients {
            if clients
                .insert(client.client_id.clone(), client.clone())
                .is_some()
            {
                return Err(anyhow!("client {:?} is configured twice", client.client_id).into());
            }
        }
        let config_line = serde_json::to_string(&config).context("serialize the configuration")?;

        match Command::new("node").arg("--version").output().await {
            Ok(output) if output.status.success() => {}
            Ok(output) => {
                return Err(StartError::Unavailable(format!(
                    "`node --version` failed ({})",
                    output.status
                )));
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Err(StartError::Unavailable(
                    "node is not on the PATH (install Node.js 20.19 or later and npm)".to_owned(),
                ));
            }
            Err(error) => return Err(StartError::Unavailable(format!("cannot run node: {error}"))),
        }

        let installed = tokio::task::spawn_blocking(install::ensure_installed)
            .await
            .context("the install task")?
            .map_err(|error| match error {
                install::InstallError::Unavailable(reason) => StartError::Unavailable(reason),
                install::InstallError::Failed(error) => StartError::Failed(error),
            })?;

        let mut child = Command::new("node")
            .arg(&installed.script)
            .arg("--config-stdin")
            .current_dir(&installed.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("start node {}", installed.script.display()))?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(anyhow!("the provider's standard streams were not piped").into());
        };

        let kept = Arc::new(Mutex::new(String::new()));
        let stderr_task = tokio::spawn(keep_tail(stderr, Arc::clone(&kept)));

        stdin
            .write_all(format!("{config_line}\n").as_bytes())
            .await
            .context("send the configuration to the provider")?;
        stdin
            .flush()
            .await
            .context("send the configuration to the provider")?;

        let mut lines = BufReader::new(stdout).lines();
        let waited = tokio::time::timeout(START_TIMEOUT, async {
            loop {
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        if let Some(issuer) = line.strip_prefix("listening on ") {
                            return Ok(issuer.trim().to_owned());
                        }
                    }
                    Ok(None) => return Err(None),
                    Err(error) => return Err(Some(error)),
                }
            }
        })
        .await;
        let issuer = match waited {
            Ok(Ok(issuer)) => issuer,
            Ok(Err(read_error)) => {
                // The provider closed its output: it exited (or is exiting). Its standard
                // error says why; wait (bounded) until it has all been read.
                let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
                let _ = tokio::time::timeout(Duration::from_secs(10), stderr_task).await;
                let status = match status {
                    Ok(Ok(status)) => status.to_string(),
                    _ => "still running".to_owned(),
                };
                let read = read_error.map_or_else(String::new, |error| format!(" ({error})"));
                return Err(anyhow!(
                    "the OpenID provider exited before it listened{read}, {status}; its \
                     standard error:\n{}",
                    snapshot(&kept)
                )
                .into());
            }
            Err(_) => {
                return Err(anyhow!(
                    "the OpenID provider did not say `listening on` within {} s; its standard \
                     error:\n{}",
                    START_TIMEOUT.as_secs(),
                    snapshot(&kept)
                )
                .into());
            }
        };
        // Its later output is drained so that a full pipe never stalls it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .build()
            .context("build the HTTP client")?;
        Ok(Self {
            issuer,
            http,
            clients,
            stderr: kept,
            _stdin: stdin,
            _child: child,
        })
    }

    /// The issuer, `http://127.0.0.1:<port>` (also the base of every endpoint).
    pub fn issuer(&self) -> String {
        self.issuer.clone()
    }

    /// The discovery document's address, `<issuer>/.well-known/openid-configuration`.
    pub fn discovery_url(&self) -> String {
        format!("{}/.well-known/openid-configuration", self.issuer)
    }

    /// The JWKS address, `<issuer>/jwks`: the public key access tokens are signed with.
    pub fn jwks_uri(&self) -> String {
        format!("{}/jwks", self.issuer)
    }

    /// The token endpoint, `<issuer>/token` (token exchange goes there too).
    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.issuer)
    }

    /// What the provider wrote to its standard error so far (the last 16 KiB; it never writes
    /// secrets there).
    pub fn stderr(&self) -> String {
        snapshot(&self.stderr)
    }

    /// A user access token: `account` signs in to `client_id` through the authorization code
    /// flow with PKCE, asking for `resource` and, as scope, `openid email profile` and every
    /// scope the resource offers. The token is a JWT whose `aud` is `resource`.
    ///
    /// # Errors
    ///
    /// An [`OAuthError`] (inside the `anyhow::Error`) when the provider refuses, for example
    /// for an unknown account, client or resource; a transport error otherwise.
    pub async fn user_token(
        &self,
        account: &str,
        client_id: &str,
        resource: &str,
    ) -> anyhow::Result<String> {
        Ok(self
            .login(account, client_id, Some(resource), None)
            .await?
            .access_token)
    }

    /// The whole token response of a sign-in of `account` to `client_id` (see
    /// [`user_token`](Self::user_token)); `resource` and `scope` as given (`None`: no
    /// resource, so an opaque access token for the userinfo endpoint; the default scope).
    ///
    /// # Errors
    ///
    /// As [`user_token`](Self::user_token).
    pub async fn login(
        &self,
        account: &str,
        client_id: &str,
        resource: Option<&str>,
        scope: Option<&str>,
    ) -> anyhow::Result<TokenResponse> {
        let mut body = serde_json::json!({ "account": account, "client_id": client_id });
        if let Some(resource) = resource {
            body["resource"] = Value::from(resource);
        }
        if let Some(scope) = scope {
            body["scope"] = Value::from(scope);
        }
        let response = self
            .http
            .post(format!("{}/test/login", self.issuer))
            .json(&body)
            .send()
            .await
            .context("POST /test/login")?;
        token_answer(response)
            .await?
            .map_err(|refusal| anyhow::Error::new(refusal).context("the test login was refused"))
    }

    /// An access token of `client_id` itself (the client credentials grant) for `resource`,
    /// with `scope` when given (else the client's default: none).
    ///
    /// # Errors
    ///
    /// An [`OAuthError`] (inside the `anyhow::Error`) when the provider refuses; an error
    /// when `client_id` is not configured or the request fails.
    pub async fn client_credentials_token(
        &self,
        client_id: &str,
        resource: &str,
        scope: Option<&str>,
    ) -> anyhow::Result<String> {
        let mut form = vec![("grant_type", "client_credentials"), ("resource", resource)];
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        let answer = self.token_request(client_id, form).await?;
        answer
            .map(|token| token.access_token)
            .map_err(|refusal| anyhow::Error::new(refusal).context("client credentials refused"))
    }

    /// Makes a token exchange request (RFC 8693) as `request.client_id` would, with
    /// `subject_token_type` access token: `Ok(Ok(token))` when the provider issued one,
    /// `Ok(Err(refusal))` when it answered with an OAuth error.
    ///
    /// # Errors
    ///
    /// When the client is not configured or the request fails.
    pub async fn exchange_token(
        &self,
        request: &ExchangeRequest,
    ) -> anyhow::Result<Result<TokenResponse, OAuthError>> {
        let mut form = vec![
            ("grant_type", TOKEN_EXCHANGE_GRANT),
            ("subject_token", request.subject_token.as_str()),
            ("subject_token_type", ACCESS_TOKEN_TYPE),
        ];
        if let Some(audience) = &request.audience {
            form.push(("audience", audience));
        }
        if let Some(resource) = &request.resource {
            form.push(("resource", resource));
        }
        if let Some(scope) = &request.scope {
            form.push(("scope", scope));
        }
        self.token_request(&request.client_id, form).await
    }

    /// How many token-exchange requests the provider answered for `subject` (an account id)
    /// so far, issued and refused together.
    ///
    /// # Errors
    ///
    /// When the provider cannot be asked.
    pub async fn exchanges(&self, subject: &str) -> anyhow::Result<u64> {
        let counts = self.exchange_counts().await?;
        Ok(counts
            .get(subject)
            .map_or(0, |count| count.issued + count.refused))
    }

    /// Every subject's token-exchange count (`GET /test/exchanges`).
    ///
    /// # Errors
    ///
    /// When the provider cannot be asked.
    pub async fn exchange_counts(&self) -> anyhow::Result<BTreeMap<String, ExchangeCount>> {
        let response = self
            .http
            .get(format!("{}/test/exchanges", self.issuer))
            .send()
            .await
            .context("GET /test/exchanges")?;
        let status = response.status();
        if !status.is_success() {
            bail!("GET /test/exchanges answered {status}");
        }
        response
            .json()
            .await
            .context("GET /test/exchanges: not the expected JSON")
    }

    /// Replaces the token-exchange policy of the running provider
    /// (`PUT /test/token-exchange-policy`), for example to start refusing an account.
    ///
    /// # Errors
    ///
    /// When the provider refuses the policy or cannot be asked.
    pub async fn set_exchange_policy(&self, policy: &ExchangePolicy) -> anyhow::Result<()> {
        let response = self
            .http
            .put(format!("{}/test/token-exchange-policy", self.issuer))
            .json(policy)
            .send()
            .await
            .context("PUT /test/token-exchange-policy")?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let text = response.text().await.unwrap_or_default();
        bail!("PUT /test/token-exchange-policy answered {status}: {text}")
    }

    /// Changes the account a login without `login_hint` signs in as (`None`: show the form)
    /// on the running provider (`PUT /test/auto-login`).
    ///
    /// # Errors
    ///
    /// When `account` is not configured or the provider cannot be asked.
    pub async fn set_auto_login(&self, account: Option<&str>) -> anyhow::Result<()> {
        let response = self
            .http
            .put(format!("{}/test/auto-login", self.issuer))
            .json(&serde_json::json!({ "account": account }))
            .send()
            .await
            .context("PUT /test/auto-login")?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let text = response.text().await.unwrap_or_default();
        bail!("PUT /test/auto-login answered {status}: {text}")
    }

    /// A form POST to the token endpoint, authenticated as `client_id` is configured to.
    async fn token_request(
        &self,
        client_id: &str,
        mut form: Vec<(&str, &str)>,
    ) -> anyhow::Result<Result<TokenResponse, OAuthError>> {
        let Some(client) = self.clients.get(client_id) else {
            bail!("client {client_id:?} is not configured");
        };
        let mut request = self.http.post(self.token_endpoint());
        match client.token_endpoint_auth_method {
            ClientAuthMethod::ClientSecretBasic => {
                let credentials = format!(
                    "{}:{}",
                    form_encode(&client.client_id),
                    form_encode(&client.client_secret)
                );
                let encoded = base64::engine::general_purpose::STANDARD.encode(credentials);
                request = request.header("authorization", format!("Basic {encoded}"));
            }
            ClientAuthMethod::ClientSecretPost => {
                form.push(("client_id", &client.client_id));
                form.push(("client_secret", &client.client_secret));
            }
        }
        let body = form
            .iter()
            .map(|(name, value)| format!("{}={}", form_encode(name), form_encode(value)))
            .collect::<Vec<_>>()
            .join("&");
        let response = request
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .context("POST to the token endpoint")?;
        token_answer(response).await
    }
}

/// A token endpoint's answer: a token, an OAuth error, or (as an error) anything else.
async fn token_answer(
    response: reqwest::Response,
) -> anyhow::Result<Result<TokenResponse, OAuthError>> {
    let status = response.status();
    let text = response
        .text()
        .await
        .context("read the token endpoint's answer")?;
    if status.is_success() {
        let token: TokenResponse = serde_json::from_str(&text)
            .with_context(|| format!("HTTP {status}: not a token response"))?;
        return Ok(Ok(token));
    }
    #[derive(Deserialize)]
    struct ErrorBody {
        error: String,
        error_description: Option<String>,
    }
    match serde_json::from_str::<ErrorBody>(&text) {
        Ok(body) => Ok(Err(OAuthError {
            status: status.as_u16(),
            error: body.error,
            description: body.error_description,
        })),
        Err(_) => bail!(
            "HTTP {status} without an OAuth error body: {}",
            install::tail(&text, 500)
        ),
    }
}

/// `application/x-www-form-urlencoded` encoding of one name or value.
fn form_encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'*' => {
                encoded.push(char::from(byte));
            }
            b' ' => encoded.push('+'),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

/// Reads `stream` to its end, keeping its last [`STDERR_KEPT`] bytes in `kept`.
async fn keep_tail(stream: tokio::process::ChildStderr, kept: Arc<Mutex<String>>) {
    let mut stream = stream;
    let mut buffer = [0_u8; 4096];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                let mut text = kept.lock().unwrap_or_else(PoisonError::into_inner);
                text.push_str(&String::from_utf8_lossy(&buffer[..read]));
                if text.len() > 2 * STDERR_KEPT {
                    let keep = install::tail(&text, STDERR_KEPT).to_owned();
                    *text = keep;
                }
            }
        }
    }
}

fn snapshot(kept: &Mutex<String>) -> String {
    let text = kept.lock().unwrap_or_else(PoisonError::into_inner);
    install::tail(&text, STDERR_KEPT).to_owned()
}

/// Says on the terminal, past libtest's capture, that a test returned without running.
fn announce_skip(test: &str, unavailable: &Unavailable) {
    use std::io::Write as _;
    // Best effort: a notice that cannot be written changes no test's outcome.
    let _ = writeln!(
        std::io::stderr().lock(),
        "\nnote: {test} did not run (it returns at once and counts as passed): {unavailable}\n"
    );
}
