//! XLSX: one sheet, a bold header row of column names, then one row per result row,
//! each value in the cell type its Trino type maps to.
//!
//! The writer is `rust_xlsxwriter` in constant-memory mode: each row goes to a
//! temporary file as soon as the next one starts, so memory holds one row however
//! many there are. An XLSX file is a zip package that can only be assembled once the
//! sheet is complete, so every byte reaches the output in `finish`; the export loop
//! runs `finish` off the async runtime and hands the bytes on as they come
//! ([`super::Format::writes_at_finish`]).
//!
//! Cell types, by the column's Trino type:
//! - `tinyint` … `bigint`, `real`, `double`, `decimal` → numbers. A spreadsheet's
//!   number is a double: an integer beyond ±2^53 and a decimal with more than 15
//!   significant digits cannot be held exactly and are written as text instead, and
//!   so are `NaN` and the infinities, which a spreadsheet has no number for.
//!   Decimals carry a number format with their scale (`0.00` for `decimal(12,2)`).
//! - `boolean` → booleans.
//! - `date` → dates (`yyyy-mm-dd`); `timestamp(p)` → date-times
//!   (`yyyy-mm-dd hh:mm:ss`, with milliseconds when `p` > 0; finer digits are kept
//!   as far as a double holds them). A date outside the years 1900–9999, which a
//!   spreadsheet cannot show, is written as text.
//! - Everything else (`varchar`, `char`, `json`, `uuid`, `time`, zoned timestamps,
//!   intervals, `varbinary` as base64) → text; arrays, maps and rows → their JSON text.
//! - null → an empty cell.
//!
//! Text is stored as text, never as a formula, so no formula guard is needed (unlike
//! CSV). The format's limits: 1 048 576 rows including the header (so 1 048 575
//! result rows) and 16 384 columns end the export with
//! [`FormatError::FormatLimit`]; a text longer than a cell's 32 767 characters is cut
//! and ends with [`XLSX_TRUNCATION_MARKER`].

use std::fmt::Write as _;
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};

use rust_xlsxwriter::{ExcelDateTime, Workbook, XlsxError};
use serde_json::{Number, Value};

use super::spec::{ColumnSpec, Format, FormatError};
use super::trino_type::TrinoType;

/// The most rows an XLSX sheet holds, the header included.
pub const XLSX_MAX_SHEET_ROWS: u64 = 1_048_576;

/// The most columns an XLSX sheet holds.
pub const XLSX_MAX_COLUMNS: usize = 16_384;

/// The most characters (UTF-16 code units, as spreadsheets count) one cell holds.
pub const XLSX_MAX_CELL_CHARS: usize = 32_767;

/// What a text cut at [`XLSX_MAX_CELL_CHARS`] ends with, inside the limit.
pub const XLSX_TRUNCATION_MARKER: &str = "…[truncated]";

/// The largest integer a double holds exactly (2^53).
const EXACT_INTEGER: u64 = 1 << 53;

/// The most significant digits a double holds exactly.
const EXACT_DIGITS: usize = 15;

/// A cell's bytes in the sheet's XML beyond its value (`<c r="AB123" s="1"><v></v></c>`,
/// roughly): the uncompressed size the byte cap counts is the values plus this.
const CELL_OVERHEAD_BYTES: u64 = 24;

/// How a column's values become cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CellKind {
    Number,
    Decimal,
    Date,
    Timestamp,
    /// Text, booleans and everything else: by the JSON kind of each value.
    Plain,
}

pub(super) struct XlsxEncoder<W: Write + Send> {
    workbook: Workbook,
    output: W,
    kinds: Vec<CellKind>,
    /// Per column, the number format its cells carry (dates, timestamps, decimals).
    formats: Vec<Option<rust_xlsxwriter::Format>>,
    /// The next sheet row to write (0 is the header).
    next_row: u32,
    /// The sheet's uncompressed size so far, roughly: what the byte cap counts while
    /// the rows are written, since nothing reaches the output before `finish`.
    sheet_bytes: u64,
    /// Reused for every cell that needs formatting.
    cell: String,
    /// Set when the writer panicked: the workbook may be half-written and is not
    /// touched again.
    broken: bool,
}

