//! The S3 sink, through `object_store`, for AWS and any S3-compatible server.
//!
//! An upload buffers up to one part (5 MiB by default). If it is committed before
//! that, it becomes one `PUT`; otherwise a multipart upload is started, parts are sent
//! as they fill (at most [`MAX_PARTS_IN_FLIGHT`] at a time, so memory stays bounded),
//! and the upload is completed only on commit. S3 shows neither a multipart upload nor
//! its parts until it is completed, so the object appears whole or not at all; an
//! abort, or a dropped upload, aborts the multipart upload.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures_util::StreamExt as _;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{
    GetOptions, GetRange, ObjectStore, ObjectStoreExt as _, PutPayload, WriteMultipart,
};
use serde::Deserialize;

use super::{ObjectContent, ObjectSink, SinkError, Upload, validate_key};

/// How many parts of one upload may be in flight at once.
const MAX_PARTS_IN_FLIGHT: usize = 2;

/// S3's smallest part size (except for the last part).
const MIN_PART_BYTES: usize = 5 * 1024 * 1024;

/// Where and how to reach the bucket.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3Config {
    /// The bucket's name.
    pub bucket: String,
    /// A key prefix inside the bucket (`assets` puts every object under `assets/`);
    /// empty for none.
    #[serde(default)]
    pub prefix: String,
    /// The endpoint of an S3-compatible server (`http://127.0.0.1:9000`); none for AWS.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The region, `us-east-1` unless said otherwise.
    #[serde(default = "default_region")]
    pub region: String,
    /// The access key id; with none, credentials come from the environment in the
    /// AWS way (instance or container credentials).
    #[serde(default)]
    pub access_key_id: Option<String>,
    /// The secret access key, paired with `access_key_id`.
    #[serde(default)]
    pub secret_access_key: Option<String>,
    /// Whether a plain `http://` endpoint is allowed (test servers).
    #[serde(default)]
    pub allow_http: bool,
}

fn default_region() -> String {
    "us-east-1".to_owned()
}

impl S3Config {
    /// A configuration for `bucket` in `us-east-1` with no prefix, endpoint or keys.
    pub fn new(bucket: impl Into<String>) -> Self {
        Self {
            bucket: bucket.into(),
            prefix: String::new(),
            endpoint: None,
            region: default_region(),
            access_key_id: None,
            secret_access_key: None,
            allow_http: false,
        }
    }
}

impl fmt::Debug for S3Config {
    /// Shows where the bucket is, never the keys.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hidden = |secret: &Option<String>| secret.as_ref().map(|_| "<redacted>");
        f.debug_struct("S3Config")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &hidden(&self.access_key_id))
            .field("secret_access_key", &hidden(&self.secret_access_key))
            .field("allow_http", &self.allow_http)
            .finish()
    }
}

/// Objects in an S3 bucket.
#[derive(Debug, Clone)]
pub struct S3Sink {
    store: Arc<dyn ObjectStore>,
    bucket: String,
    prefix: String,
    part_bytes: usize,
}

impl S3Sink {
    /// A sink for the bucket `config` describes. Nothing is contacted yet.
    ///
    /// # Errors
    ///
    /// [`SinkError::Config`] when the configuration is incomplete or inconsistent (a
    /// key id without a secret, an invalid prefix or endpoint).
    pub fn new(config: &S3Config) -> Result<Self, SinkError> {
        if config.bucket.is_empty() {
            return Err(config_error("the bucket is empty"));
        }
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&config.bucket)
            .with_region(&config.region)
            .with_allow_http(config.allow_http);
        if let Some(endpoint) = &config.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        match (&config.access_key_id, &config.secret_access_key) {
            (Some(id), Some(secret)) => {
                builder = builder
                    .with_access_key_id(id)
                    .with_secret_access_key(secret);
            }
            (None, None) => {}
            _ => {
                return Err(config_error(
                    "access_key_id and secret_access_key must be given together",
                ));
            }
        }
        let prefix = config.prefix.trim_matches('/');
        if !prefix.is_empty() {
            validate_key(prefix).map_err(|_| {
                config_error(
                    "the prefix must be a relative path without `.`, `..` or empty segments",
                )
            })?;
        }
        let store = builder
            .build()
            .map_err(|error| config_error(&error.to_string()))?;
        Ok(Self {
            store: Arc::new(store),
            bucket: config.bucket.clone(),
            prefix: prefix.to_owned(),
            part_bytes: MIN_PART_BYTES,
        })
    }

    /// Uses parts of `part_bytes` (at least 5 MiB, S3's minimum) for multipart uploads.
    #[must_use]
    pub fn with_part_size(mut self, part_bytes: usize) -> Self {
        self.part_bytes = part_bytes.max(MIN_PART_BYTES);
        self
    }

    /// The bucket's name.
    #[must_use]
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The object location of a key, after checking the key.
    fn location(&self, key: &str) -> Result<Path, SinkError> {
        validate_key(key)?;
        let full = if self.prefix.is_empty() {
            key.to_owned()
        } else {
            format!("{}/{key}", self.prefix)
        };
        Path::parse(&full).map_err(|_| SinkError::InvalidKey {
            key: key.to_owned(),
            reason: "object storage cannot name it",
        })
    }
}

