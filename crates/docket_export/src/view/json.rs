//! JSON pages: the export writes one array of objects (`[`, the objects separated by
//! commas, `]`; see [`crate::format`]), which is read element by element. An
//! element's extent is found by counting brackets outside strings, and only the
//! elements of the page are parsed, so a million-row document is never parsed whole.

use super::error::ViewError;
use super::objects::ObjectRows;
use super::page::RowPage;
use super::records::{Framed, Framer};
use super::scan::{RowScan, TextAsset};

/// The format name checkpoints are kept under.
const FORMAT: &str = "json";

/// Where in the array the framer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Position {
    /// Before the array's `[`.
    Opening,
    /// Where an element (or the closing `]`) comes next.
    BeforeElement,
    /// After an element, where `,` or `]` comes next.
    AfterElement,
    /// After the closing `]`.
    Closed,
}

/// How far into an element the framer has looked.
#[derive(Debug, Default)]
struct ElementScan {
    scanned: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
}

/// Cuts a JSON array into its elements.
#[derive(Debug)]
pub(super) struct JsonArrayFramer {
    position: Position,
    element: ElementScan,
}

impl JsonArrayFramer {
    /// A framer that starts at the document's start (`at_object_start`) or at an
    /// element (a checkpoint).
    pub(super) fn new(at_object_start: bool) -> Self {
        Self {
            position: if at_object_start {
                Position::Opening
            } else {
                Position::BeforeElement
            },
            element: ElementScan::default(),
        }
    }

    /// Looks further into the element at the start of `input`.
    fn scan_element(&mut self, input: &[u8], at_end: bool) -> Result<Framed, ViewError> {
        let scan = &mut self.element;
        let mut length = None;
        for (index, &byte) in input.iter().enumerate().skip(scan.scanned) {
            if scan.in_string {
                if scan.escaped {
                    scan.escaped = false;
                } else if byte == b'\\' {
                    scan.escaped = true;
                } else if byte == b'"' {
                    scan.in_string = false;
                    if scan.depth == 0 {
                        length = Some(index + 1);
                        break;
                    }
                }
                continue;
            }
            match byte {
                b'"' => scan.in_string = true,
                b'{' | b'[' => scan.depth += 1,
                b'}' | b']' if scan.depth > 0 => {
                    scan.depth -= 1;
                    if scan.depth == 0 {
                        length = Some(index + 1);
                        break;
                    }
                }
                // A bare value (a number, `true`, …) ends where the array goes on.
                b'}' | b']' | b',' if scan.depth == 0 => {
                    length = Some(index);
                    break;
                }
                byte if scan.depth == 0 && byte.is_ascii_whitespace() => {
                    length = Some(index);
                    break;
                }
                _ => {}
            }
        }
        let length = match length {
            Some(length) => length,
            None if at_end && scan.depth == 0 && !scan.in_string => input.len(),
            None if at_end => {
                return Err(ViewError::malformed("the JSON array ends inside a row"));
            }
            None => {
                scan.scanned = input.len();
                return Ok(Framed::NeedMore);
            }
        };
        if length == 0 {
            return Err(ViewError::malformed(
                "the JSON array has an unexpected `}` where a row should be",
            ));
        }
        self.element = ElementScan::default();
        self.position = Position::AfterElement;
        Ok(Framed::Record {
            length,
            consumed: length,
        })
    }
}

