//! The FastAPI upstream, started for real: the document FastAPI generates, the shop's
//! answers, bearer JWTs from the real OpenID provider, and TLS with client certificates.
//!
//! Without Python each case says so on the terminal and returns; with
//! `DOCKET_REQUIRE_FASTAPI=1` that is a failure (and likewise for the OpenID provider with
//! `DOCKET_REQUIRE_OIDC_PROVIDER=1`).

mod jwt;
mod openapi;
mod tls;

/// A client that talks to loopback directly, whatever proxy the environment names.
fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("a plain reqwest client builds")
}
