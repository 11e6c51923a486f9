//! The rows of tasks, assets, call records, audit entries and principals' claims
//! as both backends' statements return them, each written once over
//! [`Columns`], and how each becomes its domain value. Every statement that returns one of these rows
//! names its columns with the matching macro (`asset_columns!()`, …), so the
//! list is written once too. The script, version and run rows are
//! `scripts::rows`'.

use diesel::QueryableByName;
use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text};

use docket_catalog::{Asset, CallRecord, CatalogError, EndedSession, Session};
use docket_task::model::TaskRecord;
use docket_task::oversight::{AuditRecord, ReplicaBeat};
use docket_task::store::{AuditContext, AuditEntry};
use docket_task::{NewTask, StoreError, TaskId, TaskTrace};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::columns::{Columns, StoredValue, optional};
use crate::shared::{self, InputState};

/// The columns of a task but its stamp (`heartbeat_at`): a read takes the stamp
/// together with its replica's beat (`… AS heartbeat_at`).
macro_rules! task_columns_but_stamp {
    () => {
        "task_id, tool, arguments, owner, extra_follower, replica_id, status, status_message, \
         created_at, last_updated_at, cancel_requested_at, result, error, input_requests, \
         expires_at, poll_interval_ms, trace_context"
    };
}
pub(crate) use task_columns_but_stamp;

/// A task as read ([`task_columns_but_stamp!`] and its stamp).
#[derive(QueryableByName)]
pub(crate) struct TaskRow<C: Columns> {
    #[diesel(sql_type = Text)]
    task_id: String,
    #[diesel(sql_type = Text)]
    tool: String,
    #[diesel(sql_type = C::JsonSql)]
    arguments: C::Json,
    #[diesel(sql_type = Text)]
    owner: String,
    #[diesel(sql_type = Nullable<Text>)]
    extra_follower: Option<String>,
    #[diesel(sql_type = Text)]
    replica_id: String,
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Nullable<Text>)]
    status_message: Option<String>,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    last_updated_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    heartbeat_at: C::Time,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    cancel_requested_at: Option<C::Time>,
    #[diesel(sql_type = Nullable<C::JsonSql>)]
    result: Option<C::Json>,
    #[diesel(sql_type = Nullable<C::JsonSql>)]
    error: Option<C::Json>,
    #[diesel(sql_type = Nullable<C::JsonSql>)]
    input_requests: Option<C::Json>,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    expires_at: Option<C::Time>,
    #[diesel(sql_type = BigInt)]
    poll_interval_ms: i64,
    /// The creating request's trace ([`TaskTrace::to_column`]).
    #[diesel(sql_type = Nullable<Text>)]
    trace_context: Option<String>,
    /// Whether its replica's row says it drains (false without a row).
    #[diesel(sql_type = Bool)]
    replica_draining: bool,
}

impl<C: Columns> TryFrom<TaskRow<C>> for TaskRecord {
    type Error = StoreError;

    fn try_from(row: TaskRow<C>) -> Result<Self, StoreError> {
        Ok(TaskRecord {
            id: TaskId::from_stored(row.task_id),
            tool: row.tool,
            arguments: row.arguments.value()?,
            owner: row.owner,
            extra_follower: row.extra_follower,
            replica_id: row.replica_id,
            status: shared::status(&row.status)?,
            status_message: row.status_message,
            created_at: row.created_at.value()?,
            last_updated_at: row.last_updated_at.value()?,
            heartbeat_at: row.heartbeat_at.value()?,
            cancel_requested_at: optional(row.cancel_requested_at)?,
            result: optional(row.result)?,
            error: shared::task_error(optional(row.error)?)?,
            input_requests: optional(row.input_requests)?,
            expires_at: optional(row.expires_at)?,
            poll_interval_ms: shared::poll_interval(row.poll_interval_ms)?,
            replica_draining: row.replica_draining,
            trace_context: row
                .trace_context
                .as_deref()
                .and_then(TaskTrace::from_column),
        })
    }
}

/// What the database decides when a task is inserted: its times (one reading of
/// the clock for the creation, the last update and the stamp). Everything else
/// the new row holds is what the caller gave, so a create does not send the row
/// back (`RETURNING created_at, expires_at`).
#[derive(QueryableByName)]
pub(crate) struct CreatedRow<C: Columns> {
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = Nullable<C::TimeSql>)]
    expires_at: Option<C::Time>,
}

