//! The filesystem sink: each object is a file under a root folder, written to a
//! temporary file beside it and renamed into place on commit, which is atomic on one
//! filesystem, so a reader sees either nothing or the whole object.

use std::io::SeekFrom;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt as _;
use futures_util::stream;
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _, AsyncWriteExt as _};

use super::{ObjectContent, ObjectSink, SinkError, Upload, validate_key};

/// How much one read of an object returns at most.
const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Objects as files under a root folder.
#[derive(Debug, Clone)]
pub struct FilesystemSink {
    root: PathBuf,
}

impl FilesystemSink {
    /// The root used when the configuration names none.
    pub const DEFAULT_ROOT: &'static str = "./docket-data/assets";

    /// A sink storing objects under `root`; folders are created as objects need them.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The root folder.
    #[must_use]
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Removes the temporary files (`.<name>.<random>.part`) of uploads that never
    /// finished — a process killed mid-export leaves them — when they were last
    /// written more than `older_than` ago, so uploads still running (on this or
    /// another replica sharing the folder) are left alone. Returns how many were
    /// removed; a missing root is nothing to clean.
    ///
    /// # Errors
    /// When the folder cannot be read.
    pub async fn remove_stale_parts(&self, older_than: Duration) -> std::io::Result<usize> {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || remove_stale_parts_under(&root, older_than))
            .await
            .map_err(std::io::Error::other)?
    }

    /// The file of a key, after checking the key stays under the root.
    fn path_of(&self, key: &str) -> Result<PathBuf, SinkError> {
        validate_key(key)?;
        Ok(self.root.join(key))
    }
}

impl Default for FilesystemSink {
    fn default() -> Self {
        Self::new(Self::DEFAULT_ROOT)
    }
}

/// The walk behind [`FilesystemSink::remove_stale_parts`].
fn remove_stale_parts_under(root: &Path, older_than: Duration) -> std::io::Result<usize> {
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    let mut folders = vec![root.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let entries = match std::fs::read_dir(&folder) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(error),
        };
        for entry in entries {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                folders.push(entry.path());
                continue;
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if !kind.is_file() || !name.starts_with('.') || !name.ends_with(".part") {
                continue;
            }
            let age = entry
                .metadata()?
                .modified()
                .ok()
                .and_then(|modified| now.duration_since(modified).ok())
                .unwrap_or_default();
            if age > older_than {
                match std::fs::remove_file(entry.path()) {
                    Ok(()) => removed += 1,
                    // Finished (renamed) or removed by another replica meanwhile.
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => return Err(error),
                }
            }
        }
    }
    Ok(removed)
}

fn io_error(operation: &'static str, key: &str) -> impl FnOnce(std::io::Error) -> SinkError {
    let key = key.to_owned();
    move |source| {
        if source.kind() == std::io::ErrorKind::NotFound && operation == "read" {
            SinkError::NotFound { key }
        } else {
            SinkError::Io {
                operation,
                key,
                source,
            }
        }
    }
}

#[async_trait]
impl ObjectSink for FilesystemSink {
    async fn begin(&self, key: &str) -> Result<Box<dyn Upload>, SinkError> {
        let destination = self.path_of(key)?;
        let (Some(folder), Some(file_name)) = (destination.parent(), destination.file_name())
        else {
            return Err(SinkError::InvalidKey {
                key: key.to_owned(),
                reason: "it names no file",
            });
        };
        tokio::fs::create_dir_all(folder)
            .await
            .map_err(io_error("write", key))?;
        // Beside the destination, so the rename stays on one filesystem; the leading
        // `.` keeps it out of the key space (keys may not have such segments) and the
        // random part keeps concurrent uploads of one key apart.
        let mut random = [0_u8; 8];
        getrandom::fill(&mut random).map_err(|error| SinkError::Io {
            operation: "write",
            key: key.to_owned(),
            source: std::io::Error::other(error),
        })?;
        let temporary = folder.join(format!(
            ".{}.{}.part",
            file_name.to_string_lossy(),
            hex::encode(random)
        ));
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .await
            .map_err(io_error("write", key))?;
        Ok(Box::new(FilesystemUpload {
            key: key.to_owned(),
            file: Some(file),
            temporary,
            destination,
            written: 0,
            failed: false,
            settled: false,
        }))
    }

    async fn open(&self, key: &str) -> Result<ObjectContent, SinkError> {
        self.open_at(key, 0).await
    }

