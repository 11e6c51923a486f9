//! JSON and JSON Lines: one object per row, keyed by column name in column order, with
//! the values exactly as Trino sent them.
//!
//! JSON is one array, written as it goes (`[`, then the objects one per line separated
//! by commas, then `]`), so a million rows never sit in memory as one document.

use std::io::{BufWriter, Write};

use serde_json::Value;

use super::spec::FormatError;

/// How rows are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    /// `[\n{…},\n{…}\n]\n`
    Array,
    /// `{…}\n{…}\n`
    Lines,
}

pub(super) struct JsonEncoder<W: Write> {
    output: BufWriter<W>,
    layout: Layout,
    /// Every column name already encoded as a JSON string followed by `:`, so a row
    /// costs no key escaping.
    keys: Vec<Vec<u8>>,
    first_row: bool,
}

impl<W: Write> JsonEncoder<W> {
    pub(super) fn begin(output: W, names: &[String], layout: Layout) -> Result<Self, FormatError> {
        let mut keys = Vec::with_capacity(names.len());
        for name in names {
            let mut key = serde_json::to_vec(name).map_err(std::io::Error::from)?;
            key.push(b':');
            keys.push(key);
        }
        let mut encoder = Self {
            output: BufWriter::new(output),
            layout,
            keys,
            first_row: true,
        };
        if layout == Layout::Array {
            encoder.output.write_all(b"[\n")?;
            encoder.output.flush()?;
        }
        Ok(encoder)
    }

    pub(super) fn write_rows(&mut self, rows: &[Vec<Value>]) -> Result<(), FormatError> {
        for row in rows {
            if self.layout == Layout::Array && !self.first_row {
                self.output.write_all(b",\n")?;
            }
            self.first_row = false;
            self.output.write_all(b"{")?;
            for (index, (key, value)) in self.keys.iter().zip(row).enumerate() {
                if index > 0 {
                    self.output.write_all(b",")?;
                }
                self.output.write_all(key)?;
                serde_json::to_writer(&mut self.output, value).map_err(std::io::Error::from)?;
            }
            self.output.write_all(b"}")?;
            if self.layout == Layout::Lines {
                self.output.write_all(b"\n")?;
            }
        }
        // Hand the page's bytes on now, so the byte count is current after every page.
        self.output.flush()?;
        Ok(())
    }

    pub(super) fn finish(mut self) -> Result<W, FormatError> {
        if self.layout == Layout::Array {
            let closing: &[u8] = if self.first_row { b"]\n" } else { b"\n]\n" };
            self.output.write_all(closing)?;
        }
        self.output
            .into_inner()
            .map_err(|error| FormatError::Io(error.into_error()))
    }
}
