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

    /// A client-supplied id, when it has the shape of an id Docket mints (see
    /// [`is_well_formed`]); `None` for anything else, which the caller answers
    /// exactly as it answers an unknown id, without any lookup.
    pub fn from_client(text: &str) -> Option<Self> {
        is_well_formed(text).then(|| Self(text.to_owned()))
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

/// Whether `text` has the shape of every id Docket mints — task, run, asset and
/// call-record ids: 32 lower-case hex digits. Checked before any lookup, so text a
/// store would choke on (a NUL byte, a megabyte) never reaches one.
#[must_use]
pub fn is_well_formed(text: &str) -> bool {
    text.len() == 32
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
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
    fn client_ids_must_have_the_minted_shape() {
        let minted = TaskId::generate().expect("random");
        assert_eq!(TaskId::from_client(minted.as_str()), Some(minted));
        for refused in [
            "",
            "gate-test",
            "\u{0}abc",
            "0123456789ABCDEF0123456789abcdef",
            "0123456789abcdef0123456789abcde",
            "0123456789abcdef0123456789abcdef0",
            "0123456789abcdef0123456789abcde\u{0}",
        ] {
            assert!(TaskId::from_client(refused).is_none(), "{refused:?}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Whatever a client sends, an accepted id is exactly 32 lower-case hex digits.
        #[test]
        fn only_the_minted_shape_is_accepted(text in "\\PC{0,40}|[0-9a-f]{32}") {
            let accepted = TaskId::from_client(&text).is_some();
            let minted_shape = text.len() == 32
                && text.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
            proptest::prop_assert_eq!(accepted, minted_shape);
        }
    }
}
