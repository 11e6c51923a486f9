//! The gate every benchmark task waits on: tasks stay `working` until the
//! benchmark releases them, on both servers alike, so a create measurement
//! measures creating a task and not also finishing one.

use std::future::Future;

use tokio::sync::watch;

/// Holds task work until [`Gate::release`]. Cheap to clone; clones share the gate.
#[derive(Clone, Debug)]
pub(crate) struct Gate {
    /// Bumped on every release; a waiter wakes on the first bump after it started.
    epoch: watch::Sender<u64>,
}

impl Gate {
    pub(crate) fn new() -> Self {
        Self {
            epoch: watch::Sender::new(0),
        }
    }

    /// A future that resolves at the next release after this call.
    pub(crate) fn hold(&self) -> impl Future<Output = ()> + Send + 'static + use<> {
        // Subscribing marks the current epoch as seen, so only a later release wakes it.
        let mut receiver = self.epoch.subscribe();
        async move {
            // An error means the gate is gone, which also ends the wait.
            let _ = receiver.changed().await;
        }
    }

    /// Lets every task waiting now finish.
    pub(crate) fn release(&self) {
        self.epoch.send_modify(|epoch| *epoch += 1);
    }
}