impl<C: Columns> CreatedRow<C> {
    /// The new task as stored.
    pub(crate) fn record(self, task: NewTask) -> Result<TaskRecord, StoreError> {
        Ok(task.into_record(self.created_at.value()?, optional(self.expires_at)?))
    }
}

/// What the database decided for one of several tasks inserted together, with
/// the task's id to tell which.
#[cfg(feature = "postgres")]
#[derive(QueryableByName)]
pub(crate) struct CreatedIdRow<C: Columns> {
    #[diesel(sql_type = Text)]
    task_id: String,
    #[diesel(embed)]
    created: CreatedRow<C>,
}

#[cfg(feature = "postgres")]
impl<C: Columns> CreatedIdRow<C> {
    /// The task's id, as stored.
    pub(crate) fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The new task as stored.
    pub(crate) fn record(self, task: NewTask) -> Result<TaskRecord, StoreError> {
        self.created.record(task)
    }
}

/// The status an ending statement recorded (PostgreSQL's, which ends and audits
/// in one statement).
#[cfg(feature = "postgres")]
#[derive(QueryableByName)]
pub(crate) struct EndedStatusRow {
    #[diesel(sql_type = Text)]
    status: String,
}

#[cfg(feature = "postgres")]
impl EndedStatusRow {
    /// The status, when the statement ended the task.
    pub(crate) fn read(row: Option<Self>) -> Result<Option<docket_task::TaskStatus>, StoreError> {
        row.map(|row| shared::status(&row.status)).transpose()
    }
}

/// One task id returned by a statement.
#[derive(QueryableByName)]
pub(crate) struct TaskIdRow {
    #[diesel(sql_type = Text)]
    task_id: String,
}

/// A task the stale sweep ended, with the trace it keeps.
#[cfg(feature = "postgres")]
#[derive(QueryableByName)]
pub(crate) struct StaleTaskRow {
    #[diesel(sql_type = Text)]
    task_id: String,
    #[diesel(sql_type = Nullable<Text>)]
    trace_context: Option<String>,
}

#[cfg(feature = "postgres")]
impl StaleTaskRow {
    /// The ended task; a trace column that does not read as one is no trace.
    pub(crate) fn into_stale(self) -> docket_task::StaleTask {
        docket_task::StaleTask {
            trace: self
                .trace_context
                .as_deref()
                .and_then(TaskTrace::from_column),
            id: TaskId::from_stored(self.task_id),
        }
    }
}

/// The ids a statement returned.
pub(crate) fn task_ids(rows: Vec<TaskIdRow>) -> Vec<TaskId> {
    rows.into_iter()
        .map(|row| TaskId::from_stored(row.task_id))
        .collect()
}

/// The columns of an asset.
macro_rules! asset_columns {
    () => {
        "id, owner, name, description, tags, format, content_type, storage_key, size_bytes, \
         row_count, connection, tool, idempotency_key, task_id, call_id, created_at"
    };
}
pub(crate) use asset_columns;

/// An asset as read ([`asset_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct AssetRow<C: Columns> {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    owner: String,
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Nullable<Text>)]
    description: Option<String>,
    #[diesel(sql_type = C::JsonSql)]
    tags: C::Json,
    #[diesel(sql_type = Text)]
    format: String,
    #[diesel(sql_type = Text)]
    content_type: String,
    #[diesel(sql_type = Text)]
    storage_key: String,
    #[diesel(sql_type = BigInt)]
    size_bytes: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    row_count: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    connection: Option<String>,
    #[diesel(sql_type = Text)]
    tool: String,
    #[diesel(sql_type = Nullable<Text>)]
    idempotency_key: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    task_id: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    call_id: Option<String>,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
}

impl<C: Columns> TryFrom<AssetRow<C>> for Asset {
    type Error = CatalogError;

    fn try_from(row: AssetRow<C>) -> Result<Self, CatalogError> {
        Ok(Asset {
            id: row.id,
            owner: row.owner,
            name: row.name,
            description: row.description,
            tags: shared::tags(row.tags.value()?)?,
            format: row.format,
            content_type: row.content_type,
            storage_key: row.storage_key,
            size_bytes: row.size_bytes,
            row_count: row.row_count,
            connection: row.connection,
            tool: row.tool,
            idempotency_key: row.idempotency_key,
            task_id: row.task_id,
            call_id: row.call_id,
            created_at: row.created_at.value()?,
        })
    }
}

