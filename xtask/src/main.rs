//! Project automation, run as `cargo xtask <command>` (an alias in `.cargo/config.toml`).
//!
//! Each command lives in its own module; this file only parses the command line and
//! dispatches. Plain `std::env::args` parsing keeps xtask free of dependencies that
//! every CI run would have to compile.

mod bench;
mod chaos;
mod ci;
mod conformance;
mod migrate;
mod module_cycles;
mod package;
mod test;
mod tidy;
mod trino_double;
mod util;

use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <command> [options]

commands:
  test [ARGS...]        cargo test --workspace --all-targets [ARGS...]; checks PostgreSQL
                        first when DOCKET_REQUIRE_POSTGRES=1 and sets DOCKET_TEST_DATABASE_URL
  ci                    rustfmt check, clippy -D warnings, tidy, rustdoc -D warnings,
                        doctests, cargo package of the library crates, and cargo deny
                        when installed
  tidy                  the project's conventions (also run as tests by `cargo test`)
  package               cargo package of every library crate (what publishing would check)
  conformance [--serve ADDR] [--scenario NAME]
                        the official MCP conformance suite against the docket_fixture server;
                        --serve only starts the fixture on ADDR and waits;
                        --scenario runs one scenario instead of the scored set
  bench [--write] [-- ARGS...]
                        benchmarks in release mode (needs PostgreSQL): Docket against bare
                        SQL and rmcp's in-memory task manager, and a million-row export
                        against the raw page fetch with the server's memory, ratios from
                        one run; --write puts the report into docs/benchmarks.md; ARGS go
                        to docket_bench (e.g. `-- --suite exports`)
  chaos [--seconds N] [--seed S] [--replicas N] [--profile release|dev]
                        the chaos soak (needs PostgreSQL): three replicas of the docket
                        binary (release unless --profile dev) under a mixed load while
                        they are killed, stopped and cut from the database; prints one
                        line per check of the contract, exits non-zero on a violation
                        and keeps its evidence under target/chaos/<seed>/; default
                        180 s; the seed is printed and --seed replays it
  trino-double [--listen ADDR] [--page-rows N] [--page-delay-ms N]
                        the Trino test double in the foreground; prints `listening on
                        http://ADDR` once bound (port 0 picks a free one)
  migrate [--config FILE]
                        apply the database migrations (docket migrate); without --config,
                        the embedded default SQLite database under ./docket-data/
  help                  this text
";

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let command = args.next();
    let rest: Vec<String> = args.collect();
    let outcome = match command.as_deref() {
        Some("test") => test::run(&rest),
        Some("ci") => no_arguments("ci", &rest).and_then(|()| ci::run()),
        Some("tidy") => no_arguments("tidy", &rest).and_then(|()| tidy::run()),
        Some("package") => no_arguments("package", &rest).and_then(|()| package::run()),
        Some("conformance") => {
            conformance::Options::parse(&rest).and_then(|options| conformance::run(&options))
        }
        Some("bench") => bench::Options::parse(&rest).and_then(|options| bench::run(&options)),
        Some("chaos") => chaos::Options::parse(&rest).and_then(|options| chaos::run(&options)),
        Some("trino-double") => trino_double::run(&rest),
        Some("migrate") => migrate::run(&rest),
        Some("help" | "-h" | "--help") => {
            print!("{USAGE}");
            Ok(())
        }
        Some(other) => Err(anyhow::anyhow!("unknown command `{other}`\n\n{USAGE}")),
        None => Err(anyhow::anyhow!("no command given\n\n{USAGE}")),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn no_arguments(command: &str, rest: &[String]) -> anyhow::Result<()> {
    match rest.first() {
        None => Ok(()),
        Some(argument) => {
            anyhow::bail!("`cargo xtask {command}` takes no arguments, got `{argument}`")
        }
    }
}
