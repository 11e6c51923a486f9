//! A running upstream: `app.py` in the installed venv, on a free port of 127.0.0.1, killed
//! when its [`FastApiUpstream`] is dropped.

use std::fmt;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::config::UpstreamConfig;
use crate::install;
use crate::tail::tail;
use crate::unavailable::{Unavailable, announce_skip, required};

/// A hang guard for the start (Python importing FastAPI, and reading the issuer's discovery
/// document when JWTs are required).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// How much of the upstream's standard error is kept for error messages.
const STDERR_KEPT: usize = 16 * 1024;

/// The oldest Python the app runs on (`X | None` annotations are evaluated at runtime).
const MIN_PYTHON: (u32, u32) = (3, 10);

/// A running upstream: a Python child process, killed when this is dropped (and exiting on
/// its own when its standard input, held here, closes, so that it never outlives the test
/// process).
pub struct FastApiUpstream {
    base_url: String,
    stderr: Arc<Mutex<String>>,
    // Dropped first: the app exits when its standard input closes.
    _stdin: ChildStdin,
    _child: Child,
}

impl fmt::Debug for FastApiUpstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FastApiUpstream")
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

enum StartError {
    Unavailable(String),
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for StartError {
    fn from(error: anyhow::Error) -> Self {
        Self::Failed(error)
    }
}

impl FastApiUpstream {
    /// Installs the Python environment if needed, starts the app with `config` on a free port
    /// of 127.0.0.1, and waits until it accepts connections.
    ///
    /// # Errors
    ///
    /// An [`Unavailable`] when `python3`, its venv module or the install fails and
    /// [`REQUIRE_VAR`](crate::REQUIRE_VAR) is not `1`; otherwise any failure, with the app's
    /// standard error when it exited (for example because the issuer could not be reached).
    pub async fn start(config: UpstreamConfig) -> anyhow::Result<Self> {
        match Self::try_start(&config).await {
            Ok(upstream) => Ok(upstream),
            Err(StartError::Failed(error)) => Err(error),
            Err(StartError::Unavailable(reason)) if required() => Err(anyhow!(
                "{}=1 but the FastAPI upstream for tests cannot run: {reason}",
                crate::REQUIRE_VAR
            )),
            Err(StartError::Unavailable(reason)) => Err(Unavailable { reason }.into()),
        }
    }

    /// [`start`](Self::start), except that an [`Unavailable`] upstream is said on the
    /// terminal (past libtest's capture) and answered with `None`, so that the test named
    /// `test_name` can return early.
    ///
    /// # Errors
    ///
    /// As [`start`](Self::start), less [`Unavailable`].
    pub async fn start_or_skip(
        config: UpstreamConfig,
        test_name: &str,
    ) -> anyhow::Result<Option<Self>> {
        match Self::start(config).await {
            Ok(upstream) => Ok(Some(upstream)),
            Err(error) => match error.downcast::<Unavailable>() {
                Ok(unavailable) => {
                    announce_skip(test_name, &unavailable);
                    Ok(None)
                }
                Err(error) => Err(error),
            },
        }
    }

    /// `http://127.0.0.1:<port>`, or `https://…` with [`TlsFiles`](crate::TlsFiles); no
    /// trailing slash.
    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    /// The OpenAPI document FastAPI generates, `<base_url>/openapi.json` (never behind the
    /// JWT check).
    pub fn openapi_url(&self) -> String {
        format!("{}/openapi.json", self.base_url)
    }

    /// What the app wrote to its standard error so far (the last 16 KiB): uvicorn's warnings
    /// and errors, and tracebacks.
    pub fn stderr(&self) -> String {
        snapshot(&self.stderr)
    }

    async fn try_start(config: &UpstreamConfig) -> Result<Self, StartError> {
        let arguments = config
            .arguments()
            .context("make the certificate paths absolute")?;
        let python_version = python_version().await?;
        let installed =
            tokio::task::spawn_blocking(move || install::ensure_installed(&python_version))
                .await
                .context("the install task")?
                .map_err(|error| match error {
                    install::InstallError::Unavailable(reason) => StartError::Unavailable(reason),
                    install::InstallError::Failed(error) => StartError::Failed(error),
                })?;

        let mut child = Command::new(&installed.python)
            .arg(&installed.script)
            .args(&arguments)
            .arg("--exit-when-stdin-closes")
            .current_dir(&installed.dir)
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env_remove("PYTHONHOME")
            .env_remove("PYTHONPATH")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| {
                format!(
                    "start {} {}",
                    installed.python.display(),
                    installed.script.display()
                )
            })?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(anyhow!("the app's standard streams were not piped").into());
        };

