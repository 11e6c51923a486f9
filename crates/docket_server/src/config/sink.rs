//! The object sink the `storage:` section describes, and the clean-up of what a
//! killed export left in it.

use super::schema::{StorageConfig, StorageKind};

/// Removes the unfinished upload files of a filesystem store older than
/// `storage.stale_parts_after` (a process killed mid-export leaves them); an S3
/// store's incomplete multipart uploads are the bucket's lifecycle rule's to abort.
/// Returns how many were removed.
///
/// # Errors
/// When the folder cannot be read.
pub async fn remove_stale_uploads(storage: &StorageConfig) -> std::io::Result<usize> {
    match storage.kind {
        StorageKind::Filesystem => {
            docket_export::sink::FilesystemSink::new(&storage.path)
                .remove_stale_parts(storage.stale_parts_after)
                .await
        }
        StorageKind::S3 => Ok(0),
    }
}

/// The object sink `storage:` describes.
///
/// # Errors
/// When the S3 settings cannot make a client.
pub fn object_sink(
    storage: &StorageConfig,
) -> Result<std::sync::Arc<dyn docket_export::sink::ObjectSink>, docket_export::sink::SinkError> {
    use docket_export::sink::{FilesystemSink, S3Config, S3Sink};
    Ok(match storage.kind {
        StorageKind::Filesystem => std::sync::Arc::new(FilesystemSink::new(&storage.path)),
        StorageKind::S3 => {
            let mut s3 = S3Config::new(storage.bucket.clone().unwrap_or_default());
            s3.prefix = storage.prefix.clone().unwrap_or_default();
            s3.endpoint = storage.endpoint.clone();
            if let Some(region) = &storage.region {
                s3.region = region.clone();
            }
            s3.access_key_id = storage.access_key_id.clone();
            s3.secret_access_key = storage.secret_access_key.clone();
            s3.allow_http = storage.allow_http;
            std::sync::Arc::new(S3Sink::new(&s3)?)
        }
    })
}
