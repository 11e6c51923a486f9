//! Docket's own authorization server as the server composes it, on SQLite and
//! PostgreSQL: the protected-resource metadata names it, the 401 points at that
//! metadata, and a client registers, sends a person through the team's real
//! OpenID provider and Docket's consent page, gets a code, tokens and a refresh,
//! and calls tools with its access token — each step on another of three
//! replicas that share one database, as behind a load balancer. A refresh
//! token presented twice revokes its family; a second login skips the consent;
//! a replayed code revokes what it issued; every step is in the audit log.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use docket_server::config::Config;
use docket_storage::test_db::TestDatabase;
use reqwest::Url;
use serde_json::{Value, json};

use crate::support::{Backend, StoredServer, TestServer, on_both_backends};

on_both_backends!(
    a_client_logs_in_through_any_replica_and_calls_tools,
    a_confidential_client_calls_tools_with_client_credentials,
);

/// A hang guard, never an assertion about speed.
const PATIENCE: Duration = Duration::from_secs(60);

async fn patiently<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {PATIENCE:?}"))
}

/// The URL clients know Docket by: the load balancer's, which no test listens
/// on. Each request goes to a replica of the test's choosing instead.
const PUBLIC_BASE: &str = "http://127.0.0.1:9";
const PROVIDER_SECRET: &str = "docket-upstream-secret";
/// The native client's loopback redirect; nothing listens there, the test reads
/// the code from the redirect.
const CLIENT_REDIRECT: &str = "http://127.0.0.1:53682/callback";

fn provider_config() -> docket_oidc_provider::ProviderConfig {
    use docket_oidc_provider::{Account, Client, GrantType, ProviderConfig};
    ProviderConfig::new()
        .account(
            "ada",
            Account::new()
                .email("ada@example.com")
                .name("Ada Example")
                .roles(["analyst"]),
        )
        .client(
            Client::new("docket", PROVIDER_SECRET)
                .grant_types([GrantType::AuthorizationCode])
                .redirect_uris([format!("{PUBLIC_BASE}/oauth/callback")]),
        )
        .auto_login("ada")
}

/// The secret of the operator-registered client `nightly-ci`.
const CI_SECRET: &str = "nightly-ci-secret-0123456789";

/// Three replicas on one database, with the authorization server brokering to
/// `issuer`.
async fn replicas(database: &TestDatabase, issuer: &str) -> Vec<StoredServer> {
    use sha2::Digest as _;
    let ci_secret_sha256 = hex::encode(sha2::Sha256::digest(CI_SECRET.as_bytes()));
    let yaml = format!(
        "server: {{ public_base_url: \"{PUBLIC_BASE}\" }}\n\
         auth:\n  oauth_server:\n    upstream: {{ issuer: \"{issuer}\", client_id: docket, \
         client_secret: \"{PROVIDER_SECRET}\", scopes: [openid, email, profile, roles] }}\n    \
         role_claim: roles\n    \
         clients: [{{ client_id: nightly-ci, client_secret_sha256: \"{ci_secret_sha256}\", \
         grant_types: [client_credentials], roles: [analyst] }}]\n\
         rate_limit: {{ requests_per_minute: 100000, burst: 10000 }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }} }}\n"
    );
    let mut servers = Vec::new();
    for _ in 0..3 {
        let config = Config::from_yaml(&yaml, &|_| None).expect("config");
        let store = database.connect().await;
        let oauth = store.oauth_store();
        servers.push(
            StoredServer::start_with(config, database, false, move |builder| {
                builder.oauth_store(oauth)
            })
            .await,
        );
    }
    servers
}

/// A user agent that keeps cookies per host and follows no redirect by itself,
/// so each step of the flow is seen (the portal's tests log in with it too).
pub(crate) struct Browser {
    http: reqwest::Client,
    cookies: BTreeMap<String, BTreeMap<String, String>>,
}

impl Browser {
    pub(crate) fn new() -> Self {
        Self {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("client"),
            cookies: BTreeMap::new(),
        }
    }

