//! Helpers the commands share: where the workspace is, how to call cargo, and how to
//! run a child process so that its failure names the command that failed.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, bail};

/// The workspace root: xtask's own manifest directory is `<root>/xtask`, and xtask is
/// always built from the checkout it automates, so the compile-time path is right.
pub(crate) fn project_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

/// A `cargo` command run from the workspace root. `cargo xtask` sets `CARGO` to the
/// toolchain's cargo, which keeps nested calls on the same toolchain as the outer one.
pub(crate) fn cargo() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(project_root());
    command
}

/// Prints a header that makes the CI log easy to scan.
pub(crate) fn section(title: &str) {
    println!("\n==== {title} ====");
}

/// Runs `command` with inherited stdio and fails if it does not exit successfully.
pub(crate) fn run(command: &mut Command) -> anyhow::Result<()> {
    let shown = describe(command);
    println!("$ {shown}");
    let status = command
        .status()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !status.success() {
        bail!("`{shown}` failed ({status})");
    }
    Ok(())
}

/// Runs `command` and returns its stdout, failing with its stderr if it fails.
pub(crate) fn output(command: &mut Command) -> anyhow::Result<String> {
    let shown = describe(command);
    let output = command
        .output()
        .with_context(|| format!("could not start `{shown}`"))?;
    if !output.status.success() {
        bail!(
            "`{shown}` failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    String::from_utf8(output.stdout).with_context(|| format!("`{shown}` printed invalid UTF-8"))
}

/// The command line as a reader would type it, for logs and error messages.
pub(crate) fn describe(command: &Command) -> String {
    let program = Path::new(command.get_program())
        .file_name()
        .unwrap_or(command.get_program())
        .to_string_lossy()
        .into_owned();
    std::iter::once(program)
        .chain(
            command
                .get_args()
                .map(|arg| arg.to_string_lossy().into_owned()),
        )
        .collect::<Vec<_>>()
        .join(" ")
}

/// `cargo metadata --no-deps` as JSON: the workspace's packages and the target directory.
pub(crate) fn workspace_metadata() -> anyhow::Result<serde_json::Value> {
    let stdout = output(cargo().args(["metadata", "--format-version", "1", "--no-deps"]))?;
    serde_json::from_str(&stdout).context("`cargo metadata` printed something that is not JSON")
}

/// The cargo target directory (honours `CARGO_TARGET_DIR` and `build.target-dir`).
pub(crate) fn target_directory(metadata: &serde_json::Value) -> anyhow::Result<PathBuf> {
    metadata["target_directory"]
        .as_str()
        .map(PathBuf::from)
        .context("`cargo metadata` has no target_directory")
}
