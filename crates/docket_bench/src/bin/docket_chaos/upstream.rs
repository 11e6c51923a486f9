//! The HTTP upstream `api_export` reads: `GET /export/{tag}/{chunks}/{delay_ms}` sends
//! `chunks` chunks of text made from the tag, `delay_ms` apart, and notes in the journal
//! when the last one went out. So the soak knows when an export's work finished (check
//! 9) and what its bytes must be (check 6).

use std::time::Duration;

use anyhow::Context as _;
use axum::extract::Path;
use bytes::Bytes;

use crate::journal::{Clock, Shared};

/// Lines per chunk.
const LINES_PER_CHUNK: usize = 64;

/// Chunk `index` of the body of `tag`.
fn chunk(tag: &str, index: u32) -> Vec<u8> {
    let line = format!("{tag},{index},0123456789abcdef0123456789abcdef\n");
    line.repeat(LINES_PER_CHUNK).into_bytes()
}

/// The whole body `GET /export/{tag}/{chunks}/…` sends.
pub(crate) fn body(tag: &str, chunks: u32) -> Vec<u8> {
    (0..chunks).flat_map(|index| chunk(tag, index)).collect()
}

/// Serves the upstream on a loopback port for as long as the runtime lives; its
/// base URL.
pub(crate) async fn start(journal: Shared, clock: Clock) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("cannot bind the HTTP upstream")?;
    let address = listener.local_addr()?;
    let router = axum::Router::new().route(
        "/export/{tag}/{chunks}/{delay_ms}",
        axum::routing::get(
            move |Path((tag, chunks, delay_ms)): Path<(String, u32, u64)>| {
                let journal = journal.clone();
                async move {
                    let size = body(&tag, chunks).len();
                    let stream = futures_util::stream::unfold(0u32, move |index| {
                        let (tag, journal) = (tag.clone(), journal.clone());
                        async move {
                            if index >= chunks {
                                return None;
                            }
                            if index > 0 {
                                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                            }
                            let bytes = Bytes::from(chunk(&tag, index));
                            if index + 1 == chunks {
                                // The last chunk goes out now (a local write of a few KB).
                                journal
                                    .lock()
                                    .body_ends
                                    .entry(tag)
                                    .or_default()
                                    .push(clock.now());
                            }
                            Some((Ok::<_, std::io::Error>(bytes), index + 1))
                        }
                    });
                    (
                        [
                            ("content-type", "text/csv".to_owned()),
                            ("content-length", size.to_string()),
                        ],
                        axum::body::Body::from_stream(stream),
                    )
                }
            },
        ),
    );
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(format!("http://{address}"))
}
