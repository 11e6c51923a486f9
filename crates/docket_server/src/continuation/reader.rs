//! Reading a page of a spool where a cursor points, on any replica.

use std::time::Duration;

use docket_catalog::{Spool, SpoolState};
use futures_util::StreamExt as _;
use serde_json::Value;
use time::OffsetDateTime;

use docket_catalog::SpoolStore;
use docket_export::sink::ObjectSink;

use super::chunks::{chunk_key, delete_chunks};
use super::cursor::Cursor;

/// The spools a read reaches.
pub(super) struct Spools<'a> {
    pub(super) store: &'a dyn SpoolStore,
    pub(super) sink: &'a dyn ObjectSink,
    /// A filling spool not written for this long lost its replica.
    pub(super) stale_after: Duration,
}

/// How long a read waits for rows a spool is still being filled with before it
/// answers with what it has (possibly nothing) and the same cursor.
const WAIT_FOR_ROWS: Duration = Duration::from_secs(5);

/// How often a waiting read looks at the spool's row again.
const POLL: Duration = Duration::from_millis(100);

/// The most bytes of one chunk a read takes in (a chunk closes near 1 MiB, past it
/// only by its last row).
const MAX_CHUNK_READ: usize = 64 << 20;

/// A page read from a spool.
#[derive(Debug)]
pub(crate) struct Page {
    /// The connection the query ran on.
    pub connection: String,
    /// The result's columns.
    pub columns: Value,
    /// The upstream's id of the query, when it gave one.
    pub source_id: Option<String>,
    /// The rows.
    pub rows: Vec<Value>,
    /// Where the next page starts, while more may follow.
    pub next: Option<Cursor>,
    /// Rows and bytes left after this page, when the spool is whole.
    pub remaining: Option<(u64, u64)>,
    /// One sentence about what follows, when there is something to say.
    pub note: Option<String>,
}

/// Why a page could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PageError {
    /// Not a cursor, another caller's or tool's, expired, or read to its end.
    #[error("this cursor is unknown or has expired; run the query again")]
    Unknown,
    /// A cursor past the end of its spool.
    #[error("this cursor points past the end of its result")]
    PastEnd,
    /// The next row alone is larger than the byte budget.
    #[error(
        "the next row alone is {0} bytes, more than max_result_bytes allows; raise \
         max_result_bytes or export the result with trino_export"
    )]
    RowTooLarge(u64),
    /// The store or the asset store could not be read.
    #[error("the rest of the result cannot be read now: {0}")]
    Unavailable(String),
}

