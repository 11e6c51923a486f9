//! `cargo xtask test`: the project's test command (the one the README gives).
//!
//! It runs every test of every workspace member, xtask's tidy tests included. Before
//! anything compiles it looks for the services some cases need — PostgreSQL where
//! `DOCKET_TEST_DATABASE_URL` points, the s3s-fs server — because a case that cannot
//! reach its service returns at once and libtest would count it as passed
//! (docs/design.md, Testing: tests never skip silently). So:
//!
//! - a service that was found is required: the child run gets
//!   `DOCKET_REQUIRE_POSTGRES=1` / `DOCKET_REQUIRE_S3=1`, and a case that then cannot
//!   use it fails;
//! - a service that was not found is said up front (what, how to start it, which
//!   variable makes it required) and again at the end, and its cases are filtered
//!   out by name (`postgres`, `on_s3s_fs`), so the counts show them as filtered out.
//!   `DOCKET_POSTGRES_CASES_FILTERED=1` / `DOCKET_S3_CASES_FILTERED=1` tell the test
//!   harnesses, which fail any case that needs the service without its name saying so;
//! - with `DOCKET_REQUIRE_POSTGRES=1` / `DOCKET_REQUIRE_S3=1` (CI) a missing service
//!   is a failure here.

use anyhow::bail;

use crate::util;

mod examples;

/// Where the test suites find PostgreSQL unless told otherwise: the machine's local
/// server with trust authentication and its `test` database.
pub(crate) const DEFAULT_TEST_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Test names that contain this need PostgreSQL (`…::postgres`, `…_on_postgres`).
const POSTGRES_CASES: &str = "postgres";

/// Test names that contain this need the s3s-fs server.
const S3_CASES: &str = "on_s3s_fs";

/// How to start the machine's PostgreSQL cluster, as `.ci/run` does.
const START_POSTGRES: &str =
    "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start";

/// How to install s3s-fs where the S3 cases look for it, as `.ci/run` does.
const INSTALL_S3S_FS: &str =
    "cargo install s3s-fs --version 0.14.1 --features binary --locked --root target/s3s-fs";

/// Runs `cargo test --workspace --all-targets`, with `extra_args` appended (for example
/// `-- --nocapture` or a test-name filter).
///
/// The services the suites need are looked for first; see the module documentation
/// for what a found, a missing and a required service each lead to. When the tests
/// pass, the embedding examples run in the modes that check themselves ([`examples`]).
pub(crate) fn run(extra_args: &[String]) -> anyhow::Result<()> {
    let required = |name: &str| std::env::var(name).is_ok_and(|value| value == "1");
    let database_url = std::env::var("DOCKET_TEST_DATABASE_URL")
        .unwrap_or_else(|_| DEFAULT_TEST_DATABASE_URL.to_owned());
    println!("DOCKET_TEST_DATABASE_URL={database_url}");

    let mut command = util::cargo();
    command
        .args(["test", "--workspace", "--all-targets"])
        .args(extra_args)
        .env("DOCKET_TEST_DATABASE_URL", &database_url);
    let mut missing = Vec::new();
    let mut skips = Vec::new();

    let authority = authority_of(&database_url);
    if postgres_answers(&database_url) {
        println!("PostgreSQL answers at {authority}: its cases run, and must connect.");
        command.env("DOCKET_REQUIRE_POSTGRES", "1");
    } else if required("DOCKET_REQUIRE_POSTGRES") {
        bail!(
            "DOCKET_REQUIRE_POSTGRES=1 but PostgreSQL does not answer at {authority}; start it \
             (`{START_POSTGRES}`, as `.ci/run` does) or unset DOCKET_REQUIRE_POSTGRES to let \
             its cases be filtered out"
        );
    } else {
        missing.push(format!(
            "PostgreSQL does not answer at {authority}: every PostgreSQL case (a name with \
             `postgres` in it) is filtered out, and the conformance fixture's tests run on \
             SQLite instead. Start it with `{START_POSTGRES}` (or point \
             DOCKET_TEST_DATABASE_URL at another server); DOCKET_REQUIRE_POSTGRES=1 makes a \
             missing database a failure."
        ));
        command.env("DOCKET_POSTGRES_CASES_FILTERED", "1");
        skips.push(POSTGRES_CASES);
    }

    if s3s_fs_found() {
        command.env("DOCKET_REQUIRE_S3", "1");
    } else if required("DOCKET_REQUIRE_S3") {
        bail!(
            "DOCKET_REQUIRE_S3=1 but no s3s-fs binary was found (DOCKET_S3S_FS, \
             target/s3s-fs/bin/s3s-fs, or the PATH); install it with `{INSTALL_S3S_FS}` and \
             set DOCKET_S3S_FS=$PWD/target/s3s-fs/bin/s3s-fs"
        );
    } else {
        missing.push(format!(
            "No s3s-fs binary (DOCKET_S3S_FS, target/s3s-fs/bin/s3s-fs, or the PATH): every \
             S3 sink case (a name ending `on_s3s_fs`) is filtered out. Install it with \
             `{INSTALL_S3S_FS}` and set DOCKET_S3S_FS=$PWD/target/s3s-fs/bin/s3s-fs; \
             DOCKET_REQUIRE_S3=1 makes a missing server a failure."
        ));
        command.env("DOCKET_S3_CASES_FILTERED", "1");
        skips.push(S3_CASES);
    }

    for notice in &missing {
        println!("\nnot found: {notice}");
    }
    if !skips.is_empty() {
        if !extra_args.iter().any(|arg| arg == "--") {
            command.arg("--");
        }
        for skip in &skips {
            command.args(["--skip", skip]);
        }
    }

    util::section("cargo test");
    let outcome = util::run(&mut command);
    // Said again after the counts, where a reader looks; the notice before the
    // build has long scrolled away.
    if !skips.is_empty() {
        println!(
            "\nnot run (filtered out, not passed): the cases whose names contain {}; see the \
             notes at the start of this output for how to run them.",
            skips
                .iter()
                .map(|skip| format!("`{skip}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        );
    }
    outcome?;
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
