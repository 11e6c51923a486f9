//! Streaming row writers: an export hands over pages of rows (JSON values, as Trino's
//! REST protocol gives them) and gets bytes out, in CSV, JSON, JSONL, Parquet or XLSX,
//! without ever holding the whole result.
//!
//! A [`RowWriter`] writes to any [`std::io::Write`]. The export loop usually gives it a
//! [`ChunkBuffer`] and, after each page, moves what the buffer holds into the object
//! sink, so memory stays bounded by one page (and, for Parquet, one row group; XLSX
//! keeps its rows in a temporary file and writes the package in `finish`, see
//! [`Format::writes_at_finish`]):
//!
//! ```
//! use docket_export::format::{ChunkBuffer, ColumnSpec, Format, RowWriter};
//! use serde_json::json;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let buffer = ChunkBuffer::new();
//! let mut writer = RowWriter::new(Format::Csv, buffer.clone())?;
//! writer.begin(&[ColumnSpec::new("id", "bigint"), ColumnSpec::new("name", "varchar")])?;
//! writer.write_rows(&[vec![json!(1), json!("=SUM(A1)")]])?;
//! let first_chunk = buffer.take(); // hand this to the sink
//! let (report, _) = writer.finish()?;
//! let rest = buffer.take();
//! assert_eq!([first_chunk, rest].concat(), b"id,name\n1,'=SUM(A1)\n");
//! assert_eq!((report.rows, report.bytes), (1, 20));
//! # Ok(())
//! # }
//! ```

mod csv;
mod json;
#[cfg(feature = "parquet")]
mod parquet;
mod spec;
mod trino_type;
mod xlsx;

pub use spec::{ColumnSpec, Format, FormatError, FormatReport, WriterOptions};
pub use xlsx::{
    XLSX_MAX_CELL_CHARS, XLSX_MAX_COLUMNS, XLSX_MAX_SHEET_ROWS, XLSX_TRUNCATION_MARKER,
};

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use serde_json::Value;

use crate::cells::{Row, TextRows};

/// Rows and bytes written so far, readable from another task while the writer works
/// (for a heartbeat's "N rows, M bytes written").
#[derive(Debug, Clone, Default)]
pub struct WriteProgress {
    counters: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    rows: AtomicU64,
    bytes: AtomicU64,
}

impl WriteProgress {
    /// Data rows accepted so far.
    #[must_use]
    pub fn rows(&self) -> u64 {
        self.counters.rows.load(Ordering::Relaxed)
    }

    /// Bytes handed to the output so far.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.counters.bytes.load(Ordering::Relaxed)
    }
}

/// The output wrapper that counts bytes as they pass.
#[derive(Debug)]
struct CountingWriter<W> {
    inner: W,
    progress: WriteProgress,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.progress
            .counters
            .bytes
            .fetch_add(written as u64, Ordering::Relaxed);
        Ok(written)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A growable in-memory output that is shared between a [`RowWriter`] and whoever
/// drains it: clone it, give one clone to the writer, and [`take`](Self::take) the
/// bytes written so far after each page.
#[derive(Debug, Clone, Default)]
pub struct ChunkBuffer {
    bytes: Arc<Mutex<BytesMut>>,
}

impl ChunkBuffer {
    /// An empty buffer.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Removes and returns everything written so far.
    #[must_use]
    pub fn take(&self) -> Bytes {
        self.lock().split().freeze()
    }

    /// How many bytes are waiting to be taken.
    #[must_use]
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is waiting to be taken.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BytesMut> {
        // A panic while holding the lock cannot leave the bytes half-updated in a way
        // that matters here: at worst a chunk is incomplete and the export fails later.
        self.bytes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Write for ChunkBuffer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The per-format encoders.
enum Encoder<W: Write + Send> {
    // Boxed: the csv crate's writer carries its buffer state inline.
    Csv(Box<csv::CsvEncoder<CountingWriter<W>>>),
    Json(json::JsonEncoder<CountingWriter<W>>),
    #[cfg(feature = "parquet")]
    Parquet(Box<parquet::ParquetEncoder<CountingWriter<W>>>),
    Xlsx(Box<xlsx::XlsxEncoder<CountingWriter<W>>>),
}

/// Where a writer is in its life.
enum State<W: Write + Send> {
    /// Created; `begin` not yet called.
    Ready(CountingWriter<W>),
    /// Between `begin` and `finish`.
    Writing(Encoder<W>),
    /// Only while a call is in progress, or after a failed `begin`.
    Poisoned,
}

/// A streaming writer of one export in one [`Format`]: `begin` with the columns, then
/// `write_rows` for every page, then `finish`.
///
/// Bytes reach the output as they are encoded: after each `write_rows` everything for
/// the text formats, every completed row group for Parquet, and for XLSX nothing until
/// `finish`, which writes the whole package (see [`Format::writes_at_finish`]).
pub struct RowWriter<W: Write + Send> {
    format: Format,
    #[cfg_attr(
        not(feature = "parquet"),
        expect(dead_code, reason = "only the parquet writer has options")
    )]
    options: WriterOptions,
    columns: usize,
    progress: WriteProgress,
    state: State<W>,
}

impl<W: Write + Send> fmt::Debug for RowWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowWriter")
            .field("format", &self.format)
            .field("rows", &self.progress.rows())
            .field("bytes", &self.progress.bytes())
            .finish_non_exhaustive()
    }
}

