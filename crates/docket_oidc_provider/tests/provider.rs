//! The OpenID provider for tests, started for real: discovery, user tokens through the
//! authorization code flow, client credentials, and RFC 8693 token exchange with its policy
//! and counts.
//!
//! Without Node or npm each case says so on the terminal and returns; with
//! `DOCKET_REQUIRE_OIDC_PROVIDER=1` (CI) that is a failure.

use std::collections::BTreeMap;

use base64::Engine as _;
use docket_oidc_provider::{
    ACCESS_TOKEN_TYPE, Account, Client, ClientAuthMethod, DEFAULT_REDIRECT_URI, ExchangeCount,
    ExchangePolicy, ExchangeRequest, GrantType, OAuthError, OidcProvider, ProviderConfig, Resource,
    jwt_claims,
};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, jwk::JwkSet};
use serde_json::{Value, json};

const DOCKET: &str = "http://127.0.0.1/docket";
const TRINO: &str = "http://127.0.0.1/trino";
const GRAPHQL: &str = "http://127.0.0.1/graphql";
const CLIENT: &str = "docket";
const SECRET: &str = "docket-test-secret";
const OTHER_CLIENT: &str = "other";
const EXCHANGE_TTL: u64 = 120;

fn config() -> ProviderConfig {
    ProviderConfig::new()
        .account(
            "alice",
            Account::new()
                .email("alice@example.com")
                .preferred_username("alice")
                .name("Alice Example")
                .roles(["analyst", "admin"]),
        )
        .account(
            "mallory",
            Account::new()
                .email("mallory@example.com")
                .preferred_username("mallory"),
        )
        .client(Client::new(CLIENT, SECRET).grant_types([
            GrantType::AuthorizationCode,
            GrantType::RefreshToken,
            GrantType::ClientCredentials,
            GrantType::TokenExchange,
        ]))
        .client(
            Client::new(OTHER_CLIENT, "other secret with spaces & symbols")
                .grant_types([GrantType::ClientCredentials, GrantType::TokenExchange])
                .auth_method(ClientAuthMethod::ClientSecretPost),
        )
        .resource(DOCKET, Resource::new().scopes(["mcp"]))
        .resource(TRINO, Resource::new().scopes(["query", "admin"]))
        .resource(GRAPHQL, Resource::new())
        .token_exchange(
            ExchangePolicy::new()
                .allow(CLIENT, TRINO)
                .refuse_account("mallory")
                .expires_in(EXCHANGE_TTL),
        )
}

async fn start(test: &str) -> Option<OidcProvider> {
    OidcProvider::start_or_skip(config(), test)
        .await
        .expect("the OpenID provider starts")
}

async fn get_json(url: &str) -> Value {
    let response = reqwest::get(url).await.expect("GET");
    assert!(
        response.status().is_success(),
        "GET {url}: {}",
        response.status()
    );
    response.json().await.expect("JSON")
}

/// Verifies `token`'s signature with the provider's published key, and its issuer and
/// audience; answers its claims.
async fn verified(provider: &OidcProvider, token: &str, audience: &str) -> Value {
    let jwks: JwkSet =
        serde_json::from_value(get_json(&provider.jwks_uri()).await).expect("a JWKS");
    let header = jsonwebtoken::decode_header(token).expect("a JWT header");
    assert_eq!(header.alg, Algorithm::RS256);
    assert_eq!(header.typ.as_deref(), Some("at+jwt"));
    let kid = header.kid.expect("a kid");
    let jwk = jwks.find(&kid).expect("the signing key is published");
    let key = DecodingKey::from_jwk(jwk).expect("an RSA key");
    let mut validation = Validation::new(Algorithm::RS256);
    validation.set_audience(&[audience]);
    validation.set_issuer(&[provider.issuer()]);
    validation.set_required_spec_claims(&["exp", "iat", "iss", "sub", "aud"]);
    jsonwebtoken::decode::<Value>(token, &key, &validation)
        .expect("the token verifies")
        .claims
}

fn refusal(answer: Result<docket_oidc_provider::TokenResponse, OAuthError>) -> OAuthError {
    answer.expect_err("the exchange is refused")
}

