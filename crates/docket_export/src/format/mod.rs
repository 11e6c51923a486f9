//! Streaming row writers: an export hands over pages of rows (JSON values, as Trino's
//! REST protocol gives them) and gets bytes out, in CSV, JSON, JSONL or Parquet,
//! without ever holding the whole result.
//!
//! A [`RowWriter`] writes to any [`std::io::Write`]. The export loop usually gives it a
//! [`ChunkBuffer`] and, after each page, moves what the buffer holds into the object
//! sink, so memory stays bounded by one page (and, for Parquet, one row group):
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
mod trino_type;

use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use serde_json::Value;

/// An export format, as the `format` tool argument names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// Comma-separated values with a header row and a formula-injection guard.
    Csv,
    /// One JSON array of objects, one object per row keyed by column name.
    Json,
    /// JSON Lines: one object per line.
    Jsonl,
    /// Apache Parquet; needs the `parquet` cargo feature (see [`Format::is_available`]).
    Parquet,
}

impl Format {
    /// Every format, in the order the tool schema lists them.
    pub const ALL: [Self; 4] = [Self::Csv, Self::Json, Self::Jsonl, Self::Parquet];

    /// The name used in tool arguments and results: `csv`, `json`, `jsonl`, `parquet`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Json => "json",
            Self::Jsonl => "jsonl",
            Self::Parquet => "parquet",
        }
    }

    /// The media type stored with the asset and served with its content.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Csv => "text/csv",
            Self::Json => "application/json",
            Self::Jsonl => "application/x-ndjson",
            Self::Parquet => "application/vnd.apache.parquet",
        }
    }

    /// The file extension, without the dot.
    #[must_use]
    pub fn extension(self) -> &'static str {
        self.as_str()
    }

    /// Whether this build can write the format: Parquet only with the `parquet` feature.
    #[must_use]
    pub fn is_available(self) -> bool {
        match self {
            Self::Parquet => cfg!(feature = "parquet"),
            Self::Csv | Self::Json | Self::Jsonl => true,
        }
    }

    /// The formats this build can write.
    pub fn available() -> impl Iterator<Item = Self> {
        Self::ALL.into_iter().filter(|format| format.is_available())
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = FormatError;

    /// Parses a tool argument; names are matched exactly (lower case), as the tool's
    /// schema enumerates them. Parquet parses only when this build can write it, so a
    /// request fails before any query runs.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        let format = Self::ALL
            .into_iter()
            .find(|format| format.as_str() == name)
            .ok_or_else(|| FormatError::UnknownFormat {
                name: name.to_owned(),
            })?;
        if format.is_available() {
            Ok(format)
        } else {
            Err(FormatError::Unavailable { format })
        }
    }
}

/// One result column: its name and its Trino type name (`varchar(10)`,
/// `decimal(12,2)`, `timestamp(3) with time zone`, `array(bigint)` …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnSpec {
    /// The column's name as Trino reports it.
    pub name: String,
    /// The column's type as Trino names it (the `type` field of a REST column).
    pub trino_type: String,
}

impl ColumnSpec {
    /// A column from its name and Trino type name.
    pub fn new(name: impl Into<String>, trino_type: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            trino_type: trino_type.into(),
        }
    }
}

/// What a finished writer produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FormatReport {
    /// Data rows written (the CSV header is not a row).
    pub rows: u64,
    /// Bytes handed to the output, headers and footers included.
    pub bytes: u64,
}

/// Tuning for the writers; the defaults suit exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterOptions {
    /// Parquet: the most rows in one row group. A row group is held in memory
    /// (encoded) until it is complete, so this bounds memory.
    pub parquet_row_group_rows: usize,
    /// Parquet: the most (estimated, encoded) bytes in one row group; whichever of the
    /// two limits is reached first closes the row group.
    pub parquet_row_group_bytes: usize,
    /// Parquet: rows gathered from pages before they are encoded as one batch.
    pub parquet_batch_rows: usize,
}

impl Default for WriterOptions {
    fn default() -> Self {
        Self {
            parquet_row_group_rows: 128 * 1024,
            parquet_row_group_bytes: 32 * 1024 * 1024,
            parquet_batch_rows: 8 * 1024,
        }
    }
}

