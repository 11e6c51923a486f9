//! Where task ids are found: the [`TaskSource`] trait, and the task table's own
//! source, [`CallTasks`].

use docket_task::runtime::in_store_span;
use std::sync::Arc;

use async_trait::async_trait;
use docket_catalog::PageCursor;
use docket_protocol::JsonObject;
use docket_task::runtime::TaskRuntime;
use docket_task::store::TaskSignal;
use docket_task::{IdPrefix, Outcome, TaskId, TaskPosition, TaskRecord};
use time::OffsetDateTime;

use crate::error::McpError;

/// A task found in a source, with the source's clock and the source itself, which
/// cancels it and takes its input.
pub struct FoundTask {
    /// The task as the tasks surface shows it.
    pub record: TaskRecord,
    /// The source's clock when it was read.
    pub now: OffsetDateTime,
    /// Where it was found.
    pub source: Arc<dyn TaskSource>,
}

/// A place task ids are looked up: the task table, or rows a tool keeps for work
/// that is durable on its own (a script run in `script_runs` is its own task).
/// Registered with the tasks surface ([`crate::AppBuilder::task_source`]); `tasks/*`
/// reads every source for every id. A tool whose [`crate::registry::ToolHandler::start_own_task`]
/// answers its own task registers the source its records are read from.
#[async_trait]
pub trait TaskSource: Send + Sync {
    /// Whether a task with this id could be in this source; `tasks/*` skips reading a
    /// source that says no. Decide it from the id's text alone (its prefix, see
    /// [`docket_task::id`]), never from what is stored, so that which sources are
    /// read never tells whether a task exists. Every id, unless overridden.
    fn may_hold(&self, _id: &TaskId) -> bool {
        true
    }

    /// The task with this id, if this source has it. Who may follow it is decided
    /// by the caller, from the record.
    ///
    /// # Errors
    /// [`McpError::Unavailable`] when the source's store cannot be read.
    async fn find(self: Arc<Self>, id: &TaskId) -> Result<Option<FoundTask>, McpError>;

    /// A page of the tasks `subject` follows in this source (it started them, or is
    /// their extra follower), newest first by creation time then id, strictly
    /// before `before`, at most `limit`; each with the source's clock when it was
    /// read. Expired tasks may be included: the caller drops them.
    ///
    /// # Errors
    /// [`McpError::Unavailable`] when the source's store cannot be read.
    async fn list_followed(
        &self,
        subject: &str,
        before: Option<&PageCursor>,
        limit: u32,
    ) -> Result<Vec<(TaskRecord, OffsetDateTime)>, McpError>;

    /// Asks the task to stop, wherever it runs.
    ///
    /// # Errors
    /// [`McpError::Unavailable`] when the request cannot be stored.
    async fn cancel(&self, id: &TaskId) -> Result<(), McpError>;

    /// Applies a client's input responses. A source whose tasks never ask for input
    /// acknowledges and does nothing.
    ///
    /// # Errors
    /// [`McpError::Unavailable`] when the answers cannot be stored.
    async fn answer_input(&self, id: &TaskId, responses: &JsonObject) -> Result<(), McpError>;

    /// Called when `found` reads as failed because its replica went stale, before
    /// that is answered: a source that can records the failure (compare-and-set, so
    /// an ending that landed first stands) and answers the task as it is then, so a
    /// status a reader is told is final never changes after. The default records
    /// nothing and answers `found`: a source whose work outlives its replica (a run
    /// is taken over from its lease) keeps the reading a view.
    ///
    /// # Errors
    /// [`McpError::Unavailable`] when the failure cannot be recorded.
    async fn settle_stale(self: Arc<Self>, found: FoundTask) -> Result<FoundTask, McpError> {
        Ok(found)
    }
}

/// The prefix of the ids of the tasks the pipeline creates for calls (`task_…`):
/// `tasks/*` looks an id with it up only in the task table. An embedder writing rows
/// for calls into the task table itself mints their ids with it too.
pub const CALL_TASK_IDS: IdPrefix = IdPrefix::new("task");

/// The task table: tasks the pipeline created for calls (exports and every other
/// tool that runs as a task).
pub(crate) struct CallTasks {
    /// The runtime over the task store.
    pub(crate) runtime: Arc<TaskRuntime>,
}

fn store_failure(error: docket_task::StoreError) -> McpError {
    McpError::Unavailable(format!("the task store is unavailable; try again: {error}"))
}

#[async_trait]
impl TaskSource for CallTasks {
    /// Ids the pipeline minted, and ids without a prefix (minted before prefixes, or
    /// by an embedder that writes the task table itself).
    fn may_hold(&self, id: &TaskId) -> bool {
        CALL_TASK_IDS.may_name(id)
    }

    async fn find(self: Arc<Self>, id: &TaskId) -> Result<Option<FoundTask>, McpError> {
        let found = in_store_span("get", self.runtime.store().get(id))
            .await
            .map_err(store_failure)?;
        Ok(found.map(|(record, now)| FoundTask {
            record,
            now,
            source: self,
        }))
    }

    async fn list_followed(
        &self,
        subject: &str,
        before: Option<&PageCursor>,
        limit: u32,
    ) -> Result<Vec<(TaskRecord, OffsetDateTime)>, McpError> {
        let after = before.map(|cursor| TaskPosition {
            created_at: cursor.created_at,
            id: TaskId::from_stored(cursor.id.clone()),
        });
        let (records, now) = self
            .runtime
            .store()
            .list_followed(subject, after.as_ref(), limit)
            .await
            .map_err(store_failure)?;
        Ok(records.into_iter().map(|record| (record, now)).collect())
    }

    async fn cancel(&self, id: &TaskId) -> Result<(), McpError> {
        self.runtime.cancel(id).await.map_err(store_failure)
    }

    async fn settle_stale(self: Arc<Self>, found: FoundTask) -> Result<FoundTask, McpError> {
        let id = found.record.id.clone();
        let failed = Outcome::Failed(found.record.stale_error());
        if self
            .runtime
            .store()
            .finish(&id, failed)
            .await
            .map_err(store_failure)?
            .is_some()
        {
            tracing::info!(task = %id, "recorded how a task ended: its replica went stale");
            self.runtime.signal(TaskSignal::Changed(id.clone()));
        }
        // Read again: the failure just recorded, or the ending that landed first.
        match in_store_span("get", self.runtime.store().get(&id))
            .await
            .map_err(store_failure)?
        {
            Some((record, now)) => Ok(FoundTask {
                record,
                now,
                source: self,
            }),
            None => Ok(found),
        }
    }

    async fn answer_input(&self, id: &TaskId, responses: &JsonObject) -> Result<(), McpError> {
        self.runtime
            .store()
            .answer_input(id, responses)
            .await
            .map_err(store_failure)?;
        self.runtime.signal(TaskSignal::Input(id.clone()));
        // What it asks for changed, and it may be working again: followers here
        // read it again (other replicas' hear it through the store).
        self.runtime.signal(TaskSignal::Changed(id.clone()));
        Ok(())
    }
}