#[tokio::test]
async fn discovery_names_the_issuer_keys_and_grants() {
    let Some(provider) = start("discovery_names_the_issuer_keys_and_grants").await else {
        return;
    };
    let discovery = get_json(&provider.discovery_url()).await;
    assert_eq!(discovery["issuer"], json!(provider.issuer()));
    assert_eq!(discovery["jwks_uri"], json!(provider.jwks_uri()));
    assert_eq!(
        discovery["token_endpoint"],
        json!(provider.token_endpoint())
    );
    assert!(provider.issuer().starts_with("http://127.0.0.1:"));
    let grants = discovery["grant_types_supported"]
        .as_array()
        .expect("grant types");
    for grant in [
        "authorization_code",
        "client_credentials",
        "urn:ietf:params:oauth:grant-type:token-exchange",
    ] {
        assert!(grants.contains(&json!(grant)), "{grant} in {grants:?}");
    }
    assert_eq!(
        discovery["code_challenge_methods_supported"],
        json!(["S256"])
    );

    let jwks = get_json(&provider.jwks_uri()).await;
    let keys = jwks["keys"].as_array().expect("keys");
    assert_eq!(keys.len(), 1);
    assert_eq!(keys[0]["kty"], "RSA");
    assert_eq!(keys[0]["alg"], "RS256");
    assert!(
        keys[0].get("d").is_none(),
        "only the public key is published"
    );
}

#[tokio::test]
async fn a_user_token_is_a_signed_jwt_with_the_accounts_claims() {
    let Some(provider) = start("a_user_token_is_a_signed_jwt_with_the_accounts_claims").await
    else {
        return;
    };
    let token = provider
        .user_token("alice", CLIENT, DOCKET)
        .await
        .expect("a user token");

    let claims = jwt_claims(&token).expect("claims");
    assert_eq!(claims["aud"], DOCKET);
    assert_eq!(claims["email"], "alice@example.com");

    let claims = verified(&provider, &token, DOCKET).await;
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["iss"], json!(provider.issuer()));
    assert_eq!(claims["client_id"], CLIENT);
    assert_eq!(claims["scope"], "mcp");
    assert_eq!(claims["email"], "alice@example.com");
    assert_eq!(claims["email_verified"], true);
    assert_eq!(claims["preferred_username"], "alice");
    assert_eq!(claims["name"], "Alice Example");
    assert_eq!(claims["roles"], json!(["analyst", "admin"]));
    assert!(claims.get("act").is_none());
    let (iat, exp) = (claims["iat"].as_u64(), claims["exp"].as_u64());
    assert_eq!(
        exp.zip(iat).map(|(exp, iat)| exp - iat),
        Some(docket_oidc_provider::DEFAULT_ACCESS_TOKEN_TTL)
    );
}

#[tokio::test]
async fn the_login_answers_an_id_token_and_refuses_strangers() {
    let Some(provider) = start("the_login_answers_an_id_token_and_refuses_strangers").await else {
        return;
    };
    let tokens = provider
        .login("alice", CLIENT, Some(DOCKET), Some("openid email mcp"))
        .await
        .expect("a login");
    assert_eq!(tokens.token_type, "Bearer");
    let id_token = jwt_claims(tokens.id_token.as_deref().expect("an ID token")).expect("claims");
    assert_eq!(id_token["sub"], "alice");
    assert_eq!(id_token["aud"], CLIENT);
    assert_eq!(id_token["email"], "alice@example.com");
    assert!(
        tokens.refresh_token.is_none(),
        "no offline_access, no refresh token"
    );
    let offline = provider
        .login(
            "alice",
            CLIENT,
            Some(DOCKET),
            Some("openid offline_access mcp"),
        )
        .await
        .expect("a login with offline_access");
    assert!(offline.refresh_token.is_some(), "{offline:?}");

    let error = provider
        .user_token("nobody", CLIENT, DOCKET)
        .await
        .expect_err("no such account");
    let oauth = error.downcast_ref::<OAuthError>().expect("an OAuth error");
    assert_eq!(oauth.error, "invalid_request");

    let error = provider
        .user_token("alice", CLIENT, "http://127.0.0.1/unknown")
        .await
        .expect_err("no such resource");
    let oauth = error.downcast_ref::<OAuthError>().expect("an OAuth error");
    assert_eq!(oauth.error, "invalid_target", "{oauth}");
}

#[tokio::test]
async fn client_credentials_give_the_client_a_token() {
    let Some(provider) = start("client_credentials_give_the_client_a_token").await else {
        return;
    };
    let token = provider
        .client_credentials_token(OTHER_CLIENT, TRINO, Some("query"))
        .await
        .expect("a client token (client_secret_post)");
    let claims = verified(&provider, &token, TRINO).await;
    assert_eq!(claims["sub"], OTHER_CLIENT);
    assert_eq!(claims["client_id"], OTHER_CLIENT);
    assert_eq!(claims["scope"], "query");

    let token = provider
        .client_credentials_token(CLIENT, DOCKET, None)
        .await
        .expect("a client token (client_secret_basic)");
    assert_eq!(verified(&provider, &token, DOCKET).await["sub"], CLIENT);
}

