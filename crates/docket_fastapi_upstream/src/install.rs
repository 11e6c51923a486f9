//! The Python environment, installed once into the workspace's `target/` and reused.
//!
//! `testing/fastapi-upstream`'s requirements.txt and app.py are compiled into this crate. A
//! venv is made with `python3 -m venv` in
//! `target/fastapi-upstream/<hash of requirements.txt and the Python version>/` and filled
//! with `pip install -r requirements.txt`, in a temporary folder renamed into place when the
//! install is complete, under an exclusive lock on `target/fastapi-upstream/.lock`: so tests
//! of one process and of several never install twice at once, and a killed install leaves
//! nothing that looks installed. (A venv survives the rename: its `python` finds the venv by
//! the `pyvenv.cfg` beside it; only its scripts, which are never run, name the old path.)
//! app.py is written beside the venv under a name with its own hash, so a changed app needs no
//! new install.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

use crate::tail::tail;

const REQUIREMENTS: &str = include_str!("../../../testing/fastapi-upstream/requirements.txt");
const APP_PY: &str = include_str!("../../../testing/fastapi-upstream/app.py");

/// A hang guard for `pip install`: the index is slow at worst, never this slow.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The marker a finished install carries.
const COMPLETE: &str = ".complete";

/// Why the environment could not be installed.
#[derive(Debug)]
pub(crate) enum InstallError {
    /// A tool is missing or the install failed: the upstream is unavailable on this machine.
    Unavailable(String),
    /// Anything else (a file system error in `target/`).
    Failed(anyhow::Error),
}

/// What to run: the venv's Python, the app, and the folder to run it in.
#[derive(Debug)]
pub(crate) struct Installed {
    pub(crate) dir: PathBuf,
    pub(crate) python: PathBuf,
    pub(crate) script: PathBuf,
}

fn short_hash(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.as_bytes());
        hasher.update([0]);
    }
    hex::encode(&hasher.finalize()[..8])
}

/// `target/fastapi-upstream`: `CARGO_TARGET_DIR` when it is an absolute path, else the
/// workspace's `target/`.
pub(crate) fn cache_root() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("fastapi-upstream")
}

/// The venv's interpreter inside `venv`.
fn venv_python(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    }
}

fn failed(what: String) -> impl FnOnce(io::Error) -> InstallError {
    move |error| InstallError::Failed(anyhow::anyhow!("{what}: {error}"))
}

/// Installs the venv unless it already is, and writes the app. `python_version` (what
/// `python3 --version` said) is part of the folder's name: a venv belongs to one interpreter.
/// Blocking: call it from `spawn_blocking`.
pub(crate) fn ensure_installed(python_version: &str) -> Result<Installed, InstallError> {
    let root = cache_root();
    fs::create_dir_all(&root).map_err(failed(format!("create {}", root.display())))?;
    let lock_path = root.join(".lock");
    let lock = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(failed(format!("open {}", lock_path.display())))?;
    // Exclusive across processes and across the open files of one process; released when
    // `lock` is dropped.
    lock.lock()
        .map_err(failed(format!("lock {}", lock_path.display())))?;

    let dir = root.join(short_hash(&[REQUIREMENTS, python_version]));
    if !dir.join(COMPLETE).is_file() {
        install_into(&root, &dir)?;
    }

    let script = dir.join(format!("app-{}.py", short_hash(&[APP_PY])));
    if !script.is_file() {
        let temporary = dir.join(format!(".app-{}.tmp", std::process::id()));
        fs::write(&temporary, APP_PY).map_err(failed(format!("write {}", temporary.display())))?;
        fs::rename(&temporary, &script)
            .map_err(failed(format!("rename into {}", script.display())))?;
    }
    drop(lock);
    Ok(Installed {
        python: venv_python(&dir.join("venv")),
        dir,
        script,
    })
}

fn install_into(root: &Path, dir: &Path) -> Result<(), InstallError> {
    let temporary = root.join(format!(".install-{}", std::process::id()));
    if temporary.exists() {
        fs::remove_dir_all(&temporary)
            .map_err(failed(format!("remove {}", temporary.display())))?;
    }
    fs::create_dir_all(&temporary).map_err(failed(format!("create {}", temporary.display())))?;
    let outcome = (|| {
        let requirements = temporary.join("requirements.txt");
        fs::write(&requirements, REQUIREMENTS)
            .map_err(failed("write requirements.txt".to_owned()))?;
        let venv = temporary.join("venv");
        run_logged(
            &temporary,
            Command::new("python3").arg("-m").arg("venv").arg(&venv),
            "python3 -m venv",
        )?;
        run_logged(
            &temporary,
            Command::new(venv_python(&venv))
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--no-input",
                    "--quiet",
                    "-r",
                ])
                .arg(&requirements),
            "pip install --disable-pip-version-check --quiet -r requirements.txt",
        )?;
        File::create(temporary.join(COMPLETE))
            .map_err(failed(format!("mark {} complete", temporary.display())))?;
        if dir.exists() {
            // Left by an install of an older layout, or a hand-made folder: never complete.
            fs::remove_dir_all(dir).map_err(failed(format!("remove {}", dir.display())))?;
        }
        fs::rename(&temporary, dir).map_err(failed(format!("rename into {}", dir.display())))
    })();
    if outcome.is_err() {
        // Best effort: a leftover temporary folder is removed by the next install.
        let _ = fs::remove_dir_all(&temporary);
    }
    outcome
}

/// Runs `command` in `dir` with its output in `dir/install.log` (a file, so that no pipe can
/// fill up and stall it), quoting the log's end when it fails.
fn run_logged(dir: &Path, command: &mut Command, what: &str) -> Result<(), InstallError> {
    let log_path = dir.join("install.log");
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(failed(format!("open {}", log_path.display())))?;
    let log_for_stderr = log
        .try_clone()
        .map_err(failed(format!("open {}", log_path.display())))?;
    let spawned = command
        .current_dir(dir)
        .env("PIP_NO_INPUT", "1")
        .env_remove("PYTHONHOME")
        .env_remove("PYTHONPATH")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_for_stderr)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(InstallError::Unavailable(format!(
                "`{what}`: the program is not on the PATH (install Python 3.10 or later with \
                 its venv module)"
            )));
        }
        Err(error) => {
            return Err(InstallError::Unavailable(format!(
                "cannot run `{what}`: {error}"
            )));
        }
    };
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > INSTALL_TIMEOUT => {
                // Best effort: the child is abandoned either way.
                let _ = child.kill();
                let _ = child.wait();
                return Err(InstallError::Unavailable(format!(
                    "`{what}` in {} did not finish within {} s",
                    dir.display(),
                    INSTALL_TIMEOUT.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(error) => {
                return Err(InstallError::Failed(anyhow::anyhow!(
                    "wait for `{what}`: {error}"
                )));
            }
        }
    };
    if status.success() {
        return Ok(());
    }
    // Best effort: an unreadable log only makes the message shorter.
    let output = fs::read_to_string(&log_path).unwrap_or_default();
    Err(InstallError::Unavailable(format!(
        "`{what}` in {} failed ({status}): {}",
        dir.display(),
        tail(&output, 2000).trim()
    )))
}
