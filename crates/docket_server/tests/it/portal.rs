//! The portal (`docket_portal`) as the server composes it, on SQLite and
//! PostgreSQL: a person opens `/portal`, is sent through Docket's own
//! authorization server to the team's real OpenID provider, consents once,
//! and lands signed in — each step on another of two replicas that share one
//! database. The session works on either replica, a form without the
//! session's CSRF token changes nothing, and logout ends the session on both.
//! A person whose roles select no persona gets no session.

use std::future::Future;
use std::time::Duration;

use docket_server::config::Config;
use docket_storage::test_db::TestDatabase;
use reqwest::Url;

use crate::oauth::{Browser, consent_fields, location, on};
use crate::support::{Backend, StoredServer, on_both_backends};

on_both_backends!(
    a_person_logs_in_to_the_portal_through_any_replica_and_out_again,
    a_person_without_a_persona_gets_no_portal_session,
);

/// A hang guard, never an assertion about speed.
const PATIENCE: Duration = Duration::from_secs(60);

async fn patiently<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {PATIENCE:?}"))
}

/// The URL people know Docket by: the load balancer's, which no test listens
/// on. Each request goes to a replica of the test's choosing instead.
const PUBLIC_BASE: &str = "http://127.0.0.1:9";
const PROVIDER_SECRET: &str = "docket-upstream-secret";

fn provider_config(person: &str, roles: &[&str]) -> docket_oidc_provider::ProviderConfig {
    use docket_oidc_provider::{Account, Client, GrantType, ProviderConfig};
    ProviderConfig::new()
        .account(
            person,
            Account::new()
                .email(format!("{person}@example.com"))
                .name("Ada Example")
                .roles(roles.iter().copied()),
        )
        .client(
            Client::new("docket", PROVIDER_SECRET)
                .grant_types([GrantType::AuthorizationCode])
                .redirect_uris([format!("{PUBLIC_BASE}/oauth/callback")]),
        )
        .auto_login(person)
}

/// Two replicas on one database with the portal on.
async fn replicas(database: &TestDatabase, issuer: &str) -> Vec<StoredServer> {
    let yaml = format!(
        "server: {{ public_base_url: \"{PUBLIC_BASE}\", max_streams_per_identity: 2 }}\n\
         auth:\n  oauth_server:\n    upstream: {{ issuer: \"{issuer}\", client_id: docket, \
         client_secret: \"{PROVIDER_SECRET}\", scopes: [openid, email, profile, roles] }}\n    \
         role_claim: roles\n\
         portal: {{ enabled: true, session_ttl: 1h }}\n\
         rate_limit: {{ requests_per_minute: 100000, burst: 10000 }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }} }}\n"
    );
    let mut servers = Vec::new();
    for _ in 0..2 {
        let config = Config::from_yaml(&yaml, &|_| None).expect("config");
        let store = database.connect().await;
        let (oauth, portal) = (store.oauth_store(), store.portal_store());
        servers.push(
            StoredServer::start_with(config, database, false, move |builder| {
                builder.oauth_store(oauth).portal_store(portal)
            })
            .await,
        );
    }
    servers
}

fn public(path: &str) -> Url {
    Url::parse(&format!("{PUBLIC_BASE}{path}")).expect("url")
}

/// The value of the page's CSRF field.
fn csrf_of(page: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = page.find(marker).expect("a csrf field") + marker.len();
    page[start..].split('"').next().expect("a value").to_owned()
}

