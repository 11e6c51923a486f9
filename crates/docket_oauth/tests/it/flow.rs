//! The whole flow against the real OpenID provider, each step checked:
//! discovery → registration → authorize → the provider's login → callback →
//! consent → code → token → refresh → reuse detected → revocation; and the
//! attacks of issue 36 item 6, each refused with the error its RFC names.

use anyhow::Context as _;
use docket_oauth::EventKind;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::support::{
    AuthRequest, Browser, CLIENT_REDIRECT, Docket, authorize, expect_token_errors, present_refresh,
    provider_discovery, query_param, redeem, register_native, start, token,
};

/// The client's redirect URI with the port it listens on this time.
const USED_REDIRECT: &str = "http://127.0.0.1:45678/client/callback";

/// Signs in as alice with a new native client and redeems the code: the
/// request and the token answer.
async fn sign_in(docket: &Docket) -> anyhow::Result<(AuthRequest, Value)> {
    let client_id = register_native(docket, "Flow test client").await?;
    let request = AuthRequest::new(docket, &client_id, USED_REDIRECT);
    let mut browser = Browser::default();
    let answer = authorize(docket, &mut browser, &request, USED_REDIRECT).await?;
    anyhow::ensure!(answer.status == 303, "consent answered {answer:?}");
    let code = answer.location_param("code").context("a code")?;
    let tokens = redeem(docket, &request, USED_REDIRECT, &code).await?;
    anyhow::ensure!(tokens.status == 200, "token answered {tokens:?}");
    Ok((request, tokens.json()?))
}

