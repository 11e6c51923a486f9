//! A handler running on its own tokio task: cancelled when its caller goes away,
//! aborted when it ignores the cancel, and its progress forwarded to an SSE stream.

use std::time::Duration;

use docket_protocol::jsonrpc::{JsonRpcVersion, OutgoingNotification};
use docket_protocol::progress::{PROGRESS_METHOD, ProgressParams};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::registry::{ProgressUpdate, ToolOutcome};
use crate::reply::StreamItem;

use super::finish::Finish;

/// How long a cancelled handler may take to clean up (cancel its upstream
/// query, abort its upload, record the call) before its task is aborted.
pub(super) const CANCEL_GRACE: Duration = Duration::from_secs(5);

/// A handler running on its own tokio task. Dropping it (the client went away,
/// the task was cancelled) fires the call's cancel token and aborts the task if
/// it has not ended within [`CANCEL_GRACE`]: a handler that honours the token
/// finishes its cleanup (aborting at once would cut a cleanup that is already
/// awaiting, such as the `DELETE` to Trino or the call record), and one that
/// ignores it is stopped anyway.
pub(super) struct RunningCall {
    handle: Option<JoinHandle<ToolOutcome>>,
    cancel: CancellationToken,
}

impl RunningCall {
    pub(super) fn new(handle: JoinHandle<ToolOutcome>, cancel: CancellationToken) -> Self {
        Self {
            handle: Some(handle),
            cancel,
        }
    }

    pub(super) async fn wait(mut self) -> ToolOutcome {
        let Some(handle) = self.handle.as_mut() else {
            return ToolOutcome::Error(crate::registry::ToolError::Internal(
                "the tool was already stopped".into(),
            ));
        };
        let outcome = handle.await;
        self.handle = None;
        match outcome {
            Ok(outcome) => outcome,
            Err(err) => ToolOutcome::Error(crate::registry::ToolError::Internal(format!(
                "the tool stopped unexpectedly: {err}"
            ))),
        }
    }
}

impl Drop for RunningCall {
    fn drop(&mut self) {
        let Some(mut handle) = self.handle.take() else {
            return;
        };
        self.cancel.cancel();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    if tokio::time::timeout(CANCEL_GRACE, &mut handle)
                        .await
                        .is_err()
                    {
                        handle.abort();
                    }
                });
            }
            Err(_) => handle.abort(),
        }
    }
}

/// What a streamed call may send before its answer: progress (when the request
/// gave a token) and log messages (when the caller asked for them).
pub(super) struct Notifications {
    /// Progress updates.
    pub(super) progress: Option<mpsc::UnboundedReceiver<ProgressUpdate>>,
    /// Log messages, ready to send.
    pub(super) logs: Option<mpsc::UnboundedReceiver<OutgoingNotification>>,
}

impl Notifications {
    /// The next notification, in the order each kind was sent; `None` once both
    /// kinds are done (their senders dropped with the handler).
    async fn next(&mut self) -> Option<OutgoingNotification> {
        let progress = async {
            match &mut self.progress {
                Some(progress) => progress.recv().await.map(progress_notification),
                None => None,
            }
        };
        let logs = async {
            match &mut self.logs {
                Some(logs) => logs.recv().await,
                None => None,
            }
        };
        // A kind that has ended drops out of the race; when both have, none is left.
        tokio::select! {
            Some(notification) = progress => Some(notification),
            Some(notification) = logs => Some(notification),
            else => None,
        }
    }

    /// What was sent before the handler ended and is not out yet.
    fn pending(&mut self) -> Vec<OutgoingNotification> {
        let mut pending = Vec::new();
        if let Some(progress) = &mut self.progress {
            while let Ok(update) = progress.try_recv() {
                pending.push(progress_notification(update));
            }
        }
        if let Some(logs) = &mut self.logs {
            while let Ok(notification) = logs.try_recv() {
                pending.push(notification);
            }
        }
        pending
    }
}

/// Forwards progress and log messages to the SSE stream until the handler ends,
/// then sends the final answer. A stream that closes first cancels the call.
pub(super) async fn stream_call(
    running: RunningCall,
    mut notifications: Notifications,
    items: mpsc::Sender<StreamItem>,
    finish: Finish,
) {
    let wait = running.wait();
    tokio::pin!(wait);
    let mut open = true;
    let outcome = loop {
        tokio::select! {
            outcome = &mut wait => break outcome,
            next = notifications.next(), if open => match next {
                Some(notification) => {
                    if items.send(StreamItem::Notification(notification)).await.is_err() {
                        tracing::info!(tool = finish.tool, "the client closed the stream; cancelling the call");
                        return;
                    }
                }
                None => open = false,
            },
            () = items.closed() => {
                tracing::info!(tool = finish.tool, "the client closed the stream; cancelling the call");
                return;
            }
        }
    };
    // Notifications sent just before the end still go out first, in order.
    for notification in notifications.pending() {
        if items
            .send(StreamItem::Notification(notification))
            .await
            .is_err()
        {
            return;
        }
    }
    let item = match finish.into_result(outcome) {
        Ok(result) => StreamItem::Result(result),
        Err(error) => StreamItem::Error(error.to_wire().1),
    };
    let _ = items.send(item).await;
}

pub(super) fn progress_notification(update: ProgressUpdate) -> OutgoingNotification {
    let params = ProgressParams {
        progress_token: update.token,
        progress: update.progress.into(),
        total: update.total.map(Into::into),
        message: update.message,
    };
    OutgoingNotification {
        jsonrpc: JsonRpcVersion,
        method: PROGRESS_METHOD.to_owned(),
        params: serde_json::to_value(params).unwrap_or(Value::Null),
    }
}
