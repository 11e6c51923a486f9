//! What the viewer reads: through a sink double that records every `open_at` and
//! counts the bytes pulled from it, a page far into a large asset is read from a
//! checkpoint after a first pass, and a first page reads a chunk or so.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use docket_export::format::{ColumnSpec, Format, WriterOptions};
use docket_export::sink::{FilesystemSink, ObjectContent, ObjectSink, SinkError, Upload};
use docket_export::view::Viewer;
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use super::{page, write_asset};
use crate::sink::TempDir;

/// A filesystem sink that records the start of every read and counts the bytes its
/// readers pull.
#[derive(Debug)]
struct CountingSink {
    inner: FilesystemSink,
    starts: Mutex<Vec<u64>>,
    pulled: Arc<AtomicU64>,
}

impl CountingSink {
    fn new(inner: FilesystemSink) -> Self {
        Self {
            inner,
            starts: Mutex::new(Vec::new()),
            pulled: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The starts and the bytes pulled since the last call.
    fn take(&self) -> (Vec<u64>, u64) {
        let starts = std::mem::take(&mut *self.starts.lock().expect("lock"));
        (starts, self.pulled.swap(0, Ordering::Relaxed))
    }
}

#[async_trait]
impl ObjectSink for CountingSink {
    async fn begin(&self, key: &str) -> Result<Box<dyn Upload>, SinkError> {
        self.inner.begin(key).await
    }

    async fn open(&self, key: &str) -> Result<ObjectContent, SinkError> {
        self.open_at(key, 0).await
    }

    async fn open_at(&self, key: &str, start: u64) -> Result<ObjectContent, SinkError> {
        self.starts.lock().expect("lock").push(start);
        let content = self.inner.open_at(key, start).await?;
        let size = content.size();
        let pulled = Arc::clone(&self.pulled);
        let counted = content.into_stream().inspect(move |chunk| {
            if let Ok(chunk) = chunk {
                pulled.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            }
        });
        Ok(ObjectContent::new(size, counted.boxed()))
    }

    async fn delete(&self, key: &str) -> Result<(), SinkError> {
        self.inner.delete(key).await
    }

    async fn size(&self, key: &str) -> Result<u64, SinkError> {
        self.inner.size(key).await
    }
}

const LARGE_ROWS: u64 = 200_000;

fn large_rows() -> (Vec<ColumnSpec>, Vec<Vec<Value>>) {
    let columns = vec![
        ColumnSpec::new("id", "bigint"),
        ColumnSpec::new("note", "varchar"),
    ];
    let rows = (0..LARGE_ROWS)
        .map(|id| vec![json!(id), json!(format!("row {id}, \"q\"\nend"))])
        .collect();
    (columns, rows)
}

#[tokio::test]
async fn a_late_page_of_a_large_csv_is_read_from_a_checkpoint() {
    let root = TempDir::new("view-large");
    let sink = CountingSink::new(FilesystemSink::new(root.path()));
    let (columns, rows) = large_rows();
    write_asset(
        &sink,
        "big.csv",
        Format::Csv,
        &columns,
        &rows,
        WriterOptions::default(),
    )
    .await;
    let size = sink.size("big.csv").await.expect("size");
    let viewer = Viewer::new();
    sink.take();

    // The first page reads from the start, a chunk or two: not the file.
    let first = page(&viewer, &sink, "big.csv", Format::Csv, 0, 50).await;
    assert_eq!(first.rows[49][0], "49");
    let (starts, pulled) = sink.take();
    assert_eq!(starts, [0]);
    assert!(pulled <= 128 * 1024, "{pulled} bytes for page 1 of {size}");

    // A first pass to the end reads everything once and records checkpoints.
    let past = page(&viewer, &sink, "big.csv", Format::Csv, LARGE_ROWS, 10).await;
    assert!(past.rows.is_empty() && !past.more);
    let (_, pulled) = sink.take();
    assert_eq!(pulled, size);

    // Now a late page starts at a checkpoint, after reading the header from byte 0.
    let late = page(&viewer, &sink, "big.csv", Format::Csv, 150_020, 20).await;
    assert_eq!(late.rows[0][0], "150020");
    assert_eq!(late.rows[19][1], "row 150039, \"q\"\nend");
    let (starts, pulled) = sink.take();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert!(starts.contains(&0), "the header: {starts:?}");
    let checkpoint = starts.iter().copied().max().unwrap_or(0);
    assert!(checkpoint > size / 2, "read from {checkpoint} of {size}");
    assert!(
        pulled <= 256 * 1024,
        "{pulled} bytes for one late page of {size}"
    );

    // Paging on reads from the same checkpoint or the next, never from the start.
    let mut first_row = 150_040;
    for _ in 0..5 {
        let next = page(&viewer, &sink, "big.csv", Format::Csv, first_row, 500).await;
        assert_eq!(next.rows[0][0], first_row.to_string());
        let (starts, pulled) = sink.take();
        assert!(starts.iter().any(|&start| start > size / 2), "{starts:?}");
        assert!(pulled <= 256 * 1024, "{pulled}");
        first_row += 500;
    }
}

#[cfg(feature = "parquet")]
#[tokio::test]
async fn a_page_of_a_large_parquet_file_reads_its_footer_and_its_rows_only() {
    let root = TempDir::new("view-large-parquet");
    let sink = CountingSink::new(FilesystemSink::new(root.path()));
    let (columns, rows) = large_rows();
    let options = WriterOptions {
        parquet_row_group_rows: 10_000,
        ..WriterOptions::default()
    };
    write_asset(
        &sink,
        "big.parquet",
        Format::Parquet,
        &columns,
        &rows,
        options,
    )
    .await;
    let size = sink.size("big.parquet").await.expect("size");
    sink.take();

    let late = page(
        &Viewer::new(),
        &sink,
        "big.parquet",
        Format::Parquet,
        150_020,
        20,
    )
    .await;
    assert_eq!(late.rows[0][0], "150020");
    assert_eq!(late.rows[19][1], "row 150039, \"q\"\nend");
    assert!(late.more);
    let (starts, pulled) = sink.take();
    assert!(starts.iter().all(|&start| start > 0), "{starts:?}");
    assert!(pulled < size / 4, "{pulled} bytes pulled of {size}");
}
