//! The project's conventions as code, in the manner of rust-analyzer's
//! `xtask/src/tidy.rs`: `cargo xtask tidy` runs the checks, and the tests at the
//! bottom of this file run the very same functions, so plain `cargo test --workspace`
//! enforces them too.
//!
//! Each check returns every violation it finds, located as `file:line`, so one run
//! shows everything there is to fix.

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::util;

/// The internal dependency edges allowed per workspace package (docs/design.md, Crates
/// and their edges). Normal, dev and build dependencies are all held to it: a test that
/// reaches into another crate couples the two as much as code does. A new edge is a
/// design change, so it changes docs/design.md and this table together.
const ALLOWED_INTERNAL_DEPENDENCIES: &[(&str, &[&str])] = &[
    ("docket_protocol", &[]),
    ("docket_task", &[]),
    // The catalog's domain (assets, call records, scripts, runs, retention): types,
    // traits, in-memory stores and suites, with no database.
    ("docket_catalog", &[]),
    (
        "docket_storage",
        &[
            "docket_task",
            "docket_catalog",
            "docket_oauth",
            "docket_portal",
        ],
    ),
    // The Trino double is a dev-dependency only (see DEV_ONLY_PACKAGES).
    ("docket_export", &["docket_trino_double"]),
    ("docket_script", &[]),
    // Who a caller is at each upstream: claims, session users, token exchange.
    ("docket_identity", &[]),
    // The authorization server (issue 36): client registration, the brokered
    // login, tokens and keys, with its state behind the OAuthStore trait. Its
    // tests log in at a real OpenID provider (a dev-dependency only).
    ("docket_oauth", &["docket_oidc_provider"]),
    // The portal in the browser (issue 38): login through the authorization
    // server as its client, sessions behind the PortalStore trait, pages as
    // templates. The server composes it and gives it the person of a login.
    ("docket_portal", &[]),
    // OpenAPI catalogs (issue 40): documents parsed and indexed, searched,
    // schemas resolved, calls by operation planned and checked. No I/O.
    ("docket_openapi", &[]),
    // The run bridge and the server know the stores by their traits; only their
    // tests open a database (see ALLOWED_DEV_ONLY_DEPENDENCIES).
    (
        "docket_run_bridge",
        &["docket_task", "docket_catalog", "docket_script"],
    ),
    (
        "docket_server",
        &[
            "docket_protocol",
            "docket_task",
            "docket_catalog",
            "docket_export",
            "docket_script",
            "docket_run_bridge",
            "docket_identity",
            "docket_oauth",
            "docket_portal",
            // Spans, W3C trace context and the MCP conventions' metrics (issue 37).
            "docket_telemetry",
            // The OpenAPI catalogs of api connections (issue 40).
            "docket_openapi",
            // Its tests talk to the Trino double, a real OpenID provider, a real
            // OTLP receiver and a real FastAPI upstream (dev-dependencies only).
            "docket_trino_double",
            "docket_oidc_provider",
            "docket_otlp_collector",
            "docket_fastapi_upstream",
        ],
    ),
    // The binary installs the telemetry (docket_telemetry) in place of its own logging.
    (
        "docket",
        &["docket_server", "docket_storage", "docket_telemetry"],
    ),
    ("xtask", &[]),
    // The conformance fixture: a dev-only server that registers the suite's tools
    // through the public library API.
    (
        "docket_fixture",
        &[
            "docket_protocol",
            "docket_server",
            "docket_task",
            "docket_storage",
            // Its tests put rmcp before a real consent prompt (a dev-dependency only).
            "docket_trino_double",
        ],
    ),
    // The benchmarks: a dev-only binary that serves an App through the public
    // library API, measures the store against bare SQL through docket_storage,
    // exports from the Trino double against docket_export's raw page fetch, script
    // runs in child processes against in-process evaluation on run bridges, and apps
    // traced through docket_telemetry into the real OTLP receiver against tracing off.
    (
        "docket_bench",
        &[
            "docket_protocol",
            "docket_server",
            "docket_task",
            "docket_catalog",
            "docket_storage",
            "docket_export",
            "docket_trino_double",
            "docket_script",
            "docket_run_bridge",
            "docket_telemetry",
            "docket_otlp_collector",
        ],
    ),
    // The Trino double: a dev-only coordinator double on hyper and SQLite, for
    // docket_export's tests, CI's check with the official Python client, and benchmarks.
    ("docket_trino_double", &[]),
    // The OpenID provider for tests: a dev-only launcher of oidc-provider on Node
    // (testing/oidc-provider), for tests of per-caller identity and token exchange.
    ("docket_oidc_provider", &[]),
    // OpenTelemetry (issue 37): the tracing subscriber, OTLP export through a bounded
    // queue, W3C trace context, the MCP conventions' names. Its tests send to a real
    // OTLP receiver (a dev-dependency only).
    ("docket_telemetry", &["docket_otlp_collector"]),
    // The OTLP receiver for tests: a dev-only hyper server decoding opentelemetry-proto.
    ("docket_otlp_collector", &[]),
    // A real FastAPI upstream for tests (testing/fastapi-upstream): its OpenAPI
    // document, client-credentials tokens of the OpenID provider, mutual TLS.
    ("docket_fastapi_upstream", &["docket_oidc_provider"]),
];

