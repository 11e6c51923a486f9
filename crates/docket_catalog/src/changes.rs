//! [`ChangeFeed`]: tells every replica that a list a client may be listening to
//! changed — the prompt library, or one owner's assets — so listen streams can say
//! `list_changed` wherever the change was made.

use std::sync::Arc;

use async_trait::async_trait;

use crate::CatalogError;

/// A list that changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CatalogChange {
    /// A prompt of the library was created, changed or deleted.
    Prompts,
    /// An asset of `owner` was recorded or deleted.
    Assets {
        /// Whose assets.
        owner: String,
    },
}

impl CatalogChange {
    /// The change as a notification payload: `prompts` or `assets:<owner>`.
    pub fn payload(&self) -> String {
        match self {
            CatalogChange::Prompts => "prompts".to_owned(),
            CatalogChange::Assets { owner } => format!("assets:{owner}"),
        }
    }

    /// A payload from [`CatalogChange::payload`]; `None` for anything else.
    pub fn from_payload(payload: &str) -> Option<Self> {
        match payload.split_once(':') {
            None if payload == "prompts" => Some(CatalogChange::Prompts),
            Some(("assets", owner)) if !owner.is_empty() => Some(CatalogChange::Assets {
                owner: owner.to_owned(),
            }),
            _ => None,
        }
    }
}

/// Hears [`CatalogChange`]s, from this process or another replica.
pub type ChangeListener = Arc<dyn Fn(CatalogChange) + Send + Sync>;

/// Where changes are published and heard.
#[async_trait]
pub trait ChangeFeed: Send + Sync {
    /// Tells every replica's listener (this one's too) of `change`.
    ///
    /// # Errors
    /// [`CatalogError::Unavailable`] when it cannot be sent.
    async fn publish(&self, change: CatalogChange) -> Result<(), CatalogError>;

    /// Asks to hear every change published, on any replica.
    fn set_change_listener(&self, listener: ChangeListener);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_round_trip() {
        for change in [
            CatalogChange::Prompts,
            CatalogChange::Assets {
                owner: "apikey:alice".into(),
            },
        ] {
            assert_eq!(CatalogChange::from_payload(&change.payload()), Some(change));
        }
        for other in ["", "assets:", "prompt", "other:x"] {
            assert_eq!(CatalogChange::from_payload(other), None, "{other}");
        }
    }
}
