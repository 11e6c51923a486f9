//! The `call_tasks` model on SQLite: the row as read, and one query function per
//! store operation. They are synchronous diesel, run on a blocking thread by
//! [`SqliteStore`](super::SqliteStore), so a transaction runs to its end even if
//! the caller stops waiting. The long statements live in `tasks/*.sql`.

use std::time::Duration;

use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Nullable, Text};
use docket_task::store::Beat;
use docket_task::{NewTask, StaleTask, StoreError, TaskId, TaskTrace};
use serde_json::{Map, Value};

use super::audit::{self, NewAuditRow};
use super::sql::{modifier, now};
use crate::columns::TextColumns;
use crate::rows::{self, TaskIdRow, task_columns_but_stamp};
use crate::shared::{self, Answered, Ending, InputState};
use crate::statement::statement;

/// What a create reads back.
pub(crate) type CreatedRow = rows::CreatedRow<TextColumns>;
/// A task as read with the database clock.
pub(crate) type TaskNowRow = rows::TaskNowRow<TextColumns>;
type InputRow = rows::InputRow<TextColumns>;
/// The answers a task holds, as read.
pub(crate) type AnswersRow = rows::AnswersRow<TextColumns>;

/// A stored value that could not be read, as a diesel error, so it can abort a
/// transaction; [`crate::error::query_error`] turns it back into
/// [`StoreError::Corrupt`].
fn corrupt(error: StoreError) -> diesel::result::Error {
    diesel::result::Error::DeserializationError(Box::new(error))
}

/// Inserts a working task (autocommit: committed when this returns).
pub(crate) fn create(conn: &mut SqliteConnection, task: &NewTask) -> QueryResult<CreatedRow> {
    statement(include_str!("tasks/create.sql"))
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
        .bind::<Nullable<Text>, _>(task.trace_context.as_ref().map(TaskTrace::to_column))
        .get_result(conn)
}

/// `SELECT` of tasks as read (stamped with their replica's last beat) with the
/// database clock, `FROM call_tasks`; the caller adds the conditions.
macro_rules! read_tasks {
    () => {
        concat!(
            "SELECT ",
            task_columns_but_stamp!(),
            ", max(heartbeat_at, COALESCE(\
                   (SELECT last_beat_at FROM replicas WHERE replicas.id = call_tasks.replica_id), \
                   heartbeat_at)) AS heartbeat_at, \
               COALESCE((SELECT draining FROM replicas WHERE replicas.id = call_tasks.replica_id), 0) \
                   AS replica_draining, ",
            now!(),
            " AS now FROM call_tasks"
        )
    };
}

/// Reads a task with the database clock's current time.
pub(crate) fn get(conn: &mut SqliteConnection, id: &str) -> QueryResult<Option<TaskNowRow>> {
    statement(concat!(read_tasks!(), " WHERE task_id = ?1"))
        .bind::<Text, _>(id)
        .get_result(conn)
        .optional()
}

/// A page of the tasks `subject` follows that have not expired, newest first,
/// strictly after `after` (its time in the stored form, and its id), with the
/// database clock.
pub(crate) fn list_followed(
    conn: &mut SqliteConnection,
    subject: &str,
    after: Option<(&str, &str)>,
    limit: u32,
) -> QueryResult<Vec<TaskNowRow>> {
    let (created_at, id) = after.unzip();
    statement(concat!(
        read_tasks!(),
        " WHERE (owner = ?1 OR extra_follower = ?1) \
            AND (expires_at IS NULL OR expires_at > ",
        now!(),
        ") AND (?2 IS NULL OR created_at < ?2 OR (created_at = ?2 AND task_id < ?3)) \
          ORDER BY created_at DESC, task_id DESC LIMIT ?4"
    ))
    .bind::<Text, _>(subject)
    .bind::<Nullable<Text>, _>(created_at)
    .bind::<Nullable<Text>, _>(id)
    .bind::<BigInt, _>(shared::limit(limit))
    .load(conn)
}

/// What a task's audit row needs, as returned by the statement that ended it.
#[derive(QueryableByName)]
struct EndedRow {
    #[diesel(sql_type = Text)]
    task_id: String,
    #[diesel(sql_type = Text)]
    status: String,
    /// A cancel recorded first made it `cancelled` in place of its own ending.
    #[diesel(sql_type = Bool)]
    overruled: bool,
    /// The stale sweep found its replica draining: it ended shut down.
    #[diesel(sql_type = Bool)]
    draining: bool,
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
    /// The trace the task keeps (`TaskTrace::to_column`).
    #[diesel(sql_type = Nullable<Text>)]
    trace_context: Option<String>,
}

