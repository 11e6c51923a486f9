//! Cross-replica signals over PostgreSQL `LISTEN`/`NOTIFY`, on four channels:
//! task signals on `docket_tasks`, run signals on `docket_runs` and answers to a
//! session's questions on `docket_sessions`, catalog changes on `docket_changes` (each store keeps one [`Signals`] per
//! channel, and listens only on those it was asked to).
//!
//! `request_cancel` (`cancel:`), `answer_input` (`input:` and `changed:`),
//! `require_input`, `finish` and `heartbeat` (`changed:`, the latter for each
//! status message it writes) run `pg_notify('docket_tasks', '<kind>:<task id>')`
//! in their own transaction, so the notification goes out when, and only if, the
//! change commits. Each store that registers a listener
//! starts one background task holding a dedicated connection (outside the pool:
//! a pooled connection would be handed to other work and its `LISTEN` lost) that
//! runs `LISTEN docket_tasks` and hands every notification to the listener. If
//! the connection drops it reconnects with backoff. Notifications sent while it
//! was away are lost, which costs only latency: the rows stay the truth and the
//! heartbeat carries every cancel.

use std::future::poll_fn;
use std::pin::pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use docket_task::TaskId;
use docket_task::store::TaskSignal;
use tokio::sync::oneshot;
use tokio_postgres::{AsyncMessage, NoTls};

use super::tasks::CHANNEL;
use docket_catalog::scripts::RunSignal;
use docket_catalog::{AnswerSignal, CatalogChange};

/// The channel run signals travel on; payloads are `queued:<id>` and
/// `cancel:<id>`.
macro_rules! run_channel {
    () => {
        "docket_runs"
    };
}
pub(crate) use run_channel;
/// [`run_channel!`] as a constant.
pub(crate) const RUN_CHANNEL: &str = run_channel!();

/// The channel answer signals travel on; payloads are `<session id>:<request id>`.
pub(crate) const ANSWER_CHANNEL: &str = "docket_sessions";

/// The channel catalog changes travel on; payloads are [`CatalogChange::payload`]s.
pub(crate) const CHANGE_CHANNEL: &str = "docket_changes";

/// The first wait before reconnecting; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(10);

/// Hears the signals of one kind.
type Listener<S> = Arc<dyn Fn(S) + Send + Sync>;

/// The listener of one channel and the background task that feeds it.
pub(crate) struct Signals<S: 'static> {
    /// Holds a password, possibly: used to connect, never logged.
    url: String,
    channel: &'static str,
    parse: fn(&str) -> Option<S>,
    listener: Arc<Mutex<Option<Listener<S>>>>,
    /// Set once the background task runs; dropping it (with the store) stops it.
    stop: Mutex<Option<oneshot::Sender<()>>>,
}

impl Signals<TaskSignal> {
    /// Task signals, on `docket_tasks`.
    pub(crate) fn tasks(url: String) -> Self {
        Self::new(url, CHANNEL, parse)
    }
}

impl Signals<RunSignal> {
    /// Run signals, on `docket_runs`.
    pub(crate) fn runs(url: String) -> Self {
        Self::new(url, RUN_CHANNEL, parse_run_signal)
    }
}

impl Signals<AnswerSignal> {
    /// Answer signals, on `docket_sessions`.
    pub(crate) fn answers(url: String) -> Self {
        Self::new(url, ANSWER_CHANNEL, parse_answer_signal)
    }
}

impl Signals<CatalogChange> {
    /// Catalog changes, on `docket_changes`.
    pub(crate) fn changes(url: String) -> Self {
        Self::new(url, CHANGE_CHANNEL, CatalogChange::from_payload)
    }
}

impl<S: Send + 'static> Signals<S> {
    fn new(url: String, channel: &'static str, parse: fn(&str) -> Option<S>) -> Self {
        Self {
            url,
            channel,
            parse,
            listener: Arc::new(Mutex::new(None)),
            stop: Mutex::default(),
        }
    }

    /// Installs `listener` (replacing any earlier one) and starts listening, once.
    pub(crate) fn set_listener(&self, listener: Listener<S>) {
        *lock(&self.listener) = Some(listener);
        let mut stop = lock(&self.stop);
        if stop.is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                "no tokio runtime to listen for task signals on; \
                 cancels from other replicas will arrive with the heartbeat"
            );
            return;
        };
        let (stop_sender, stop_receiver) = oneshot::channel();
        runtime.spawn(listen(
            self.url.clone(),
            self.channel,
            self.parse,
            Arc::clone(&self.listener),
            stop_receiver,
        ));
        *stop = Some(stop_sender);
    }
}

