#![doc = include_str!("../README.md")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub mod authoring;
pub mod child;
mod convert;
mod date;
mod globals;
mod log;
mod parse;
mod sandbox;

pub use child::{ChildProcess, ChildStarts, Isolation};
pub use sandbox::run_with_progress;

/// The bounds one run is held to. Exceeding any of them ends the run with
/// [`ScriptFailure::Limit`], except the log, which is truncated instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Evaluation steps (one function call or one loop iteration each).
    pub max_steps: u64,
    /// Wall-clock time of the whole run, host calls included.
    pub wall_time: Duration,
    /// The Starlark heap, in bytes (approximate: checked periodically, Rust-side allocations of
    /// values are not counted).
    pub max_heap_bytes: usize,
    /// The `print` log, in bytes: the head is kept and a marker appended.
    pub max_log_bytes: usize,
    /// The script's source, in bytes.
    pub max_source_bytes: usize,
}

impl Limits {
    /// The limits of a platform run (`run_script`): 20 000 000 steps, 10 minutes.
    #[must_use]
    pub fn run() -> Self {
        Self {
            max_steps: 20_000_000,
            wall_time: Duration::from_secs(600),
            max_heap_bytes: 256 * 1024 * 1024,
            max_log_bytes: 64 * 1024,
            max_source_bytes: 256 * 1024,
        }
    }

    /// The limits of a draft run (`manage_script run_draft`): 2 000 000 steps, 60 seconds.
    #[must_use]
    pub fn draft() -> Self {
        Self {
            max_steps: 2_000_000,
            wall_time: Duration::from_secs(60),
            max_heap_bytes: 64 * 1024 * 1024,
            ..Self::run()
        }
    }
}

/// What a run is started with: it is visible to the script as `run`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScriptInput {
    /// `run.run_id`.
    pub run_id: String,
    /// `run.params`: the bound parameters.
    pub params: serde_json::Map<String, serde_json::Value>,
    /// `run.fire_time`: the fire time a scheduled run is for, as an RFC 3339 UTC timestamp
    /// (`None` for a run someone started).
    pub fire_time: Option<String>,
}

/// The platform a script talks to through `platform.*`. Each method is one host call; it runs on
/// the caller's tokio runtime while the script waits for it.
#[async_trait::async_trait]
pub trait Host: Send + Sync + 'static {
    /// `platform.call(tool, args)`: the tool's structured result (plain text as
    /// `{"text": ...}`).
    ///
    /// # Errors
    ///
    /// [`HostError::Tool`] when the tool refused or failed, [`HostError::Platform`] on a fault.
    async fn call(
        &self,
        tool: String,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, HostError>;

    /// `platform.query(sql, connection=, params=)`: the query's result (`{"rows": [...], ...}`).
    ///
    /// # Errors
    ///
    /// [`HostError::Tool`] when the query was refused or failed, [`HostError::Platform`] on a
    /// fault.
    async fn query(
        &self,
        sql: String,
        connection: Option<String>,
        params: serde_json::Map<String, serde_json::Value>,
    ) -> Result<serde_json::Value, HostError>;

    /// `platform.export(name, rows, format)`: the export's result (the asset it wrote).
    ///
    /// # Errors
    ///
    /// [`HostError::Tool`] when the export was refused or failed, [`HostError::Platform`] on a
    /// fault.
    async fn export(
        &self,
        name: String,
        rows: serde_json::Value,
        format: String,
    ) -> Result<serde_json::Value, HostError>;
}

/// Why a host call did not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The tool refused or failed: the script fails with this message (a script error, never
    /// retried).
    #[error("{0}")]
    Tool(String),
    /// A platform fault (database down, ...): the run fails as a fault, which may be retried.
    #[error("{0}")]
    Platform(String),
}

/// A script that does not parse (or is refused before it runs, such as one using `load`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SyntaxError {
    /// What is wrong, with the place in the source.
    pub message: String,
    /// The 1-based line of the error, when it has one.
    pub line: Option<u32>,
}

/// How one run ended, and what it left behind.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptReport {
    /// The script's result (see the crate docs for its shape), or why it has none.
    pub outcome: Result<serde_json::Value, ScriptFailure>,
    /// What the script printed, at most [`Limits::max_log_bytes`] plus the truncation marker.
    pub log: String,
    /// Whether the log was cut.
    pub log_truncated: bool,
    /// Evaluation steps taken.
    pub steps: u64,
    /// Host calls made (`platform.*`), answered or not.
    pub host_calls: u64,
}