#[tokio::test]
async fn token_exchange_issues_a_token_for_the_audience_with_the_actor() {
    let Some(provider) =
        start("token_exchange_issues_a_token_for_the_audience_with_the_actor").await
    else {
        return;
    };
    let subject = provider
        .user_token("alice", CLIENT, DOCKET)
        .await
        .expect("a user token");
    assert_eq!(provider.exchanges("alice").await.expect("counts"), 0);

    let exchanged = provider
        .exchange_token(&ExchangeRequest::new(CLIENT, &subject, TRINO).scope("query"))
        .await
        .expect("the request")
        .expect("an exchanged token");
    assert_eq!(
        exchanged.issued_token_type.as_deref(),
        Some(ACCESS_TOKEN_TYPE)
    );
    assert_eq!(exchanged.token_type, "Bearer");
    assert_eq!(exchanged.expires_in, Some(EXCHANGE_TTL));
    assert_eq!(exchanged.scope.as_deref(), Some("query"));
    let claims = verified(&provider, &exchanged.access_token, TRINO).await;
    assert_eq!(claims["aud"], TRINO);
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["act"], json!({ "sub": CLIENT }));
    assert_eq!(claims["email"], "alice@example.com");
    assert_eq!(claims["roles"], json!(["analyst", "admin"]));
    assert_eq!(claims["scope"], "query");
    let (iat, exp) = (claims["iat"].as_u64(), claims["exp"].as_u64());
    assert_eq!(exp.zip(iat).map(|(exp, iat)| exp - iat), Some(EXCHANGE_TTL));
    assert_eq!(provider.exchanges("alice").await.expect("counts"), 1);

    // Without a scope the subject token's scopes that the audience offers are kept (none).
    let again = provider
        .exchange_token(&ExchangeRequest::new(CLIENT, &subject, TRINO))
        .await
        .expect("the request")
        .expect("a second exchanged token");
    assert_eq!(again.scope, None);
    assert_eq!(provider.exchanges("alice").await.expect("counts"), 2);

    // An exchanged token can itself be exchanged; the earlier actor nests (RFC 8693 §4.1).
    let chained = provider
        .exchange_token(&ExchangeRequest::new(
            CLIENT,
            &exchanged.access_token,
            TRINO,
        ))
        .await
        .expect("the request")
        .expect("a chained token");
    let claims = jwt_claims(&chained.access_token).expect("claims");
    assert_eq!(
        claims["act"],
        json!({ "sub": CLIENT, "act": { "sub": CLIENT } })
    );
    assert_eq!(
        provider
            .exchange_counts()
            .await
            .expect("counts")
            .get("alice"),
        Some(&ExchangeCount {
            issued: 3,
            refused: 0
        })
    );
}

