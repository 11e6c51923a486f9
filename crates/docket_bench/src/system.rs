//! The machine a run measured, and CPU time as Linux accounts it (and how often each
//! thread was scheduled in): this process's threads (`/proc/self/task/*/schedstat`)
//! and the PostgreSQL backends serving this run's connections (found by their
//! `application_name`).

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

/// How much one thread (or single-threaded process) has run: CPU nanoseconds and the
/// times it was scheduled onto a CPU — `schedstat`'s first and third fields, exact — or
/// `stat`'s 10 ms ticks and no count when the kernel has no schedstat. Each time a
/// thread is scheduled in is a wake-up or a preemption: a hand-off's price.
fn thread_run(dir: &Path) -> Option<Run> {
    if let Some(run) = std::fs::read_to_string(dir.join("schedstat"))
        .ok()
        .as_deref()
        .and_then(schedstat_run)
    {
        return Some(run);
    }
    let ticks = cpu_ticks(&std::fs::read_to_string(dir.join("stat")).ok()?)?;
    Some(Run {
        nanos: ticks * (1_000_000_000 / TICKS_PER_SECOND),
        slices: 0,
    })
}

/// `schedstat`'s CPU nanoseconds (first field) and times scheduled in (third).
fn schedstat_run(schedstat: &str) -> Option<Run> {
    let mut fields = schedstat.split_whitespace().map(|n| n.parse::<u64>().ok());
    let nanos = fields.next()??;
    let slices = fields.nth(1).flatten().unwrap_or(0);
    Some(Run { nanos, slices })
}

/// CPU time and times scheduled in, of a thread or a set of them.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    nanos: u64,
    slices: u64,
}

/// This process's CPU time so far: the sum over its threads. (A thread that
/// exited takes its time with it; this process's threads live as long as it.)
pub(crate) fn process_cpu() -> Duration {
    Duration::from_nanos(process_run().nanos)
}

fn process_run() -> Run {
    let Ok(threads) = std::fs::read_dir("/proc/self/task") else {
        return Run::default();
    };
    threads
        .flatten()
        .filter_map(|thread| thread_run(&thread.path()))
        .fold(Run::default(), |sum, run| Run {
            nanos: sum.nanos + run.nanos,
            slices: sum.slices + run.slices,
        })
}

/// CPU time so far of this process's threads whose name starts with `prefix` (a runtime's
/// `thread_name`), to take a helper's share out of [`process_cpu`].
pub(crate) fn threads_cpu(prefix: &str) -> Duration {
    let Ok(threads) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    let nanos = threads
        .flatten()
        .filter(|thread| {
            std::fs::read_to_string(thread.path().join("comm"))
                .is_ok_and(|name| name.starts_with(prefix))
        })
        .filter_map(|thread| thread_run(&thread.path()))
        .map(|run| run.nanos)
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

/// How much each of `pids` has run.
fn backend_run(pids: &[u32]) -> HashMap<u32, Run> {
    pids.iter()
        .filter_map(|pid| {
            let run = thread_run(&Path::new("/proc").join(pid.to_string()))?;
            Some((*pid, run))
        })
        .collect()
}

/// CPU spent by this process and by the PostgreSQL backends serving it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuUse {
    pub(crate) process: Duration,
    pub(crate) postgres: Duration,
    /// Times this process's threads were scheduled onto a CPU.
    pub(crate) process_slices: u64,
    /// Times the backends were scheduled onto a CPU.
    pub(crate) postgres_slices: u64,
}

impl std::ops::AddAssign for CpuUse {
    fn add_assign(&mut self, other: CpuUse) {
        self.process += other.process;
        self.postgres += other.postgres;
        self.process_slices += other.process_slices;
        self.postgres_slices += other.postgres_slices;
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
    process: Run,
    backends: HashMap<u32, Run>,
}

impl CpuMeter {
    pub(crate) fn new(probe: Arc<PgProbe>) -> Self {
        Self { probe }
    }

    pub(crate) async fn start(&self) -> anyhow::Result<CpuReading> {
        let pids = self.probe.backend_pids(APPLICATION_NAME).await?;
        Ok(CpuReading {
            probe: Arc::clone(&self.probe),
            backends: backend_run(&pids),
            process: process_run(),
        })
    }
}

impl CpuReading {
    /// What was spent since [`CpuMeter::start`]. A backend that appeared in
    /// between (the pool opened a connection) counts whole; one that went away
    /// takes its time with it.
    pub(crate) async fn stop(self) -> anyhow::Result<CpuUse> {
        let process = process_run();
        let pids = self.probe.backend_pids(APPLICATION_NAME).await?;
        let postgres = backend_run(&pids)
            .into_iter()
            .fold(Run::default(), |sum, (pid, now)| {
                let before = self.backends.get(&pid).copied().unwrap_or_default();
                Run {
                    nanos: sum.nanos + now.nanos.saturating_sub(before.nanos),
                    slices: sum.slices + now.slices.saturating_sub(before.slices),
                }
            });
        Ok(CpuUse {
            process: Duration::from_nanos(process.nanos.saturating_sub(self.process.nanos)),
            postgres: Duration::from_nanos(postgres.nanos),
            process_slices: process.slices.saturating_sub(self.process.slices),
            postgres_slices: postgres.slices,
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

    #[test]
    fn schedstat_gives_cpu_time_and_times_scheduled_in() {
        let run = schedstat_run("123456 789 42\n").expect("three fields");
        assert_eq!((run.nanos, run.slices), (123_456, 42));
        assert_eq!(schedstat_run("7").map(|run| run.slices), Some(0));
        assert!(schedstat_run("").is_none());
        assert!(schedstat_run("x 1 2").is_none());
    }
}
