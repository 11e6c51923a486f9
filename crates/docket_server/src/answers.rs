//! [`AnswerWaiters`]: the calls on this replica that wait for a session client's
//! answer to a question they asked, woken when the session store signals that an
//! answer arrived (in this process, or on another replica through the database).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use docket_catalog::{AnswerListener, AnswerSignal};
use tokio::sync::Notify;

/// The calls on this replica waiting for answers, woken when the session store
/// signals one (from this process, or another replica through the database).
#[derive(Default)]
pub(crate) struct AnswerWaiters {
    waiting: Mutex<HashMap<(String, String), Arc<Notify>>>,
}

/// One registered wait; dropping it unregisters.
pub(crate) struct Waiting<'a> {
    waiters: &'a AnswerWaiters,
    key: (String, String),
    notify: Arc<Notify>,
}

impl Waiting<'_> {
    /// Resolves once an answer was signalled since the last call (a signal that
    /// came while nobody was waiting is kept).
    pub(crate) async fn notified(&self) {
        self.notify.notified().await;
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        lock(&self.waiters.waiting).remove(&self.key);
    }
}

impl AnswerWaiters {
    /// The listener the session store calls for every answer it signals.
    pub(crate) fn listener(self: &Arc<Self>) -> AnswerListener {
        let waiters = Arc::downgrade(self);
        Arc::new(move |signal: AnswerSignal| {
            let Some(waiters) = waiters.upgrade() else {
                return;
            };
            let key = (signal.session_id, signal.request_id);
            if let Some(notify) = lock(&waiters.waiting).get(&key) {
                notify.notify_one();
            }
        })
    }

    pub(crate) fn register(&self, session_id: &str, request_id: &str) -> Waiting<'_> {
        let key = (session_id.to_owned(), request_id.to_owned());
        let notify = Arc::new(Notify::new());
        lock(&self.waiting).insert(key.clone(), Arc::clone(&notify));
        Waiting {
            waiters: self,
            key,
            notify,
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
