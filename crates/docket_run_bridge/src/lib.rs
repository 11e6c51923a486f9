//! The run bridge: managed script runs between the database queue and the
//! Starlark sandbox, on any replica.
//!
//! - [`RunBridge`] queues runs ([`RunBridge::enqueue`]), runs
//!   `scripts.workers` workers per replica that claim runs from `script_runs`
//!   (on PostgreSQL with `FOR UPDATE SKIP LOCKED`, so replicas share one
//!   queue), hold each run's lease by renewing it every heartbeat, and write
//!   every change fenced by the lease. Workers wake on a local enqueue, on
//!   `NOTIFY docket_runs` from other replicas, and otherwise poll.
//! - Cancelling ([`RunBridge::cancel`], for `cancel_run` and `tasks/cancel`):
//!   a queued run ends `cancelled` at once; a running run is marked, and its
//!   worker — here (at once), on another replica (by NOTIFY, or at its next
//!   renewal) — cancels the sandbox; a run that finished first keeps its
//!   outcome.
//! - Failures: a script error (syntax, raise, limit) ends the run `failed`
//!   and is never retried; a platform fault is retried up to
//!   [`BridgeConfig::max_platform_retries`] times with backoff; a run whose
//!   worker died is reclaimed by any worker when its lease expires, at most
//!   [`BridgeConfig::max_reclaims`] times: the next claim ends it failed ("the
//!   run stopped its worker N times"). On shutdown a running run is released back to the queue, not
//!   failed.
//! - The retention pass deletes runs [`BridgeConfig::run_retention`] after
//!   they finished.
//! - [`task`] maps a run to the task it is (`tasks/get` on a run id).
//!
//! What a run executes is the [`ScriptRunner`] the embedder passes in:
//! [`SandboxRunner`] runs the version's source in `docket_script` with a
//! [`Host`](docket_script::Host) per run (the server's host sends every
//! `platform.*` call through its call pipeline).
//!
//! **Architecture Invariant:** the run row is the truth. Nothing a worker
//! knows in memory (its cancel tokens, its lease) is needed for correctness on
//! another replica: cancels, claims and endings are all rows, and signals only
//! make them arrive sooner.

mod audit;
mod bridge;
mod config;
mod replica;
mod runner;
pub mod task;
mod worker;

pub use audit::RUN_SCRIPT_TOOL;
pub use bridge::RunBridge;
pub use config::{BridgeConfig, BridgeError};
pub use runner::{SandboxRunner, ScriptRunner};
