//! One API response streamed into an asset: the upload begins once the first
//! bytes decide the content type, then one chunk is held at a time, under a byte
//! cap, a timeout and a cancel token; only a whole response is committed.

use std::time::Duration;
use tracing::Instrument as _;

use bytes::BytesMut;
use tokio_util::sync::CancellationToken;

use super::{
    ApiClient, ApiError, ApiRequest, SNIFF_BYTES, declared_content_type, stored_content_type,
};
use crate::sink::{ObjectSink, SinkError, Upload};

/// The caps an API export runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ApiExportLimits {
    /// The most bytes the stored response may have.
    pub max_bytes: u64,
    /// How long the export may take, headers and body.
    pub timeout: Duration,
}

/// What a finished API export stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiExportReport {
    /// The upstream's HTTP status (stored whatever it is).
    pub status: u16,
    /// Bytes stored.
    pub bytes: u64,
    /// The content type it was stored with.
    pub content_type: String,
    /// The content type the upstream declared, when it differs.
    pub declared_content_type: Option<String>,
}

/// Why an API export stopped. Nothing was committed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ApiExportError {
    /// The call failed or was refused.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The export ran longer than its timeout.
    #[error("the export did not finish within {} seconds", .after.as_secs())]
    Timeout {
        /// The timeout.
        after: Duration,
    },
}

impl ApiExportError {
    /// Whether it stopped because it was cancelled.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        matches!(self, ApiExportError::Api(ApiError::Cancelled))
    }
}

/// Names the object an export's bytes go to, from the content type it is stored
/// with (so the key can carry the right extension).
pub type KeyFor<'a> = dyn Fn(&str) -> String + Send + Sync + 'a;

/// Sends `request` and streams its response, whatever its status, into an upload
/// of `sink` at `key_for(content type)`, chunk by chunk, reporting the bytes
/// received after every chunk. The upload begins once the first 8 KiB (or the
/// whole, shorter body) have decided the content type; after that one chunk is
/// held at a time, so memory stays flat. Commits only a whole response within the
/// caps; otherwise aborts the upload and drops the connection, which stops the
/// upstream.
///
/// # Errors
/// [`ApiExportError`]; the upload is aborted first.
pub async fn export_response(
    client: &ApiClient,
    request: &ApiRequest,
    sink: &dyn ObjectSink,
    key_for: &KeyFor<'_>,
    limits: ApiExportLimits,
    cancel: &CancellationToken,
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<ApiExportReport, ApiExportError> {
    let mut upload: Option<Box<dyn Upload>> = None;
    let run = stream_into(
        client,
        request,
        (sink, key_for),
        &mut upload,
        limits,
        cancel,
        progress,
    );
    let outcome = match tokio::time::timeout(limits.timeout, run).await {
        Ok(result) => result,
        Err(_) => Err(ApiExportError::Timeout {
            after: limits.timeout,
        }),
    };
    let Some(upload) = upload else {
        // Nothing was begun, so there is nothing to clean up.
        return outcome.and_then(|_| {
            Err(ApiError::Transport {
                message: "the response ended before its upload began".into(),
            }
            .into())
        });
    };
    let (mut report, bytes) =
        commit_or_abort(upload, outcome, |error| ApiError::Sink(error).into()).await?;
    report.bytes = bytes;
    Ok(report)
}

/// Commits `upload` when `outcome` succeeded and returns it with the committed
/// size; otherwise aborts the upload (a failed clean-up is logged) and returns the
/// error, so nothing partial is ever visible.
pub(crate) async fn commit_or_abort<T, E>(
    upload: Box<dyn Upload>,
    outcome: Result<T, E>,
    sink_error: impl FnOnce(SinkError) -> E,
) -> Result<(T, u64), E> {
    match outcome {
        Ok(value) => match upload
            .commit()
            .instrument(crate::export::sink_span("sink commit", 0))
            .await
        {
            Ok(bytes) => Ok((value, bytes)),
            Err(error) => Err(sink_error(error)),
        },
        Err(error) => {
            if let Err(abort_error) = upload.abort().await {
                tracing::warn!(error = %abort_error, "could not clean up an aborted export");
            }
            Err(error)
        }
    }
}

async fn stream_into(
    client: &ApiClient,
    request: &ApiRequest,
    (sink, key_for): (&dyn ObjectSink, &KeyFor<'_>),
    slot: &mut Option<Box<dyn Upload>>,
    limits: ApiExportLimits,
    cancel: &CancellationToken,
    progress: &(dyn Fn(u64) + Send + Sync),
) -> Result<ApiExportReport, ApiExportError> {
    let mut response = client.send(request, cancel).await?;
    let status = response.status().as_u16();
    let too_large = || ApiError::TooLarge {
        limit: limits.max_bytes,
    };
    if response
        .content_length()
        .is_some_and(|length| length > limits.max_bytes)
    {
        return Err(too_large().into());
    }
    let declared = declared_content_type(response.headers());
    let mut content_type: Option<String> = None;
    let mut head = BytesMut::new();
    let mut received: u64 = 0;
    let mut finished = false;
    // What is stored passes the scrub too: an upstream that echoes the request
    // echoes the connection's credentials.
    let mut scrub = client.scrubber().stream();
    while !finished {
        let chunk = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ApiError::Cancelled.into()),
            chunk = response.chunk() => chunk.map_err(|error| client.transport(&error))?,
        };
        let chunk = match chunk {
            Some(chunk) => {
                received += chunk.len() as u64;
                scrub.push(&chunk)
            }
            None => {
                finished = true;
                scrub.finish()
            }
        };
        if received > limits.max_bytes {
            return Err(too_large().into());
        }
        let upload = match slot {
            Some(upload) => upload,
            None => {
                // The first bytes decide the type (and so the key); they are held
                // only until there are enough to look at.
                head.extend_from_slice(&chunk);
                if head.len() < SNIFF_BYTES && !finished {
                    continue;
                }
                let chosen = stored_content_type(declared.as_deref(), &head);
                let upload = slot.insert(
                    sink.begin(&key_for(&chosen))
                        .await
                        .map_err(ApiError::from)?,
                );
                content_type = Some(chosen);
                if !head.is_empty() {
                    upload
                        .write(head.split().freeze())
                        .await
                        .map_err(ApiError::from)?;
                }
                progress(received);
                continue;
            }
        };
        if !chunk.is_empty() {
            upload.write(chunk).await.map_err(ApiError::from)?;
        }
        progress(received);
    }
    let content_type = content_type.unwrap_or_default();
    Ok(ApiExportReport {
        status,
        bytes: received,
        declared_content_type: declared.filter(|declared| *declared != content_type),
        content_type,
    })
}