/// Rows read into assets.
pub(crate) fn assets<C: Columns>(rows: Vec<AssetRow<C>>) -> Result<Vec<Asset>, CatalogError> {
    rows.into_iter().map(Asset::try_from).collect()
}

/// The columns of a call record.
macro_rules! call_columns {
    () => {
        "id, kind, tool, connection, statement, subject, persona, success, outcome, \
         error_message, duration_ms, rows, bytes, asset_id, task_id, upstream_status, \
         engine_user, upstream_ids, created_at"
    };
}
pub(crate) use call_columns;

/// Binds a new call record's values in the order both backends' inserts list
/// them (`call_columns!` without `created_at`, which the database sets) up to
/// `engine_user`; the caller binds `upstream_ids` after them, in its backend's
/// JSON form ([`shared::upstream_ids_json`]).
macro_rules! bind_new_call {
    ($statement:expr, $record:expr) => {{
        use diesel::sql_types::{BigInt, Bool, Integer, Nullable, Text};
        let record: &docket_catalog::NewCallRecord = $record;
        $statement
            .bind::<Text, _>(&record.id)
            .bind::<Text, _>(record.kind.as_str())
            .bind::<Text, _>(&record.tool)
            .bind::<Nullable<Text>, _>(&record.connection)
            .bind::<Text, _>(&record.statement)
            .bind::<Text, _>(&record.subject)
            .bind::<Nullable<Text>, _>(&record.persona)
            .bind::<Bool, _>(record.success)
            .bind::<Text, _>(&record.outcome)
            .bind::<Nullable<Text>, _>(&record.error_message)
            .bind::<BigInt, _>(record.duration_ms)
            .bind::<Nullable<BigInt>, _>(record.rows)
            .bind::<Nullable<BigInt>, _>(record.bytes)
            .bind::<Nullable<Text>, _>(&record.asset_id)
            .bind::<Nullable<Text>, _>(&record.task_id)
            .bind::<Nullable<Integer>, _>(record.upstream_status.map(i32::from))
            .bind::<Nullable<Text>, _>(&record.engine_user)
    }};
}
pub(crate) use bind_new_call;

/// A call record as read ([`call_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct CallRow<C: Columns> {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    kind: String,
    #[diesel(sql_type = Text)]
    tool: String,
    #[diesel(sql_type = Nullable<Text>)]
    connection: Option<String>,
    #[diesel(sql_type = Text)]
    statement: String,
    #[diesel(sql_type = Text)]
    subject: String,
    #[diesel(sql_type = Nullable<Text>)]
    persona: Option<String>,
    #[diesel(sql_type = Bool)]
    success: bool,
    #[diesel(sql_type = Text)]
    outcome: String,
    #[diesel(sql_type = Nullable<Text>)]
    error_message: Option<String>,
    #[diesel(sql_type = BigInt)]
    duration_ms: i64,
    #[diesel(sql_type = Nullable<BigInt>)]
    rows: Option<i64>,
    #[diesel(sql_type = Nullable<BigInt>)]
    bytes: Option<i64>,
    #[diesel(sql_type = Nullable<Text>)]
    asset_id: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    task_id: Option<String>,
    #[diesel(sql_type = Nullable<Integer>)]
    upstream_status: Option<i32>,
    #[diesel(sql_type = Nullable<Text>)]
    engine_user: Option<String>,
    #[diesel(sql_type = C::JsonSql)]
    upstream_ids: C::Json,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
}

impl<C: Columns> TryFrom<CallRow<C>> for CallRecord {
    type Error = CatalogError;

    fn try_from(row: CallRow<C>) -> Result<Self, CatalogError> {
        Ok(CallRecord {
            id: row.id,
            kind: shared::call_kind(&row.kind)?,
            tool: row.tool,
            connection: row.connection,
            statement: row.statement,
            subject: row.subject,
            persona: row.persona,
            success: row.success,
            outcome: row.outcome,
            error_message: row.error_message,
            duration_ms: row.duration_ms,
            rows: row.rows,
            bytes: row.bytes,
            asset_id: row.asset_id,
            task_id: row.task_id,
            upstream_status: shared::upstream_status(row.upstream_status)?,
            engine_user: row.engine_user,
            upstream_ids: shared::upstream_ids(row.upstream_ids.value()?)?,
            created_at: row.created_at.value()?,
        })
    }
}

