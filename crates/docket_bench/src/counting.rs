//! A [`TaskStore`] that counts what passes through it, so the heartbeat benchmark
//! can report statements per second and their cost from what the server actually
//! sent, rather than from what the code is supposed to do.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use docket_task::model::{Outcome, TaskRecord};
use docket_task::store::{AuditEntry, Beat, SignalListener};
use docket_task::{NewTask, StaleTask, StoreError, TaskId, TaskPosition, TaskStatus, TaskStore};
use serde_json::{Map, Value};
use time::OffsetDateTime;

/// Counters since the store was made; [`Counts`] is a snapshot.
#[derive(Default)]
struct Counters {
    /// Heartbeat statements sent (counted when sent, so a window can be placed
    /// between two beats).
    heartbeats: AtomicU64,
    /// Heartbeat statements that returned; their rows and time are below.
    heartbeats_finished: AtomicU64,
    heartbeat_rows: AtomicU64,
    heartbeat_nanos: AtomicU64,
    /// Every other store call (each is one statement or one short transaction).
    other_calls: AtomicU64,
}

/// A snapshot of the counters; subtract two for a window.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counts {
    pub(crate) heartbeats: u64,
    pub(crate) heartbeats_finished: u64,
    pub(crate) heartbeat_rows: u64,
    pub(crate) heartbeat_time: Duration,
    pub(crate) other_calls: u64,
}

impl std::ops::Sub for Counts {
    type Output = Counts;

    fn sub(self, earlier: Counts) -> Counts {
        Counts {
            heartbeats: self.heartbeats - earlier.heartbeats,
            heartbeats_finished: self.heartbeats_finished - earlier.heartbeats_finished,
            heartbeat_rows: self.heartbeat_rows - earlier.heartbeat_rows,
            heartbeat_time: self.heartbeat_time.saturating_sub(earlier.heartbeat_time),
            other_calls: self.other_calls - earlier.other_calls,
        }
    }
}

/// Wraps the real store and counts calls.
pub(crate) struct CountingStore {
    inner: Arc<dyn TaskStore>,
    counters: Counters,
    /// When set, `delete_expired` deletes nothing: the replica leaves retention to
    /// another (the scale suite times one replica's pass while this one serves).
    retention_elsewhere: std::sync::atomic::AtomicBool,
}

impl CountingStore {
    pub(crate) fn new(inner: Arc<dyn TaskStore>) -> Self {
        Self {
            inner,
            counters: Counters::default(),
            retention_elsewhere: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Leaves deleting expired tasks to another replica from now on.
    pub(crate) fn leave_retention_elsewhere(&self) {
        self.retention_elsewhere
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn counts(&self) -> Counts {
        let counters = &self.counters;
        Counts {
            heartbeats: counters.heartbeats.load(Ordering::Relaxed),
            heartbeats_finished: counters.heartbeats_finished.load(Ordering::Relaxed),
            heartbeat_rows: counters.heartbeat_rows.load(Ordering::Relaxed),
            heartbeat_time: Duration::from_nanos(counters.heartbeat_nanos.load(Ordering::Relaxed)),
            other_calls: counters.other_calls.load(Ordering::Relaxed),
        }
    }

    fn other(&self) {
        self.counters.other_calls.fetch_add(1, Ordering::Relaxed);
    }
}

#[async_trait]
impl TaskStore for CountingStore {
    async fn create(&self, task: NewTask) -> Result<TaskRecord, StoreError> {
        self.other();
        self.inner.create(task).await
    }

    async fn get(&self, id: &TaskId) -> Result<Option<(TaskRecord, OffsetDateTime)>, StoreError> {
        self.other();
        self.inner.get(id).await
    }

    async fn list_followed(
        &self,
        subject: &str,
        after: Option<&TaskPosition>,
        limit: u32,
    ) -> Result<(Vec<TaskRecord>, OffsetDateTime), StoreError> {
        self.other();
        self.inner.list_followed(subject, after, limit).await
    }
    async fn finish(
        &self,
        id: &TaskId,
        outcome: Outcome,
    ) -> Result<Option<TaskStatus>, StoreError> {
        self.other();
        self.inner.finish(id, outcome).await
    }

    async fn request_cancel(&self, id: &TaskId) -> Result<(), StoreError> {
        self.other();
        self.inner.request_cancel(id).await
    }

    async fn heartbeat(&self, replica_id: &str, beats: &[Beat]) -> Result<Vec<TaskId>, StoreError> {
        let counters = &self.counters;
        counters.heartbeats.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let cancelled = self.inner.heartbeat(replica_id, beats).await;
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        counters.heartbeats_finished.fetch_add(1, Ordering::Relaxed);
        counters
            .heartbeat_rows
            .fetch_add(beats.len() as u64, Ordering::Relaxed);
        counters.heartbeat_nanos.fetch_add(nanos, Ordering::Relaxed);
        cancelled
    }

    async fn mark_draining(&self, replica_id: &str) -> Result<(), StoreError> {
        self.other();
        self.inner.mark_draining(replica_id).await
    }

    async fn require_input(
        &self,
        id: &TaskId,
        requests: Map<String, Value>,
    ) -> Result<bool, StoreError> {
        self.other();
        self.inner.require_input(id, requests).await
    }

    async fn answer_input(
        &self,
        id: &TaskId,
        responses: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        self.other();
        self.inner.answer_input(id, responses).await
    }

    async fn take_answers(&self, id: &TaskId) -> Result<Map<String, Value>, StoreError> {
        self.other();
        self.inner.take_answers(id).await
    }

    async fn fail_stale(&self, stale_after: Duration) -> Result<Vec<StaleTask>, StoreError> {
        self.other();
        self.inner.fail_stale(stale_after).await
    }

    async fn delete_expired(&self, limit: u32) -> Result<Vec<TaskId>, StoreError> {
        self.other();
        if self
            .retention_elsewhere
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Ok(Vec::new());
        }
        self.inner.delete_expired(limit).await
    }

    async fn record_audit(&self, entry: AuditEntry) -> Result<(), StoreError> {
        self.other();
        self.inner.record_audit(entry).await
    }

    async fn audit_for_tool(&self, tool: &str, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        self.other();
        self.inner.audit_for_tool(tool, limit).await
    }

    fn set_signal_listener(&self, listener: SignalListener) {
        self.inner.set_signal_listener(listener);
    }
}
