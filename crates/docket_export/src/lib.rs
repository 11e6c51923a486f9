//! Export executors: everything that moves data from a source to an asset, with
//! cancellation and progress in and a report out. No knowledge of MCP, HTTP
//! serving or the database.
//!
//! - [`trino`]: a Trino REST client that hands rows on page by page.
//! - [`api`]: the HTTP caller for `api` connections (paths pinned below the base
//!   URL, no redirects, no caller credentials) and the streamed export of one
//!   response.
//! - [`graphql`]: GraphQL documents checked before any I/O, the caller, and the
//!   export of a query's pages (Relay cursor pagination).
//! - [`readonly`]: read-only SQL enforced by parsing.
//! - [`format`]: streaming row writers (CSV, JSON, JSONL, and Parquet with the
//!   `parquet` feature).
//! - [`sink`]: where asset bytes go (filesystem, S3), written atomically.
//! - [`export`]: one export start to end — query pages through a writer into an
//!   upload, with caps, a timeout and cancellation; committed only when whole.

pub mod api;
pub mod export;
pub mod format;
pub mod graphql;
pub mod readonly;
pub mod sink;
pub mod trino;