impl<W: Write + Send> RowWriter<W> {
    /// A writer of `format` to `output`, with default options.
    ///
    /// # Errors
    ///
    /// [`FormatError::Unavailable`] when this build cannot write `format`.
    pub fn new(format: Format, output: W) -> Result<Self, FormatError> {
        Self::with_options(format, output, WriterOptions::default())
    }

    /// A writer of `format` to `output`.
    ///
    /// # Errors
    ///
    /// [`FormatError::Unavailable`] when this build cannot write `format`.
    pub fn with_options(
        format: Format,
        output: W,
        options: WriterOptions,
    ) -> Result<Self, FormatError> {
        if !format.is_available() {
            return Err(FormatError::Unavailable { format });
        }
        let progress = WriteProgress::default();
        Ok(Self {
            format,
            options,
            columns: 0,
            state: State::Ready(CountingWriter {
                inner: output,
                progress: progress.clone(),
            }),
            progress,
        })
    }

    /// The format being written.
    #[must_use]
    pub fn format(&self) -> Format {
        self.format
    }

    /// A handle on the row and byte counts, for progress reports from elsewhere.
    #[must_use]
    pub fn progress(&self) -> WriteProgress {
        self.progress.clone()
    }

    /// Data rows written so far.
    #[must_use]
    pub fn rows_written(&self) -> u64 {
        self.progress.rows()
    }

    /// Bytes handed to the output so far. Enforce a byte cap on this plus
    /// [`buffered_bytes`](Self::buffered_bytes).
    #[must_use]
    pub fn bytes_written(&self) -> u64 {
        self.progress.bytes()
    }

    /// Bytes encoded but not yet handed to the output: Parquet's estimate of its open
    /// row group; XLSX's sheet so far, uncompressed (its package is compressed and
    /// written only in `finish`, so a byte cap on this refuses a sheet whose stored
    /// file would have been smaller, but bounds the temporary file); always 0 for the
    /// text formats, which flush after every page.
    #[must_use]
    pub fn buffered_bytes(&self) -> u64 {
        match &self.state {
            #[cfg(feature = "parquet")]
            State::Writing(Encoder::Parquet(encoder)) => encoder.buffered_bytes(),
            State::Writing(Encoder::Xlsx(encoder)) => encoder.buffered_bytes(),
            _ => 0,
        }
    }

    /// Starts the output: the CSV header, the JSON array's opening, the Parquet schema.
    ///
    /// # Errors
    ///
    /// [`FormatError::Misuse`] if called twice; [`FormatError::Io`] if the output fails;
    /// for Parquet, [`FormatError::Parquet`] if the schema cannot be written; for XLSX,
    /// [`FormatError::FormatLimit`] for more than 16 384 columns and
    /// [`FormatError::Xlsx`] if the sheet cannot be started.
    pub fn begin(&mut self, columns: &[ColumnSpec]) -> Result<(), FormatError> {
        let output = match std::mem::replace(&mut self.state, State::Poisoned) {
            State::Ready(output) => output,
            // Put back what was there: a second `begin` must not end the first.
            other => {
                self.state = other;
                return Err(FormatError::Misuse("begin called twice"));
            }
        };
        self.columns = columns.len();
        let names = unique_names(columns);
        let encoder = match self.format {
            Format::Csv => Encoder::Csv(Box::new(csv::CsvEncoder::begin(output, columns)?)),
            Format::Json => Encoder::Json(json::JsonEncoder::begin(
                output,
                &names,
                json::Layout::Array,
            )?),
            Format::Jsonl => Encoder::Json(json::JsonEncoder::begin(
                output,
                &names,
                json::Layout::Lines,
            )?),
            #[cfg(feature = "parquet")]
            Format::Parquet => Encoder::Parquet(Box::new(parquet::ParquetEncoder::begin(
                output,
                columns,
                &names,
                &self.options,
            )?)),
            #[cfg(not(feature = "parquet"))]
            Format::Parquet => {
                return Err(FormatError::Unavailable {
                    format: Format::Parquet,
                });
            }
            Format::Xlsx => {
                Encoder::Xlsx(Box::new(xlsx::XlsxEncoder::begin(output, columns, &names)?))
            }
        };
        self.state = State::Writing(encoder);
        Ok(())
    }

