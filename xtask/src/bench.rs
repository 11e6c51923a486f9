//! `cargo xtask bench`: the benchmarks (docs/design.md, Testing). Benchmarks are not timed
//! tests: they measure and report ratios against baselines measured in the same
//! run, and never fail because a number is slow.
//!
//! This builds the `docket` binary (for the export benchmark, which serves with
//! it) and runs the dev-only `docket_bench` binary, both in release mode. It
//! needs PostgreSQL: a fresh schema on `DOCKET_TEST_DATABASE_URL` (default the
//! local test server), or the database `DOCKET_BENCH_DATABASE_URL` names. With
//! `--write` the report goes into `docs/benchmarks.md`, between the markers that
//! delimit its generated section; the hand-written notes around it are kept.

use std::process::Command;

use anyhow::{Context as _, bail};

use crate::util;

/// Where `--write` puts the report, relative to the workspace root.
const REPORT: &str = "docs/benchmarks.md";

/// What `cargo xtask bench` was asked to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Options {
    /// Write the report into [`REPORT`].
    write: bool,
    /// Passed to `docket_bench` as they are (after `--`).
    bench_args: Vec<String>,
}

impl Options {
    /// Reads `[--write] [-- DOCKET_BENCH_ARGS...]`.
    pub(crate) fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut options = Self::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--write" => options.write = true,
                "--" => options.bench_args.extend(args.by_ref().cloned()),
                other => bail!(
                    "unknown argument `{other}` for `cargo xtask bench` \
                     (usage: cargo xtask bench [--write] [-- DOCKET_BENCH_ARGS...])"
                ),
            }
        }
        Ok(options)
    }
}

pub(crate) fn run(options: &Options) -> anyhow::Result<()> {
    let commit = commit()?;
    let toolchain = util::output(
        Command::new(std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into())).arg("--version"),
    )?;
    // The export benchmark serves with the real binary, built as users build it.
    util::section("docket (release), for the export benchmark");
    util::run(util::cargo().args(["build", "--release", "--package", "docket"]))?;
    let docket_bin = util::target_directory(&util::workspace_metadata()?)?
        .join("release")
        .join("docket");
    let mut command = util::cargo();
    command
        .args([
            "run",
            "--release",
            "--package",
            "docket_bench",
            "--bin",
            "docket_bench",
            "--",
        ])
        .args(["--commit", &commit, "--toolchain", toolchain.trim()])
        .arg("--docket-bin")
        .arg(docket_bin);
    if options.write {
        let report = util::project_root().join(REPORT);
        command.arg("--output").arg(report);
    }
    command.args(&options.bench_args);
    util::section("docket_bench (release)");
    util::run(&mut command)
}

/// The commit being measured, marked when the work tree has changes on top of it.
/// Read-only git: `--no-optional-locks` keeps `status` from refreshing the index.
fn commit() -> anyhow::Result<String> {
    let git = || {
        let mut git = Command::new("git");
        git.current_dir(util::project_root())
            .arg("--no-optional-locks");
        git
    };
    let head = util::output(git().args(["rev-parse", "--short=12", "HEAD"]))
        .context("cannot read the current commit")?;
    let changes = util::output(git().args(["status", "--porcelain", "--untracked-files=no"]))
        .context("cannot read the work tree's status")?;
    let head = head.trim();
    Ok(if changes.trim().is_empty() {
        head.to_owned()
    } else {
        format!("{head} with uncommitted changes")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn write_and_pass_through_arguments_are_read() {
        let options = Options::parse(&strings(&["--write", "--", "--samples", "100"]))
            .expect("valid arguments");
        assert_eq!(
            options,
            Options {
                write: true,
                bench_args: strings(&["--samples", "100"]),
            }
        );
        assert_eq!(
            Options::parse(&[]).expect("no arguments"),
            Options::default()
        );
    }

    #[test]
    fn unknown_arguments_are_refused() {
        let error = Options::parse(&strings(&["--samples"])).expect_err("not an xtask option");
        assert!(error.to_string().contains("unknown argument `--samples`"));
    }
}