impl<W: Write + Send> XlsxEncoder<W> {
    pub(super) fn begin(
        output: W,
        columns: &[ColumnSpec],
        names: &[String],
    ) -> Result<Self, FormatError> {
        if columns.len() > XLSX_MAX_COLUMNS {
            return Err(FormatError::FormatLimit {
                format: Format::Xlsx,
                limit: XLSX_MAX_COLUMNS as u64,
                what: "columns",
            });
        }
        let mut workbook = Workbook::new();
        let header = rust_xlsxwriter::Format::new().set_bold();
        let mut sheet_bytes = 0;
        {
            let sheet = workbook
                .add_worksheet_with_constant_memory()
                .map_err(xlsx_error)?;
            sheet.set_name("export").map_err(xlsx_error)?;
            // The header stays in view while scrolling.
            sheet.set_freeze_panes(1, 0).map_err(xlsx_error)?;
            for (column, name) in (0..).zip(names) {
                let name = fit_cell(name);
                sheet_bytes += name.len() as u64 + CELL_OVERHEAD_BYTES;
                sheet
                    .write_string_with_format(0, column, name.as_ref(), &header)
                    .map_err(xlsx_error)?;
            }
        }
        let (kinds, formats) = columns.iter().map(column_kind).unzip();
        Ok(Self {
            workbook,
            output,
            kinds,
            formats,
            next_row: 1,
            sheet_bytes,
            cell: String::new(),
            broken: false,
        })
    }

    /// The sheet's uncompressed size so far (roughly).
    pub(super) fn buffered_bytes(&self) -> u64 {
        self.sheet_bytes
    }

    pub(super) fn write_rows(&mut self, rows: &[Vec<Value>]) -> Result<(), FormatError> {
        // Refuse the whole page before writing any of it, as the row cap does.
        if u64::from(self.next_row) + rows.len() as u64 > XLSX_MAX_SHEET_ROWS {
            return Err(FormatError::FormatLimit {
                format: Format::Xlsx,
                limit: XLSX_MAX_SHEET_ROWS - 1,
                what: "rows below its header row",
            });
        }
        if self.broken {
            return Err(FormatError::Misuse("the xlsx writer failed earlier"));
        }
        match catch_unwind(AssertUnwindSafe(|| self.write_rows_unguarded(rows))) {
            Ok(written) => written,
            Err(_) => {
                self.broken = true;
                Err(panicked())
            }
        }
    }

    fn write_rows_unguarded(&mut self, rows: &[Vec<Value>]) -> Result<(), FormatError> {
        let sheet = self.workbook.worksheet_from_index(0).map_err(xlsx_error)?;
        for row in rows {
            let sheet_row = self.next_row;
            for (column, ((value, kind), format)) in
                (0..).zip(row.iter().zip(&self.kinds).zip(&self.formats))
            {
                self.sheet_bytes += CELL_OVERHEAD_BYTES;
                let cell = to_cell(value, *kind, &mut self.cell);
                self.sheet_bytes += cell.size();
                let written = match (cell, format) {
                    (Cell::Empty, _) => continue,
                    (Cell::Boolean(flag), _) => sheet.write_boolean(sheet_row, column, flag),
                    (Cell::Number(number), Some(format)) => {
                        sheet.write_number_with_format(sheet_row, column, number, format)
                    }
                    (Cell::Number(number), None) => sheet.write_number(sheet_row, column, number),
                    (Cell::DateTime(datetime), Some(format)) => {
                        sheet.write_datetime_with_format(sheet_row, column, datetime, format)
                    }
                    (Cell::DateTime(datetime), None) => {
                        sheet.write_datetime(sheet_row, column, datetime)
                    }
                    (Cell::Text(text), _) => sheet.write_string(sheet_row, column, text),
                };
                written.map_err(xlsx_error)?;
            }
            self.next_row += 1;
        }
        Ok(())
    }

    /// Assembles the package (the sheet copied from its temporary file, compressed)
    /// and writes all of it to the output.
    pub(super) fn finish(mut self) -> Result<W, FormatError> {
        if self.broken {
            return Err(FormatError::Misuse("the xlsx writer failed earlier"));
        }
        let Self {
            workbook, output, ..
        } = &mut self;
        catch_unwind(AssertUnwindSafe(|| {
            workbook.save_to_writer(&mut *output).map_err(xlsx_error)
        }))
        .unwrap_or_else(|_| Err(panicked()))?;
        Ok(self.output)
    }
}

/// The error for a panic inside the writer. `rust_xlsxwriter` panics when its
/// temporary file cannot be written (a full disk); the panic is caught, so that one
/// export's failure ends that export and does not unwind through the server.
fn panicked() -> FormatError {
    FormatError::Io(std::io::Error::other(
        "the xlsx writer failed (its temporary file could not be written)",
    ))
}

fn xlsx_error(error: XlsxError) -> FormatError {
    match error {
        XlsxError::IoError(error) => FormatError::Io(error),
        other => FormatError::Xlsx(other),
    }
}

