//! The one scrub of a connection's secrets: every form the connection sends a secret in,
//! and the forms an upstream is likely to echo it back in (URL-encoded, JSON-escaped), replaced by `[REDACTED]` — in
//! text that is shown ([`Scrubber::scrub`]) and in bytes that are stored, streaming,
//! across chunk boundaries ([`StreamScrubber`]).

use std::sync::Arc;

use aho_corasick::{AhoCorasick, MatchKind};
use bytes::{Bytes, BytesMut};

/// What a secret becomes.
pub const REDACTED: &str = "[REDACTED]";

/// The secrets of one connection, in every form, ready to be found.
#[derive(Clone)]
pub struct Scrubber {
    /// The secrets as given (empty ones dropped), so a scrubber can be extended by one
    /// more ([`Scrubber::with_secrets`]).
    secrets: Arc<[String]>,
    /// `None` when the connection holds no secret.
    finder: Option<AhoCorasick>,
    /// The longest form, in bytes.
    longest: usize,
}

impl std::fmt::Debug for Scrubber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Scrubber([REDACTED])")
    }
}

/// `secret` percent-encoded as a URL carries it, in upper and lower case hex.
fn url_encoded(secret: &str) -> [String; 2] {
    let mut upper = String::with_capacity(secret.len());
    for byte in secret.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            upper.push(char::from(byte));
        } else {
            upper.push_str(&format!("%{byte:02X}"));
        }
    }
    let lower = upper
        .split('%')
        .enumerate()
        .map(|(index, part)| {
            if index == 0 {
                part.to_owned()
            } else {
                let (hex, rest) = part.split_at(part.len().min(2));
                format!("%{}{rest}", hex.to_ascii_lowercase())
            }
        })
        .collect();
    [upper, lower]
}

impl Scrubber {
    /// A scrubber for `secrets` (as the connection sends them), each also found
    /// URL-encoded and JSON-escaped. Empty secrets are ignored.
    #[must_use]
    pub fn new(secrets: &[String]) -> Self {
        let secrets: Arc<[String]> = secrets
            .iter()
            .filter(|secret| !secret.is_empty())
            .cloned()
            .collect();
        let mut forms: Vec<String> = Vec::new();
        for secret in secrets.iter() {
            forms.push(secret.clone());
            forms.extend(url_encoded(secret));
            // As a JSON string carries it (`"` and `\` escaped): an upstream that echoes
            // the request as JSON, and every result shown as JSON text.
            if let Ok(quoted) = serde_json::to_string(secret) {
                forms.push(quoted[1..quoted.len() - 1].to_owned());
            }
        }
        forms.sort();
        forms.dedup();
        let longest = forms.iter().map(String::len).max().unwrap_or(0);
        let finder = if forms.is_empty() {
            None
        } else {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(&forms)
                .ok()
        };
        Self {
            secrets,
            finder,
            longest,
        }
    }

    /// This scrubber's secrets and `more` (a caller's exchanged token, say), each in
    /// every form [`Scrubber::new`] finds.
    #[must_use]
    pub fn with_secrets(&self, more: &[String]) -> Self {
        let all: Vec<String> = self.secrets.iter().chain(more).cloned().collect();
        Self::new(&all)
    }

    /// `text` with every secret replaced by [`REDACTED`].
    #[must_use]
    pub fn scrub(&self, text: &str) -> String {
        match &self.finder {
            Some(finder) => finder.replace_all(text, &vec![REDACTED; finder.patterns_len()]),
            None => text.to_owned(),
        }
    }

    /// `bytes` with every secret replaced by [`REDACTED`].
    #[must_use]
    pub fn scrub_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        match &self.finder {
            Some(finder) => {
                finder.replace_all_bytes(bytes, &vec![REDACTED.as_bytes(); finder.patterns_len()])
            }
            None => bytes.to_vec(),
        }
    }

    /// A scrubber for one stream of bytes.
    #[must_use]
    pub fn stream(&self) -> StreamScrubber {
        StreamScrubber {
            scrubber: self.clone(),
            carry: BytesMut::new(),
        }
    }
}

/// Scrubs a stream of chunks: a secret split across two chunks is found too. Holds back
/// at most the longest secret's length minus one byte between chunks.
#[derive(Debug)]
pub struct StreamScrubber {
    scrubber: Scrubber,
    carry: BytesMut,
}