fn config_error(reason: &str) -> SinkError {
    SinkError::Config {
        reason: reason.to_owned(),
    }
}

fn store_error(
    operation: &'static str,
    key: &str,
) -> impl FnOnce(object_store::Error) -> SinkError {
    let key = key.to_owned();
    move |source| match source {
        object_store::Error::NotFound { .. } => SinkError::NotFound { key },
        source => SinkError::Store {
            operation,
            key,
            source,
        },
    }
}

#[async_trait]
impl ObjectSink for S3Sink {
    async fn begin(&self, key: &str) -> Result<Box<dyn Upload>, SinkError> {
        let location = self.location(key)?;
        Ok(Box::new(S3Upload {
            store: Arc::clone(&self.store),
            key: key.to_owned(),
            location,
            part_bytes: self.part_bytes,
            state: UploadState::Buffering(BytesMut::new()),
            written: 0,
        }))
    }

    async fn open(&self, key: &str) -> Result<ObjectContent, SinkError> {
        let location = self.location(key)?;
        let result = self
            .store
            .get(&location)
            .await
            .map_err(store_error("read", key))?;
        let size = result.meta.size;
        let key = key.to_owned();
        let chunks = result
            .into_stream()
            .map(move |chunk| chunk.map_err(store_error("read", &key)));
        Ok(ObjectContent::new(size, chunks.boxed()))
    }

    async fn open_at(&self, key: &str, start: u64) -> Result<ObjectContent, SinkError> {
        if start == 0 {
            return self.open(key).await;
        }
        let location = self.location(key)?;
        let options = GetOptions {
            range: Some(GetRange::Offset(start)),
            ..GetOptions::default()
        };
        let result = match self.store.get_opts(&location, options).await {
            Ok(result) => result,
            Err(object_store::Error::NotFound { .. }) => {
                return Err(SinkError::NotFound {
                    key: key.to_owned(),
                });
            }
            // S3 answers a range that starts at or past the end with 416, which
            // object_store reports as a generic error: the object's size tells that
            // apart from a real failure.
            Err(source) => {
                return match self.size(key).await {
                    Ok(size) if start >= size => {
                        Ok(ObjectContent::new(0, futures_util::stream::empty().boxed()))
                    }
                    _ => Err(SinkError::Store {
                        operation: "read",
                        key: key.to_owned(),
                        source,
                    }),
                };
            }
        };
        let size = result.range.end.saturating_sub(result.range.start);
        let key = key.to_owned();
        let chunks = result
            .into_stream()
            .map(move |chunk| chunk.map_err(store_error("read", &key)));
        Ok(ObjectContent::new(size, chunks.boxed()))
    }

    async fn delete(&self, key: &str) -> Result<(), SinkError> {
        let location = self.location(key)?;
        match self.store.delete(&location).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(SinkError::Store {
                operation: "delete",
                key: key.to_owned(),
                source,
            }),
        }
    }

    async fn size(&self, key: &str) -> Result<u64, SinkError> {
        let location = self.location(key)?;
        let meta = self
            .store
            .head(&location)
            .await
            .map_err(store_error("read", key))?;
        Ok(meta.size)
    }
}

/// What an upload holds so far.
enum UploadState {
    /// Less than one part: kept in memory, sent with one `PUT` on commit.
    Buffering(BytesMut),
    /// A multipart upload in progress.
    Multipart(WriteMultipart),
    /// A write failed; nothing may be committed (a failed multipart upload was aborted).
    Failed,
    /// Committed or aborted.
    Settled,
}

/// An object being written to S3.
struct S3Upload {
    store: Arc<dyn ObjectStore>,
    key: String,
    location: Path,
    part_bytes: usize,
    state: UploadState,
    written: u64,
}

