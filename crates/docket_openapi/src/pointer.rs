//! Locations inside a document: the dotted path errors show
//! (`paths./items.get.parameters[0].in`) and the JSON pointers of local `$ref`s
//! (`#/components/schemas/Item`, with `~0`/`~1` escapes).

use std::fmt;

use serde_json::Value;

/// One step into a document: a key of an object or an index of an array.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Segment {
    /// A key of an object.
    Key(String),
    /// An index of an array.
    Index(usize),
}

/// A location inside a document, from its root.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pointer(Vec<Segment>);

impl Pointer {
    /// The document's root.
    pub(crate) fn root() -> Self {
        Self::default()
    }

    /// This location's member `key`.
    pub(crate) fn key(&self, key: &str) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.to_owned()));
        Self(segments)
    }

    /// This location's element `index`.
    pub(crate) fn index(&self, index: usize) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        Self(segments)
    }

    /// Moves one step deeper.
    pub(crate) fn push(&mut self, segment: Segment) {
        self.0.push(segment);
    }

    /// Moves one step back towards the root (nothing at the root).
    pub(crate) fn pop(&mut self) {
        self.0.pop();
    }

    /// The steps from the root.
    pub(crate) fn segments(&self) -> &[Segment] {
        &self.0
    }
}

impl fmt::Display for Pointer {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return formatter.write_str("the document's root");
        }
        for (position, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if position == 0 => formatter.write_str(key)?,
                Segment::Key(key) => write!(formatter, ".{key}")?,
                Segment::Index(index) => write!(formatter, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// The reference tokens of a local `$ref` (`#/components/schemas/Item` gives
/// `components`, `schemas`, `Item`), or `None` when the reference is not local
/// (another document, a URL) or is not a JSON pointer (`#anchor`).
pub(crate) fn local_tokens(reference: &str) -> Option<Vec<String>> {
    let fragment = reference.strip_prefix('#')?;
    // A fragment is URI-encoded (RFC 6901, section 6) before it is a pointer.
    let fragment = percent_decode(fragment)?;
    if fragment.is_empty() {
        return Some(Vec::new());
    }
    let rest = fragment.strip_prefix('/')?;
    Some(
        rest.split('/')
            .map(|token| token.replace("~1", "/").replace("~0", "~"))
            .collect(),
    )
}

/// The value a local reference's tokens point at, and its location.
pub(crate) fn lookup<'a>(document: &'a Value, tokens: &[String]) -> Option<(&'a Value, Pointer)> {
    let mut current = document;
    let mut pointer = Pointer::root();
    for token in tokens {
        match current {
            Value::Object(map) => {
                current = map.get(token)?;
                pointer.0.push(Segment::Key(token.clone()));
            }
            Value::Array(items) => {
                // RFC 6901: an index is `0` or digits without a leading zero.
                if token.is_empty()
                    || (token.len() > 1 && token.starts_with('0'))
                    || !token.bytes().all(|byte| byte.is_ascii_digit())
                {
                    return None;
                }
                let index: usize = token.parse().ok()?;
                current = items.get(index)?;
                pointer.0.push(Segment::Index(index));
            }
            _ => return None,
        }
    }
    Some((current, pointer))
}

/// `%XX` escapes decoded; `None` when an escape is broken or the result is not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut position = 0;
    while let Some(&byte) = bytes.get(position) {
        if byte == b'%' {
            let high = bytes
                .get(position + 1)
                .and_then(|digit| hex_value(*digit))?;
            let low = bytes
                .get(position + 2)
                .and_then(|digit| hex_value(*digit))?;
            decoded.push(high * 16 + low);
            position += 3;
        } else {
            decoded.push(byte);
            position += 1;
        }
    }
    String::from_utf8(decoded).ok()
}

fn hex_value(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}
