//! The durable task model behind Docket's MCP Tasks.
//!
//! - [`model`]: statuses, legal transitions, outcomes, who may follow a task, its
//!   time-to-live and staleness — pure functions of the values and times passed in.
//! - [`id`]: task ids with 128 random bits from the operating system.
//! - [`store`]: the async [`TaskStore`] trait a database implements, and
//!   [`memory::MemoryStore`] for tests and embedders that need no durability.
//! - `runtime` (feature `runtime`, on by default): runs task work detached from
//!   the request that started it, with a local cancel registry, one heartbeat
//!   statement per replica per beat, and a shutdown drain.
//!
//! - [`testing`] (with `runtime`): the behaviour every store must have, as test
//!   functions each backend runs from this one source.
//!
//! **Invariant:** nothing here knows the MCP wire shape, HTTP or SQL; the model
//! reads no clock.

pub mod id;
pub mod memory;
pub mod model;
#[cfg(feature = "runtime")]
pub mod runtime;
pub mod store;
#[cfg(feature = "runtime")]
pub mod testing;

pub use id::TaskId;
pub use model::{Caller, Outcome, TaskError, TaskRecord, TaskStatus, TaskView};
pub use store::{NewTask, StoreError, TaskStore};