/// Internal edges a package may have as a dev-dependency only, beyond its table row:
/// its code knows the stores by their traits (`docket_task`, `docket_catalog`), and
/// only its tests open a real database. Only `bin/docket`, the dev-only crates and
/// tests open one.
const ALLOWED_DEV_ONLY_DEPENDENCIES: &[(&str, &[&str])] = &[
    ("docket_run_bridge", &["docket_storage"]),
    ("docket_server", &["docket_storage"]),
];

/// Workspace packages that are never shipped: test doubles that exist to be talked to,
/// and the benchmark harness. They may name restricted crates (a double has to serve
/// HTTP and run SQL somehow), and in return nothing shipped may depend on them except
/// as a dev-dependency, so that none of it reaches a shipped binary.
const DEV_ONLY_PACKAGES: &[&str] = &[
    "docket_trino_double",
    "docket_bench",
    "docket_oidc_provider",
    "docket_otlp_collector",
    "docket_fastapi_upstream",
];

/// Crates any workspace package may use as a dev-dependency beyond its table row:
/// the wire types are what tests build requests from and assert responses against.
const ANY_PACKAGE_MAY_DEV_DEPEND_ON: &[&str] = &["docket_protocol"];

/// External crates that only one workspace package may use (as a normal or build
/// dependency), because docs/design.md (Crates and their edges) gives that package sole
/// knowledge of them.
const RESTRICTED_EXTERNAL_DEPENDENCIES: &[RestrictedDependency] = &[
    RestrictedDependency {
        name: CrateName::Exact("hyper"),
        owner: "docket_server",
        reason: "only docket_server knows hyper",
    },
    RestrictedDependency {
        name: CrateName::Exact("hyper-util"),
        owner: "docket_server",
        reason: "only docket_server knows hyper",
    },
    RestrictedDependency {
        name: CrateName::Prefix("diesel"),
        owner: "docket_storage",
        reason: "only docket_storage names diesel or SQL",
    },
    RestrictedDependency {
        name: CrateName::Prefix("starlark"),
        owner: "docket_script",
        reason: "only docket_script evaluates scripts; others use its sandbox",
    },
];

/// The folders whose `.rs` files the source checks read.
const SOURCE_ROOTS: &[&str] = &["crates", "bin", "xtask"];

/// Text no source file may contain, with the reason given to whoever wrote it. Each
/// pattern is assembled with `concat!` so that this file does not contain it literally
/// and trip its own check.
const FORBIDDEN_TEXT: &[(&str, &str)] = &[
    (
        concat!("todo", "!("),
        "unfinished code does not land; finish it or return an error",
    ),
    (
        concat!("unimplemented", "!("),
        "unfinished code does not land; finish it or return an error",
    ),
    (
        concat!("#[", "ignore"),
        "tests never skip silently (docs/design.md, Testing); fix the test or delete it",
    ),
    (
        concat!("#[", "should_panic"),
        "assert on the returned error instead of expecting a panic",
    ),
    (
        concat!("dbg", "!("),
        "leftover debugging output; use tracing or remove it",
    ),
];

