//! One export, start to end: a Trino query's pages go through a [`RowWriter`] into an
//! [`Upload`], page by page, with row and byte caps, a timeout and cancellation. Only
//! a complete export is committed; any failure aborts the upload and cancels the
//! query, so no partial asset is ever visible.
//!
//! The pages are fetched and written at once: one half asks Trino for each page and
//! queues it (at most two wait), the other encodes each on a blocking thread
//! and uploads its bytes. The export runs at the pace of the slower half rather than of
//! both in turn, a page that takes longer to encode (one that closes a Parquet row
//! group) does not hold up the fetching, and an export holds four pages at most: those
//! waiting, the one being encoded and the one arriving.
//!
//! A format that writes its bytes only at the end (XLSX, see
//! [`Format::writes_at_finish`]) finishes on a blocking thread and hands its bytes
//! over a small bounded channel to the upload as they are made, so the file is never
//! whole in memory and the async runtime is not held while it is compressed.

use std::io::{self, Write};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::format::{ChunkBuffer, ColumnSpec, Format, FormatError, FormatReport, RowWriter};
use crate::sink::{SinkError, Upload};
use crate::trino::{QueryStream, TextPage, TrinoClient, TrinoError};

/// The caps an export runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExportLimits {
    /// The most rows it may write.
    pub max_rows: u64,
    /// The most bytes it may write.
    pub max_bytes: u64,
    /// How long it may run, query included.
    pub timeout: Duration,
}

/// What a finished export wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExportReport {
    /// Data rows written.
    pub rows: u64,
    /// Bytes of the committed object.
    pub bytes: u64,
    /// The result's columns.
    pub columns: Vec<ColumnSpec>,
    /// Trino's id for the query.
    pub query_id: String,
}

/// Why an export stopped. Whatever the reason, nothing was committed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Trino refused or failed the query.
    #[error(transparent)]
    Trino(#[from] TrinoError),
    /// The rows could not be encoded.
    #[error("could not write the {format} output: {source}")]
    Format {
        /// The format being written.
        format: Format,
        /// Why.
        #[source]
        source: FormatError,
    },
    /// The object store failed.
    #[error("could not store the export: {0}")]
    Sink(#[from] SinkError),
    /// The result has more rows than allowed.
    #[error(
        "the result has more than {limit} rows; narrow the query, add a LIMIT, or raise the export's limit"
    )]
    TooManyRows {
        /// The cap.
        limit: u64,
    },
    /// The output is larger than allowed.
    #[error(
        "the export is larger than {limit} bytes; narrow the query or choose a more compact format"
    )]
    TooLarge {
        /// The cap, in bytes.
        limit: u64,
    },
    /// The export ran longer than its timeout.
    #[error("the export did not finish within {} seconds", .after.as_secs())]
    Timeout {
        /// The timeout.
        after: Duration,
    },
    /// The export was cancelled.
    #[error("the export was cancelled")]
    Cancelled,
}

/// Runs `sql` on `client` and streams the result in `format` into `upload`,
/// reporting `(rows, bytes)` after every page. Commits the upload only when the
/// whole result was written; otherwise aborts it and cancels the query.
///
/// # Errors
/// [`ExportError`]; the upload is aborted and the Trino query cancelled first.
pub async fn export_query(
    client: &TrinoClient,
    sql: &str,
    format: Format,
    mut upload: Box<dyn Upload>,
    limits: ExportLimits,
    cancel: &CancellationToken,
    progress: &(dyn Fn(u64, u64) + Send + Sync),
) -> Result<ExportReport, ExportError> {
    let mut stream: Option<QueryStream> = None;
    let export_span = tracing::info_span!(
        "export",
        otel.name = "trino export",
        otel.kind = "internal",
        "docket.export.format" = format.as_str(),
        "docket.export.rows" = tracing::field::Empty,
        "docket.export.bytes" = tracing::field::Empty,
    );
    let run = write_all(
        client,
        sql,
        format,
        upload.as_mut(),
        limits,
        &mut stream,
        progress,
    );
    let run = run.instrument(export_span.clone());
    let outcome = tokio::select! {
        biased;
        () = cancel.cancelled() => Err(ExportError::Cancelled),
        result = tokio::time::timeout(limits.timeout, run) => match result {
            Ok(result) => result,
            Err(_) => Err(ExportError::Timeout { after: limits.timeout }),
        },
    };
    match outcome {
        Ok((rows, columns, query_id)) => {
            let bytes = upload
                .commit()
                .instrument(sink_span("sink commit", 0))
                .await?;
            export_span.record(
                "docket.export.rows",
                i64::try_from(rows).unwrap_or(i64::MAX),
            );
            export_span.record(
                "docket.export.bytes",
                i64::try_from(bytes).unwrap_or(i64::MAX),
            );
            Ok(ExportReport {
                rows,
                bytes,
                columns,
                query_id,
            })
        }
        Err(error) => {
            if let Some(stream) = stream.take().filter(|stream| !stream.is_finished()) {
                // Best effort: the query is already failing for another reason.
                if let Err(cancel_error) = stream.cancel().await {
                    tracing::debug!(error = %cancel_error, "could not cancel the Trino query");
                }
            }
            if let Err(abort_error) = upload.abort().await {
                tracing::warn!(error = %abort_error, "could not clean up an aborted export");
            }
            Err(error)
        }
    }
}

