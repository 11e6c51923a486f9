//! The soak's schedule, drawn from its seed before anything starts: when each piece
//! of load is sent, what it is, where it goes and whether (and through which other
//! replica) it is cancelled; when each fault strikes and what it does. What happens
//! at run time (which replicas are up, how long an answer takes) can still differ
//! between two runs of one seed, but the schedule does not.

use std::collections::HashSet;
use std::time::Duration;

use crate::rng::Rng;

/// One piece of work the load asks for.
#[derive(Clone, Debug)]
pub(crate) enum Work {
    /// `diagnostics_sleep` as a task. `micros` is its length in microseconds, unique
    /// in the soak, so its audit row (whose arguments are `{"seconds": …}`) is its own.
    Sleep { micros: i64 },
    /// `diagnostics_sleep` answered directly (no tasks extension), unique like a sleep.
    Direct { micros: i64 },
    /// `trino_export` of a small table from the Trino double, named `name`.
    TrinoExport { name: String },
    /// `api_export` of the soak's upstream, which sends `chunks` chunks with `delay_ms`
    /// between them, named `name` (also the upstream path's tag).
    ApiExport {
        name: String,
        chunks: u32,
        delay_ms: u64,
    },
    /// `run_script` of the soak's script: `calls` `diagnostics_sleep` calls of
    /// `seconds` each.
    Run { seconds: f64, calls: u32 },
}

impl Work {
    /// The tool called.
    pub(crate) fn tool(&self) -> &'static str {
        match self {
            Work::Sleep { .. } | Work::Direct { .. } => "diagnostics_sleep",
            Work::TrinoExport { .. } => "trino_export",
            Work::ApiExport { .. } => "api_export",
            Work::Run { .. } => "run_script",
        }
    }

    /// A short label for reports.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Work::Sleep { .. } => "sleep",
            Work::Direct { .. } => "direct",
            Work::TrinoExport { .. } => "trino_export",
            Work::ApiExport { .. } => "api_export",
            Work::Run { .. } => "run",
        }
    }

    /// Whether it lives in the task table (and so can go stale), not in `script_runs`.
    pub(crate) fn is_call_task(&self) -> bool {
        !matches!(self, Work::Run { .. } | Work::Direct { .. })
    }
}

/// A cancel of the task an [`Op`] created.
#[derive(Clone, Debug)]
pub(crate) struct CancelPlan {
    /// How long after the creation was answered.
    pub(crate) after: Duration,
    /// Sent through the replica this many slots after the creating one (1 or 2 with
    /// three replicas), so a cancel always crosses replicas.
    pub(crate) via_offset: usize,
}

/// One request of the load.
#[derive(Clone, Debug)]
pub(crate) struct Op {
    /// Its position in the schedule.
    pub(crate) index: usize,
    /// When it is sent, from the soak's start.
    pub(crate) at: Duration,
    pub(crate) work: Work,
    /// The replica slot it is sent to (the next one up when that one is down).
    pub(crate) slot: usize,
    pub(crate) cancel: Option<CancelPlan>,
}

/// What a fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultKind {
    /// `kill -9` of a replica, restarted after `restart_after`.
    Kill,
    /// SIGTERM of a replica, restarted once it exited and `restart_after` passed.
    Terminate,
    /// Every replica's database connection cut through its fault proxy for `outage`.
    Cut,
}

/// One fault.
#[derive(Clone, Debug)]
pub(crate) struct Fault {
    pub(crate) at: Duration,
    pub(crate) kind: FaultKind,
    /// The slot hit (the next live one when it is down).
    pub(crate) slot: usize,
    /// A cut's length.
    pub(crate) outage: Duration,
    pub(crate) restart_after: Duration,
    /// Restart under a new `server.replica_id` name rather than the slot's own.
    pub(crate) rename: bool,
}

/// The whole schedule.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    pub(crate) ops: Vec<Op>,
    pub(crate) faults: Vec<Fault>,
}

impl Plan {
    /// The schedule of a soak of `length` over `replicas` replicas, from `seed`.
    pub(crate) fn new(seed: u64, length: Duration, replicas: usize) -> Self {
        let mut root = Rng::new(seed);
        let mut load = root.fork();
        let mut faults = root.fork();
        Self {
            ops: ops(&mut load, length, replicas),
            faults: fault_schedule(&mut faults, length, replicas),
        }
    }
}

