//! The `call_tasks` model on PostgreSQL: the row as read, and one async query
//! function per store operation, each taking the connection. The long statements
//! live in `tasks/*.sql` beside this file.

use diesel::OptionalExtension;
use diesel::sql_types::{Array, BigInt, Bool, Jsonb, Nullable, Text, Timestamptz};
use diesel_async::{AsyncConnection, AsyncPgConnection, RunQueryDsl};
use docket_task::model::TaskRecord;
use docket_task::store::Beat;
use docket_task::{NewTask, StaleTask, StoreError, TaskId, TaskPosition, TaskStatus, TaskTrace};
use serde_json::{Map, Value};
use time::OffsetDateTime;

use crate::columns::PgColumns;
use crate::error::query_error;
use crate::rows::{self, EndedStatusRow, TaskIdRow, task_columns_but_stamp};
use crate::shared::{self, Answered, Ending, InputState};
use crate::statement::statement;

/// The channel cross-replica signals travel on; payloads are `<kind>:<task id>`.
pub(crate) const CHANNEL: &str = "docket_tasks";

type CreatedRow = rows::CreatedRow<PgColumns>;
type CreatedIdRow = rows::CreatedIdRow<PgColumns>;
type TaskNowRow = rows::TaskNowRow<PgColumns>;
type InputRow = rows::InputRow<PgColumns>;
type AnswersRow = rows::AnswersRow<PgColumns>;

/// Inserts a working task; the statement commits on its own, before this returns.
pub(crate) async fn create(
    conn: &mut AsyncPgConnection,
    task: NewTask,
) -> Result<TaskRecord, StoreError> {
    let retention = task.retention.map(shared::millis);
    statement(include_str!("tasks/create.sql"))
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
        .bind::<Nullable<Text>, _>(task.trace_context.as_ref().map(TaskTrace::to_column))
        .get_result::<CreatedRow>(conn)
        .await
        .map_err(query_error)?
        .record(task)
}

/// `SELECT` of tasks as read (stamped with their replica's last beat) with the
/// database's `now()`, `FROM call_tasks AS task`; the caller adds the conditions.
macro_rules! read_tasks {
    () => {
        concat!(
            "SELECT ",
            task_columns_but_stamp!(),
            ", GREATEST(task.heartbeat_at, replica.last_beat_at) AS heartbeat_at, \
               COALESCE(replica.draining, false) AS replica_draining, now() AS now \
               FROM call_tasks AS task LEFT JOIN replicas AS replica ON replica.id = task.replica_id"
        )
    };
}

/// Reads a task with the database's `now()`, in one round trip.
pub(crate) async fn get(
    conn: &mut AsyncPgConnection,
    id: &TaskId,
) -> Result<Option<(TaskRecord, OffsetDateTime)>, StoreError> {
    statement(concat!(read_tasks!(), " WHERE task.task_id = $1"))
        .bind::<Text, _>(id.as_str())
        .get_result::<TaskNowRow>(conn)
        .await
        .optional()
        .map_err(query_error)?
        .map(TaskNowRow::read)
        .transpose()
}

/// Reads the tasks with these ids with the database's `now()`, in one round
/// trip: each id's task (or none), in the order asked, an id asked twice read
/// twice.
pub(crate) async fn get_many(
    conn: &mut AsyncPgConnection,
    ids: &[TaskId],
) -> Vec<Result<Option<(TaskRecord, OffsetDateTime)>, StoreError>> {
    let texts = ids.iter().map(TaskId::as_str).collect::<Vec<_>>();
    let rows = statement(concat!(read_tasks!(), " WHERE task.task_id = ANY($1)"))
        .bind::<Array<Text>, _>(&texts)
        .load::<TaskNowRow>(conn)
        .await;
    let mut rows = match rows {
        Ok(rows) => rows
            .into_iter()
            .map(|row| (row.task_id().to_owned(), row.read()))
            .collect::<Vec<_>>(),
        Err(error) => return for_each(ids, &query_error(error)),
    };
    let mut reads = Vec::with_capacity(ids.len());
    for (at, id) in ids.iter().enumerate() {
        let asked_again = ids[at + 1..].contains(id);
        let found = rows
            .iter()
            .position(|(read, _)| read.as_str() == id.as_str());
        reads.push(match found {
            None => Ok(None),
            Some(found) if asked_again => again(&rows[found].1).map(Some),
            Some(found) => rows.swap_remove(found).1.map(Some),
        });
    }
    reads
}

