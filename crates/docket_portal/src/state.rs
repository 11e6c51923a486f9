//! What every handler shares: the configuration and the store.

use std::sync::Arc;

use crate::config::PortalConfig;
use crate::store::PortalStore;

/// The portal's shared state.
pub(crate) struct State {
    pub(crate) config: PortalConfig,
    pub(crate) store: Arc<dyn PortalStore>,
}
