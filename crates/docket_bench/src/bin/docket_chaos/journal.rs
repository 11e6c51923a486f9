//! Everything the soak saw, as it saw it: the replica processes and what was done to
//! them, the database cuts, every task's creation, every read and every cancel with
//! the times they were sent and answered, the direct calls, the HTTP statuses and the
//! refusals. The checks judge this record against the database afterwards.
//!
//! Times are seconds since the soak started ([`Clock`]); the database's timestamps are
//! brought onto the same scale through the wall clock, which PostgreSQL on the same
//! machine shares.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::plan::Work;

/// The soak's time scale.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    start: Instant,
    start_unix: f64,
}

impl Clock {
    pub(crate) fn start() -> Self {
        let start_unix = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|since| since.as_secs_f64())
            .unwrap_or(0.0);
        Self {
            start: Instant::now(),
            start_unix,
        }
    }

    /// Seconds since the start.
    pub(crate) fn now(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    /// A Unix time (a database timestamp's epoch) on this scale.
    pub(crate) fn at_unix(&self, unix: f64) -> f64 {
        unix - self.start_unix
    }
}

/// A signal the soak sent a replica.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Signal {
    Kill,
    Term,
}

/// Why a replica process was signalled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// A planned fault.
    Fault,
    /// A SIGTERM that ran past its bound, ended with `kill -9`.
    Overrun,
    /// The end of the soak.
    Finish,
}

/// One `docket serve` process.
#[derive(Clone, Debug)]
pub(crate) struct Process {
    pub(crate) slot: usize,
    pub(crate) generation: u32,
    /// `server.replica_id` as configured; the process adds a suffix.
    pub(crate) name: String,
    /// The replica id it reported (`name` plus its suffix).
    pub(crate) replica_id: Option<String>,
    pub(crate) pid: u32,
    pub(crate) started: f64,
    pub(crate) serving: Option<f64>,
    pub(crate) url: Option<String>,
    /// Every signal sent, in order, with its reason.
    pub(crate) signals: Vec<(Signal, Reason, f64)>,
    pub(crate) exited: Option<f64>,
    pub(crate) exit_status: Option<String>,
    pub(crate) log: PathBuf,
}

impl Process {
    /// When it was sent `signal` first, if ever.
    pub(crate) fn signalled(&self, signal: Signal) -> Option<f64> {
        self.signals
            .iter()
            .find(|(sent, _, _)| *sent == signal)
            .map(|(_, _, at)| *at)
    }

    /// When it was killed with `kill -9` (a fault's or an overrun's), if it was.
    pub(crate) fn killed(&self) -> Option<f64> {
        self.signals
            .iter()
            .find(|(signal, reason, _)| *signal == Signal::Kill && *reason != Reason::Finish)
            .map(|(_, _, at)| *at)
    }

    /// When a fault sent it SIGTERM, if one did.
    pub(crate) fn terminated(&self) -> Option<f64> {
        self.signals
            .iter()
            .find(|(signal, reason, _)| *signal == Signal::Term && *reason == Reason::Fault)
            .map(|(_, _, at)| *at)
    }

    pub(crate) fn label(&self) -> String {
        format!(
            "{} (slot {}, generation {}, pid {})",
            self.replica_id.as_deref().unwrap_or(&self.name),
            self.slot,
            self.generation,
            self.pid
        )
    }

    pub(crate) fn to_json(&self) -> Value {
        json!({
            "slot": self.slot,
            "generation": self.generation,
            "name": self.name,
            "replica_id": self.replica_id,
            "pid": self.pid,
            "started": self.started,
            "serving": self.serving,
            "url": self.url,
            "signals": self.signals.iter().map(|(signal, reason, at)| json!({
                "signal": format!("{signal:?}"), "reason": format!("{reason:?}"), "at": at,
            })).collect::<Vec<_>>(),
            "exited": self.exited,
            "exit_status": self.exit_status,
            "log": self.log.display().to_string(),
        })
    }
}

