//! The behaviour suite on the memory store.

use std::sync::Arc;

use docket_portal::{MemoryStore, PortalStore};

docket_portal::portal_store_suite!(async {
    (Arc::new(MemoryStore::new()) as Arc<dyn PortalStore>, ())
});
