//! The docket_export integration tests, one binary with one module per part of the
//! crate, so the shared target builds and links it once.

mod api;
mod format;
mod readonly;
mod sink;
mod trino;
mod view;
