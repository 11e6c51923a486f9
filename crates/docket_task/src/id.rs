//! Task ids: 128 bits from the operating system's random source, written as 32
//! lower-case hex digits. Never derived from time or counters, so an id cannot be
//! guessed from another.

use std::fmt;

/// A task id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(String);

impl TaskId {
    /// A fresh id from the OS random source.
    ///
    /// # Errors
    /// When the OS random source fails.
    pub fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)?;
        Ok(Self(hex::encode(bytes)))
    }

    /// Accepts any client-supplied id string for lookup. Ids Docket mints are 32 hex
    /// digits, but lookups must answer "unknown" for anything else, not fail
    /// differently, so this only bounds the length.
    pub fn from_client(text: &str) -> Option<Self> {
        (!text.is_empty() && text.len() <= 128).then(|| Self(text.to_owned()))
    }

    /// Wraps an id read back from storage.
    pub fn from_stored(text: String) -> Self {
        Self(text)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn ids_are_32_hex_digits_and_distinct() {
        let ids: HashSet<String> = (0..1000)
            .map(|_| TaskId::generate().expect("random").0)
            .collect();
        assert_eq!(ids.len(), 1000);
        assert!(ids.iter().all(|id| {
            id.len() == 32
                && id
                    .chars()
                    .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        }));
    }

    #[test]
    fn client_ids_are_bounded() {
        assert!(TaskId::from_client("").is_none());
        assert!(TaskId::from_client(&"a".repeat(129)).is_none());
        assert_eq!(
            TaskId::from_client("gate-test").map(|id| id.0),
            Some("gate-test".into())
        );
    }
}
