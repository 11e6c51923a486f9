//! Filling a spool: rows in chunks of at most [`CHUNK_ROWS`] rows or about
//! [`CHUNK_BYTES`] bytes, each chunk one object, and the spool's row updated after
//! each chunk (and every few seconds besides, so readers can tell a spool being
//! written from one whose replica went away).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use docket_catalog::{SpoolProgress, SpoolState, SpoolStore};
use docket_export::sink::ObjectSink;
use serde_json::Value;
use time::OffsetDateTime;

use super::chunks::{CHUNK_BYTES, CHUNK_ROWS, chunk_key};

/// How often a filling spool's row is stamped while no chunk is written.
pub(super) const BEAT: Duration = Duration::from_secs(5);

/// The rest of a result: what a spool is filled from.
#[async_trait]
pub(crate) trait RowSource: Send {
    /// The next rows (each a JSON array), `None` at the end.
    ///
    /// # Errors
    /// Why the rest cannot be read, in words for the caller.
    async fn next_rows(&mut self) -> Result<Option<Vec<Value>>, String>;

    /// Stops the source before its end (the spool is full, or was not made).
    async fn stop(self: Box<Self>);
}

/// A Trino query's remaining pages.
#[async_trait]
impl RowSource for docket_export::trino::QueryStream {
    async fn next_rows(&mut self) -> Result<Option<Vec<Value>>, String> {
        match self.next_page().await {
            Ok(Some(page)) => Ok(Some(page.rows.into_iter().map(Value::Array).collect())),
            Ok(None) => Ok(None),
            Err(error) => Err(error.to_string()),
        }
    }

    async fn stop(self: Box<Self>) {
        if let Err(error) = self.cancel().await {
            tracing::warn!(%error, "could not cancel the query a spool stopped reading");
        }
    }
}

/// Writes one spool.
pub(super) struct SpoolWriter {
    pub(super) store: Arc<dyn SpoolStore>,
    pub(super) sink: Arc<dyn ObjectSink>,
    pub(super) id: String,
    /// The export limits: past them the spool ends `cut`.
    pub(super) max_rows: u64,
    pub(super) max_bytes: u64,
    /// How long it may read.
    pub(super) deadline: Duration,
}

/// The chunk being gathered.
#[derive(Default)]
struct Chunk {
    text: String,
    rows: usize,
}

impl SpoolWriter {
    /// Fills the spool from `first`, then from `source`, to the source's end or
    /// the limits, and records how it ended.
    pub(super) async fn fill(self, first: Vec<Value>, mut source: Box<dyn RowSource>) {
        let mut progress = SpoolProgress {
            chunks: 0,
            rows: 0,
            bytes: 0,
            state: SpoolState::Filling,
            error: None,
            updated_at: OffsetDateTime::now_utc(),
        };
        let mut chunk = Chunk::default();
        let deadline = tokio::time::Instant::now() + self.deadline;
        let mut beat = tokio::time::interval(BEAT);
        beat.tick().await;
        let mut pending = Some(first);
        let ended = 'fill: loop {
            let rows = match pending.take() {
                Some(rows) => rows,
                None => {
                    let next = source.next_rows();
                    tokio::pin!(next);
                    let read = loop {
                        tokio::select! {
                            read = &mut next => break read,
                            _ = beat.tick() => {
                                progress.updated_at = OffsetDateTime::now_utc();
                                self.record(&progress).await;
                            }
                            () = tokio::time::sleep_until(deadline) => break 'fill Ok(SpoolState::Cut),
                        }
                    };
                    match read {
                        Ok(Some(rows)) => rows,
                        Ok(None) => break Ok(SpoolState::Complete),
                        Err(error) => break Err(error),
                    }
                }
            };
            for row in rows {
                let line = row.to_string();
                let size = u64::try_from(line.len()).unwrap_or(u64::MAX) + 1;
                let rows_held = progress.rows + u64::try_from(chunk.rows).unwrap_or(u64::MAX);
                let bytes_held =
                    progress.bytes + u64::try_from(chunk.text.len()).unwrap_or(u64::MAX);
                if rows_held >= self.max_rows || bytes_held + size > self.max_bytes {
                    break 'fill Ok(SpoolState::Cut);
                }
                chunk.text.push_str(&line);
                chunk.text.push('\n');
                chunk.rows += 1;
                if (chunk.rows >= CHUNK_ROWS || chunk.text.len() >= CHUNK_BYTES)
                    && let Err(error) = self.flush(&mut chunk, &mut progress).await
                {
                    break 'fill Err(error);
                }
            }
        };
        let ended = match ended {
            Ok(state) => match self.flush(&mut chunk, &mut progress).await {
                Ok(()) => Ok(state),
                Err(error) => Err(error),
            },
            Err(error) => Err(error),
        };
        match ended {
            Ok(SpoolState::Complete) => progress.state = SpoolState::Complete,
            Ok(state) => {
                progress.state = state;
                source.stop().await;
            }
            Err(error) => {
                progress.state = SpoolState::Failed;
                progress.error = Some(bounded(&error));
                source.stop().await;
            }
        }
        progress.updated_at = OffsetDateTime::now_utc();
        // The ending is what readers wait for: tried a few times through a short
        // outage of the store (a reader treats a spool left filling as stale).
        for attempt in 0..5u32 {
            match self.store.record_spool_progress(&self.id, &progress).await {
                Ok(_) => return,
                Err(error) if attempt == 4 => {
                    tracing::warn!(%error, spool = self.id, "could not record how a spool ended");
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(200 << attempt)).await,
            }
        }
    }

    /// Writes the gathered chunk (if it holds rows) and records the progress.
    async fn flush(&self, chunk: &mut Chunk, progress: &mut SpoolProgress) -> Result<(), String> {
        if chunk.rows == 0 {
            return Ok(());
        }
        let taken = std::mem::take(chunk);
        let key = chunk_key(&self.id, progress.chunks);
        let mut upload = self
            .sink
            .begin(&key)
            .await
            .map_err(|error| format!("the rest could not be stored: {error}"))?;
        let size = u64::try_from(taken.text.len()).unwrap_or(u64::MAX);
        if let Err(error) = upload.write(Bytes::from(taken.text)).await {
            let _ = upload.abort().await;
            return Err(format!("the rest could not be stored: {error}"));
        }
        upload
            .commit()
            .await
            .map_err(|error| format!("the rest could not be stored: {error}"))?;
        progress.chunks += 1;
        progress.rows += u64::try_from(taken.rows).unwrap_or(u64::MAX);
        progress.bytes += size;
        progress.updated_at = OffsetDateTime::now_utc();
        self.record(progress).await;
        Ok(())
    }

    /// Records progress; a failure only delays readers (the next record says it).
    async fn record(&self, progress: &SpoolProgress) {
        if let Err(error) = self.store.record_spool_progress(&self.id, progress).await {
            tracing::warn!(%error, spool = self.id, "could not record a spool's progress");
        }
    }
}

/// `message` cut to what a spool keeps of an error.
fn bounded(message: &str) -> String {
    let max = docket_catalog::spools::MAX_SPOOL_ERROR_BYTES;
    if message.len() <= max {
        return message.to_owned();
    }
    let mut end = max - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &message[..end])
}
