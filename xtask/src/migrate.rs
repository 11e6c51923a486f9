//! `cargo xtask migrate [--config FILE]`: applies the database migrations, through the
//! same code `docket migrate` runs (xtask depends on no workspace crate, so it runs the
//! binary). Without `--config` it migrates the embedded default SQLite database.

use crate::util;

/// Runs `docket migrate` with the given arguments.
pub(crate) fn run(arguments: &[String]) -> anyhow::Result<()> {
    util::section("docket migrate");
    util::run(
        util::cargo()
            .args(["run", "--quiet", "--package", "docket", "--", "migrate"])
            .args(arguments),
    )
}