/// Why a run has no result. Deliberately not `#[non_exhaustive]`: the run bridge maps every
/// variant to a run status, and a new variant should make it say which.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScriptFailure {
    /// The script does not parse.
    #[error("{0}")]
    Syntax(SyntaxError),
    /// The script raised or failed, including a host call answered with [`HostError::Tool`].
    #[error("{message}")]
    Error {
        /// The error with its Starlark backtrace.
        message: String,
    },
    /// The script exceeded one of its [`Limits`].
    #[error("{message}")]
    Limit {
        /// Which limit.
        limit: LimitKind,
        /// The error naming the limit.
        message: String,
    },
    /// The run was cancelled through its token.
    #[error("the script run was cancelled")]
    Cancelled,
    /// A host call failed with [`HostError::Platform`], or the sandbox could not start.
    #[error("{0}")]
    Platform(String),
    /// The interpreter crashed: it panicked, or its child process died without a report
    /// (a stack overflow, a signal). The script's failure: what crashed once crashes again.
    #[error("{message}")]
    Crashed {
        /// What happened, as "the script's interpreter crashed: …".
        message: String,
    },
}

/// Which of the [`Limits`] a run exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// [`Limits::max_steps`].
    Steps,
    /// [`Limits::wall_time`].
    WallTime,
    /// [`Limits::max_heap_bytes`].
    Heap,
    /// [`Limits::max_log_bytes`] (reserved: the log is truncated, not failed).
    Log,
    /// [`Limits::max_source_bytes`].
    Source,
}

/// Parses a script without running it (`manage_script create`/`update`/`validate`).
///
/// # Errors
///
/// The first syntax error, with its line; a source over [`Limits::max_source_bytes`], one that
/// uses `load`, one nested too deeply to parse safely, and one using a name nothing defines
/// (`platfrom.call`) are refused the same way.
///
/// Parsing takes a moment and a thread of its own (the parser recurses on the native stack),
/// so the caller's thread blocks for that long.
pub fn check(source: &str, limits: &Limits) -> Result<(), SyntaxError> {
    // The parser recurses on the native stack, so it runs on a thread with room for it rather
    // than on the caller's (perhaps a runtime worker's) stack.
    std::thread::scope(|scope| {
        let parsing = std::thread::Builder::new()
            .name("docket-script-check".to_owned())
            .stack_size(sandbox::STACK_BYTES)
            .spawn_scoped(scope, || {
                let ast = parse::parse(source, limits)?;
                parse::check_names(&ast, &globals::predeclared_names())
            });
        match parsing {
            Ok(parsing) => parsing.join().unwrap_or_else(|panic| {
                Err(SyntaxError {
                    message: sandbox::panic_message(panic.as_ref()),
                    line: None,
                })
            }),
            Err(cause) => Err(SyntaxError {
                message: format!("could not start the thread that parses the script: {cause}"),
                line: None,
            }),
        }
    })
}

/// What one run has done so far, readable from any thread while it runs (for a status message
/// such as "running, 12 tool calls") and after it ended. Pass a fresh one to each
/// [`run_with_progress`]. The queries and outputs it holds are the original's `queries` and
/// `outputs`; unlike the success value, they are there when the run fails too (outputs written
/// before a failure were written).
#[derive(Debug, Default)]
pub struct RunProgress {
    host_calls: AtomicU64,
    steps: AtomicU64,
    queries: AtomicU64,
    outputs: Mutex<Vec<serde_json::Value>>,
}

impl RunProgress {
    /// Counters at zero.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Host calls started so far.
    #[must_use]
    pub fn host_calls(&self) -> u64 {
        self.host_calls.load(Ordering::Relaxed)
    }

    /// `platform.query` calls that answered.
    #[must_use]
    pub fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }

    /// What each `platform.export` that answered returned, in call order.
    #[must_use]
    pub fn outputs(&self) -> Vec<serde_json::Value> {
        self.outputs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records an output as it lands.
    fn push_output(&self, output: serde_json::Value) {
        self.outputs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(output);
    }

    /// Evaluation steps so far: updated at every host call and when the run ends, so it lags
    /// behind the true count while a script computes without calling the host.
    #[must_use]
    pub fn steps(&self) -> u64 {
        self.steps.load(Ordering::Relaxed)
    }
}

/// Runs a script on its own OS thread; host calls are awaited on the caller's tokio runtime.
/// Cancelling `cancel` stops the script promptly, even inside a busy loop or a host call, and
/// so does dropping the returned future.
///
/// Call it within a tokio runtime with its time driver enabled: host calls are spawned on it
/// and raced against the wall-time limit. Outside one, the run fails as
/// [`ScriptFailure::Platform`]. A run that finished before the cancel keeps its outcome.
pub async fn run(
    source: String,
    input: ScriptInput,
    host: Arc<dyn Host>,
    limits: Limits,
    cancel: CancellationToken,
) -> ScriptReport {
    run_with_progress(source, input, host, limits, cancel, Arc::default()).await
}
