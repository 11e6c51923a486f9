//! A listener that answers every `POST /mcp` with the same bytes and does nothing
//! else: the HTTP exchange of a `tasks/get` — its request, headers and body, and an
//! answer of the very same size — with no MCP and no database behind it. Beside
//! `GET /healthz` (an exchange with nothing in it), it tells how much of a call's
//! cost is moving its bytes over HTTP at all.

use std::net::SocketAddr;

use anyhow::Context as _;
use axum::serve::ListenerExt as _;
use bytes::Bytes;
use tokio::task::JoinHandle;

/// The running listener; stops when dropped.
pub(crate) struct EchoServer {
    addr: SocketAddr,
    served: JoinHandle<()>,
}

impl EchoServer {
    /// Serves `answer` as `application/json` to every `POST /mcp`, after reading the
    /// request's body, on 127.0.0.1, any free port.
    pub(crate) async fn start(answer: Bytes) -> anyhow::Result<Self> {
        let router = axum::Router::new().route(
            "/mcp",
            axum::routing::post(move |_body: Bytes| {
                let answer = answer.clone();
                async move { ([(http::header::CONTENT_TYPE, "application/json")], answer) }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("cannot bind a loopback port for the echo listener")?;
        let addr = listener
            .local_addr()
            .context("cannot read the echo listener's address")?;
        // As Docket's listener does: no delayed-ACK wait on small answers.
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        let served = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self { addr, served })
    }

    /// The endpoint's URL.
    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.served.abort();
    }
}