/// One broken convention, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    /// `path:line`, relative to the workspace root.
    location: String,
    message: String,
}

impl Violation {
    fn new(path: &Path, line: usize, message: impl Into<String>) -> Self {
        Self {
            location: format!("{}:{line}", path.display()),
            message: message.into(),
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{}: {}", self.location, self.message)
    }
}

type Check = fn(&Path) -> anyhow::Result<Vec<Violation>>;

/// Every check, by the name `cargo xtask tidy` prints.
const CHECKS: &[(&str, Check)] = &[
    ("internal dependency edges (design.md)", dependency_edges),
    ("restricted external dependencies", restricted_dependencies),
    ("every .rs file starts with a //! comment", module_docs),
    ("no placeholder, skip or debug macros", forbidden_text),
    ("no module import cycle inside a crate", module_cycles),
];

/// `cargo xtask tidy`: runs every check and fails if any found a violation.
pub(crate) fn run() -> anyhow::Result<()> {
    let root = util::project_root();
    let mut failed = Vec::new();
    for (name, check) in CHECKS {
        let violations =
            check(&root).with_context(|| format!("tidy check `{name}` could not run"))?;
        if violations.is_empty() {
            println!("tidy: {name}: ok");
        } else {
            println!("tidy: {name}: {} violation(s)", violations.len());
            for violation in &violations {
                println!("  {violation}");
            }
            failed.push(*name);
        }
    }
    if !failed.is_empty() {
        bail!("tidy found violations in: {}", failed.join("; "));
    }
    Ok(())
}

/// Internal (path) dependencies of every workspace package against
/// [`ALLOWED_INTERNAL_DEPENDENCIES`].
fn dependency_edges(root: &Path) -> anyhow::Result<Vec<Violation>> {
    let metadata = util::workspace_metadata()?;
    Ok(dependency_edge_violations(&Workspace::from_metadata(
        &metadata, root,
    )?))
}

/// External dependencies against [`RESTRICTED_EXTERNAL_DEPENDENCIES`].
fn restricted_dependencies(root: &Path) -> anyhow::Result<Vec<Violation>> {
    let metadata = util::workspace_metadata()?;
    Ok(restricted_dependency_violations(&Workspace::from_metadata(
        &metadata, root,
    )?))
}

/// Every `.rs` file starts (after blank lines) with an inner doc comment saying what
/// it is for; a crate root may instead take its README as its doc (see [`README_DOC`]).
fn module_docs(root: &Path) -> anyhow::Result<Vec<Violation>> {
    let mut violations = Vec::new();
    for file in rust_files(root)? {
        let text = read_source(root, &file)?;
        violations.extend(module_doc_violation(&file, &text));
    }
    Ok(violations)
}

/// No source file contains any [`FORBIDDEN_TEXT`].
fn forbidden_text(root: &Path) -> anyhow::Result<Vec<Violation>> {
    let mut violations = Vec::new();
    for file in rust_files(root)? {
        let text = read_source(root, &file)?;
        violations.extend(forbidden_text_violations(&file, &text));
    }
    Ok(violations)
}

/// No two modules of one crate import each other, directly or around a longer
/// circle ([`crate::module_cycles`]).
fn module_cycles(root: &Path) -> anyhow::Result<Vec<Violation>> {
    Ok(crate::module_cycles::find(root)?
        .into_iter()
        .map(|cycle| {
            Violation::new(
                &cycle.source_root,
                0,
                format!(
                    "module import cycle: {}; move what they share into a third module, or put \
                     the dependency behind a trait the lower one defines",
                    cycle.modules.join(" ⇄ ")
                ),
            )
        })
        .collect())
}

/// The workspace packages as the dependency checks need them.
struct Workspace {
    packages: Vec<Package>,
}

struct Package {
    name: String,
    /// The manifest, relative to the workspace root, for messages.
    manifest: PathBuf,
    /// The manifest's text, to find the line a dependency is declared on.
    manifest_text: String,
    dependencies: Vec<Dependency>,
}

struct Dependency {
    /// The package name of the dependency.
    name: String,
    /// The key it is declared under (differs from `name` when renamed).
    key: String,
    kind: DependencyKind,
    /// Whether it is a path dependency, which is how workspace members refer to
    /// each other.
    is_path: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DependencyKind {
    Normal,
    Dev,
    Build,
}

impl DependencyKind {
    fn from_metadata(kind: &Value) -> anyhow::Result<Self> {
        match kind.as_str() {
            None => Ok(Self::Normal),
            Some("dev") => Ok(Self::Dev),
            Some("build") => Ok(Self::Build),
            Some(other) => bail!("unknown dependency kind `{other}` in `cargo metadata`"),
        }
    }

