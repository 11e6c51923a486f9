//! An in-memory [`TaskStore`]: for unit tests and for embedders that want the task
//! protocol without durability. One process only; nothing survives a restart.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::id::TaskId;
use crate::model::{Outcome, TaskRecord, TaskStatus};
use crate::store::{
    AuditContext, AuditEntry, Beat, NewTask, SignalListener, StaleTask, StoreError, TaskPosition,
    TaskSignal, TaskStore,
};

/// A clock the store reads; tests pass a fixed or stepping one.
pub type Clock = Box<dyn Fn() -> OffsetDateTime + Send + Sync>;

struct Entry {
    record: TaskRecord,
    audit: AuditContext,
    answers: Map<String, Value>,
    /// Every input key ever requested, so keys stay unique for the task's life.
    requested_keys: Vec<String>,
}

/// A [`TaskStore`] in a mutex-guarded map.
pub struct MemoryStore {
    tasks: Mutex<HashMap<TaskId, Entry>>,
    /// Each replica's last beat: its running tasks are as alive as it is.
    replicas: Mutex<HashMap<String, OffsetDateTime>>,
    /// The replicas that began a graceful shutdown.
    draining: Mutex<Vec<String>>,
    audit: Mutex<Vec<AuditEntry>>,
    listener: Mutex<Option<SignalListener>>,
    clock: Clock,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::with_clock(Box::new(OffsetDateTime::now_utc))
    }
}

impl MemoryStore {
    /// A store reading the system clock.
    pub fn new() -> Self {
        Self::default()
    }

    /// A store reading `clock`.
    pub fn with_clock(clock: Clock) -> Self {
        Self {
            tasks: Mutex::default(),
            replicas: Mutex::default(),
            draining: Mutex::default(),
            audit: Mutex::default(),
            listener: Mutex::default(),
            clock,
        }
    }

    /// The replicas that said they are draining, in the order they said it.
    pub fn draining_replicas(&self) -> Vec<String> {
        lock(&self.draining).clone()
    }

    /// Every audit row written so far.
    pub fn audit_entries(&self) -> Vec<AuditEntry> {
        lock(&self.audit).clone()
    }

    /// A task as read: its stamp is its replica's last beat, or its own (taken
    /// when it was created) if that is later or the replica never beat.
    fn as_read(
        &self,
        record: &TaskRecord,
        replicas: &HashMap<String, OffsetDateTime>,
    ) -> TaskRecord {
        let mut read = record.clone();
        if let Some(beat) = replicas.get(&record.replica_id) {
            read.heartbeat_at = read.heartbeat_at.max(*beat);
        }
        read.replica_draining = lock(&self.draining).contains(&record.replica_id);
        read
    }

    fn signal(&self, signal: TaskSignal) {
        let listener = lock(&self.listener).clone();
        if let Some(listener) = listener {
            listener(signal);
        }
    }

    /// Ends `entry` with `outcome` if it has not ended; returns the audit row to write.
    fn end(entry: &mut Entry, outcome: Outcome, now: OffsetDateTime) -> Option<AuditEntry> {
        let record = &mut entry.record;
        if record.status.is_terminal() {
            return None;
        }
        let duration_ms =
            i64::try_from((now - record.created_at).whole_milliseconds()).unwrap_or(i64::MAX);
        let audit = AuditEntry::for_task(
            &record.id,
            &record.tool,
            &record.owner,
            entry.audit.clone(),
            &outcome,
            duration_ms,
        );
        // A cancel asked for first wins, as the stores' compare-and-set has it;
        // the row keeps the attribution of the ending the work reported.
        let (outcome, audit) = if record.cancel_requested_at.is_some() {
            (Outcome::Cancelled, audit.cancelled_instead())
        } else {
            (outcome, audit)
        };
        record.status = outcome.status();
        record.last_updated_at = now;
        record.input_requests = None;
        match outcome {
            Outcome::Completed(result) => record.result = Some(result),
            Outcome::Failed(error) => {
                record.status_message = Some(error.message.clone());
                record.error = Some(error);
            }
            Outcome::Cancelled => record.status_message = Some("cancelled".into()),
        }
        Some(audit)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep serving it.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait]
impl TaskStore for MemoryStore {
    async fn create(&self, task: NewTask) -> Result<TaskRecord, StoreError> {
        let now = (self.clock)();
        let (id, audit) = (task.id.clone(), task.audit.clone());
        let expires_at = task.retention.map(|retention| now + retention);
        let record = task.into_record(now, expires_at);
        let mut tasks = lock(&self.tasks);
        if tasks.contains_key(&id) {
            return Err(StoreError::Duplicate);
        }
        let entry = Entry {
            record: record.clone(),
            audit,
            answers: Map::new(),
            requested_keys: Vec::new(),
        };
        tasks.insert(id, entry);
        Ok(record)
    }

