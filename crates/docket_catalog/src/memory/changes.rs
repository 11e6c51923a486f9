//! [`MemoryChangeFeed`]: changes heard in this process only.

use std::sync::Mutex;

use async_trait::async_trait;

use super::lock;
use crate::CatalogError;
use crate::changes::{CatalogChange, ChangeFeed, ChangeListener};

/// A [`ChangeFeed`] for one process: a published change reaches its listener at once.
#[derive(Default)]
pub struct MemoryChangeFeed {
    listener: Mutex<Option<ChangeListener>>,
}

impl MemoryChangeFeed {
    /// A feed nobody listens to yet.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl ChangeFeed for MemoryChangeFeed {
    async fn publish(&self, change: CatalogChange) -> Result<(), CatalogError> {
        let listener = lock(&self.listener).clone();
        if let Some(listener) = listener {
            listener(change);
        }
        Ok(())
    }

    fn set_change_listener(&self, listener: ChangeListener) {
        *lock(&self.listener) = Some(listener);
    }
}