/// From `/portal` on `first` through the provider and the consent page to
/// the portal's callback, answered by `second`; the callback's answer.
async fn log_in(
    browser: &mut Browser,
    first: &crate::support::TestServer,
    second: &crate::support::TestServer,
) -> reqwest::Response {
    let home = browser.get(&on(first, &public("/portal"))).await;
    assert_eq!(home.status().as_u16(), 303);
    let login = location(&public("/portal"), &home).expect("to the login");
    assert_eq!(login.path(), "/portal/login");
    let started = browser.get(&on(second, &login)).await;
    let authorize = location(&login, &started).expect("to the authorization server");
    assert!(
        authorize
            .as_str()
            .starts_with(&format!("{PUBLIC_BASE}/oauth/authorize?")),
        "{authorize}"
    );
    // The authorization server (on `first`) sends the browser to the
    // provider, which signs the person in at once and sends it back.
    let callback_prefix = format!("{PUBLIC_BASE}/oauth/callback");
    let (callback, _) = browser
        .follow(on(first, &authorize), |next| {
            !next.as_str().starts_with(&callback_prefix)
        })
        .await;
    assert!(
        callback.as_str().starts_with(&callback_prefix),
        "{callback}"
    );
    let answer = browser.get(&on(second, &callback)).await;
    let portal_callback = match location(&callback, &answer) {
        Some(redirect) => redirect,
        None => {
            assert_eq!(answer.status().as_u16(), 200, "the consent page");
            let page = answer.text().await.expect("page");
            assert!(page.contains("Docket portal"), "{page}");
            let consent = on(first, &public("/oauth/consent"));
            let approved = browser.post_form(&consent, &consent_fields(&page)).await;
            location(&consent, &approved).expect("the consent's redirect")
        }
    };
    assert!(
        portal_callback
            .as_str()
            .starts_with(&format!("{PUBLIC_BASE}/portal/callback?")),
        "{portal_callback}"
    );
    browser.get(&on(first, &portal_callback)).await
}