    /// The manifest table this kind is declared in.
    fn table(self) -> &'static str {
        match self {
            Self::Normal => "dependencies",
            Self::Dev => "dev-dependencies",
            Self::Build => "build-dependencies",
        }
    }
}

impl fmt::Display for DependencyKind {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.table())
    }
}

impl Workspace {
    /// Reads the packages out of `cargo metadata --no-deps` output, which lists the
    /// workspace members only. Manifests that cannot be read still get checked; their
    /// violations then point at line 1.
    fn from_metadata(metadata: &Value, root: &Path) -> anyhow::Result<Self> {
        let packages = metadata["packages"]
            .as_array()
            .context("`cargo metadata` has no packages array")?;
        let mut parsed = Vec::new();
        for package in packages {
            let name = json_str(package, "name")?.to_owned();
            let manifest_path = PathBuf::from(json_str(package, "manifest_path")?);
            let manifest_text = std::fs::read_to_string(&manifest_path).unwrap_or_default();
            let manifest = manifest_path
                .strip_prefix(root)
                .map(Path::to_path_buf)
                .unwrap_or(manifest_path);
            let mut dependencies = Vec::new();
            for dependency in package["dependencies"].as_array().into_iter().flatten() {
                let name = json_str(dependency, "name")?.to_owned();
                let key = dependency["rename"].as_str().unwrap_or(&name).to_owned();
                dependencies.push(Dependency {
                    kind: DependencyKind::from_metadata(&dependency["kind"])?,
                    is_path: dependency["path"].is_string(),
                    name,
                    key,
                });
            }
            parsed.push(Package {
                name,
                manifest,
                manifest_text,
                dependencies,
            });
        }
        Ok(Self { packages: parsed })
    }
}

fn json_str<'a>(value: &'a Value, key: &str) -> anyhow::Result<&'a str> {
    value[key]
        .as_str()
        .with_context(|| format!("`cargo metadata` entry without a string `{key}`"))
}

