//! The login, session, CSRF and logout rules end to end through
//! `Portal::handle`, with an authority that plays Docket's authorization
//! server: it hands out a code for the challenge it was sent and gives the
//! person only for the verifier of that challenge (PKCE).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use docket_portal::secret::pkce_challenge;
use docket_portal::{
    AuditSearch, Authority, Desk, DeskError, LoginError, MemoryStore, Person, Portal, PortalConfig,
    PortalStore, RowPage, TaskLine,
};
use http::{Request, Response, StatusCode};
use serde_json::{Value, json};

/// Plays the authorization server: `approve` records a code for a login's
/// challenge and person; `exchange` gives the person once, for the verifier
/// of that challenge and the portal's redirect URI.
#[derive(Default)]
struct FakeServer {
    codes: Mutex<HashMap<String, (String, Person)>>,
}

impl FakeServer {
    fn approve(&self, code: &str, challenge: &str, person: Person) {
        self.codes
            .lock()
            .expect("lock")
            .insert(code.to_owned(), (challenge.to_owned(), person));
    }
}

#[async_trait]
impl Authority for FakeServer {
    async fn exchange(
        &self,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<Person, LoginError> {
        assert_eq!(redirect_uri, "https://docket.example/portal/callback");
        let Some((challenge, person)) = self.codes.lock().expect("lock").remove(code) else {
            return Err(LoginError::Refused("unknown code".to_owned()));
        };
        if pkce_challenge(verifier) != challenge {
            return Err(LoginError::Refused("PKCE verifier mismatch".to_owned()));
        }
        if person.roles.is_empty() {
            return Err(LoginError::NoPersona("you have no persona".to_owned()));
        }
        Ok(person)
    }
}

/// One export of the fake desk: its owner's subject, its id, its rows.
pub(crate) type FakeExport = (String, String, Vec<Vec<String>>);

/// Plays the server behind the pages: tasks and exports kept per owner,
/// every tool call recorded; administrators see everyone's.
#[derive(Default)]
pub(crate) struct FakeDesk {
    /// (owner subject, task).
    pub(crate) tasks: Mutex<Vec<(String, TaskLine)>>,
    /// (owner subject, asset id, rows).
    pub(crate) exports: Mutex<Vec<FakeExport>>,
    /// (subject, tool, arguments) of every call.
    pub(crate) calls: Mutex<Vec<(String, String, Value)>>,
}

impl FakeDesk {
    fn export_of(&self, person: &Person, id: &str) -> Option<Vec<Vec<String>>> {
        self.exports
            .lock()
            .expect("lock")
            .iter()
            .find(|(owner, asset, _)| {
                asset == id && (person.administrator || *owner == person.subject)
            })
            .map(|(_, _, rows)| rows.clone())
    }
}

#[async_trait]
impl Desk for FakeDesk {
    async fn tasks(
        &self,
        person: &Person,
        _cursor: Option<&str>,
    ) -> Result<(Vec<TaskLine>, Option<String>), DeskError> {
        let tasks = self.tasks.lock().expect("lock");
        Ok((
            tasks
                .iter()
                .filter(|(owner, _)| *owner == person.subject)
                .map(|(_, task)| task.clone())
                .collect(),
            None,
        ))
    }

    async fn cancel_task(&self, person: &Person, id: &str) -> Result<(), DeskError> {
        let mut tasks = self.tasks.lock().expect("lock");
        let task = tasks
            .iter_mut()
            .find(|(owner, task)| task.id == id && *owner == person.subject)
            .ok_or(DeskError::NotFound)?;
        task.1.status = "cancelled".to_owned();
        Ok(())
    }

    async fn call(
        &self,
        person: &Person,
        tool: &str,
        arguments: Value,
    ) -> Result<Value, DeskError> {
        self.calls.lock().expect("lock").push((
            person.subject.clone(),
            tool.to_owned(),
            arguments.clone(),
        ));
        let id = arguments["asset_id"].as_str().unwrap_or_default();
        match tool {
            "get_asset" => match self.export_of(person, id) {
                Some(rows) => Ok(json!({
                    "asset_id": id, "name": format!("{id}.csv"), "format": "csv",
                    "row_count": rows.len(), "size_bytes": 10, "created_at": "2026-12-06T00:00:00Z",
                    "tool": "trino_export", "download_url": format!("/assets/{id}/content?sig=x"),
                })),
                None => Err(DeskError::Refused(format!("asset {id:?} not found"))),
            },
            "list_assets" => {
                let exports = self.exports.lock().expect("lock");
                let assets: Vec<Value> = exports
                    .iter()
                    .filter(|(owner, _, _)| *owner == person.subject)
                    .map(|(_, id, _)| json!({"asset_id": id, "name": format!("{id}.csv"), "format": "csv"}))
                    .collect();
                Ok(json!({"assets": assets, "next_cursor": null}))
            }
            "share_asset" if arguments["command"] == "create" => {
                Ok(json!({"url": "https://docket.example/shares/s1?sig=y"}))
            }
            _ => Ok(json!({"tool": tool, "runs": []})),
        }
    }

