//! CSV: a header row, then one record per row, `\n`-terminated and quoted only where
//! needed, with the original platform's formula-injection guard.
//!
//! The guard: a text cell starting with `=`, `+`, `-`, `@`, a tab or a carriage return
//! gets a `'` in front, so a spreadsheet opening the file shows it as text instead of
//! running it as a formula. Unlike the original, which formats every value to text
//! first, numbers are left alone: a JSON number, or a decimal or floating-point value
//! Trino sends as text (`-12.50`, `-Infinity`), cannot carry a formula, and a `'`
//! before a negative number would turn it into text for every consumer of the file.

use std::fmt::Write as _;
use std::io::Write;

use crate::cells::{Cell, Row};

use super::spec::{ColumnSpec, FormatError};
use super::trino_type::TrinoType;

/// The first characters that make a spreadsheet treat a cell as a formula.
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

pub(super) struct CsvEncoder<W: Write> {
    writer: ::csv::Writer<W>,
    /// Per column: whether its values are numbers (and exempt from the guard when they
    /// look like one).
    numeric: Vec<bool>,
    /// Reused for every cell that needs formatting, so a page costs no allocation per
    /// cell.
    cell: String,
}

impl<W: Write> CsvEncoder<W> {
    pub(super) fn begin(output: W, columns: &[ColumnSpec]) -> Result<Self, FormatError> {
        let writer = ::csv::WriterBuilder::new()
            .terminator(::csv::Terminator::Any(b'\n'))
            .from_writer(output);
        let mut encoder = Self {
            writer,
            numeric: columns
                .iter()
                .map(|column| TrinoType::parse(&column.trino_type).is_numeric())
                .collect(),
            cell: String::new(),
        };
        for column in columns {
            encoder.cell.clear();
            push_guarded(&mut encoder.cell, &column.name);
            encoder
                .writer
                .write_field(&encoder.cell)
                .map_err(csv_error)?;
        }
        encoder.end_record()?;
        encoder.writer.flush()?;
        Ok(encoder)
    }

    pub(super) fn write_rows<R: Row>(
        &mut self,
        rows: impl Iterator<Item = R>,
    ) -> Result<(), FormatError> {
        for row in rows {
            for (value, numeric) in row.cells().zip(&self.numeric) {
                self.cell.clear();
                render(&mut self.cell, &value, *numeric);
                self.writer.write_field(&self.cell).map_err(csv_error)?;
            }
            self.end_record()?;
        }
        // Hand the page's bytes on now, so the byte count is current after every page.
        self.writer.flush()?;
        Ok(())
    }

    pub(super) fn finish(self) -> Result<W, FormatError> {
        self.writer
            .into_inner()
            .map_err(|error| FormatError::Io(error.into_error()))
    }

    fn end_record(&mut self) -> Result<(), FormatError> {
        self.writer.write_record(None::<&[u8]>).map_err(csv_error)
    }
}

/// Writes one value as cell text: nothing for null, JSON text for arrays and objects.
fn render(cell: &mut String, value: &Cell<'_>, numeric: bool) {
    match value {
        Cell::Text(text) if numeric && looks_numeric(text) => cell.push_str(text),
        Cell::Text(text) => push_guarded(cell, text),
        // Writing to a String cannot fail.
        other => {
            let _ = write!(cell, "{other}");
        }
    }
}

/// Appends `text`, with a `'` in front when it would start a formula.
fn push_guarded(cell: &mut String, text: &str) {
    if text.starts_with(FORMULA_STARTS) {
        cell.push('\'');
    }
    cell.push_str(text);
}

/// Whether text is a plain number as Trino writes one: an optional sign, digits, an
/// optional fraction and exponent; or `NaN`, `Infinity`, `-Infinity`.
fn looks_numeric(text: &str) -> bool {
    if matches!(text, "NaN" | "Infinity" | "-Infinity" | "+Infinity") {
        return true;
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, Some(exponent)),
        None => (unsigned, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    let mantissa_ok =
        !(whole.is_empty() && fraction.is_empty()) && digits(whole) && digits(fraction);
    let exponent_ok = exponent.is_none_or(|exponent| {
        let exponent = exponent.strip_prefix(['-', '+']).unwrap_or(exponent);
        !exponent.is_empty() && digits(exponent)
    });
    mantissa_ok && exponent_ok
}

/// The csv crate's errors are I/O errors for a writer; keep the cause.
fn csv_error(error: ::csv::Error) -> FormatError {
    FormatError::Io(error.into())
}

#[cfg(test)]
mod tests {
    use super::looks_numeric;

    #[test]
    fn numeric_text_is_recognised() {
        for text in [
            "0",
            "-12.50",
            "+3",
            ".5",
            "5.",
            "1e10",
            "-1.5E-7",
            "NaN",
            "-Infinity",
        ] {
            assert!(looks_numeric(text), "{text}");
        }
        for text in [
            "", "-", ".", "=1", "-1+2", "1e", "--1", "1.2.3", "-A1", "0x10", "1 ",
        ] {
            assert!(!looks_numeric(text), "{text}");
        }
    }
}
