//! What the checks share: the journal and the database snapshot side by side, rows
//! looked up by id, and the questions about faults several checks ask (was a replica
//! killed in this window, was the database cut at that instant).

use std::collections::HashMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::database::{RunRow, Snapshot, TaskRow};
use crate::journal::{Clock, Journal, Signal, TaskLog};

/// Inputs of every check.
pub(crate) struct Facts<'a> {
    pub(crate) journal: &'a Journal,
    pub(crate) db: &'a Snapshot,
    pub(crate) clock: Clock,
    pub(crate) assets_dir: PathBuf,
    /// When the final round of reads began.
    pub(crate) final_reads_from: f64,
    tasks: HashMap<&'a str, &'a TaskRow>,
    runs: HashMap<&'a str, &'a RunRow>,
}

impl<'a> Facts<'a> {
    pub(crate) fn new(
        journal: &'a Journal,
        db: &'a Snapshot,
        clock: Clock,
        assets_dir: PathBuf,
        final_reads_from: f64,
    ) -> Self {
        Self {
            journal,
            db,
            clock,
            assets_dir,
            final_reads_from,
            tasks: db.tasks.iter().map(|row| (row.id.as_str(), row)).collect(),
            runs: db.runs.iter().map(|row| (row.id.as_str(), row)).collect(),
        }
    }

    pub(crate) fn task_row(&self, id: &str) -> Option<&'a TaskRow> {
        self.tasks.get(id).copied()
    }

    pub(crate) fn run_row(&self, id: &str) -> Option<&'a RunRow> {
        self.runs.get(id).copied()
    }

    /// The task's status as `tasks/get` names it, from its row.
    pub(crate) fn db_status(&self, task: &TaskLog) -> Option<String> {
        if task.work.is_call_task() {
            return self.task_row(&task.id).map(|row| row.status.clone());
        }
        let run = self.run_row(&task.id)?;
        Some(
            match (run.status.as_str(), run.error_kind.as_deref()) {
                ("queued" | "running", _) => "working",
                ("succeeded", _) => "completed",
                ("failed", Some("platform")) => "failed",
                ("failed", _) => "completed",
                _ => "cancelled",
            }
            .to_owned(),
        )
    }

    /// When its ending was written, on the soak's clock: the task row's last update
    /// once ended, a run's `finished_at`.
    pub(crate) fn db_ended_at(&self, task: &TaskLog) -> Option<f64> {
        let unix = if task.work.is_call_task() {
            let row = self.task_row(&task.id)?;
            matches!(row.status.as_str(), "completed" | "failed" | "cancelled")
                .then_some(row.last_updated_at)?
        } else {
            self.run_row(&task.id)?.finished_at?
        };
        Some(self.clock.at_unix(unix))
    }

    /// When a cancel was recorded on the running task or run, on the soak's clock.
    pub(crate) fn db_cancel_requested_at(&self, task: &TaskLog) -> Option<f64> {
        let unix = if task.work.is_call_task() {
            self.task_row(&task.id)?.cancel_requested_at?
        } else {
            self.run_row(&task.id)?.cancel_requested_at?
        };
        Some(self.clock.at_unix(unix))
    }

    /// Whether `process` was killed with `kill -9` before `until`.
    pub(crate) fn killed_before(&self, process: usize, until: f64) -> bool {
        self.journal.processes[process]
            .killed()
            .is_some_and(|at| at < until)
    }

    /// Whether any replica was killed with `kill -9` inside `[from, to]`.
    pub(crate) fn any_kill_in(&self, from: f64, to: f64) -> bool {
        self.journal
            .processes
            .iter()
            .filter_map(|process| process.killed())
            .any(|at| (from..=to).contains(&at))
    }

    /// Whether the database was cut at `at`.
    pub(crate) fn cut_at(&self, at: f64) -> bool {
        self.journal
            .cuts
            .iter()
            .any(|cut| (cut.start..=cut.end).contains(&at))
    }

    /// The cut going on at `at`, if any, said for a violation's detail.
    pub(crate) fn cut_note(&self, at: f64) -> String {
        self.journal
            .cuts
            .iter()
            .find(|cut| (cut.start..=cut.end).contains(&at))
            .map_or_else(String::new, |cut| {
                format!(
                    " (the database was cut from {:.2} s to {:.2} s)",
                    cut.start, cut.end
                )
            })
    }

    /// Whether a row written in the background from `at` for up to `patience` seconds
    /// (by `process`, or by any replica when `None`) may rightly be missing: its writer
    /// was killed meanwhile, or shut down while the database was cut.
    pub(crate) fn background_write_excused(
        &self,
        process: Option<usize>,
        at: f64,
        patience: f64,
    ) -> bool {
        let candidates: Vec<usize> = match process {
            Some(process) => vec![process],
            None => (0..self.journal.processes.len()).collect(),
        };
        candidates.into_iter().any(|index| {
            let record = &self.journal.processes[index];
            let killed = record
                .killed()
                .is_some_and(|killed| (at - 0.5..=at + patience).contains(&killed));
            let stopped_while_cut = record.signalled(Signal::Term).is_some()
                && record.exited.is_some_and(|exited| {
                    (at..=at + patience).contains(&exited) && self.cut_at(exited)
                });
            killed || stopped_while_cut
        })
    }
}

/// `structuredContent` of a completed task's result.
pub(crate) fn structured(result: &Value) -> &Value {
    &result["structuredContent"]
}

/// Whether a completed task's result is a tool error.
pub(crate) fn is_tool_error(result: &Value) -> bool {
    result["isError"] == Value::Bool(true)
}