async fn a_person_logs_in_to_the_portal_through_any_replica_and_out_again(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let Some(provider) = docket_oidc_provider::OidcProvider::start_or_skip(
        provider_config("ada", &["analyst"]),
        "portal",
    )
    .await
    .expect("the OpenID provider starts") else {
        return;
    };
    let replicas = replicas(&database, &provider.issuer()).await;
    let [a, b] = [&replicas[0].server, &replicas[1].server];
    let mut browser = Browser::new();
    let landed = patiently("the login", log_in(&mut browser, a, b)).await;
    assert_eq!(landed.status().as_u16(), 303);
    let cookie = landed
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with("docket_portal="))
        .expect("a session cookie")
        .to_owned();
    // Loopback http: no Secure, or the browser would not send it back.
    for attribute in ["HttpOnly", "SameSite=Lax", "Path=/portal", "Max-Age=3600"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "{cookie}");

    // Signed in on both replicas.
    let mut token = String::new();
    for replica in [a, b] {
        let page = browser.get(&on(replica, &public("/portal"))).await;
        assert_eq!(page.status().as_u16(), 200);
        let text = page.text().await.expect("page");
        assert!(text.contains("Ada Example"), "{text}");
        token = csrf_of(&text);
    }

    // The pages answer as the person, on either replica: their (empty)
    // work, nothing of an asset that is not theirs, no administration.
    let work = browser.get(&on(b, &public("/portal/work"))).await;
    assert_eq!(work.status().as_u16(), 200);
    let text = work.text().await.expect("page");
    assert!(text.contains("id=\"no-tasks\""), "{text}");
    for (path, status) in [
        ("/portal/exports", 200),
        ("/portal/scripts", 200),
        ("/portal/prompts", 200),
        ("/portal/exports/0123456789abcdef0123456789abcdef", 404),
        ("/portal/admin", 404),
    ] {
        let page = browser.get(&on(a, &public(path))).await;
        assert_eq!(page.status().as_u16(), status, "{path}");
    }
    // The live statuses stream for a session, and for nobody else.
    let events = browser
        .get(&on(a, &public("/portal/work/events?tasks=unknown")))
        .await;
    assert_eq!(events.status().as_u16(), 200);
    assert_eq!(
        events.headers()["content-type"].to_str().expect("text"),
        "text/event-stream"
    );
    // Each stream is one of the person's streams: past the limit, 429; a
    // closed one gives its place back.
    let second = browser.get(&on(a, &public("/portal/work/events"))).await;
    assert_eq!(second.status().as_u16(), 200);
    let third = browser.get(&on(a, &public("/portal/work/events"))).await;
    assert_eq!(third.status().as_u16(), 429);
    drop((events, second));
    let mut reopened = 0;
    for _ in 0..100 {
        let again = browser.get(&on(a, &public("/portal/work/events"))).await;
        if again.status().as_u16() == 200 {
            reopened += 1;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(reopened, 1, "a closed stream's place was not given back");
    let stranger = reqwest::Client::new()
        .get(on(a, &public("/portal/work/events?tasks=unknown")))
        .send()
        .await
        .expect("GET");
    assert_eq!(stranger.status().as_u16(), 204);

    // A form without the session's token changes nothing.
    let forged = browser
        .post_form(
            &on(b, &public("/portal/logout")),
            &[("csrf".to_owned(), "forged".to_owned())],
        )
        .await;
    assert_eq!(forged.status().as_u16(), 403);
    assert_eq!(
        browser
            .get(&on(a, &public("/portal")))
            .await
            .status()
            .as_u16(),
        200
    );

    // Logout on B ends the session on A too.
    let out = browser
        .post_form(
            &on(b, &public("/portal/logout")),
            &[("csrf".to_owned(), token)],
        )
        .await;
    assert_eq!(out.status().as_u16(), 303);
    assert_eq!(
        browser
            .get(&on(a, &public("/portal")))
            .await
            .status()
            .as_u16(),
        303
    );

    // The second login skips the consent: it was given to the portal once.
    let again = patiently("the second login", log_in(&mut browser, b, a)).await;
    assert_eq!(again.status().as_u16(), 303);
    assert_eq!(
        browser
            .get(&on(b, &public("/portal")))
            .await
            .status()
            .as_u16(),
        200
    );
}

async fn a_person_without_a_persona_gets_no_portal_session(backend: Backend) {
    let Some(database) = backend.database().await else {
        return;
    };
    let Some(provider) = docket_oidc_provider::OidcProvider::start_or_skip(
        provider_config("eve", &["visitor"]),
        "portal",
    )
    .await
    .expect("the OpenID provider starts") else {
        return;
    };
    let replicas = replicas(&database, &provider.issuer()).await;
    let [a, b] = [&replicas[0].server, &replicas[1].server];
    let mut browser = Browser::new();
    let refused = patiently("the login", log_in(&mut browser, a, b)).await;
    assert_eq!(refused.status().as_u16(), 403);
    assert!(
        refused
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .all(|value| !value.starts_with("docket_portal="))
    );
    assert_eq!(
        browser
            .get(&on(b, &public("/portal")))
            .await
            .status()
            .as_u16(),
        303
    );
}

/// Starting logins spends the address's budget of the authorization server's
/// `/oauth/authorize`: each start keeps a row until it expires, so an address
/// starting them without end is told to wait instead of filling the cap of
/// logins in flight for everyone. Nothing is contacted to start one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starting_logins_from_one_address_is_rate_limited() {
    let yaml = format!(
        "server: {{ public_base_url: \"{PUBLIC_BASE}\", max_streams_per_identity: 2 }}\n\
         auth:\n  oauth_server:\n    upstream: {{ issuer: \"https://login.example.com\", \
         client_id: docket, client_secret: \"{PROVIDER_SECRET}\" }}\n    \
         rate_limits: {{ authorize: 3 }}\n\
         portal: {{ enabled: true }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }} }}\n"
    );
    let config = Config::from_yaml(&yaml, &|_| None).expect("config");
    let app = docket_server::App::builder(config).build().expect("app");
    let server = crate::support::TestServer::start(app).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let mut statuses = Vec::new();
    for _ in 0..4 {
        let answer = http
            .get(server.url("/portal/login"))
            .send()
            .await
            .expect("GET");
        statuses.push(answer.status().as_u16());
        if answer.status().as_u16() == 429 {
            assert!(answer.headers().contains_key("retry-after"));
        }
    }
    assert_eq!(statuses, [303, 303, 303, 429]);
}

/// `portal.enabled` without `auth.oauth_server`, or with bounds out of range,
/// is a configuration problem, named.
#[test]
fn the_portal_section_is_checked() {
    let problems = Config::from_yaml(
        "portal: { enabled: true, session_ttl: 1m, sessions_per_person: 0 }\n",
        &|_| None,
    )
    .expect_err("problems")
    .problems;
    for expected in [
        "portal.enabled: needs auth.oauth_server",
        "portal.session_ttl: must be 5m to 30d",
        "portal.sessions_per_person: must be at least 1",
    ] {
        assert!(
            problems.iter().any(|problem| problem.starts_with(expected)),
            "{expected} not in {problems:?}"
        );
    }
}
