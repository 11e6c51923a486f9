//! The replicas: `docket serve` processes of the binary under test, one per slot, each
//! with its own configuration file and its own [`FaultProxy`] in front of the shared
//! PostgreSQL, and a shared asset folder. A slot's process can be killed, stopped and
//! started again (a new generation, under the slot's replica name or a new one); every
//! process's log goes to a file of its own, and what happened to it to the journal.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use anyhow::{Context as _, bail};
use docket_storage::test_db::{FaultProxy, TestDatabase};
use serde_json::Value;

use crate::journal::{Clock, Process, Reason, Shared, Signal};
use crate::timing;

/// How long a process may take to say it is serving.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// What every replica is started with.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub(crate) docket_bin: PathBuf,
    /// Configuration files and the shared asset folder.
    pub(crate) dir: PathBuf,
    /// The processes' logs.
    pub(crate) logs: PathBuf,
    pub(crate) trino_url: String,
    pub(crate) upstream_url: String,
    pub(crate) api_key: String,
    pub(crate) replicas: usize,
}

/// A slot: one replica's place, holding its current process.
#[derive(Debug)]
struct Slot {
    base: String,
    generation: u32,
    process: Option<usize>,
    launching: bool,
}

/// Where a request for a slot goes.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    pub(crate) process: usize,
    pub(crate) url: String,
}

/// The replicas.
pub(crate) struct Cluster {
    settings: Settings,
    proxies: Vec<FaultProxy>,
    database_urls: Vec<String>,
    slots: Vec<Mutex<Slot>>,
    journal: Shared,
    clock: Clock,
}