        let kept = Arc::new(Mutex::new(String::new()));
        let stderr_task = tokio::spawn(keep_tail(stderr, Arc::clone(&kept)));

        let mut lines = BufReader::new(stdout).lines();
        let waited = tokio::time::timeout(START_TIMEOUT, async {
            loop {
                match lines.next_line().await {
                    Ok(Some(line)) => {
                        if let Some(url) = line.strip_prefix("listening on ") {
                            return Ok(url.trim().trim_end_matches('/').to_owned());
                        }
                    }
                    Ok(None) => return Err(None),
                    Err(error) => return Err(Some(error)),
                }
            }
        })
        .await;
        let base_url = match waited {
            Ok(Ok(url)) => url,
            Ok(Err(read_error)) => {
                // The app closed its output: it exited (or is exiting). Its standard error
                // says why; wait (bounded) until it has all been read.
                let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
                let _ = tokio::time::timeout(Duration::from_secs(10), stderr_task).await;
                let status = match status {
                    Ok(Ok(status)) => status.to_string(),
                    _ => "still running".to_owned(),
                };
                let read = read_error.map_or_else(String::new, |error| format!(" ({error})"));
                return Err(anyhow!(
                    "the FastAPI upstream exited before it listened{read}, {status}; its \
                     standard error:\n{}",
                    snapshot(&kept)
                )
                .into());
            }
            Err(_) => {
                return Err(anyhow!(
                    "the FastAPI upstream did not say `listening on` within {} s; its \
                     standard error:\n{}",
                    START_TIMEOUT.as_secs(),
                    snapshot(&kept)
                )
                .into());
            }
        };
        // Its later output (there should be none) is drained so that a full pipe never
        // stalls it.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

        Ok(Self {
            base_url,
            stderr: kept,
            _stdin: stdin,
            _child: child,
        })
    }
}

/// What `python3 --version` says (`Python 3.11.7`), checked against [`MIN_PYTHON`].
async fn python_version() -> Result<String, StartError> {
    let output = match Command::new("python3").arg("--version").output().await {
        Ok(output) => output,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            return Err(StartError::Unavailable(
                "python3 is not on the PATH (install Python 3.10 or later with its venv module)"
                    .to_owned(),
            ));
        }
        Err(error) => {
            return Err(StartError::Unavailable(format!(
                "cannot run python3: {error}"
            )));
        }
    };
    if !output.status.success() {
        return Err(StartError::Unavailable(format!(
            "`python3 --version` failed ({})",
            output.status
        )));
    }
    // Python 2 and very old 3s printed the version on standard error.
    let mut text = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if text.is_empty() {
        text = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    }
    let mut numbers = text
        .strip_prefix("Python ")
        .unwrap_or_default()
        .split('.')
        .map(|part| part.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(minor)) if (major, minor) >= MIN_PYTHON => Ok(text),
        _ => Err(StartError::Unavailable(format!(
            "python3 is {text:?}; the app needs Python {}.{} or later",
            MIN_PYTHON.0, MIN_PYTHON.1
        ))),
    }
}

/// Reads `stream` to its end, keeping its last [`STDERR_KEPT`] bytes in `kept`.
async fn keep_tail(stream: tokio::process::ChildStderr, kept: Arc<Mutex<String>>) {
    let mut stream = stream;
    let mut buffer = [0_u8; 4096];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(read) => {
                let mut text = kept.lock().unwrap_or_else(PoisonError::into_inner);
                text.push_str(&String::from_utf8_lossy(&buffer[..read]));
                if text.len() > 2 * STDERR_KEPT {
                    let keep = tail(&text, STDERR_KEPT).to_owned();
                    *text = keep;
                }
            }
        }
    }
}

fn snapshot(kept: &Mutex<String>) -> String {
    let text = kept.lock().unwrap_or_else(PoisonError::into_inner);
    tail(&text, STDERR_KEPT).to_owned()
}
