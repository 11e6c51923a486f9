//! Rows as Trino's JSON text, and the cells a row writer reads from them.
//!
//! A page of a large result is read once and written once, so decoding every cell into
//! a [`serde_json::Value`] (an allocation per row, per string and, with serde_json's
//! arbitrary-precision numbers, per number; all of it freed a page later) was most of
//! an export's own work. [`TextRows`] keeps the page's text as it came and where each
//! cell lies in it; a writer reads each cell as a [`Cell`] borrowed from that text.
//! The same [`Cell`] reads a decoded [`Value`], so a writer has one code path for both
//! (see [`Row`]).
//!
//! ```
//! use docket_export::cells::{Cell, Row as _, TextRows};
//!
//! let rows = TextRows::parse(r#"[[1, "a\"b", null], [2.5, "c", [1, 2]]]"#).unwrap();
//! assert_eq!(rows.len(), 2);
//! let row = rows.iter().nth(1).unwrap();
//! let second: Vec<Cell<'_>> = row.cells().collect();
//! assert_eq!(second[0].to_string(), "2.5");
//! assert!(matches!(&second[2], Cell::Nested(_)));
//! assert_eq!(rows.to_values().unwrap()[0][1], "a\"b");
//! ```

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// One cell as a writer reads it, whether it came from Trino's text or a decoded value.
#[derive(Clone, Debug)]
pub enum Cell<'a> {
    /// JSON `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A JSON number.
    Number(Number<'a>),
    /// A JSON string, unescaped.
    Text(Cow<'a, str>),
    /// An array or an object.
    Nested(Nested<'a>),
}

/// A JSON number: its text as Trino sent it, or a decoded number.
#[derive(Clone, Copy, Debug)]
pub enum Number<'a> {
    /// The number's JSON text.
    Text(&'a str),
    /// A decoded number.
    Decoded(&'a serde_json::Number),
}

/// An array or object: its JSON text as Trino sent it, or a decoded value.
#[derive(Clone, Copy, Debug)]
pub enum Nested<'a> {
    /// The value's JSON text.
    Text(&'a str),
    /// A decoded array or object.
    Decoded(&'a Value),
}

impl<'a> Cell<'a> {
    /// Reads one cell's JSON text (as [`TextRows`] holds it: one whole, valid value).
    fn from_json(text: &'a str) -> Cell<'a> {
        match text.as_bytes().first() {
            Some(b'n') => Cell::Null,
            Some(b't') => Cell::Bool(true),
            Some(b'f') => Cell::Bool(false),
            Some(b'"') => Cell::Text(unquote(text)),
            Some(b'[' | b'{') => Cell::Nested(Nested::Text(text)),
            _ => Cell::Number(Number::Text(text)),
        }
    }

    /// The kind of value, for an error message: "a number", "text", and so on.
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Cell::Null => "null",
            Cell::Bool(_) => "a boolean",
            Cell::Number(_) => "a number",
            Cell::Text(_) => "text",
            Cell::Nested(Nested::Text(text)) if text.starts_with('[') => "an array",
            Cell::Nested(Nested::Decoded(Value::Array(_))) => "an array",
            Cell::Nested(_) => "an object",
        }
    }
}

impl<'a> From<&'a Value> for Cell<'a> {
    fn from(value: &'a Value) -> Self {
        match value {
            Value::Null => Cell::Null,
            Value::Bool(flag) => Cell::Bool(*flag),
            Value::Number(number) => Cell::Number(Number::Decoded(number)),
            Value::String(text) => Cell::Text(Cow::Borrowed(text)),
            Value::Array(_) | Value::Object(_) => Cell::Nested(Nested::Decoded(value)),
        }
    }
}

/// A cell's JSON text for numbers and nested values, its text for strings, nothing for
/// null.
impl fmt::Display for Cell<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cell::Null => Ok(()),
            Cell::Bool(flag) => write!(formatter, "{flag}"),
            Cell::Number(number) => write!(formatter, "{number}"),
            Cell::Text(text) => formatter.write_str(text),
            Cell::Nested(Nested::Text(text)) => formatter.write_str(text),
            Cell::Nested(Nested::Decoded(value)) => write!(formatter, "{value}"),
        }
    }
}

impl Number<'_> {
    /// The number as a 64-bit integer, if it is one.
    #[must_use]
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Number::Text(text) => text.parse().ok(),
            Number::Decoded(number) => number.as_i64(),
        }
    }

    /// The number as a floating-point number.
    #[must_use]
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Number::Text(text) => text.parse().ok(),
            Number::Decoded(number) => number.as_f64(),
        }
    }
}

impl fmt::Display for Number<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Number::Text(text) => formatter.write_str(text),
            Number::Decoded(number) => write!(formatter, "{number}"),
        }
    }
}

