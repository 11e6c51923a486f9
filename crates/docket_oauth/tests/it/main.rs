//! docket_oauth's integration tests, in one binary: the store behaviour suite
//! on the memory store (the database backends run it in docket_storage).

mod memory_store;
