//! How a bridge runs ([`BridgeConfig`]) and why its operations fail
//! ([`BridgeError`]).

use std::time::Duration;

use docket_catalog::CatalogError;

/// How the bridge runs.
#[derive(Clone, Debug)]
pub struct BridgeConfig {
    /// This replica's id; worker ids start with it.
    pub replica_id: String,
    /// Workers on this replica (runs executing at once); 0 queues runs without
    /// executing any here.
    pub workers: usize,
    /// How long a claim or a renewal holds a run. A run whose worker died is
    /// reclaimed this long after its last renewal.
    pub lease: Duration,
    /// How often a worker renews its lease, and so the latest a cancel taken by
    /// a replica whose NOTIFY was lost reaches it.
    pub heartbeat_interval: Duration,
    /// How often an idle worker looks at the queue without being woken.
    pub poll_interval: Duration,
    /// Retries of platform faults before the run fails; script errors are
    /// never retried.
    pub max_platform_retries: u32,
    /// How many times a run may be taken back from a worker whose lease
    /// expired (its replica vanished mid-run) before it ends failed instead of
    /// being started again, so no source can take down one replica after
    /// another.
    pub max_reclaims: u32,
    /// The most runs of one script owner running at once, on every replica
    /// together: a claim passes over an owner at this share, so one owner's
    /// queue cannot take every worker and starve another's runs.
    pub max_running_per_owner: u32,
    /// The first retry's delay; each further retry doubles it.
    pub retry_backoff: Duration,
    /// How long after a run finished the retention pass deletes it.
    pub run_retention: Duration,
    /// How often the retention pass runs.
    pub maintenance_interval: Duration,
    /// How often this replica's scheduler looks for due schedules; `None`
    /// runs no scheduler here (other replicas' fire the schedules).
    pub schedule_interval: Option<Duration>,
    /// How long a shutdown still tries to write the endings of runs that ended
    /// as it stopped (the database briefly away), and waits for their audit
    /// rows, once its grace period is over; never past a run's lease.
    pub ending_grace: Duration,
}

impl BridgeConfig {
    /// Defaults for `replica_id`: two workers, a 30 s lease renewed every 2 s,
    /// a 5 s poll, 3 retries from 1 s, 2 reclaims, one running run per owner
    /// (one of the two workers is always left to another owner), runs kept 365
    /// days, retention hourly, a scheduler pass every 15 s, endings in hand
    /// tried for 10 s into a shutdown.
    pub fn new(replica_id: impl Into<String>) -> Self {
        Self {
            replica_id: replica_id.into(),
            workers: 2,
            lease: Duration::from_secs(30),
            heartbeat_interval: Duration::from_secs(2),
            poll_interval: Duration::from_secs(5),
            max_platform_retries: 3,
            max_reclaims: 2,
            max_running_per_owner: 1,
            retry_backoff: Duration::from_secs(1),
            run_retention: Duration::from_secs(365 * 86_400),
            maintenance_interval: Duration::from_secs(3600),
            schedule_interval: Some(Duration::from_secs(15)),
            ending_grace: Duration::from_secs(10),
        }
    }
}

/// Why a bridge operation failed.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The store failed.
    #[error("the run store is unavailable: {0}")]
    Store(#[from] CatalogError),
    /// The OS random source failed while drawing a run id.
    #[error("could not draw a run id: {0}")]
    Random(String),
    /// The bridge is shutting down and takes no new runs.
    #[error("the server is shutting down and takes no new runs; try again on another replica")]
    Draining,
}
