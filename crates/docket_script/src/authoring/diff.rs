//! A unified diff between two texts (two versions of a script, or a source
//! before and after a patch), with the count of lines added and removed.

use std::time::Duration;

use similar::{ChangeTag, TextDiff};

/// Lines of context around each change.
const CONTEXT_LINES: usize = 3;

/// How long the diff may search for the smallest difference before it settles
/// for a larger one (it never fails; two 256 KiB scripts with nothing in
/// common would otherwise take a while).
const DIFF_TIMEOUT: Duration = Duration::from_secs(1);

/// A unified diff and its size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextChange {
    /// The unified diff (`--- old`, `+++ new`, `@@` hunks); empty when the
    /// texts are equal.
    pub unified: String,
    /// Lines only in the new text.
    pub added: usize,
    /// Lines only in the old text.
    pub removed: usize,
}

/// The unified diff from `old` to `new`, its headers naming them `old_name`
/// and `new_name`.
pub fn diff(old: &str, new: &str, old_name: &str, new_name: &str) -> TextChange {
    let lines = TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new);
    let (mut added, mut removed) = (0, 0);
    for change in lines.iter_all_changes() {
        match change.tag() {
            ChangeTag::Insert => added += 1,
            ChangeTag::Delete => removed += 1,
            ChangeTag::Equal => {}
        }
    }
    let unified = if added == 0 && removed == 0 {
        String::new()
    } else {
        lines
            .unified_diff()
            .context_radius(CONTEXT_LINES)
            .header(old_name, new_name)
            .to_string()
    };
    TextChange {
        unified,
        added,
        removed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_changed_line_shows_as_one_hunk() {
        let change = diff("a\nb\nc\n", "a\nB\nc\n", "v1", "v2");
        assert_eq!(
            change.unified,
            "--- v1\n+++ v2\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
        assert_eq!((change.added, change.removed), (1, 1));
    }

    #[test]
    fn equal_texts_have_an_empty_diff() {
        let change = diff("a\n", "a\n", "v1", "v2");
        assert_eq!(change.unified, "");
        assert_eq!((change.added, change.removed), (0, 0));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// The diff's `+` and `-` lines are exactly the counts it reports, and
        /// it is empty exactly when the texts are equal.
        #[test]
        fn counts_match_the_unified_lines(old in "[ab\n]{0,40}", new in "[ab\n]{0,40}") {
            let change = diff(&old, &new, "old", "new");
            prop_assert_eq!(change.unified.is_empty(), change.added == 0 && change.removed == 0);
            if old == new {
                prop_assert!(change.unified.is_empty());
            }
            let plus = change.unified.lines().filter(|line| line.starts_with('+') && !line.starts_with("+++")).count();
            let minus = change.unified.lines().filter(|line| line.starts_with('-') && !line.starts_with("---")).count();
            prop_assert_eq!(plus, change.added);
            prop_assert_eq!(minus, change.removed);
        }
    }
}
