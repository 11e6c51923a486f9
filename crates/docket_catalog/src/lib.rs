#![doc = include_str!("../README.md")]

pub mod assets;
pub mod calls;
pub mod changes;
mod error;
pub mod links;
pub mod memory;
mod page;
pub mod principals;
pub mod prompts;
pub mod retention;
pub mod scripts;
pub mod sessions;
pub mod spools;
#[cfg(feature = "testing")]
pub mod testing;

pub use assets::{Asset, AssetStore, CreateOutcome, NewAsset};
pub use calls::{CallCatalog, CallKind, CallRecord, NewCallRecord};
pub use changes::{CatalogChange, ChangeFeed, ChangeListener};
pub use error::CatalogError;
pub use links::{LinkKey, LinkStore, NewShare, Share, ShareAudience};
pub use page::PageCursor;
pub use principals::PrincipalStore;
pub use prompts::{LibraryPrompt, NewPrompt, PromptLibrary, PromptViewer};
pub use retention::{DueAsset, Retention};
pub use scripts::ScriptStore;
pub use sessions::{AnswerListener, AnswerSignal, EndedSession, NewSession, Session, SessionStore};
pub use spools::{NewSpool, Spool, SpoolProgress, SpoolState, SpoolStore};

/// A fresh id for an asset, a call record or a script: 128 bits from the
/// operating system's random source as 32 lower-case hex digits, like the digits
/// of a task id, so one id cannot be guessed from another. Runs are tasks too, and
/// the run bridge mints their ids with the `run_` prefix that says so
/// (`docket_run_bridge::task::new_run_id`).
///
/// # Errors
/// When the OS random source fails.
pub fn generate_id() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ids_are_32_hex_digits_and_distinct() {
        let ids: HashSet<String> = (0..1000).map(|_| generate_id().expect("random")).collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|id| {
            id.len() == 32
                && id
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        }));
    }
}