/// Inserts working tasks in one statement that commits on its own, before this
/// returns: each task as stored, in the order given, or, when any of them
/// could not be inserted, the error (and none of them is).
pub(crate) async fn create_many(
    conn: &mut AsyncPgConnection,
    tasks: Vec<NewTask>,
) -> Result<Vec<Result<TaskRecord, StoreError>>, (StoreError, Vec<NewTask>)> {
    let rows = statement(include_str!("tasks/create_many.sql"))
        .bind::<Array<Text>, _>(column(&tasks, |task| task.id.as_str()))
        .bind::<Array<Text>, _>(column(&tasks, |task| task.tool.as_str()))
        .bind::<Array<Jsonb>, _>(column(&tasks, |task| &task.arguments))
        .bind::<Array<Text>, _>(column(&tasks, |task| task.owner.as_str()))
        .bind::<Array<Nullable<Text>>, _>(column(&tasks, |task| task.extra_follower.as_deref()))
        .bind::<Array<Text>, _>(column(&tasks, |task| task.replica_id.as_str()))
        .bind::<Array<Nullable<Text>>, _>(column(&tasks, |task| task.status_message.as_deref()))
        .bind::<Array<Nullable<BigInt>>, _>(column(&tasks, |task| {
            task.retention.map(shared::millis)
        }))
        .bind::<Array<BigInt>, _>(column(&tasks, |task| {
            shared::poll_interval_column(task.poll_interval_ms)
        }))
        .bind::<Array<Nullable<Text>>, _>(column(&tasks, |task| task.audit.persona.as_deref()))
        .bind::<Array<Nullable<Text>>, _>(column(&tasks, |task| task.audit.connection.as_deref()))
        .bind::<Array<Jsonb>, _>(column(&tasks, |task| &task.audit.arguments))
        .bind::<Array<Nullable<Text>>, _>(column(&tasks, |task| {
            task.trace_context.as_ref().map(TaskTrace::to_column)
        }))
        .load::<CreatedIdRow>(conn)
        .await;
    let mut rows = match rows {
        Ok(rows) => rows,
        Err(error) => return Err((query_error(error), tasks)),
    };
    Ok(tasks
        .into_iter()
        .map(|task| {
            let found = rows
                .iter()
                .position(|row| row.task_id() == task.id.as_str());
            match found {
                Some(found) => rows.swap_remove(found).record(task),
                None => Err(StoreError::Corrupt(
                    "an inserted task was not returned".into(),
                )),
            }
        })
        .collect())
}

/// One column of the tasks, for a statement that takes each column as an array.
fn column<'a, T>(tasks: &'a [NewTask], value: impl Fn(&'a NewTask) -> T) -> Vec<T> {
    tasks.iter().map(value).collect()
}

/// The same failure for each of `asked`.
pub(crate) fn for_each<T, R>(asked: &[T], error: &StoreError) -> Vec<Result<R, StoreError>> {
    asked.iter().map(|_| Err(copy(error))).collect()
}

/// A second caller's copy of a reading.
fn again(
    read: &Result<(TaskRecord, OffsetDateTime), StoreError>,
) -> Result<(TaskRecord, OffsetDateTime), StoreError> {
    match read {
        Ok(pair) => Ok(pair.clone()),
        Err(error) => Err(copy(error)),
    }
}

/// The same failure, for another caller of one statement.
fn copy(error: &StoreError) -> StoreError {
    match error {
        StoreError::Unavailable(message) => StoreError::Unavailable(message.clone()),
        StoreError::Corrupt(message) => StoreError::Corrupt(message.clone()),
        StoreError::Duplicate => StoreError::Duplicate,
        // `StoreError` is non-exhaustive; anything else is an outage.
        other => StoreError::Unavailable(other.to_string()),
    }
}

