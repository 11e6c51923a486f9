//! An SSE answer's body: the frames a task sends, as they come, ending when
//! the task drops its sender. MCP streams (`http`) and the portal's live
//! statuses (`portal_events`) both answer with it.

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
pub(crate) fn event_stream(frames: mpsc::Receiver<Bytes>) -> hyper::Response<Body> {
    let stream = futures_util::stream::unfold(frames, |mut receiver| async move {
        receiver
            .recv()
            .await
            .map(|bytes| (Ok::<_, Infallible>(Frame::data(bytes)), receiver))
    });
    let mut response = hyper::Response::new(BodyExt::boxed_unsync(StreamBody::new(stream)));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