/// Listens until `stop` fires (or its sender is dropped), reconnecting as needed.
async fn listen<S>(
    url: String,
    channel: &'static str,
    parse: fn(&str) -> Option<S>,
    listener: Arc<Mutex<Option<Listener<S>>>>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        tokio::select! {
            _ = &mut stop => return,
            ended = session(&url, channel, parse, &listener, &mut backoff) => match ended {
                Ok(()) => tracing::warn!("the task signal connection closed; reconnecting"),
                Err(error) => tracing::warn!(%error, "the task signal connection failed; reconnecting"),
            },
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// One connection's life: `LISTEN`, then hand over notifications until it ends.
async fn session<S>(
    url: &str,
    channel: &str,
    parse: fn(&str) -> Option<S>,
    listener: &Mutex<Option<Listener<S>>>,
    backoff: &mut Duration,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = tokio_postgres::connect(url, NoTls).await?;
    // The connection object does the I/O for the client too, so it is polled
    // while LISTEN is on its way, not only afterwards.
    let listen_sql = format!("LISTEN {channel}");
    let mut subscribe = pin!(client.batch_execute(&listen_sql));
    let mut subscribed = false;
    loop {
        tokio::select! {
            result = &mut subscribe, if !subscribed => {
                result?;
                subscribed = true;
                *backoff = FIRST_BACKOFF;
            }
            message = poll_fn(|cx| connection.poll_message(cx)) => match message {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    deliver(listener, parse, notification.payload());
                }
                // Notices and future message kinds carry no signal.
                Some(Ok(_)) => {}
                Some(Err(error)) => return Err(error),
                None => return Ok(()),
            },
        }
    }
}

/// Parses a payload and calls the listener; unknown payloads are ignored.
fn deliver<S>(listener: &Mutex<Option<Listener<S>>>, parse: fn(&str) -> Option<S>, payload: &str) {
    let Some(signal) = parse(payload) else {
        return;
    };
    // Clone out of the lock so a listener that registers another cannot deadlock.
    let listener = lock(listener).clone();
    if let Some(listener) = listener {
        listener(signal);
    }
}

/// `cancel:<id>` or `input:<id>`.
fn parse(payload: &str) -> Option<TaskSignal> {
    let (kind, id) = payload.split_once(':')?;
    let id = TaskId::from_stored(id.to_owned());
    match kind {
        "cancel" => Some(TaskSignal::Cancel(id)),
        "input" => Some(TaskSignal::Input(id)),
        "changed" => Some(TaskSignal::Changed(id)),
        _ => None,
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking listener leaves plain data behind; keep using it.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Parses a run signal payload: `queued:<id>` or `cancel:<id>`.
fn parse_run_signal(payload: &str) -> Option<RunSignal> {
    let (kind, id) = payload.split_once(':')?;
    match kind {
        "queued" => Some(RunSignal::Queued(id.to_owned())),
        "cancel" => Some(RunSignal::Cancel(id.to_owned())),
        "ended" => Some(RunSignal::Ended(id.to_owned())),
        _ => None,
    }
}

/// Parses an answer signal payload: `<session id>:<request id>` (a session id has
/// no colon; a request id may).
fn parse_answer_signal(payload: &str) -> Option<AnswerSignal> {
    let (session_id, request_id) = payload.split_once(':')?;
    (!session_id.is_empty() && !request_id.is_empty()).then(|| AnswerSignal {
        session_id: session_id.to_owned(),
        request_id: request_id.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_name_a_kind_and_a_task() {
        let id = TaskId::from_stored("abc".into());
        assert_eq!(parse("cancel:abc"), Some(TaskSignal::Cancel(id.clone())));
        assert_eq!(parse("input:abc"), Some(TaskSignal::Input(id)));
        assert_eq!(
            parse("changed:abc"),
            Some(TaskSignal::Changed(TaskId::from_stored("abc".into())))
        );
        assert_eq!(parse("resume:abc"), None);
        assert_eq!(parse("cancel"), None);
    }

    #[test]
    fn run_payloads_name_a_kind_and_a_run() {
        assert_eq!(
            parse_run_signal("queued:a"),
            Some(RunSignal::Queued("a".into()))
        );
        assert_eq!(
            parse_run_signal("cancel:a"),
            Some(RunSignal::Cancel("a".into()))
        );
        assert_eq!(
            parse_run_signal("ended:a"),
            Some(RunSignal::Ended("a".into()))
        );
        assert_eq!(parse_run_signal("other:a"), None);
        assert_eq!(parse_run_signal("cancel"), None);
    }

    #[test]
    fn answer_payloads_name_a_session_and_a_request() {
        assert_eq!(
            parse_answer_signal("s1:elicit-a:b"),
            Some(AnswerSignal {
                session_id: "s1".into(),
                request_id: "elicit-a:b".into()
            })
        );
        assert_eq!(parse_answer_signal("s1:"), None);
        assert_eq!(parse_answer_signal(":r"), None);
        assert_eq!(parse_answer_signal("s1"), None);
    }
}
