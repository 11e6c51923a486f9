//! The machine a run measured, and CPU time as Linux accounts it: this process's
//! threads (`/proc/self/task/*/schedstat`) and the PostgreSQL backends serving
//! this run's connections (found by their `application_name`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use docket_storage::probe::PgProbe;

/// What the report says about the machine.
#[derive(Clone, Debug, Default)]
pub(crate) struct Machine {
    pub(crate) cpus: usize,
    pub(crate) cpu_model: String,
    pub(crate) memory: String,
    pub(crate) kernel: String,
}

impl Machine {
    pub(crate) fn read() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = field(&cpuinfo, "model name").unwrap_or_else(|| "unknown".to_owned());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory = field(&meminfo, "MemTotal")
            .and_then(|total| total.trim_end_matches(" kB").trim().parse::<u64>().ok())
            .map_or_else(
                || "unknown".to_owned(),
                |kib| format!("{:.1} GiB", kib as f64 / (1024.0 * 1024.0)),
            );
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|text| text.trim().to_owned())
            .unwrap_or_else(|_| "unknown".to_owned());
        Self {
            cpus: std::thread::available_parallelism().map_or(0, usize::from),
            cpu_model,
            memory,
            kernel,
        }
    }
}

/// The value of the first `name : value` line.
fn field(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == name).then(|| value.trim().to_owned())
    })
}

/// The 1-minute load average: how busy the machine was besides this run.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Clock ticks per second in `/proc/*/stat` (USER_HZ). It is 100 on every Linux
/// architecture this runs on; reading it would need `sysconf`, that is `unsafe`.
const TICKS_PER_SECOND: u64 = 100;

/// CPU time (user + system) of one `/proc/<pid>/stat`, in ticks.
fn cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) is in parentheses and may hold spaces; the
    // fields after the last ')' start at field 3 (state).
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15, i.e. 12 and 13 after field 2.
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(user + system)
}

/// The CPU time one thread (or single-threaded process) has run, in nanoseconds:
/// `schedstat`'s first field, which is exact, or `stat`'s 10 ms ticks when the
/// kernel has no schedstat.
fn thread_cpu_nanos(dir: &Path) -> Option<u64> {
    if let Ok(schedstat) = std::fs::read_to_string(dir.join("schedstat"))
        && let Some(nanos) = schedstat
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
    {
        return Some(nanos);
    }
    let ticks = cpu_ticks(&std::fs::read_to_string(dir.join("stat")).ok()?)?;
    Some(ticks * (1_000_000_000 / TICKS_PER_SECOND))
}

/// This process's CPU time so far: the sum over its threads. (A thread that
/// exited takes its time with it; this process's threads live as long as it.)
pub(crate) fn process_cpu() -> Duration {
    let Ok(threads) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let nanos = threads
        .flatten()
        .filter_map(|thread| thread_cpu_nanos(&thread.path()))
        .sum();
    Duration::from_nanos(nanos)
}

/// The `application_name` every connection of this run carries, so its server
/// backends can be told apart from other clients' on a shared PostgreSQL.
pub(crate) const APPLICATION_NAME: &str = "docket_bench";

/// `url` with this run's `application_name`.
pub(crate) fn with_application_name(url: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}application_name={APPLICATION_NAME}")
}

/// CPU nanoseconds of each of `pids`.
fn backend_cpu(pids: &[u32]) -> HashMap<u32, u64> {
    pids.iter()
        .filter_map(|pid| {
            let nanos = thread_cpu_nanos(&Path::new("/proc").join(pid.to_string()))?;
            Some((*pid, nanos))
        })
        .collect()
}

/// CPU spent by this process and by the PostgreSQL backends serving it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuUse {
    pub(crate) process: Duration,
    pub(crate) postgres: Duration,
}

impl std::ops::AddAssign for CpuUse {
    fn add_assign(&mut self, other: CpuUse) {
        self.process += other.process;
        self.postgres += other.postgres;
    }
}

/// Measures [`CpuUse`]: this process's threads, and the PostgreSQL backends whose
/// connections carry [`APPLICATION_NAME`] (background writers are left out: on a
/// shared server their work cannot be attributed).
#[derive(Clone)]
pub(crate) struct CpuMeter {
    probe: Arc<PgProbe>,
}

/// A measurement under way; [`CpuReading::stop`] ends it.
pub(crate) struct CpuReading {
    probe: Arc<PgProbe>,
    process: Duration,
    backends: HashMap<u32, u64>,
}

impl CpuMeter {
    pub(crate) fn new(probe: Arc<PgProbe>) -> Self {
        Self { probe }
    }

    pub(crate) async fn start(&self) -> anyhow::Result<CpuReading> {
        let pids = self.probe.backend_pids(APPLICATION_NAME).await?;
        Ok(CpuReading {
            probe: Arc::clone(&self.probe),
            backends: backend_cpu(&pids),
            process: process_cpu(),
        })
    }
}

impl CpuReading {
    /// What was spent since [`CpuMeter::start`]. A backend that appeared in
    /// between (the pool opened a connection) counts whole; one that went away
    /// takes its time with it.
    pub(crate) async fn stop(self) -> anyhow::Result<CpuUse> {
        let process = process_cpu().saturating_sub(self.process);
        let pids = self.probe.backend_pids(APPLICATION_NAME).await?;
        let nanos = backend_cpu(&pids)
            .into_iter()
            .map(|(pid, now)| now.saturating_sub(self.backends.get(&pid).copied().unwrap_or(0)))
            .sum();
        Ok(CpuUse {
            process,
            postgres: Duration::from_nanos(nanos),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_skip_a_command_name_with_spaces() {
        let stat = "42 (post gres) S 1 42 42 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0 100 0 0";
        assert_eq!(cpu_ticks(stat), Some(12));
    }
}
