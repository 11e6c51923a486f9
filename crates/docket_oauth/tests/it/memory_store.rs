//! The [`OAuthStore`] behaviour suite on [`MemoryStore`].

use std::sync::Arc;

use docket_oauth::OAuthStore;
use docket_oauth::memory::MemoryStore;

docket_oauth::oauth_store_suite!(std::future::ready((
    Arc::new(MemoryStore::new()) as Arc<dyn OAuthStore>,
    ()
)));
