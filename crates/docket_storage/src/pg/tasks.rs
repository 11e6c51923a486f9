//! The `call_tasks` model on PostgreSQL: the row as read, and one async query
//! function per store operation, each taking the connection. The long statements
//! live in `tasks/*.sql` beside this file.

use diesel::prelude::*;
use diesel::sql_types::{Array, BigInt, Bool, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use docket_task::model::TaskRecord;
use docket_task::store::Beat;
use docket_task::{NewTask, StoreError, TaskId};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::schema::call_tasks;
use crate::error::query_error;
use crate::shared::{self, Answered, Ending, InputState};

/// The channel cross-replica signals travel on; payloads are `<kind>:<task id>`.
pub(crate) const CHANNEL: &str = "docket_tasks";

/// A task as read: every column a [`TaskRecord`] needs.
#[derive(Debug, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = call_tasks, check_for_backend(diesel::pg::Pg))]
pub(crate) struct TaskRow {
    task_id: String,
    tool: String,
    arguments: Value,
    owner: String,
    extra_follower: Option<String>,
    replica_id: String,
    status: String,
    status_message: Option<String>,
    created_at: OffsetDateTime,
    last_updated_at: OffsetDateTime,
    heartbeat_at: OffsetDateTime,
    cancel_requested_at: Option<OffsetDateTime>,
    result: Option<Value>,
    error: Option<Value>,
    input_requests: Option<Value>,
    expires_at: Option<OffsetDateTime>,
    poll_interval_ms: i64,
}

impl TryFrom<TaskRow> for TaskRecord {
    type Error = StoreError;

    fn try_from(row: TaskRow) -> Result<Self, StoreError> {
        Ok(TaskRecord {
            id: TaskId::from_stored(row.task_id),
            tool: row.tool,
            arguments: row.arguments,
            owner: row.owner,
            extra_follower: row.extra_follower,
            replica_id: row.replica_id,
            status: shared::status(&row.status)?,
            status_message: row.status_message,
            created_at: row.created_at,
            last_updated_at: row.last_updated_at,
            heartbeat_at: row.heartbeat_at,
            cancel_requested_at: row.cancel_requested_at,
            result: row.result,
            error: shared::task_error(row.error)?,
            input_requests: row.input_requests,
            expires_at: row.expires_at,
            poll_interval_ms: shared::poll_interval(row.poll_interval_ms)?,
        })
    }
}

/// One task id returned by a statement.
#[derive(QueryableByName)]
struct IdRow {
    #[diesel(sql_type = Text)]
    task_id: String,
}

fn ids(rows: Vec<IdRow>) -> Vec<TaskId> {
    rows.into_iter()
        .map(|row| TaskId::from_stored(row.task_id))
        .collect()
}

/// Inserts a working task; the statement commits on its own, before this returns.
pub(crate) async fn create(
    conn: &mut AsyncPgConnection,
    task: NewTask,
) -> Result<TaskRecord, StoreError> {
    let retention = task.retention.map(shared::millis);
    diesel::sql_query(include_str!("tasks/create.sql"))
        .bind::<Text, _>(task.id.as_str())
        .bind::<Text, _>(&task.tool)
        .bind::<Jsonb, _>(&task.arguments)
        .bind::<Text, _>(&task.owner)
        .bind::<Nullable<Text>, _>(&task.extra_follower)
        .bind::<Text, _>(&task.replica_id)
        .bind::<Nullable<Text>, _>(&task.status_message)
        .bind::<Nullable<BigInt>, _>(retention)
        .bind::<BigInt, _>(shared::poll_interval_column(task.poll_interval_ms))
        .bind::<Nullable<Text>, _>(&task.audit.persona)
        .bind::<Nullable<Text>, _>(&task.audit.connection)
        .bind::<Jsonb, _>(&task.audit.arguments)
        .get_result::<TaskRow>(conn)
        .await
        .map_err(query_error)?
        .try_into()
}

/// Reads a task with the database's `now()`, in one round trip.
pub(crate) async fn get(
    conn: &mut AsyncPgConnection,
    id: &TaskId,
) -> Result<Option<(TaskRecord, OffsetDateTime)>, StoreError> {
    let row = call_tasks::table
        .find(id.as_str())
        .select((
            TaskRow::as_select(),
            diesel::dsl::now.into_sql::<Timestamptz>(),
        ))
        .first::<(TaskRow, OffsetDateTime)>(conn)
        .await
        .optional()
        .map_err(query_error)?;
    row.map(|(row, now)| Ok((row.try_into()?, now))).transpose()
}

/// Ends a running task and writes its audit row, or does nothing to an ended one.
pub(crate) async fn finish(
    conn: &mut AsyncPgConnection,
    id: &TaskId,
    ending: Ending,
) -> Result<bool, StoreError> {
    let audited = diesel::sql_query(include_str!("tasks/finish.sql"))
        .bind::<Text, _>(id.as_str())
        .bind::<Text, _>(ending.status)
        .bind::<Nullable<Jsonb>, _>(&ending.result)
        .bind::<Nullable<Jsonb>, _>(&ending.error)
        .bind::<Nullable<Text>, _>(&ending.status_message)
        .bind::<Bool, _>(ending.success)
        .bind::<Text, _>(&ending.outcome)
        .bind::<Nullable<Text>, _>(&ending.error_message)
        .execute(conn)
        .await
        .map_err(query_error)?;
    Ok(audited == 1)
}

/// Records a cancel request and notifies the replica running the task.
pub(crate) async fn request_cancel(
    conn: &mut AsyncPgConnection,
    id: &TaskId,
) -> Result<(), StoreError> {
    diesel::sql_query(include_str!("tasks/request_cancel.sql"))
        .bind::<Text, _>(id.as_str())
        .execute(conn)
        .await
        .map_err(query_error)?;
    Ok(())
}

/// Stamps the beats in one statement; returns those with a cancel requested.
pub(crate) async fn heartbeat(
    conn: &mut AsyncPgConnection,
    replica_id: &str,
    beats: &[Beat],
) -> Result<Vec<TaskId>, StoreError> {
    if beats.is_empty() {
        return Ok(Vec::new());
    }
    let (task_ids, messages): (Vec<&str>, Vec<Option<&str>>) = beats
        .iter()
        .map(|beat| (beat.id.as_str(), beat.status_message.as_deref()))
        .unzip();
    let rows = diesel::sql_query(include_str!("tasks/heartbeat.sql"))
        .bind::<Text, _>(replica_id)
        .bind::<Array<Text>, _>(task_ids)
        .bind::<Array<Nullable<Text>>, _>(messages)
        .load::<IdRow>(conn)
        .await
        .map_err(query_error)?;
    Ok(ids(rows))
}

/// The input columns of one task, read under its row lock.
#[derive(Queryable)]
struct InputRow {
    status: String,
    input_requests: Option<Value>,
    input_answers: Value,
    requested_input_keys: Value,
}

impl TryFrom<InputRow> for InputState {
    type Error = StoreError;

    fn try_from(row: InputRow) -> Result<Self, StoreError> {
        Ok(InputState {
            status: shared::status(&row.status)?,
            input_requests: row.input_requests,
            answers: shared::answers(row.input_answers)?,
            requested_keys: shared::requested_keys(row.requested_input_keys)?,
        })
    }
}

/// Why an input transaction rolled back: a statement failed, or a stored value
/// could not be read.
enum TxError {
    Query(diesel::result::Error),
    Store(StoreError),
}

impl From<diesel::result::Error> for TxError {
    fn from(error: diesel::result::Error) -> Self {
        TxError::Query(error)
    }
}

impl From<TxError> for StoreError {
    fn from(error: TxError) -> Self {
        match error {
            TxError::Query(error) => query_error(error),
            TxError::Store(error) => error,
        }
    }
}

/// Locks a task's row and reads its input state.
async fn lock_input_state(
    conn: &mut AsyncPgConnection,
    id: &str,
) -> Result<Option<InputState>, TxError> {
    let row = call_tasks::table
        .find(id)
        .select((
            call_tasks::status,
            call_tasks::input_requests,
            call_tasks::input_answers,
            call_tasks::requested_input_keys,
        ))
        .for_update()
        .first::<InputRow>(conn)
        .await
        .optional()?;
    row.map(InputState::try_from)
        .transpose()
        .map_err(TxError::Store)
}

/// Adds input requests under the row lock; false if the task is gone or ended.
pub(crate) async fn require_input(
    conn: &mut AsyncPgConnection,
    id: &TaskId,
    requests: Map<String, Value>,
) -> Result<bool, StoreError> {
    let id = id.as_str().to_owned();
    let required = conn
        .transaction(async |conn| {
            let Some(mut state) = lock_input_state(conn, &id).await? else {
                return Ok(false);
            };
            if !state.require(requests) {
                return Ok(false);
            }
            diesel::update(call_tasks::table.find(&id))
                .set((
                    call_tasks::status.eq(state.status.as_str()),
                    call_tasks::input_requests.eq(&state.input_requests),
                    call_tasks::requested_input_keys.eq(state.requested_keys_json()),
                    call_tasks::last_updated_at.eq(diesel::dsl::now),
                ))
                .execute(conn)
                .await?;
            Ok::<_, TxError>(true)
        })
        .await?;
    Ok(required)
}

/// Applies answers under the row lock and, when one landed, notifies the replica
/// running the task in the same transaction.
pub(crate) async fn answer_input(
    conn: &mut AsyncPgConnection,
    id: &TaskId,
    responses: &Map<String, Value>,
) -> Result<(), StoreError> {
    let id = id.as_str().to_owned();
    let responses = responses.clone();
    conn.transaction(async |conn| {
        let Some(mut state) = lock_input_state(conn, &id).await? else {
            return Ok(());
        };
        let answered = state.answer(&responses);
        if answered == Answered::Nothing {
            return Ok(());
        }
        let answers = Value::Object(state.answers);
        let update = diesel::update(call_tasks::table.find(&id));
        if answered == Answered::Some {
            update
                .set((
                    call_tasks::status.eq(state.status.as_str()),
                    call_tasks::input_requests.eq(&state.input_requests),
                    call_tasks::input_answers.eq(&answers),
                    call_tasks::last_updated_at.eq(diesel::dsl::now),
                ))
                .execute(conn)
                .await?;
            diesel::sql_query("SELECT pg_notify($1, $2)")
                .bind::<Text, _>(CHANNEL)
                .bind::<Text, _>(format!("input:{id}"))
                .execute(conn)
                .await?;
        } else {
            update
                .set((
                    call_tasks::status.eq(state.status.as_str()),
                    call_tasks::input_requests.eq(&state.input_requests),
                    call_tasks::input_answers.eq(&answers),
                ))
                .execute(conn)
                .await?;
        }
        Ok::<_, TxError>(())
    })
    .await?;
    Ok(())
}

/// The answers column as returned by `take_answers.sql`.
#[derive(QueryableByName)]
struct AnswersRow {
    #[diesel(sql_type = Jsonb)]
    input_answers: Value,
}

/// Takes the answers the work has not consumed yet.
pub(crate) async fn take_answers(
    conn: &mut AsyncPgConnection,
    id: &TaskId,
) -> Result<Map<String, Value>, StoreError> {
    let taken = diesel::sql_query(include_str!("tasks/take_answers.sql"))
        .bind::<Text, _>(id.as_str())
        .get_result::<AnswersRow>(conn)
        .await
        .optional()
        .map_err(query_error)?;
    taken.map_or_else(|| Ok(Map::new()), |row| shared::answers(row.input_answers))
}

/// Fails and audits every stale task in one statement; returns their ids.
pub(crate) async fn fail_stale(
    conn: &mut AsyncPgConnection,
    stale_after_ms: i64,
    ending: Ending,
) -> Result<Vec<TaskId>, StoreError> {
    let rows = diesel::sql_query(include_str!("tasks/fail_stale.sql"))
        .bind::<BigInt, _>(stale_after_ms)
        .bind::<Nullable<Jsonb>, _>(&ending.error)
        .bind::<Nullable<Text>, _>(&ending.status_message)
        .bind::<Bool, _>(ending.success)
        .bind::<Text, _>(&ending.outcome)
        .load::<IdRow>(conn)
        .await
        .map_err(query_error)?;
    Ok(ids(rows))
}

/// Deletes up to `limit` expired tasks; returns their ids.
pub(crate) async fn delete_expired(
    conn: &mut AsyncPgConnection,
    limit: u32,
) -> Result<Vec<TaskId>, StoreError> {
    let rows = diesel::sql_query(include_str!("tasks/delete_expired.sql"))
        .bind::<BigInt, _>(shared::limit(limit))
        .load::<IdRow>(conn)
        .await
        .map_err(query_error)?;
    Ok(ids(rows))
}
