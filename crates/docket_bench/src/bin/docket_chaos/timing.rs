//! The replicas' clocks and the bounds the checks derive from them. Short on purpose,
//! so a soak of a few minutes sees many stale replicas, shutdowns and reclaimed runs;
//! every bound below is named after the setting it follows from.

use std::time::Duration;

/// `tasks.heartbeat_interval` (and `scripts.heartbeat_interval`).
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(1);

/// `tasks.stale_after`.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(8);

/// `server.shutdown.grace_period`.
pub(crate) const GRACE_PERIOD: Duration = Duration::from_secs(4);

/// `server.shutdown.ending_grace` (at most `tasks.stale_after`).
pub(crate) const ENDING_GRACE: Duration = Duration::from_secs(6);

/// `scripts.lease`.
pub(crate) const LEASE: Duration = Duration::from_secs(6);

/// How often each task is read (on the next replica in turn).
pub(crate) const POLL_EVERY: Duration = Duration::from_millis(500);

/// The longest database cut that counts as "shorter than `stale_after`" for check 9:
/// a replica's last beat may come up to one beat before the cut and its next one a
/// beat after it, and reconnecting takes up to a second more, so a cut of
/// `stale_after - 2 beats - 1 s` leaves no task stale. Cuts between this and
/// `stale_after` plus a beat are in neither class and only face the other checks.
pub(crate) fn short_cut_max() -> Duration {
    STALE_AFTER - HEARTBEAT * 2 - Duration::from_secs(1)
}

/// Check 7's slack on top of `stale_after` plus a beat: the reader polls every
/// [`POLL_EVERY`] on a machine that also runs three replicas, PostgreSQL and the load.
pub(crate) const STALE_READ_SLACK: Duration = Duration::from_secs(3);

/// After a database cut, how long a replica may take to reconnect and write what it
/// held (the endings' retry pauses grow to 2 s).
pub(crate) const RECONNECT: Duration = Duration::from_secs(3);

/// How long a SIGTERM may take before the soak calls it an overrun and kills the
/// process: the grace period, the ending grace, two seconds to mark the replica
/// draining (docs/configuration.md) and a few seconds of slack.
pub(crate) fn shutdown_limit() -> Duration {
    GRACE_PERIOD + ENDING_GRACE + Duration::from_secs(2) + Duration::from_secs(8)
}

/// Seconds as the checks compute with them.
pub(crate) fn secs(duration: Duration) -> f64 {
    duration.as_secs_f64()
}
