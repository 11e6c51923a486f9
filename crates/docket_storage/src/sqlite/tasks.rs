//! The `call_tasks` model on SQLite: the row as read, and one query function per
//! store operation. They are synchronous diesel, run on a blocking thread by
//! [`SqliteStore`](super::SqliteStore), so a transaction runs to its end even if
//! the caller stops waiting. The long statements live in `tasks/*.sql`.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use diesel::sqlite::Sqlite;
use docket_task::model::TaskRecord;
use docket_task::store::Beat;
use docket_task::{NewTask, StoreError, TaskId};
use serde_json::{Map, Value};

use super::audit::{self, NewAuditRow};
use super::schema::call_tasks;
use super::sql::{NOW, json, modifier, time};
use crate::shared::{self, Answered, Ending, InputState};

/// A task as read: every column a [`TaskRecord`] needs, JSON and times as text.
#[derive(Debug, Queryable, Selectable, QueryableByName)]
#[diesel(table_name = call_tasks, check_for_backend(Sqlite))]
pub(crate) struct TaskRow {
    task_id: String,
    tool: String,
    arguments: String,
    owner: String,
    extra_follower: Option<String>,
    replica_id: String,
    status: String,
    status_message: Option<String>,
    created_at: String,
    last_updated_at: String,
    heartbeat_at: String,
    cancel_requested_at: Option<String>,
    result: Option<String>,
    error: Option<String>,
    input_requests: Option<String>,
    expires_at: Option<String>,
    poll_interval_ms: i64,
}

impl TryFrom<TaskRow> for TaskRecord {
    type Error = StoreError;

    fn try_from(row: TaskRow) -> Result<Self, StoreError> {
        Ok(TaskRecord {
            id: TaskId::from_stored(row.task_id),
            tool: row.tool,
            arguments: json(&row.arguments)?,
            owner: row.owner,
            extra_follower: row.extra_follower,
            replica_id: row.replica_id,
            status: shared::status(&row.status)?,
            status_message: row.status_message,
            created_at: time(&row.created_at)?,
            last_updated_at: time(&row.last_updated_at)?,
            heartbeat_at: time(&row.heartbeat_at)?,
            cancel_requested_at: row.cancel_requested_at.as_deref().map(time).transpose()?,
            result: row.result.as_deref().map(json).transpose()?,
            error: shared::task_error(row.error.as_deref().map(json).transpose()?)?,
            input_requests: row.input_requests.as_deref().map(json).transpose()?,
            expires_at: row.expires_at.as_deref().map(time).transpose()?,
            poll_interval_ms: shared::poll_interval(row.poll_interval_ms)?,
        })
    }
}