/// Rows read into call records.
pub(crate) fn calls<C: Columns>(rows: Vec<CallRow<C>>) -> Result<Vec<CallRecord>, CatalogError> {
    rows.into_iter().map(CallRecord::try_from).collect()
}

/// The columns of an audit entry.
macro_rules! audit_columns {
    () => {
        "tool, subject, persona, connection, arguments, success, outcome, error_message, \
         duration_ms, call_id, engine_user, upstream_ids"
    };
}
pub(crate) use audit_columns;

/// An audit entry as read ([`audit_columns!`]).
#[derive(QueryableByName)]
pub(crate) struct AuditRow<C: Columns> {
    #[diesel(sql_type = Text)]
    tool: String,
    #[diesel(sql_type = Text)]
    subject: String,
    #[diesel(sql_type = Nullable<Text>)]
    persona: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    connection: Option<String>,
    #[diesel(sql_type = C::JsonSql)]
    arguments: C::Json,
    #[diesel(sql_type = Bool)]
    success: bool,
    #[diesel(sql_type = Text)]
    outcome: String,
    #[diesel(sql_type = Nullable<Text>)]
    error_message: Option<String>,
    #[diesel(sql_type = BigInt)]
    duration_ms: i64,
    #[diesel(sql_type = Nullable<Text>)]
    call_id: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    engine_user: Option<String>,
    #[diesel(sql_type = C::JsonSql)]
    upstream_ids: C::Json,
}

impl<C: Columns> TryFrom<AuditRow<C>> for AuditEntry {
    type Error = StoreError;

    fn try_from(row: AuditRow<C>) -> Result<Self, StoreError> {
        Ok(AuditEntry {
            tool: row.tool,
            subject: row.subject,
            context: AuditContext {
                persona: row.persona,
                connection: row.connection,
                arguments: row.arguments.value()?,
            },
            success: row.success,
            outcome: row.outcome,
            error_message: row.error_message,
            duration_ms: row.duration_ms,
            call_id: row.call_id,
            engine_user: row.engine_user,
            upstream_ids: shared::upstream_ids(row.upstream_ids.value()?)?,
        })
    }
}

/// Rows read into audit entries.
pub(crate) fn audit_entries<C: Columns>(
    rows: Vec<AuditRow<C>>,
) -> Result<Vec<AuditEntry>, StoreError> {
    rows.into_iter().map(AuditEntry::try_from).collect()
}

/// An audit row with when it was written (`created_at, <audit_columns!>`).
#[derive(QueryableByName)]
pub(crate) struct AuditRecordRow<C: Columns> {
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(embed)]
    row: AuditRow<C>,
}

/// Rows read into audit records.
pub(crate) fn audit_records<C: Columns>(
    rows: Vec<AuditRecordRow<C>>,
) -> Result<Vec<AuditRecord>, StoreError> {
    rows.into_iter()
        .map(|row| {
            Ok(AuditRecord {
                at: row.created_at.value()?,
                entry: AuditEntry::try_from(row.row)?,
            })
        })
        .collect()
}

/// A replica's row (`id, started_at, last_beat_at, draining`) with the
/// database clock (`now`).
#[derive(QueryableByName)]
pub(crate) struct ReplicaRow<C: Columns> {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = C::TimeSql)]
    started_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    last_beat_at: C::Time,
    #[diesel(sql_type = Bool)]
    draining: bool,
    #[diesel(sql_type = C::TimeSql)]
    now: C::Time,
}

/// Rows read into replicas, with the database clock (the epoch for none).
pub(crate) fn replica_beats<C: Columns>(
    rows: Vec<ReplicaRow<C>>,
) -> Result<(Vec<ReplicaBeat>, OffsetDateTime), StoreError> {
    let mut now = OffsetDateTime::UNIX_EPOCH;
    let mut beats = Vec::with_capacity(rows.len());
    for row in rows {
        now = row.now.value()?;
        beats.push(ReplicaBeat {
            id: row.id,
            started_at: row.started_at.value()?,
            last_beat_at: row.last_beat_at.value()?,
            draining: row.draining,
        });
    }
    Ok((beats, now))
}

/// A task as read together with the database clock (`…, <now> AS now`).
#[derive(QueryableByName)]
pub(crate) struct TaskNowRow<C: Columns> {
    #[diesel(embed)]
    task: TaskRow<C>,
    #[diesel(sql_type = C::TimeSql)]
    now: C::Time,
}