/// A JSON string's text without its quotes, unescaped (which copies it only when it
/// has an escape).
fn unquote(json: &str) -> Cow<'_, str> {
    let inner = json
        .strip_prefix('"')
        .and_then(|rest| rest.strip_suffix('"'))
        .unwrap_or(json);
    if !inner.contains('\\') {
        return Cow::Borrowed(inner);
    }
    // The text was checked to be one JSON string when the page was read, so this
    // decodes; were it ever not, the escaped text is what is left to show.
    match serde_json::from_str::<String>(json) {
        Ok(text) => Cow::Owned(text),
        Err(_) => Cow::Borrowed(inner),
    }
}

/// A row a writer can read: its width and its cells in column order.
pub trait Row {
    /// How many cells the row has.
    fn width(&self) -> usize;

    /// The row's cells, in column order.
    fn cells(&self) -> impl Iterator<Item = Cell<'_>>;
}

impl<R: Row> Row for &R {
    fn width(&self) -> usize {
        (**self).width()
    }

    fn cells(&self) -> impl Iterator<Item = Cell<'_>> {
        (**self).cells()
    }
}

impl Row for Vec<Value> {
    fn width(&self) -> usize {
        self.len()
    }

    fn cells(&self) -> impl Iterator<Item = Cell<'_>> {
        self.iter().map(Cell::from)
    }
}

/// A page's rows as Trino sent them: the JSON text they were read from (the whole
/// response, when the Trino client read them), and where each cell lies in it.
#[derive(Clone, Debug, Default)]
pub struct TextRows {
    /// The text the rows were read from.
    text: String,
    /// Each cell's start and end in `text`, row after row.
    cells: Vec<(u32, u32)>,
    /// Where each row's cells end in `cells`.
    ends: Vec<u32>,
}

/// Why a page's rows could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TextRowsError {
    /// The text is not a JSON array of arrays.
    #[error("the rows are not a JSON array of arrays ({0})")]
    Json(#[from] serde_json::Error),
    /// The page is larger than a page may be (4 GiB).
    #[error("a page of rows is larger than 4 GiB")]
    TooLarge,
}

impl TextRows {
    /// Reads `text`, a JSON array of arrays (Trino's `data`).
    ///
    /// # Errors
    ///
    /// When `text` is not one, or is larger than 4 GiB.
    pub fn parse(text: &str) -> Result<Self, TextRowsError> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let spans = Spans::deserialize(&mut deserializer)?;
        deserializer.end()?;
        let located = spans.locate(text)?;
        Ok(Self::new(text.to_owned(), located))
    }

    /// The rows `located` found in `text` (see [`Spans::locate`]).
    pub(crate) fn new(text: String, located: Located) -> Self {
        Self {
            text,
            cells: located.cells,
            ends: located.ends,
        }
    }

    /// How many rows there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no rows.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The rows, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = TextRow<'_>> {
        (0..self.ends.len()).map(|index| {
            let start = index.checked_sub(1).map_or(0, |before| self.ends[before]);
            TextRow {
                text: &self.text,
                cells: &self.cells[start as usize..self.ends[index] as usize],
            }
        })
    }

    /// The rows decoded into JSON values.
    ///
    /// # Errors
    ///
    /// None in practice: the text was read as JSON already.
    pub fn to_values(&self) -> Result<Vec<Vec<Value>>, serde_json::Error> {
        self.iter()
            .map(|row| row.texts().map(serde_json::from_str).collect())
            .collect()
    }
}

/// One row of [`TextRows`].
#[derive(Clone, Copy, Debug)]
pub struct TextRow<'a> {
    text: &'a str,
    cells: &'a [(u32, u32)],
}

impl<'a> TextRow<'a> {
    /// Each cell's JSON text.
    fn texts(self) -> impl Iterator<Item = &'a str> {
        self.cells
            .iter()
            .map(|&(start, end)| &self.text[start as usize..end as usize])
    }
}

impl Row for TextRow<'_> {
    fn width(&self) -> usize {
        self.cells.len()
    }

    fn cells(&self) -> impl Iterator<Item = Cell<'_>> {
        self.texts().map(Cell::from_json)
    }
}

/// Rows of cells as read from a JSON document: what a `QueryResults` document's `data`
/// deserializes to, in the same pass as the rest. Each cell is kept as its start and
/// end relative to the first cell's start, eight bytes a cell, until [`Spans::locate`]
/// places them in the whole text.
#[derive(Debug, Default)]
pub(crate) struct Spans<'de> {
    /// Where the first cell starts in memory.
    first: usize,
    cells: Vec<(u32, u32)>,
    ends: Vec<u32>,
    text: PhantomData<&'de str>,
}

/// Where [`Spans`] lie in their text, which can then move.
#[derive(Debug)]
pub(crate) struct Located {
    cells: Vec<(u32, u32)>,
    ends: Vec<u32>,
}

