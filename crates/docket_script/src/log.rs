//! The bounded log `print` writes to: the head is kept, the rest dropped, and a marker says so.

use std::cell::RefCell;

use starlark::PrintHandler;

/// `print` output of one run, capped at a byte limit.
#[derive(Debug)]
pub(crate) struct BoundedLog {
    limit: usize,
    state: RefCell<LogState>,
}

#[derive(Debug, Default)]
struct LogState {
    text: String,
    truncated: bool,
}

impl BoundedLog {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            state: RefCell::default(),
        }
    }

    /// Appends one line, or as much of it as fits.
    pub(crate) fn line(&self, line: &str) {
        let mut state = self.state.borrow_mut();
        if state.truncated {
            return;
        }
        let room = self.limit.saturating_sub(state.text.len());
        let needed = line.len() + 1;
        if needed <= room {
            state.text.push_str(line);
            state.text.push('\n');
            return;
        }
        // Cut on a character boundary so the log stays valid UTF-8.
        let mut cut = room.min(line.len());
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        let head = line.get(..cut).unwrap_or_default();
        state.text.push_str(head);
        state.truncated = true;
    }

    /// The log with a truncation marker appended when it was cut, and whether it was.
    pub(crate) fn finish(&self) -> (String, bool) {
        let state = self.state.take();
        let mut text = state.text;
        if state.truncated {
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(&truncation_marker(self.limit));
        }
        (text, state.truncated)
    }
}

/// The line appended to a cut log.
pub(crate) fn truncation_marker(limit: usize) -> String {
    format!(
        "[log truncated: the log limit of {limit} bytes was reached; later output was dropped]\n"
    )
}

impl PrintHandler for BoundedLog {
    fn println(&self, text: &str) -> starlark::Result<()> {
        self.line(text);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_within_the_limit_are_kept_whole() {
        let log = BoundedLog::new(100);
        log.line("one");
        log.line("two");
        assert_eq!(log.finish(), ("one\ntwo\n".to_owned(), false));
    }

    #[test]
    fn the_head_is_kept_and_a_marker_appended() {
        let log = BoundedLog::new(10);
        log.line("12345");
        log.line("6789abcdef");
        log.line("never");
        let (text, truncated) = log.finish();
        assert!(truncated);
        assert_eq!(text, format!("12345\n6789\n{}", truncation_marker(10)));
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        let log = BoundedLog::new(4);
        log.line("ééé");
        let (text, truncated) = log.finish();
        assert!(truncated);
        assert!(text.starts_with("éé\n["));
    }
}
