//! `cargo xtask trino-double [--listen ADDR] [--page-rows N] [--page-delay-ms N]`:
//! builds the Trino double (`crates/docket_trino_double`) and runs it in the
//! foreground. It prints `listening on http://ADDR` once bound, so a script can
//! start it on port 0 and read the address; CI does that to check the double with
//! the official Python client.

use std::process::Command;

use crate::util;

const PACKAGE: &str = "docket_trino_double";

pub(crate) fn run(args: &[String]) -> anyhow::Result<()> {
    let metadata = util::workspace_metadata()?;
    let binary = util::target_directory(&metadata)?
        .join("debug")
        .join(PACKAGE);
    // Build output goes to stderr, so that stdout carries only the double's lines.
    let build = util::cargo()
        .args(["build", "--quiet", "--package", PACKAGE])
        .status()?;
    if !build.success() {
        anyhow::bail!("`cargo build --package {PACKAGE}` failed ({build})");
    }
    let mut double = Command::new(&binary);
    double.args(args);
    exec(double)
}

/// Replaces xtask with the double, so that stopping the process started as
/// `cargo xtask trino-double` (cargo itself execs xtask) stops the double too.
#[cfg(unix)]
fn exec(mut command: Command) -> anyhow::Result<()> {
    use std::os::unix::process::CommandExt as _;

    let error = command.exec();
    Err(anyhow::anyhow!(
        "could not start `{}`: {error}",
        util::describe(&command)
    ))
}

#[cfg(not(unix))]
fn exec(mut command: Command) -> anyhow::Result<()> {
    util::run(&mut command)
}