fn dependency_edge_violations(workspace: &Workspace) -> Vec<Violation> {
    let members: BTreeSet<&str> = workspace
        .packages
        .iter()
        .map(|package| package.name.as_str())
        .collect();
    let mut violations = Vec::new();
    for package in &workspace.packages {
        let Some(allowed) = allowed_internal_dependencies(&package.name) else {
            violations.push(Violation::new(
                &package.manifest,
                1,
                format!(
                    "workspace package `{}` is not in the dependency table; a new crate is a \
                     design change: add it to docs/design.md (Crates and their edges) and to \
                     ALLOWED_INTERNAL_DEPENDENCIES in xtask/src/tidy.rs",
                    package.name
                ),
            ));
            continue;
        };
        for dependency in &package.dependencies {
            if !dependency.is_path || !members.contains(dependency.name.as_str()) {
                continue;
            }
            if dependency.kind != DependencyKind::Dev
                && DEV_ONLY_PACKAGES.contains(&dependency.name.as_str())
                && !DEV_ONLY_PACKAGES.contains(&package.name.as_str())
            {
                violations.push(Violation::new(
                    &package.manifest,
                    manifest_line(&package.manifest_text, &dependency.key, dependency.kind),
                    format!(
                        "`{}` depends on `{}` ({}), a dev-only package; use it as a \
                         dev-dependency only",
                        package.name, dependency.name, dependency.kind
                    ),
                ));
                continue;
            }
            // A package may dev-depend on itself, to turn on a feature of its own
            // (`testing`) for its integration tests.
            let allowed_for_tests = dependency.kind == DependencyKind::Dev
                && (ANY_PACKAGE_MAY_DEV_DEPEND_ON.contains(&dependency.name.as_str())
                    || dependency.name == package.name
                    || allowed_dev_only_dependencies(&package.name)
                        .contains(&dependency.name.as_str()));
            if allowed.contains(&dependency.name.as_str()) || allowed_for_tests {
                continue;
            }
            violations.push(Violation::new(
                &package.manifest,
                manifest_line(&package.manifest_text, &dependency.key, dependency.kind),
                format!(
                    "`{}` depends on `{}` ({}), an edge docs/design.md does not allow \
                     (allowed: {}); a new dependency edge is a design change",
                    package.name,
                    dependency.name,
                    dependency.kind,
                    describe_allowed(allowed),
                ),
            ));
        }
    }
    violations
}

fn allowed_internal_dependencies(package: &str) -> Option<&'static [&'static str]> {
    ALLOWED_INTERNAL_DEPENDENCIES
        .iter()
        .find(|(name, _)| *name == package)
        .map(|(_, allowed)| *allowed)
}

fn allowed_dev_only_dependencies(package: &str) -> &'static [&'static str] {
    ALLOWED_DEV_ONLY_DEPENDENCIES
        .iter()
        .find(|(name, _)| *name == package)
        .map_or(&[], |(_, allowed)| *allowed)
}

fn describe_allowed(allowed: &[&str]) -> String {
    if allowed.is_empty() {
        "none".to_owned()
    } else {
        allowed.join(", ")
    }
}

/// A crate name, or every crate whose name starts with a prefix (`diesel`,
/// `diesel-async`, `diesel_migrations`, ...).
#[derive(Debug, Clone, Copy)]
enum CrateName {
    Exact(&'static str),
    Prefix(&'static str),
}

impl CrateName {
    fn matches(self, name: &str) -> bool {
        match self {
            Self::Exact(exact) => name == exact,
            Self::Prefix(prefix) => name.starts_with(prefix),
        }
    }
}

struct RestrictedDependency {
    name: CrateName,
    owner: &'static str,
    reason: &'static str,
}

fn restricted_dependency_violations(workspace: &Workspace) -> Vec<Violation> {
    let mut violations = Vec::new();
    let shipped_packages = workspace
        .packages
        .iter()
        .filter(|package| !DEV_ONLY_PACKAGES.contains(&package.name.as_str()));
    for package in shipped_packages {
        // Tests may drive a server over hyper or seed a database as they see fit; the
        // invariant is about what the shipped code knows.
        let shipped = package
            .dependencies
            .iter()
            .filter(|dependency| dependency.kind != DependencyKind::Dev);
        for dependency in shipped {
            let restriction = RESTRICTED_EXTERNAL_DEPENDENCIES.iter().find(|restriction| {
                restriction.name.matches(&dependency.name) && restriction.owner != package.name
            });
            if let Some(restriction) = restriction {
                violations.push(Violation::new(
                    &package.manifest,
                    manifest_line(&package.manifest_text, &dependency.key, dependency.kind),
                    format!(
                        "`{}` depends on `{}` ({}), but {} (docs/design.md, Crates and their \
                         edges)",
                        package.name, dependency.name, dependency.kind, restriction.reason
                    ),
                ));
            }
        }
    }
    violations
}

/// The 1-based line that declares dependency `key` of `kind` in a manifest, or 1 when
/// it cannot be found (an inherited or unusual declaration): the message still names
/// the dependency, the line only saves the reader a search.
fn manifest_line(manifest: &str, key: &str, kind: DependencyKind) -> usize {
    let table = kind.table();
    let mut in_table = false;
    for (index, line) in manifest.lines().enumerate() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_end_matches(']').trim();
            // `[dev-dependencies.foo]` and `[target.'cfg(unix)'.dev-dependencies.foo]`.
            let dotted = format!("{table}.{key}");
            if header == dotted || header.ends_with(&format!(".{dotted}")) {
                return index + 1;
            }
            in_table = header == table || header.ends_with(&format!(".{table}"));
            continue;
        }
        if in_table
            && let Some(rest) = line.strip_prefix(key)
            && rest.trim_start().starts_with(['=', '.'])
        {
            return index + 1;
        }
    }
    1
}