/// A column's cell kind and number format, from its Trino type.
fn column_kind(column: &ColumnSpec) -> (CellKind, Option<rust_xlsxwriter::Format>) {
    let number_format =
        |pattern: &str| Some(rust_xlsxwriter::Format::new().set_num_format(pattern));
    match TrinoType::parse(&column.trino_type) {
        TrinoType::TinyInt
        | TrinoType::SmallInt
        | TrinoType::Integer
        | TrinoType::BigInt
        | TrinoType::Real
        | TrinoType::Double => (CellKind::Number, None),
        TrinoType::Decimal { scale, .. } => {
            // A spreadsheet shows at most 30 decimals in a format; more digits
            // than a double holds would be noise anyway.
            let decimals = usize::try_from(scale).unwrap_or(0).min(30);
            let pattern = if decimals == 0 {
                "0".to_owned()
            } else {
                format!("0.{}", "0".repeat(decimals))
            };
            (CellKind::Decimal, number_format(&pattern))
        }
        TrinoType::Date => (CellKind::Date, number_format("yyyy-mm-dd")),
        TrinoType::Timestamp { precision } => (
            CellKind::Timestamp,
            number_format(if precision == 0 {
                "yyyy-mm-dd hh:mm:ss"
            } else {
                "yyyy-mm-dd hh:mm:ss.000"
            }),
        ),
        TrinoType::Boolean | TrinoType::Text | TrinoType::Binary | TrinoType::Other => {
            (CellKind::Plain, None)
        }
    }
}

/// One value, ready for the sheet.
enum Cell<'a> {
    Empty,
    Boolean(bool),
    Number(f64),
    DateTime(ExcelDateTime),
    Text(&'a str),
}

impl Cell<'_> {
    /// The value's bytes in the sheet's XML, roughly.
    fn size(&self) -> u64 {
        match self {
            Cell::Empty => 0,
            Cell::Boolean(_) => 1,
            Cell::Number(_) | Cell::DateTime(_) => 17,
            Cell::Text(text) => text.len() as u64,
        }
    }
}

/// The cell for `value` in a column of `kind`; `scratch` holds text that had to be
/// made (JSON text, a number written out, a cut text).
fn to_cell<'a>(value: &'a Value, kind: CellKind, scratch: &'a mut String) -> Cell<'a> {
    match (kind, value) {
        (_, Value::Null) => Cell::Empty,
        (_, Value::Bool(flag)) => Cell::Boolean(*flag),
        (_, Value::Number(number)) => number_cell(number, scratch),
        (CellKind::Number | CellKind::Decimal, Value::String(text)) => match exact_number(text) {
            Some(number) => Cell::Number(number),
            None => text_cell(text, scratch),
        },
        (CellKind::Date, Value::String(text)) => match parse_date(text) {
            Some(date) => Cell::DateTime(date),
            None => text_cell(text, scratch),
        },
        (CellKind::Timestamp, Value::String(text)) => match parse_timestamp(text) {
            Some(datetime) => Cell::DateTime(datetime),
            None => text_cell(text, scratch),
        },
        (CellKind::Plain, Value::String(text)) => text_cell(text, scratch),
        (_, Value::Array(_) | Value::Object(_)) => {
            scratch.clear();
            // Writing to a String cannot fail; a value's Display is its compact JSON.
            let _ = write!(scratch, "{value}");
            fit_in_place(scratch);
            Cell::Text(scratch)
        }
    }
}

/// A JSON number as a number cell, or as text when a double cannot hold it exactly.
fn number_cell<'a>(number: &Number, scratch: &'a mut String) -> Cell<'a> {
    let exact_integer = |magnitude: u64| magnitude <= EXACT_INTEGER;
    let fits = match (number.as_i64(), number.as_u64()) {
        (Some(integer), _) => exact_integer(integer.unsigned_abs()),
        (None, Some(integer)) => exact_integer(integer),
        // serde_json's other numbers are finite doubles already.
        (None, None) => true,
    };
    match number.as_f64() {
        Some(double) if fits && double.is_finite() => Cell::Number(double),
        _ => {
            scratch.clear();
            scratch.push_str(&number.to_string());
            Cell::Text(scratch)
        }
    }
}

/// A number Trino sent as text (a decimal, `NaN`, `Infinity`), when a double holds it
/// exactly: a plain decimal of at most 15 significant digits.
fn exact_number(text: &str) -> Option<f64> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (whole, fraction) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return None;
    }
    let significant = format!("{whole}{}", fraction.trim_end_matches('0'));
    if significant.trim_start_matches('0').len() > EXACT_DIGITS {
        return None;
    }
    text.parse::<f64>().ok().filter(|number| number.is_finite())
}

