//! How a child is started and the margins it runs within: what both the parent's side
//! (`parent`) and the choice of isolation (`Isolation`) need.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::process::Child;

/// The address space a child may use beyond its run's heap limit: the mapped binary and its
/// libraries, the runtime's threads, the evaluator thread's stack reservation (256 MiB, of
/// which only the pages a script touches are ever committed) — about 400 MiB before a script
/// allocates anything — and the slack of a growing heap (a list that doubles holds its old
/// and its new buffer at once). A single allocation larger than this margin fails in the
/// child, whatever the heap limit; one within it is caught by the heap limit afterwards.
pub const MEMORY_MARGIN_BYTES: u64 = 768 * 1024 * 1024;

/// How long a child asked to stop has before it is killed.
pub const STOP_GRACE: Duration = Duration::from_millis(200);

/// How to start a child that evaluates one run: a program whose `main` calls
/// [`serve`](super::serve), and the arguments that make it do so; and how many children to keep
/// started ahead of their runs ([`ChildProcess::warm`]).
#[derive(Clone, Debug)]
pub struct ChildProcess {
    /// The program.
    pub program: PathBuf,
    /// Its arguments (for `docket`, the hidden subcommand).
    pub args: Vec<OsString>,
    /// Children started ahead, waiting for a run; `None` starts each child when its run comes.
    pub(super) warm: Option<Arc<WarmChildren>>,
}

impl PartialEq for ChildProcess {
    fn eq(&self, other: &Self) -> bool {
        self.program == other.program
            && self.args == other.args
            && self.warm.as_ref().map(|warm| warm.size) == other.warm.as_ref().map(|warm| warm.size)
    }
}

impl Eq for ChildProcess {}

impl ChildProcess {
    /// `program` with `args`.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            warm: None,
        }
    }

    /// The same, keeping `children` started ahead of their runs (none for 0): a child's start —
    /// the process, its runtime, the interpreter's one-time set-up — then happens while the
    /// previous run evaluates, not after a run was claimed. Each child still evaluates one run
    /// and exits; a waiting child holds nothing of any run, and its OS limits are set when it
    /// is given one. Waiting children are killed when the last clone of this value is dropped.
    #[must_use]
    pub fn warm(self, children: usize) -> Self {
        Self {
            warm: (children > 0).then(|| Arc::new(WarmChildren::new(children))),
            ..self
        }
    }

    /// Children started ahead of a run so far, and children started when their run came
    /// (none ahead without [`ChildProcess::warm`]).
    pub fn starts(&self) -> ChildStarts {
        self.warm
            .as_ref()
            .map_or_else(ChildStarts::default, |warm| ChildStarts {
                ahead: warm.ahead.load(Ordering::Relaxed),
                on_demand: warm.on_demand.load(Ordering::Relaxed),
            })
    }
}

/// How a [`ChildProcess`]'s children were started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChildStarts {
    /// Started ahead of their run, waiting.
    pub ahead: u64,
    /// Started when their run came, none waiting.
    pub on_demand: u64,
}

/// The children started ahead of their runs.
pub(super) struct WarmChildren {
    /// How many to keep waiting.
    pub(super) size: usize,
    pub(super) idle: Mutex<Vec<Child>>,
    pub(super) ahead: AtomicU64,
    pub(super) on_demand: AtomicU64,
}

impl WarmChildren {
    fn new(size: usize) -> Self {
        Self {
            size,
            idle: Mutex::new(Vec::with_capacity(size)),
            ahead: AtomicU64::new(0),
            on_demand: AtomicU64::new(0),
        }
    }
}

impl std::fmt::Debug for WarmChildren {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmChildren")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}
