//! TLS: the throwaway PKI, https with a client CA that admits only a client with a
//! certificate it signed, and `/whoami` naming that certificate.

use std::time::Duration;

use docket_fastapi_upstream::certs::{CLIENT_CERT_VALID_DAYS, TestPki};
use docket_fastapi_upstream::{FastApiUpstream, UpstreamConfig};
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A client whose only root is the test CA, with the client identity when `with_identity`.
fn client(pki: &TestPki, with_identity: bool) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .tls_certs_only([reqwest::Certificate::from_pem(pki.ca_pem.as_bytes())?]);
    if with_identity {
        builder = builder.identity(reqwest::Identity::from_pem(
            pki.client_identity_pem().as_bytes(),
        )?);
    }
    Ok(builder.build()?)
}

#[tokio::test]
async fn mutual_tls_admits_only_a_client_with_a_certificate_of_the_ca() -> anyhow::Result<()> {
    let Some(pki) = TestPki::generate_or_skip(
        "alice-agent",
        "mutual_tls_admits_only_a_client_with_a_certificate_of_the_ca",
    )?
    else {
        return Ok(());
    };
    let Some(upstream) = FastApiUpstream::start_or_skip(
        UpstreamConfig::new().tls(pki.mutual_tls()),
        "mutual_tls_admits_only_a_client_with_a_certificate_of_the_ca",
    )
    .await?
    else {
        return Ok(());
    };
    assert!(upstream.base_url().starts_with("https://127.0.0.1:"));
    let whoami = format!("{}/whoami", upstream.base_url());

    let response = client(&pki, true)?.get(&whoami).send().await?;
    assert_eq!(response.status(), 200, "stderr: {}", upstream.stderr());
    let body: Value = response.json().await?;
    assert_eq!(body["client_cert_cn"], "alice-agent");
    assert_eq!(body["client_cert_subject"], "CN=alice-agent");

    let refused = client(&pki, false)?.get(&whoami).send().await;
    assert!(
        refused.is_err(),
        "a client without a certificate got {refused:?}"
    );

    // A certificate of another CA is refused too.
    let stranger = TestPki::generate("mallory-agent")?;
    let stranger_client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .tls_certs_only([reqwest::Certificate::from_pem(pki.ca_pem.as_bytes())?])
        .identity(reqwest::Identity::from_pem(
            stranger.client_identity_pem().as_bytes(),
        )?)
        .build()?;
    let refused = stranger_client.get(&whoami).send().await;
    assert!(refused.is_err(), "a stranger's certificate got {refused:?}");
    Ok(())
}

#[tokio::test]
async fn https_without_a_client_ca_asks_for_no_certificate() -> anyhow::Result<()> {
    let Some(pki) = TestPki::generate_or_skip(
        "alice-agent",
        "https_without_a_client_ca_asks_for_no_certificate",
    )?
    else {
        return Ok(());
    };
    let Some(upstream) = FastApiUpstream::start_or_skip(
        UpstreamConfig::new().tls(pki.server_tls()),
        "https_without_a_client_ca_asks_for_no_certificate",
    )
    .await?
    else {
        return Ok(());
    };
    let body: Value = client(&pki, false)?
        .get(upstream.openapi_url())
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    assert!(body["openapi"].as_str().is_some());
    Ok(())
}

#[test]
fn the_client_certificate_expires_when_it_says() -> anyhow::Result<()> {
    let Some(pki) =
        TestPki::generate_or_skip("alice-agent", "the_client_certificate_expires_when_it_says")?
    else {
        return Ok(());
    };
    let not_after = OffsetDateTime::parse(&pki.client_not_after, &Rfc3339)?;
    let expected = OffsetDateTime::now_utc() + time::Duration::days(CLIENT_CERT_VALID_DAYS.into());
    assert!(
        (not_after - expected).abs() < time::Duration::minutes(5),
        "{not_after} against {expected}"
    );
    let short = TestPki::generate_with("bob-agent", 3)?;
    let not_after = OffsetDateTime::parse(&short.client_not_after, &Rfc3339)?;
    let expected = OffsetDateTime::now_utc() + time::Duration::days(3);
    assert!((not_after - expected).abs() < time::Duration::minutes(5));

    let dir = pki.dir.clone();
    assert!(dir.join("client.pem").is_file());
    drop(pki);
    assert!(!dir.exists(), "the folder is removed on drop");
    Ok(())
}