    async fn rows(
        &self,
        person: &Person,
        asset_id: &str,
        first_row: u64,
        rows: usize,
    ) -> Result<RowPage, DeskError> {
        let all = self
            .export_of(person, asset_id)
            .ok_or(DeskError::NotFound)?;
        let start = usize::try_from(first_row).expect("small").min(all.len());
        let end = (start + rows).min(all.len());
        Ok(RowPage {
            columns: vec!["n".to_owned()],
            rows: all[start..end].to_vec(),
            first_row,
            more: end < all.len(),
        })
    }

    async fn audit(&self, person: &Person, search: &AuditSearch) -> Result<Value, DeskError> {
        if !person.administrator {
            return Err(DeskError::NotFound);
        }
        Ok(json!({"audit": [{"person": search.subject, "tool": search.tool}]}))
    }

    async fn replicas(&self, person: &Person) -> Result<Value, DeskError> {
        if !person.administrator {
            return Err(DeskError::NotFound);
        }
        Ok(json!({"replicas": [{"replica": "r-1", "state": "beating"}]}))
    }
}

pub(crate) fn person(name: &str) -> Person {
    Person {
        subject: format!("oidc:{name}"),
        display_name: format!("{name} (display)"),
        roles: vec!["analyst".to_owned()],
        administrator: false,
    }
}

pub(crate) struct Harness {
    portal: Portal,
    server: FakeServer,
    pub(crate) desk: FakeDesk,
    store: Arc<dyn PortalStore>,
}

impl Harness {
    pub(crate) fn new(base_url: &str) -> Self {
        Self::with(PortalConfig::new(base_url, "docket-portal"))
    }

    fn with(config: PortalConfig) -> Self {
        let store: Arc<dyn PortalStore> = Arc::new(MemoryStore::new());
        Self {
            portal: Portal::new(config, Arc::clone(&store)),
            server: FakeServer::default(),
            desk: FakeDesk::default(),
            store,
        }
    }

    pub(crate) async fn get(&self, uri: &str, cookies: &[&str]) -> Response<Bytes> {
        let mut request = Request::get(uri);
        if !cookies.is_empty() {
            request = request.header("cookie", cookies.join("; "));
        }
        self.portal
            .handle(
                request.body(Bytes::new()).expect("request"),
                &self.server,
                &self.desk,
            )
            .await
    }

    pub(crate) async fn post(&self, uri: &str, cookies: &[&str], form: &str) -> Response<Bytes> {
        let mut request =
            Request::post(uri).header("content-type", "application/x-www-form-urlencoded");
        if !cookies.is_empty() {
            request = request.header("cookie", cookies.join("; "));
        }
        self.portal
            .handle(
                request.body(Bytes::from(form.to_owned())).expect("request"),
                &self.server,
                &self.desk,
            )
            .await
    }

    /// Starts a login; the authorization server approves it for `who` with
    /// `code`. The login cookie and the callback's query.
    async fn start_login(&self, who: Person, code: &str, return_to: &str) -> (String, String) {
        let started = self
            .get(&format!("/portal/login?return_to={return_to}"), &[])
            .await;
        assert_eq!(started.status(), StatusCode::SEE_OTHER);
        let location = header(&started, "location");
        let query = location
            .split_once('?')
            .map(|(_, query)| query.to_owned())
            .expect("a query");
        let parameters: HashMap<String, String> = form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect();
        self.server
            .approve(code, &parameters["code_challenge"], who);
        let login_cookie = cookie_pair(&started, "docket_portal_login");
        let callback = format!(
            "/portal/callback?code={code}&state={}&iss=https%3A%2F%2Fdocket.example",
            parameters["state"]
        );
        (login_cookie, callback)
    }