    async fn get(&self, id: &TaskId) -> Result<Option<(TaskRecord, OffsetDateTime)>, StoreError> {
        let now = (self.clock)();
        let replicas = lock(&self.replicas);
        Ok(lock(&self.tasks)
            .get(id)
            .map(|entry| (self.as_read(&entry.record, &replicas), now)))
    }

    async fn list_followed(
        &self,
        subject: &str,
        after: Option<&TaskPosition>,
        limit: u32,
    ) -> Result<(Vec<TaskRecord>, OffsetDateTime), StoreError> {
        let now = (self.clock)();
        let replicas = lock(&self.replicas);
        let mut page: Vec<TaskRecord> = lock(&self.tasks)
            .values()
            .map(|entry| &entry.record)
            .filter(|record| {
                (record.owner == subject || record.extra_follower.as_deref() == Some(subject))
                    && record.expires_at.is_none_or(|expires_at| expires_at > now)
                    && after.is_none_or(|position| position.precedes(record))
            })
            .map(|record| self.as_read(record, &replicas))
            .collect();
        page.sort_by(|a, b| (b.created_at, b.id.as_str()).cmp(&(a.created_at, a.id.as_str())));
        page.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
        Ok((page, now))
    }

    async fn finish(
        &self,
        id: &TaskId,
        outcome: Outcome,
    ) -> Result<Option<TaskStatus>, StoreError> {
        let now = (self.clock)();
        let ended = lock(&self.tasks).get_mut(id).and_then(|entry| {
            Self::end(entry, outcome, now).map(|audit| (entry.record.status, audit))
        });
        Ok(ended.map(|(status, audit)| {
            lock(&self.audit).push(audit);
            status
        }))
    }

    async fn request_cancel(&self, id: &TaskId) -> Result<(), StoreError> {
        let now = (self.clock)();
        let asked = match lock(&self.tasks).get_mut(id) {
            Some(entry) if !entry.record.status.is_terminal() => {
                entry.record.cancel_requested_at.get_or_insert(now);
                true
            }
            _ => false,
        };
        if asked {
            self.signal(TaskSignal::Cancel(id.clone()));
        }
        Ok(())
    }

    async fn heartbeat(&self, replica_id: &str, beats: &[Beat]) -> Result<Vec<TaskId>, StoreError> {
        let now = (self.clock)();
        lock(&self.replicas).insert(replica_id.to_owned(), now);
        let mut tasks = lock(&self.tasks);
        for beat in beats {
            if let Some(entry) = tasks.get_mut(&beat.id) {
                let record = &mut entry.record;
                if record.replica_id != replica_id || record.status.is_terminal() {
                    continue;
                }
                if beat.status_message.is_some() && beat.status_message != record.status_message {
                    record.status_message.clone_from(&beat.status_message);
                    record.last_updated_at = now;
                }
            }
        }
        Ok(tasks
            .iter()
            .filter(|(_, entry)| {
                let record = &entry.record;
                record.replica_id == replica_id
                    && !record.status.is_terminal()
                    && record.cancel_requested_at.is_some()
            })
            .map(|(id, _)| id.clone())
            .collect())
    }

    async fn mark_draining(&self, replica_id: &str) -> Result<(), StoreError> {
        let mut draining = lock(&self.draining);
        if !draining.iter().any(|replica| replica == replica_id) {
            draining.push(replica_id.to_owned());
        }
        Ok(())
    }

