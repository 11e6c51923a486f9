#![doc = include_str!("../README.md")]

#[cfg(feature = "runtime")]
pub mod audit;
pub mod id;
pub mod memory;
pub mod model;
pub mod oversight;
#[cfg(feature = "runtime")]
pub mod runtime;
pub mod store;
#[cfg(feature = "runtime")]
pub mod testing;
pub mod trace;
pub mod upstream;

pub use id::{IdPrefix, TaskId};
pub use model::{Caller, Outcome, TaskError, TaskRecord, TaskStatus, TaskView};
pub use store::{NewTask, StaleTask, StoreError, TaskPosition, TaskStore};
pub use trace::TaskTrace;
pub use upstream::{UPSTREAM_META_KEY, Upstream};