impl<'de> Spans<'de> {
    /// Keeps `cell`, a slice of the text being read, after the cells before it.
    fn push(&mut self, cell: &'de str) -> Result<(), &'static str> {
        let at = cell.as_ptr() as usize;
        if self.cells.is_empty() {
            self.first = at;
        }
        let start = at
            .checked_sub(self.first)
            .and_then(|start| u32::try_from(start).ok())
            .ok_or("a page of rows is larger than 4 GiB")?;
        let end = u32::try_from(cell.len())
            .ok()
            .and_then(|len| start.checked_add(len))
            .ok_or("a page of rows is larger than 4 GiB")?;
        self.cells.push((start, end));
        Ok(())
    }

    /// Each cell's start and end in `text`, the whole text these spans were read from.
    ///
    /// # Errors
    ///
    /// [`TextRowsError::TooLarge`] for a text over 4 GiB.
    pub(crate) fn locate(self, text: &str) -> Result<Located, TextRowsError> {
        if u32::try_from(text.len()).is_err() {
            return Err(TextRowsError::TooLarge);
        }
        // The first cell's offset in `text`; every cell lies within it, whose length
        // fits in 32 bits, so the sums below do too.
        let offset = u32::try_from(self.first.saturating_sub(text.as_ptr() as usize))
            .map_err(|_| TextRowsError::TooLarge)?;
        let mut cells = self.cells;
        for (start, end) in &mut cells {
            *start = start.saturating_add(offset);
            *end = end.saturating_add(offset);
        }
        Ok(Located {
            cells,
            ends: self.ends,
        })
    }
}

impl<'de> Deserialize<'de> for Spans<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(RowsVisitor)
    }
}

/// Reads the outer array: each element is a row.
struct RowsVisitor;

impl<'de> Visitor<'de> for RowsVisitor {
    type Value = Spans<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("an array of rows")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut rows: A) -> Result<Spans<'de>, A::Error> {
        let mut spans = Spans::default();
        while rows.next_element_seed(RowSeed(&mut spans))?.is_some() {
            let end = u32::try_from(spans.cells.len())
                .map_err(|_| de::Error::custom("too many cells"))?;
            spans.ends.push(end);
        }
        Ok(spans)
    }
}

/// Reads one row: an array whose elements are cells, kept as their text.
struct RowSeed<'s, 'de>(&'s mut Spans<'de>);

impl<'de> DeserializeSeed<'de> for RowSeed<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RowSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("a row (an array of values)")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut cells: A) -> Result<(), A::Error> {
        while let Some(cell) = cells.next_element::<&'de RawValue>()? {
            self.0.push(cell.get()).map_err(de::Error::custom)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cells_of(rows: &TextRows) -> Vec<Vec<String>> {
        rows.iter()
            .map(|row| {
                row.cells()
                    .map(|cell| format!("{}:{cell}", cell.kind()))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn cells_are_read_as_their_kinds() {
        let rows = TextRows::parse(
            r#" [ [1, -2.5e3, "x\ny", null, true, false, [1, {"a": 2}], {"k": []}] , [] ] "#,
        )
        .expect("rows");
        assert_eq!(
            cells_of(&rows),
            [
                vec![
                    "a number:1",
                    "a number:-2.5e3",
                    "text:x\ny",
                    "null:",
                    "a boolean:true",
                    "a boolean:false",
                    r#"an array:[1, {"a": 2}]"#,
                    r#"an object:{"k": []}"#,
                ],
                vec![],
            ]
        );
    }

    #[test]
    fn a_deeply_nested_cell_is_read_as_text_and_refused_as_a_value() {
        let depth = 100_000;
        let text = format!("[[{}{}]]", "[".repeat(depth), "]".repeat(depth));
        let rows = TextRows::parse(&text).expect("nesting is skipped, not recursed into");
        let row = rows.iter().next().expect("a row");
        let cells: Vec<Cell<'_>> = row.cells().collect();
        assert_eq!(cells[0].to_string().len(), 2 * depth);
        assert!(
            rows.to_values().is_err(),
            "decoding stops at serde_json's depth limit"
        );
    }

    #[test]
    fn what_is_not_an_array_of_arrays_is_refused() {
        for text in [
            "",
            "{}",
            "[1]",
            "[[1]",
            "[[1],]",
            "[[1]] x",
            r#"[["\x"]]"#,
            "[[01]]",
        ] {
            assert!(TextRows::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn decoded_values_and_text_read_alike() {
        let text = r#"[[12345678901234567890, "é\u00e9", {"a": [true]}, null]]"#;
        let rows = TextRows::parse(text).expect("rows");
        let values = rows.to_values().expect("values");
        let from_text: Vec<String> = rows
            .iter()
            .next()
            .expect("a row")
            .cells()
            .map(|c| c.to_string())
            .collect();
        let from_values: Vec<String> = values[0].cells().map(|c| c.to_string()).collect();
        assert_eq!(from_text[..2], from_values[..2]);
        assert_eq!(from_text[1], "éé");
    }
}