#[tokio::test]
async fn a_person_signs_in_consents_refreshes_and_revokes() -> anyhow::Result<()> {
    let Some(docket) = start("a_person_signs_in_consents_refreshes_and_revokes", |_| {}).await?
    else {
        return Ok(());
    };
    let http = &docket.http;

    // Discovery.
    let metadata: Value = http
        .get(format!(
            "{}/.well-known/oauth-authorization-server",
            docket.base
        ))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(metadata["issuer"], docket.base.as_str());
    assert_eq!(
        metadata["code_challenge_methods_supported"],
        json!(["S256"])
    );
    assert_eq!(
        metadata["authorization_response_iss_parameter_supported"],
        true
    );
    assert_eq!(metadata["client_id_metadata_document_supported"], true);
    assert_eq!(metadata, docket.server.metadata());

    // Registration (RFC 7591).
    let client_id = register_native(&docket, "Flow test client").await?;
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let mut browser = Browser::default();

    // /authorize sends the browser to the provider with Docket's own PKCE.
    let first = browser.get(http, &request.url(&docket, &[])).await?;
    assert_eq!(first.status, 302, "{first:?}");
    let to_provider = first.location.clone().context("a redirect")?;
    assert!(
        to_provider.starts_with(&docket.provider.issuer()),
        "{to_provider}"
    );
    assert_eq!(
        query_param(&to_provider, "code_challenge_method").as_deref(),
        Some("S256")
    );
    assert_eq!(
        query_param(&to_provider, "redirect_uri"),
        Some(format!("{}/oauth/callback", docket.base))
    );
    assert!(query_param(&to_provider, "nonce").is_some());
    assert_ne!(
        query_param(&to_provider, "state"),
        Some(request.state.clone())
    );
    assert_eq!(
        first.headers["content-security-policy"],
        "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'"
    );

    // The provider signs alice in and sends her back; Docket shows its consent page.
    let page = browser.follow(http, &to_provider, USED_REDIRECT).await?;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        page.body.contains("Flow test client"),
        "the page names the client"
    );
    assert!(
        page.body.contains(&client_id),
        "the page names the client id"
    );
    assert!(
        page.body.contains("127.0.0.1"),
        "the page names the redirect host"
    );
    assert!(page.body.contains("alice@example.com"));
    assert!(
        page.body.contains("registered itself"),
        "a registered client is not vouched for"
    );
    assert!(!page.body.contains("<script"), "no script");
    assert_eq!(page.headers["x-frame-options"], "DENY");
    assert_eq!(page.headers["cache-control"], "no-store");
    assert_eq!(page.headers["referrer-policy"], "no-referrer");
    let cookie = page.headers[http::header::SET_COOKIE].to_str()?;
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    assert!(
        cookie.contains("Path=/oauth") && !cookie.contains("Secure"),
        "{cookie}"
    );

    // Without the cookie (another browser) the consent is refused, and taken.
    let pending = page.hidden("pending").context("pending")?;
    let csrf = page.hidden("csrf").context("csrf")?;
    let consent_url = format!("{}/oauth/consent", docket.base);
    let elsewhere = Browser::default()
        .post_form(
            http,
            &consent_url,
            &[
                ("pending", &pending),
                ("csrf", &csrf),
                ("decision", "approve"),
            ],
        )
        .await?;
    assert_eq!(elsewhere.status, 400);
    assert!(elsewhere.location.is_none());
    let wrong_csrf = browser
        .post_form(
            http,
            &consent_url,
            &[
                ("pending", &pending),
                ("csrf", "forged"),
                ("decision", "approve"),
            ],
        )
        .await?;
    assert_eq!(wrong_csrf.status, 400, "a forged form token is refused");

    // A new sign-in, approved by the browser that signed in.
    let approved = authorize(&docket, &mut browser, &request, USED_REDIRECT).await?;
    assert_eq!(approved.status, 303, "{approved:?}");
    let location = approved.location.clone().context("a redirect")?;
    assert!(location.starts_with(USED_REDIRECT), "{location}");
    assert_eq!(
        approved.location_param("state"),
        Some(request.state.clone())
    );
    assert_eq!(approved.location_param("iss"), Some(docket.base.clone()));
    let code = approved.location_param("code").context("a code")?;

    // The code becomes tokens.
    let tokens = redeem(&docket, &request, USED_REDIRECT, &code).await?;
    assert_eq!(tokens.status, 200, "{tokens:?}");
    assert_eq!(tokens.headers["cache-control"], "no-store");
    let tokens = tokens.json()?;
    let access = tokens["access_token"].as_str().context("an access token")?;
    let refresh = tokens["refresh_token"]
        .as_str()
        .context("a refresh token")?
        .to_owned();
    assert!(
        !refresh.contains('.'),
        "without offline_access no provider token is sealed in"
    );
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 600);
    assert!(docket.server.is_own_token(access));
    let claims = docket.server.verify_access_token(access).await?;
    assert_eq!(claims["sub"], "alice");
    assert_eq!(claims["aud"], format!("{}/mcp", docket.base));
    assert_eq!(claims["iss"], docket.base.as_str());
    assert_eq!(claims["client_id"], client_id.as_str());
    assert_eq!(claims["email"], "alice@example.com");
    assert_eq!(claims["roles"], json!(["analyst"]));
    assert_eq!(claims["scope"], "mcp");
    let header = jsonwebtoken::decode_header(access)?;
    assert_eq!(header.alg, Algorithm::ES256);
    assert_eq!(header.typ.as_deref(), Some("at+jwt"));
    let jwks: Value = http
        .get(format!("{}/oauth/jwks", docket.base))
        .send()
        .await?
        .json()
        .await?;
    assert_eq!(
        jwks["keys"][0]["kid"],
        header.kid.clone().context("a kid")?.as_str()
    );
    assert!(
        jwks["keys"][0].get("d").is_none(),
        "no private part is published"
    );

    // A second sign-in: the consent is remembered, the code comes at once.
    let again = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let direct = browser
        .follow(http, &again.url(&docket, &[]), USED_REDIRECT)
        .await?;
    assert_eq!(
        direct.status, 302,
        "no consent page the second time: {direct:?}"
    );
    assert!(direct.location_param("code").is_some());

    // Refresh rotates; the replaced token revokes the family.
    let refreshed = present_refresh(&docket, &client_id, &refresh).await?;
    assert_eq!(refreshed.status, 200, "{refreshed:?}");
    let refreshed = refreshed.json()?;
    let next = refreshed["refresh_token"]
        .as_str()
        .context("a new refresh token")?
        .to_owned();
    assert_ne!(next, refresh);
    let reused = present_refresh(&docket, &client_id, &refresh).await?;
    assert_eq!(
        (reused.status, reused.error().as_str()),
        (400, "invalid_grant")
    );
    let after_reuse = present_refresh(&docket, &client_id, &next).await?;
    assert_eq!(
        after_reuse.error(),
        "invalid_grant",
        "the whole family is revoked"
    );
    assert!(docket.events.kinds().contains(&EventKind::RefreshReused));

    // Revocation (RFC 7009): a fresh family, revoked, no longer refreshes.
    let (request, tokens) = sign_in(&docket).await?;
    let refresh = tokens["refresh_token"].as_str().context("refresh")?;
    let revoke_url = format!("{}/oauth/revoke", docket.base);
    let revoked = Browser::default()
        .post_form(
            http,
            &revoke_url,
            &[("client_id", &request.client_id), ("token", refresh)],
        )
        .await?;
    assert_eq!(revoked.status, 200);
    let unknown = Browser::default()
        .post_form(
            http,
            &revoke_url,
            &[("client_id", &request.client_id), ("token", "not-a-token")],
        )
        .await?;
    assert_eq!(unknown.status, 200, "an unknown token is answered 200");
    let after = present_refresh(&docket, &request.client_id, refresh).await?;
    assert_eq!(after.error(), "invalid_grant");

    let kinds = docket.events.kinds();
    for kind in [
        EventKind::Registered,
        EventKind::Login,
        EventKind::Consent,
        EventKind::CodeIssued,
        EventKind::TokenIssued,
        EventKind::Refreshed,
        EventKind::Revoked,
    ] {
        assert!(kinds.contains(&kind), "{kind:?} is recorded");
    }
    for event in docket.events.all() {
        let detail = event.detail.unwrap_or_default();
        assert!(
            !detail.contains(&next) && !detail.contains(refresh),
            "no token in an event"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_replayed_code_is_refused_and_revokes_what_it_issued() -> anyhow::Result<()> {
    let Some(docket) = start(
        "a_replayed_code_is_refused_and_revokes_what_it_issued",
        |_| {},
    )
    .await?
    else {
        return Ok(());
    };
    let client_id = register_native(&docket, "Replay").await?;
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let answer = authorize(&docket, &mut Browser::default(), &request, USED_REDIRECT).await?;
    let code = answer.location_param("code").context("a code")?;
    let first = redeem(&docket, &request, USED_REDIRECT, &code)
        .await?
        .json()?;
    let refresh = first["refresh_token"].as_str().context("refresh")?;
    let replay = redeem(&docket, &request, USED_REDIRECT, &code).await?;
    assert_eq!(
        (replay.status, replay.error().as_str()),
        (400, "invalid_grant")
    );
    let refreshed = present_refresh(&docket, &client_id, refresh).await?;
    assert_eq!(
        refreshed.error(),
        "invalid_grant",
        "the first use's family is revoked"
    );
    assert!(docket.events.kinds().contains(&EventKind::CodeReplayed));
    Ok(())
}

#[tokio::test]
async fn authorization_requests_that_break_a_rule_are_refused() -> anyhow::Result<()> {
    let Some(docket) = start(
        "authorization_requests_that_break_a_rule_are_refused",
        |_| {},
    )
    .await?
    else {
        return Ok(());
    };
    let http = &docket.http;
    let client_id = register_native(&docket, "Rules").await?;
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let mut browser = Browser::default();

    // An unknown client, or a redirect URI off by one character: the error page, no redirect.
    for changes in [
        vec![("client_id", "no-such-client")],
        vec![("redirect_uri", "http://127.0.0.1:45678/client/callbacK")],
        vec![("redirect_uri", "http://127.0.0.2:45678/client/callback")],
        vec![("redirect_uri", "https://evil.example/client/callback")],
        vec![("redirect_uri", "")],
    ] {
        let answer = browser.get(http, &request.url(&docket, &changes)).await?;
        assert_eq!(answer.status, 400, "{changes:?}: {answer:?}");
        assert!(answer.location.is_none(), "{changes:?} is never a redirect");
        assert!(answer.body.contains("<h1>"), "the error page");
        assert_eq!(answer.headers["x-frame-options"], "DENY");
    }

    // Everything else goes back to the client with error, state and iss.
    let refusals = [
        (vec![("code_challenge", "")], "invalid_request"),
        (vec![("code_challenge_method", "plain")], "invalid_request"),
        (vec![("code_challenge_method", "")], "invalid_request"),
        (
            vec![("response_type", "token")],
            "unsupported_response_type",
        ),
        (
            vec![("resource", "https://other.example/mcp")],
            "invalid_target",
        ),
        (vec![("resource", "")], "invalid_target"),
        (vec![("scope", "admin")], "invalid_scope"),
    ];
    for (changes, error) in refusals {
        let answer = browser.get(http, &request.url(&docket, &changes)).await?;
        assert_eq!(answer.status, 302, "{changes:?}: {answer:?}");
        let location = answer.location.clone().context("a redirect")?;
        assert!(location.starts_with(USED_REDIRECT), "{location}");
        assert_eq!(
            answer.location_param("error").as_deref(),
            Some(error),
            "{changes:?}"
        );
        assert_eq!(answer.location_param("state"), Some(request.state.clone()));
        assert_eq!(answer.location_param("iss"), Some(docket.base.clone()));
    }
    let no_state = browser
        .get(http, &request.url(&docket, &[("state", "")]))
        .await?;
    assert_eq!(
        no_state.location_param("error").as_deref(),
        Some("invalid_request")
    );

    // A state that is a URL is only ever echoed to the registered redirect URI.
    let evil_state = AuthRequest {
        state: "https://evil.example/steal".to_owned(),
        ..AuthRequest::new(&docket, &client_id, USED_REDIRECT)
    };
    let answer = authorize(&docket, &mut browser, &evil_state, USED_REDIRECT).await?;
    let location = answer.location.clone().context("a redirect")?;
    assert!(location.starts_with(USED_REDIRECT), "{location}");
    assert_eq!(
        answer.location_param("state").as_deref(),
        Some("https://evil.example/steal")
    );

    // The callback with a state Docket never issued (an open redirect attempt): the error page.
    for query in [
        "state=unknown&code=x",
        "code=x",
        "state=https%3A%2F%2Fevil.example%2F&code=x",
    ] {
        let answer = browser
            .get(http, &format!("{}/oauth/callback?{query}", docket.base))
            .await?;
        assert_eq!(answer.status, 400, "{query}");
        assert!(answer.location.is_none(), "{query} is never a redirect");
    }
    Ok(())
}

#[tokio::test]
async fn a_mix_up_at_the_callback_is_refused() -> anyhow::Result<()> {
    let Some(docket) = start("a_mix_up_at_the_callback_is_refused", |_| {}).await? else {
        return Ok(());
    };
    let http = &docket.http;
    let client_id = register_native(&docket, "Mix-up").await?;
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let mut browser = Browser::default();
    let first = browser.get(http, &request.url(&docket, &[])).await?;
    let to_provider = first.location.context("a redirect")?;
    let pending = query_param(&to_provider, "state").context("Docket's state")?;
    let mixed = browser
        .get(http, &format!(
            "{}/oauth/callback?state={pending}&code=attacker-code&iss=https%3A%2F%2Fevil.example",
            docket.base
        ))
        .await?;
    assert_eq!(mixed.status, 400, "{mixed:?}");
    assert!(mixed.location.is_none());
    // The pending authorization is used up: the real answer cannot follow.
    let later = browser
        .get(
            http,
            &format!("{}/oauth/callback?state={pending}&code=x", docket.base),
        )
        .await?;
    assert_eq!(later.status, 400);
    // A provider that says it sends `iss` (RFC 9207) and an answer without it: refused too.
    let discovery = provider_discovery(&docket).await?;
    assert_eq!(
        discovery["authorization_response_iss_parameter_supported"],
        true
    );
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let first = browser.get(http, &request.url(&docket, &[])).await?;
    let pending = query_param(&first.location.context("a redirect")?, "state").context("state")?;
    let without_iss = browser
        .get(
            http,
            &format!("{}/oauth/callback?state={pending}&code=x", docket.base),
        )
        .await?;
    assert_eq!(without_iss.status, 400, "{without_iss:?}");
    assert!(without_iss.location.is_none());
    assert!(docket.events.all().iter().any(|event| {
        event
            .detail
            .as_deref()
            .is_some_and(|detail| detail.contains("mix-up"))
    }));
    Ok(())
}

#[tokio::test]
async fn token_requests_that_break_a_rule_are_refused() -> anyhow::Result<()> {
    let Some(docket) = start("token_requests_that_break_a_rule_are_refused", |_| {}).await? else {
        return Ok(());
    };
    let client_id = register_native(&docket, "Token rules").await?;
    let mut browser = Browser::default();
    let mut fresh_code = async |request: &AuthRequest| -> anyhow::Result<String> {
        authorize(&docket, &mut browser, request, USED_REDIRECT)
            .await?
            .location_param("code")
            .context("a code")
    };

    // A verifier that does not match.
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let code = fresh_code(&request).await?;
    let wrong = AuthRequest {
        verifier: "x".repeat(43),
        ..AuthRequest::new(&docket, &client_id, USED_REDIRECT)
    };
    let answer = redeem(&docket, &wrong, USED_REDIRECT, &code).await?;
    assert_eq!(
        (answer.status, answer.error().as_str()),
        (400, "invalid_grant")
    );

    // A redirect URI one character off.
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let code = fresh_code(&request).await?;
    let answer = redeem(
        &docket,
        &request,
        "http://127.0.0.1:45678/client/callbacK",
        &code,
    )
    .await?;
    assert_eq!(answer.error(), "invalid_grant");

    // No verifier at all.
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let code = fresh_code(&request).await?;
    let answer = token(
        &docket,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("code", &code),
            ("redirect_uri", USED_REDIRECT),
        ],
    )
    .await?;
    assert_eq!(answer.error(), "invalid_request");

    // Another resource.
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let code = fresh_code(&request).await?;
    let answer = token(
        &docket,
        &[
            ("grant_type", "authorization_code"),
            ("client_id", &client_id),
            ("code", &code),
            ("redirect_uri", USED_REDIRECT),
            ("code_verifier", &request.verifier),
            ("resource", "https://other.example/mcp"),
        ],
    )
    .await?;
    assert_eq!(answer.error(), "invalid_target");

    // Another client's code.
    let other = register_native(&docket, "Other").await?;
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let code = fresh_code(&request).await?;
    let stolen = AuthRequest {
        client_id: other,
        ..AuthRequest::new(&docket, &client_id, USED_REDIRECT)
    };
    let stolen = AuthRequest {
        verifier: request.verifier.clone(),
        ..stolen
    };
    let answer = redeem(&docket, &stolen, USED_REDIRECT, &code).await?;
    assert_eq!(answer.error(), "invalid_grant");

    // A public client that sends `Basic base64(id:)` (an empty secret) is still itself.
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let code = fresh_code(&request).await?;
    let basic = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("{client_id}:"),
    );
    let form = crate::support::encode(&[
        ("grant_type", "authorization_code"),
        ("code", &code),
        ("redirect_uri", USED_REDIRECT),
        ("code_verifier", &request.verifier),
    ]);
    let answer = docket
        .http
        .post(format!("{}/oauth/token", docket.base))
        .header(http::header::AUTHORIZATION, format!("Basic {basic}"))
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form)
        .send()
        .await?;
    assert_eq!(answer.status(), 200, "{}", answer.text().await?);

    // Unknown clients, grants and missing parameters; a public client has
    // no client_credentials.
    let never_issued = "v".repeat(43);
    expect_token_errors(
        &docket,
        &[
            (
                &[
                    ("grant_type", "authorization_code"),
                    ("client_id", "nobody"),
                    ("code", "x"),
                ],
                401,
                "invalid_client",
            ),
            (
                &[("grant_type", "password"), ("client_id", &client_id)],
                400,
                "unsupported_grant_type",
            ),
            (&[("client_id", &client_id)], 400, "invalid_request"),
            (
                &[
                    ("grant_type", "client_credentials"),
                    ("client_id", &client_id),
                ],
                400,
                "unauthorized_client",
            ),
            (
                &[
                    ("grant_type", "authorization_code"),
                    ("client_id", &client_id),
                    ("code", "never-issued"),
                    ("redirect_uri", USED_REDIRECT),
                    ("code_verifier", &never_issued),
                ],
                400,
                "invalid_grant",
            ),
        ],
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn a_token_for_another_resource_or_issuer_is_not_accepted() -> anyhow::Result<()> {
    let Some(docket) = start(
        "a_token_for_another_resource_or_issuer_is_not_accepted",
        |_| {},
    )
    .await?
    else {
        return Ok(());
    };
    let (_, tokens) = sign_in(&docket).await?;
    let access = tokens["access_token"].as_str().context("access")?;
    let claims = docket.server.verify_access_token(access).await?;

    // Signed with Docket's own key, but for another audience.
    let keys = docket_oauth::OAuthStore::signing_keys(docket.store.as_ref()).await?;
    let key = keys.first().context("a signing key")?;
    let der = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        &key.private_pkcs8,
    )?;
    let mut header = Header::new(Algorithm::ES256);
    header.typ = Some("at+jwt".to_owned());
    header.kid = Some(key.kid.clone());
    let mut other = claims.clone();
    other.insert("aud".into(), "https://other.example/mcp".into());
    let forged = jsonwebtoken::encode(&header, &other, &EncodingKey::from_ec_der(&der))?;
    let refused = docket
        .server
        .verify_access_token(&forged)
        .await
        .expect_err("another audience");
    assert!(
        matches!(refused, docket_oauth::TokenError::Invalid(_)),
        "{refused}"
    );

    // The provider's own ID token (another issuer, another key).
    let foreign = docket.provider.login("alice", "docket", None, None).await;
    if let Some(foreign) = foreign.ok().and_then(|answer| answer.id_token) {
        assert!(!docket.server.is_own_token(&foreign));
        assert!(docket.server.verify_access_token(&foreign).await.is_err());
    }

    // A token whose signature does not match, or that is not an access token.
    let mut tampered = access.to_owned();
    tampered.pop();
    tampered.push(if access.ends_with('A') { 'B' } else { 'A' });
    assert!(docket.server.verify_access_token(&tampered).await.is_err());
    header.typ = Some("JWT".to_owned());
    let id_like = jsonwebtoken::encode(&header, &claims, &EncodingKey::from_ec_der(&der))?;
    assert!(docket.server.verify_access_token(&id_like).await.is_err());
    Ok(())
}