    async fn require_input(
        &self,
        id: &TaskId,
        requests: Map<String, Value>,
    ) -> Result<bool, StoreError> {
        let now = (self.clock)();
        let mut tasks = lock(&self.tasks);
        let Some(entry) = tasks.get_mut(id) else {
            return Ok(false);
        };
        if entry.record.status.is_terminal() {
            return Ok(false);
        }
        let mut outstanding = match entry.record.input_requests.take() {
            Some(Value::Object(outstanding)) => outstanding,
            _ => Map::new(),
        };
        for (key, request) in requests {
            if !entry.requested_keys.contains(&key) {
                entry.requested_keys.push(key.clone());
                outstanding.insert(key, request);
            }
        }
        entry.record.input_requests = Some(Value::Object(outstanding));
        entry.record.status = TaskStatus::InputRequired;
        entry.record.last_updated_at = now;
        Ok(true)
    }

    async fn answer_input(
        &self,
        id: &TaskId,
        responses: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        let now = (self.clock)();
        let answered = {
            let mut tasks = lock(&self.tasks);
            let Some(entry) = tasks.get_mut(id) else {
                return Ok(());
            };
            let Some(Value::Object(outstanding)) = entry.record.input_requests.as_mut() else {
                return Ok(());
            };
            let mut answered = false;
            for (key, response) in responses {
                if outstanding.remove(key).is_some() {
                    entry.answers.insert(key.clone(), response.clone());
                    answered = true;
                }
            }
            if outstanding.is_empty() {
                entry.record.input_requests = None;
                if entry.record.status == TaskStatus::InputRequired {
                    entry.record.status = TaskStatus::Working;
                }
            }
            if answered {
                entry.record.last_updated_at = now;
            }
            answered
        };
        if answered {
            self.signal(TaskSignal::Input(id.clone()));
        }
        Ok(())
    }

    async fn take_answers(&self, id: &TaskId) -> Result<Map<String, Value>, StoreError> {
        Ok(lock(&self.tasks)
            .get_mut(id)
            .map(|entry| std::mem::take(&mut entry.answers))
            .unwrap_or_default())
    }

    async fn fail_stale(&self, stale_after: Duration) -> Result<Vec<StaleTask>, StoreError> {
        let now = (self.clock)();
        let mut failed = Vec::new();
        let mut audits = Vec::new();
        let replicas = lock(&self.replicas).clone();
        // Forget the replicas silent as long that run nothing any more (the
        // task lock is let go first: `get` takes the replica lock, then the task lock).
        let running: std::collections::HashSet<String> = lock(&self.tasks)
            .values()
            .filter(|entry| !entry.record.status.is_terminal())
            .map(|entry| entry.record.replica_id.clone())
            .collect();
        lock(&self.replicas)
            .retain(|replica, beat| now - *beat <= stale_after || running.contains(replica));
        for (id, entry) in lock(&self.tasks).iter_mut() {
            let read = self.as_read(&entry.record, &replicas);
            if read.is_stale(now, stale_after)
                && let Some(audit) = Self::end(entry, Outcome::Failed(read.stale_error()), now)
            {
                audits.push(audit);
                failed.push(StaleTask {
                    id: id.clone(),
                    trace: entry.record.trace_context.clone(),
                });
            }
        }
        lock(&self.audit).extend(audits);
        Ok(failed)
    }

    async fn delete_expired(&self, limit: u32) -> Result<Vec<TaskId>, StoreError> {
        let now = (self.clock)();
        let mut tasks = lock(&self.tasks);
        let expired: Vec<TaskId> = tasks
            .iter()
            .filter(|(_, entry)| {
                entry
                    .record
                    .expires_at
                    .is_some_and(|expires_at| expires_at <= now)
            })
            .map(|(id, _)| id.clone())
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .collect();
        for id in &expired {
            tasks.remove(id);
        }
        Ok(expired)
    }

    async fn record_audit(&self, entry: AuditEntry) -> Result<(), StoreError> {
        lock(&self.audit).push(entry);
        Ok(())
    }

