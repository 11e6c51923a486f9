//! `cargo xtask test`: the project's test command (the one the README gives).
//!
//! It runs every test of every workspace member, xtask's tidy tests included. Suites
//! that need PostgreSQL read `DOCKET_TEST_DATABASE_URL`; with `DOCKET_REQUIRE_POSTGRES=1`
//! (CI) a database that does not answer is a failure here, before anything compiles,
//! instead of a pile of confusing test failures later (docs/design.md, Testing: tests
//! never skip silently).

use std::process::Command;

use anyhow::{Context as _, bail};

use crate::util;

mod examples;

/// Where the test suites find PostgreSQL unless told otherwise: the machine's local
/// server with trust authentication and its `test` database.
pub(crate) const DEFAULT_TEST_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The address `pg_isready` probes; it matches [`DEFAULT_TEST_DATABASE_URL`].
const POSTGRES_HOST: &str = "127.0.0.1";
const POSTGRES_PORT: &str = "5432";

/// Test names that contain this need PostgreSQL (`…::postgres`, `…_on_postgres`).
const POSTGRES_CASES: &str = "postgres";

/// Test names that contain this need the s3s-fs server.
const S3_CASES: &str = "on_s3s_fs";

/// Runs `cargo test --workspace --all-targets`, with `extra_args` appended (for example
/// `-- --nocapture` or a test-name filter).
///
/// The services the suites need are looked for first. One that is missing is said up
/// front — what was not found, how to start it, which variable makes it required — and
/// its cases are filtered out, so the counts show them as filtered out, never as passed.
/// When the tests pass, the embedding examples run in the modes that check themselves
/// ([`examples`]).
pub(crate) fn run(extra_args: &[String]) -> anyhow::Result<()> {
    let required = |name: &str| std::env::var(name).is_ok_and(|value| value == "1");
    if required("DOCKET_REQUIRE_POSTGRES") {
        require_postgres()?;
    }
    let database_url = std::env::var("DOCKET_TEST_DATABASE_URL")
        .unwrap_or_else(|_| DEFAULT_TEST_DATABASE_URL.to_owned());
    println!("DOCKET_TEST_DATABASE_URL={database_url}");

    let mut skips = Vec::new();
    if !postgres_answers(&database_url) {
        println!(
            "\nPostgreSQL does not answer at {}: every PostgreSQL case is filtered out \
             (counted as filtered out, not passed). Start it (`pg_ctlcluster <version> main \
             start`, or as `.ci/run` does), point DOCKET_TEST_DATABASE_URL at one, or set \
             DOCKET_REQUIRE_POSTGRES=1 to make a missing database a failure.\n",
            authority_of(&database_url)
        );
        skips.push(POSTGRES_CASES);
    }
    if !s3s_fs_found() && !required("DOCKET_REQUIRE_S3") {
        println!(
            "\nNo s3s-fs binary (DOCKET_S3S_FS, or target/s3s-fs/bin/s3s-fs): the S3 sink cases \
             are filtered out. Install it as `.ci/run` does (`cargo install s3s-fs --version \
             0.14.1 --features binary --locked --root target/s3s-fs`), or set \
             DOCKET_REQUIRE_S3=1 to make it a failure.\n"
        );
        skips.push(S3_CASES);
    }

    util::section("cargo test");
    let mut command = util::cargo();
    command
        .args(["test", "--workspace", "--all-targets"])
        .args(extra_args)
        .env("DOCKET_TEST_DATABASE_URL", database_url);
    if !skips.is_empty() {
        if !extra_args.iter().any(|arg| arg == "--") {
            command.arg("--");
        }
        for skip in skips {
            command.args(["--skip", skip]);
        }
    }
    util::run(&mut command)?;
    examples::run()
}

/// `host:port` of a database URL (`postgres://user@host:port/db?…`).
fn authority_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    rest.split(['/', '?']).next().unwrap_or(rest)
}

/// Whether something accepts connections where the database URL points.
fn postgres_answers(url: &str) -> bool {
    use std::net::ToSocketAddrs as _;
    let authority = authority_of(url);
    let with_port = if authority.contains(':') {
        authority.to_owned()
    } else {
        format!("{authority}:5432")
    };
    with_port.to_socket_addrs().is_ok_and(|mut addresses| {
        addresses.any(|address| {
            std::net::TcpStream::connect_timeout(&address, std::time::Duration::from_secs(2))
                .is_ok()
        })
    })
}

/// Whether the S3 sink tests will find their server binary: where `DOCKET_S3S_FS`
/// says, else under `target/`, else on the `PATH`, as they look for it.
fn s3s_fs_found() -> bool {
    if let Some(path) = std::env::var_os("DOCKET_S3S_FS") {
        return std::path::Path::new(&path).is_file();
    }
    util::project_root()
        .join("target/s3s-fs/bin/s3s-fs")
        .is_file()
        || std::env::var_os("PATH").is_some_and(|path| {
            std::env::split_paths(&path).any(|folder| folder.join("s3s-fs").is_file())
        })
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