    fn cookie_header(&self, url: &Url) -> Option<String> {
        let jar = self.cookies.get(&authority(url))?;
        (!jar.is_empty()).then(|| {
            jar.iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    fn keep_cookies(&mut self, url: &Url, response: &reqwest::Response) {
        let jar = self.cookies.entry(authority(url)).or_default();
        for header in response.headers().get_all("set-cookie") {
            let text = header.to_str().expect("cookie text");
            let pair = text.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                jar.insert(name.trim().to_owned(), value.trim().to_owned());
            }
        }
    }

    pub(crate) async fn get(&mut self, url: &Url) -> reqwest::Response {
        let mut request = self.http.get(url.clone());
        if let Some(cookie) = self.cookie_header(url) {
            request = request.header("cookie", cookie);
        }
        let response = request.send().await.expect("GET");
        self.keep_cookies(url, &response);
        response
    }

    pub(crate) async fn post_form(
        &mut self,
        url: &Url,
        fields: &[(String, String)],
    ) -> reqwest::Response {
        let mut request = self
            .http
            .post(url.clone())
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(fields));
        if let Some(cookie) = self.cookie_header(url) {
            request = request.header("cookie", cookie);
        }
        let response = request.send().await.expect("POST");
        self.keep_cookies(url, &response);
        response
    }

    /// Follows redirects from `url` while `keep_going` says so; the last
    /// response and its URL.
    pub(crate) async fn follow(
        &mut self,
        mut url: Url,
        keep_going: impl Fn(&Url) -> bool,
    ) -> (Url, reqwest::Response) {
        for _ in 0..20 {
            let response = self.get(&url).await;
            let Some(next) = location(&url, &response) else {
                return (url, response);
            };
            if !keep_going(&next) {
                return (next, response);
            }
            url = next;
        }
        panic!("too many redirects from {url}");
    }
}

/// Cookies belong to a host, whatever the port (as browsers keep them).
fn authority(url: &Url) -> String {
    url.host_str().unwrap_or_default().to_owned()
}

pub(crate) fn location(base: &Url, response: &reqwest::Response) -> Option<Url> {
    if !response.status().is_redirection() {
        return None;
    }
    let value = response.headers().get("location")?.to_str().ok()?;
    base.join(value).ok()
}

/// A form body, encoded as a query string is.
fn form(fields: &[(String, String)]) -> String {
    let url = Url::parse_with_params("http://form.invalid/", fields).expect("form");
    url.query().unwrap_or_default().to_owned()
}

fn pairs(fields: &[(&str, &str)]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
        .collect()
}

/// `url` sent to `replica` instead of the load balancer.
pub(crate) fn on(replica: &TestServer, url: &Url) -> Url {
    let mut moved = url.clone();
    moved.set_port(Some(replica.addr.port())).expect("port");
    moved
}

fn query(url: &Url, name: &str) -> Option<String> {
    url.query_pairs()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.into_owned())
}

/// The hidden fields of the page's form, and the value of its approve button.
pub(crate) fn consent_fields(page: &str) -> Vec<(String, String)> {
    let mut fields = Vec::new();
    for tag in page.split('<').filter(|tag| tag.starts_with("input")) {
        let attribute = |name: &str| {
            let marker = format!("{name}=\"");
            let start = tag.find(&marker)? + marker.len();
            let end = tag[start..].find('"')? + start;
            Some(tag[start..end].replace("&#x2F;", "/").replace("&amp;", "&"))
        };
        if attribute("type").as_deref() == Some("hidden")
            && let (Some(name), Some(value)) = (attribute("name"), attribute("value"))
        {
            fields.push((name, value));
        }
    }
    fields.push(("decision".to_owned(), "approve".to_owned()));
    fields
}

/// PKCE: a verifier and its S256 challenge.
fn pkce() -> (String, String) {
    use base64::Engine as _;
    use sha2::Digest as _;
    let verifier = format!(
        "{}{}",
        docket_catalog::generate_id().expect("id"),
        "x".repeat(20)
    );
    let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(sha2::Sha256::digest(verifier.as_bytes()));
    (verifier, challenge)
}