/// The first line of a library crate whose README is its crate doc, so that the
/// example a reader sees first is a doctest (STYLE.md 14).
const README_DOC: &str = "#![doc = include_str!(\"../README.md\")]";

fn module_doc_violation(file: &Path, text: &str) -> Option<Violation> {
    let first = text
        .lines()
        .enumerate()
        .find(|(_, line)| !line.trim().is_empty());
    match first {
        Some((_, line)) if line.trim_start().starts_with("//!") => None,
        Some((_, line)) if file.ends_with("src/lib.rs") && line.trim() == README_DOC => None,
        Some((index, line)) => Some(Violation::new(
            file,
            index + 1,
            format!(
                "starts with `{}` instead of a `//!` comment saying what the file is for",
                line.trim()
            ),
        )),
        None => Some(Violation::new(
            file,
            1,
            "is empty; start it with a `//!` comment saying what the file is for",
        )),
    }
}

fn forbidden_text_violations(file: &Path, text: &str) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (index, line) in text.lines().enumerate() {
        for (pattern, reason) in FORBIDDEN_TEXT {
            if line.contains(pattern) {
                violations.push(Violation::new(
                    file,
                    index + 1,
                    format!("`{pattern}`: {reason}"),
                ));
            }
        }
    }
    violations
}

/// Every `.rs` file under [`SOURCE_ROOTS`], relative to `root`, sorted so that the
/// report reads the same on every run. Hidden folders and `target` folders are
/// build output or tool state, not source.
fn rust_files(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut pending: Vec<PathBuf> = SOURCE_ROOTS
        .iter()
        .map(PathBuf::from)
        .filter(|relative| root.join(relative).is_dir())
        .collect();
    while let Some(directory) = pending.pop() {
        let entries = std::fs::read_dir(root.join(&directory))
            .with_context(|| format!("could not list {}", directory.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("could not list {}", directory.display()))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let relative = directory.join(&*name);
            let file_type = entry
                .file_type()
                .with_context(|| format!("could not stat {}", relative.display()))?;
            if file_type.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    pending.push(relative);
                }
            } else if name.ends_with(".rs") {
                files.push(relative);
            }
        }
    }
    files.sort();
    Ok(files)
}