#[tokio::test]
async fn token_exchange_refusals_are_oauth_errors() {
    let Some(provider) = start("token_exchange_refusals_are_oauth_errors").await else {
        return;
    };
    let alice = provider
        .user_token("alice", CLIENT, DOCKET)
        .await
        .expect("a user token");
    let mallory = provider
        .user_token("mallory", CLIENT, DOCKET)
        .await
        .expect("a user token");
    let exchange = async |request: ExchangeRequest| {
        refusal(
            provider
                .exchange_token(&request)
                .await
                .expect("the request"),
        )
    };

    let refused = exchange(ExchangeRequest::new(CLIENT, &mallory, TRINO)).await;
    assert_eq!(
        (refused.status, refused.error.as_str()),
        (400, "invalid_grant")
    );
    assert!(
        refused
            .description
            .as_deref()
            .is_some_and(|description| description.contains("refused")),
        "{refused}"
    );
    assert_eq!(
        provider
            .exchange_counts()
            .await
            .expect("counts")
            .get("mallory"),
        Some(&ExchangeCount {
            issued: 0,
            refused: 1
        })
    );

    let not_allowed = exchange(ExchangeRequest::new(OTHER_CLIENT, &alice, TRINO)).await;
    assert_eq!(not_allowed.error, "unauthorized_client", "{not_allowed}");
    let wrong_audience = exchange(ExchangeRequest::new(CLIENT, &alice, GRAPHQL)).await;
    assert_eq!(wrong_audience.error, "invalid_target", "{wrong_audience}");
    let unknown_audience = exchange(ExchangeRequest::new(
        CLIENT,
        &alice,
        "http://127.0.0.1/unknown",
    ))
    .await;
    assert_eq!(
        unknown_audience.error, "invalid_target",
        "{unknown_audience}"
    );
    let mut no_target = ExchangeRequest::new(CLIENT, &alice, TRINO);
    no_target.audience = None;
    assert_eq!(exchange(no_target).await.error, "invalid_target");
    let bad_scope = exchange(ExchangeRequest::new(CLIENT, &alice, TRINO).scope("write")).await;
    assert_eq!(bad_scope.error, "invalid_scope", "{bad_scope}");
    assert_eq!(provider.exchanges("alice").await.expect("counts"), 5);

    // Subject tokens this provider did not issue, or no longer vouches for.
    let garbage = exchange(ExchangeRequest::new(CLIENT, "not-a-token", TRINO)).await;
    assert_eq!(garbage.error, "invalid_grant", "{garbage}");
    let mut parts: Vec<String> = alice.split('.').map(str::to_owned).collect();
    let mut claims = jwt_claims(&alice).expect("claims");
    claims.insert("sub".to_owned(), json!("mallory-as-alice"));
    parts[1] = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&claims).expect("JSON"));
    let forged = exchange(ExchangeRequest::new(CLIENT, parts.join("."), TRINO)).await;
    assert_eq!(forged.error, "invalid_grant", "{forged}");
    assert!(
        forged
            .description
            .as_deref()
            .is_some_and(|description| description.contains("signature")),
        "{forged}"
    );
    // Unverified subjects are not counted.
    assert_eq!(
        provider
            .exchanges("mallory-as-alice")
            .await
            .expect("counts"),
        0
    );
    assert_eq!(provider.exchanges("alice").await.expect("counts"), 5);
}

#[tokio::test]
async fn the_exchange_policy_can_change_while_running() {
    let Some(provider) = start("the_exchange_policy_can_change_while_running").await else {
        return;
    };
    let alice = provider
        .user_token("alice", CLIENT, DOCKET)
        .await
        .expect("a user token");
    let request = ExchangeRequest::new(CLIENT, &alice, TRINO);
    provider
        .exchange_token(&request)
        .await
        .expect("the request")
        .expect("allowed at first");

    provider
        .set_exchange_policy(
            &ExchangePolicy::new()
                .allow(CLIENT, TRINO)
                .refuse_account("alice"),
        )
        .await
        .expect("a new policy");
    let refused = refusal(
        provider
            .exchange_token(&request)
            .await
            .expect("the request"),
    );
    assert_eq!(refused.error, "invalid_grant");
    assert_eq!(
        provider
            .exchange_counts()
            .await
            .expect("counts")
            .get("alice"),
        Some(&ExchangeCount {
            issued: 1,
            refused: 1
        })
    );

    let error = provider
        .set_exchange_policy(&ExchangePolicy::new().expires_in(0))
        .await
        .expect_err("a zero lifetime is refused");
    assert!(error.to_string().contains("expires_in"), "{error}");
}

#[tokio::test]
async fn a_bad_configuration_fails_the_start_with_the_providers_reason() {
    let config = config().resource("not a url", Resource::new());
    let error = match OidcProvider::start(config).await {
        Ok(_) => panic!("a resource indicator that is no URL is refused"),
        Err(error) if error.is::<docket_oidc_provider::Unavailable>() => {
            // Said by start_or_skip in the other cases; this one needs no provider to fail.
            eprintln!("note: {error}");
            return;
        }
        Err(error) => error,
    };
    let message = format!("{error:#}");
    assert!(message.contains("is not an absolute URL"), "{message}");
    assert!(
        !message.contains(SECRET),
        "no secret in the message: {message}"
    );
}

