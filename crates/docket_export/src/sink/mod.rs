//! Where asset bytes go: an [`ObjectSink`] takes an object chunk by chunk and makes it
//! visible only on [`Upload::commit`], so an export that fails, hits a cap or is
//! cancelled leaves nothing behind.
//!
//! Two implementations: [`FilesystemSink`] (the default, under
//! `./docket-data/assets`: a temporary file renamed into place) and [`S3Sink`] (any
//! S3-compatible server through `object_store`: one `PUT` for small objects, a
//! multipart upload completed only on commit for large ones).
//!
//! Keys are relative, `/`-separated paths chosen by Docket (for example
//! `alice/9f…e2/content.csv`); both sinks refuse keys that could escape their root or
//! that name a hidden file (see [`validate_key`]).

mod filesystem;
mod s3;

use std::fmt;

use async_trait::async_trait;
use bytes::Bytes;
use futures_util::stream::BoxStream;

pub use self::filesystem::FilesystemSink;
pub use self::s3::{S3Config, S3Sink};

/// The longest key accepted, in bytes (S3's own limit).
pub const MAX_KEY_BYTES: usize = 1024;

/// A store of whole objects, written atomically.
#[async_trait]
pub trait ObjectSink: Send + Sync + fmt::Debug {
    /// Starts writing the object `key`. Nothing is visible at `key` until the upload is
    /// committed; an existing object there stays readable until then and is replaced by
    /// the commit.
    ///
    /// # Errors
    ///
    /// [`SinkError::InvalidKey`] for a key that could escape the store; an I/O or store
    /// error if the upload cannot be started.
    async fn begin(&self, key: &str) -> Result<Box<dyn Upload>, SinkError>;

    /// Opens a committed object for reading, as a stream of chunks.
    ///
    /// # Errors
    ///
    /// [`SinkError::NotFound`] when there is no object at `key`;
    /// [`SinkError::InvalidKey`], or an I/O or store error.
    async fn open(&self, key: &str) -> Result<ObjectContent, SinkError>;

    /// Opens a committed object for reading from byte `start` to its end, so a reader
    /// that knows where it wants to be (a row viewer at a checkpoint, a Parquet reader
    /// at a column chunk) does not read what comes before. The content's
    /// [`size`](ObjectContent::size) is what the stream yields: the object's size less
    /// `start`, and 0 (an empty stream) when `start` is at or past the end.
    ///
    /// # Errors
    ///
    /// [`SinkError::NotFound`] when there is no object at `key`;
    /// [`SinkError::InvalidKey`], or an I/O or store error.
    async fn open_at(&self, key: &str, start: u64) -> Result<ObjectContent, SinkError>;

    /// Deletes the object at `key`. Deleting an object that does not exist succeeds, so
    /// retention sweeps can be retried.
    ///
    /// # Errors
    ///
    /// [`SinkError::InvalidKey`], or an I/O or store error.
    async fn delete(&self, key: &str) -> Result<(), SinkError>;

    /// The size in bytes of the committed object at `key`.
    ///
    /// # Errors
    ///
    /// [`SinkError::NotFound`] when there is no object at `key`;
    /// [`SinkError::InvalidKey`], or an I/O or store error.
    async fn size(&self, key: &str) -> Result<u64, SinkError>;
}

/// One object being written. Dropping it without [`commit`](Upload::commit) has the
/// effect of [`abort`](Upload::abort): nothing becomes visible (the S3 sink aborts the
/// multipart upload in the background).
#[async_trait]
pub trait Upload: Send + fmt::Debug {
    /// Appends a chunk to the object.
    ///
    /// # Errors
    ///
    /// An I/O or store error. The upload is then spoiled: a later `commit` fails with
    /// [`SinkError::FailedEarlier`], and it should be aborted.
    async fn write(&mut self, chunk: Bytes) -> Result<(), SinkError>;

    /// Bytes accepted by [`write`](Upload::write) so far.
    fn bytes_written(&self) -> u64;

    /// Makes the object visible at its key, whole, and returns its size.
    ///
    /// # Errors
    ///
    /// An I/O or store error; nothing is visible at the key then.
    async fn commit(self: Box<Self>) -> Result<u64, SinkError>;

