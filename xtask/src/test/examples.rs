//! The embedding examples, run after the tests in the modes that check themselves: each
//! one exits non-zero when what it demonstrates does not happen, so an example that
//! drifts from the code it shows fails CI instead of misleading a reader.
//!
//! The binaries are the ones `cargo test --workspace --all-targets` has just built, run
//! directly. `cargo run -p <package> --example …` (what a reader types) would build them
//! again: a single package resolves features apart from the workspace (no `parquet` for
//! `docket_server`, fewer tokio features for `docket_storage`), so it would recompile
//! much of the tree a second time. Each example then takes a few seconds.

use std::path::PathBuf;
use std::process::Command;

use anyhow::Context as _;
use serde_json::Value;

use crate::util;

/// An example and the arguments that make it check itself.
struct CheckedExample {
    package: &'static str,
    name: &'static str,
    args: &'static [&'static str],
}

const CHECKED_EXAMPLES: &[CheckedExample] = &[
    // A service with its own long-running tool and durable tasks on SQLite, no config file.
    CheckedExample {
        package: "docket_server",
        name: "long_tool",
        args: &["--self-check"],
    },
    // An axum application with routes of its own and Docket's endpoint nested under
    // /docket, calling both over HTTP.
    CheckedExample {
        package: "docket_server",
        name: "axum_mount",
        args: &["--self-check"],
    },
    // docket_task + docket_storage as a job runner: a cancel from a second process, and a
    // worker killed mid-job.
    CheckedExample {
        package: "docket_storage",
        name: "job_runner",
        args: &["demo"],
    },
    // The run queue in memory: claims oldest first, a lease renewed, a cancel heard,
    // each run ended through its lease.
    CheckedExample {
        package: "docket_catalog",
        name: "run_queue",
        args: &[],
    },
];

/// Runs every example in its checking mode; fails naming each one that failed.
pub(super) fn run() -> anyhow::Result<()> {
    util::section("embedding examples");
    let executables = built_examples()?;
    let mut failed = Vec::new();
    for example in CHECKED_EXAMPLES {
        util::section(&format!(
            "example {} (cargo run -p {} --example {} -- {})",
            example.name,
            example.package,
            example.name,
            example.args.join(" ")
        ));
        let outcome = executables
            .iter()
            .find(|(name, _)| name == example.name)
            .with_context(|| format!("cargo built no example {}", example.name))
            .and_then(|(_, executable)| util::run(Command::new(executable).args(example.args)));
        if let Err(error) = outcome {
            println!("{error:#}");
            failed.push(example.name);
        }
    }
    if !failed.is_empty() {
        anyhow::bail!("example(s) failed their own checks: {}", failed.join(", "));
    }
    Ok(())
}

/// Builds the workspace's examples with the workspace's features (nothing to do right
/// after `cargo test --workspace --all-targets`) and returns (example, executable) for
/// each. Example names are unique across the workspace (cargo warns when two collide).
fn built_examples() -> anyhow::Result<Vec<(String, PathBuf)>> {
    let stdout = util::output(util::cargo().args([
        "build",
        "--workspace",
        "--examples",
        "--message-format=json-render-diagnostics",
    ]))?;
    let mut executables = Vec::new();
    for line in stdout.lines() {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let is_example = message["reason"] == "compiler-artifact"
            && message["target"]["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|kind| kind == "example"));
        if !is_example {
            continue;
        }
        if let (Some(name), Some(executable)) = (
            message["target"]["name"].as_str(),
            message["executable"].as_str(),
        ) {
            executables.push((name.to_owned(), PathBuf::from(executable)));
        }
    }
    Ok(executables)
}