#[tokio::test]
async fn registration_floods_meet_the_rate_limit_and_the_cap() -> anyhow::Result<()> {
    let Some(docket) = start(
        "registration_floods_meet_the_rate_limit_and_the_cap",
        |config| {
            config.rate_limits.register = 5;
            config.registration.max_clients = 3;
        },
    )
    .await?
    else {
        return Ok(());
    };
    let register = || async {
        docket
            .http
            .post(format!("{}/oauth/register", docket.base))
            .json(&json!({"application_type": "native", "redirect_uris": [CLIENT_REDIRECT]}))
            .send()
            .await
    };
    let mut statuses = Vec::new();
    for _ in 0..6 {
        let answer = register().await?;
        statuses.push(answer.status().as_u16());
        if answer.status() == 429 {
            assert!(answer.headers().contains_key(http::header::RETRY_AFTER));
        }
    }
    assert_eq!(
        statuses,
        [201, 201, 201, 503, 503, 429],
        "the cap, then the rate limit"
    );

    // Bad metadata is refused with the RFC 7591 codes.
    let Some(open) = start(
        "registration_floods_meet_the_rate_limit_and_the_cap",
        |_| {},
    )
    .await?
    else {
        return Ok(());
    };
    let bad = [
        (
            json!({"application_type": "web", "redirect_uris": ["https://evil.example/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"application_type": "native", "redirect_uris": ["https://example.com/cb"]}),
            "invalid_redirect_uri",
        ),
        (
            json!({"application_type": "native"}),
            "invalid_redirect_uri",
        ),
        (
            json!({"application_type": "desktop", "redirect_uris": [CLIENT_REDIRECT]}),
            "invalid_client_metadata",
        ),
        (
            json!({"redirect_uris": [CLIENT_REDIRECT], "grant_types": ["client_credentials"]}),
            "invalid_client_metadata",
        ),
    ];
    for (body, error) in bad {
        let answer = open
            .http
            .post(format!("{}/oauth/register", open.base))
            .json(&body)
            .send()
            .await?;
        assert_eq!(answer.status(), 400, "{body}");
        let answer: Value = answer.json().await?;
        assert_eq!(answer["error"], error, "{body}");
    }
    let huge = "x".repeat(20 * 1024);
    let answer = open
        .http
        .post(format!("{}/oauth/register", open.base))
        .body(huge)
        .send()
        .await?;
    assert_eq!(answer.status(), 413, "a body over 16 KiB");
    Ok(())
}

#[tokio::test]
async fn a_configured_client_gets_tokens_for_itself() -> anyhow::Result<()> {
    let secret = "ci-secret-value";
    let Some(docket) = start("a_configured_client_gets_tokens_for_itself", |config| {
        config.role_claim = "realm_access.roles".to_owned();
        config.clients = vec![docket_oauth::config::ConfiguredClient {
            client_id: "nightly".to_owned(),
            client_secret_sha256: docket_oauth::tokens::hash(secret),
            redirect_uris: Vec::new(),
            grant_types: vec![docket_oauth::config::GrantType::ClientCredentials],
            roles: vec!["scheduler".to_owned()],
            name: Some("Nightly jobs".to_owned()),
        }];
    })
    .await?
    else {
        return Ok(());
    };
    let basic = base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        format!("nightly:{secret}"),
    );
    let answer = docket
        .http
        .post(format!("{}/oauth/token", docket.base))
        .header(http::header::AUTHORIZATION, format!("Basic {basic}"))
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body("grant_type=client_credentials")
        .send()
        .await?;
    assert_eq!(answer.status(), 200);
    let answer: Value = answer.json().await?;
    assert!(answer.get("refresh_token").is_none(), "no refresh token");
    let claims = docket
        .server
        .verify_access_token(answer["access_token"].as_str().context("a token")?)
        .await?;
    assert_eq!(claims["sub"], "client:nightly");
    assert_eq!(claims["realm_access"], json!({"roles": ["scheduler"]}));
    assert!(
        docket.server.metadata()["grant_types_supported"]
            .as_array()
            .is_some_and(|grants| grants.contains(&json!("client_credentials")))
    );

    let posted = token(
        &docket,
        &[
            ("grant_type", "client_credentials"),
            ("client_id", "nightly"),
            ("client_secret", secret),
        ],
    )
    .await?;
    assert_eq!(posted.status, 200, "client_secret_post works too");
    expect_token_errors(
        &docket,
        &[
            (
                &[
                    ("grant_type", "client_credentials"),
                    ("client_id", "nightly"),
                    ("client_secret", "guess"),
                ],
                401,
                "invalid_client",
            ),
            (
                &[
                    ("grant_type", "client_credentials"),
                    ("client_id", "nightly"),
                ],
                401,
                "invalid_client",
            ),
            (
                &[
                    ("grant_type", "authorization_code"),
                    ("client_id", "nightly"),
                    ("client_secret", secret),
                    ("code", "x"),
                ],
                400,
                "unauthorized_client",
            ),
        ],
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn maintenance_rotates_keys_and_keeps_the_old_one_published() -> anyhow::Result<()> {
    let Some(docket) = start(
        "maintenance_rotates_keys_and_keeps_the_old_one_published",
        |_| {},
    )
    .await?
    else {
        return Ok(());
    };
    let now = time::OffsetDateTime::now_utc();
    let first = docket.server.maintain(now).await?;
    assert!(first.key_added, "the first pass makes a key");
    let again = docket.server.maintain(now).await?;
    assert!(!again.key_added, "a fresh key is kept");
    let (_, tokens) = sign_in(&docket).await?;
    let access = tokens["access_token"].as_str().context("access")?;
    let later = now + time::Duration::days(8);
    let rotated = docket.server.maintain(later).await?;
    assert!(rotated.key_added, "a week later a new key is made");
    assert_eq!(
        rotated.keys_removed, 0,
        "the old key still verifies unexpired tokens"
    );
    let keys = docket_oauth::OAuthStore::signing_keys(docket.store.as_ref()).await?;
    assert_eq!(keys.len(), 2);
    assert!(docket.server.verify_access_token(access).await.is_ok());
    let retired = docket
        .server
        .maintain(later + time::Duration::days(8))
        .await?;
    assert!(
        retired.key_added && retired.keys_removed >= 1,
        "{retired:?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_declined_or_replayed_consent_gives_no_code() -> anyhow::Result<()> {
    let Some(docket) = start("a_declined_or_replayed_consent_gives_no_code", |_| {}).await? else {
        return Ok(());
    };
    let http = &docket.http;
    let client_id = register_native(&docket, "Declined").await?;
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let mut browser = Browser::default();
    let page = browser
        .follow(http, &request.url(&docket, &[]), USED_REDIRECT)
        .await?;
    let pending = page.hidden("pending").context("pending")?;
    let csrf = page.hidden("csrf").context("csrf")?;
    let consent_url = format!("{}/oauth/consent", docket.base);
    let form = [
        ("pending", pending.as_str()),
        ("csrf", csrf.as_str()),
        ("decision", "deny"),
    ];
    let denied = browser.post_form(http, &consent_url, &form).await?;
    assert_eq!(denied.status, 303, "{denied:?}");
    assert!(
        denied
            .location
            .as_deref()
            .is_some_and(|to| to.starts_with(USED_REDIRECT))
    );
    assert_eq!(
        denied.location_param("error").as_deref(),
        Some("access_denied")
    );
    assert_eq!(denied.location_param("state"), Some(request.state.clone()));
    assert_eq!(denied.location_param("iss"), Some(docket.base.clone()));
    assert!(denied.location_param("code").is_none());
    // The same form again (a replay, or approve after deny): the error page.
    let approve = [
        ("pending", pending.as_str()),
        ("csrf", csrf.as_str()),
        ("decision", "approve"),
    ];
    let replayed = browser.post_form(http, &consent_url, &approve).await?;
    assert_eq!(replayed.status, 400);
    assert!(replayed.location.is_none());
    // Nothing was remembered: the next sign-in asks again.
    let again = browser
        .follow(http, &request.url(&docket, &[]), USED_REDIRECT)
        .await?;
    assert_eq!(again.status, 200, "the consent page again");
    assert!(again.body.contains("name=\"decision\""));
    Ok(())
}

#[tokio::test]
async fn web_clients_register_only_the_configured_redirect_uris() -> anyhow::Result<()> {
    let Some(docket) = start(
        "web_clients_register_only_the_configured_redirect_uris",
        |config| {
            config.registration.redirect_uris =
                vec!["https://*.apps.example.com/oauth/callback".to_owned()];
            config.rate_limits.authorize = 3;
        },
    )
    .await?
    else {
        return Ok(());
    };
    let register = |body: Value| {
        docket
            .http
            .post(format!("{}/oauth/register", docket.base))
            .json(&body)
            .send()
    };
    let accepted = register(json!({"application_type": "web",
        "redirect_uris": ["https://chat.apps.example.com/oauth/callback"]}))
    .await?;
    assert_eq!(accepted.status(), 201);
    let accepted: Value = accepted.json().await?;
    assert_eq!(accepted["application_type"], "web");
    let refused = register(json!({"application_type": "web",
        "redirect_uris": ["https://chat.apps.example.com.evil.example/oauth/callback"]}))
    .await?;
    assert_eq!(refused.status(), 400);
    // Without application_type, a loopback client is native and an https one web.
    let inferred = register(json!({"redirect_uris": [CLIENT_REDIRECT]})).await?;
    assert_eq!(
        inferred.json::<Value>().await?["application_type"],
        "native"
    );

    // A web client's redirect URI is exact: no port freedom.
    let client_id = accepted["client_id"].as_str().context("client_id")?;
    let request = AuthRequest::new(
        &docket,
        client_id,
        "https://chat.apps.example.com:8443/oauth/callback",
    );
    let answer = Browser::default()
        .get(&docket.http, &request.url(&docket, &[]))
        .await?;
    assert_eq!(answer.status, 400);
    assert!(answer.location.is_none());

    // The authorize rate limit: 3 a minute per address.
    let mut statuses = Vec::new();
    for _ in 0..3 {
        statuses.push(
            Browser::default()
                .get(&docket.http, &request.url(&docket, &[]))
                .await?
                .status,
        );
    }
    assert_eq!(statuses.last(), Some(&429), "{statuses:?}");
    let limited = Browser::default()
        .get(&docket.http, &request.url(&docket, &[]))
        .await?;
    assert!(limited.headers.contains_key(http::header::RETRY_AFTER));
    Ok(())
}

#[tokio::test]
async fn what_a_login_leaves_behind_is_purged_and_reaped() -> anyhow::Result<()> {
    let Some(docket) = start("what_a_login_leaves_behind_is_purged_and_reaped", |_| {}).await?
    else {
        return Ok(());
    };
    let (request, tokens) = sign_in(&docket).await?;
    for index in 0..3 {
        register_native(&docket, &format!("never used {index}")).await?;
    }
    // A login started and abandoned at the provider.
    let abandoned = AuthRequest::new(&docket, &request.client_id, USED_REDIRECT);
    Browser::default()
        .get(&docket.http, &abandoned.url(&docket, &[]))
        .await?;

    let later = time::OffsetDateTime::now_utc() + time::Duration::days(100);
    let pass = docket.server.maintain(later).await?;
    assert!(
        pass.records_purged >= 3,
        "the code, the pending login, the refresh token: {pass:?}"
    );
    assert!(
        pass.clients_reaped >= 4,
        "the unused registrations and the idle client: {pass:?}"
    );
    let again = docket.server.maintain(later).await?;
    assert_eq!(
        (again.records_purged, again.clients_reaped),
        (0, 0),
        "nothing is left: {again:?}"
    );
    let refresh = tokens["refresh_token"].as_str().context("refresh")?;
    let answer = present_refresh(&docket, &request.client_id, refresh).await?;
    assert!(
        matches!(answer.error().as_str(), "invalid_grant" | "invalid_client"),
        "{answer:?}"
    );
    Ok(())
}

#[tokio::test]
async fn another_replica_verifies_tokens_signed_with_a_key_it_has_not_seen() -> anyhow::Result<()> {
    let secret = "replica-secret";
    let Some(docket) = start(
        "another_replica_verifies_tokens_signed_with_a_key_it_has_not_seen",
        |config| {
            config.clients = vec![docket_oauth::config::ConfiguredClient {
                client_id: "batch".to_owned(),
                client_secret_sha256: docket_oauth::tokens::hash(secret),
                redirect_uris: Vec::new(),
                grant_types: vec![docket_oauth::config::GrantType::ClientCredentials],
                roles: Vec::new(),
                name: None,
            }];
        },
    )
    .await?
    else {
        return Ok(());
    };
    let replica = docket_oauth::AuthorizationServer::new(
        docket.config.clone(),
        docket_oauth::Site::at(&docket.base),
        docket.store.clone(),
        std::sync::Arc::new(docket_oauth::events::NoEvents),
    )?;
    let form = [
        ("grant_type", "client_credentials"),
        ("client_id", "batch"),
        ("client_secret", secret),
    ];
    let first = token(&docket, &form).await?.json()?;
    let first = first["access_token"]
        .as_str()
        .context("a token")?
        .to_owned();
    assert_eq!(
        replica.verify_access_token(&first).await?["sub"],
        "client:batch"
    );

    // The first replica rotates; the other has the old key cached and reads the store again
    // when a token names the new one.
    let rotated = docket
        .server
        .maintain(time::OffsetDateTime::now_utc() + time::Duration::days(8))
        .await?;
    assert!(rotated.key_added);
    let second = token(&docket, &form).await?.json()?;
    let second = second["access_token"]
        .as_str()
        .context("a token")?
        .to_owned();
    assert_ne!(
        jsonwebtoken::decode_header(&first)?.kid,
        jsonwebtoken::decode_header(&second)?.kid,
        "the new key signs"
    );
    assert_eq!(
        replica.verify_access_token(&second).await?["sub"],
        "client:batch"
    );
    assert!(
        replica.verify_access_token(&first).await.is_ok(),
        "the old key is still published"
    );
    Ok(())
}

#[tokio::test]
async fn a_client_name_cannot_put_markup_on_the_consent_page() -> anyhow::Result<()> {
    let Some(docket) = start(
        "a_client_name_cannot_put_markup_on_the_consent_page",
        |_| {},
    )
    .await?
    else {
        return Ok(());
    };
    let name = "<script>alert(1)</script><a href=\"https://evil.example\">Allow</a>";
    let client_id = register_native(&docket, name).await?;
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let page = Browser::default()
        .follow(&docket.http, &request.url(&docket, &[]), USED_REDIRECT)
        .await?;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(!page.body.contains("<script"), "{}", page.body);
    assert!(!page.body.contains("<a href"), "{}", page.body);
    assert!(
        page.body.contains("alert(1)"),
        "the name is shown, escaped: {}",
        page.body
    );
    Ok(())
}

#[tokio::test]
async fn with_offline_access_each_refresh_asks_the_provider_again() -> anyhow::Result<()> {
    let Some(docket) = start(
        "with_offline_access_each_refresh_asks_the_provider_again",
        |config| {
            config.upstream.scopes.push("offline_access".to_owned());
        },
    )
    .await?
    else {
        return Ok(());
    };
    let (request, tokens) = sign_in(&docket).await?;
    let first = tokens["refresh_token"]
        .as_str()
        .context("refresh")?
        .to_owned();
    let (_, sealed) = first
        .split_once('.')
        .context("the provider's token is sealed in")?;
    let sealer = docket_oauth::tokens::Sealer::new(crate::support::UPSTREAM_SECRET, &docket.base)
        .map_err(anyhow::Error::msg)?;
    assert!(sealer.open(sealed).is_some());

    // A refresh asks the provider, which still accepts alice.
    let refreshed = present_refresh(&docket, &request.client_id, &first).await?;
    assert_eq!(refreshed.status, 200, "{refreshed:?}");
    let refreshed = refreshed.json()?;
    let next = refreshed["refresh_token"]
        .as_str()
        .context("refresh")?
        .to_owned();
    let claims = docket
        .server
        .verify_access_token(refreshed["access_token"].as_str().context("access")?)
        .await?;
    assert_eq!(claims["sub"], "alice");
    assert_eq!(
        claims["roles"],
        json!(["analyst"]),
        "the provider's claims as they are now"
    );
    assert!(
        docket
            .events
            .all()
            .iter()
            .any(|event| event.kind == EventKind::Refreshed
                && event.detail.as_deref() == Some("checked at the identity provider"))
    );

    // The provider stops accepting the login (its refresh token is revoked there):
    // Docket's next refresh is refused and the family ends.
    let (_, sealed) = next.split_once('.').context("sealed")?;
    let upstream_token = sealer.open(sealed).context("opens")?;
    let discovery = provider_discovery(&docket).await?;
    let revocation = discovery["revocation_endpoint"]
        .as_str()
        .context("revocation")?;
    let revoked = docket
        .http
        .post(revocation)
        .basic_auth("docket", Some(crate::support::UPSTREAM_SECRET))
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(crate::support::encode(&[
            ("token", &upstream_token),
            ("token_type_hint", "refresh_token"),
        ]))
        .send()
        .await?;
    assert!(revoked.status().is_success(), "{}", revoked.status());
    let refused = present_refresh(&docket, &request.client_id, &next).await?;
    assert_eq!(
        (refused.status, refused.error().as_str()),
        (400, "invalid_grant"),
        "{refused:?}"
    );
    assert!(
        refused.body.contains("no longer accepts"),
        "{}",
        refused.body
    );
    assert!(docket.events.all().iter().any(|event| {
        event
            .detail
            .as_deref()
            .is_some_and(|detail| detail.contains("family is revoked"))
    }));
    // Reuse is detected as without the provider: the replaced token ends its family.
    let (request, tokens) = sign_in(&docket).await?;
    let old = tokens["refresh_token"]
        .as_str()
        .context("refresh")?
        .to_owned();
    let renewed = present_refresh(&docket, &request.client_id, &old)
        .await?
        .json()?;
    let renewed = renewed["refresh_token"]
        .as_str()
        .context("refresh")?
        .to_owned();
    let reused = present_refresh(&docket, &request.client_id, &old).await?;
    assert_eq!(reused.error(), "invalid_grant", "{reused:?}");
    let after = present_refresh(&docket, &request.client_id, &renewed).await?;
    assert_eq!(
        after.error(),
        "invalid_grant",
        "the family is revoked: {after:?}"
    );
    // Revoking at Docket revokes the provider's refresh token too.
    let (request, tokens) = sign_in(&docket).await?;
    let refresh = tokens["refresh_token"]
        .as_str()
        .context("refresh")?
        .to_owned();
    let (_, sealed) = refresh.split_once('.').context("sealed")?;
    let upstream_token = sealer.open(sealed).context("opens")?;
    let revoked = Browser::default()
        .post_form(
            &docket.http,
            &format!("{}/oauth/revoke", docket.base),
            &[("client_id", &request.client_id), ("token", &refresh)],
        )
        .await?;
    assert_eq!(revoked.status, 200);
    let token_endpoint = discovery["token_endpoint"]
        .as_str()
        .context("token endpoint")?;
    let at_provider = docket
        .http
        .post(token_endpoint)
        .basic_auth("docket", Some(crate::support::UPSTREAM_SECRET))
        .header(
            http::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(crate::support::encode(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", &upstream_token),
        ]))
        .send()
        .await?;
    assert_eq!(
        at_provider.status(),
        400,
        "the provider no longer refreshes it"
    );

    // A forged sealed part is refused without asking the provider.
    let forged = format!(
        "{}.{}",
        next.split_once('.').map_or("", |(secret, _)| secret),
        "AAAA"
    );
    let answer = present_refresh(&docket, &request.client_id, &forged).await?;
    assert_eq!(answer.error(), "invalid_grant");
    Ok(())
}
