//! What the double records of every query it accepts: who ran it (the session user
//! and the authenticated principal), how the client labelled it (source, client
//! tags, client info, trace token), and how it ended. Tests read it through
//! [`crate::DoubleState::queries`]; SQL reads it as Trino's
//! `system.runtime.queries`; `GET /v1/query/{queryId}` serves it as Trino's
//! `QueryInfo`.

use std::fmt;
use std::time::{Duration, SystemTime};

use crate::failure::Failure;

/// A query's state, as Trino names it (the states the double's queries go through).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueryState {
    /// Accepted, not yet running: no client has fetched its first executing page.
    Queued,
    /// Running: the client is fetching its pages.
    Running,
    /// Finished with every row delivered.
    Finished,
    /// Failed: a user or internal error, a cancellation, or a denied impersonation.
    Failed,
}

impl QueryState {
    /// The name Trino gives the state: `QUEUED`, `RUNNING`, `FINISHED`, `FAILED`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "QUEUED",
            Self::Running => "RUNNING",
            Self::Finished => "FINISHED",
            Self::Failed => "FAILED",
        }
    }

    /// Whether the query has ended, so that its state no longer changes.
    pub fn is_done(self) -> bool {
        matches!(self, Self::Finished | Self::Failed)
    }
}

impl fmt::Display for QueryState {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.as_str())
    }
}

/// Why a recorded query failed, as its `error` object reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedError {
    /// The `StandardErrorCode` name, such as `PERMISSION_DENIED`.
    pub name: String,
    /// Its code, such as 4.
    pub code: i64,
    /// `USER_ERROR`, `INTERNAL_ERROR`, `INSUFFICIENT_RESOURCES` or `EXTERNAL`.
    pub error_type: String,
    /// The message the client got, such as
    /// `Access Denied: User svc cannot impersonate user root`.
    pub message: String,
}

impl From<&Failure> for RecordedError {
    fn from(failure: &Failure) -> Self {
        Self {
            name: failure.name.to_owned(),
            code: failure.code,
            error_type: failure.kind.to_owned(),
            message: failure.full_message(),
        }
    }
}

/// One query the double accepted (a `POST /v1/statement` that got a query id), as
/// it stands now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedQuery {
    /// The query id, such as `20261130_142501_00001_abcde`.
    pub query_id: String,
    /// The SQL text as sent.
    pub sql: String,
    /// The session user: `X-Trino-User`.
    pub user: String,
    /// The authenticated principal: the user name of `Authorization: Basic`, or the
    /// principal configured for the bearer token; `None` without an
    /// `Authorization` header, the session user then being its own original user.
    pub principal: Option<String>,
    /// `X-Trino-Source`.
    pub source: Option<String>,
    /// `X-Trino-Client-Tags`, split at commas and trimmed, empty tags left out.
    pub client_tags: Vec<String>,
    /// `X-Trino-Client-Info`.
    pub client_info: Option<String>,
    /// `X-Trino-Trace-Token`.
    pub trace_token: Option<String>,
    /// `X-Trino-Catalog`.
    pub catalog: Option<String>,
    /// `X-Trino-Schema`.
    pub schema: Option<String>,
    /// The state now; once done, the final state.
    pub state: QueryState,
    /// Why it failed, when it did.
    pub error: Option<RecordedError>,
    /// When it was accepted.
    pub created: SystemTime,
    /// When a client first fetched an executing page; `None` for a query that never
    /// ran (still queued, denied, or cancelled while queued).
    pub started: Option<SystemTime>,
    /// When a client last asked about it.
    pub last_heartbeat: SystemTime,
    /// When it finished or failed.
    pub ended: Option<SystemTime>,
}

impl RecordedQuery {
    /// The user who asked: the principal, else the session user.
    pub fn original_user(&self) -> &str {
        self.principal.as_deref().unwrap_or(&self.user)
    }

    /// Whether the principal ran the query as another user.
    pub fn is_impersonation(&self) -> bool {
        self.original_user() != self.user
    }

    /// How long it was queued: until it started, ended, or `now`.
    pub(crate) fn queued_time(&self, now: SystemTime) -> Duration {
        let until = self.started.or(self.ended).unwrap_or(now);
        until.duration_since(self.created).unwrap_or_default()
    }
}

/// A recorded query as `system.runtime.queries` shows it.
#[derive(Debug, Clone)]
pub(crate) struct LoggedQuery {
    pub(crate) query: RecordedQuery,
    /// Whether it was dispatched (put in a resource group); a query failed at
    /// dispatch, such as a denied impersonation, was not.
    pub(crate) dispatched: bool,
}

/// `time` as a Trino `timestamp(3) with time zone` value travels in JSON:
/// `2026-01-05 09:30:00.123 UTC`.
pub(crate) fn trino_timestamp(time: SystemTime) -> String {
    let at = time::OffsetDateTime::from(time);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}.{:03} UTC",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.millisecond()
    )
}

/// `time` as Trino's REST resources write a `DateTime`: `2026-01-05T09:30:00.123Z`.
pub(crate) fn iso_timestamp(time: SystemTime) -> String {
    let at = time::OffsetDateTime::from(time);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.millisecond()
    )
}

/// Milliseconds, saturating, as Trino's `*_time_ms` columns hold them.
pub(crate) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_written_as_trino_writes_them() {
        let time = SystemTime::UNIX_EPOCH + Duration::from_millis(1_767_605_400_123);
        assert_eq!(trino_timestamp(time), "2026-01-05 09:30:00.123 UTC");
        assert_eq!(iso_timestamp(time), "2026-01-05T09:30:00.123Z");
    }
}