#[cfg(test)]
impl Process {
    /// A process serving in `slot` since the start, for the checks' tests.
    pub(crate) fn serving_in(slot: usize) -> Self {
        Self {
            slot,
            generation: 1,
            name: format!("r{}", slot + 1),
            replica_id: None,
            pid: 1,
            started: 0.0,
            serving: Some(0.1),
            url: None,
            signals: Vec::new(),
            exited: None,
            exit_status: None,
            log: PathBuf::from("replica.log"),
        }
    }
}

#[cfg(test)]
impl TaskLog {
    /// A sleep `task_1` created at the start on process 0, for the checks' tests.
    pub(crate) fn sleep(reads: Vec<Read>, cancels: Vec<CancelCall>) -> Self {
        Self {
            id: "task_1".into(),
            op: 0,
            work: Work::Sleep { micros: 3_000_000 },
            process: 0,
            slot: 0,
            sent: 0.0,
            acknowledged: 0.1,
            reads,
            cancels,
        }
    }
}

/// One database cut of every replica at once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cut {
    pub(crate) start: f64,
    pub(crate) end: f64,
}

impl Cut {
    pub(crate) fn length(&self) -> f64 {
        self.end - self.start
    }

    /// Whether it overlaps `[from, to]`.
    pub(crate) fn overlaps(&self, from: f64, to: f64) -> bool {
        self.start <= to && from <= self.end
    }
}

/// One successful `tasks/get`.
#[derive(Clone, Debug)]
pub(crate) struct Read {
    pub(crate) sent: f64,
    pub(crate) answered: f64,
    /// The process that answered (an index into [`Journal::processes`]).
    pub(crate) process: usize,
    /// The task object answered.
    pub(crate) task: Value,
}

impl Read {
    pub(crate) fn status(&self) -> &str {
        self.task["status"].as_str().unwrap_or("")
    }

    pub(crate) fn is_terminal(&self) -> bool {
        matches!(self.status(), "completed" | "failed" | "cancelled")
    }

    /// What must never change once terminal: the status and the outcome.
    pub(crate) fn outcome(&self) -> Value {
        json!({
            "status": self.task["status"],
            "result": self.task.get("result"),
            "error": self.task.get("error"),
        })
    }
}

/// How a request was answered, in the terms the checks need.
#[derive(Clone, Debug)]
pub(crate) enum Answer {
    /// A JSON-RPC result.
    Result(Value),
    /// A JSON-RPC error.
    Error { code: i64, message: String },
    /// No answer: the connection failed or the replica was down.
    Lost(String),
}

impl Answer {
    pub(crate) fn to_json(&self) -> Value {
        match self {
            Answer::Result(result) => json!({"result": result}),
            Answer::Error { code, message } => json!({"error": {"code": code, "message": message}}),
            Answer::Lost(why) => json!({"lost": why}),
        }
    }
}

/// One `tasks/cancel`.
#[derive(Clone, Debug)]
pub(crate) struct CancelCall {
    pub(crate) sent: f64,
    pub(crate) answered: f64,
    pub(crate) process: usize,
    pub(crate) answer: Answer,
}

impl CancelCall {
    /// Acknowledged: answered with a result, not an error.
    pub(crate) fn acknowledged(&self) -> bool {
        matches!(self.answer, Answer::Result(_))
    }
}

/// A task whose creation was answered (`resultType: task`).
#[derive(Clone, Debug)]
pub(crate) struct TaskLog {
    pub(crate) id: String,
    pub(crate) op: usize,
    pub(crate) work: Work,
    /// The process that created it (and, for a task of the task table, runs it).
    pub(crate) process: usize,
    pub(crate) slot: usize,
    pub(crate) sent: f64,
    pub(crate) acknowledged: f64,
    pub(crate) reads: Vec<Read>,
    pub(crate) cancels: Vec<CancelCall>,
}

impl TaskLog {
    /// The first terminal read, by the time it was answered.
    pub(crate) fn first_terminal(&self) -> Option<&Read> {
        self.reads
            .iter()
            .filter(|read| read.is_terminal())
            .min_by(|a, b| a.answered.total_cmp(&b.answered))
    }

