//! An object's bytes cut into records as they stream in: a [`Framer`] says where each
//! record ends (a CSV record, a line, a JSON array's element), and a
//! [`RecordReader`] feeds it chunks, keeping only the record in progress, so a page
//! costs memory for its own rows and never for the object.

use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::stream::BoxStream;

use super::error::ViewError;
use super::limits::MAX_RECORD_BYTES;
use crate::sink::SinkError;

/// What a [`Framer`] found at the start of the bytes not yet consumed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framed {
    /// Bytes between records (a blank line, JSON punctuation) to pass over.
    Skip(usize),
    /// A record: the first `length` bytes; `consumed` bytes (the record and its
    /// terminator) are passed over.
    Record {
        /// The record's length in bytes.
        length: usize,
        /// How far the next record may start.
        consumed: usize,
    },
    /// The record in progress goes on past the bytes given.
    NeedMore,
    /// No record is left.
    End,
}

/// Finds where records end. A framer may keep how far it has looked into the record
/// in progress between calls that answer [`Framed::NeedMore`], since the next call
/// gets the same bytes with more after them.
pub(super) trait Framer {
    /// Looks at `input`, the bytes not yet consumed; `at_end` says the object has no
    /// more. Never answers [`Framed::NeedMore`] when `at_end`, nor `Skip(0)`.
    ///
    /// # Errors
    ///
    /// [`ViewError::Malformed`] for bytes the format does not allow there.
    fn frame(&mut self, input: &[u8], at_end: bool) -> Result<Framed, ViewError>;
}

/// A record and where in the object it starts.
#[derive(Debug)]
pub(super) struct Record<'a> {
    /// The object offset of the record's first byte.
    pub(super) offset: u64,
    /// The record's bytes, without its terminator.
    pub(super) bytes: &'a [u8],
}

/// Cuts a stream of an object's chunks, starting at a record boundary, into records.
pub(super) struct RecordReader<F> {
    chunks: BoxStream<'static, Result<Bytes, SinkError>>,
    /// The bytes read and not yet dropped; `buffer[consumed..]` is not yet framed.
    buffer: Vec<u8>,
    consumed: usize,
    /// The object offset of `buffer[0]`.
    buffer_offset: u64,
    ended: bool,
    framer: F,
}

impl<F: Framer> RecordReader<F> {
    /// A reader of `chunks`, whose first byte is the object's byte `offset`.
    pub(super) fn new(
        chunks: BoxStream<'static, Result<Bytes, SinkError>>,
        offset: u64,
        framer: F,
    ) -> Self {
        Self {
            chunks,
            buffer: Vec::new(),
            consumed: 0,
            buffer_offset: offset,
            ended: false,
            framer,
        }
    }

    /// The next record, or `None` at the end of the object.
    ///
    /// # Errors
    ///
    /// [`ViewError::TooLarge`] for a record over [`MAX_RECORD_BYTES`];
    /// [`ViewError::Malformed`] from the framer; [`ViewError::Sink`] when reading fails.
    pub(super) async fn next(&mut self) -> Result<Option<Record<'_>>, ViewError> {
        loop {
            let pending = self.buffer.len() - self.consumed;
            match self
                .framer
                .frame(&self.buffer[self.consumed..], self.ended)?
            {
                Framed::Skip(count) => self.consumed += count.min(pending),
                Framed::Record { length, .. } if length > MAX_RECORD_BYTES => {
                    return Err(too_large());
                }
                Framed::Record { length, consumed } => {
                    let start = self.consumed;
                    self.consumed += consumed;
                    return Ok(Some(Record {
                        offset: self.buffer_offset + start as u64,
                        bytes: &self.buffer[start..start + length],
                    }));
                }
                Framed::End => return Ok(None),
                Framed::NeedMore if self.ended => {
                    return Err(ViewError::malformed("the asset ends inside a row"));
                }
                Framed::NeedMore if pending > MAX_RECORD_BYTES => return Err(too_large()),
                Framed::NeedMore => self.read_chunk().await?,
            }
        }
    }

    /// Drops the framed bytes and appends the next chunk, or notes the end.
    async fn read_chunk(&mut self) -> Result<(), ViewError> {
        if self.consumed > 0 {
            self.buffer.drain(..self.consumed);
            self.buffer_offset += self.consumed as u64;
            self.consumed = 0;
        }
        match self.chunks.next().await {
            Some(chunk) => self.buffer.extend_from_slice(&chunk?),
            None => self.ended = true,
        }
        Ok(())
    }
}

fn too_large() -> ViewError {
    ViewError::TooLarge {
        what: "a row",
        limit_bytes: MAX_RECORD_BYTES as u64,
    }
}
