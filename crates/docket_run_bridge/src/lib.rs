#![doc = include_str!("../README.md")]

mod audit;
mod bridge;
pub mod cadence;
pub mod clock;
mod config;
mod owners;
mod replica;
mod runner;
mod scheduler;
pub mod task;
mod worker;

pub use audit::RUN_SCRIPT_TOOL;
pub use bridge::RunBridge;
pub use config::{BridgeConfig, BridgeError};
pub use owners::{OwnerAccess, acting_roles};
pub use runner::{SandboxRunner, ScriptRunner};
pub use scheduler::{Scheduler, TickReport};

/// Parents a run's span on the trace it was queued in (its `trace_context` column:
/// the W3C `traceparent`, then a line break and the `tracestate` when there is one);
/// the embedder's tracing wiring, which [`RunBridge::join_traces_with`] takes.
pub type JoinTrace = fn(&tracing::Span, &str);
