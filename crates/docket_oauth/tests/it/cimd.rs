//! Client ID Metadata Documents end to end: a document served over https by
//! a local server (its certificate from a test CA in `tls/`, trusted through
//! `ca_file`; its host allowed by `allowed_hosts`) names a client that signs
//! in; a private address without `allowed_hosts` is refused before any
//! connection; a 50 MB answer is refused at `max_bytes`; a document naming
//! another URL, a redirect and a non-JSON answer are refused.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::support::{AuthRequest, Browser, CLIENT_REDIRECT, authorize, redeem, start};

const USED_REDIRECT: &str = "http://127.0.0.1:40111/client/callback";

fn tls_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/it/tls")
}

/// Serves the test documents over https on a loopback port; its base URL.
async fn document_server() -> anyhow::Result<(String, tokio::task::JoinHandle<()>)> {
    let certificates = CertificateDer::pem_file_iter(tls_dir().join("server.pem"))?
        .collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(tls_dir().join("server.key"))?;
    let provider = Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certificates, key)?;
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("https://{}", listener.local_addr()?);
    let origin = base.clone();
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let origin = origin.clone();
            tokio::spawn(async move {
                let Ok(mut stream) = acceptor.accept(stream).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buffer = [0_u8; 1024];
                while !head.windows(4).any(|window| window == b"\r\n\r\n") && head.len() < 16 * 1024
                {
                    match stream.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(read) => head.extend_from_slice(&buffer[..read]),
                    }
                }
                let head = String::from_utf8_lossy(&head);
                let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                let _ = answer(&mut stream, &origin, &path).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok((base, task))
}

async fn answer(
    stream: &mut (impl tokio::io::AsyncWrite + Unpin),
    origin: &str,
    path: &str,
) -> std::io::Result<()> {
    let document = |client_id: &str| {
        serde_json::json!({
            "client_id": client_id,
            "client_name": "Document client",
            "redirect_uris": [CLIENT_REDIRECT],
            "token_endpoint_auth_method": "none",
        })
        .to_string()
    };
    let (status, content_type, extra, body) = match path {
        "/client.json" => (
            "200 OK",
            "application/json",
            "Cache-Control: max-age=300\r\n",
            document(&format!("{origin}/client.json")),
        ),
        "/other.json" => (
            "200 OK",
            "application/json",
            "",
            document(&format!("{origin}/client.json")),
        ),
        "/text.json" => (
            "200 OK",
            "text/html",
            "",
            document(&format!("{origin}/text.json")),
        ),
        "/redirect.json" => (
            "302 Found",
            "application/json",
            "Location: /client.json\r\n",
            String::new(),
        ),
        "/huge.json" => {
            // 50 MB without a length: the reader must stop at its bound.
            stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
                .await?;
            let chunk = vec![b' '; 1024 * 1024];
            stream.write_all(b"{\"client_id\": \"").await?;
            for _ in 0..50 {
                stream.write_all(&chunk).await?;
            }
            return Ok(());
        }
        _ => ("404 Not Found", "application/json", "", "{}".to_owned()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n{extra}Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await
}

#[tokio::test]
async fn a_client_named_by_its_document_signs_in() -> anyhow::Result<()> {
    let (base, _server) = document_server().await?;
    let Some(docket) = start("a_client_named_by_its_document_signs_in", |config| {
        config.client_metadata_documents.allowed_hosts = vec!["127.0.0.1".to_owned()];
        config.client_metadata_documents.ca_file = Some(tls_dir().join("ca.pem"));
    })
    .await?
    else {
        return Ok(());
    };
    let client_id = format!("{base}/client.json");
    let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
    let mut browser = Browser::default();
    let page = browser
        .follow(&docket.http, &request.url(&docket, &[]), USED_REDIRECT)
        .await?;
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        page.body.contains("Document client"),
        "the consent page names the document's client"
    );
    assert!(page.body.contains("describes itself"), "{}", page.body);
    let answer = authorize(&docket, &mut browser, &request, USED_REDIRECT).await?;
    assert_eq!(answer.status, 303, "{answer:?}");
    let code = answer.location_param("code").context("a code")?;
    let tokens = redeem(&docket, &request, USED_REDIRECT, &code).await?;
    assert_eq!(tokens.status, 200, "{tokens:?}");
    let access = tokens.json()?["access_token"]
        .as_str()
        .context("access")?
        .to_owned();
    let claims = docket.server.verify_access_token(&access).await?;
    assert_eq!(claims["client_id"], client_id.as_str());

    // Documents that break a rule are the error page, never a redirect.
    for (path, says) in [
        ("/huge.json", "over 65536 bytes"),
        ("/other.json", "is not the URL"),
        ("/text.json", "not application/json"),
        ("/redirect.json", "redirect"),
        ("/missing.json", "404"),
    ] {
        let request = AuthRequest::new(&docket, &format!("{base}{path}"), USED_REDIRECT);
        let answer = browser
            .get(&docket.http, &request.url(&docket, &[]))
            .await?;
        assert_eq!(answer.status, 400, "{path}: {answer:?}");
        assert!(answer.location.is_none(), "{path}");
        assert!(answer.body.contains(says), "{path}: {}", answer.body);
    }
    Ok(())
}

#[tokio::test]
async fn a_document_at_a_private_address_is_not_fetched() -> anyhow::Result<()> {
    let (base, _server) = document_server().await?;
    let Some(docket) = start("a_document_at_a_private_address_is_not_fetched", |config| {
        config.client_metadata_documents.ca_file = Some(tls_dir().join("ca.pem"));
    })
    .await?
    else {
        return Ok(());
    };
    for client_id in [
        format!("{base}/client.json"),
        format!("{}/client.json", base.replace("127.0.0.1", "localhost")),
        "https://10.0.0.1/client.json".to_owned(),
        "https://169.254.169.254/latest/meta-data".to_owned(),
        "https://[::1]/client.json".to_owned(),
    ] {
        let request = AuthRequest::new(&docket, &client_id, USED_REDIRECT);
        let answer = Browser::default()
            .get(&docket.http, &request.url(&docket, &[]))
            .await?;
        assert_eq!(answer.status, 400, "{client_id}: {answer:?}");
        assert!(answer.location.is_none());
        assert!(
            answer.body.contains("private or reserved address"),
            "{client_id}: {}",
            answer.body
        );
        let token = crate::support::token(
            &docket,
            &[
                ("grant_type", "authorization_code"),
                ("client_id", &client_id),
                ("code", "x"),
            ],
        )
        .await?;
        assert_eq!(token.error(), "invalid_client", "{client_id}");
    }
    Ok(())
}

#[tokio::test]
async fn a_document_behind_an_untrusted_certificate_says_so() -> anyhow::Result<()> {
    let (base, _server) = document_server().await?;
    let Some(docket) = start(
        "a_document_behind_an_untrusted_certificate_says_so",
        |config| {
            config.client_metadata_documents.allowed_hosts = vec!["127.0.0.1".to_owned()];
        },
    )
    .await?
    else {
        return Ok(());
    };
    let request = AuthRequest::new(&docket, &format!("{base}/client.json"), USED_REDIRECT);
    let answer = Browser::default()
        .get(&docket.http, &request.url(&docket, &[]))
        .await?;
    assert_eq!(answer.status, 400, "{answer:?}");
    assert!(answer.location.is_none());
    assert!(
        answer.body.contains("could not be fetched") && answer.body.contains("certificate"),
        "the page says the certificate is not trusted: {}",
        answer.body
    );
    Ok(())
}