impl Framer for JsonArrayFramer {
    fn frame(&mut self, input: &[u8], at_end: bool) -> Result<Framed, ViewError> {
        if self.position == Position::BeforeElement && self.element.scanned > 0 {
            return self.scan_element(input, at_end);
        }
        let blank = input
            .iter()
            .take_while(|byte| byte.is_ascii_whitespace())
            .count();
        if blank > 0 {
            return Ok(Framed::Skip(blank));
        }
        let Some(&byte) = input.first() else {
            return match (at_end, self.position) {
                (false, _) => Ok(Framed::NeedMore),
                (true, Position::Closed) => Ok(Framed::End),
                (true, Position::Opening) => Err(ViewError::malformed("the JSON asset is empty")),
                (true, _) => Err(ViewError::malformed("the JSON array is not closed")),
            };
        };
        let (position, skip) = match (self.position, byte) {
            (Position::Opening, b'[') => (Position::BeforeElement, 1),
            (Position::Opening, _) => {
                return Err(ViewError::malformed("the JSON asset is not an array"));
            }
            (Position::BeforeElement | Position::AfterElement, b']') => (Position::Closed, 1),
            (Position::BeforeElement, _) => return self.scan_element(input, at_end),
            (Position::AfterElement, b',') => (Position::BeforeElement, 1),
            (Position::AfterElement, _) => {
                return Err(ViewError::malformed(
                    "the JSON array has something other than `,` or `]` after a row",
                ));
            }
            (Position::Closed, _) => {
                return Err(ViewError::malformed(
                    "the JSON asset goes on after its array",
                ));
            }
        };
        self.position = position;
        Ok(Framed::Skip(skip))
    }
}

/// The page of `rows` rows from `first_row` of a JSON asset.
///
/// # Errors
///
/// [`ViewError::Malformed`] for a document that is not an array of objects; errors
/// from reading.
pub(super) async fn page(
    asset: TextAsset<'_>,
    first_row: u64,
    rows: usize,
) -> Result<RowPage, ViewError> {
    let mut scan = RowScan::open(asset, FORMAT, first_row, JsonArrayFramer::new).await?;
    if !scan.skip_to(first_row).await? {
        scan.finish();
        return Ok(RowPage::empty(Vec::new(), first_row));
    }
    let mut page_rows = ObjectRows::default();
    while page_rows.len() < rows {
        let Some((row, bytes)) = scan.next_row().await? else {
            break;
        };
        page_rows.push(row, bytes)?;
    }
    let more = page_rows.len() == rows && scan.has_more().await?;
    scan.finish();
    Ok(page_rows.into_page(first_row, more))
}

#[cfg(test)]
mod tests {
    use super::{Framed, Framer as _, JsonArrayFramer};

    /// Frames `input` in chunks of `chunk` bytes, as the elements it holds.
    fn elements(input: &[u8], chunk: usize) -> Result<Vec<Vec<u8>>, String> {
        let mut framer = JsonArrayFramer::new(true);
        let mut available = chunk.min(input.len());
        let mut position = 0;
        let mut found = Vec::new();
        loop {
            let at_end = available == input.len();
            match framer
                .frame(&input[position..available], at_end)
                .map_err(|error| error.to_string())?
            {
                Framed::Skip(count) => position += count,
                Framed::Record { length, consumed } => {
                    found.push(input[position..position + length].to_vec());
                    position += consumed;
                }
                Framed::NeedMore => available = (available + chunk).min(input.len()),
                Framed::End => return Ok(found),
            }
        }
    }

    #[test]
    fn elements_are_found_whatever_the_chunking() {
        let document = b"[\n{\"a\":\"],}\\\"{\",\"b\":[1,{\"c\":2}]},\n {} , 3,\"s\"\n]\n";
        for chunk in [1, 2, 3, 7, document.len()] {
            assert_eq!(
                elements(document, chunk).expect("an array"),
                [
                    b"{\"a\":\"],}\\\"{\",\"b\":[1,{\"c\":2}]}".to_vec(),
                    b"{}".to_vec(),
                    b"3".to_vec(),
                    b"\"s\"".to_vec()
                ],
                "chunks of {chunk}"
            );
        }
        assert_eq!(elements(b"[]", 1).expect("empty"), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn documents_that_are_not_arrays_are_malformed() {
        for (document, reason) in [
            (&b""[..], "empty"),
            (b"{}", "not an array"),
            (b"[{}", "not closed"),
            (b"[{\"a\":1", "ends inside a row"),
            (b"[{} {}]", "other than"),
            (b"[] x", "goes on"),
            (b"[}]", "unexpected"),
        ] {
            let error = elements(document, 2).expect_err("malformed");
            assert!(error.contains(reason), "{document:?}: {error}");
        }
    }
}
