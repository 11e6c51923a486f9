//! `cargo xtask test`: the project's test command (the one the README gives).
//!
//! It runs every test of every workspace member, xtask's tidy tests included. Suites
//! that need PostgreSQL read `DOCKET_TEST_DATABASE_URL`; with `DOCKET_REQUIRE_POSTGRES=1`
//! (CI) a database that does not answer is a failure here, before anything compiles,
//! instead of a pile of confusing test failures later (DESIGN.md §6: tests never skip
//! silently).

use std::process::Command;

use anyhow::{Context as _, bail};

use crate::util;

/// Where the test suites find PostgreSQL unless told otherwise: the machine's local
/// server with trust authentication and its `test` database.
pub(crate) const DEFAULT_TEST_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The address `pg_isready` probes; it matches [`DEFAULT_TEST_DATABASE_URL`].
const POSTGRES_HOST: &str = "127.0.0.1";
const POSTGRES_PORT: &str = "5432";

/// Runs `cargo test --workspace --all-targets`, with `extra_args` appended (for example
/// `-- --nocapture` or a test-name filter).
pub(crate) fn run(extra_args: &[String]) -> anyhow::Result<()> {
    if std::env::var("DOCKET_REQUIRE_POSTGRES").is_ok_and(|value| value == "1") {
        require_postgres()?;
    }
    let database_url = std::env::var("DOCKET_TEST_DATABASE_URL")
        .unwrap_or_else(|_| DEFAULT_TEST_DATABASE_URL.to_owned());
    println!("DOCKET_TEST_DATABASE_URL={database_url}");

    util::section("cargo test");
    util::run(
        util::cargo()
            .args(["test", "--workspace", "--all-targets"])
            .args(extra_args)
            .env("DOCKET_TEST_DATABASE_URL", database_url),
    )
}

fn require_postgres() -> anyhow::Result<()> {
    let status = Command::new("pg_isready")
        .args(["-h", POSTGRES_HOST, "-p", POSTGRES_PORT])
        .status()
        .context(
            "DOCKET_REQUIRE_POSTGRES=1 but `pg_isready` could not be run; \
             install the PostgreSQL client tools",
        )?;
    if !status.success() {
        bail!(
            "DOCKET_REQUIRE_POSTGRES=1 but PostgreSQL does not answer on \
             {POSTGRES_HOST}:{POSTGRES_PORT} (`pg_isready` {status}); start it (`.ci/run` \
             does) or unset DOCKET_REQUIRE_POSTGRES to let the PostgreSQL suites skip"
        );
    }
    Ok(())
}
