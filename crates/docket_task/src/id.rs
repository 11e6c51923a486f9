//! Task ids: 128 bits from the operating system's random source, written as 32
//! lower-case hex digits, after a prefix where the minting code names the place its
//! tasks live (`task_…`, `run_…`). Never derived from time or counters, so an id
//! cannot be guessed from another.
//!
//! A prefix lets a lookup go only where the id says its task lives, and it is
//! decided from the id's text alone: which places are read never depends on whether
//! the task exists or whose it is. An id without a prefix (minted before prefixes,
//! or by [`TaskId::generate`]) may live anywhere.

use std::fmt;

/// A task id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(String);

impl TaskId {
    /// A fresh id from the OS random source: 32 lower-case hex digits, no prefix.
    ///
    /// # Errors
    /// When the OS random source fails.
    pub fn generate() -> Result<Self, getrandom::Error> {
        Ok(Self(random_hex()?))
    }

    /// A fresh id from the OS random source that names where its task lives:
    /// `prefix`, `_`, then 32 lower-case hex digits.
    ///
    /// # Errors
    /// When the OS random source fails.
    pub fn generate_in(prefix: IdPrefix) -> Result<Self, getrandom::Error> {
        Ok(Self(format!("{}_{}", prefix.0, random_hex()?)))
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

    /// The prefix the id was minted with, if any.
    pub fn prefix(&self) -> Option<&str> {
        self.0.split_once('_').map(|(prefix, _)| prefix)
    }
}

/// The prefix of the ids minted for one place tasks live. Made in a constant, so a
/// prefix that is not 1 to 8 lower-case ASCII letters fails the build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdPrefix(&'static str);

impl IdPrefix {
    /// The prefix `text`.
    ///
    /// # Panics
    /// When `text` is not 1 to 8 lower-case ASCII letters; in a constant, that is a
    /// build error.
    #[must_use]
    pub const fn new(text: &'static str) -> Self {
        assert!(
            is_prefix(text.as_bytes()),
            "an id prefix is 1 to 8 lower-case ASCII letters"
        );
        Self(text)
    }

    /// The prefix as text, without its `_`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        self.0
    }

    /// Whether an id may name a task minted with this prefix: it carries this prefix,
    /// or none at all.
    #[must_use]
    pub fn may_name(self, id: &TaskId) -> bool {
        id.prefix().is_none_or(|prefix| prefix == self.0)
    }
}

/// The longest prefix an id may carry.
const MAX_PREFIX: usize = 8;

const fn is_prefix(text: &[u8]) -> bool {
    if text.is_empty() || text.len() > MAX_PREFIX {
        return false;
    }
    let mut at = 0;
    while at < text.len() {
        if !text[at].is_ascii_lowercase() {
            return false;
        }
        at += 1;
    }
    true
}

fn random_hex() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(hex::encode(bytes))
}

/// Whether `text` has the shape of every id Docket mints — task, run, asset and
/// call-record ids: 32 lower-case hex digits, after an optional prefix of 1 to 8
/// lower-case letters and `_`. Checked before any lookup, so text a store would
/// choke on (a NUL byte, a megabyte) never reaches one.
#[must_use]
pub fn is_well_formed(text: &str) -> bool {
    let digits = match text.split_once('_') {
        Some((prefix, digits)) if is_prefix(prefix.as_bytes()) => digits,
        Some(_) => return false,
        None => text,
    };
    digits.len() == 32
        && digits
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
    fn prefixed_ids_carry_their_prefix_and_32_hex_digits() {
        const PLACE: IdPrefix = IdPrefix::new("place");
        let id = TaskId::generate_in(PLACE).expect("random");
        let (prefix, digits) = id.as_str().split_once('_').expect("a prefix");
        assert_eq!(prefix, "place");
        assert_eq!(id.prefix(), Some("place"));
        assert_eq!(digits.len(), 32);
        assert!(is_well_formed(id.as_str()));
        assert_eq!(TaskId::from_client(id.as_str()), Some(id.clone()));
        assert_ne!(id, TaskId::generate_in(PLACE).expect("random"));
        assert_eq!(TaskId::generate().expect("random").prefix(), None);
    }

    #[test]
    fn a_prefix_names_its_own_ids_and_those_without_one() {
        const TASKS: IdPrefix = IdPrefix::new("task");
        const RUNS: IdPrefix = IdPrefix::new("run");
        let task = TaskId::generate_in(TASKS).expect("random");
        let run = TaskId::generate_in(RUNS).expect("random");
        let bare = TaskId::generate().expect("random");
        assert!(TASKS.may_name(&task) && !TASKS.may_name(&run) && TASKS.may_name(&bare));
        assert!(RUNS.may_name(&run) && !RUNS.may_name(&task) && RUNS.may_name(&bare));
    }

    #[test]
    fn a_prefix_is_one_to_eight_lower_case_letters() {
        for accepted in ["t", "run", "task", "abcdefgh"] {
            assert!(is_prefix(accepted.as_bytes()), "{accepted}");
        }
        for refused in ["", "Task", "ru_n", "run1", "abcdefghi", "tâsk"] {
            assert!(!is_prefix(refused.as_bytes()), "{refused}");
        }
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
            "_0123456789abcdef0123456789abcdef",
            "run-0123456789abcdef0123456789abcdef",
            "Run_0123456789abcdef0123456789abcdef",
            "toolongpx_0123456789abcdef0123456789abcdef",
            "run_0123456789abcdef0123456789abcde",
            "run_run_0123456789abcdef0123456789abcdef",
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

        /// Whatever a client sends, an accepted id is 32 lower-case hex digits, after
        /// at most one prefix of 1 to 8 lower-case letters and `_`.
        #[test]
        fn only_the_minted_shape_is_accepted(
            text in "\\PC{0,40}|([a-zA-Z]{0,9}[_-])?[0-9a-fA-F]{31,33}"
        ) {
            let accepted = TaskId::from_client(&text).is_some();
            let hex = |digits: &str| digits.len() == 32
                && digits.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
            let minted_shape = match text.split_once('_') {
                None => hex(&text),
                Some((prefix, digits)) => (1..=8).contains(&prefix.len())
                    && prefix.chars().all(|c| c.is_ascii_lowercase())
                    && hex(digits),
            };
            proptest::prop_assert_eq!(accepted, minted_shape);
        }
    }
}