pub(super) async fn read(
    continuation: &Spools<'_>,
    owner: &str,
    tool: &str,
    cursor: &str,
    max_rows: usize,
    max_bytes: u64,
) -> Result<Page, PageError> {
    let cursor = Cursor::decode(cursor).ok_or(PageError::Unknown)?;
    let mut spool = find(continuation, &cursor.spool).await?;
    if spool.owner != owner || spool.tool != tool {
        // The same answer as for a spool that does not exist.
        return Err(PageError::Unknown);
    }
    let waiting_until = tokio::time::Instant::now() + WAIT_FOR_ROWS;
    while cursor.chunk >= spool.progress.chunks
        && filling(continuation, &spool)
        && tokio::time::Instant::now() < waiting_until
    {
        tokio::time::sleep(POLL).await;
        spool = find(continuation, &cursor.spool).await?;
    }
    let stale = spool.progress.state == SpoolState::Filling && !filling(continuation, &spool);
    if cursor.chunk > spool.progress.chunks && !filling(continuation, &spool) {
        return Err(PageError::PastEnd);
    }

    let mut at = cursor.clone();
    let mut rows = Vec::new();
    let mut bytes = 0u64;
    'chunks: while rows.len() < max_rows && at.chunk < spool.progress.chunks {
        let lines = read_chunk(continuation, &spool.id, at.chunk).await?;
        let start = usize::try_from(at.line).unwrap_or(usize::MAX);
        if start > lines.len() {
            return Err(PageError::PastEnd);
        }
        for line in &lines[start..] {
            if rows.len() >= max_rows {
                break 'chunks;
            }
            let size = u64::try_from(line.len()).unwrap_or(u64::MAX) + 1;
            if bytes + size > max_bytes {
                if rows.is_empty() {
                    return Err(PageError::RowTooLarge(size));
                }
                break 'chunks;
            }
            let row: Value = serde_json::from_str(line).map_err(|error| {
                PageError::Unavailable(format!("a stored row does not read back: {error}"))
            })?;
            rows.push(row);
            bytes += size;
            at.line += 1;
            at.rows_read += 1;
            at.bytes_read += size;
        }
        if usize::try_from(at.line).unwrap_or(usize::MAX) >= lines.len() {
            at.chunk += 1;
            at.line = 0;
        }
    }

    let at_end = at.chunk >= spool.progress.chunks;
    let progress = &spool.progress;
    let whole = progress.state == SpoolState::Complete;
    let remaining = whole.then(|| {
        (
            progress.rows.saturating_sub(at.rows_read),
            progress.bytes.saturating_sub(at.bytes_read),
        )
    });
    let (next, note) = match (at_end, progress.state) {
        (true, SpoolState::Complete) => {
            // Read to its end: nobody needs it any more.
            if let Ok(Some(gone)) = continuation.store.delete_spool(&spool.id).await {
                delete_chunks(continuation.sink, &gone.id, gone.progress.chunks).await;
            }
            (None, None)
        }
        (true, SpoolState::Cut) => (
            None,
            Some(format!(
                "the rest of the result was not kept past the export limits ({} rows, {} bytes \
                 after the first page); run trino_export for the whole result",
                progress.rows, progress.bytes
            )),
        ),
        (true, SpoolState::Failed) => (
            None,
            Some(format!(
                "reading the rest of the result failed: {}",
                progress
                    .error
                    .as_deref()
                    .unwrap_or("for a reason not recorded")
            )),
        ),
        (true, _) if stale => (
            None,
            Some(
                "the replica reading the rest of the result went away before it finished; run \
                 the query again"
                    .to_owned(),
            ),
        ),
        (true, _) => (
            Some(at),
            Some("more rows are still being read; call again with the cursor".to_owned()),
        ),
        (false, _) => {
            let note = remaining.and_then(|(rows_left, bytes_left)| {
                let pages_left = rows_left / u64::try_from(max_rows.max(1)).unwrap_or(1);
                (pages_left > 10 || bytes_left > max_bytes.saturating_mul(10)).then(|| {
                    format!(
                        "{rows_left} rows ({bytes_left} bytes) remain: for all of them run \
                         trino_export, or aggregate in SQL"
                    )
                })
            });
            (Some(at), note)
        }
    };
    Ok(Page {
        connection: spool.connection,
        columns: spool.columns,
        source_id: spool.source_id,
        rows,
        next,
        remaining,
        note,
    })
}

/// The spool `id`, or the one answer for every cursor that reaches nothing.
async fn find(continuation: &Spools<'_>, id: &str) -> Result<Spool, PageError> {
    continuation
        .store
        .spool(id, OffsetDateTime::now_utc())
        .await
        .map_err(|error| PageError::Unavailable(error.to_string()))?
        .ok_or(PageError::Unknown)
}

/// Whether the spool is still being filled by a replica that is there.
fn filling(continuation: &Spools<'_>, spool: &Spool) -> bool {
    spool.progress.state == SpoolState::Filling
        && OffsetDateTime::now_utc() - spool.progress.updated_at < continuation.stale_after
}

/// The lines of chunk `index` of spool `id`.
async fn read_chunk(
    continuation: &Spools<'_>,
    id: &str,
    index: u32,
) -> Result<Vec<String>, PageError> {
    let unavailable = |error: &dyn std::fmt::Display| PageError::Unavailable(error.to_string());
    let content = continuation
        .sink
        .open(&chunk_key(id, index))
        .await
        .map_err(|error| unavailable(&error))?;
    let mut stream = content.into_stream();
    let mut bytes = Vec::new();
    while let Some(part) = stream.next().await {
        let part = part.map_err(|error| unavailable(&error))?;
        if bytes.len() + part.len() > MAX_CHUNK_READ {
            return Err(PageError::Unavailable(
                "a stored chunk is too large".to_owned(),
            ));
        }
        bytes.extend_from_slice(&part);
    }
    let text = String::from_utf8(bytes).map_err(|error| unavailable(&error))?;
    Ok(text.lines().map(str::to_owned).collect())
}
