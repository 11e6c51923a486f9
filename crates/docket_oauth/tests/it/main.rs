//! docket_oauth's integration tests, in one binary: the store behaviour suite
//! on the memory store (the database backends run it in docket_storage); the
//! property tests of every parser; and the authorization server end to end
//! against the real OpenID provider (the flow, its attacks, metadata
//! documents over https).

mod cimd;
mod flow;
mod memory_store;
mod parsers;
mod support;
