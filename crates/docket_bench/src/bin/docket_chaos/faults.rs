//! The faults: each [`Fault`] of the plan at its time. A kill or a stop takes a live
//! replica (the planned slot, else the next live one) only while at least one other
//! stays live, so the load always has somewhere to go; the replica is started again
//! after its pause. A cut takes every replica off the database at once, unless a cut
//! is already on. A supervisor starts again any replica that exited without being
//! told to, and says so.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cluster::Cluster;
use crate::journal::{Clock, Cut, Reason, Shared, Signal};
use crate::plan::{Fault, FaultKind};
use crate::timing;

/// Applies the plan's faults.
#[derive(Clone)]
pub(crate) struct Faults {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) journal: Shared,
    pub(crate) clock: Clock,
}

impl Faults {
    /// Strikes every fault at its time until `stop`; returns the restarts still under
    /// way, for the caller to wait for.
    pub(crate) async fn run(&self, faults: Vec<Fault>, stop: &CancellationToken) -> JoinSet<()> {
        let mut running = JoinSet::new();
        for fault in faults {
            let wait = (fault.at.as_secs_f64() - self.clock.now()).max(0.0);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
                () = stop.cancelled() => break,
            }
            match fault.kind {
                FaultKind::Cut => self.cut(fault.outage),
                FaultKind::Kill | FaultKind::Terminate => {
                    let this = self.clone();
                    running.spawn(async move { this.stop_and_restart(&fault).await });
                }
            }
            while running.try_join_next().is_some() {}
        }
        running
    }

    fn cut(&self, outage: Duration) {
        let now = self.clock.now();
        let mut journal = self.journal.lock();
        if journal.cuts.last().is_some_and(|cut| cut.end > now) {
            journal.event(now, "cut skipped: a cut is still on");
            return;
        }
        self.cluster.cut(outage);
        let end = now + outage.as_secs_f64();
        journal.cuts.push(Cut { start: now, end });
        journal.event(
            now,
            format!(
                "database cut of every replica for {:.1} s",
                outage.as_secs_f64()
            ),
        );
    }

    async fn stop_and_restart(&self, fault: &Fault) {
        let slots = self.cluster.slot_count();
        let live: Vec<usize> = (0..slots)
            .filter(|slot| self.cluster.is_live(*slot))
            .collect();
        let now = self.clock.now();
        let chosen = (0..slots)
            .map(|offset| (fault.slot + offset) % slots)
            .find(|slot| live.contains(slot));
        let Some(slot) = chosen.filter(|_| live.len() >= 2) else {
            self.journal.lock().event(
                now,
                format!("{:?} skipped: fewer than two replicas are live", fault.kind),
            );
            return;
        };
        let signal = match fault.kind {
            FaultKind::Kill => Signal::Kill,
            _ => Signal::Term,
        };
        let Some(process) = self.cluster.signal(slot, signal, Reason::Fault) else {
            return;
        };
        let limit = match signal {
            Signal::Kill => Duration::from_secs(10),
            Signal::Term => timing::shutdown_limit(),
        };
        if !self.cluster.wait_exit(process, limit).await {
            let at = self.clock.now();
            let label = self.journal.lock().processes[process].label();
            self.journal.lock().event(
                at,
                format!("{label} did not exit within {limit:?} of {signal:?}; killing it"),
            );
            self.cluster
                .signal_process(process, Signal::Kill, Reason::Overrun);
            self.cluster
                .wait_exit(process, Duration::from_secs(10))
                .await;
        }
        tokio::time::sleep(fault.restart_after).await;
        if let Err(error) = self.cluster.launch(slot, fault.rename).await {
            let at = self.clock.now();
            self.journal
                .lock()
                .event(at, format!("restart of slot {slot} failed: {error:#}"));
        }
    }

    /// Every half second until `stop`: a slot whose process exited without a signal
    /// from the soak is recorded and started again.
    pub(crate) async fn supervise(&self, stop: &CancellationToken) {
        loop {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(500)) => {}
                () = stop.cancelled() => return,
            }
            for slot in 0..self.cluster.slot_count() {
                if self.cluster.is_launching(slot) {
                    continue;
                }
                let Some(process) = self.cluster.current(slot) else {
                    continue;
                };
                let unexpected = {
                    let journal = self.journal.lock();
                    let record = &journal.processes[process];
                    record.exited.is_some() && record.signals.is_empty()
                };
                if unexpected {
                    let at = self.clock.now();
                    self.journal.lock().event(
                        at,
                        format!("slot {slot} exited without being told to; starting it again"),
                    );
                    if let Err(error) = self.cluster.launch(slot, false).await {
                        let at = self.clock.now();
                        self.journal
                            .lock()
                            .event(at, format!("restart of slot {slot} failed: {error:#}"));
                    }
                }
            }
        }
    }

    /// Starts again every slot whose process is not running (after the faults, so the
    /// final reads reach every slot).
    pub(crate) async fn restore(&self) {
        for slot in 0..self.cluster.slot_count() {
            if self.cluster.target(slot).is_none() && !self.cluster.is_launching(slot) {
                if let Some(process) = self.cluster.current(slot) {
                    self.cluster
                        .wait_exit(process, timing::shutdown_limit())
                        .await;
                }
                if let Err(error) = self.cluster.launch(slot, false).await {
                    let at = self.clock.now();
                    self.journal
                        .lock()
                        .event(at, format!("restart of slot {slot} failed: {error:#}"));
                }
            }
        }
    }
}
