//! Where a spool's rows live in the object store: chunks of at most
//! [`CHUNK_ROWS`] rows or about [`CHUNK_BYTES`] bytes, one object each, one JSON
//! value a line.

use docket_export::sink::ObjectSink;

/// Rows a chunk holds at most.
pub(super) const CHUNK_ROWS: usize = 1000;

/// Bytes a chunk holds at most (it closes at the row that crosses this).
pub(super) const CHUNK_BYTES: usize = 1 << 20;

/// The object key of chunk `index` of spool `id`.
pub(super) fn chunk_key(id: &str, index: u32) -> String {
    format!("spools/{id}/{index:08}.jsonl")
}

/// Deletes the chunks of a spool whose row is gone (read to its end, or
/// expired). A chunk written after its row was taken (the writer still ran) is
/// left to the asset store's own cleanup of stray objects.
pub(super) async fn delete_chunks(sink: &dyn ObjectSink, id: &str, chunks: u32) {
    for index in 0..chunks {
        match sink.delete(&chunk_key(id, index)).await {
            Ok(()) | Err(docket_export::sink::SinkError::NotFound { .. }) => {}
            Err(error) => {
                tracing::warn!(%error, spool = id, "could not delete a spool's chunk");
            }
        }
    }
}