    async fn open_at(&self, key: &str, start: u64) -> Result<ObjectContent, SinkError> {
        let path = self.path_of(key)?;
        let mut file = tokio::fs::File::open(&path)
            .await
            .map_err(io_error("read", key))?;
        let metadata = file.metadata().await.map_err(io_error("read", key))?;
        if !metadata.is_file() {
            return Err(SinkError::NotFound {
                key: key.to_owned(),
            });
        }
        if start >= metadata.len() {
            return Ok(ObjectContent::new(0, stream::empty().boxed()));
        }
        if start > 0 {
            file.seek(SeekFrom::Start(start))
                .await
                .map_err(io_error("read", key))?;
        }
        let key = key.to_owned();
        let chunks = stream::try_unfold(file, move |mut file| {
            let key = key.clone();
            async move {
                let mut chunk = BytesMut::with_capacity(READ_CHUNK_BYTES);
                let read = file
                    .read_buf(&mut chunk)
                    .await
                    .map_err(io_error("read", &key))?;
                Ok((read > 0).then(|| (chunk.freeze(), file)))
            }
        });
        Ok(ObjectContent::new(metadata.len() - start, chunks.boxed()))
    }

    async fn delete(&self, key: &str) -> Result<(), SinkError> {
        let path = self.path_of(key)?;
        match tokio::fs::remove_file(&path).await {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(SinkError::Io {
                operation: "delete",
                key: key.to_owned(),
                source,
            }),
        }
    }

    async fn size(&self, key: &str) -> Result<u64, SinkError> {
        let path = self.path_of(key)?;
        let metadata = tokio::fs::metadata(&path)
            .await
            .map_err(io_error("read", key))?;
        if metadata.is_file() {
            Ok(metadata.len())
        } else {
            Err(SinkError::NotFound {
                key: key.to_owned(),
            })
        }
    }
}

/// An object being written to its temporary file.
#[derive(Debug)]
struct FilesystemUpload {
    key: String,
    file: Option<tokio::fs::File>,
    temporary: PathBuf,
    destination: PathBuf,
    written: u64,
    /// A write failed, so the temporary file may hold part of a chunk.
    failed: bool,
    /// Committed or aborted: the temporary file is gone (renamed or removed).
    settled: bool,
}

impl FilesystemUpload {
    fn file(&mut self) -> Result<&mut tokio::fs::File, SinkError> {
        self.file.as_mut().ok_or_else(|| SinkError::Finished {
            key: self.key.clone(),
        })
    }
}

#[async_trait]
impl Upload for FilesystemUpload {
    async fn write(&mut self, chunk: Bytes) -> Result<(), SinkError> {
        if self.failed {
            return Err(SinkError::FailedEarlier {
                key: self.key.clone(),
            });
        }
        let key = self.key.clone();
        // Until the whole chunk is in, the file may hold part of it: if the write fails,
        // or its future is dropped half-way, the upload must never be committed.
        self.failed = true;
        self.file()?
            .write_all(&chunk)
            .await
            .map_err(io_error("write", &key))?;
        self.failed = false;
        self.written += chunk.len() as u64;
        Ok(())
    }

    fn bytes_written(&self) -> u64 {
        self.written
    }

    async fn commit(mut self: Box<Self>) -> Result<u64, SinkError> {
        let key = self.key.clone();
        if self.failed {
            return Err(SinkError::FailedEarlier { key });
        }
        let mut file = self
            .file
            .take()
            .ok_or_else(|| SinkError::Finished { key: key.clone() })?;
        // The bytes must be on disk before the name is: otherwise a crash right after
        // the rename could leave a complete-looking but truncated object.
        file.flush().await.map_err(io_error("commit", &key))?;
        file.sync_all().await.map_err(io_error("commit", &key))?;
        drop(file);
        tokio::fs::rename(&self.temporary, &self.destination)
            .await
            .map_err(io_error("commit", &key))?;
        self.settled = true;
        // Persist the rename itself. Best effort: some filesystems cannot sync a folder,
        // and the object is already complete and visible.
        if let Some(folder) = self.destination.parent()
            && let Ok(folder) = tokio::fs::File::open(folder).await
        {
            let _ = folder.sync_all().await;
        }
        Ok(self.written)
    }

    async fn abort(mut self: Box<Self>) -> Result<(), SinkError> {
        drop(self.file.take());
        let outcome = tokio::fs::remove_file(&self.temporary).await;
        self.settled = true;
        match outcome {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(SinkError::Io {
                operation: "abort",
                key: self.key.clone(),
                source,
            }),
        }
    }
}

impl Drop for FilesystemUpload {
    fn drop(&mut self) {
        if !self.settled {
            // A dropped upload (a cancelled export task) never reached the rename, so
            // nothing is visible; remove the temporary file too. Drop cannot await, and
            // one unlink is cheap enough to do in place.
            drop(self.file.take());
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}
