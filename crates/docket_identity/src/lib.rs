//! Who a caller is at each upstream Docket talks to.
//!
//! Docket authenticates a caller once (an OIDC access token or an API key) and
//! then acts for them at Trino and at HTTP APIs. This crate turns the caller's
//! verified claims into what each upstream needs:
//!
//! - [`claims`]: reading a claim at a dot path, the same way role claims are read;
//! - [`user`]: the Trino session user (`X-Trino-User`) chosen per connection from a
//!   claim, transformed and checked against allow and deny patterns.
//!
//! Nothing here does I/O or logs a secret.

pub mod claims;
pub mod user;
