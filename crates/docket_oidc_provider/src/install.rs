//! The npm project, installed once into the workspace's `target/` and reused.
//!
//! `testing/oidc-provider`'s package.json, package-lock.json and provider.mjs are compiled into
//! this crate. They are installed into `target/oidc-provider/<hash of package.json and the
//! lock>/` with `npm ci --no-audit --no-fund`, in a temporary folder renamed into place when
//! the install is complete, under an exclusive lock on `target/oidc-provider/.lock`: so tests
//! of one process and of several never install twice at once, and a killed install leaves
//! nothing that looks installed. provider.mjs is written beside `node_modules` under a name
//! with its own hash, so a changed script needs no new install.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

const PACKAGE_JSON: &str = include_str!("../../../testing/oidc-provider/package.json");
const PACKAGE_LOCK: &str = include_str!("../../../testing/oidc-provider/package-lock.json");
const PROVIDER_MJS: &str = include_str!("../../../testing/oidc-provider/provider.mjs");

/// A hang guard for `npm ci`: the registry is slow at worst, never this slow.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(600);

/// The marker a finished install carries.
const COMPLETE: &str = ".complete";

/// Why the provider could not be installed.
#[derive(Debug)]
pub(crate) enum InstallError {
    /// A tool is missing or the install failed: the provider is unavailable on this machine.
    Unavailable(String),
    /// Anything else (a file system error in `target/`).
    Failed(anyhow::Error),
}

/// Where `node` should run: the install folder and the script in it.
#[derive(Debug)]
pub(crate) struct Installed {
    pub(crate) dir: PathBuf,
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

/// `target/oidc-provider`: `CARGO_TARGET_DIR` when it is an absolute path, else the
/// workspace's `target/`.
pub(crate) fn cache_root() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .filter(|path| path.is_absolute())
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("oidc-provider")
}

/// Installs the npm project unless it already is, and writes the script. Blocking: call it
/// from `spawn_blocking`.
pub(crate) fn ensure_installed() -> Result<Installed, InstallError> {
    let root = cache_root();
    let failed = |what: String| {
        move |error: io::Error| InstallError::Failed(anyhow::anyhow!("{what}: {error}"))
    };
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

    let dir = root.join(short_hash(&[PACKAGE_JSON, PACKAGE_LOCK]));
    if !dir.join(COMPLETE).is_file() {
        install_into(&root, &dir)?;
    }

    let script = dir.join(format!("provider-{}.mjs", short_hash(&[PROVIDER_MJS])));
    if !script.is_file() {
        let temporary = dir.join(format!(".provider-{}.tmp", std::process::id()));
        fs::write(&temporary, PROVIDER_MJS)
            .map_err(failed(format!("write {}", temporary.display())))?;
        fs::rename(&temporary, &script)
            .map_err(failed(format!("rename into {}", script.display())))?;
    }
    drop(lock);
    Ok(Installed { dir, script })
}

fn install_into(root: &Path, dir: &Path) -> Result<(), InstallError> {
    let failed = |what: String| {
        move |error: io::Error| InstallError::Failed(anyhow::anyhow!("{what}: {error}"))
    };
    let temporary = root.join(format!(".install-{}", std::process::id()));
    if temporary.exists() {
        fs::remove_dir_all(&temporary)
            .map_err(failed(format!("remove {}", temporary.display())))?;
    }
    fs::create_dir_all(&temporary).map_err(failed(format!("create {}", temporary.display())))?;
    let outcome = (|| {
        fs::write(temporary.join("package.json"), PACKAGE_JSON)
            .map_err(failed("write package.json".to_owned()))?;
        fs::write(temporary.join("package-lock.json"), PACKAGE_LOCK)
            .map_err(failed("write package-lock.json".to_owned()))?;
        run_npm_ci(&temporary)?;
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

fn run_npm_ci(dir: &Path) -> Result<(), InstallError> {
    let mut child = match Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir)
        .env("npm_config_update_notifier", "false")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(child) => child,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(InstallError::Unavailable(
                "npm is not on the PATH (install Node.js and npm)".to_owned(),
            ));
        }
        Err(error) => {
            return Err(InstallError::Unavailable(format!(
                "cannot run npm: {error}"
            )));
        }
    };
    // npm's error output is short; it is read on a thread so that a full pipe cannot stall it.
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(stderr) = stderr.as_mut() {
            // Best effort: unreadable output only makes the error message shorter.
            let _ = stderr.read_to_string(&mut text);
        }
        text
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() > INSTALL_TIMEOUT => {
                // Best effort: the child is abandoned either way.
                let _ = child.kill();
                let _ = child.wait();
                return Err(InstallError::Unavailable(format!(
                    "`npm ci` in {} did not finish within {} s",
                    dir.display(),
                    INSTALL_TIMEOUT.as_secs()
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(error) => {
                return Err(InstallError::Failed(anyhow::anyhow!(
                    "wait for npm: {error}"
                )));
            }
        }
    };
    let output = reader.join().unwrap_or_default();
    if status.success() {
        Ok(())
    } else {
        Err(InstallError::Unavailable(format!(
            "`npm ci --no-audit --no-fund` in {} failed ({status}): {}",
            dir.display(),
            tail(&output, 2000).trim()
        )))
    }
}

/// The last `max` bytes of `text`, cut at a character boundary.
pub(crate) fn tail(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    &text[start..]
}
