//! Bearer JWTs: a client-credentials token of the real OpenID provider is accepted, anything
//! else is answered 401, and the document stays open.

use docket_fastapi_upstream::{FastApiUpstream, JwtCheck, UpstreamConfig};
use docket_oidc_provider::{Client, GrantType, OidcProvider, ProviderConfig, Resource};
use serde_json::Value;

use crate::http;

const SHOP: &str = "http://127.0.0.1/shop";
const OTHER: &str = "http://127.0.0.1/other";
const CLIENT: &str = "docket";
const SECRET: &str = "docket-test-secret";

/// The provider and an upstream that checks its tokens for [`SHOP`], or `None` to skip.
async fn provider_and_upstream(
    test_name: &str,
) -> anyhow::Result<Option<(OidcProvider, FastApiUpstream)>> {
    let config = ProviderConfig::new()
        .client(Client::new(CLIENT, SECRET).grant_types([GrantType::ClientCredentials]))
        .resource(SHOP, Resource::new().scopes(["read"]))
        .resource(OTHER, Resource::new());
    let Some(provider) = OidcProvider::start_or_skip(config, test_name).await? else {
        return Ok(None);
    };
    let upstream = UpstreamConfig::new().jwt(JwtCheck::new(provider.issuer(), SHOP));
    let Some(upstream) = FastApiUpstream::start_or_skip(upstream, test_name).await? else {
        return Ok(None);
    };
    Ok(Some((provider, upstream)))
}

#[tokio::test]
async fn whoami_accepts_a_client_credentials_token_of_the_issuer() -> anyhow::Result<()> {
    let Some((provider, upstream)) =
        provider_and_upstream("whoami_accepts_a_client_credentials_token_of_the_issuer").await?
    else {
        return Ok(());
    };
    let token = provider
        .client_credentials_token(CLIENT, SHOP, Some("read"))
        .await?;
    let response = http()
        .get(format!("{}/whoami", upstream.base_url()))
        .bearer_auth(&token)
        .send()
        .await?;
    assert_eq!(response.status(), 200, "stderr: {}", upstream.stderr());
    let whoami: Value = response.json().await?;
    assert_eq!(whoami["authenticated"], true);
    assert_eq!(whoami["client_id"], CLIENT);
    assert_eq!(whoami["aud"], SHOP);
    assert_eq!(whoami["iss"], provider.issuer());
    assert_eq!(whoami["scope"], "read");
    Ok(())
}

#[tokio::test]
async fn requests_without_an_acceptable_token_are_refused() -> anyhow::Result<()> {
    let Some((provider, upstream)) =
        provider_and_upstream("requests_without_an_acceptable_token_are_refused").await?
    else {
        return Ok(());
    };
    let http = http();
    let whoami = format!("{}/whoami", upstream.base_url());

    let missing = http.get(&whoami).send().await?;
    assert_eq!(missing.status(), 401);
    assert!(missing.headers().contains_key("www-authenticate"));
    let body: Value = missing.json().await?;
    assert_eq!(body["detail"]["error"], "invalid_token");

    let garbage = http.get(&whoami).bearer_auth("not.a.jwt").send().await?;
    assert_eq!(garbage.status(), 401);

    // A real token of the same issuer, for another audience.
    let foreign = provider
        .client_credentials_token(CLIENT, OTHER, None)
        .await?;
    let wrong_audience = http.get(&whoami).bearer_auth(&foreign).send().await?;
    assert_eq!(wrong_audience.status(), 401);

    let items = http
        .get(format!("{}/items", upstream.base_url()))
        .send()
        .await?;
    assert_eq!(items.status(), 401);

    // The document stays open, and declares the bearer scheme.
    let document = http.get(upstream.openapi_url()).send().await?;
    assert_eq!(document.status(), 200);
    let document: Value = document.json().await?;
    let schemes = document["components"]["securitySchemes"]
        .as_object()
        .expect("security schemes");
    assert!(
        schemes
            .values()
            .any(|scheme| scheme["type"] == "http" && scheme["scheme"] == "bearer"),
        "{schemes:?}"
    );
    Ok(())
}
