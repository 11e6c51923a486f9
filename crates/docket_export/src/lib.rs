//! Export executors: everything that moves data from a source to an asset, with
//! cancellation and progress in and a report out. No knowledge of MCP, HTTP
//! serving or the database.
//!
//! - [`trino`]: a Trino REST client that hands rows on page by page.
//! - [`readonly`]: read-only SQL enforced by parsing.
//! - [`format`]: streaming row writers (CSV, JSON, JSONL, and Parquet with the
//!   `parquet` feature).
//! - [`sink`]: where asset bytes go (filesystem, S3), written atomically.
//! - [`export`]: one export start to end — query pages through a writer into an
//!   upload, with caps, a timeout and cancellation; committed only when whole.

pub mod export;
pub mod format;
pub mod readonly;
pub mod sink;
pub mod trino;