    async fn audit_for_tool(&self, tool: &str, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        Ok(lock(&self.audit)
            .iter()
            .rev()
            .filter(|entry| entry.tool == tool)
            .take(limit)
            .cloned()
            .collect())
    }

    fn set_signal_listener(&self, listener: SignalListener) {
        *lock(&self.listener) = Some(listener);
    }
}

/// A [`MemoryStore`] that fails every call on demand, as a database that went
/// away would: for tests of what callers do when the store is unavailable.
#[derive(Default)]
pub struct FlakyStore {
    inner: MemoryStore,
    failing: std::sync::atomic::AtomicBool,
    refused: std::sync::atomic::AtomicUsize,
}

impl FlakyStore {
    /// From now on every call fails (`true`) or is served (`false`).
    pub fn set_failing(&self, failing: bool) {
        self.failing
            .store(failing, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many calls were refused so far: a test waits on it to know that a call
    /// arrived during the outage it made, instead of guessing how long that takes.
    pub fn refused_calls(&self) -> usize {
        self.refused.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn check(&self) -> Result<(), StoreError> {
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            self.refused
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err(StoreError::Unavailable(
                "the test made the store fail".into(),
            ))
        } else {
            Ok(())
        }
    }
}

#[async_trait]
impl TaskStore for FlakyStore {
    async fn create(&self, task: NewTask) -> Result<TaskRecord, StoreError> {
        self.check()?;
        self.inner.create(task).await
    }
    async fn get(&self, id: &TaskId) -> Result<Option<(TaskRecord, OffsetDateTime)>, StoreError> {
        self.check()?;
        self.inner.get(id).await
    }
    async fn list_followed(
        &self,
        subject: &str,
        after: Option<&TaskPosition>,
        limit: u32,
    ) -> Result<(Vec<TaskRecord>, OffsetDateTime), StoreError> {
        self.check()?;
        self.inner.list_followed(subject, after, limit).await
    }
    async fn finish(
        &self,
        id: &TaskId,
        outcome: Outcome,
    ) -> Result<Option<TaskStatus>, StoreError> {
        self.check()?;
        self.inner.finish(id, outcome).await
    }
    async fn request_cancel(&self, id: &TaskId) -> Result<(), StoreError> {
        self.check()?;
        self.inner.request_cancel(id).await
    }
    async fn heartbeat(&self, replica_id: &str, beats: &[Beat]) -> Result<Vec<TaskId>, StoreError> {
        self.check()?;
        self.inner.heartbeat(replica_id, beats).await
    }
    async fn mark_draining(&self, replica_id: &str) -> Result<(), StoreError> {
        self.check()?;
        self.inner.mark_draining(replica_id).await
    }
    async fn require_input(
        &self,
        id: &TaskId,
        requests: Map<String, Value>,
    ) -> Result<bool, StoreError> {
        self.check()?;
        self.inner.require_input(id, requests).await
    }
    async fn answer_input(
        &self,
        id: &TaskId,
        responses: &Map<String, Value>,
    ) -> Result<(), StoreError> {
        self.check()?;
        self.inner.answer_input(id, responses).await
    }
    async fn take_answers(&self, id: &TaskId) -> Result<Map<String, Value>, StoreError> {
        self.check()?;
        self.inner.take_answers(id).await
    }
    async fn fail_stale(&self, stale_after: Duration) -> Result<Vec<StaleTask>, StoreError> {
        self.check()?;
        self.inner.fail_stale(stale_after).await
    }
    async fn delete_expired(&self, limit: u32) -> Result<Vec<TaskId>, StoreError> {
        self.check()?;
        self.inner.delete_expired(limit).await
    }
    async fn record_audit(&self, entry: AuditEntry) -> Result<(), StoreError> {
        self.check()?;
        self.inner.record_audit(entry).await
    }
    async fn audit_for_tool(&self, tool: &str, limit: u32) -> Result<Vec<AuditEntry>, StoreError> {
        self.check()?;
        self.inner.audit_for_tool(tool, limit).await
    }
}