/// The span of one write of an export's bytes to its sink (or its commit).
pub(crate) fn sink_span(name: &'static str, bytes: usize) -> tracing::Span {
    tracing::info_span!(
        "sink",
        otel.name = name,
        otel.kind = "internal",
        "docket.sink.bytes" = i64::try_from(bytes).unwrap_or(i64::MAX),
    )
}

/// Pages fetched and waiting for the encoder: enough that Trino is asked for the next
/// pages while a page that ends a Parquet batch or row group takes longer to encode,
/// few enough that an export holds a handful of pages.
const PAGES_AHEAD: usize = 2;

/// Fetches the pages and writes them, the two at once (see the module's documentation);
/// returns the rows written, the columns and the query's id. Keeps the stream in `slot`
/// so the caller can cancel it.
async fn write_all(
    client: &TrinoClient,
    sql: &str,
    format: Format,
    upload: &mut dyn Upload,
    limits: ExportLimits,
    slot: &mut Option<QueryStream>,
    progress: &(dyn Fn(u64, u64) + Send + Sync),
) -> Result<(u64, Vec<ColumnSpec>, String), ExportError> {
    let format_error = |source| ExportError::Format { format, source };
    let stream = slot.insert(client.query(sql).await?);
    let buffer = ChunkBuffer::new();
    let (output, piped) = if format.writes_at_finish() {
        let (sender, receiver) = mpsc::channel(PIPE_CHUNKS);
        (Output::Pipe(Pipe::new(sender)), Some(receiver))
    } else {
        (Output::Buffer(buffer.clone()), None)
    };
    let writer = RowWriter::new(format, output).map_err(format_error)?;
    let (pages, fetched) = mpsc::channel(PAGES_AHEAD);
    let ((), (mut writer, columns)) = tokio::try_join!(
        fetch_pages(stream, limits, pages),
        write_pages(writer, fetched, &buffer, upload, limits, progress),
    )?;
    // A query without columns (none reported) still produces a valid, empty output.
    let columns = match columns {
        Some(columns) => columns,
        None => {
            writer.begin(&[]).map_err(format_error)?;
            Vec::new()
        }
    };
    let query_id = stream.query_id().to_owned();
    if let Some(receiver) = piped {
        let report = finish_piped(writer, receiver, upload, limits, progress).await?;
        return Ok((report.rows, columns, query_id));
    }
    let (report, _) = writer.finish().map_err(format_error)?;
    if report.bytes > limits.max_bytes {
        return Err(ExportError::TooLarge {
            limit: limits.max_bytes,
        });
    }
    upload_written(&buffer, upload).await?;
    progress(report.rows, upload.bytes_written());
    Ok((report.rows, columns, query_id))
}

/// Sends the query's pages to the writer, those with rows and the first with the
/// columns; refuses the page that would pass the row cap before it is written.
async fn fetch_pages(
    stream: &mut QueryStream,
    limits: ExportLimits,
    pages: mpsc::Sender<TextPage>,
) -> Result<(), ExportError> {
    let mut rows = 0_u64;
    let mut columns_sent = false;
    while let Some(page) = stream.next_text_page().await? {
        let first_columns = !columns_sent && page.columns.is_some();
        if page.rows.is_empty() && !first_columns {
            continue;
        }
        rows += page.rows.len() as u64;
        if rows > limits.max_rows {
            return Err(ExportError::TooManyRows {
                limit: limits.max_rows,
            });
        }
        columns_sent |= first_columns;
        if pages.send(page).await.is_err() {
            // The writer has stopped, and says why.
            break;
        }
    }
    Ok(())
}

