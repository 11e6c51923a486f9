//! [`Desk`]: what the portal's pages ask of whoever composes it, always as
//! one signed-in [`Person`] — their tasks, a tool call made as them, the rows
//! of one of their exports, and for administrators the audit log and the
//! replicas. The composing server answers each by the same identity and
//! persona rules as a tool call, so a page shows nothing the person could not
//! get from the tools.

use async_trait::async_trait;
use serde_json::Value;

use crate::authority::Person;

/// Why the desk could not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DeskError {
    /// There is no such thing, or it is not the person's: one answer for both.
    #[error("not found")]
    NotFound,
    /// The person may not do this, or asked for it wrongly; the words say why.
    #[error("{0}")]
    Refused(String),
    /// A store or upstream is away; trying again later may work.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

/// One task the person follows, as the work page lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskLine {
    /// The task id.
    pub id: String,
    /// What it runs: the tool's name.
    pub tool: String,
    /// `working`, `input_required`, `completed`, `failed` or `cancelled`.
    pub status: String,
    /// Its latest status message.
    pub message: Option<String>,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// The result, or the error, once it ended: as JSON text.
    pub outcome: Option<String>,
}

impl TaskLine {
    /// Whether it still runs (so it may be cancelled).
    #[must_use]
    pub fn running(&self) -> bool {
        matches!(self.status.as_str(), "working" | "input_required")
    }
}

/// One page of an export's rows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RowPage {
    /// The column names.
    pub columns: Vec<String>,
    /// The rows, each a cell per column, as text.
    pub rows: Vec<Vec<String>>,
    /// The index of the first row shown (0-based).
    pub first_row: u64,
    /// Whether rows follow.
    pub more: bool,
}

/// What the administrators' audit search asks for; every field narrows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditSearch {
    /// Rows of this person (their subject).
    pub subject: Option<String>,
    /// Rows of this tool.
    pub tool: Option<String>,
    /// Rows at or after this time (RFC 3339).
    pub since: Option<String>,
    /// Rows before this time (RFC 3339).
    pub until: Option<String>,
}

/// What the portal's pages ask of the composing server, as `person`.
#[async_trait]
pub trait Desk: Send + Sync {
    /// The tasks `person` follows, newest first, and the cursor of the next
    /// page.
    ///
    /// # Errors
    /// [`DeskError`].
    async fn tasks(
        &self,
        person: &Person,
        cursor: Option<&str>,
    ) -> Result<(Vec<TaskLine>, Option<String>), DeskError>;

    /// Asks the task `id` to stop, as `person` (one of theirs, or any for an
    /// administrator).
    ///
    /// # Errors
    /// [`DeskError::NotFound`] for a task they may not follow.
    async fn cancel_task(&self, person: &Person, id: &str) -> Result<(), DeskError>;

    /// Calls `tool` with `arguments` as `person`, through the whole pipeline
    /// of a tool call (persona, rate limit, validation, audit). The tool's
    /// structured answer.
    ///
    /// # Errors
    /// [`DeskError::Refused`] with the tool's words when it refused or failed.
    async fn call(&self, person: &Person, tool: &str, arguments: Value)
    -> Result<Value, DeskError>;

    /// `rows` rows of the export `asset_id` from row `first_row`, when the
    /// person may see it.
    ///
    /// # Errors
    /// [`DeskError::NotFound`] for an asset that is not theirs;
    /// [`DeskError::Refused`] for one whose format has no rows to page.
    async fn rows(
        &self,
        person: &Person,
        asset_id: &str,
        first_row: u64,
        rows: usize,
    ) -> Result<RowPage, DeskError>;

    /// The audit rows that match `search`, newest first, for an
    /// administrator.
    ///
    /// # Errors
    /// [`DeskError::NotFound`] for anyone else.
    async fn audit(&self, person: &Person, search: &AuditSearch) -> Result<Value, DeskError>;

    /// The replicas and their last beats, for an administrator.
    ///
    /// # Errors
    /// [`DeskError::NotFound`] for anyone else.
    async fn replicas(&self, person: &Person) -> Result<Value, DeskError>;
}
