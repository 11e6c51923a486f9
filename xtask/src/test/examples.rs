//! The embedding examples, run after the tests in the modes that check themselves: each
//! one exits non-zero when what it demonstrates does not happen, so an example that
//! drifts from the code it shows fails CI instead of misleading a reader.
//!
//! `cargo test --workspace --all-targets` has already built them in the dev profile, so
//! `cargo run` only starts them; each takes a few seconds.

use crate::util;

/// (package, example, arguments that make it check itself).
const CHECKED_EXAMPLES: &[(&str, &str, &[&str])] = &[
    // A service with its own long-running tool and durable tasks on SQLite, no config file.
    ("docket_server", "long_tool", &["--self-check"]),
    // docket_task + docket_storage as a job runner: a cancel from a second process, and a
    // worker killed mid-job.
    ("docket_storage", "job_runner", &["demo"]),
];

/// Runs every example in its checking mode; fails naming each one that failed.
pub(super) fn run() -> anyhow::Result<()> {
    let mut failed = Vec::new();
    for (package, example, args) in CHECKED_EXAMPLES {
        util::section(&format!("example {example}"));
        let mut command = util::cargo();
        command
            .args(["run", "--package", package, "--example", example, "--"])
            .args(*args);
        if let Err(error) = util::run(&mut command) {
            println!("{error:#}");
            failed.push(*example);
        }
    }
    if !failed.is_empty() {
        anyhow::bail!("example(s) failed their own checks: {}", failed.join(", "));
    }
    Ok(())
}