fn read_source(root: &Path, file: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(root.join(file))
        .with_context(|| format!("could not read {}", file.display()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Runs a check on this checkout and fails with every violation it found.
    fn assert_clean(check: Check) {
        let violations = check(&util::project_root()).expect("the check could not run");
        assert!(
            violations.is_empty(),
            "{} violation(s):\n{}",
            violations.len(),
            violations
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    #[test]
    fn internal_dependency_edges_follow_the_design() {
        assert_clean(dependency_edges);
    }

    #[test]
    fn restricted_external_dependencies_stay_with_their_owner() {
        assert_clean(restricted_dependencies);
    }

    #[test]
    fn every_rust_file_starts_with_a_module_doc() {
        assert_clean(module_docs);
    }

    #[test]
    fn no_placeholder_skip_or_debug_macros() {
        assert_clean(forbidden_text);
    }

    #[test]
    fn no_module_import_cycle_inside_a_crate() {
        assert_clean(module_cycles);
    }

    // The tests below feed the checks made-up input, so that a check which silently
    // stopped finding anything would not pass the tests above unnoticed.

    fn package(name: &str, dependencies: Value) -> Value {
        json!({
            "name": name,
            "manifest_path": format!("/repo/crates/{name}/Cargo.toml"),
            "dependencies": dependencies,
        })
    }

    fn path_dependency(name: &str, kind: Option<&str>) -> Value {
        json!({ "name": name, "kind": kind, "path": format!("/repo/crates/{name}") })
    }

    fn registry_dependency(name: &str, kind: Option<&str>) -> Value {
        json!({ "name": name, "kind": kind, "path": null })
    }

    fn workspace(packages: Value) -> Workspace {
        Workspace::from_metadata(&json!({ "packages": packages }), Path::new("/repo"))
            .expect("test metadata is well formed")
    }

    fn messages(violations: &[Violation]) -> Vec<String> {
        violations.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn allowed_edges_pass_and_every_forbidden_edge_is_reported() {
        let workspace = workspace(json!([
            package("docket_protocol", json!([])),
            package("docket_task", json!([])),
            package(
                "docket_storage",
                json!([
                    path_dependency("docket_task", None),
                    path_dependency("docket_protocol", Some("dev")),
                ])
            ),
            package(
                "docket_export",
                json!([
                    path_dependency("docket_task", Some("dev")),
                    path_dependency("docket_storage", Some("build")),
                ])
            ),
        ]));
        let found = messages(&dependency_edge_violations(&workspace));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(found[0].contains("`docket_export` depends on `docket_task` (dev-dependencies)"));
        assert!(
            found[1].contains("`docket_export` depends on `docket_storage` (build-dependencies)")
        );
    }

    #[test]
    fn storage_is_allowed_to_the_server_and_the_bridge_as_a_dev_dependency_only() {
        let workspace = workspace(json!([
            package("docket_catalog", json!([])),
            package(
                "docket_storage",
                json!([
                    path_dependency("docket_catalog", None),
                    path_dependency("docket_storage", Some("dev")),
                ])
            ),
            package(
                "docket_run_bridge",
                json!([
                    path_dependency("docket_catalog", None),
                    path_dependency("docket_storage", Some("dev")),
                ])
            ),
            package(
                "docket_server",
                json!([
                    path_dependency("docket_catalog", None),
                    path_dependency("docket_storage", None),
                ])
            ),
        ]));
        let found = messages(&dependency_edge_violations(&workspace));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("`docket_server` depends on `docket_storage` (dependencies)"));
    }

    #[test]
    fn protocol_is_allowed_as_a_dev_dependency_only() {
        let workspace = workspace(json!([
            package("docket_protocol", json!([])),
            package(
                "docket_task",
                json!([path_dependency("docket_protocol", None)])
            ),
            package(
                "docket_script",
                json!([path_dependency("docket_protocol", Some("dev"))])
            ),
        ]));
        let found = messages(&dependency_edge_violations(&workspace));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains("`docket_task` depends on `docket_protocol` (dependencies)"));
    }

    #[test]
    fn an_unknown_package_must_be_added_to_the_table() {
        let workspace = workspace(json!([package("docket_newcomer", json!([]))]));
        let found = messages(&dependency_edge_violations(&workspace));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].starts_with("crates/docket_newcomer/Cargo.toml:1:"),
            "{}",
            found[0]
        );
        assert!(found[0].contains("add it to docs/design.md"));
    }

    #[test]
    fn restricted_crates_are_reported_outside_their_owner() {
        let workspace = workspace(json!([
            package(
                "docket_server",
                json!([
                    registry_dependency("hyper", None),
                    registry_dependency("diesel", None)
                ])
            ),
            package(
                "docket_storage",
                json!([
                    registry_dependency("diesel-async", None),
                    registry_dependency("hyper-util", Some("dev")),
                ])
            ),
            package(
                "docket",
                json!([registry_dependency("hyper-util", Some("build"))])
            ),
        ]));
        let found = messages(&restricted_dependency_violations(&workspace));
        assert_eq!(found.len(), 2, "{found:#?}");
        assert!(found[0].contains("`docket_server` depends on `diesel`"));
        assert!(found[1].contains("`docket` depends on `hyper-util` (build-dependencies)"));
    }

    #[test]
    fn dev_only_packages_may_name_restricted_crates_but_only_be_dev_dependencies() {
        let workspace = workspace(json!([
            package(
                "docket_trino_double",
                json!([registry_dependency("hyper", None)])
            ),
            package(
                "docket_export",
                json!([
                    path_dependency("docket_trino_double", Some("dev")),
                    path_dependency("docket_trino_double", None),
                ])
            ),
            // One dev-only package may build on another: neither is shipped.
            package(
                "docket_bench",
                json!([path_dependency("docket_trino_double", None)])
            ),
        ]));
        assert!(restricted_dependency_violations(&workspace).is_empty());
        let found = messages(&dependency_edge_violations(&workspace));
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].contains(
            "`docket_export` depends on `docket_trino_double` (dependencies), a dev-only package"
        ));
    }

    #[test]
    fn manifest_line_finds_the_declaration_of_the_right_kind() {
        let manifest = "\
[package]
name = \"demo\"

[dependencies]
docket_task.workspace = true
serde = { workspace = true }

[dev-dependencies]
docket_task = { path = \"../docket_task\" }

[target.'cfg(unix)'.build-dependencies.docket_storage]
path = \"../docket_storage\"
";
        assert_eq!(
            manifest_line(manifest, "docket_task", DependencyKind::Normal),
            5
        );
        assert_eq!(manifest_line(manifest, "serde", DependencyKind::Normal), 6);
        assert_eq!(
            manifest_line(manifest, "docket_task", DependencyKind::Dev),
            9
        );
        assert_eq!(
            manifest_line(manifest, "docket_storage", DependencyKind::Build),
            11
        );
        assert_eq!(
            manifest_line(manifest, "missing", DependencyKind::Normal),
            1
        );
    }

    #[test]
    fn module_doc_must_come_first() {
        let file = Path::new("crates/demo/src/lib.rs");
        assert_eq!(module_doc_violation(file, "\n//! Demo.\nfn f() {}\n"), None);
        let found = module_doc_violation(file, "\n// Demo.\n//! Late.\n").map(|v| v.to_string());
        assert_eq!(
            found.as_deref(),
            Some(
                "crates/demo/src/lib.rs:2: starts with `// Demo.` instead of a `//!` comment \
                 saying what the file is for"
            )
        );
        assert!(module_doc_violation(file, "  \n").is_some());
    }

    #[test]
    fn a_crate_root_may_take_its_readme_as_its_doc() {
        let text = "#![doc = include_str!(\"../README.md\")]\n\npub mod a;\n";
        assert_eq!(
            module_doc_violation(Path::new("crates/demo/src/lib.rs"), text),
            None
        );
        // Only a crate root: a module still says what it is for in its own words.
        assert!(module_doc_violation(Path::new("crates/demo/src/a.rs"), text).is_some());
    }

    #[test]
    fn every_forbidden_pattern_is_reported_with_its_line() {
        let text = [
            "//! Demo.",
            concat!("fn a() { to", "do!() }"),
            concat!("fn b() { unimplemented", "!() }"),
            concat!("#[", "ignore = \"slow\"]"),
            concat!("#[", "should_panic]"),
            concat!("fn c() { db", "g!(1); to", "do!() }"),
        ]
        .join("\n");
        let found = messages(&forbidden_text_violations(Path::new("x.rs"), &text));
        let locations: Vec<&str> = found
            .iter()
            .map(|message| message.split(": ").next().unwrap_or_default())
            .collect();
        assert_eq!(
            locations,
            ["x.rs:2", "x.rs:3", "x.rs:4", "x.rs:5", "x.rs:6", "x.rs:6"]
        );
    }
}