    /// Logs `who` in; the session cookie (`name=value`).
    pub(crate) async fn log_in(&self, who: Person) -> String {
        let (login_cookie, callback) = self.start_login(who, "code-1", "/portal").await;
        let finished = self.get(&callback, &[&login_cookie]).await;
        assert_eq!(
            finished.status(),
            StatusCode::SEE_OTHER,
            "{}",
            body(&finished)
        );
        assert_eq!(header(&finished, "location"), "/portal");
        cookie_pair(&finished, "docket_portal")
    }
}

pub(crate) fn header(response: &Response<Bytes>, name: &str) -> String {
    response
        .headers()
        .get(name)
        .map(|value| value.to_str().expect("text").to_owned())
        .unwrap_or_default()
}

fn set_cookies(response: &Response<Bytes>) -> Vec<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|value| value.to_str().expect("text").to_owned())
        .collect()
}

/// The `name=value` part of the `Set-Cookie` for `name`.
fn cookie_pair(response: &Response<Bytes>, name: &str) -> String {
    set_cookies(response)
        .into_iter()
        .find(|cookie| cookie.starts_with(&format!("{name}=")))
        .and_then(|cookie| cookie.split(';').next().map(str::to_owned))
        .unwrap_or_else(|| panic!("no {name} cookie in {:?}", set_cookies(response)))
}

pub(crate) fn body(response: &Response<Bytes>) -> String {
    String::from_utf8_lossy(response.body()).into_owned()
}

/// The value of the page's CSRF field.
pub(crate) fn csrf_of(page: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = page.find(marker).expect("a csrf field") + marker.len();
    page[start..].split('"').next().expect("a value").to_owned()
}

#[tokio::test]
async fn a_browser_without_a_session_is_sent_to_log_in_with_pkce() {
    let harness = Harness::new("https://docket.example");
    let home = harness.get("/portal", &[]).await;
    assert_eq!(home.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        header(&home, "location"),
        "/portal/login?return_to=%2Fportal"
    );
    let login = harness.get("/portal/login", &[]).await;
    let location = header(&login, "location");
    let (endpoint, query) = location.split_once('?').expect("query");
    assert_eq!(endpoint, "https://docket.example/oauth/authorize");
    let parameters: HashMap<String, String> = form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect();
    assert_eq!(parameters["response_type"], "code");
    assert_eq!(parameters["client_id"], "docket-portal");
    assert_eq!(
        parameters["redirect_uri"],
        "https://docket.example/portal/callback"
    );
    assert_eq!(parameters["code_challenge_method"], "S256");
    assert_eq!(parameters["resource"], "https://docket.example/mcp");
    assert_eq!(parameters["code_challenge"].len(), 43);
    let cookie = set_cookies(&login).pop().expect("a login cookie");
    assert!(cookie.starts_with(&format!("docket_portal_login={}", parameters["state"])));
    for attribute in [
        "HttpOnly",
        "SameSite=Lax",
        "Secure",
        "Path=/portal",
        "Max-Age=600",
    ] {
        assert!(cookie.contains(attribute), "{cookie} lacks {attribute}");
    }
}

#[tokio::test]
async fn a_login_makes_a_hashed_session_with_a_safe_cookie_and_the_page_shows_the_person() {
    let harness = Harness::new("https://docket.example");
    let (login_cookie, callback) = harness
        .start_login(person("alice"), "code-a", "%2Fportal%2Fwork")
        .await;
    let finished = harness.get(&callback, &[&login_cookie]).await;
    assert_eq!(finished.status(), StatusCode::SEE_OTHER);
    assert_eq!(header(&finished, "location"), "/portal/work");
    let cookies = set_cookies(&finished);
    let session = cookies
        .iter()
        .find(|cookie| cookie.starts_with("docket_portal="))
        .expect("a session cookie");
    for attribute in [
        "HttpOnly",
        "SameSite=Lax",
        "Secure",
        "Path=/portal",
        "Max-Age=28800",
    ] {
        assert!(session.contains(attribute), "{session} lacks {attribute}");
    }
    assert!(
        cookies
            .iter()
            .any(|cookie| cookie.starts_with("docket_portal_login=;")
                && cookie.contains("Max-Age=0")),
        "the login cookie is cleared: {cookies:?}"
    );
    // The store keeps the id's hash, never the id.
    let id = session
        .split(';')
        .next()
        .and_then(|pair| pair.strip_prefix("docket_portal="))
        .expect("id");
    let now = time::OffsetDateTime::now_utc();
    assert!(
        harness
            .store
            .session(id, now)
            .await
            .expect("read")
            .is_none()
    );
    let stored = harness
        .store
        .session(&docket_portal::secret::hash(id), now)
        .await
        .expect("read")
        .expect("the hash names the session");
    assert_eq!(stored.subject, "oidc:alice");
    let pair = format!("docket_portal={id}");
    let home = harness.get("/portal", &[&pair]).await;
    assert_eq!(home.status(), StatusCode::OK);
    let page = body(&home);
    assert!(page.contains("alice (display)"), "{page}");
    assert!(page.contains("oidc:alice"));
    let policy = header(&home, "content-security-policy");
    assert!(policy.contains("default-src 'none'"), "{policy}");
    // Scripts only from the portal's own files: nothing on a page runs.
    let scripts = policy
        .split(';')
        .map(str::trim)
        .find(|directive| directive.starts_with("script-src"));
    assert_eq!(scripts, Some("script-src 'self'"), "{policy}");
    assert_eq!(header(&home, "x-frame-options"), "DENY");
    assert_eq!(header(&home, "cache-control"), "no-store");
}

