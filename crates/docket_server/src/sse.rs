//! An SSE answer's body: frames written as they come. MCP streams (`http`, which
//! the connection polls directly) and the portal's live statuses
//! (`portal_events`, a task's frames through a channel) both answer with it.

use std::convert::Infallible;

use bytes::Bytes;
use http::HeaderValue;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use tokio::sync::mpsc;

/// An answer's body (the same as `http::Body`).
pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

/// An SSE answer whose body is the frames `frames` receives, ending when its
/// sender is dropped.
pub(crate) fn event_stream(mut frames: mpsc::Receiver<Bytes>) -> hyper::Response<Body> {
    response(futures_util::stream::poll_fn(move |cx| {
        frames.poll_recv(cx)
    }))
}

/// An SSE answer whose body is `frames`, each written as it comes.
pub(crate) fn response(
    frames: impl futures_util::Stream<Item = Bytes> + Send + 'static,
) -> hyper::Response<Body> {
    let frames =
        futures_util::StreamExt::map(frames, |bytes| Ok::<_, Infallible>(Frame::data(bytes)));
    let mut response = hyper::Response::new(BodyExt::boxed_unsync(StreamBody::new(frames)));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
