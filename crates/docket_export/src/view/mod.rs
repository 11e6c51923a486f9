//! A paging viewer of asset rows, so a browser can page through a million-row export
//! as quickly as through a small one.
//!
//! [`Viewer::page`] reads one page of a committed asset's rows, every cell as text,
//! without reading the whole object:
//!
//! - CSV, JSON Lines and JSON are read as a stream from a byte offset
//!   ([`ObjectSink::open_at`]). While reading, the viewer records a checkpoint (the
//!   byte offset where a row starts) every 1000 rows, in a per-process cache of up to
//!   128 assets; a page starts reading at the nearest checkpoint at or before its
//!   first row. So the first page of a huge CSV reads a few kilobytes, and paging on
//!   from any page reads at most one checkpoint interval beyond it. A CSV page read
//!   from a checkpoint reads the header record from the start as well.
//! - Parquet (feature `parquet`) reads the footer, then only the row groups and pages
//!   that hold the page's rows and shown columns, through ranged reads.
//! - XLSX and any other format are [`ViewError::NotViewable`].
//!
//! Asset bytes are untrusted: a page holds at most [`MAX_PAGE_ROWS`] rows and
//! [`MAX_COLUMNS`] columns, a cell is cut after [`MAX_CELL_CHARS`] characters, a
//! record over [`MAX_RECORD_BYTES`] is an error, and malformed content (invalid
//! UTF-8, a JSON row that is not an object, a CSV row of the wrong width) is a
//! [`ViewError::Malformed`], never a panic.
//!
//! ```
//! use docket_export::format::{ChunkBuffer, ColumnSpec, Format, RowWriter};
//! use docket_export::sink::{FilesystemSink, ObjectSink as _};
//! use docket_export::view::Viewer;
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let root = std::env::temp_dir().join(format!("docket-view-doc-{}", std::process::id()));
//! let sink = FilesystemSink::new(&root);
//! let mut writer = RowWriter::new(Format::Csv, ChunkBuffer::new())?;
//! writer.begin(&[ColumnSpec::new("id", "bigint"), ColumnSpec::new("note", "varchar")])?;
//! writer.write_rows(&[vec![json!(1), json!("a, b")], vec![json!(2), json!("line\nbreak")]])?;
//! let (_, buffer) = writer.finish()?;
//! let mut upload = sink.begin("alice/1/content.csv").await?;
//! upload.write(buffer.take()).await?;
//! upload.commit().await?;
//!
//! let viewer = Viewer::new();
//! let page = viewer.page(&sink, "alice/1/content.csv", "csv", 1, 50).await?;
//! assert_eq!(page.columns, ["id", "note"]);
//! assert_eq!(page.rows, [["2", "line\nbreak"]]);
//! assert!(!page.more);
//! # std::fs::remove_dir_all(&root)?;
//! # Ok(())
//! # }
//! ```

mod checkpoints;
mod csv;
mod error;
mod json;
mod jsonl;
mod limits;
mod objects;
mod page;
#[cfg(feature = "parquet")]
mod parquet;
mod records;
mod scan;

pub use error::ViewError;
pub use limits::{
    CELL_TRUNCATION_MARKER, MAX_CELL_CHARS, MAX_COLUMNS, MAX_PAGE_ROWS, MAX_PARQUET_READ_BYTES,
    MAX_RECORD_BYTES,
};
pub use page::RowPage;

use crate::sink::ObjectSink;

use self::checkpoints::Checkpoints;
use self::scan::TextAsset;

/// Pages through committed assets' rows, remembering where rows start.
///
/// One viewer serves one sink for the life of the process: its checkpoints are kept by
/// object key (and checked against the object's size), so share it between requests.
#[derive(Debug)]
pub struct Viewer {
    checkpoints: Checkpoints,
    checkpoint_every: u64,
}

impl Viewer {
    /// The default spacing of checkpoints, in rows.
    pub const DEFAULT_CHECKPOINT_EVERY: u64 = 1000;

    /// A viewer with an empty cache and a checkpoint every
    /// [`DEFAULT_CHECKPOINT_EVERY`](Self::DEFAULT_CHECKPOINT_EVERY) rows.
    #[must_use]
    pub fn new() -> Self {
        Self::with_checkpoint_every(Self::DEFAULT_CHECKPOINT_EVERY)
    }

    /// A viewer that records a checkpoint every `rows` rows (at least 1): closer
    /// checkpoints read less before a page and keep more in memory.
    #[must_use]
    pub fn with_checkpoint_every(rows: u64) -> Self {
        Self {
            checkpoints: Checkpoints::default(),
            checkpoint_every: rows.max(1),
        }
    }

    /// The page of up to `rows` rows (at most [`MAX_PAGE_ROWS`]) starting at the
    /// 0-based data row `first_row` of the committed asset at `key`, read as `format`
    /// (`csv`, `json`, `jsonl` or `parquet`). A `first_row` at or past the end gives a
    /// page without rows and with `more` false.
    ///
    /// # Errors
    ///
    /// [`ViewError::NotViewable`] for another format; [`ViewError::Sink`] when the
    /// asset cannot be read (`NotFound` included); [`ViewError::Malformed`] and
    /// [`ViewError::TooLarge`] for content the viewer will not show.
    pub async fn page(
        &self,
        sink: &dyn ObjectSink,
        key: &str,
        format: &str,
        first_row: u64,
        rows: usize,
    ) -> Result<RowPage, ViewError> {
        let rows = rows.min(MAX_PAGE_ROWS);
        let asset = TextAsset {
            sink,
            key,
            checkpoints: &self.checkpoints,
            checkpoint_every: self.checkpoint_every,
        };
        match format {
            "csv" => csv::page(asset, first_row, rows).await,
            "json" => json::page(asset, first_row, rows).await,
            "jsonl" => jsonl::page(asset, first_row, rows).await,
            #[cfg(feature = "parquet")]
            "parquet" => parquet::page(sink, key, first_row, rows).await,
            other => Err(ViewError::NotViewable {
                format: other.to_owned(),
            }),
        }
    }
}

impl Default for Viewer {
    fn default() -> Self {
        Self::new()
    }
}
