//! What every SQLite model file shares: the database clock as SQL text, how a
//! stored time is read back (rows read theirs through `columns`), a duration as an SQLite
//! time modifier, and the busy timeout every connection (the migrating one
//! too) sets.

use std::time::Duration;

use docket_task::StoreError;
use time::OffsetDateTime;

use crate::columns::StoredValue;
use crate::shared;

/// The database clock, in the one form every time is stored in: RFC 3339, UTC,
/// milliseconds, fixed width (so text order is time order).
macro_rules! now {
    () => {
        "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    };
}
pub(crate) use now;

/// The one form SQLite stores times in (`strftime('%Y-%m-%dT%H:%M:%fZ')`), so a
/// cursor's time compares as text exactly as the stored times do.
const STORED_TIME: &[time::format_description::FormatItem<'static>] = time::macros::format_description!(
    "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
);

/// `at` in the stored form (for a cursor compared against stored times).
pub(crate) fn stored_time(at: OffsetDateTime) -> Result<String, time::error::Format> {
    at.to_offset(time::UtcOffset::UTC).format(STORED_TIME)
}

/// How long a statement waits for another process's write lock.
pub(crate) const BUSY_TIMEOUT: &str = "PRAGMA busy_timeout = 5000;";

/// A stored time (read as rows read theirs, through [`StoredValue`]).
pub(crate) fn time(text: &str) -> Result<OffsetDateTime, StoreError> {
    Ok(StoredValue::<OffsetDateTime>::value(text.to_owned())?)
}

/// A duration as an SQLite time modifier, to the millisecond (`+1.250 seconds`).
pub(crate) fn modifier(sign: char, duration: Duration) -> String {
    let millis = shared::millis(duration);
    format!("{sign}{}.{:03} seconds", millis / 1000, millis % 1000)
}