fn ops(rng: &mut Rng, length: Duration, replicas: usize) -> Vec<Op> {
    let mut used = HashSet::new();
    let mut unique_micros = |rng: &mut Rng, low: i64, high: i64| loop {
        let span = u64::try_from(high - low).unwrap_or(1);
        let micros = low + i64::try_from(rng.below(span)).unwrap_or(0);
        if used.insert(micros) {
            return micros;
        }
    };
    let mut ops = Vec::new();
    let mut at = 1.0;
    let end = length.as_secs_f64();
    while at < end {
        let index = ops.len();
        let pick = rng.below(100);
        let (work, expected, cancel_chance) = match pick {
            0..45 => {
                let micros = unique_micros(rng, 1_000_000, 6_000_000);
                (Work::Sleep { micros }, micros as f64 / 1e6, 0.3)
            }
            45..55 => {
                let micros = unique_micros(rng, 100_000, 500_000);
                (Work::Direct { micros }, 0.0, 0.0)
            }
            55..67 => (
                Work::TrinoExport {
                    name: format!("chaos-{index}"),
                },
                2.0,
                0.15,
            ),
            67..82 => {
                let chunks = 8 + u32::try_from(rng.below(25)).unwrap_or(0);
                let delay_ms = 50 + rng.below(100);
                let expected = f64::from(chunks) * delay_ms as f64 / 1000.0;
                (
                    Work::ApiExport {
                        name: format!("chaos-{index}"),
                        chunks,
                        delay_ms,
                    },
                    expected,
                    0.2,
                )
            }
            _ => {
                let seconds = (rng.between(0.3, 1.2) * 100.0).round() / 100.0;
                let calls = 1 + u32::try_from(rng.below(3)).unwrap_or(0);
                (
                    Work::Run { seconds, calls },
                    seconds * f64::from(calls),
                    0.3,
                )
            }
        };
        let cancel = rng.chance(cancel_chance).then(|| CancelPlan {
            after: Duration::from_secs_f64(rng.between(0.1, expected + 0.5)),
            via_offset: 1 + usize::try_from(rng.below(replicas.saturating_sub(1).max(1) as u64))
                .unwrap_or(0),
        });
        ops.push(Op {
            index,
            at: Duration::from_secs_f64(at),
            work,
            slot: usize::try_from(rng.below(replicas as u64)).unwrap_or(0),
            cancel,
        });
        at += rng.between(0.25, 0.9);
    }
    ops
}

fn fault_schedule(rng: &mut Rng, length: Duration, replicas: usize) -> Vec<Fault> {
    let mut faults = Vec::new();
    let mut at = 6.0;
    // No fault starts in the last seconds: the soak then only settles.
    let end = length.as_secs_f64() - 2.0;
    while at < end {
        let pick = rng.below(10);
        let kind = match pick {
            0..3 => FaultKind::Kill,
            3..6 => FaultKind::Terminate,
            _ => FaultKind::Cut,
        };
        faults.push(Fault {
            at: Duration::from_secs_f64(at),
            kind,
            slot: usize::try_from(rng.below(replicas as u64)).unwrap_or(0),
            outage: Duration::from_secs_f64(rng.between(1.0, 10.0)),
            restart_after: Duration::from_secs_f64(rng.between(0.5, 3.0)),
            rename: rng.chance(0.5),
        });
        at += rng.between(5.0, 12.0);
    }
    faults
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_one_schedule_with_unique_sleeps() {
        let a = Plan::new(42, Duration::from_secs(180), 3);
        let b = Plan::new(42, Duration::from_secs(180), 3);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert_ne!(
            format!("{:?}", Plan::new(43, Duration::from_secs(180), 3)),
            format!("{a:?}")
        );
        let mut seen = HashSet::new();
        for op in &a.ops {
            if let Work::Sleep { micros } | Work::Direct { micros } = op.work {
                assert!(seen.insert(micros), "{micros} twice");
            }
            assert!(op.slot < 3);
            if let Some(cancel) = &op.cancel {
                assert!((1..3).contains(&cancel.via_offset));
            }
        }
        assert!(a.ops.len() > 100, "{}", a.ops.len());
        assert!(!a.faults.is_empty());
    }
}
