//! What every part of the scale suite shares: the sizes it is run with, the parts, the
//! section each part returns, and how numbers are written in it.

use std::path::PathBuf;
use std::time::Duration;

/// How big each curve goes; every size can be scaled down by a flag for a quick look.
#[derive(Clone, Debug)]
pub(crate) struct Sizes {
    /// Rows in the task table (and the run table) at each point of the table curve.
    pub(crate) rows: Vec<u64>,
    /// Expired rows of each kind the retention pass deletes (assets: a tenth).
    pub(crate) expired: u64,
    /// Listening followers at each point of the follower curve.
    pub(crate) followers: Vec<usize>,
    /// Queued runs drained.
    pub(crate) runs: usize,
    /// The most replicas on one database.
    pub(crate) replicas: usize,
    /// Sequential calls per path for each latency percentile.
    pub(crate) samples: usize,
    /// Concurrent clients of every throughput measurement.
    pub(crate) clients: usize,
    /// Seconds each path is driven per throughput measurement.
    pub(crate) seconds: Duration,
    /// Create-latency measurements in a row.
    pub(crate) latency_runs: usize,
    /// The `docket` binary: `docket serve` for the followers' replica and
    /// `docket script-child` for the runs.
    pub(crate) docket_bin: PathBuf,
    /// The parts to run.
    pub(crate) parts: Vec<Part>,
}

/// The suite's parts, in the order they run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Part {
    Table,
    Retention,
    Followers,
    Runs,
    Replicas,
    Latency,
}

impl Part {
    pub(crate) const ALL: [Part; 6] = [
        Part::Table,
        Part::Retention,
        Part::Followers,
        Part::Runs,
        Part::Replicas,
        Part::Latency,
    ];
}

/// One curve: its table and what it says.
pub(crate) struct Section {
    pub(crate) title: String,
    /// How it was measured, for the report.
    pub(crate) method: String,
    pub(crate) header: Vec<&'static str>,
    pub(crate) rows: Vec<Vec<String>>,
    pub(crate) findings: Vec<String>,
    /// How long the part took, set-up included.
    pub(crate) took: Duration,
}

/// `duration` in milliseconds, to the microsecond.
pub(crate) fn ms(duration: Duration) -> String {
    format!("{:.3} ms", duration.as_secs_f64() * 1000.0)
}

/// `value` over `base`, as a ratio.
pub(crate) fn times(value: f64, base: f64) -> String {
    if base > 0.0 {
        format!("{:.2}×", value / base)
    } else {
        "—".to_owned()
    }
}

/// A rate, to the unit.
pub(crate) fn per_second(rate: f64) -> String {
    format!("{rate:.0}/s")
}

/// Whether a target was met, as the report says it.
pub(crate) fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**missed**" }
}

/// A count with a unit prefix where it reads better.
pub(crate) fn count(value: u64) -> String {
    match value {
        v if v >= 1_000_000 && v % 1_000_000 == 0 => format!("{} M", v / 1_000_000),
        v if v >= 1_000 && v % 1_000 == 0 => format!("{} k", v / 1_000),
        v => v.to_string(),
    }
}
