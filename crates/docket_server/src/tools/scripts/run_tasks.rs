//! Script runs as tasks: the task source the script tools register with the tasks
//! surface, so `tasks/get` and `tasks/cancel` on a run id read and stop the run.
//! Its followers are whoever asked for the run and the script's owner.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use docket_catalog::scripts::RunFilter;
use docket_catalog::{PageCursor, ScriptStore};
use docket_protocol::JsonObject;
use docket_run_bridge::RunBridge;
use docket_task::{TaskId, TaskRecord};
use time::OffsetDateTime;

use super::answers::run_task_result;
use crate::error::McpError;
use crate::tasks::{FoundTask, TaskSource};

/// The runs in `script_runs`, read as tasks.
pub(crate) struct RunTasks {
    /// Where runs are read.
    pub(crate) store: Arc<dyn ScriptStore>,
    /// Where a cancel goes: it marks the run and wakes its worker wherever it is.
    pub(crate) bridge: Arc<RunBridge>,
    /// How long a run is kept after it finished.
    pub(crate) run_retention: Duration,
    /// How often clients should poll a run's task.
    pub(crate) poll_interval_ms: u64,
}

fn unavailable(error: &impl std::fmt::Display) -> McpError {
    McpError::Unavailable(format!("the run store is unavailable; try again: {error}"))
}

#[async_trait]
impl TaskSource for RunTasks {
    /// Run ids, and ids without a prefix (runs queued before ids had one).
    fn may_hold(&self, id: &TaskId) -> bool {
        docket_run_bridge::task::RUN_IDS.may_name(id)
    }

    async fn find(self: Arc<Self>, id: &TaskId) -> Result<Option<FoundTask>, McpError> {
        let Some((run, now)) = self
            .store
            .run(id.as_str())
            .await
            .map_err(|error| unavailable(&error))?
        else {
            return Ok(None);
        };
        let record = docket_run_bridge::task::run_task(
            &run,
            now,
            self.run_retention,
            self.poll_interval_ms,
            run_task_result(&run),
        );
        Ok(Some(FoundTask {
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
        let filter = RunFilter {
            visible_to: Some(subject.to_owned()),
            before: before.cloned(),
            ..RunFilter::default()
        };
        let runs = self
            .store
            .list_runs(&filter, limit)
            .await
            .map_err(|error| unavailable(&error))?;
        // A listing reads this replica's clock: a run never goes stale (its lease
        // requeues it), and its expiry is a retention bound that a skew of seconds
        // does not change in any way a caller could act on. No result is read for a
        // listing; `tasks/get` and `tasks/result` read it.
        let now = OffsetDateTime::now_utc();
        Ok(runs
            .iter()
            .map(|run| {
                let record = docket_run_bridge::task::run_task(
                    run,
                    now,
                    self.run_retention,
                    self.poll_interval_ms,
                    None,
                );
                (record, now)
            })
            .collect())
    }

    async fn cancel(&self, id: &TaskId) -> Result<(), McpError> {
        self.bridge
            .cancel(id.as_str())
            .await
            .map(|_| ())
            .map_err(|error| unavailable(&error))
    }

    async fn answer_input(&self, _id: &TaskId, _responses: &JsonObject) -> Result<(), McpError> {
        // A run never asks for input: acknowledged, nothing to apply.
        Ok(())
    }
}