/// `application/x-www-form-urlencoded` (and query) encoding.
fn enc(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(byte).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

/// A `Location` made absolute.
fn absolute(issuer: &str, location: String) -> String {
    if location.starts_with('/') {
        format!("{issuer}{location}")
    } else {
        location
    }
}

/// A user agent without a person: remembers cookies, never follows a redirect itself.
struct Browser {
    http: reqwest::Client,
    cookies: BTreeMap<String, String>,
}

impl Browser {
    fn new() -> Self {
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("an HTTP client");
        Self {
            http,
            cookies: BTreeMap::new(),
        }
    }

    /// Sends `request` with the cookies, keeps the ones it sets; answers the status, the
    /// `Location` and the body.
    async fn send(&mut self, request: reqwest::RequestBuilder) -> (u16, Option<String>, String) {
        let cookie = self
            .cookies
            .iter()
            .map(|(name, value)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join("; ");
        let response = request
            .header("cookie", cookie)
            .send()
            .await
            .expect("a response");
        for set in response.headers().get_all("set-cookie") {
            let set = set.to_str().expect("an ASCII cookie");
            let pair = set.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                self.cookies
                    .insert(name.trim().to_owned(), value.trim().to_owned());
            }
        }
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .map(|value| value.to_str().expect("an ASCII location").to_owned());
        (status, location, response.text().await.expect("a body"))
    }

    /// Follows redirects from `url` until one leaves the provider (answered) or a page
    /// answers without one (`Err` with its address and body).
    async fn follow(&mut self, issuer: &str, mut url: String) -> Result<String, (String, String)> {
        for _ in 0..10 {
            let (status, location, body) = self.send(self.http.get(&url)).await;
            let Some(location) = location else {
                assert_eq!(status, 200, "{url}: {body}");
                return Err((url, body));
            };
            url = absolute(issuer, location);
            if !url.starts_with(issuer) {
                return Ok(url);
            }
        }
        panic!("more than 10 redirects");
    }
}

/// A sign-in as a browser makes it, by redirects from `/auth`; `choose` picks the account on
/// the login form when one is shown. Answers the access token for [`DOCKET`].
async fn browser_login(provider: &OidcProvider, choose: Option<&str>) -> String {
    let issuer = provider.issuer();
    let verifier = "a-code-verifier-of-at-least-forty-three-characters";
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(<sha2::Sha256 as sha2::Digest>::digest(verifier.as_bytes()));
    let authorize = format!(
        "{issuer}/auth?client_id={CLIENT}&response_type=code&redirect_uri={}&scope=openid%20mcp\
         &state=the-state&code_challenge={challenge}&code_challenge_method=S256&resource={}",
        enc(DEFAULT_REDIRECT_URI),
        enc(DOCKET)
    );
    let mut browser = Browser::new();
    let callback = match browser.follow(&issuer, authorize).await {
        Ok(callback) => {
            assert!(choose.is_none(), "no login form was shown");
            callback
        }
        Err((form, body)) => {
            let account = choose.expect("a login form is shown only without auto_login");
            assert!(body.contains("name=\"account\""), "a login form: {body}");
            let (status, location, body) = browser
                .send(
                    browser
                        .http
                        .post(format!("{form}/login"))
                        .header("content-type", "application/x-www-form-urlencoded")
                        .body(format!("account={}", enc(account))),
                )
                .await;
            assert_eq!(status, 303, "{body}");
            let resume = absolute(&issuer, location.expect("a redirect back to /auth"));
            browser
                .follow(&issuer, resume)
                .await
                .expect("the consent is given without a form")
        }
    };
    assert!(callback.starts_with(DEFAULT_REDIRECT_URI), "{callback}");
    assert!(callback.contains("state=the-state"), "{callback}");
    let code = callback
        .split(['?', '&'])
        .find_map(|pair| pair.strip_prefix("code="))
        .expect("a code");

    let body = format!(
        "grant_type=authorization_code&code={code}&redirect_uri={}&code_verifier={verifier}\
         &resource={}",
        enc(DEFAULT_REDIRECT_URI),
        enc(DOCKET)
    );
    let response = reqwest::Client::new()
        .post(provider.token_endpoint())
        .basic_auth(CLIENT, Some(SECRET))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .expect("the token request");
    assert_eq!(response.status(), 200);
    let answer: Value = response.json().await.expect("JSON");
    answer["access_token"]
        .as_str()
        .expect("an access token")
        .to_owned()
}

#[tokio::test]
async fn a_browser_login_signs_in_by_auto_login_or_by_the_form() {
    let config = config().auto_login("alice");
    let Some(provider) = OidcProvider::start_or_skip(
        config,
        "a_browser_login_signs_in_by_auto_login_or_by_the_form",
    )
    .await
    .expect("the OpenID provider starts") else {
        return;
    };
    let token = browser_login(&provider, None).await;
    assert_eq!(verified(&provider, &token, DOCKET).await["sub"], "alice");

    provider.set_auto_login(None).await.expect("auto-login off");
    let token = browser_login(&provider, Some("mallory")).await;
    let claims = verified(&provider, &token, DOCKET).await;
    assert_eq!(claims["sub"], "mallory");
    assert_eq!(claims["email"], "mallory@example.com");

    let error = provider
        .set_auto_login(Some("nobody"))
        .await
        .expect_err("an unknown account is refused");
    assert!(error.to_string().contains("configured account"), "{error}");
}