/// Runs the browser part of a login from `/oauth/authorize` on `first` to the
/// client's redirect, with the provider's callback sent to `second` and the
/// consent form (when one is shown) to `third`; the client's redirect URL.
async fn log_in(
    browser: &mut Browser,
    client_id: &str,
    challenge: &str,
    [first, second, third]: [&TestServer; 3],
) -> (Url, bool) {
    let resource = format!("{PUBLIC_BASE}/mcp");
    let authorize = Url::parse_with_params(
        &first.url("/oauth/authorize"),
        &[
            ("response_type", "code"),
            ("client_id", client_id),
            ("redirect_uri", CLIENT_REDIRECT),
            ("code_challenge", challenge),
            ("code_challenge_method", "S256"),
            ("state", "opaque-client-state"),
            ("resource", resource.as_str()),
            ("scope", "mcp"),
        ],
    )
    .expect("authorize URL");
    let callback_prefix = format!("{PUBLIC_BASE}/oauth/callback");
    // Through the provider (which signs ada in at once) back to Docket's callback.
    let (callback, _) = browser
        .follow(authorize, |next| {
            !next.as_str().starts_with(&callback_prefix)
        })
        .await;
    assert!(
        callback.as_str().starts_with(&callback_prefix),
        "the provider sent the browser to {callback}"
    );
    let answer = browser.get(&on(second, &callback)).await;
    if let Some(redirect) = location(&callback, &answer) {
        return (redirect, false);
    }
    assert_eq!(answer.status().as_u16(), 200, "the consent page");
    let page = answer.text().await.expect("page");
    assert!(
        page.contains(client_id) || page.contains("Test client"),
        "{page}"
    );
    let consent = on(
        third,
        &Url::parse(&format!("{PUBLIC_BASE}/oauth/consent")).expect("url"),
    );
    let approved = browser.post_form(&consent, &consent_fields(&page)).await;
    let redirect = location(&consent, &approved).unwrap_or_else(|| {
        panic!(
            "the consent answered {} without a redirect",
            approved.status()
        )
    });
    (redirect, true)
}