/// A page of the tasks `subject` follows that have not expired, newest first,
/// strictly after `after`, with the database's `now()`.
pub(crate) async fn list_followed(
    conn: &mut AsyncPgConnection,
    subject: &str,
    after: Option<&TaskPosition>,
    limit: u32,
) -> Result<(Vec<TaskRecord>, OffsetDateTime), StoreError> {
    let rows = statement(concat!(
        read_tasks!(),
        " WHERE (task.owner = $1 OR task.extra_follower = $1) \
            AND (task.expires_at IS NULL OR task.expires_at > now()) \
            AND ($2::timestamptz IS NULL OR (task.created_at, task.task_id) < ($2, $3)) \
          ORDER BY task.created_at DESC, task.task_id DESC LIMIT $4"
    ))
    .bind::<Text, _>(subject)
    .bind::<Nullable<Timestamptz>, _>(after.map(|position| position.created_at))
    .bind::<Nullable<Text>, _>(after.map(|position| position.id.as_str()))
    .bind::<BigInt, _>(shared::limit(limit))
    .load::<TaskNowRow>(conn)
    .await
    .map_err(query_error)?;
    rows::page_with_clock(rows.into_iter().map(TaskNowRow::read))
}

/// Ends a running task and writes its audit row, or does nothing to an ended one.
pub(crate) async fn finish(
    conn: &mut AsyncPgConnection,
    id: &TaskId,
    ending: Ending,
) -> Result<Option<TaskStatus>, StoreError> {
    let cancel = Ending::cancelled();
    let ended = statement(include_str!("tasks/finish.sql"))
        .bind::<Text, _>(id.as_str())
        .bind::<Text, _>(ending.status)
        .bind::<Nullable<Jsonb>, _>(&ending.result)
        .bind::<Nullable<Jsonb>, _>(&ending.error)
        .bind::<Nullable<Text>, _>(&ending.status_message)
        .bind::<Bool, _>(ending.success)
        .bind::<Text, _>(&ending.outcome)
        .bind::<Nullable<Text>, _>(&ending.error_message)
        .bind::<Nullable<Text>, _>(&cancel.status_message)
        .bind::<Text, _>(&cancel.outcome)
        .bind::<Nullable<Text>, _>(&cancel.error_message)
        .bind::<Nullable<Text>, _>(&ending.call_id)
        .bind::<Nullable<Text>, _>(&ending.engine_user)
        .bind::<Jsonb, _>(shared::upstream_ids_json(&ending.upstream_ids))
        .get_result::<EndedStatusRow>(conn)
        .await
        .optional()
        .map_err(query_error)?;
    EndedStatusRow::read(ended)
}

/// Records a cancel request and notifies the replica running the task.
pub(crate) async fn request_cancel(
    conn: &mut AsyncPgConnection,
    id: &TaskId,
) -> Result<(), StoreError> {
    statement(include_str!("tasks/request_cancel.sql"))
        .bind::<Text, _>(id.as_str())
        .execute(conn)
        .await
        .map_err(query_error)?;
    Ok(())
}

/// One beat of the replica in one statement: its stamp, the changed status
/// messages; returns its running tasks with a cancel pending.
pub(crate) async fn heartbeat(
    conn: &mut AsyncPgConnection,
    replica_id: &str,
    beats: &[Beat],
) -> Result<Vec<TaskId>, StoreError> {
    let (task_ids, messages): (Vec<&str>, Vec<Option<&str>>) = beats
        .iter()
        .map(|beat| (beat.id.as_str(), beat.status_message.as_deref()))
        .unzip();
    let rows = statement(include_str!("tasks/heartbeat.sql"))
        .bind::<Text, _>(replica_id)
        .bind::<Array<Text>, _>(task_ids)
        .bind::<Array<Nullable<Text>>, _>(messages)
        .load::<TaskIdRow>(conn)
        .await
        .map_err(query_error)?;
    Ok(rows::task_ids(rows))
}