/// Encodes each page on a blocking thread and hands its bytes to the upload; returns
/// the writer, to be finished, and the columns, once a page has named them.
async fn write_pages(
    mut writer: RowWriter<Output>,
    mut pages: mpsc::Receiver<TextPage>,
    buffer: &ChunkBuffer,
    upload: &mut dyn Upload,
    limits: ExportLimits,
    progress: &(dyn Fn(u64, u64) + Send + Sync),
) -> Result<(RowWriter<Output>, Option<Vec<ColumnSpec>>), ExportError> {
    let format = writer.format();
    let format_error = |source| ExportError::Format { format, source };
    let mut columns: Option<Vec<ColumnSpec>> = None;
    while let Some(page) = pages.recv().await {
        if columns.is_none()
            && let Some(page_columns) = &page.columns
        {
            let specs: Vec<ColumnSpec> = page_columns
                .iter()
                .map(|column| ColumnSpec::new(column.name.clone(), column.type_name.clone()))
                .collect();
            writer.begin(&specs).map_err(format_error)?;
            columns = Some(specs);
        }
        if page.rows.is_empty() {
            continue;
        }
        // The encoder runs on a blocking thread, not holding up the runtime; the writer
        // comes back with its outcome.
        let encoding = tokio::task::spawn_blocking(move || {
            let outcome = writer.write_text_rows(&page.rows);
            (writer, outcome)
        });
        let (returned, outcome) = encoding
            .await
            .map_err(|joined| format_error(FormatError::Io(io::Error::other(joined))))?;
        writer = returned;
        outcome.map_err(format_error)?;
        if writer.bytes_written() + writer.buffered_bytes() > limits.max_bytes {
            return Err(ExportError::TooLarge {
                limit: limits.max_bytes,
            });
        }
        upload_written(buffer, upload).await?;
        progress(writer.rows_written(), upload.bytes_written());
    }
    Ok((writer, columns))
}

/// Hands what the writer has written into `buffer` so far to the upload.
async fn upload_written(buffer: &ChunkBuffer, upload: &mut dyn Upload) -> Result<(), SinkError> {
    let chunk = buffer.take();
    if chunk.is_empty() {
        return Ok(());
    }
    let span = sink_span("sink write", chunk.len());
    upload.write(chunk).instrument(span).await
}

/// Chunks in flight between a blocking `finish` and the upload: with [`PIPE_CHUNK_BYTES`]
/// each, what a piped export holds in memory at most, besides the chunk being uploaded.
const PIPE_CHUNKS: usize = 2;

/// The size of one chunk sent through the pipe.
const PIPE_CHUNK_BYTES: usize = 1024 * 1024;

/// Finishes `writer` on a blocking thread and uploads its bytes as they come through
/// `receiver`, counting them against the byte cap as they pass. Returning early (a
/// cap, an upload error, or the caller dropping this future on cancel or timeout)
/// drops the receiver, which ends the blocking `finish` at its next write.
async fn finish_piped(
    writer: RowWriter<Output>,
    mut receiver: mpsc::Receiver<Bytes>,
    upload: &mut dyn Upload,
    limits: ExportLimits,
    progress: &(dyn Fn(u64, u64) + Send + Sync),
) -> Result<FormatReport, ExportError> {
    let format = writer.format();
    let format_error = |source| ExportError::Format { format, source };
    let rows = writer.rows_written();
    let finishing = tokio::task::spawn_blocking(move || {
        // The output holds the channel's sender: drop it as soon as the last chunk is
        // flushed, so the receiving loop below sees the end.
        writer.finish().map(|(report, _output)| report)
    });
    while let Some(chunk) = receiver.recv().await {
        if upload.bytes_written() + chunk.len() as u64 > limits.max_bytes {
            return Err(ExportError::TooLarge {
                limit: limits.max_bytes,
            });
        }
        let span = sink_span("sink write", chunk.len());
        upload.write(chunk).instrument(span).await?;
        progress(rows, upload.bytes_written());
    }
    finishing
        .await
        .map_err(|joined| format_error(FormatError::Io(io::Error::other(joined))))?
        .map_err(format_error)
}

/// Where a writer's bytes go: the chunk buffer the page loop drains after every page,
/// or, for a format that writes at finish, the pipe to the upload.
enum Output {
    Buffer(ChunkBuffer),
    Pipe(Pipe),
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::Buffer(buffer) => buffer.write(buf),
            Output::Pipe(pipe) => pipe.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::Buffer(buffer) => buffer.flush(),
            Output::Pipe(pipe) => pipe.flush(),
        }
    }
}

/// A blocking writer into a bounded channel, in chunks of [`PIPE_CHUNK_BYTES`]. Only
/// for a writer running on a blocking thread: sending blocks until the upload has
/// room, which is the back-pressure that bounds memory.
struct Pipe {
    sender: mpsc::Sender<Bytes>,
    pending: BytesMut,
}

impl Pipe {
    fn new(sender: mpsc::Sender<Bytes>) -> Self {
        Self {
            sender,
            pending: BytesMut::new(),
        }
    }

    fn send_pending(&mut self) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let chunk = self.pending.split().freeze();
        self.sender.blocking_send(chunk).map_err(|_| {
            io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the export stopped before its file was written",
            )
        })
    }
}

impl Write for Pipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        if self.pending.len() >= PIPE_CHUNK_BYTES {
            self.send_pending()?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send_pending()
    }
}