fn lock(slot: &Mutex<Slot>) -> MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Cluster {
    /// A proxy per slot in front of `database`, and every slot's first process.
    pub(crate) async fn start(
        settings: Settings,
        database: &TestDatabase,
        journal: Shared,
        clock: Clock,
    ) -> anyhow::Result<Arc<Self>> {
        let authority = database
            .server_authority()
            .context("the soak needs PostgreSQL, not SQLite")?;
        let mut proxies = Vec::new();
        let mut database_urls = Vec::new();
        for _ in 0..settings.replicas {
            let proxy = FaultProxy::start(authority.clone()).await;
            database_urls.push(
                database
                    .url_through(&proxy)
                    .context("no URL through the proxy")?,
            );
            proxies.push(proxy);
        }
        std::fs::create_dir_all(settings.dir.join("assets"))?;
        std::fs::create_dir_all(&settings.logs)?;
        let slots = (0..settings.replicas)
            .map(|slot| {
                Mutex::new(Slot {
                    base: format!("r{}", slot + 1),
                    generation: 0,
                    process: None,
                    launching: false,
                })
            })
            .collect();
        let cluster = Arc::new(Self {
            settings,
            proxies,
            database_urls,
            slots,
            journal,
            clock,
        });
        for slot in 0..cluster.slots.len() {
            cluster.launch(slot, false).await?;
        }
        Ok(cluster)
    }

    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The folder every replica writes assets to.
    pub(crate) fn assets_dir(&self) -> PathBuf {
        self.settings.dir.join("assets")
    }

    /// The current process of `slot` when it is running and has said where it serves
    /// (draining or not).
    pub(crate) fn target(&self, slot: usize) -> Option<Target> {
        let process = lock(self.slots.get(slot)?).process?;
        let journal = self.journal.lock();
        let record = journal.processes.get(process)?;
        if record.exited.is_some() || record.signalled(Signal::Kill).is_some() {
            return None;
        }
        Some(Target {
            process,
            url: record.url.clone()?,
        })
    }

    /// Whether `slot` runs a process that is serving and not shutting down.
    pub(crate) fn is_live(&self, slot: usize) -> bool {
        let Some(target) = self.target(slot) else {
            return false;
        };
        let launching = lock(&self.slots[slot]).launching;
        let journal = self.journal.lock();
        !launching && journal.processes[target.process].signals.is_empty()
    }

    /// Whether `slot` is being started.
    pub(crate) fn is_launching(&self, slot: usize) -> bool {
        lock(&self.slots[slot]).launching
    }

    /// The current process of `slot`, running or not.
    pub(crate) fn current(&self, slot: usize) -> Option<usize> {
        lock(&self.slots[slot]).process
    }

    /// Starts a new process in `slot` (under a new replica name when `rename`) and
    /// waits until it serves.
    pub(crate) async fn launch(self: &Arc<Self>, slot: usize, rename: bool) -> anyhow::Result<()> {
        let (name, generation) = {
            let mut state = lock(&self.slots[slot]);
            if state.launching {
                bail!("slot {slot} is already being started");
            }
            state.launching = true;
            state.generation += 1;
            let name = if rename && state.generation > 1 {
                format!("{}-g{}", state.base, state.generation)
            } else {
                state.base.clone()
            };
            (name, state.generation)
        };
        let this = Arc::clone(self);
        let started = tokio::task::spawn_blocking(move || this.spawn(slot, &name, generation))
            .await
            .context("the start-up thread panicked")?;
        let mut state = lock(&self.slots[slot]);
        state.launching = false;
        match started {
            Ok(process) => {
                state.process = Some(process);
                Ok(())
            }
            Err(error) => Err(error),
        }
    }

    /// Writes the configuration, starts the process, and waits (blocking) until it
    /// serves; its index in the journal.
    fn spawn(&self, slot: usize, name: &str, generation: u32) -> anyhow::Result<usize> {
        let config = self
            .settings
            .dir
            .join(format!("r{}-g{generation}.yaml", slot + 1));
        std::fs::write(&config, self.config(name, &self.database_urls[slot]))
            .context("cannot write a replica's configuration")?;
        let log = self
            .settings
            .logs
            .join(format!("r{}-g{generation}.log", slot + 1));
        let mut child = Command::new(&self.settings.docket_bin)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .current_dir(&self.settings.dir)
            .env("NO_COLOR", "1")
            .env_remove("DOCKET_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start {}", self.settings.docket_bin.display()))?;
        let pid = child.id();
        let stderr = child.stderr.take().context("no stderr")?;
        let process = {
            let mut journal = self.journal.lock();
            journal.processes.push(Process {
                slot,
                generation,
                name: name.to_owned(),
                replica_id: None,
                pid,
                started: self.clock.now(),
                serving: None,
                url: None,
                signals: Vec::new(),
                exited: None,
                exit_status: None,
                log: log.clone(),
            });
            journal.processes.len() - 1
        };
        let (serving, announced) = std::sync::mpsc::channel();
        let log_file = std::fs::File::create(&log)
            .with_context(|| format!("cannot create {}", log.display()))?;
        std::thread::spawn(move || copy_log(stderr, log_file, &serving));
        let (journal, clock) = (self.journal.clone(), self.clock);
        std::thread::spawn(move || {
            let status = child.wait();
            let mut journal = journal.lock();
            let at = clock.now();
            let described = match status {
                Ok(status) => status.to_string(),
                Err(error) => format!("unknown ({error})"),
            };
            let label = journal.processes[process].label();
            journal.processes[process].exited = Some(at);
            journal.processes[process].exit_status = Some(described.clone());
            journal.event(at, format!("{label} exited: {described}"));
        });
        match announced.recv_timeout(START_TIMEOUT) {
            Ok((url, replica_id)) => {
                let mut journal = self.journal.lock();
                let at = self.clock.now();
                let record = &mut journal.processes[process];
                record.url = Some(url.clone());
                record.replica_id = Some(replica_id);
                record.serving = Some(at);
                let label = record.label();
                journal.event(at, format!("{label} serves at {url}"));
                Ok(process)
            }
            Err(_) => {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                bail!(
                    "replica {name} (slot {slot}) did not say it serves within {START_TIMEOUT:?}; \
                     see {}",
                    log.display()
                )
            }
        }
    }

    /// Sends `signal` to `slot`'s running process; its index, or `None` when none runs.
    pub(crate) fn signal(&self, slot: usize, signal: Signal, reason: Reason) -> Option<usize> {
        let process = self.current(slot)?;
        self.signal_process(process, signal, reason)
            .then_some(process)
    }

    /// Sends `signal` to `process` if it still runs; whether it was sent.
    pub(crate) fn signal_process(&self, process: usize, signal: Signal, reason: Reason) -> bool {
        let mut journal = self.journal.lock();
        let record = &journal.processes[process];
        if record.exited.is_some() {
            return false;
        }
        let pid = record.pid;
        let flag = match signal {
            Signal::Kill => "-KILL",
            Signal::Term => "-TERM",
        };
        let at = self.clock.now();
        // Recorded before it is sent, so nothing reads the process as healthy after.
        journal.processes[process]
            .signals
            .push((signal, reason, at));
        let label = journal.processes[process].label();
        journal.event(at, format!("{flag} {label} ({reason:?})"));
        drop(journal);
        Command::new("kill")
            .args([flag, &pid.to_string()])
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Waits until `process` exited, at most `limit`; whether it did.
    pub(crate) async fn wait_exit(&self, process: usize, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self.journal.lock().processes[process].exited.is_some() {
                return true;
            }
            if tokio::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Cuts every replica from the database for `outage`.
    pub(crate) fn cut(&self, outage: Duration) {
        for proxy in &self.proxies {
            proxy.cut(outage);
        }
    }

    /// Stops every running process with SIGTERM and waits; one that overruns the
    /// shutdown bound is killed (and said so).
    pub(crate) async fn stop_all(&self) {
        let running: Vec<usize> = (0..self.slots.len())
            .filter_map(|slot| self.signal(slot, Signal::Term, Reason::Finish))
            .collect();
        for process in running {
            if !self.wait_exit(process, timing::shutdown_limit()).await {
                let at = self.clock.now();
                let label = self.journal.lock().processes[process].label();
                self.journal.lock().event(
                    at,
                    format!("{label} overran its shutdown bound at the end; killing it"),
                );
                self.signal_process(process, Signal::Kill, Reason::Overrun);
                self.wait_exit(process, Duration::from_secs(10)).await;
            }
        }
    }

    /// A replica's configuration: short clocks ([`timing`]), the database through its
    /// proxy, one API key (an administrator), diagnostics and scripts on, the Trino
    /// double and the upstream as connections, assets in the shared folder, JSON logs.
    fn config(&self, name: &str, database_url: &str) -> String {
        let settings = &self.settings;
        let dir = settings.dir.display();
        let ms = |duration: Duration| format!("{}ms", duration.as_millis());
        format!(
            r#"server:
  address: "127.0.0.1:0"
  replica_id: "{name}"
  shutdown: {{ grace_period: {grace}, ending_grace: {ending_grace} }}
  max_connection_share_percent: 100
database: {{ url: "{database_url}", max_connections: 8, migrate_on_start: false, start_timeout: 120s }}
tasks: {{ heartbeat_interval: {heartbeat}, stale_after: {stale_after} }}
scripts:
  lease: {lease}
  heartbeat_interval: {heartbeat}
  worker: {{ enabled: true, concurrency: 3, max_running_per_owner: 9 }}
  schedules: {{ enabled: false }}
auth:
  api_keys:
    - {{ name: chaos, key: "{key}", roles: [admin] }}
rate_limit: {{ requests_per_minute: 0 }}
diagnostics: {{ enabled: true }}
connections:
  double:
    kind: trino
    url: "{trino}"
    user: chaos
    consent: never
    default: true
  upstream:
    kind: api
    base_url: "{upstream}"
    call_timeout: 60s
storage: {{ kind: filesystem, path: "{dir}/assets" }}
logging: {{ format: json, level: info }}
"#,
            grace = ms(timing::GRACE_PERIOD),
            ending_grace = ms(timing::ENDING_GRACE),
            heartbeat = ms(timing::HEARTBEAT),
            stale_after = ms(timing::STALE_AFTER),
            lease = ms(timing::LEASE),
            key = settings.api_key,
            trino = settings.trino_url,
            upstream = settings.upstream_url,
        )
    }
}

impl Drop for Cluster {
    /// A soak that stops early (an error, a panic) leaves no replica running.
    fn drop(&mut self) {
        let running: Vec<u32> = self
            .journal
            .lock()
            .processes
            .iter()
            .filter(|process| process.exited.is_none())
            .map(|process| process.pid)
            .collect();
        for pid in running {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Copies a process's log lines into its file, and sends where it serves (its URL and
/// replica id) once it says so.
fn copy_log(
    stderr: impl std::io::Read,
    mut file: std::fs::File,
    serving: &std::sync::mpsc::Sender<(String, String)>,
) {
    let mut sent = false;
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(file, "{line}");
        if !sent
            && line.contains("docket is serving")
            && let Some(found) = serving_line(&line)
        {
            let _ = serving.send(found);
            sent = true;
        }
    }
}

/// The URL and replica id of a JSON "docket is serving" line.
fn serving_line(line: &str) -> Option<(String, String)> {
    let value: Value = serde_json::from_str(line).ok()?;
    let fields = value.get("fields").unwrap_or(&value);
    let url = fields.get("url")?.as_str()?.to_owned();
    let replica = fields.get("replica")?.as_str()?.to_owned();
    Some((url, replica))
}

/// Whether `path` (a file in the asset folder) is an upload's temporary file.
pub(crate) fn is_part_file(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| name.starts_with('.') && name.ends_with(".part"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_serving_line_names_the_url_and_the_replica() {
        let line = r#"{"timestamp":"t","level":"INFO","fields":{"message":"docket is serving","url":"http://127.0.0.1:4000/mcp","replica":"r1-ab12","tasks":true},"target":"docket"}"#;
        assert_eq!(
            serving_line(line),
            Some(("http://127.0.0.1:4000/mcp".into(), "r1-ab12".into()))
        );
        assert!(is_part_file(Path::new("/a/.x.csv.0011.part")));
        assert!(!is_part_file(Path::new("/a/x.csv")));
    }
}