impl<C: Columns> TaskNowRow<C> {
    /// The task's id, as stored.
    #[cfg(feature = "postgres")]
    pub(crate) fn task_id(&self) -> &str {
        &self.task.task_id
    }

    /// The task and the clock's reading.
    pub(crate) fn read(self) -> Result<(TaskRecord, OffsetDateTime), StoreError> {
        Ok((self.task.try_into()?, self.now.value()?))
    }
}

/// Rows read with the clock into the records and the clock's one reading (every
/// row of one statement carries the same `now`); an empty page reads the clock as
/// the Unix epoch, which no caller compares anything with.
pub(crate) fn page_with_clock(
    rows: impl Iterator<Item = Result<(TaskRecord, OffsetDateTime), StoreError>>,
) -> Result<(Vec<TaskRecord>, OffsetDateTime), StoreError> {
    let mut now = OffsetDateTime::UNIX_EPOCH;
    let records = rows
        .map(|row| {
            row.map(|(record, read_at)| {
                now = read_at;
                record
            })
        })
        .collect::<Result<_, _>>()?;
    Ok((records, now))
}

/// The input columns of one task
/// (`status, input_requests, input_answers, requested_input_keys`).
#[derive(QueryableByName)]
pub(crate) struct InputRow<C: Columns> {
    #[diesel(sql_type = Text)]
    status: String,
    #[diesel(sql_type = Nullable<C::JsonSql>)]
    input_requests: Option<C::Json>,
    #[diesel(sql_type = C::JsonSql)]
    input_answers: C::Json,
    #[diesel(sql_type = C::JsonSql)]
    requested_input_keys: C::Json,
}

impl<C: Columns> TryFrom<InputRow<C>> for InputState {
    type Error = StoreError;

    fn try_from(row: InputRow<C>) -> Result<Self, StoreError> {
        Ok(InputState {
            status: shared::status(&row.status)?,
            input_requests: optional(row.input_requests)?,
            answers: shared::answers(row.input_answers.value()?)?,
            requested_keys: shared::requested_keys(row.requested_input_keys.value()?)?,
        })
    }
}

/// The answers a statement took from a task (`input_answers`).
#[derive(QueryableByName)]
pub(crate) struct AnswersRow<C: Columns> {
    #[diesel(sql_type = C::JsonSql)]
    pub(crate) input_answers: C::Json,
}

impl<C: Columns> AnswersRow<C> {
    /// The answers, by key.
    pub(crate) fn answers(self) -> Result<Map<String, Value>, StoreError> {
        shared::answers(self.input_answers.value()?)
    }
}

/// The columns of a protocol session.
macro_rules! session_columns {
    () => {
        "id, protocol_version, client_capabilities, client_info, subject, log_level, \
         created_at, last_used_at"
    };
}
pub(crate) use session_columns;

/// A protocol session as read ([`session_columns!`]) with the database clock
/// (`… AS now`). Capabilities and client info are JSON text on both backends: they
/// are kept as the client sent them and never queried.
#[derive(QueryableByName)]
pub(crate) struct SessionRow<C: Columns> {
    #[diesel(sql_type = Text)]
    id: String,
    #[diesel(sql_type = Text)]
    protocol_version: String,
    #[diesel(sql_type = Text)]
    client_capabilities: String,
    #[diesel(sql_type = Nullable<Text>)]
    client_info: Option<String>,
    #[diesel(sql_type = Text)]
    subject: String,
    #[diesel(sql_type = Nullable<Text>)]
    log_level: Option<String>,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    last_used_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    now: C::Time,
}

/// Stored JSON text read back.
pub(crate) fn json_text(text: &str, column: &str) -> Result<Value, CatalogError> {
    serde_json::from_str(text)
        .map_err(|err| CatalogError::Corrupt(format!("{column} is not JSON: {err}")))
}

impl<C: Columns> SessionRow<C> {
    /// The session and the database clock when it was read.
    pub(crate) fn into_session(self) -> Result<(Session, OffsetDateTime), CatalogError> {
        let session = Session {
            client_capabilities: json_text(&self.client_capabilities, "client_capabilities")?,
            client_info: self
                .client_info
                .as_deref()
                .map(|info| json_text(info, "client_info"))
                .transpose()?,
            id: self.id,
            protocol_version: self.protocol_version,
            subject: self.subject,
            log_level: self.log_level,
            created_at: self.created_at.value()?,
            last_used_at: self.last_used_at.value()?,
        };
        Ok((session, self.now.value()?))
    }
}

