//! Identity end to end: API keys, anonymous access, and OIDC access tokens
//! checked against a local OpenID provider.
//!
//! The provider is a small hyper server on `127.0.0.1:0` that serves a discovery
//! document and a key set built from the fixed test keys in `tests/fixtures/`;
//! the tests sign their tokens with the same keys through jsonwebtoken. It counts
//! key-set fetches, so caching and the refetch limit are observable.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use docket_server::auth::{
    ApiKeyConfig, Attributes, AuthConfig, AuthError, Authenticator, Identity, IdentityKind,
    OidcConfig, key_sha256_hex,
};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use jsonwebtoken::jwk::{Jwk, JwkSet, PublicKeyUse};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const AUDIENCE: &str = "docket";
const ALICE_KEY: &str = "alice-0f9c2b7e5d4a3c1b8e6f";
const BOB_KEY: &str = "bob-7d1e4a9c2f6b8e3d5a0c";

/// A signing key from `tests/fixtures/` and the public JWK the provider publishes for it.
struct TestKey {
    algorithm: Algorithm,
    key_id: &'static str,
    encoding: EncodingKey,
    jwk: Jwk,
}

impl TestKey {
    fn load(file: &str, algorithm: Algorithm, key_id: &'static str) -> Result<Self> {
        let path = format!("{}/tests/fixtures/{file}", env!("CARGO_MANIFEST_DIR"));
        let pem = std::fs::read(&path).with_context(|| format!("reading {path}"))?;
        let encoding = match algorithm {
            Algorithm::ES256 => EncodingKey::from_ec_pem(&pem),
            _ => EncodingKey::from_rsa_pem(&pem),
        }
        .with_context(|| format!("parsing {path}"))?;
        let mut jwk = Jwk::from_encoding_key(&encoding, algorithm)?;
        jwk.common.key_id = Some(key_id.to_owned());
        jwk.common.public_key_use = Some(PublicKeyUse::Signature);
        Ok(Self {
            algorithm,
            key_id,
            encoding,
            jwk,
        })
    }

    /// The RS256 key the provider publishes as `primary`.
    fn primary() -> Result<Self> {
        Self::load("oidc_rsa_primary.pem", Algorithm::RS256, "primary")
    }

    /// An RS256 key the provider never publishes.
    fn other() -> Result<Self> {
        Self::load("oidc_rsa_other.pem", Algorithm::RS256, "other")
    }

    /// The ES256 key the provider publishes after a rotation.
    fn rotated() -> Result<Self> {
        Self::load("oidc_ec_rotated.pem", Algorithm::ES256, "rotated")
    }

    /// `claims` signed with this key, under the key id `key_id`.
    fn sign_as(&self, key_id: &str, claims: &Value) -> Result<String> {
        let mut header = Header::new(self.algorithm);
        header.kid = Some(key_id.to_owned());
        Ok(jsonwebtoken::encode(&header, claims, &self.encoding)?)
    }

    /// `claims` signed with this key under its own key id.
    fn sign(&self, claims: &Value) -> Result<String> {
        self.sign_as(self.key_id, claims)
    }
}

/// What the provider serves, shared with its connection tasks.
struct ProviderState {
    issuer: String,
    key_set: Mutex<Value>,
    key_set_fetches: AtomicUsize,
}