/// A stored value that could not be read, as a diesel error, so it can abort a
/// transaction; [`crate::error::query_error`] turns it back into
/// [`StoreError::Corrupt`].
fn corrupt(error: StoreError) -> diesel::result::Error {
    diesel::result::Error::DeserializationError(Box::new(error))
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

/// Inserts a working task (autocommit: committed when this returns).
pub(crate) fn create(conn: &mut SqliteConnection, task: &NewTask) -> QueryResult<TaskRow> {
    diesel::sql_query(include_str!("tasks/create.sql"))
        .bind::<Text, _>(task.id.as_str())
        .bind::<Text, _>(&task.tool)
        .bind::<Text, _>(task.arguments.to_string())
        .bind::<Text, _>(&task.owner)
        .bind::<Nullable<Text>, _>(&task.extra_follower)
        .bind::<Text, _>(&task.replica_id)
        .bind::<Nullable<Text>, _>(&task.status_message)
        .bind::<Nullable<Text>, _>(task.retention.map(|retention| modifier('+', retention)))
        .bind::<BigInt, _>(shared::poll_interval_column(task.poll_interval_ms))
        .bind::<Nullable<Text>, _>(&task.audit.persona)
        .bind::<Nullable<Text>, _>(&task.audit.connection)
        .bind::<Text, _>(task.audit.arguments.to_string())
        .get_result(conn)
}

/// Reads a task with the database clock's current time.
pub(crate) fn get(conn: &mut SqliteConnection, id: &str) -> QueryResult<Option<(TaskRow, String)>> {
    call_tasks::table
        .find(id)
        .select((TaskRow::as_select(), diesel::dsl::sql::<Text>(NOW)))
        .first(conn)
        .optional()
}

/// What a task's audit row needs, as returned by the statement that ended it.
#[derive(QueryableByName)]
struct EndedRow {
    #[diesel(sql_type = Text)]
    task_id: String,
    #[diesel(sql_type = Text)]
    tool: String,
    #[diesel(sql_type = Text)]
    owner: String,
    #[diesel(sql_type = Nullable<Text>)]
    audit_persona: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    audit_connection: Option<String>,
    #[diesel(sql_type = Text)]
    audit_arguments: String,
    #[diesel(sql_type = BigInt)]
    duration_ms: i64,
}

impl EndedRow {
    fn audit_row<'a>(&'a self, ending: &'a Ending) -> NewAuditRow<'a> {
        NewAuditRow {
            tool: &self.tool,
            subject: &self.owner,
            persona: self.audit_persona.as_deref(),
            connection: self.audit_connection.as_deref(),
            arguments: &self.audit_arguments,
            success: ending.success,
            outcome: &ending.outcome,
            error_message: ending.error_message.as_deref(),
            duration_ms: self.duration_ms,
        }
    }
}

/// Ends a running task and writes its audit row in one immediate transaction, or
/// does nothing to an ended one.
pub(crate) fn finish(conn: &mut SqliteConnection, id: &str, ending: &Ending) -> QueryResult<bool> {
    conn.immediate_transaction(|conn| {
        let ended = diesel::sql_query(include_str!("tasks/finish.sql"))
            .bind::<Text, _>(id)
            .bind::<Text, _>(ending.status)
            .bind::<Nullable<Text>, _>(ending.result.as_ref().map(Value::to_string))
            .bind::<Nullable<Text>, _>(ending.error.as_ref().map(Value::to_string))
            .bind::<Nullable<Text>, _>(&ending.status_message)
            .get_result::<EndedRow>(conn)
            .optional()?;
        let Some(ended) = ended else {
            return Ok(false);
        };
        audit::insert_rows(conn, &[ended.audit_row(ending)])?;
        Ok(true)
    })
}

/// Records a cancel request on a running task (the first request's time is kept).
pub(crate) fn request_cancel(conn: &mut SqliteConnection, id: &str) -> QueryResult<()> {
    diesel::sql_query(format!(
        "UPDATE call_tasks SET cancel_requested_at = COALESCE(cancel_requested_at, {NOW}) \
         WHERE task_id = ?1 AND status IN ('working', 'input_required')"
    ))
    .bind::<Text, _>(id)
    .execute(conn)
    .map(drop)
}

/// One stamped task and whether a cancel was asked for it.
#[derive(QueryableByName)]
struct StampedRow {
    #[diesel(sql_type = Text)]
    task_id: String,
    #[diesel(sql_type = Bool)]
    cancel_requested: bool,
}

/// Stamps the beats in one statement; returns those with a cancel requested.
pub(crate) fn heartbeat(
    conn: &mut SqliteConnection,
    replica_id: &str,
    beats: &[Beat],
) -> QueryResult<Vec<TaskId>> {
    let beats = Value::Array(
        beats
            .iter()
            .map(|beat| {
                Value::Array(vec![
                    Value::String(beat.id.as_str().to_owned()),
                    beat.status_message
                        .clone()
                        .map_or(Value::Null, Value::String),
                ])
            })
            .collect(),
    );
    let stamped = diesel::sql_query(include_str!("tasks/heartbeat.sql"))
        .bind::<Text, _>(replica_id)
        .bind::<Text, _>(beats.to_string())
        .load::<StampedRow>(conn)?;
    Ok(stamped
        .into_iter()
        .filter(|row| row.cancel_requested)
        .map(|row| TaskId::from_stored(row.task_id))
        .collect())
}

/// The input columns of one task.
#[derive(Queryable)]
struct InputRow {
    status: String,
    input_requests: Option<String>,
    input_answers: String,
    requested_input_keys: String,
}

impl InputRow {
    fn state(self) -> Result<InputState, StoreError> {
        Ok(InputState {
            status: shared::status(&self.status)?,
            input_requests: self.input_requests.as_deref().map(json).transpose()?,
            answers: shared::answers(json(&self.input_answers)?)?,
            requested_keys: shared::requested_keys(json(&self.requested_input_keys)?)?,
        })
    }
}

/// Reads a task's input state (inside an immediate transaction: no other writer
/// can change it before this one writes).
fn input_state(conn: &mut SqliteConnection, id: &str) -> QueryResult<Option<InputState>> {
    let row = call_tasks::table
        .find(id)
        .select((
            call_tasks::status,
            call_tasks::input_requests,
            call_tasks::input_answers,
            call_tasks::requested_input_keys,
        ))
        .first::<InputRow>(conn)
        .optional()?;
    row.map(InputRow::state).transpose().map_err(corrupt)
}

/// Adds input requests; false if the task is gone or ended.
pub(crate) fn require_input(
    conn: &mut SqliteConnection,
    id: &str,
    requests: Map<String, Value>,
) -> QueryResult<bool> {
    conn.immediate_transaction(|conn| {
        let Some(mut state) = input_state(conn, id)? else {
            return Ok(false);
        };
        if !state.require(requests) {
            return Ok(false);
        }
        diesel::update(call_tasks::table.find(id))
            .set((
                call_tasks::status.eq(state.status.as_str()),
                call_tasks::input_requests.eq(state.input_requests.as_ref().map(Value::to_string)),
                call_tasks::requested_input_keys.eq(state.requested_keys_json().to_string()),
                call_tasks::last_updated_at.eq(diesel::dsl::sql::<Text>(NOW)),
            ))
            .execute(conn)?;
        Ok(true)
    })
}

/// Applies answers.
pub(crate) fn answer_input(
    conn: &mut SqliteConnection,
    id: &str,
    responses: &Map<String, Value>,
) -> QueryResult<()> {
    conn.immediate_transaction(|conn| {
        let Some(mut state) = input_state(conn, id)? else {
            return Ok(());
        };
        let answered = state.answer(responses);
        if answered == Answered::Nothing {
            return Ok(());
        }
        let status = state.status.as_str();
        let input_requests = state.input_requests.as_ref().map(Value::to_string);
        let answers = Value::Object(state.answers).to_string();
        let update = diesel::update(call_tasks::table.find(id));
        if answered == Answered::Some {
            update
                .set((
                    call_tasks::status.eq(status),
                    call_tasks::input_requests.eq(input_requests),
                    call_tasks::input_answers.eq(answers),
                    call_tasks::last_updated_at.eq(diesel::dsl::sql::<Text>(NOW)),
                ))
                .execute(conn)?;
        } else {
            update
                .set((
                    call_tasks::status.eq(status),
                    call_tasks::input_requests.eq(input_requests),
                    call_tasks::input_answers.eq(answers),
                ))
                .execute(conn)?;
        }
        Ok(())
    })
}

/// Takes the answers the work has not consumed yet (as JSON text).
pub(crate) fn take_answers(conn: &mut SqliteConnection, id: &str) -> QueryResult<Option<String>> {
    conn.immediate_transaction(|conn| {
        let answers = call_tasks::table
            .find(id)
            .select(call_tasks::input_answers)
            .first::<String>(conn)
            .optional()?;
        match answers {
            // Write nothing when there is nothing to take: the work polls.
            Some(answers) if answers != "{}" => {
                diesel::update(call_tasks::table.find(id))
                    .set(call_tasks::input_answers.eq("{}"))
                    .execute(conn)?;
                Ok(Some(answers))
            }
            _ => Ok(None),
        }
    })
}

/// Fails and audits every stale task in one immediate transaction; returns their ids.
pub(crate) fn fail_stale(
    conn: &mut SqliteConnection,
    stale_after: Duration,
    ending: &Ending,
) -> QueryResult<Vec<TaskId>> {
    conn.immediate_transaction(|conn| {
        let failed = diesel::sql_query(include_str!("tasks/fail_stale.sql"))
            .bind::<Text, _>(modifier('-', stale_after))
            .bind::<Nullable<Text>, _>(ending.error.as_ref().map(Value::to_string))
            .bind::<Nullable<Text>, _>(&ending.status_message)
            .load::<EndedRow>(conn)?;
        let rows: Vec<NewAuditRow<'_>> = failed.iter().map(|row| row.audit_row(ending)).collect();
        audit::insert_rows(conn, &rows)?;
        Ok(failed
            .iter()
            .map(|row| TaskId::from_stored(row.task_id.clone()))
            .collect())
    })
}

/// Deletes up to `limit` expired tasks; returns their ids.
pub(crate) fn delete_expired(conn: &mut SqliteConnection, limit: u32) -> QueryResult<Vec<TaskId>> {
    diesel::sql_query(include_str!("tasks/delete_expired.sql"))
        .bind::<BigInt, _>(shared::limit(limit))
        .load::<IdRow>(conn)
        .map(ids)
}
