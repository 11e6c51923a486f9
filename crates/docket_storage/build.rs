//! Rebuilds the crate when a migration is added. `embed_migrations!` reads the
//! migration folders at compile time; edits to an existing `up.sql` are tracked
//! through its `include_str!`, but a new migration folder is only noticed if
//! cargo is told to watch the folders themselves.
//!
//! `migrations` in this crate is a link to the workspace root's `migrations/`: the
//! folders stay where every backend's schema is kept, and `cargo package` still puts
//! them in the crate (a path outside the crate would not be packaged).

fn main() {
    println!("cargo::rerun-if-changed=migrations/postgres");
    println!("cargo::rerun-if-changed=migrations/sqlite");
}
