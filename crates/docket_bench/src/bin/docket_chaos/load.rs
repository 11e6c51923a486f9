//! The load: each [`Op`] of the plan sent at its time to its replica (the next one up
//! when that one is down); every task it creates read with `tasks/get` on every
//! replica in turn until each has read it terminal, and cancelled, when the plan says
//! so, through another replica than the one that created it.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cluster::{Cluster, Target};
use crate::journal::{Answer, CallLog, CancelCall, Clock, Read, Shared, TaskLog};
use crate::mcp::Mcp;
use crate::plan::{CancelPlan, Op, Work};
use crate::timing;

/// The script every run runs: `calls` `diagnostics_sleep` calls of `seconds` each.
pub(crate) const SCRIPT_NAME: &str = "chaos_calls";

/// The script's source.
pub(crate) const SCRIPT_SOURCE: &str = "for i in range(run.params[\"calls\"]):\n    platform.call(\"diagnostics_sleep\", {\"seconds\": run.params[\"seconds\"]})\nprint(\"done\")\n";

/// The SQL each `trino_export` runs: a thousand rows, in pages the double spaces out.
pub(crate) const EXPORT_SQL: &str = "SELECT * FROM synthetic.big.rows_1k";

/// After the first terminal read, how long a task is still read on the other replicas.
const READ_ON_AFTER_TERMINAL: Duration = Duration::from_secs(6);

/// Everything a request of the load needs.
#[derive(Clone)]
pub(crate) struct Load {
    pub(crate) cluster: std::sync::Arc<Cluster>,
    pub(crate) mcp: Mcp,
    pub(crate) journal: Shared,
    pub(crate) clock: Clock,
}

