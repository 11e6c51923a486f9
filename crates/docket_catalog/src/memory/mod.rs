//! In-memory stores: [`MemoryAssets`], [`MemoryCalls`], [`MemoryLinks`], [`MemoryPrincipals`],
//! [`MemoryPrompts`], [`MemoryScripts`], [`MemorySessions`] and [`MemorySpools`],
//! for unit tests and for embedders that want the catalog without durability.
//! One process only; nothing survives a restart. Each runs the same behaviour
//! suite as the database backends (`tests/catalog.rs`), so what holds for them
//! holds for PostgreSQL and SQLite too.
//!
//! Every operation takes one mutex for its whole length, which makes each one
//! atomic as the databases' statements and transactions are. Rows are stamped
//! with the system clock.

mod assets;
mod calls;
mod changes;
mod links;
mod principals;
mod prompts;
mod scripts;
mod sessions;
mod spools;

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use time::OffsetDateTime;

pub use assets::MemoryAssets;
pub use calls::MemoryCalls;
pub use changes::MemoryChangeFeed;
pub use links::MemoryLinks;
pub use principals::MemoryPrincipals;
pub use prompts::MemoryPrompts;
pub use scripts::MemoryScripts;
pub use sessions::MemorySessions;
pub use spools::MemorySpools;

/// The guarded value, also after a panic elsewhere poisoned the mutex: every
/// operation leaves the value consistent before it can panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The time rows are stamped with.
fn now() -> OffsetDateTime {
    OffsetDateTime::now_utc()
}

/// `span` after `instant`, or the latest representable instant.
fn after(instant: OffsetDateTime, span: Duration) -> OffsetDateTime {
    instant.saturating_add(time::Duration::try_from(span).unwrap_or(time::Duration::MAX))
}

/// `span` before `instant`, or the earliest representable instant.
fn before(instant: OffsetDateTime, span: Duration) -> OffsetDateTime {
    instant.saturating_sub(time::Duration::try_from(span).unwrap_or(time::Duration::MAX))
}

/// A page size as a count of rows.
fn page(limit: u32) -> usize {
    usize::try_from(limit).unwrap_or(usize::MAX)
}