impl ProviderState {
    fn answer(&self, path: &str) -> Response<Full<Bytes>> {
        let (status, body) = match path {
            "/.well-known/openid-configuration" => (
                StatusCode::OK,
                json!({
                    "issuer": self.issuer,
                    "jwks_uri": format!("{}/jwks", self.issuer),
                    "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                }),
            ),
            "/jwks" => {
                self.key_set_fetches.fetch_add(1, Ordering::SeqCst);
                let key_set = self.key_set.lock().unwrap_or_else(PoisonError::into_inner);
                (StatusCode::OK, key_set.clone())
            }
            _ => (StatusCode::NOT_FOUND, json!({"error": "not found"})),
        };
        let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
        *response.status_mut() = status;
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// A local OpenID provider: discovery document and key set, nothing else.
struct Provider {
    state: Arc<ProviderState>,
    accept_loop: JoinHandle<()>,
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.accept_loop.abort();
    }
}

impl Provider {
    async fn start(keys: &[&TestKey]) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let state = Arc::new(ProviderState {
            issuer: format!("http://{}", listener.local_addr()?),
            key_set: Mutex::new(Value::Null),
            key_set_fetches: AtomicUsize::new(0),
        });
        let provider_state = Arc::clone(&state);
        let accept_loop = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = Arc::clone(&provider_state);
                tokio::spawn(async move {
                    let service = service_fn(move |request: Request<Incoming>| {
                        let response = state.answer(request.uri().path());
                        async move { Ok::<_, Infallible>(response) }
                    });
                    // A client hanging up mid-request is not the test's concern.
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        let provider = Self { state, accept_loop };
        provider.publish(keys)?;
        Ok(provider)
    }

    fn issuer(&self) -> &str {
        &self.state.issuer
    }

    /// Replaces the published key set with `keys`.
    fn publish(&self, keys: &[&TestKey]) -> Result<()> {
        let key_set = JwkSet {
            keys: keys.iter().map(|key| key.jwk.clone()).collect(),
        };
        *self
            .state
            .key_set
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = serde_json::to_value(key_set)?;
        Ok(())
    }

    fn key_set_fetches(&self) -> usize {
        self.state.key_set_fetches.load(Ordering::SeqCst)
    }

    /// An authenticator that trusts this provider, with Alice's API key too.
    fn authenticator(&self) -> Result<Authenticator> {
        Ok(Authenticator::new(&AuthConfig {
            api_keys: vec![alice()],
            oidc: Some(oidc_config(self.issuer())),
            ..AuthConfig::default()
        })?)
    }

    /// Claims that a correct token from this provider carries.
    fn claims(&self) -> Value {
        let now = unix_now();
        json!({
            "iss": self.issuer(),
            "aud": AUDIENCE,
            "sub": "user-123",
            "iat": now,
            "exp": now + 300,
            "name": "Ada Lovelace",
            "preferred_username": "ada",
            "email": "ada@example.com",
            "realm_access": {"roles": ["analyst", "viewer"]},
        })
    }
}

fn oidc_config(issuer: &str) -> OidcConfig {
    OidcConfig {
        issuer: issuer.to_owned(),
        audience: AUDIENCE.to_owned(),
        role_claim: "realm_access.roles".to_owned(),
        ..OidcConfig::default()
    }
}

fn alice() -> ApiKeyConfig {
    ApiKeyConfig {
        name: "alice".to_owned(),
        key: Some(ALICE_KEY.to_owned()),
        email: Some("alice@example.com".to_owned()),
        roles: vec!["analyst".to_owned()],
        ..ApiKeyConfig::default()
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default()
}

fn with_claim(mut claims: Value, name: &str, value: Value) -> Value {
    claims[name] = value;
    claims
}

fn headers(name: &'static str, value: &str) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    headers.insert(name, HeaderValue::from_str(value)?);
    Ok(headers)
}

async fn bearer(authenticator: &Authenticator, token: &str) -> Result<Arc<Identity>, AuthError> {
    match headers("authorization", &format!("Bearer {token}")) {
        Ok(headers) => authenticator.authenticate(&headers).await,
        Err(_) => Err(AuthError::MissingCredentials),
    }
}

/// The reason of an [`AuthError::InvalidCredentials`], or a test failure.
fn invalid_reason(result: Result<Arc<Identity>, AuthError>) -> Result<String> {
    match result {
        Err(AuthError::InvalidCredentials { reason }) => Ok(reason),
        other => bail!("expected invalid credentials, got {other:?}"),
    }
}

#[tokio::test]
async fn valid_token_gives_an_identity_with_roles_from_a_nested_claim() -> Result<()> {
    let primary = TestKey::primary()?;
    let provider = Provider::start(&[&primary]).await?;
    let authenticator = provider.authenticator()?;

    let token = primary.sign(&provider.claims())?;
    let identity = bearer(&authenticator, &token).await?;
    assert_eq!(
        *identity,
        Identity {
            subject: "oidc:user-123".to_owned(),
            display_name: "Ada Lovelace".to_owned(),
            email: Some("ada@example.com".to_owned()),
            roles: vec!["analyst".to_owned(), "viewer".to_owned()],
            kind: IdentityKind::Oidc,
            run: None,
            attributes: identity.attributes.clone(),
        }
    );
    // The verified claims are kept for upstream identity, and the token for an
    // exchange only: never in Debug output.
    let attributes = &identity.attributes;
    assert_eq!(
        attributes.claims.get("email"),
        Some(&json!("ada@example.com"))
    );
    assert_eq!(attributes.claims.get("sub"), Some(&json!("user-123")));
    assert_eq!(
        attributes.token.as_ref().map(|t| t.expose()),
        Some(token.as_str())
    );
    assert!(!format!("{identity:?}").contains(&token), "{identity:?}");

    // An audience list that contains ours is fine; without `name` the display
    // name falls back to the username; an unverified e-mail address is dropped.
    let claims = with_claim(provider.claims(), "aud", json!(["account", AUDIENCE]));
    let mut claims = with_claim(claims, "email_verified", json!(false));
    if let Some(object) = claims.as_object_mut() {
        object.remove("name");
    }
    let identity = bearer(&authenticator, &primary.sign(&claims)?).await?;
    assert_eq!(identity.display_name, "ada");
    assert_eq!(identity.email, None);

    // A token without a key id is checked against the keys that fit its algorithm.
    let without_key_id = jsonwebtoken::encode(
        &Header::new(Algorithm::RS256),
        &provider.claims(),
        &primary.encoding,
    )?;
    assert_eq!(
        bearer(&authenticator, &without_key_id).await?.subject,
        "oidc:user-123"
    );

    // All three tokens were checked against one fetch of the key set.
    assert_eq!(provider.key_set_fetches(), 1);
    Ok(())
}

#[tokio::test]
async fn token_for_another_audience_is_invalid() -> Result<()> {
    let primary = TestKey::primary()?;
    let provider = Provider::start(&[&primary]).await?;
    let authenticator = provider.authenticator()?;
    let claims = with_claim(
        provider.claims(),
        "aud",
        json!(["account", "another-service"]),
    );
    let reason = invalid_reason(bearer(&authenticator, &primary.sign(&claims)?).await)?;
    assert!(reason.contains("audience"), "{reason}");
    Ok(())
}

#[tokio::test]
async fn token_from_another_issuer_is_invalid() -> Result<()> {
    let primary = TestKey::primary()?;
    let provider = Provider::start(&[&primary]).await?;
    let authenticator = provider.authenticator()?;
    let claims = with_claim(
        provider.claims(),
        "iss",
        json!("https://idp.attacker.example"),
    );
    let reason = invalid_reason(bearer(&authenticator, &primary.sign(&claims)?).await)?;
    assert!(reason.contains("issuer"), "{reason}");
    Ok(())
}

#[tokio::test]
async fn expired_token_is_invalid_beyond_the_leeway() -> Result<()> {
    let primary = TestKey::primary()?;
    let provider = Provider::start(&[&primary]).await?;
    let authenticator = provider.authenticator()?;

    let expired = with_claim(provider.claims(), "exp", json!(unix_now() - 120));
    let reason = invalid_reason(bearer(&authenticator, &primary.sign(&expired)?).await)?;
    assert!(reason.contains("expired"), "{reason}");

    // Ten seconds past `exp` is within the 30 s allowed for clock skew.
    let just_expired = with_claim(provider.claims(), "exp", json!(unix_now() - 10));
    bearer(&authenticator, &primary.sign(&just_expired)?).await?;
    Ok(())
}

#[tokio::test]
async fn token_not_valid_yet_is_invalid_beyond_the_leeway() -> Result<()> {
    let primary = TestKey::primary()?;
    let provider = Provider::start(&[&primary]).await?;
    let authenticator = provider.authenticator()?;

    let future = with_claim(provider.claims(), "nbf", json!(unix_now() + 300));
    let reason = invalid_reason(bearer(&authenticator, &primary.sign(&future)?).await)?;
    assert!(reason.contains("not valid yet"), "{reason}");

    let nearly_now = with_claim(provider.claims(), "nbf", json!(unix_now() + 10));
    bearer(&authenticator, &primary.sign(&nearly_now)?).await?;
    Ok(())
}

#[tokio::test]
async fn token_with_a_bad_signature_is_invalid() -> Result<()> {
    let primary = TestKey::primary()?;
    let provider = Provider::start(&[&primary]).await?;
    let authenticator = provider.authenticator()?;

    // Signed by a key the provider does not publish, under the published key id.
    let forged = TestKey::other()?.sign_as("primary", &provider.claims())?;
    let reason = invalid_reason(bearer(&authenticator, &forged).await)?;
    assert!(reason.contains("signature"), "{reason}");

    // A genuine token whose claims were changed after signing.
    let genuine = primary.sign(&provider.claims())?;
    let mut parts: Vec<&str> = genuine.split('.').collect();
    let promoted = URL_SAFE_NO_PAD.encode(
        with_claim(
            provider.claims(),
            "realm_access",
            json!({"roles": ["admin"]}),
        )
        .to_string(),
    );
    parts[1] = &promoted;
    let reason = invalid_reason(bearer(&authenticator, &parts.join(".")).await)?;
    assert!(reason.contains("signature"), "{reason}");
    Ok(())
}

#[tokio::test]
async fn unknown_key_id_is_invalid_and_refetches_are_limited() -> Result<()> {
    let primary = TestKey::primary()?;
    let provider = Provider::start(&[&primary]).await?;
    let authenticator = provider.authenticator()?;
    bearer(&authenticator, &primary.sign(&provider.claims())?).await?;
    assert_eq!(provider.key_set_fetches(), 1);

    let other = TestKey::other()?;
    let stranger = other.sign_as("stranger", &provider.claims())?;
    let reason = invalid_reason(bearer(&authenticator, &stranger).await)?;
    assert!(reason.contains("does not publish"), "{reason}");
    // The unknown key id made the verifier look again, once.
    assert_eq!(provider.key_set_fetches(), 2);

    // More made-up key ids do not turn into more requests to the provider.
    for key_id in ["stranger", "another-stranger", "yet-another"] {
        let token = other.sign_as(key_id, &provider.claims())?;
        invalid_reason(bearer(&authenticator, &token).await)?;
    }
    assert_eq!(provider.key_set_fetches(), 2);
    Ok(())
}

#[tokio::test]
async fn rotated_keys_are_fetched_when_a_token_names_a_new_key_id() -> Result<()> {
    let primary = TestKey::primary()?;
    let rotated = TestKey::rotated()?;
    let provider = Provider::start(&[&primary]).await?;
    let authenticator = provider.authenticator()?;
    bearer(&authenticator, &primary.sign(&provider.claims())?).await?;

    // The provider rotates to an ES256 key and withdraws the old one.
    provider.publish(&[&rotated])?;
    let identity = bearer(&authenticator, &rotated.sign(&provider.claims())?).await?;
    assert_eq!(identity.subject, "oidc:user-123");
    assert_eq!(provider.key_set_fetches(), 2);

    // Tokens signed with the withdrawn key are refused from now on.
    let old = primary.sign(&provider.claims())?;
    invalid_reason(bearer(&authenticator, &old).await)?;
    Ok(())
}

#[tokio::test]
async fn unsigned_and_hmac_tokens_are_invalid_without_contacting_the_provider() -> Result<()> {
    let primary = TestKey::primary()?;
    let provider = Provider::start(&[&primary]).await?;
    let authenticator = provider.authenticator()?;

    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT","kid":"primary"}"#);
    let payload = URL_SAFE_NO_PAD.encode(provider.claims().to_string());
    for unsigned in [
        format!("{header}.{payload}."),
        format!("{header}.{payload}.c2ln"),
    ] {
        let reason = invalid_reason(bearer(&authenticator, &unsigned).await)?;
        assert!(reason.contains("none"), "{reason}");
    }

    // The classic key confusion: HS256 "signed" with the provider's public key.
    let public_key = serde_json::to_vec(&primary.jwk)?;
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("primary".to_owned());
    let hmac = jsonwebtoken::encode(
        &header,
        &provider.claims(),
        &EncodingKey::from_secret(&public_key)?,
    )?;
    let reason = invalid_reason(bearer(&authenticator, &hmac).await)?;
    assert!(reason.contains("HMAC"), "{reason}");

    assert_eq!(provider.key_set_fetches(), 0);
    Ok(())
}

#[tokio::test]
async fn token_without_a_subject_is_invalid() -> Result<()> {
    let primary = TestKey::primary()?;
    let provider = Provider::start(&[&primary]).await?;
    let authenticator = provider.authenticator()?;
    let mut claims = provider.claims();
    if let Some(object) = claims.as_object_mut() {
        object.remove("sub");
    }
    let reason = invalid_reason(bearer(&authenticator, &primary.sign(&claims)?).await)?;
    assert!(reason.contains("sub"), "{reason}");

    let empty_subject = with_claim(provider.claims(), "sub", json!(""));
    invalid_reason(bearer(&authenticator, &primary.sign(&empty_subject)?).await)?;
    Ok(())
}

#[tokio::test]
async fn unreachable_provider_is_unavailable_and_api_keys_keep_working() -> Result<()> {
    // A port that was just free: nothing listens there.
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let issuer = format!("http://{}", listener.local_addr()?);
    drop(listener);

    let authenticator = Authenticator::new(&AuthConfig {
        api_keys: vec![alice()],
        oidc: Some(oidc_config(&issuer)),
        ..AuthConfig::default()
    })?;
    let primary = TestKey::primary()?;
    let claims = json!({"iss": issuer, "aud": AUDIENCE, "sub": "u", "exp": unix_now() + 300});
    let token = primary.sign(&claims)?;
    for _ in 0..2 {
        let result = bearer(&authenticator, &token).await;
        assert!(
            matches!(result, Err(AuthError::Unavailable { .. })),
            "{result:?}"
        );
    }

    let identity = bearer(&authenticator, ALICE_KEY).await?;
    assert_eq!(identity.subject, "apikey:alice");
    Ok(())
}

#[tokio::test]
async fn api_keys_work_as_bearer_tokens_and_in_x_api_key() -> Result<()> {
    let authenticator = Authenticator::new(&AuthConfig {
        api_keys: vec![
            alice(),
            ApiKeyConfig {
                name: "bob".to_owned(),
                key_sha256: Some(key_sha256_hex(BOB_KEY)),
                roles: vec!["engineer".to_owned(), "analyst".to_owned()],
                ..ApiKeyConfig::default()
            },
        ],
        ..AuthConfig::default()
    })?;
    let alice_identity = Identity {
        subject: "apikey:alice".to_owned(),
        display_name: "alice".to_owned(),
        email: Some("alice@example.com".to_owned()),
        roles: vec!["analyst".to_owned()],
        kind: IdentityKind::ApiKey,
        run: None,
        attributes: Attributes {
            claims: Arc::new(
                json!({"sub": "apikey:alice", "name": "alice", "email": "alice@example.com"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
            key_user: None,
            token: None,
        },
    };

    assert_eq!(*bearer(&authenticator, ALICE_KEY).await?, alice_identity);
    let via_header = authenticator
        .authenticate(&headers("x-api-key", ALICE_KEY)?)
        .await?;
    assert_eq!(*via_header, alice_identity);

    // A key configured only by its digest.
    let bob = bearer(&authenticator, BOB_KEY).await?;
    assert_eq!(bob.subject, "apikey:bob");
    assert_eq!(bob.roles, ["engineer", "analyst"]);
    assert_eq!(bob.email, None);

    // Bearer wins over X-API-Key when both are sent.
    let mut both = headers("authorization", &format!("Bearer {BOB_KEY}"))?;
    both.insert("x-api-key", HeaderValue::from_static(ALICE_KEY));
    assert_eq!(
        authenticator.authenticate(&both).await?.subject,
        "apikey:bob"
    );
    Ok(())
}

#[tokio::test]
async fn wrong_api_keys_are_invalid_and_never_echoed() -> Result<()> {
    let primary = TestKey::primary()?;
    let provider = Provider::start(&[&primary]).await?;
    let authenticator = provider.authenticator()?;
    let wrong = "alice-0f9c2b7e5d4a3c1b8e6X";

    let via_bearer = bearer(&authenticator, wrong).await;
    let via_header = authenticator
        .authenticate(&headers("x-api-key", wrong)?)
        .await;
    for result in [via_bearer, via_header] {
        let shown = format!("{result:?}");
        let reason = invalid_reason(result)?;
        assert!(!reason.contains(wrong), "{reason}");
        assert!(!shown.contains(wrong), "{shown}");
    }
    // A JWT-shaped value sent as X-API-Key is only ever an API key.
    let token = primary.sign(&provider.claims())?;
    let as_api_key = authenticator
        .authenticate(&headers("x-api-key", &token)?)
        .await;
    invalid_reason(as_api_key)?;
    // Neither a wrong key nor a JWT in X-API-Key made the server call the provider.
    assert_eq!(provider.key_set_fetches(), 0);
    Ok(())
}

#[tokio::test]
async fn no_credentials_is_missing_or_anonymous_per_configuration() -> Result<()> {
    let closed = Authenticator::new(&AuthConfig {
        api_keys: vec![alice()],
        ..AuthConfig::default()
    })?;
    let result = closed.authenticate(&HeaderMap::new()).await;
    assert!(
        matches!(result, Err(AuthError::MissingCredentials)),
        "{result:?}"
    );

    let open = Authenticator::new(&AuthConfig {
        allow_anonymous: true,
        anonymous_roles: vec!["guest".to_owned()],
        api_keys: vec![alice()],
        ..AuthConfig::default()
    })?;
    let anonymous = open.authenticate(&HeaderMap::new()).await?;
    assert_eq!(
        *anonymous,
        Identity {
            subject: "anonymous".to_owned(),
            display_name: "anonymous".to_owned(),
            email: None,
            roles: vec!["guest".to_owned()],
            kind: IdentityKind::Anonymous,
            run: None,
            attributes: Default::default(),
        }
    );
    // Anonymous access does not excuse wrong credentials.
    invalid_reason(bearer(&open, "not-a-key").await)?;
    assert_eq!(bearer(&open, ALICE_KEY).await?.subject, "apikey:alice");
    Ok(())
}

#[test]
fn debug_output_never_contains_secrets() -> Result<()> {
    let config: AuthConfig = serde_json::from_value(json!({
        "allow_anonymous": false,
        "api_keys": [
            {"name": "alice", "key": ALICE_KEY, "roles": ["analyst"]},
            {"name": "bob", "key_sha256": key_sha256_hex(BOB_KEY)},
        ],
        "oidc": {"issuer": "https://idp.example", "audience": AUDIENCE},
    }))?;
    assert!(config.problems().is_empty(), "{:?}", config.problems());
    let debug = format!("{config:?} {config:#?}");
    assert!(debug.contains("alice"), "{debug}");
    assert!(!debug.contains(ALICE_KEY), "{debug}");
    assert!(!debug.contains(&key_sha256_hex(BOB_KEY)), "{debug}");

    let authenticator = Authenticator::new(&config)?;
    let debug = format!("{authenticator:?}");
    assert!(!debug.contains(ALICE_KEY), "{debug}");
    assert!(!debug.contains(&key_sha256_hex(ALICE_KEY)), "{debug}");
    Ok(())
}

#[test]
fn invalid_configuration_is_refused_with_every_problem() -> Result<()> {
    let config: AuthConfig = serde_json::from_value(json!({
        "api_keys": [
            {"name": "alice", "key": ALICE_KEY, "key_sha256": key_sha256_hex(ALICE_KEY)},
            {"name": "bob"},
        ],
        "oidc": {"issuer": "http://idp.example", "audience": AUDIENCE, "allowed_algorithms": ["HS256"]},
    }))?;
    let problems = config.problems();
    assert_eq!(
        problems,
        [
            "auth.api_keys[0]: set either key or key_sha256, not both",
            "auth.api_keys[1]: set either key or key_sha256",
            "auth.oidc.issuer: must be an https:// URL (http:// is allowed only for a loopback host)",
            "auth.oidc.allowed_algorithms[0]: HS256 is an HMAC algorithm; only asymmetric algorithms are accepted",
        ]
    );
    match Authenticator::new(&config) {
        Err(AuthError::Config(message)) => {
            assert!(message.contains("auth.api_keys[1]"), "{message}");
            assert!(!message.contains(ALICE_KEY), "{message}");
        }
        other => bail!("expected a configuration error, got {other:?}"),
    }
    Ok(())
}

#[test]
fn protected_resource_metadata_names_the_issuer() -> Result<()> {
    let resource = "https://docket.example/mcp";
    let with_oidc = Authenticator::new(&AuthConfig {
        oidc: Some(oidc_config("https://idp.example/realms/main")),
        ..AuthConfig::default()
    })?;
    assert_eq!(
        with_oidc.protected_resource_metadata(resource),
        json!({
            "resource": resource,
            "resource_name": "Docket",
            "authorization_servers": ["https://idp.example/realms/main"],
            "bearer_methods_supported": ["header"],
        })
    );

    let keys_only = Authenticator::new(&AuthConfig {
        api_keys: vec![alice()],
        ..AuthConfig::default()
    })?;
    let metadata = keys_only.protected_resource_metadata(resource);
    assert_eq!(metadata["resource"], resource);
    assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    assert!(
        metadata.get("authorization_servers").is_none(),
        "{metadata}"
    );
    Ok(())
}

#[test]
fn authenticator_can_be_shared_across_tasks() -> Result<()> {
    fn assert_send_sync<T: Send + Sync>(_: &T) {}
    fn assert_send<T: Send>(_: &T) {}
    let authenticator = Authenticator::new(&AuthConfig::default())?;
    assert_send_sync(&authenticator);
    let headers = HeaderMap::new();
    // A hyper service needs the authentication future itself to be `Send`.
    let future = authenticator.authenticate(&headers);
    assert_send(&future);
    drop(future);
    Ok(())
}