#[tokio::test]
async fn cookies_go_without_secure_only_for_loopback_http() {
    for (base_url, secure) in [
        ("http://127.0.0.1:8080", false),
        ("http://localhost:8080", false),
        ("http://[::1]:8080", false),
        ("http://docket.example", true),
        ("https://127.0.0.1:8443", true),
    ] {
        let harness = Harness::new(base_url);
        let login = harness.get("/portal/login", &[]).await;
        let cookie = set_cookies(&login).pop().expect("cookie");
        assert_eq!(cookie.contains("; Secure"), secure, "{base_url}: {cookie}");
    }
}

#[tokio::test]
async fn a_callback_in_another_browser_or_replayed_or_with_a_wrong_verifier_is_refused() {
    let harness = Harness::new("https://docket.example");
    // Another browser (no login cookie, or another login's cookie).
    let (_, callback) = harness
        .start_login(person("alice"), "code-x", "/portal")
        .await;
    assert_eq!(
        harness.get(&callback, &[]).await.status(),
        StatusCode::BAD_REQUEST
    );
    let (other_cookie, _) = harness
        .start_login(person("mallory"), "code-m", "/portal")
        .await;
    assert_eq!(
        harness.get(&callback, &[&other_cookie]).await.status(),
        StatusCode::BAD_REQUEST
    );
    // The right browser, twice: the login is taken once.
    let (login_cookie, callback) = harness
        .start_login(person("alice"), "code-y", "/portal")
        .await;
    assert_eq!(
        harness.get(&callback, &[&login_cookie]).await.status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        harness.get(&callback, &[&login_cookie]).await.status(),
        StatusCode::BAD_REQUEST
    );
    // A code approved for another login's challenge fails PKCE.
    let (login_cookie, _) = harness
        .start_login(person("alice"), "code-z", "/portal")
        .await;
    let (_, foreign) = harness
        .start_login(person("alice"), "code-w", "/portal")
        .await;
    let state = login_cookie.split_once('=').expect("pair").1;
    let swapped = format!("/portal/callback?code=code-w&state={state}");
    assert_eq!(
        harness.get(&swapped, &[&login_cookie]).await.status(),
        StatusCode::BAD_REQUEST
    );
    drop(foreign);
    // A person without a persona gets no session.
    let mut nobody = person("nobody");
    nobody.roles.clear();
    let (login_cookie, callback) = harness.start_login(nobody, "code-n", "/portal").await;
    let refused = harness.get(&callback, &[&login_cookie]).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    assert!(
        set_cookies(&refused)
            .iter()
            .all(|cookie| !cookie.starts_with("docket_portal="))
    );
}

#[tokio::test]
async fn an_expired_login_is_refused() {
    let mut config = PortalConfig::new("https://docket.example", "docket-portal");
    config.login_ttl = Duration::from_secs(1);
    let harness = Harness::with(config);
    let (login_cookie, callback) = harness
        .start_login(person("alice"), "code-e", "/portal")
        .await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        harness.get(&callback, &[&login_cookie]).await.status(),
        StatusCode::BAD_REQUEST
    );
}