async fn token_request(server: &TestServer, fields: &[(&str, &str)]) -> (u16, Value) {
    let response = server
        .http
        .post(server.url("/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&pairs(fields)))
        .send()
        .await
        .expect("token request");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn refresh_on(server: &TestServer, refresh_token: &str, client_id: &str) -> (u16, Value) {
    token_request(
        server,
        &[
            ("grant_type", "refresh_token"),
            ("refresh_token", refresh_token),
            ("client_id", client_id),
        ],
    )
    .await
}

async fn tools_as(server: &TestServer, token: &str) -> (u16, Value) {
    server
        .rpc("tools/list", json!({}))
        .header("authorization", &format!("Bearer {token}"))
        .send()
        .await
}

async fn a_client_logs_in_through_any_replica_and_calls_tools(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let Some(provider) =
        docket_oidc_provider::OidcProvider::start_or_skip(provider_config(), "oauth server")
            .await
            .expect("the OpenID provider starts")
    else {
        return;
    };
    let replicas = replicas(&database, &provider.issuer()).await;
    let [a, b, c] = [
        &replicas[0].server,
        &replicas[1].server,
        &replicas[2].server,
    ];

    // Discovery: the resource names Docket as its authorization server, and a
    // request without a token is pointed at that metadata.
    let resource_metadata: Value = a
        .http
        .get(a.url("/.well-known/oauth-protected-resource/mcp"))
        .send()
        .await
        .expect("PRM")
        .json()
        .await
        .expect("PRM JSON");
    assert_eq!(
        resource_metadata["authorization_servers"],
        json!([PUBLIC_BASE])
    );
    let unauthenticated = a.rpc("tools/list", json!({})).response().await;
    assert_eq!(unauthenticated.status().as_u16(), 401);
    let challenge_header = unauthenticated
        .headers()
        .get("www-authenticate")
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    assert!(
        challenge_header.contains(&format!(
            "resource_metadata=\"{PUBLIC_BASE}/.well-known/oauth-protected-resource/mcp\""
        )),
        "{challenge_header}"
    );
    let metadata: Value = b
        .http
        .get(b.url("/.well-known/oauth-authorization-server"))
        .send()
        .await
        .expect("metadata")
        .json()
        .await
        .expect("metadata JSON");
    assert_eq!(metadata["issuer"], PUBLIC_BASE);
    assert_eq!(
        metadata["code_challenge_methods_supported"],
        json!(["S256"])
    );
    assert_eq!(metadata["client_id_metadata_document_supported"], true);
    assert_eq!(
        metadata["authorization_response_iss_parameter_supported"],
        true
    );

    // Registration (RFC 7591) on replica A: a native client with a loopback
    // redirect.
    let registered = a
        .http
        .post(a.url("/oauth/register"))
        .json(&json!({
            "client_name": "Test client",
            "application_type": "native",
            "redirect_uris": [CLIENT_REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }))
        .send()
        .await
        .expect("register");
    assert_eq!(registered.status().as_u16(), 201);
    let registered: Value = registered.json().await.expect("registration JSON");
    let client_id = registered["client_id"]
        .as_str()
        .expect("client_id")
        .to_owned();

    // The login: authorize on B, the provider's callback on C, consent on A.
    let mut browser = Browser::new();
    let (verifier, challenge) = pkce();
    let (redirect, consented) = patiently(
        "the login",
        log_in(&mut browser, &client_id, &challenge, [b, c, a]),
    )
    .await;
    assert!(consented, "the first login asks for consent");
    assert!(redirect.as_str().starts_with(CLIENT_REDIRECT), "{redirect}");
    assert_eq!(
        query(&redirect, "state").as_deref(),
        Some("opaque-client-state")
    );
    assert_eq!(query(&redirect, "iss").as_deref(), Some(PUBLIC_BASE));
    let code = query(&redirect, "code").expect("a code");

    // The code for tokens on C; the access token works on every replica.
    let resource = format!("{PUBLIC_BASE}/mcp");
    let exchange = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", CLIENT_REDIRECT),
        ("client_id", client_id.as_str()),
        ("code_verifier", verifier.as_str()),
        ("resource", resource.as_str()),
    ];
    let (status, tokens) = token_request(c, &exchange).await;
    assert_eq!(status, 200, "{tokens}");
    let access = tokens["access_token"]
        .as_str()
        .expect("access token")
        .to_owned();
    let refresh = tokens["refresh_token"]
        .as_str()
        .expect("refresh token")
        .to_owned();
    for replica in [a, b, c] {
        let (status, listed) = tools_as(replica, &access).await;
        assert_eq!(status, 200, "{listed}");
        let names: Vec<&str> = listed["result"]["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .filter_map(|tool| tool["name"].as_str())
            .collect();
        assert!(names.contains(&"platform_info"), "{names:?}");
    }
    // A refresh on A rotates; the old refresh token presented on B is reuse,
    // which revokes the family, so the new one stops working too.
    let (status, refreshed) = refresh_on(a, &refresh, &client_id).await;
    assert_eq!(status, 200, "{refreshed}");
    let next_refresh = refreshed["refresh_token"]
        .as_str()
        .expect("rotated")
        .to_owned();
    assert_ne!(next_refresh, refresh);
    let next_access = refreshed["access_token"]
        .as_str()
        .expect("access")
        .to_owned();
    assert_eq!(tools_as(b, &next_access).await.0, 200);
    for presented in [&refresh, &next_refresh] {
        let (status, reused) = refresh_on(b, presented, &client_id).await;
        assert_eq!(
            (status, reused["error"].as_str()),
            (400, Some("invalid_grant"))
        );
    }

    // A second login of the same person for the same client asks no consent.
    let (verifier, challenge) = pkce();
    let (redirect, consented) = patiently(
        "the second login",
        log_in(&mut browser, &client_id, &challenge, [c, a, b]),
    )
    .await;
    assert!(!consented, "consent is remembered");
    let code = query(&redirect, "code").expect("a code");
    let exchange = [
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", CLIENT_REDIRECT),
        ("client_id", client_id.as_str()),
        ("code_verifier", verifier.as_str()),
    ];
    let (status, tokens) = token_request(b, &exchange).await;
    assert_eq!(status, 200, "{tokens}");
    let refresh = tokens["refresh_token"]
        .as_str()
        .expect("refresh token")
        .to_owned();
    // The code is single-use, whichever replica sees it again, and its replay
    // revokes what its first use issued.
    let (status, replayed) = token_request(a, &exchange).await;
    assert_eq!(
        (status, replayed["error"].as_str()),
        (400, Some("invalid_grant"))
    );
    let (status, revoked) = refresh_on(c, &refresh, &client_id).await;
    assert_eq!(
        (status, revoked["error"].as_str()),
        (400, Some("invalid_grant"))
    );

    // Every step is in the audit log, under the person's subject.
    let audit = replicas[0].store.task_store();
    for (tool, subject) in [
        ("oauth.register", None),
        ("oauth.login", Some("oidc:ada")),
        ("oauth.consent", Some("oidc:ada")),
        ("oauth.refresh_reused", Some("oidc:ada")),
        ("oauth.code_replayed", None),
    ] {
        let rows = patiently(tool, async {
            loop {
                let rows = audit.audit_for_tool(tool, 100).await.expect("audit");
                if !rows.is_empty() {
                    break rows;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        if let Some(subject) = subject {
            assert!(
                rows.iter().any(|row| row.subject == subject),
                "{tool}: {rows:?}"
            );
        }
    }
}

async fn a_confidential_client_calls_tools_with_client_credentials(backend: Backend) {
    use base64::Engine as _;
    let Some(database) = backend.database().await else {
        return;
    };
    // The provider is never contacted: no person is behind these tokens.
    let replicas = replicas(&database, "http://127.0.0.1:1").await;
    let (a, b) = (&replicas[0].server, &replicas[1].server);
    let basic = |secret: &str| {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("nightly-ci:{secret}"))
        )
    };
    let grant = |server: &TestServer, secret: &str| {
        server
            .http
            .post(server.url("/oauth/token"))
            .header("authorization", basic(secret))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("grant_type=client_credentials&scope=mcp")
            .send()
    };

    let refused = grant(a, "not-the-secret").await.expect("token request");
    assert_eq!(refused.status().as_u16(), 401);
    let refused: Value = refused.json().await.expect("error JSON");
    assert_eq!(refused["error"], "invalid_client");

    let granted = grant(a, CI_SECRET).await.expect("token request");
    assert_eq!(granted.status().as_u16(), 200);
    let granted: Value = granted.json().await.expect("token JSON");
    assert!(granted.get("refresh_token").is_none(), "{granted}");
    let access = granted["access_token"].as_str().expect("access token");
    // Its roles select the analyst persona on another replica.
    let (status, listed) = tools_as(b, access).await;
    assert_eq!(status, 200, "{listed}");
    assert!(
        listed["result"]["tools"]
            .as_array()
            .is_some_and(|tools| !tools.is_empty()),
        "{listed}"
    );
    // A token that does not verify is a 401 that points at the metadata.
    // One character of the signature's middle changed (the last one may only
    // hold padding bits).
    let signature_middle = access.rfind('.').expect("a JWT") + 20;
    let mut forged = access.to_owned();
    let replacement = if &access[signature_middle..=signature_middle] == "A" {
        "B"
    } else {
        "A"
    };
    forged.replace_range(signature_middle..=signature_middle, replacement);
    let response = b
        .rpc("tools/list", json!({}))
        .header("authorization", &format!("Bearer {forged}"))
        .response()
        .await;
    assert_eq!(response.status().as_u16(), 401);
    assert!(
        response
            .headers()
            .get("www-authenticate")
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.contains("invalid_token")),
    );

    // A token of another issuer is named for what it is not.
    let foreign = "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJodHRwOi8vZWxzZXdoZXJlIn0.c2ln";
    let response = b
        .rpc("tools/list", json!({}))
        .header("authorization", &format!("Bearer {foreign}"))
        .response()
        .await;
    assert_eq!(response.status().as_u16(), 401);
    let challenge = response.headers()["www-authenticate"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        challenge.contains("nor an access token this server issued"),
        "{challenge}"
    );

    let audit = replicas[0].store.task_store();
    let rows = patiently("the client-credentials audit row", async {
        loop {
            let rows = audit
                .audit_for_tool("oauth.client_credentials", 10)
                .await
                .expect("audit");
            if !rows.is_empty() {
                break rows;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        rows.iter()
            .any(|row| row.subject == "oidc:client:nightly-ci"),
        "{rows:?}"
    );
}