impl StreamScrubber {
    /// The scrubbed bytes that can be passed on after `chunk`.
    pub fn push(&mut self, chunk: &[u8]) -> Bytes {
        let Some(finder) = &self.scrubber.finder else {
            return Bytes::copy_from_slice(chunk);
        };
        self.carry.extend_from_slice(chunk);
        // A secret starting before `settled` ends inside what is held, so it is seen.
        let settled = self
            .carry
            .len()
            .saturating_sub(self.scrubber.longest.saturating_sub(1));
        let (out, kept_from) = redact(finder, &self.carry, settled);
        let _ = self.carry.split_to(kept_from);
        out
    }

    /// The rest, scrubbed, once the stream ended.
    pub fn finish(&mut self) -> Bytes {
        let Some(finder) = &self.scrubber.finder else {
            return self.carry.split().freeze();
        };
        let (out, _) = redact(finder, &self.carry, self.carry.len());
        self.carry.clear();
        out
    }
}

/// `buffer` up to `settled` (or past it, to the end of a secret that starts before it),
/// with secrets replaced; and where the unsent rest begins.
fn redact(finder: &AhoCorasick, buffer: &[u8], settled: usize) -> (Bytes, usize) {
    let mut out = BytesMut::with_capacity(settled + REDACTED.len());
    let mut sent = 0;
    for found in finder.find_iter(buffer) {
        if found.start() >= settled {
            break;
        }
        out.extend_from_slice(&buffer[sent..found.start()]);
        out.extend_from_slice(REDACTED.as_bytes());
        sent = found.end();
    }
    let until = settled.max(sent);
    out.extend_from_slice(&buffer[sent..until]);
    (out.freeze(), until)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrubber() -> Scrubber {
        Scrubber::new(&[
            "s3cret/+tok".to_owned(),
            "c3ZjOnB3".to_owned(),
            String::new(),
        ])
    }

    #[test]
    fn every_form_is_scrubbed() {
        let text = "a s3cret/+tok b s3cret%2F%2Btok c s3cret%2f%2btok d c3ZjOnB3 e";
        assert_eq!(
            scrubber().scrub(text),
            "a [REDACTED] b [REDACTED] c [REDACTED] d [REDACTED] e"
        );
        assert_eq!(Scrubber::new(&[]).scrub("as is"), "as is");
        let quoting = Scrubber::new(&["pa\"ss\\word".to_owned()]);
        let echoed = serde_json::json!({"password": "pa\"ss\\word"}).to_string();
        assert_eq!(quoting.scrub(&echoed), r#"{"password":"[REDACTED]"}"#);
    }

    #[test]
    fn an_extended_scrubber_finds_old_and_new_secrets() {
        let extended = scrubber().with_secrets(&["caller-t/ok".to_owned(), String::new()]);
        assert_eq!(
            extended.scrub("s3cret/+tok caller-t/ok caller-t%2Fok"),
            "[REDACTED] [REDACTED] [REDACTED]"
        );
        assert_eq!(scrubber().scrub("caller-t/ok"), "caller-t/ok");
        assert_eq!(Scrubber::new(&[]).with_secrets(&[]).scrub("as is"), "as is");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// However a stream is cut into chunks, its scrubbed bytes are those of the
        /// whole text scrubbed at once.
        #[test]
        fn chunking_never_lets_a_secret_through(
            pieces in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just("s3cret/+tok".to_owned()),
                    proptest::strategy::Just("s3cret%2F%2Btok".to_owned()),
                    proptest::strategy::Just("c3ZjOnB3".to_owned()),
                    "[a-z0-9/+%]{0,12}",
                ],
                0..12,
            ),
            cuts in proptest::collection::vec(0usize..64, 0..8),
        ) {
            let text: String = pieces.concat();
            let scrubber = scrubber();
            let mut stream = scrubber.stream();
            let mut out = Vec::new();
            let mut rest = text.as_bytes();
            for cut in cuts {
                let (chunk, after) = rest.split_at(cut.min(rest.len()));
                out.extend_from_slice(&stream.push(chunk));
                rest = after;
            }
            out.extend_from_slice(&stream.push(rest));
            out.extend_from_slice(&stream.finish());
            proptest::prop_assert_eq!(String::from_utf8_lossy(&out), scrubber.scrub(&text));
        }
    }
}