#[tokio::test]
async fn logout_needs_the_sessions_csrf_token_and_ends_the_session_everywhere() {
    let harness = Harness::new("https://docket.example");
    let session = harness.log_in(person("alice")).await;
    let page = body(&harness.get("/portal", &[&session]).await);
    let token = csrf_of(&page);
    // Without a token, with a malformed one, with another session's, or
    // twice: refused, and the session lives on.
    let other = harness.log_in(person("bob")).await;
    let others_token = csrf_of(&body(&harness.get("/portal", &[&other]).await));
    for form in [
        String::new(),
        "csrf=".to_owned(),
        "csrf=forged".to_owned(),
        format!("csrf={others_token}"),
        format!("csrf={token}&csrf={token}"),
    ] {
        let refused = harness.post("/portal/logout", &[&session], &form).await;
        assert_eq!(refused.status(), StatusCode::FORBIDDEN, "{form}");
        assert_eq!(
            harness.get("/portal", &[&session]).await.status(),
            StatusCode::OK
        );
    }
    // A body over the bound is refused before it is read.
    let huge = format!(
        "csrf={token}&pad={}",
        "x".repeat(docket_portal::MAX_FORM_BYTES)
    );
    assert_eq!(
        harness
            .post("/portal/logout", &[&session], &huge)
            .await
            .status(),
        StatusCode::PAYLOAD_TOO_LARGE
    );
    let done = harness
        .post("/portal/logout", &[&session], &format!("csrf={token}"))
        .await;
    assert_eq!(done.status(), StatusCode::SEE_OTHER);
    assert_eq!(header(&done, "location"), "/portal/signed-out");
    assert!(
        set_cookies(&done)
            .iter()
            .any(|cookie| cookie.starts_with("docket_portal=;") && cookie.contains("Max-Age=0"))
    );
    // The old cookie is worth nothing now; the other person's still works.
    assert_eq!(
        harness.get("/portal", &[&session]).await.status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        harness.get("/portal", &[&other]).await.status(),
        StatusCode::OK
    );
}

#[tokio::test]
async fn a_person_keeps_at_most_the_cap_of_sessions_and_expired_ones_are_swept() {
    let mut config = PortalConfig::new("https://docket.example", "docket-portal");
    config.sessions_per_person = 2;
    config.session_ttl = Duration::from_secs(1);
    let harness = Harness::with(config);
    let first = harness.log_in(person("alice")).await;
    let second = harness.log_in(person("alice")).await;
    let third = harness.log_in(person("alice")).await;
    assert_eq!(
        harness.get("/portal", &[&first]).await.status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        harness.get("/portal", &[&second]).await.status(),
        StatusCode::OK
    );
    assert_eq!(
        harness.get("/portal", &[&third]).await.status(),
        StatusCode::OK
    );
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(
        harness.get("/portal", &[&third]).await.status(),
        StatusCode::SEE_OTHER
    );
    let swept = harness
        .portal
        .sweep(time::OffsetDateTime::now_utc())
        .await
        .expect("sweep");
    assert_eq!(swept.sessions, 2);
}

#[tokio::test]
async fn unknown_paths_and_malformed_cookies_are_not_found_or_sent_to_log_in() {
    let harness = Harness::new("https://docket.example");
    assert_eq!(
        harness.get("/portal/nothing-here", &[]).await.status(),
        StatusCode::NOT_FOUND
    );
    for cookie in [
        "docket_portal=short",
        "docket_portal=../../../../etc/passwd",
        "docket_portal=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
    ] {
        assert_eq!(
            harness.get("/portal", &[cookie]).await.status(),
            StatusCode::SEE_OTHER,
            "{cookie}"
        );
    }
    // A logout without a session goes to the login and changes nothing.
    assert_eq!(
        harness.post("/portal/logout", &[], "csrf=x").await.status(),
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn a_post_from_another_origin_is_refused_even_with_the_token() {
    let harness = Harness::new("https://docket.example/");
    let session = harness.log_in(person("alice")).await;
    let token = csrf_of(&body(&harness.get("/portal", &[&session]).await));
    let post = |origin: &'static str| {
        let request = Request::post("/portal/logout")
            .header("content-type", "application/x-www-form-urlencoded")
            .header("cookie", session.clone())
            .header("origin", origin)
            .body(Bytes::from(format!("csrf={token}")))
            .expect("request");
        harness
            .portal
            .handle(request, &harness.server, &harness.desk)
    };
    for origin in [
        "https://evil.example",
        "null",
        "https://docket.example.evil.example",
        "http://docket.example",
    ] {
        assert_eq!(
            post(origin).await.status(),
            StatusCode::FORBIDDEN,
            "{origin}"
        );
        assert_eq!(
            harness.get("/portal", &[&session]).await.status(),
            StatusCode::OK
        );
    }
    assert_eq!(
        post("https://docket.example").await.status(),
        StatusCode::SEE_OTHER
    );
    assert_eq!(
        harness.get("/portal", &[&session]).await.status(),
        StatusCode::SEE_OTHER
    );
}
