//! One export, start to end: a Trino query's pages go through a [`RowWriter`] into an
//! [`Upload`], page by page, with row and byte caps, a timeout and cancellation. Only
//! a complete export is committed; any failure aborts the upload and cancels the
//! query, so no partial asset is ever visible.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use crate::format::{ChunkBuffer, ColumnSpec, Format, FormatError, RowWriter};
use crate::sink::{SinkError, Upload};
use crate::trino::{QueryStream, TrinoClient, TrinoError};

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

/// The page loop. Keeps the stream in `slot` so the caller can cancel it.
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
    let mut writer = RowWriter::new(format, buffer.clone()).map_err(format_error)?;
    let mut columns: Option<Vec<ColumnSpec>> = None;
    while let Some(page) = stream.next_page().await? {
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
        if writer.rows_written() + page.rows.len() as u64 > limits.max_rows {
            return Err(ExportError::TooManyRows {
                limit: limits.max_rows,
            });
        }
        writer.write_rows(&page.rows).map_err(format_error)?;
        if writer.bytes_written() + writer.buffered_bytes() > limits.max_bytes {
            return Err(ExportError::TooLarge {
                limit: limits.max_bytes,
            });
        }
        let chunk = buffer.take();
        if !chunk.is_empty() {
            let span = sink_span("sink write", chunk.len());
            upload.write(chunk).instrument(span).await?;
        }
        progress(writer.rows_written(), upload.bytes_written());
    }
    // A query without columns (none reported) still produces a valid, empty output.
    let columns = match columns {
        Some(columns) => columns,
        None => {
            writer.begin(&[]).map_err(format_error)?;
            Vec::new()
        }
    };
    let query_id = stream.query_id().to_owned();
    let (report, _) = writer.finish().map_err(format_error)?;
    if report.bytes > limits.max_bytes {
        return Err(ExportError::TooLarge {
            limit: limits.max_bytes,
        });
    }
    let chunk = buffer.take();
    if !chunk.is_empty() {
        let span = sink_span("sink write", chunk.len());
        upload.write(chunk).instrument(span).await?;
    }
    progress(report.rows, upload.bytes_written());
    Ok((report.rows, columns, query_id))
}