/// Marks the replica draining (its row made if it never beat).
pub(crate) async fn mark_draining(
    conn: &mut AsyncPgConnection,
    replica_id: &str,
) -> Result<(), StoreError> {
    statement(
        "INSERT INTO replicas (id, draining) VALUES ($1, true) \
         ON CONFLICT (id) DO UPDATE SET draining = true",
    )
    .bind::<Text, _>(replica_id)
    .execute(conn)
    .await
    .map_err(query_error)?;
    Ok(())
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
    let row = statement(
        "SELECT status, input_requests, input_answers, requested_input_keys \
           FROM call_tasks WHERE task_id = $1 FOR UPDATE",
    )
    .bind::<Text, _>(id)
    .get_result::<InputRow>(conn)
    .await
    .optional()?;
    row.map(InputState::try_from)
        .transpose()
        .map_err(TxError::Store)
}

/// Sends `payload` on [`CHANNEL`] when the transaction commits.
async fn notify(conn: &mut AsyncPgConnection, payload: &str) -> Result<(), TxError> {
    statement("SELECT pg_notify($1, $2)")
        .bind::<Text, _>(CHANNEL)
        .bind::<Text, _>(payload)
        .execute(conn)
        .await?;
    Ok(())
}

/// Adds input requests under the row lock and signals `changed:<id>`; false if
/// the task is gone or ended.
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
            statement(
                "UPDATE call_tasks SET status = $2, input_requests = $3, \
                        requested_input_keys = $4, last_updated_at = now() \
                  WHERE task_id = $1",
            )
            .bind::<Text, _>(&id)
            .bind::<Text, _>(state.status.as_str())
            .bind::<Nullable<Jsonb>, _>(&state.input_requests)
            .bind::<Jsonb, _>(state.requested_keys_json())
            .execute(conn)
            .await?;
            // Followers on every replica read it again when this commits.
            notify(conn, &format!("changed:{id}")).await?;
            Ok::<_, TxError>(true)
        })
        .await?;
    Ok(required)
}

/// Applies answers under the row lock and, when one landed, notifies the replica
/// running the task (`input:<id>`) and every follower (`changed:<id>`) in the same
/// transaction.
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
        // Only an answered key stamps the task and wakes the replica running it
        // (in this transaction, so the signal goes out at commit).
        let stamped = answered == Answered::Some;
        statement(
            "UPDATE call_tasks SET status = $2, input_requests = $3, input_answers = $4, \
                    last_updated_at = CASE WHEN $5 THEN now() ELSE last_updated_at END \
              WHERE task_id = $1",
        )
        .bind::<Text, _>(&id)
        .bind::<Text, _>(state.status.as_str())
        .bind::<Nullable<Jsonb>, _>(&state.input_requests)
        .bind::<Jsonb, _>(&answers)
        .bind::<Bool, _>(stamped)
        .execute(conn)
        .await?;
        if stamped {
            notify(conn, &format!("input:{id}")).await?;
            // What the task asks for changed (and it may be working again).
            notify(conn, &format!("changed:{id}")).await?;
        }
        Ok::<_, TxError>(())
    })
    .await?;
    Ok(())
}

/// Takes the answers the work has not consumed yet.
pub(crate) async fn take_answers(
    conn: &mut AsyncPgConnection,
    id: &TaskId,
) -> Result<Map<String, Value>, StoreError> {
    let taken = statement(include_str!("tasks/take_answers.sql"))
        .bind::<Text, _>(id.as_str())
        .get_result::<AnswersRow>(conn)
        .await
        .optional()
        .map_err(query_error)?;
    taken.map_or_else(|| Ok(Map::new()), AnswersRow::answers)
}

/// Fails and audits every stale task in one statement; returns them.
pub(crate) async fn fail_stale(
    conn: &mut AsyncPgConnection,
    stale_after_ms: i64,
    ending: Ending,
    shut_down: Ending,
) -> Result<Vec<StaleTask>, StoreError> {
    let cancel = Ending::cancelled();
    let rows = statement(include_str!("tasks/fail_stale.sql"))
        .bind::<BigInt, _>(stale_after_ms)
        .bind::<Nullable<Jsonb>, _>(&ending.error)
        .bind::<Nullable<Text>, _>(&ending.status_message)
        .bind::<Bool, _>(ending.success)
        .bind::<Text, _>(&ending.outcome)
        .bind::<Nullable<Text>, _>(&cancel.status_message)
        .bind::<Text, _>(&cancel.outcome)
        .bind::<Nullable<Text>, _>(&cancel.error_message)
        .bind::<Nullable<Jsonb>, _>(&shut_down.error)
        .bind::<Nullable<Text>, _>(&shut_down.status_message)
        .load::<rows::StaleTaskRow>(conn)
        .await
        .map_err(query_error)?;
    Ok(rows
        .into_iter()
        .map(rows::StaleTaskRow::into_stale)
        .collect())
}