/// A session the idle sweep deleted, as its `RETURNING` reads it.
#[derive(QueryableByName)]
pub(crate) struct EndedSessionRow<C: Columns> {
    #[diesel(sql_type = Text)]
    protocol_version: String,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    last_used_at: C::Time,
}

impl<C: Columns> EndedSessionRow<C> {
    /// The ended session: its version, and its creation to its last use.
    pub(crate) fn into_ended(self) -> Result<EndedSession, CatalogError> {
        let lasted = self.last_used_at.value()? - self.created_at.value()?;
        Ok(EndedSession {
            protocol_version: self.protocol_version,
            lasted: lasted.try_into().unwrap_or_default(),
        })
    }
}

/// The columns a library prompt is read by, in [`PromptRow`]'s order.
macro_rules! prompt_columns {
    () => {
        "name, owner, description, template, arguments, scripts, shared_with, \
         created_at, updated_at"
    };
}
pub(crate) use prompt_columns;

/// A library prompt as read ([`prompt_columns!`]); its lists are JSON text.
#[derive(QueryableByName)]
pub(crate) struct PromptRow<C: Columns> {
    #[diesel(sql_type = Text)]
    name: String,
    #[diesel(sql_type = Text)]
    owner: String,
    #[diesel(sql_type = Text)]
    description: String,
    #[diesel(sql_type = Text)]
    template: String,
    #[diesel(sql_type = Text)]
    arguments: String,
    #[diesel(sql_type = Text)]
    scripts: String,
    #[diesel(sql_type = Text)]
    shared_with: String,
    #[diesel(sql_type = C::TimeSql)]
    created_at: C::Time,
    #[diesel(sql_type = C::TimeSql)]
    updated_at: C::Time,
}

impl<C: Columns> PromptRow<C> {
    /// The prompt.
    pub(crate) fn into_prompt(self) -> Result<docket_catalog::LibraryPrompt, CatalogError> {
        let corrupt = |column: &str, err: serde_json::Error| {
            CatalogError::Corrupt(format!("{column} is not a JSON list: {err}"))
        };
        let names = |text: &str, column: &str| {
            serde_json::from_str::<Vec<String>>(text).map_err(|err| corrupt(column, err))
        };
        Ok(docket_catalog::LibraryPrompt {
            arguments: serde_json::from_str(&self.arguments)
                .map_err(|err| corrupt("arguments", err))?,
            scripts: names(&self.scripts, "scripts")?,
            shared_with: names(&self.shared_with, "shared_with")?,
            name: self.name,
            owner: self.owner,
            description: self.description,
            template: self.template,
            created_at: self.created_at.value()?,
            updated_at: self.updated_at.value()?,
        })
    }
}

/// A prompt's lists as the JSON text the table keeps:
/// `(arguments, scripts, shared_with)`.
pub(crate) fn prompt_lists(prompt: &docket_catalog::NewPrompt) -> (String, String, String) {
    let text = |value: serde_json::Result<String>| value.unwrap_or_else(|_| "[]".to_owned());
    (
        text(serde_json::to_string(&prompt.arguments)),
        text(serde_json::to_string(&prompt.scripts)),
        text(serde_json::to_string(&prompt.shared_with)),
    )
}

/// A principal's claims as both backends store them: a JSON object as text, so
/// they read back exactly as written.
#[derive(QueryableByName)]
pub(crate) struct ClaimsRow {
    #[diesel(sql_type = Text)]
    claims: String,
}

impl ClaimsRow {
    /// The claims, or [`CatalogError::Corrupt`] when the text is not a JSON object.
    pub(crate) fn into_claims(self) -> Result<Map<String, Value>, CatalogError> {
        match json_text(&self.claims, "claims")? {
            Value::Object(claims) => Ok(claims),
            _ => Err(CatalogError::Corrupt(
                "a principal's claims are not a JSON object".into(),
            )),
        }
    }
}

/// A principal's claims as the column stores them.
pub(crate) fn claims_text(claims: &Map<String, Value>) -> Result<String, CatalogError> {
    serde_json::to_string(claims)
        .map_err(|err| CatalogError::Invalid(format!("claims that are not JSON: {err}")))
}
