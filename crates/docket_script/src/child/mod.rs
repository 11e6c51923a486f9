//! Runs in child processes: the wall the sandbox cannot move.
//!
//! Starlark's limits are checked by the interpreter as it goes, so they can be outrun: one
//! allocation (`"x" * 10**9`) is made before the heap limit looks, a deep value overflows the
//! native stack, and a cancel is seen only every thousand or so ticks, however long one tick
//! takes. A run evaluated in a child process ([`Isolation::Child`]) can crash, exhaust its
//! memory or loop without touching its parent, and is stopped by a kill when it does not stop
//! when asked.
//!
//! # The child protocol
//!
//! The parent starts the child ([`ChildProcess`]: the `docket` binary with its hidden
//! `script-child` subcommand, which calls [`serve`]) in a process group of its own, with an
//! empty environment and three pipes and no other descriptor, and sets its OS limits with
//! `prlimit` before it sends the run:
//!
//! | limit | value |
//! |---|---|
//! | address space | the run's heap limit + [`MEMORY_MARGIN_BYTES`] (the binary, the runtime, the evaluator's stack) |
//! | CPU time | the wall time + 2 s (SIGXCPU), + 3 s (SIGKILL) |
//! | core files, files written | none |
//! | open descriptors | 64 |
//!
//! Messages are length-prefixed JSON, at most [`MAX_FRAME_BYTES`] each way: the run (source,
//! run id, parameters, limits), then, from the child, one message per `platform.*` call, each
//! answered by the parent before the script goes on, and at last the report. The parent
//! executes every host call with the [`Host`] it was given (in Docket, the whole call
//! pipeline). A call whose arguments or answer would exceed the cap fails in the script with
//! an error that says so; a child that sends more than the cap is killed.
//!
//! Stopping: a cancel or the end of the wall time sends a stop message, and [`STOP_GRACE`]
//! later the child's process group is killed, whatever the interpreter is doing. A child that
//! dies without a report fails its run as the script's failure — "the script ran out of memory
//! (limit 64 MiB)", "the script's interpreter crashed: stack overflow …" — read from its exit
//! status and the end of its standard error. A child whose parent dies sees its input close and
//! exits.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::{Host, Limits, RunProgress, ScriptInput, ScriptReport};

mod frame;
mod parent;
mod process;
mod serve;

pub use frame::MAX_FRAME_BYTES;
pub use process::{ChildProcess, ChildStarts, MEMORY_MARGIN_BYTES, STOP_GRACE};
pub use serve::serve;

/// Where a run is evaluated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// On a thread of this process. Only for tests and embedders who run trusted scripts: a
    /// script can abort the process (an allocation the heap limit did not see coming, a stack
    /// overflow) and outrun a cancel for as long as one interpreter tick takes.
    InProcess,
    /// In a child process under OS limits, killed when it must stop.
    Child(ChildProcess),
}

impl Isolation {
    /// Evaluates one run: [`run_with_progress`](crate::run_with_progress) in this process, or
    /// the same in a child. Cancelling `cancel` (or dropping the future) stops the run; in a
    /// child, within [`STOP_GRACE`] whatever the script is doing.
    pub async fn run(
        &self,
        source: String,
        input: ScriptInput,
        host: Arc<dyn Host>,
        limits: Limits,
        cancel: CancellationToken,
        progress: Arc<RunProgress>,
    ) -> ScriptReport {
        match self {
            Self::InProcess => {
                crate::run_with_progress(source, input, host, limits, cancel, progress).await
            }
            Self::Child(process) => {
                parent::run(process, source, input, host, limits, cancel, progress).await
            }
        }
    }
}