    /// Discards everything written; nothing becomes visible.
    ///
    /// # Errors
    ///
    /// An I/O or store error while cleaning up; nothing is visible at the key even then,
    /// though a temporary file or incomplete multipart upload may be left over.
    async fn abort(self: Box<Self>) -> Result<(), SinkError>;
}

/// A committed object opened for reading.
pub struct ObjectContent {
    size: u64,
    stream: BoxStream<'static, Result<Bytes, SinkError>>,
}

impl ObjectContent {
    /// Wraps a size and a stream of chunks.
    #[must_use]
    pub fn new(size: u64, stream: BoxStream<'static, Result<Bytes, SinkError>>) -> Self {
        Self { size, stream }
    }

    /// The size in bytes of what the stream yields (for `Content-Length`): the whole
    /// object's from [`ObjectSink::open`], the rest of it from [`ObjectSink::open_at`].
    #[must_use]
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The object's bytes, chunk by chunk.
    #[must_use]
    pub fn into_stream(self) -> BoxStream<'static, Result<Bytes, SinkError>> {
        self.stream
    }
}

impl fmt::Debug for ObjectContent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectContent")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// Why a sink operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SinkError {
    /// The key could escape the store's root or is otherwise unusable.
    #[error("invalid object key {key:?}: {reason}")]
    InvalidKey {
        /// The key as given.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No object exists at the key.
    #[error("no object at key {key:?}")]
    NotFound {
        /// The key.
        key: String,
    },
    /// The upload was already committed or aborted.
    #[error("the upload of {key:?} is already finished")]
    Finished {
        /// The key.
        key: String,
    },
    /// An earlier write of the upload failed, so committing it could store a partial
    /// object; it can only be aborted.
    #[error("an earlier write of {key:?} failed; the upload can only be aborted")]
    FailedEarlier {
        /// The key.
        key: String,
    },
    /// The sink's configuration is unusable.
    #[error("invalid object storage configuration: {reason}")]
    Config {
        /// What is wrong.
        reason: String,
    },
    /// A filesystem operation failed.
    #[error("could not {operation} the object {key:?} on the filesystem")]
    Io {
        /// What was being done, such as `write` or `commit`.
        operation: &'static str,
        /// The key.
        key: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The object store (S3) failed.
    #[error("could not {operation} the object {key:?} in object storage")]
    Store {
        /// What was being done, such as `write` or `commit`.
        operation: &'static str,
        /// The key.
        key: String,
        /// The cause.
        #[source]
        source: object_store::Error,
    },
}

/// Checks that `key` is a relative, `/`-separated path that stays inside a sink's root.
///
/// Refused: the empty key; keys longer than [`MAX_KEY_BYTES`]; absolute keys; empty
/// segments (`a//b`, a trailing `/`); `.` and `..`; segments starting with `.` (the
/// filesystem sink's temporary files start so); backslashes (a path separator on
/// Windows); NUL and other control characters.
///
/// # Errors
///
/// [`SinkError::InvalidKey`] saying what is wrong.
pub fn validate_key(key: &str) -> Result<(), SinkError> {
    let refuse = |reason| {
        Err(SinkError::InvalidKey {
            key: key.to_owned(),
            reason,
        })
    };
    if key.is_empty() {
        return refuse("it is empty");
    }
    if key.len() > MAX_KEY_BYTES {
        return refuse("it is longer than 1024 bytes");
    }
    if key.contains('\0') {
        return refuse("it contains a NUL character");
    }
    if key.chars().any(char::is_control) {
        return refuse("it contains a control character");
    }
    if key.contains('\\') {
        return refuse("it contains a backslash");
    }
    if key.starts_with('/') {
        return refuse("it is absolute");
    }
    for segment in key.split('/') {
        match segment {
            "" => return refuse("it has an empty path segment"),
            "." | ".." => return refuse("it has a `.` or `..` segment"),
            hidden if hidden.starts_with('.') => {
                return refuse("a path segment starts with `.`");
            }
            _ => {}
        }
    }
    Ok(())
}
