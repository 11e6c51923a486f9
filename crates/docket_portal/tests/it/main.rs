//! The portal's integration tests, one binary: the store suite on the memory
//! store, the properties of its parsers, and the login, session and CSRF
//! rules end to end through `Portal::handle`.

mod flow;
mod memory_store;
mod pages;
mod parsers;