impl EndedRow {
    /// The task's audit row: its outcome as `kept` (the ending recorded), its
    /// attribution as `reported` (the ending the work reported, which a cancel
    /// recorded first may have overruled), the task id as the call id when the
    /// result names none.
    fn audit_row<'a>(&'a self, kept: &'a Ending, reported: &'a Ending) -> NewAuditRow<'a> {
        NewAuditRow {
            tool: &self.tool,
            subject: &self.owner,
            persona: self.audit_persona.as_deref(),
            connection: self.audit_connection.as_deref(),
            arguments: &self.audit_arguments,
            success: kept.success,
            outcome: &kept.outcome,
            error_message: kept.error_message.as_deref(),
            duration_ms: self.duration_ms,
            call_id: Some(reported.call_id.as_deref().unwrap_or(&self.task_id)),
            engine_user: reported.engine_user.as_deref(),
            upstream_ids: &reported.upstream_ids,
        }
    }
}

/// Ends a running task and writes its audit row in one immediate transaction, or
/// does nothing to an ended one; the status it ended the task in.
pub(crate) fn finish(
    conn: &mut SqliteConnection,
    id: &str,
    ending: &Ending,
) -> QueryResult<Option<String>> {
    let cancel = Ending::cancelled();
    conn.immediate_transaction(|conn| {
        let ended = statement(include_str!("tasks/finish.sql"))
            .bind::<Text, _>(id)
            .bind::<Text, _>(ending.status)
            .bind::<Nullable<Text>, _>(ending.result.as_ref().map(Value::to_string))
            .bind::<Nullable<Text>, _>(ending.error.as_ref().map(Value::to_string))
            .bind::<Nullable<Text>, _>(&ending.status_message)
            .bind::<Nullable<Text>, _>(&cancel.status_message)
            .get_result::<EndedRow>(conn)
            .optional()?;
        let Some(ended) = ended else {
            return Ok(None);
        };
        let kept = if ended.overruled { &cancel } else { ending };
        audit::insert_rows(conn, &[ended.audit_row(kept, ending)])?;
        Ok(Some(ended.status))
    })
}

/// Records a cancel request on a running task (the first request's time is kept).
pub(crate) fn request_cancel(conn: &mut SqliteConnection, id: &str) -> QueryResult<()> {
    statement(concat!(
        "UPDATE call_tasks SET cancel_requested_at = COALESCE(cancel_requested_at, ",
        now!(),
        ") WHERE task_id = ?1 AND status IN ('working', 'input_required')"
    ))
    .bind::<Text, _>(id)
    .execute(conn)
    .map(drop)
}

/// One beat of the replica, in one immediate transaction: its stamp, the
/// changed status messages; returns its running tasks with a cancel pending.
pub(crate) fn heartbeat(
    conn: &mut SqliteConnection,
    replica_id: &str,
    beats: &[Beat],
) -> QueryResult<Vec<TaskId>> {
    let messages = Value::Array(
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
    conn.immediate_transaction(|conn| {
        statement(concat!(
            "INSERT INTO replicas (id, started_at, last_beat_at) VALUES (?1, ",
            now!(),
            ", ",
            now!(),
            ") ON CONFLICT (id) DO UPDATE SET last_beat_at = excluded.last_beat_at"
        ))
        .bind::<Text, _>(replica_id)
        .execute(conn)?;
        if !beats.is_empty() {
            statement(include_str!("tasks/heartbeat.sql"))
                .bind::<Text, _>(replica_id)
                .bind::<Text, _>(messages.to_string())
                .execute(conn)?;
        }
        statement(
            "SELECT task_id FROM call_tasks \
              WHERE replica_id = ?1 AND cancel_requested_at IS NOT NULL \
                AND status IN ('working', 'input_required')",
        )
        .bind::<Text, _>(replica_id)
        .load::<TaskIdRow>(conn)
        .map(rows::task_ids)
    })
}

/// Marks the replica draining (its row made if it never beat).
pub(crate) fn mark_draining(conn: &mut SqliteConnection, replica_id: &str) -> QueryResult<()> {
    statement(
        "INSERT INTO replicas (id, draining) VALUES (?1, 1) \
         ON CONFLICT (id) DO UPDATE SET draining = 1",
    )
    .bind::<Text, _>(replica_id)
    .execute(conn)
    .map(drop)
}

/// Reads a task's input state (inside an immediate transaction: no other writer
/// can change it before this one writes).
fn input_state(conn: &mut SqliteConnection, id: &str) -> QueryResult<Option<InputState>> {
    let row = statement(
        "SELECT status, input_requests, input_answers, requested_input_keys \
           FROM call_tasks WHERE task_id = ?1",
    )
    .bind::<Text, _>(id)
    .get_result::<InputRow>(conn)
    .optional()?;
    row.map(InputState::try_from).transpose().map_err(corrupt)
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
        statement(concat!(
            "UPDATE call_tasks SET status = ?2, input_requests = ?3, requested_input_keys = ?4, \
                    last_updated_at = ",
            now!(),
            " WHERE task_id = ?1"
        ))
        .bind::<Text, _>(id)
        .bind::<Text, _>(state.status.as_str())
        .bind::<Nullable<Text>, _>(state.input_requests.as_ref().map(Value::to_string))
        .bind::<Text, _>(state.requested_keys_json().to_string())
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
        // Only an answered key stamps the task.
        statement(concat!(
            "UPDATE call_tasks SET status = ?2, input_requests = ?3, input_answers = ?4, \
                    last_updated_at = CASE WHEN ?5 THEN ",
            now!(),
            " ELSE last_updated_at END WHERE task_id = ?1"
        ))
        .bind::<Text, _>(id)
        .bind::<Text, _>(status)
        .bind::<Nullable<Text>, _>(input_requests)
        .bind::<Text, _>(answers)
        .bind::<Bool, _>(answered == Answered::Some)
        .execute(conn)?;
        Ok(())
    })
}