/// Deletes up to `limit` expired tasks; returns their ids.
pub(crate) async fn delete_expired(
    conn: &mut AsyncPgConnection,
    limit: u32,
) -> Result<Vec<TaskId>, StoreError> {
    let rows = statement(include_str!("tasks/delete_expired.sql"))
        .bind::<BigInt, _>(shared::limit(limit))
        .load::<TaskIdRow>(conn)
        .await
        .map_err(query_error)?;
    Ok(rows::task_ids(rows))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use docket_task::{Outcome, TaskStatus};

    use super::*;
    use crate::pg::connection::establish;
    use crate::test_db::{PostgresServer, TestDatabase};

    /// One statement this connection prepared at the protocol level.
    #[derive(diesel::QueryableByName)]
    struct Prepared {
        #[diesel(sql_type = Text)]
        statement: String,
        #[diesel(sql_type = BigInt)]
        runs: i64,
    }

    /// What `conn`'s backend holds prepared, each with how often it ran.
    async fn prepared(conn: &mut AsyncPgConnection) -> BTreeMap<String, i64> {
        statement(
            "SELECT statement, generic_plans + custom_plans AS runs \
               FROM pg_prepared_statements WHERE NOT from_sql",
        )
        .load::<Prepared>(conn)
        .await
        .expect("read the prepared statements")
        .into_iter()
        .map(|prepared| (prepared.statement, prepared.runs))
        .collect()
    }

    /// create, get, a beat and finish (with its audit row), as a task lives.
    async fn round(conn: &mut AsyncPgConnection) {
        let task = docket_task::testing::new_task("probe");
        let id = task.id.clone();
        let replica = task.replica_id.clone();
        let record = create(conn, task).await.expect("create");
        assert_eq!(record.status, TaskStatus::Working);
        let (read, _now) = get(conn, &id).await.expect("get").expect("the task");
        assert_eq!(read.id, id);
        let beat = Beat {
            id: id.clone(),
            status_message: Some("half way".into()),
        };
        heartbeat(conn, &replica, &[beat]).await.expect("beat");
        let ending =
            Ending::new(Outcome::Completed(serde_json::json!({"ok": true}))).expect("ending");
        assert!(finish(conn, &id, ending).await.expect("finish").is_some());
    }

    /// The task path's statements are prepared by the backend once per connection
    /// and only bound and run after that: a second round prepares nothing new, and
    /// each statement of the round ran twice on its one preparation.
    #[tokio::test]
    async fn task_statements_are_prepared_once_per_connection_on_postgres() {
        let server = PostgresServer::from_lookup(|name| std::env::var(name).ok());
        let Some(database) = TestDatabase::postgres(&server).await else {
            return;
        };
        let mut conn = establish(database.url().to_owned()).await.expect("connect");
        round(&mut conn).await;
        let first = prepared(&mut conn).await;
        round(&mut conn).await;
        let second = prepared(&mut conn).await;
        assert_eq!(
            first.keys().collect::<Vec<_>>(),
            second.keys().collect::<Vec<_>>(),
            "the second round prepared nothing new"
        );
        let task_statements: Vec<_> = second
            .iter()
            .filter(|(sql, _)| !sql.contains("pg_prepared_statements"))
            .collect();
        assert!(
            task_statements.len() >= 4,
            "create, get, the beat and finish are prepared: {task_statements:?}"
        );
        for (sql, runs) in task_statements {
            assert_eq!(*runs, 2, "ran twice on one preparation: {sql}");
        }
    }
}
