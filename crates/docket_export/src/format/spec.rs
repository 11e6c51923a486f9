//! The types every writer shares: the formats, a result column, the writers'
//! options and their errors. The writers (`csv`, `json`, `parquet`, `xlsx`) and the
//! `RowWriter` that picks one all use them, so they live apart from both.

use std::fmt;
use std::io;
use std::str::FromStr;

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
    /// An Excel workbook (Office Open XML) of one sheet: a header row, then one row per
    /// result row in typed cells; at most 1 048 575 result rows.
    Xlsx,
}

impl Format {
    /// Every format, in the order the tool schema lists them.
    pub const ALL: [Self; 5] = [
        Self::Csv,
        Self::Json,
        Self::Jsonl,
        Self::Parquet,
        Self::Xlsx,
    ];

    /// The name used in tool arguments and results: `csv`, `json`, `jsonl`, `parquet`,
    /// `xlsx`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Csv => "csv",
            Self::Json => "json",
            Self::Jsonl => "jsonl",
            Self::Parquet => "parquet",
            Self::Xlsx => "xlsx",
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
            Self::Xlsx => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
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
            Self::Csv | Self::Json | Self::Jsonl | Self::Xlsx => true,
        }
    }

    /// Whether the format hands (nearly) all of its bytes to the output in
    /// [`RowWriter::finish`](super::RowWriter::finish) rather than page by page:
    /// XLSX, a zip package that can only be assembled once its sheet is complete.
    /// Run such a `finish` off the async runtime and drain the output while it runs,
    /// so the file never sits whole in memory.
    #[must_use]
    pub fn writes_at_finish(self) -> bool {
        matches!(self, Self::Xlsx)
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
    /// The format name is not one of `csv`, `json`, `jsonl`, `parquet`, `xlsx`.
    #[error("unsupported format {name:?} (must be csv, json, jsonl, parquet or xlsx)")]
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
    /// The result does not fit the format: an XLSX sheet holds 1 048 575 rows below
    /// its header and 16 384 columns. Nothing of the page that would pass the limit
    /// is written.
    #[error(
        "an {format} sheet holds at most {limit} {what}; narrow the query, add a LIMIT, or export as csv, jsonl or parquet"
    )]
    FormatLimit {
        /// The format whose limit it is.
        format: Format,
        /// The limit.
        limit: u64,
        /// What is limited (`columns`, `rows below its header row`).
        what: &'static str,
    },
    /// Writing to the output failed.
    #[error("could not write the export output")]
    Io(#[from] io::Error),
    /// The Parquet encoder failed.
    #[cfg(feature = "parquet")]
    #[error("could not encode parquet")]
    Parquet(#[source] ::parquet::errors::ParquetError),
    /// The XLSX writer failed.
    #[error("could not write the xlsx workbook")]
    Xlsx(#[source] rust_xlsxwriter::XlsxError),
}
