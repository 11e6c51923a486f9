#![doc = include_str!("../README.md")]

pub mod certs;
mod config;
mod install;
mod tail;
mod unavailable;
mod upstream;

use std::path::PathBuf;

pub use config::{JwtCheck, TlsFiles, UpstreamConfig};
pub use unavailable::{REQUIRE_VAR, Unavailable};
pub use upstream::FastApiUpstream;

/// Where the Python environment is installed: `target/fastapi-upstream/` of the workspace (or
/// of an absolute `CARGO_TARGET_DIR`).
pub fn cache_dir() -> PathBuf {
    install::cache_root()
}