impl fmt::Debug for S3Upload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            UploadState::Buffering(_) => "buffering",
            UploadState::Multipart(_) => "multipart",
            UploadState::Failed => "failed",
            UploadState::Settled => "settled",
        };
        f.debug_struct("S3Upload")
            .field("key", &self.key)
            .field("state", &state)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Upload for S3Upload {
    async fn write(&mut self, chunk: Bytes) -> Result<(), SinkError> {
        let length = chunk.len() as u64;
        match &mut self.state {
            UploadState::Buffering(buffer) if buffer.len() + chunk.len() < self.part_bytes => {
                buffer.extend_from_slice(&chunk);
                self.written += length;
                return Ok(());
            }
            UploadState::Buffering(buffer) => {
                // The object outgrew one part: switch to a multipart upload, which stays
                // invisible until it is completed on commit.
                let buffered = buffer.split().freeze();
                self.state = UploadState::Failed;
                let upload = self
                    .store
                    .put_multipart(&self.location)
                    .await
                    .map_err(store_error("write", &self.key))?;
                let mut multipart = WriteMultipart::new_with_chunk_size(upload, self.part_bytes);
                multipart.put(buffered);
                multipart.put(chunk);
                self.state = UploadState::Multipart(multipart);
            }
            UploadState::Multipart(multipart) => multipart.put(chunk),
            UploadState::Failed => {
                return Err(SinkError::FailedEarlier {
                    key: self.key.clone(),
                });
            }
            UploadState::Settled => {
                return Err(SinkError::Finished {
                    key: self.key.clone(),
                });
            }
        }
        // Back pressure: wait while too many parts are in flight. The multipart upload
        // stays in `self.state` meanwhile, so a write cancelled here (a cancelled export
        // drops its future) still leaves it to `Drop` to abort.
        let waited = match &mut self.state {
            UploadState::Multipart(multipart) => {
                multipart.wait_for_capacity(MAX_PARTS_IN_FLIGHT).await
            }
            _ => Ok(()),
        };
        if let Err(source) = waited {
            // A failed part spoils the upload: completing it without that part would
            // store a corrupt object. Abort it now and refuse any commit.
            if let UploadState::Multipart(multipart) =
                std::mem::replace(&mut self.state, UploadState::Failed)
                && let Err(error) = multipart.abort().await
            {
                tracing::warn!(key = %self.key, %error, "could not abort a failed multipart upload");
            }
            return Err(store_error("write", &self.key)(source));
        }
        self.written += length;
        Ok(())
    }

    fn bytes_written(&self) -> u64 {
        self.written
    }

    async fn commit(mut self: Box<Self>) -> Result<u64, SinkError> {
        match std::mem::replace(&mut self.state, UploadState::Settled) {
            UploadState::Buffering(buffer) => {
                self.store
                    .put(&self.location, PutPayload::from(buffer.freeze()))
                    .await
                    .map_err(store_error("commit", &self.key))?;
            }
            // `finish` sends the last part, waits for all, and completes the upload; on
            // failure it aborts the multipart upload itself.
            UploadState::Multipart(multipart) => {
                multipart
                    .finish()
                    .await
                    .map_err(store_error("commit", &self.key))?;
            }
            UploadState::Failed => {
                return Err(SinkError::FailedEarlier {
                    key: self.key.clone(),
                });
            }
            UploadState::Settled => {
                return Err(SinkError::Finished {
                    key: self.key.clone(),
                });
            }
        }
        Ok(self.written)
    }

    async fn abort(mut self: Box<Self>) -> Result<(), SinkError> {
        match std::mem::replace(&mut self.state, UploadState::Settled) {
            UploadState::Multipart(multipart) => multipart
                .abort()
                .await
                .map_err(store_error("abort", &self.key)),
            UploadState::Buffering(_) | UploadState::Failed | UploadState::Settled => Ok(()),
        }
    }
}

impl Drop for S3Upload {
    fn drop(&mut self) {
        if let UploadState::Multipart(multipart) =
            std::mem::replace(&mut self.state, UploadState::Settled)
        {
            // Nothing is visible, but the parts already sent cost storage until the
            // multipart upload is aborted. Drop cannot await: abort in the background
            // when a runtime is there (it is, wherever uploads run).
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let key = self.key.clone();
                runtime.spawn(async move {
                    if let Err(error) = multipart.abort().await {
                        tracing::warn!(%key, error = %error, "could not abort a dropped multipart upload");
                    }
                });
            }
        }
    }
}