    /// Writes one page of rows, each with one value per column in `begin`'s order.
    ///
    /// # Errors
    ///
    /// [`FormatError::Misuse`] before `begin`; [`FormatError::RowWidth`] for a row of
    /// the wrong width (nothing of that page is written for the text formats);
    /// [`FormatError::Value`] for a value Parquet cannot store in its column's type;
    /// [`FormatError::FormatLimit`] for the page that would pass XLSX's 1 048 575 rows
    /// (nothing of it is written);
    /// [`FormatError::Io`], [`FormatError::Parquet`] or [`FormatError::Xlsx`] if
    /// writing fails.
    pub fn write_rows(&mut self, rows: &[Vec<Value>]) -> Result<(), FormatError> {
        self.write_page(rows.iter(), |encoder, first_row| {
            #[cfg(not(feature = "parquet"))]
            let _ = first_row;
            match encoder {
                Encoder::Csv(encoder) => encoder.write_rows(rows.iter()),
                Encoder::Json(encoder) => encoder.write_rows(rows),
                #[cfg(feature = "parquet")]
                Encoder::Parquet(encoder) => encoder.write_rows(rows.iter(), first_row),
                Encoder::Xlsx(encoder) => encoder.write_rows(rows),
            }
        })
    }

    /// Writes one page of rows as Trino sent them, as [`write_rows`](Self::write_rows)
    /// does: CSV and Parquet read each cell from the page's text, the other formats
    /// decode the page first.
    ///
    /// # Errors
    ///
    /// Those of [`write_rows`](Self::write_rows).
    pub fn write_text_rows(&mut self, rows: &TextRows) -> Result<(), FormatError> {
        self.write_page(rows.iter(), |encoder, first_row| {
            #[cfg(not(feature = "parquet"))]
            let _ = first_row;
            match encoder {
                Encoder::Csv(encoder) => encoder.write_rows(rows.iter()),
                #[cfg(feature = "parquet")]
                Encoder::Parquet(encoder) => encoder.write_rows(rows.iter(), first_row),
                Encoder::Json(encoder) => encoder.write_rows(&decoded(rows)?),
                Encoder::Xlsx(encoder) => encoder.write_rows(&decoded(rows)?),
            }
        })
    }

    /// Checks the page's row widths, lets `write` write it, and counts its rows.
    fn write_page<R: Row>(
        &mut self,
        rows: impl ExactSizeIterator<Item = R>,
        write: impl FnOnce(&mut Encoder<W>, u64) -> Result<(), FormatError>,
    ) -> Result<(), FormatError> {
        let State::Writing(encoder) = &mut self.state else {
            return Err(FormatError::Misuse("write_rows called before begin"));
        };
        let first_row = self.progress.rows();
        let count = rows.len();
        if let Some((offset, row)) = rows
            .enumerate()
            .find(|(_, row)| row.width() != self.columns)
        {
            return Err(FormatError::RowWidth {
                row: first_row + offset as u64,
                values: row.width(),
                columns: self.columns,
            });
        }
        write(encoder, first_row)?;
        self.progress
            .counters
            .rows
            .fetch_add(count as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Ends the output (the JSON array's closing, the Parquet footer, the whole XLSX
    /// package), flushes it, and returns what was written along with the output itself.
    ///
    /// # Errors
    ///
    /// [`FormatError::Misuse`] before `begin`; [`FormatError::Io`],
    /// [`FormatError::Parquet`] or [`FormatError::Xlsx`] if writing fails.
    pub fn finish(mut self) -> Result<(FormatReport, W), FormatError> {
        let State::Writing(encoder) = std::mem::replace(&mut self.state, State::Poisoned) else {
            return Err(FormatError::Misuse("finish called before begin"));
        };
        let mut output = match encoder {
            Encoder::Csv(encoder) => encoder.finish()?,
            Encoder::Json(encoder) => encoder.finish()?,
            #[cfg(feature = "parquet")]
            Encoder::Parquet(encoder) => encoder.finish()?,
            Encoder::Xlsx(encoder) => encoder.finish()?,
        };
        output.flush()?;
        let report = FormatReport {
            rows: self.progress.rows(),
            bytes: self.progress.bytes(),
        };
        Ok((report, output.inner))
    }
}

/// A page of Trino's text decoded for the formats that write JSON values.
fn decoded(rows: &TextRows) -> Result<Vec<Vec<Value>>, FormatError> {
    rows.to_values()
        .map_err(|error| FormatError::Io(io::Error::new(io::ErrorKind::InvalidData, error)))
}

/// Column names made unique for the keyed formats (JSON objects, Parquet fields):
/// Trino allows `SELECT 1 AS a, 2 AS a`, and an unnamed column gets `_col<i>`.
/// A repeated name gets `_2`, `_3`, … appended, skipping names already taken.
fn unique_names(columns: &[ColumnSpec]) -> Vec<String> {
    let mut taken: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut names = Vec::with_capacity(columns.len());
    for (index, column) in columns.iter().enumerate() {
        let base = if column.name.is_empty() {
            format!("_col{index}")
        } else {
            column.name.clone()
        };
        let mut name = base.clone();
        let mut suffix = 2;
        while taken.contains(&name) {
            name = format!("{base}_{suffix}");
            suffix += 1;
        }
        taken.insert(name.clone());
        names.push(name);
    }
    names
}
