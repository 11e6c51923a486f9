//! `cargo xtask chaos`: the chaos soak (docs/design.md, Testing). Builds the `docket`
//! binary and the dev-only `docket_chaos` soak in one profile (release by default, as
//! users run it; `--profile dev` reuses the debug build `cargo xtask test` made, as CI
//! does), then runs the soak: three replicas on a fresh PostgreSQL schema
//! (`DOCKET_TEST_DATABASE_URL`, default the local test server), killed, stopped and cut
//! from the database under load for `--seconds`, and the checks of the contract. The
//! seed is printed and `--seed` replays it; the evidence of a failing soak is kept
//! under `target/chaos/<seed>/`.

use anyhow::bail;

use crate::util;

/// The soak's length when none is given.
const DEFAULT_SECONDS: u64 = 180;

/// The cargo profile the binaries are built in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Profile {
    Release,
    Dev,
}

impl Profile {
    /// The folder under the target directory it builds into.
    fn folder(self) -> &'static str {
        match self {
            Profile::Release => "release",
            Profile::Dev => "debug",
        }
    }
}

/// What `cargo xtask chaos` was asked to do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Options {
    seconds: u64,
    seed: Option<u64>,
    replicas: usize,
    profile: Profile,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            seconds: DEFAULT_SECONDS,
            seed: None,
            replicas: 3,
            profile: Profile::Release,
        }
    }
}

const USAGE: &str =
    "usage: cargo xtask chaos [--seconds N] [--seed S] [--replicas N] [--profile release|dev]";

impl Options {
    /// Reads `[--seconds N] [--seed S] [--replicas N] [--profile release|dev]`.
    pub(crate) fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut options = Self::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = |name: &str| match args.next() {
                Some(value) => Ok(value.clone()),
                None => bail!("{name} needs a value ({USAGE})"),
            };
            match arg.as_str() {
                "--seconds" => options.seconds = number(&value("--seconds")?, "--seconds")?,
                "--seed" => options.seed = Some(number(&value("--seed")?, "--seed")?),
                "--replicas" => {
                    options.replicas = number(&value("--replicas")?, "--replicas")?;
                    if options.replicas < 2 {
                        bail!("--replicas must be at least 2");
                    }
                }
                "--profile" => {
                    options.profile = match value("--profile")?.as_str() {
                        "release" => Profile::Release,
                        "dev" => Profile::Dev,
                        other => bail!("--profile is release or dev, not `{other}`"),
                    }
                }
                other => bail!("unknown argument `{other}` for `cargo xtask chaos` ({USAGE})"),
            }
        }
        Ok(options)
    }
}

fn number<T: std::str::FromStr>(text: &str, name: &str) -> anyhow::Result<T> {
    match text.parse() {
        Ok(value) => Ok(value),
        Err(_) => bail!("{name} takes a whole number, not `{text}`"),
    }
}

pub(crate) fn run(options: &Options) -> anyhow::Result<()> {
    let mut build = util::cargo();
    build.arg("build");
    match options.profile {
        // One build for both: docket_bench's features add only the test harness to
        // docket_storage, nothing the server runs.
        Profile::Release => build.args([
            "--release",
            "--package",
            "docket",
            "--package",
            "docket_bench",
        ]),
        // With the features `cargo xtask test` (`cargo test --workspace --all-targets`)
        // resolves, which the test targets bring in, so every artifact of the tests'
        // debug build is reused and only the soak itself is compiled; a separate
        // feature set would rebuild most of the tree.
        Profile::Dev => build.args(["--workspace", "--tests"]),
    };
    build.args(["--bin", "docket", "--bin", "docket_chaos"]);
    util::section(&format!(
        "docket and docket_chaos ({})",
        options.profile.folder()
    ));
    util::run(&mut build)?;
    let target = util::target_directory(&util::workspace_metadata()?)?;
    let binaries = target.join(options.profile.folder());
    let mut soak = std::process::Command::new(binaries.join("docket_chaos"));
    soak.current_dir(util::project_root())
        .arg("--docket-bin")
        .arg(binaries.join("docket"))
        .arg("--evidence")
        .arg(target.join("chaos"))
        .args(["--seconds", &options.seconds.to_string()])
        .args(["--replicas", &options.replicas.to_string()]);
    if let Some(seed) = options.seed {
        soak.args(["--seed", &seed.to_string()]);
    }
    util::section("chaos soak");
    util::run(&mut soak)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn options_are_read_and_default_to_a_release_soak_of_three_minutes() {
        assert_eq!(
            Options::parse(&[]).expect("no arguments"),
            Options::default()
        );
        assert_eq!(Options::default().seconds, 180);
        let options = Options::parse(&strings(&[
            "--seconds",
            "60",
            "--seed",
            "42",
            "--replicas",
            "4",
            "--profile",
            "dev",
        ]))
        .expect("valid arguments");
        assert_eq!(
            options,
            Options {
                seconds: 60,
                seed: Some(42),
                replicas: 4,
                profile: Profile::Dev,
            }
        );
    }

    #[test]
    fn bad_options_are_refused() {
        for args in [
            &["--profile", "fast"][..],
            &["--seconds"],
            &["--seconds", "soon"],
            &["--replicas", "1"],
            &["--verbose"],
        ] {
            assert!(Options::parse(&strings(args)).is_err(), "{args:?}");
        }
    }
}