/// Takes the answers the work has not consumed yet (as JSON text).
pub(crate) fn take_answers(
    conn: &mut SqliteConnection,
    id: &str,
) -> QueryResult<Option<AnswersRow>> {
    conn.immediate_transaction(|conn| {
        let answers = statement("SELECT input_answers FROM call_tasks WHERE task_id = ?1")
            .bind::<Text, _>(id)
            .get_result::<AnswersRow>(conn)
            .optional()?;
        match answers {
            // Write nothing when there is nothing to take: the work polls.
            Some(answers) if answers.input_answers != "{}" => {
                statement("UPDATE call_tasks SET input_answers = '{}' WHERE task_id = ?1")
                    .bind::<Text, _>(id)
                    .execute(conn)?;
                Ok(Some(answers))
            }
            _ => Ok(None),
        }
    })
}

/// Fails and audits every stale task in one immediate transaction; returns them.
pub(crate) fn fail_stale(
    conn: &mut SqliteConnection,
    stale_after: Duration,
    ending: &Ending,
    shut_down: &Ending,
) -> QueryResult<Vec<StaleTask>> {
    let cancel = Ending::cancelled();
    conn.immediate_transaction(|conn| {
        // First, as PostgreSQL's one statement sees it: a replica whose tasks
        // this sweep fails is forgotten by the next one.
        statement(include_str!("tasks/forget_replicas.sql"))
            .bind::<Text, _>(modifier('-', stale_after))
            .execute(conn)?;
        let failed = statement(include_str!("tasks/fail_stale.sql"))
            .bind::<Text, _>(modifier('-', stale_after))
            .bind::<Nullable<Text>, _>(ending.error.as_ref().map(Value::to_string))
            .bind::<Nullable<Text>, _>(&ending.status_message)
            .bind::<Nullable<Text>, _>(&cancel.status_message)
            .bind::<Nullable<Text>, _>(shut_down.error.as_ref().map(Value::to_string))
            .bind::<Nullable<Text>, _>(&shut_down.status_message)
            .load::<EndedRow>(conn)?;
        let rows: Vec<NewAuditRow<'_>> = failed
            .iter()
            .map(|row| {
                let reported = if row.draining { shut_down } else { ending };
                let kept = if row.overruled { &cancel } else { reported };
                // The sweep's endings carry no attribution: the call is the task.
                row.audit_row(kept, reported)
            })
            .collect();
        audit::insert_rows(conn, &rows)?;
        Ok(failed
            .into_iter()
            .map(|row| StaleTask {
                trace: row
                    .trace_context
                    .as_deref()
                    .and_then(TaskTrace::from_column),
                id: TaskId::from_stored(row.task_id),
            })
            .collect())
    })
}

