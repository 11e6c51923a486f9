//! The configuration file: YAML in the shape `docs/configuration.md` documents
//! (docs/design.md, Interfaces kept stable). `schema` is its shape and defaults,
//! `load` reads and checks it, `units` parses sizes and durations, and `sink` builds
//! the object sink `storage:` describes.

mod load;
mod schema;
mod sink;
mod units;

pub use load::ConfigError;
pub use schema::*;
pub use sink::{object_sink, remove_stale_uploads};
pub use units::{deserialize_bytes, deserialize_duration, parse_bytes, parse_duration};
