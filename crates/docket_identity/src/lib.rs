//! Who a caller is at each upstream Docket talks to.
//!
//! Docket authenticates a caller once (an OIDC access token or an API key) and
//! then acts for them at Trino and at HTTP APIs. This crate turns the caller's
//! verified claims into what each upstream needs:
//!
//! - [`claims`]: reading a claim at a dot path, the same way role claims are read;
//! - [`user`]: the Trino session user (`X-Trino-User`) chosen per connection from a
//!   claim, transformed and checked against allow and deny patterns;
//! - [`connection`]: `identity:` of an API or GraphQL connection (`fixed`,
//!   `token_exchange` or `headers`) and the credential each caller's calls carry;
//! - [`exchange`]: OAuth 2.0 Token Exchange (RFC 8693) of the caller's access token
//!   for one whose audience is the upstream, cached per caller;
//! - [`headers`]: identity headers filled from the caller's claims;
//! - [`secret`]: a string whose `Debug` output is `<redacted>`.
//!
//! The token exchange is the only I/O here, to the token endpoint the operator
//! configured. Nothing logs or formats a secret.

pub mod claims;
pub mod connection;
mod duration;
pub mod exchange;
pub mod headers;
pub mod secret;
pub mod user;