/// Deletes up to `limit` expired tasks; returns their ids.
pub(crate) fn delete_expired(conn: &mut SqliteConnection, limit: u32) -> QueryResult<Vec<TaskId>> {
    statement(include_str!("tasks/delete_expired.sql"))
        .bind::<BigInt, _>(shared::limit(limit))
        .load::<TaskIdRow>(conn)
        .map(rows::task_ids)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};

    use diesel::connection::InstrumentationEvent;
    use diesel_migrations::MigrationHarness;
    use docket_task::model::{Outcome, TaskStatus};
    use docket_task::store::AuditContext;

    use super::*;
    use crate::sqlite::migrations::MIGRATIONS;

    /// What a connection's instrumentation saw: the statements it prepared
    /// and kept, and the text of every statement it ran.
    #[derive(Default)]
    struct Seen {
        cached: BTreeSet<String>,
        ran: Vec<String>,
    }

    fn new_task() -> NewTask {
        NewTask {
            id: TaskId::generate().expect("an id from the OS RNG"),
            tool: "probe".into(),
            arguments: serde_json::json!({"n": 1}),
            owner: "alice".into(),
            extra_follower: None,
            replica_id: "r1".into(),
            status_message: Some("started".into()),
            retention: Some(Duration::from_secs(60)),
            poll_interval_ms: 500,
            audit: AuditContext::default(),
            trace_context: None,
        }
    }

    /// The task path's statements (create, get, heartbeat, finish and its audit
    /// row) are prepared on their first use and only bound and run after that:
    /// every statement of a second round was cached in the first.
    #[test]
    fn task_statements_are_prepared_once_per_connection() {
        let mut conn = SqliteConnection::establish(":memory:").expect("open");
        conn.run_pending_migrations(MIGRATIONS).expect("migrate");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let sink = Arc::clone(&seen);
        conn.set_instrumentation(move |event: InstrumentationEvent<'_>| {
            let mut seen = sink.lock().expect("lock");
            match event {
                InstrumentationEvent::CacheQuery { sql, .. } => {
                    seen.cached.insert(sql.to_owned());
                }
                InstrumentationEvent::StartQuery { query, .. } => {
                    // The debug form is the text, then `-- binds: …`.
                    let text = query.to_string();
                    let sql = text.split(" -- binds:").next().unwrap_or_default();
                    seen.ran.push(sql.to_owned());
                }
                _ => {}
            }
        });
        let ending =
            Ending::new(Outcome::Completed(serde_json::json!({"ok": true}))).expect("ending");
        let round = |conn: &mut SqliteConnection| {
            let task = new_task();
            let row = create(conn, &task).expect("create");
            let record = row.record(task.clone()).expect("read");
            assert_eq!(record.status, TaskStatus::Working);
            let (read, _now) = get(conn, task.id.as_str())
                .expect("get")
                .expect("the task")
                .read()
                .expect("read");
            assert_eq!(read.id, task.id);
            let beat = Beat {
                id: task.id.clone(),
                status_message: Some("half way".into()),
            };
            heartbeat(conn, "r1", &[beat]).expect("beat");
            assert!(
                finish(conn, task.id.as_str(), &ending)
                    .expect("finish")
                    .is_some()
            );
        };
        round(&mut conn);
        let first = {
            let mut seen = seen.lock().expect("lock");
            seen.ran.clear();
            seen.cached.clone()
        };
        assert!(
            first.len() >= 5,
            "create, get, heartbeat, finish and the audit insert are cached: {first:?}"
        );
        round(&mut conn);
        let seen = seen.lock().expect("lock");
        assert_eq!(seen.cached, first, "the second round prepared nothing new");
        let ran: Vec<&String> = seen
            .ran
            .iter()
            .filter(|sql| !sql.starts_with("BEGIN") && !sql.starts_with("COMMIT"))
            .collect();
        assert!(!ran.is_empty());
        for sql in ran {
            assert!(first.contains(sql), "ran without the cache: {sql}");
        }
    }

    /// For contrast: diesel's `sql_query` is never cached, which is why no
    /// statement in this crate goes through it.
    #[test]
    fn sql_query_is_never_cached() {
        let mut conn = SqliteConnection::establish(":memory:").expect("open");
        let cached = Arc::new(Mutex::new(0_usize));
        let sink = Arc::clone(&cached);
        conn.set_instrumentation(move |event: InstrumentationEvent<'_>| {
            if let InstrumentationEvent::CacheQuery { .. } = event {
                *sink.lock().expect("lock") += 1;
            }
        });
        diesel::sql_query("SELECT 1")
            .execute(&mut conn)
            .expect("run");
        assert_eq!(*cached.lock().expect("lock"), 0);
        statement("SELECT 1").execute(&mut conn).expect("run");
        assert_eq!(*cached.lock().expect("lock"), 1);
    }
}