/// `YYYY-MM-DD`, within the years a spreadsheet shows.
fn parse_date(text: &str) -> Option<ExcelDateTime> {
    let (year, rest) = text.split_once('-')?;
    let (month, day) = rest.split_once('-')?;
    let [year, month, day] = [year, month, day].map(|part| {
        part.bytes()
            .all(|byte| byte.is_ascii_digit())
            .then(|| part.parse::<u16>().ok())
            .flatten()
    });
    let (year, month, day) = (year?, u8::try_from(month?).ok()?, u8::try_from(day?).ok()?);
    // The spreadsheet epoch: earlier dates have no serial number.
    if year < 1900 {
        return None;
    }
    ExcelDateTime::from_ymd(year, month, day).ok()
}

/// `YYYY-MM-DD HH:MM:SS[.fff…]`, as Trino sends a `timestamp(p)`.
fn parse_timestamp(text: &str) -> Option<ExcelDateTime> {
    let (date, time) = text.split_once(' ')?;
    let mut parts = time.splitn(3, ':');
    let hour: u16 = parse_digits(parts.next()?)?;
    let minute: u8 = parse_digits(parts.next()?)?;
    let seconds = parts.next()?;
    let (whole, fraction) = seconds.split_once('.').unwrap_or((seconds, "0"));
    let whole: u8 = parse_digits(whole)?;
    if fraction.is_empty() || !fraction.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let seconds: f64 = format!("{whole}.{fraction}").parse().ok()?;
    if hour > 23 {
        return None;
    }
    parse_date(date)?.and_hms(hour, minute, seconds).ok()
}

fn parse_digits<T: std::str::FromStr>(part: &str) -> Option<T> {
    if part.is_empty() || !part.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// Text as a cell, cut to the cell's limit when it is longer.
fn text_cell<'a>(text: &'a str, scratch: &'a mut String) -> Cell<'a> {
    if utf16_len(text) <= XLSX_MAX_CELL_CHARS {
        return Cell::Text(text);
    }
    scratch.clear();
    scratch.push_str(text);
    fit_in_place(scratch);
    Cell::Text(scratch)
}

/// A header name, cut like any text.
fn fit_cell(text: &str) -> std::borrow::Cow<'_, str> {
    if utf16_len(text) <= XLSX_MAX_CELL_CHARS {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut owned = text.to_owned();
    fit_in_place(&mut owned);
    std::borrow::Cow::Owned(owned)
}

/// Cuts `text` so that it and the marker fit one cell, on a character boundary.
fn fit_in_place(text: &mut String) {
    if utf16_len(text) <= XLSX_MAX_CELL_CHARS {
        return;
    }
    let budget = XLSX_MAX_CELL_CHARS - utf16_len(XLSX_TRUNCATION_MARKER);
    let mut units = 0;
    let mut end = 0;
    for (index, character) in text.char_indices() {
        units += character.len_utf16();
        if units > budget {
            break;
        }
        end = index + character.len_utf8();
    }
    text.truncate(end);
    text.push_str(XLSX_TRUNCATION_MARKER);
}

fn utf16_len(text: &str) -> usize {
    // Most text is ASCII, where bytes and UTF-16 units agree; only count otherwise.
    if text.is_ascii() {
        text.len()
    } else {
        text.chars().map(char::len_utf16).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::{exact_number, parse_date, parse_timestamp};

    #[test]
    fn decimals_become_numbers_only_when_a_double_holds_them() {
        assert_eq!(exact_number("12.50"), Some(12.5));
        assert_eq!(exact_number("-0.001"), Some(-0.001));
        assert_eq!(exact_number("123456789012345"), Some(123_456_789_012_345.0));
        assert_eq!(
            exact_number("1234567890.12345000"),
            Some(1_234_567_890.123_45)
        );
        for text in [
            "1234567890123456",
            "0.1234567890123456",
            "NaN",
            "Infinity",
            "",
            "-",
            "1e5",
            "1.2.3",
        ] {
            assert_eq!(exact_number(text), None, "{text}");
        }
    }

    #[test]
    fn dates_and_timestamps_parse_only_in_the_spreadsheet_range() {
        assert!(parse_date("2024-01-31").is_some());
        assert!(parse_date("1899-12-31").is_none());
        assert!(parse_date("2024-02-30").is_none());
        assert!(parse_date("+2024-01-31").is_none());
        assert!(parse_timestamp("2024-01-31 12:34:56.789").is_some());
        assert!(parse_timestamp("2024-01-31 12:34:56").is_some());
        assert!(parse_timestamp("2024-01-31 12:34:56.123456789").is_some());
        assert!(parse_timestamp("2024-01-31 24:00:00").is_none());
        assert!(parse_timestamp("2024-01-31T12:34:56").is_none());
    }
}
