//! `cargo xtask package`: packages every library crate as `cargo publish` would, without
//! publishing anything, so CI finds out when a crate could no longer be packaged: a file
//! its manifest names that is missing (its README), a file outside the crate that the
//! build needs, an internal dependency without a version, a dependency the registry
//! cannot resolve.
//!
//! The library crates are the workspace members that may be published (`publish` not
//! `false`); the binary, xtask and the dev-only crates say `publish = false`. They are
//! packaged in one `cargo package` call, which resolves each against the others through
//! a local registry, so crates nobody has published yet can depend on each other.
//!
//! `--no-verify`: verifying builds every packaged crate once more on its own, with its own
//! feature set, so most dependencies are compiled again too. On the two-core CI machine
//! verifying docket_export alone took five minutes, the first of seven crates (docket_storage
//! builds SQLite from C, docket_script starlark, docket_server all of them), and CI must stay
//! well under 45 minutes. What verification would find that packaging does not is a
//! file the build reads from outside the crate (a package holds only the crate's own
//! folder); [`files_read_from_outside`] finds those without a build, from the paths in
//! `include_str!`, `include_bytes!`, `include!` and `embed_migrations!`.

use std::path::{Component, Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::util;

/// The macros that read a file while the crate compiles, and what a relative path in
/// them is relative to.
const READING_MACROS: &[(&str, RelativeTo)] = &[
    ("include_str!(", RelativeTo::SourceFile),
    ("include_bytes!(", RelativeTo::SourceFile),
    ("include!(", RelativeTo::SourceFile),
    // diesel's macro reads a folder below the crate's manifest.
    ("embed_migrations!(", RelativeTo::CrateRoot),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RelativeTo {
    SourceFile,
    CrateRoot,
}

pub(crate) fn run() -> anyhow::Result<()> {
    let metadata = util::workspace_metadata()?;
    let crates = library_crates(&metadata)?;
    println!("library crates: {}", crates.join(", "));
    let root = util::project_root();
    let mut outside = Vec::new();
    for name in &crates {
        outside.extend(files_read_from_outside(
            &root,
            &crate_folder(&metadata, name)?,
        )?);
    }
    if !outside.is_empty() {
        bail!(
            "a packaged crate holds only its own folder, but these files are read from outside \
             it (link the folder into the crate, as docket_storage does with migrations/):\n{}",
            outside.join("\n")
        );
    }
    let mut command = util::cargo();
    // `--allow-dirty`: this checks that the crates can be packaged, not that the working
    // tree is committed (CI runs from a clean clone anyway).
    command.args(["package", "--no-verify", "--allow-dirty"]);
    for name in &crates {
        command.args(["--package", name]);
    }
    util::run(&mut command)
}

/// The names of the workspace members that may be published, sorted.
fn library_crates(metadata: &Value) -> anyhow::Result<Vec<String>> {
    let members = metadata["workspace_members"]
        .as_array()
        .context("`cargo metadata` has no workspace_members")?;
    let packages = metadata["packages"]
        .as_array()
        .context("`cargo metadata` has no packages")?;
    let mut names = Vec::new();
    for package in packages {
        if !members.contains(&package["id"]) || !may_publish(&package["publish"]) {
            continue;
        }
        let name = package["name"]
            .as_str()
            .context("a package in `cargo metadata` has no name")?;
        names.push(name.to_owned());
    }
    names.sort();
    Ok(names)
}

/// The folder of the workspace member `name`, relative to the workspace root.
fn crate_folder(metadata: &Value, name: &str) -> anyhow::Result<PathBuf> {
    let root = util::project_root();
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|package| package["name"] == name)
        .and_then(|package| package["manifest_path"].as_str())
        .and_then(|manifest| Path::new(manifest).parent())
        .map(|folder| folder.strip_prefix(&root).unwrap_or(folder).to_path_buf())
        .with_context(|| format!("`cargo metadata` has no manifest path for {name}"))
}

/// Every file or folder a `.rs` file of the crate in `folder` (relative to `root`) reads
/// at compile time from outside `folder`, as `file:line: path`. Paths that are not a
/// string literal (`concat!(env!(...), ...)`) are not followed.
fn files_read_from_outside(root: &Path, folder: &Path) -> anyhow::Result<Vec<String>> {
    let mut found = Vec::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(directory) = pending.pop() {
        let entries = std::fs::read_dir(root.join(&directory))
            .with_context(|| format!("could not list {}", directory.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("could not list {}", directory.display()))?;
            let relative = directory.join(entry.file_name());
            let name = entry.file_name().to_string_lossy().into_owned();
            // `file_type` does not follow links: a linked folder is read through, not into.
            let file_type = entry
                .file_type()
                .with_context(|| format!("could not stat {}", relative.display()))?;
            if file_type.is_dir() && !name.starts_with('.') && name != "target" {
                pending.push(relative);
            } else if file_type.is_file() && name.ends_with(".rs") {
                let text = std::fs::read_to_string(root.join(&relative))
                    .with_context(|| format!("could not read {}", relative.display()))?;
                found.extend(outside_reads(folder, &relative, &text));
            }
        }
    }
    found.sort();
    Ok(found)
}

/// The reads in `text` (the source of `file`, in the crate folder `folder`) whose path
/// leaves `folder`.
fn outside_reads(folder: &Path, file: &Path, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        for (macro_call, relative_to) in READING_MACROS {
            let mut rest = line;
            while let Some(start) = rest.find(macro_call) {
                rest = &rest[start + macro_call.len()..];
                let Some(literal) = rest.trim_start().strip_prefix('"') else {
                    continue;
                };
                let Some(end) = literal.find('"') else {
                    continue;
                };
                let path = &literal[..end];
                let base = match relative_to {
                    RelativeTo::SourceFile => file.parent().unwrap_or(folder),
                    RelativeTo::CrateRoot => folder,
                };
                if !normalize(&base.join(path)).starts_with(folder) {
                    found.push(format!("{}:{}: {path}", file.display(), index + 1));
                }
            }
        }
    }
    found
}