impl Load {
    /// Sends every op at its time; returns the readers and cancels still running,
    /// which stop when their tasks were read terminal everywhere or `stop` fires.
    pub(crate) async fn run(&self, ops: Vec<Op>, stop: &CancellationToken) -> JoinSet<()> {
        let mut running = JoinSet::new();
        for op in ops {
            let at = op.at.as_secs_f64();
            let wait = (at - self.clock.now()).max(0.0);
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
                () = stop.cancelled() => break,
            }
            let load = self.clone();
            let stop = stop.clone();
            running.spawn(async move { load.send(op, stop).await });
            // Finished ones are reaped as the load goes on.
            while running.try_join_next().is_some() {}
        }
        running
    }

    /// The slot `preferred` if it has a process that serves, else the next that does.
    fn pick(&self, preferred: usize) -> Option<(usize, Target)> {
        let slots = self.cluster.slot_count();
        (0..slots)
            .map(|offset| (preferred + offset) % slots)
            .find_map(|slot| self.cluster.target(slot).map(|target| (slot, target)))
    }

    async fn send(&self, op: Op, stop: CancellationToken) {
        let sent = self.clock.now();
        let Some((slot, target)) = self.pick(op.slot) else {
            self.journal.lock().calls.push(CallLog {
                op: op.index,
                work: op.work.clone(),
                process: None,
                sent,
                answered: sent,
                answer: Answer::Lost("no replica serves".to_owned()),
            });
            return;
        };
        let (tool, arguments, tasks) = request_of(&op.work);
        let answer = self
            .mcp
            .request(
                target.process,
                &target.url,
                "tools/call",
                json!({"name": tool, "arguments": arguments}),
                tasks,
            )
            .await;
        let answered = self.clock.now();
        let task_id = match &answer {
            Answer::Result(result) if result["resultType"] == "task" => {
                result["taskId"].as_str().map(str::to_owned)
            }
            _ => None,
        };
        let Some(task_id) = task_id else {
            self.journal.lock().calls.push(CallLog {
                op: op.index,
                work: op.work.clone(),
                process: Some(target.process),
                sent,
                answered,
                answer,
            });
            return;
        };
        self.journal.lock().add_task(TaskLog {
            id: task_id.clone(),
            op: op.index,
            work: op.work.clone(),
            process: target.process,
            slot,
            sent,
            acknowledged: answered,
            reads: Vec::new(),
            cancels: Vec::new(),
        });
        let cancel = op.cancel.clone().map(|plan| {
            let load = self.clone();
            let (task_id, stop) = (task_id.clone(), stop.clone());
            tokio::spawn(async move { load.cancel(&task_id, slot, answered, plan, &stop).await })
        });
        self.follow(&task_id, slot, &stop).await;
        if let Some(cancel) = cancel {
            let _ = cancel.await;
        }
    }

    /// Reads the task on every replica in turn until each has read it terminal (or
    /// [`READ_ON_AFTER_TERMINAL`] passed since the first did), or `stop` fires.
    async fn follow(&self, task_id: &str, created_in: usize, stop: &CancellationToken) {
        let slots = self.cluster.slot_count();
        let mut turn = created_in;
        let mut terminal_in = vec![false; slots];
        let mut first_terminal: Option<f64> = None;
        loop {
            turn = (turn + 1) % slots;
            if let Some(target) = self.cluster.target(turn)
                && let Some(read) = self.read(task_id, &target).await
            {
                if read.is_terminal() {
                    terminal_in[turn] = true;
                    first_terminal.get_or_insert(read.answered);
                }
                if let Some(task) = self.journal.lock().task_mut(task_id) {
                    task.reads.push(read);
                }
            }
            let settled = terminal_in.iter().all(|seen| *seen)
                || first_terminal
                    .is_some_and(|at| self.clock.now() - at > READ_ON_AFTER_TERMINAL.as_secs_f64());
            if settled {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep(timing::POLL_EVERY) => {}
                () = stop.cancelled() => return,
            }
        }
    }

    /// One `tasks/get` of `task_id` on `target`: the read, when it was answered with
    /// the task.
    pub(crate) async fn read(&self, task_id: &str, target: &Target) -> Option<Read> {
        let (sent, answer, answered) = self.exchange(target, "tasks/get", task_id).await;
        match answer {
            Answer::Result(task) => Some(Read {
                sent,
                answered,
                process: target.process,
                task,
            }),
            _ => None,
        }
    }

    /// `method` (a `tasks/*` method) about `task_id` on `target`: when it was sent,
    /// its answer, and when that came.
    async fn exchange(&self, target: &Target, method: &str, task_id: &str) -> (f64, Answer, f64) {
        let sent = self.clock.now();
        let answer = self
            .mcp
            .request(
                target.process,
                &target.url,
                method,
                json!({"taskId": task_id}),
                true,
            )
            .await;
        (sent, answer, self.clock.now())
    }

    /// Cancels `task_id` through another slot than `created_in`, `plan.after` after
    /// its creation was answered at `acknowledged`.
    async fn cancel(
        &self,
        task_id: &str,
        created_in: usize,
        acknowledged: f64,
        plan: CancelPlan,
        stop: &CancellationToken,
    ) {
        let wait = (acknowledged + plan.after.as_secs_f64() - self.clock.now()).max(0.0);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs_f64(wait)) => {}
            () = stop.cancelled() => return,
        }
        let slots = self.cluster.slot_count();
        // The planned other slot, else any other one that serves; never the creator.
        let target = (0..slots)
            .map(|offset| (created_in + plan.via_offset + offset) % slots)
            .filter(|slot| *slot != created_in)
            .find_map(|slot| self.cluster.target(slot));
        let Some(target) = target else {
            let at = self.clock.now();
            self.journal.lock().event(
                at,
                format!("cancel of {task_id} not sent: no other replica serves"),
            );
            return;
        };
        let (sent, answer, answered) = self.exchange(&target, "tasks/cancel", task_id).await;
        if let Some(task) = self.journal.lock().task_mut(task_id) {
            task.cancels.push(CancelCall {
                sent,
                answered,
                process: target.process,
                answer,
            });
        }
    }
}

/// The tool, arguments and whether the tasks extension is declared, for `work`.
fn request_of(work: &Work) -> (&'static str, Value, bool) {
    let tool = work.tool();
    match work {
        Work::Sleep { micros } => (tool, json!({"seconds": seconds_of(*micros)}), true),
        Work::Direct { micros } => (tool, json!({"seconds": seconds_of(*micros)}), false),
        Work::TrinoExport { name } => (
            tool,
            json!({"sql": EXPORT_SQL, "format": "csv", "name": name}),
            true,
        ),
        Work::ApiExport {
            name,
            chunks,
            delay_ms,
        } => (
            tool,
            json!({
                "connection": "upstream",
                "method": "GET",
                "path": format!("/export/{name}/{chunks}/{delay_ms}"),
                "name": name,
            }),
            true,
        ),
        Work::Run { seconds, calls } => (
            tool,
            json!({"name": SCRIPT_NAME, "args": {"seconds": seconds, "calls": calls}}),
            true,
        ),
    }
}

/// A sleep's length in seconds, as sent (and as its audit row keeps it).
pub(crate) fn seconds_of(micros: i64) -> f64 {
    micros as f64 / 1e6
}

/// A sleep's length back from the seconds an audit row keeps.
pub(crate) fn micros_of(seconds: f64) -> i64 {
    (seconds * 1e6).round() as i64
}