/// Why a writer failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FormatError {
    /// The format name is not one of `csv`, `json`, `jsonl`, `parquet`.
    #[error("unsupported format {name:?} (must be csv, json, jsonl or parquet)")]
    UnknownFormat {
        /// The name given.
        name: String,
    },
    /// The format exists but this build cannot write it.
    #[error("the {format} format is not available in this build")]
    Unavailable {
        /// The format asked for.
        format: Format,
    },
    /// `begin`, `write_rows` and `finish` were called out of order.
    #[error("row writer misuse: {0}")]
    Misuse(&'static str),
    /// A row has a different number of values than there are columns.
    #[error("row {row} has {values} values but the result has {columns} columns")]
    RowWidth {
        /// The 0-based index of the row in the whole result.
        row: u64,
        /// How many values the row has.
        values: usize,
        /// How many columns were announced in `begin`.
        columns: usize,
    },
    /// A value does not fit its column's type (Parquet only: the text formats write
    /// whatever Trino sends).
    #[error("row {row}, column {column:?}: {reason}")]
    Value {
        /// The 0-based index of the row in the whole result.
        row: u64,
        /// The column's name.
        column: String,
        /// What is wrong with the value.
        reason: String,
    },
    /// Writing to the output failed.
    #[error("could not write the export output")]
    Io(#[from] io::Error),
    /// The Parquet encoder failed.
    #[cfg(feature = "parquet")]
    #[error("could not encode parquet")]
    Parquet(#[source] ::parquet::errors::ParquetError),
}

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
/// the text formats, and every completed row group for Parquet.
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
    /// row group; always 0 for the text formats, which flush after every page.
    #[must_use]
    pub fn buffered_bytes(&self) -> u64 {
        match &self.state {
            #[cfg(feature = "parquet")]
            State::Writing(Encoder::Parquet(encoder)) => encoder.buffered_bytes(),
            _ => 0,
        }
    }

    /// Starts the output: the CSV header, the JSON array's opening, the Parquet schema.
    ///
    /// # Errors
    ///
    /// [`FormatError::Misuse`] if called twice; [`FormatError::Io`] if the output fails;
    /// for Parquet, [`FormatError::Parquet`] if the schema cannot be written.
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
    /// [`FormatError::Io`] or [`FormatError::Parquet`] if writing fails.
    pub fn write_rows(&mut self, rows: &[Vec<Value>]) -> Result<(), FormatError> {
        let State::Writing(encoder) = &mut self.state else {
            return Err(FormatError::Misuse("write_rows called before begin"));
        };
        let first_row = self.progress.rows();
        if let Some((offset, row)) = rows
            .iter()
            .enumerate()
            .find(|(_, row)| row.len() != self.columns)
        {
            return Err(FormatError::RowWidth {
                row: first_row + offset as u64,
                values: row.len(),
                columns: self.columns,
            });
        }
        match encoder {
            Encoder::Csv(encoder) => encoder.write_rows(rows)?,
            Encoder::Json(encoder) => encoder.write_rows(rows)?,
            #[cfg(feature = "parquet")]
            Encoder::Parquet(encoder) => encoder.write_rows(rows, first_row)?,
        }
        self.progress
            .counters
            .rows
            .fetch_add(rows.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    /// Ends the output (the JSON array's closing, the Parquet footer), flushes it, and
    /// returns what was written along with the output itself.
    ///
    /// # Errors
    ///
    /// [`FormatError::Misuse`] before `begin`; [`FormatError::Io`] or
    /// [`FormatError::Parquet`] if writing fails.
    pub fn finish(mut self) -> Result<(FormatReport, W), FormatError> {
        let State::Writing(encoder) = std::mem::replace(&mut self.state, State::Poisoned) else {
            return Err(FormatError::Misuse("finish called before begin"));
        };
        let mut output = match encoder {
            Encoder::Csv(encoder) => encoder.finish()?,
            Encoder::Json(encoder) => encoder.finish()?,
            #[cfg(feature = "parquet")]
            Encoder::Parquet(encoder) => encoder.finish()?,
        };
        output.flush()?;
        let report = FormatReport {
            rows: self.progress.rows(),
            bytes: self.progress.bytes(),
        };
        Ok((report, output.inner))
    }
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