/// `path` with `.` and `..` resolved by name alone, as the package's file list sees it
/// (a link inside the crate stays inside).
fn normalize(path: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !normal.pop() {
                    normal.push("..");
                }
            }
            other => normal.push(other),
        }
    }
    normal
}

/// `publish` as `cargo metadata` reports it: `null` for any registry, a list of the
/// registries allowed, and an empty list for `publish = false`.
fn may_publish(publish: &Value) -> bool {
    match publish {
        Value::Array(registries) => !registries.is_empty(),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_from_outside_the_crate_are_found() {
        let folder = Path::new("crates/demo");
        let file = Path::new("crates/demo/src/queries/mod.rs");
        let text = "\
#![doc = include_str!(\"../../README.md\")]
const A: &str = include_str!(\"a.sql\");
const B: &[u8] = include_bytes!( \"../../../../migrations/x.sql\");
// include_str!(\"../../../../in/a/comment.sql\")
const M: EmbeddedMigrations = embed_migrations!(\"migrations/sqlite\");
const N: EmbeddedMigrations = embed_migrations!(\"../../migrations/sqlite\");
const C: &str = include_str!(concat!(env!(\"OUT_DIR\"), \"/generated.rs\"));
";
        assert_eq!(
            outside_reads(folder, file, text),
            [
                "crates/demo/src/queries/mod.rs:3: ../../../../migrations/x.sql",
                "crates/demo/src/queries/mod.rs:6: ../../migrations/sqlite",
            ]
        );
    }

    #[test]
    fn every_library_crate_reads_only_its_own_files() {
        let root = util::project_root();
        let metadata = util::workspace_metadata().expect("cargo metadata");
        for name in library_crates(&metadata).expect("library crates") {
            let folder = crate_folder(&metadata, &name).expect("crate folder");
            let outside = files_read_from_outside(&root, &folder).expect("readable sources");
            assert!(outside.is_empty(), "{name} reads {outside:?}");
        }
    }

    #[test]
    fn only_members_that_may_be_published_are_packaged() {
        let metadata = json!({
            "workspace_members": ["lib-id", "bin-id", "limited-id"],
            "packages": [
                {"id": "lib-id", "name": "lib", "publish": null},
                {"id": "bin-id", "name": "bin", "publish": []},
                {"id": "limited-id", "name": "limited", "publish": ["internal"]},
                {"id": "dep-id", "name": "dependency", "publish": null}
            ]
        });
        assert_eq!(
            library_crates(&metadata).expect("well-formed metadata"),
            ["lib", "limited"]
        );
    }
}
