//! How a child is started and the margins it runs within: what both the parent's side
//! (`parent`) and the choice of isolation (`Isolation`) need.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

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
/// [`serve`](super::serve), and the arguments that make it do so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildProcess {
    /// The program.
    pub program: PathBuf,
    /// Its arguments (for `docket`, the hidden subcommand).
    pub args: Vec<OsString>,
}

impl ChildProcess {
    /// `program` with `args`.
    pub fn new(
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<OsString>>,
    ) -> Self {
        Self {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
        }
    }
}
