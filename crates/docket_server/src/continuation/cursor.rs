//! The cursor a cut answer carries: where in its spool the next page starts.
//!
//! It is opaque to the caller but not secret, and carries no authority: the spool
//! it names is read only by its owner through the tool that made it, so a cursor
//! of another caller, or one whose numbers were changed, reaches nothing that the
//! caller could not read anyway (a changed position reads another part of the
//! caller's own result, or is refused as past the end). Decoding is strict and
//! bounded: anything that is not exactly what [`Cursor::encode`] writes is refused.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// What every cursor starts with, so one is told apart from other strings (and a
/// later format can be told apart from this one).
const PREFIX: &str = "dkc1.";

/// The longest cursor accepted, in bytes: the input schema's `maxLength` too.
pub(crate) const MAX_CURSOR_BYTES: usize = 256;

/// A position in a spool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cursor {
    /// The spool (32 lower-case hex digits).
    pub spool: String,
    /// The chunk the next row is in.
    pub chunk: u32,
    /// The next row's line in that chunk.
    pub line: u32,
    /// Rows of the spool already read, for what remains.
    pub rows_read: u64,
    /// Bytes of the spool already read.
    pub bytes_read: u64,
}

impl Cursor {
    /// The start of spool `spool`.
    pub(crate) fn start(spool: String) -> Self {
        Self {
            spool,
            chunk: 0,
            line: 0,
            rows_read: 0,
            bytes_read: 0,
        }
    }

    /// The cursor as the caller sees it.
    pub(crate) fn encode(&self) -> String {
        let inner = format!(
            "{}:{}:{}:{}:{}",
            self.spool, self.chunk, self.line, self.rows_read, self.bytes_read
        );
        format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(inner))
    }

    /// The cursor `text` encodes, or `None` for anything else.
    pub(crate) fn decode(text: &str) -> Option<Self> {
        if text.len() > MAX_CURSOR_BYTES {
            return None;
        }
        let inner = URL_SAFE_NO_PAD.decode(text.strip_prefix(PREFIX)?).ok()?;
        let inner = std::str::from_utf8(&inner).ok()?;
        let mut parts = inner.split(':');
        let spool = parts.next()?;
        let valid_spool = spool.len() == 32
            && spool
                .bytes()
                .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte));
        if !valid_spool {
            return None;
        }
        // Digits only, as `encode` writes them: `u64::from_str` would take a leading
        // `+` or zeros too, and then two texts would name one cursor.
        fn number<T: std::str::FromStr>(part: Option<&str>) -> Option<T> {
            let part = part?;
            let canonical = part == "0" || !part.starts_with('0');
            (!part.is_empty()
                && canonical
                && part.len() <= 20
                && part.bytes().all(|byte| byte.is_ascii_digit()))
            .then(|| part.parse().ok())
            .flatten()
        }
        let cursor = Self {
            spool: spool.to_owned(),
            chunk: number(parts.next())?,
            line: number(parts.next())?,
            rows_read: number(parts.next())?,
            bytes_read: number(parts.next())?,
        };
        parts.next().is_none().then_some(cursor)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn spool_id() -> impl Strategy<Value = String> {
        "[0-9a-f]{32}"
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn a_cursor_reads_back_as_written(
            spool in spool_id(),
            chunk: u32,
            line: u32,
            rows_read: u64,
            bytes_read: u64,
        ) {
            let cursor = Cursor { spool, chunk, line, rows_read, bytes_read };
            let text = cursor.encode();
            prop_assert!(text.len() <= MAX_CURSOR_BYTES);
            prop_assert_eq!(Cursor::decode(&text), Some(cursor));
        }

        #[test]
        fn any_text_decodes_without_panicking(text in ".{0,300}") {
            if let Some(cursor) = Cursor::decode(&text) {
                // Only what encode writes decodes: one text per cursor.
                prop_assert_eq!(cursor.encode(), text);
            }
        }

        #[test]
        fn any_inner_text_decodes_only_as_written(inner in "[0-9a-f:+ -]{0,120}") {
            let text = format!("{PREFIX}{}", URL_SAFE_NO_PAD.encode(&inner));
            if let Some(cursor) = Cursor::decode(&text) {
                prop_assert_eq!(cursor.encode(), text);
            }
        }

        #[test]
        fn a_changed_character_never_names_another_spool(
            spool in spool_id(),
            chunk in 0u32..100,
            at in 0usize..64,
            with in "[A-Za-z0-9_-]",
        ) {
            let cursor = Cursor { spool, chunk, line: 0, rows_read: 0, bytes_read: 0 };
            let text = cursor.encode();
            let at = PREFIX.len() + at % (text.len() - PREFIX.len());
            let mut changed = text.clone();
            changed.replace_range(at..=at, &with);
            if let Some(read) = Cursor::decode(&changed) {
                // Either the same text, or a cursor that encodes to the changed text.
                prop_assert_eq!(read.encode(), changed);
            }
        }
    }

    #[test]
    fn malformed_cursors_are_refused() {
        let good = Cursor::start("0123456789abcdef0123456789abcdef".to_owned());
        assert!(Cursor::decode(&good.encode()).is_some());
        for bad in [
            "",
            "dkc1.",
            "dkc2.MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY6MDowOjA6MA",
            &format!(
                "{PREFIX}{}",
                URL_SAFE_NO_PAD.encode("0123456789ABCDEF0123456789abcdef:0:0:0:0")
            ),
            &format!(
                "{PREFIX}{}",
                URL_SAFE_NO_PAD.encode("0123456789abcdef0123456789abcdef:+1:0:0:0")
            ),
            &format!(
                "{PREFIX}{}",
                URL_SAFE_NO_PAD.encode("0123456789abcdef0123456789abcdef:00:0:0:0")
            ),
            &format!(
                "{PREFIX}{}",
                URL_SAFE_NO_PAD.encode("0123456789abcdef0123456789abcdef:0:0:07:0")
            ),
            &format!(
                "{PREFIX}{}",
                URL_SAFE_NO_PAD.encode("0123456789abcdef0123456789abcdef:0:0:0")
            ),
            &format!(
                "{PREFIX}{}",
                URL_SAFE_NO_PAD.encode("0123456789abcdef0123456789abcdef:0:0:0:0:0")
            ),
            &format!(
                "{PREFIX}{}",
                URL_SAFE_NO_PAD.encode("0123456789abcdef0123456789abcdef:4294967296:0:0:0")
            ),
            &"x".repeat(MAX_CURSOR_BYTES + 1),
        ] {
            assert_eq!(Cursor::decode(bad), None, "{bad}");
        }
    }
}