    pub(crate) fn to_json(&self, processes: &[Process]) -> Value {
        let who = |process: usize| {
            processes
                .get(process)
                .map_or_else(|| process.to_string(), Process::label)
        };
        json!({
            "task_id": self.id,
            "op": self.op,
            "work": format!("{:?}", self.work),
            "created_on": who(self.process),
            "slot": self.slot,
            "sent": self.sent,
            "acknowledged": self.acknowledged,
            "reads": self.reads.iter().map(|read| json!({
                "sent": read.sent, "answered": read.answered, "replica": who(read.process),
                "task": read.task,
            })).collect::<Vec<_>>(),
            "cancels": self.cancels.iter().map(|cancel| json!({
                "sent": cancel.sent, "answered": cancel.answered, "replica": who(cancel.process),
                "answer": cancel.answer.to_json(),
            })).collect::<Vec<_>>(),
        })
    }
}

/// A request of the load that did not create a task, or a direct call.
#[derive(Clone, Debug)]
pub(crate) struct CallLog {
    pub(crate) op: usize,
    pub(crate) work: Work,
    pub(crate) process: Option<usize>,
    pub(crate) sent: f64,
    pub(crate) answered: f64,
    pub(crate) answer: Answer,
}

impl CallLog {
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "op": self.op, "work": format!("{:?}", self.work), "process": self.process,
            "sent": self.sent, "answered": self.answered, "answer": self.answer.to_json(),
        })
    }
}

/// An HTTP answer with a 5xx status.
#[derive(Clone, Debug)]
pub(crate) struct ServerError {
    pub(crate) at: f64,
    pub(crate) process: usize,
    pub(crate) method: String,
    pub(crate) status: u16,
    pub(crate) retry_after: bool,
    pub(crate) body: String,
}

/// HTTP statuses and refusals, counted.
#[derive(Clone, Debug, Default)]
pub(crate) struct HttpLog {
    /// By method and status.
    pub(crate) statuses: BTreeMap<(String, u16), u64>,
    /// JSON-RPC errors by method and message (digits and ids left out).
    pub(crate) errors: BTreeMap<(String, String), u64>,
    /// Requests that got no answer, by method.
    pub(crate) lost: BTreeMap<String, u64>,
    pub(crate) server_errors: Vec<ServerError>,
    /// JSON-RPC internal errors ("see the server log"): a 500 in all but status.
    pub(crate) internal_errors: Vec<ServerError>,
}

/// A line of the timeline: what the soak did, when.
#[derive(Clone, Debug)]
pub(crate) struct Event {
    pub(crate) at: f64,
    pub(crate) what: String,
}

/// The whole record.
#[derive(Debug, Default)]
pub(crate) struct Journal {
    pub(crate) processes: Vec<Process>,
    pub(crate) cuts: Vec<Cut>,
    pub(crate) timeline: Vec<Event>,
    pub(crate) tasks: Vec<TaskLog>,
    pub(crate) by_id: HashMap<String, usize>,
    pub(crate) calls: Vec<CallLog>,
    pub(crate) http: HttpLog,
    /// When the upstream finished sending each `api_export` body, by tag.
    pub(crate) body_ends: HashMap<String, Vec<f64>>,
}

impl Journal {
    pub(crate) fn event(&mut self, at: f64, what: impl Into<String>) {
        let what = what.into();
        println!("[{at:7.2}s] {what}");
        self.timeline.push(Event { at, what });
    }

    pub(crate) fn task_mut(&mut self, id: &str) -> Option<&mut TaskLog> {
        let index = *self.by_id.get(id)?;
        self.tasks.get_mut(index)
    }

    pub(crate) fn add_task(&mut self, task: TaskLog) {
        self.by_id.insert(task.id.clone(), self.tasks.len());
        self.tasks.push(task);
    }
}

/// The journal, shared by everything that writes to it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Shared(Arc<Mutex<Journal>>);

impl Shared {
    /// The journal; a panic elsewhere while it was held leaves it as it was.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Journal> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
