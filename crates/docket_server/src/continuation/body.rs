//! The rest of a cut response body as a spool's rows: its text, scrubbed of the
//! connection's secrets as it streams (a secret split between the part answered
//! and the rest, or between two chunks, is found too), in pieces of at most
//! [`PIECE_BYTES`] bytes, each a JSON string.

use async_trait::async_trait;
use docket_export::api::{BodyRest, StreamScrubber};
use serde_json::Value;

use super::writer::RowSource;

/// The most bytes of text one row holds: small, so a page's byte budget cuts a
/// body finely, and so small that a piece stays within the smallest budget
/// (1 KiB) even as JSON escapes it (a control character takes six bytes).
const PIECE_BYTES: usize = 128;

/// A cut body's rest, read on.
pub(crate) struct BodySource {
    rest: BodyRest,
    scrubber: StreamScrubber,
    /// Scrubbed bytes that end in the middle of a character.
    carry: Vec<u8>,
    ended: bool,
}

impl BodySource {
    /// The rest after `scrubber` took the cut part; `carry` is the end of that part
    /// that did not complete a character.
    pub(crate) fn new(rest: BodyRest, scrubber: StreamScrubber, carry: Vec<u8>) -> Self {
        Self {
            rest,
            scrubber,
            carry,
            ended: false,
        }
    }
}

/// `bytes` as text up to its last whole character, and what follows it (an
/// incomplete character, at most three bytes). Bytes that are not UTF-8 at all
/// become U+FFFD, as the cut part's text does.
pub(crate) fn text_and_carry(bytes: &[u8]) -> (String, Vec<u8>) {
    let mut text = String::with_capacity(bytes.len());
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(valid) => {
                text.push_str(valid);
                return (text, Vec::new());
            }
            Err(error) => {
                let (valid, after) = rest.split_at(error.valid_up_to());
                text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                match error.error_len() {
                    Some(invalid) => {
                        text.push(char::REPLACEMENT_CHARACTER);
                        rest = &after[invalid..];
                    }
                    None => return (text, after.to_vec()),
                }
            }
        }
    }
}

/// `text` in pieces of at most [`PIECE_BYTES`] bytes, cut between characters.
fn pieces(text: &str) -> Vec<Value> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(PIECE_BYTES);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        pieces.push(Value::String(rest[..end].to_owned()));
        rest = &rest[end..];
    }
    pieces
}

#[async_trait]
impl RowSource for BodySource {
    async fn next_rows(&mut self) -> Result<Option<Vec<Value>>, String> {
        loop {
            if self.ended {
                return Ok(None);
            }
            let scrubbed = match self.rest.next_chunk().await {
                Ok(Some(chunk)) => self.scrubber.push(&chunk),
                Ok(None) => {
                    self.ended = true;
                    self.scrubber.finish()
                }
                Err(error) => return Err(error.to_string()),
            };
            let mut bytes = std::mem::take(&mut self.carry);
            bytes.extend_from_slice(&scrubbed);
            let (text, carry) = text_and_carry(&bytes);
            self.carry = carry;
            if self.ended && !self.carry.is_empty() {
                // A body that ends in the middle of a character.
                let tail = String::from_utf8_lossy(&self.carry).into_owned();
                self.carry.clear();
                let mut rows = pieces(&text);
                rows.extend(pieces(&tail));
                return Ok(Some(rows));
            }
            let rows = pieces(&text);
            if !rows.is_empty() || self.ended {
                return Ok(Some(rows));
            }
        }
    }

    async fn stop(self: Box<Self>) {}
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn text_cut_anywhere_reads_back_whole(text in "\\PC{0,200}", cut in 0usize..800) {
            let bytes = text.as_bytes();
            let cut = cut.min(bytes.len());
            let (first, carry) = text_and_carry(&bytes[..cut]);
            let mut rest = carry;
            rest.extend_from_slice(&bytes[cut..]);
            let (second, left) = text_and_carry(&rest);
            prop_assert!(left.is_empty());
            prop_assert_eq!(format!("{first}{second}"), text);
        }

        #[test]
        fn pieces_are_small_and_whole(text in "\\PC{0,3000}") {
            let parts = pieces(&text);
            let mut joined = String::new();
            for part in &parts {
                let part = part.as_str().expect("a string");
                prop_assert!(part.len() <= PIECE_BYTES && !part.is_empty());
                joined.push_str(part);
            }
            prop_assert_eq!(joined, text);
        }
    }

    #[test]
    fn a_piece_fits_the_smallest_budget_however_it_escapes() {
        let worst = "\u{1}".repeat(PIECE_BYTES * 2);
        for piece in pieces(&worst) {
            assert!(crate::continuation::row_bytes(&piece) <= 1024, "{piece}");
        }
    }

    #[test]
    fn bytes_that_are_not_text_become_replacement_characters() {
        let (text, carry) = text_and_carry(b"ok\xffok\xe2\x82");
        assert_eq!(text, "ok\u{fffd}ok");
        assert_eq!(carry, b"\xe2\x82");
    }
}
