//! The behaviour every [`TaskStore`] must have, as test functions any backend can
//! run. One test source for every backend, so backends cannot
//! drift apart. Use [`store_suite!`](crate::store_suite) to generate one
//! `#[tokio::test]` per property.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::id::TaskId;
use crate::model::{Caller, Outcome, TaskError, TaskStatus};
use crate::store::{AuditContext, AuditEntry, Beat, NewTask, TaskStore};
use crate::trace::TaskTrace;
use crate::upstream::{
    MAX_ENGINE_USER_BYTES, MAX_UPSTREAM_ID_BYTES, MAX_UPSTREAM_IDS, UPSTREAM_META_KEY, Upstream,
};

/// A new task for `tool` owned by `apikey:alice` on replica `a`.
pub fn new_task(tool: &str) -> NewTask {
    NewTask {
        id: TaskId::generate().expect("OS random source"),
        tool: tool.to_owned(),
        arguments: json!({"sql": "select 1", "format": "csv"}),
        owner: "apikey:alice".into(),
        extra_follower: None,
        replica_id: "a".into(),
        status_message: Some("starting".into()),
        retention: Some(Duration::from_secs(7 * 86_400)),
        poll_interval_ms: 1000,
        audit: AuditContext {
            persona: Some("analyst".into()),
            connection: Some("warehouse".into()),
            arguments: json!({"sql": "select 1"}),
        },
        trace_context: TaskTrace::new(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"),
        ),
    }
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// A created task is readable at once with every field it was created with.
pub async fn created_task_is_readable(store: Arc<dyn TaskStore>) {
    let task = new_task("created_task_is_readable");
    let created = store.create(task.clone()).await.expect("create");
    let (read, now) = store.get(&task.id).await.expect("get").expect("present");
    assert_eq!(read, created);
    assert_eq!(read.status, TaskStatus::Working);
    assert_eq!(read.tool, task.tool);
    assert_eq!(read.arguments, task.arguments);
    assert_eq!(read.owner, "apikey:alice");
    assert_eq!(read.status_message.as_deref(), Some("starting"));
    assert_eq!(read.ttl_ms(), Some(7 * 86_400_000));
    assert!(now >= read.created_at);
    assert!(read.may_follow(&Caller {
        subject: "apikey:alice".into(),
        is_admin: false
    }));
    assert!(
        store
            .get(&TaskId::from_stored("no-such-task".into()))
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store.create(task).await.is_err(),
        "a duplicate id is refused"
    );
}

/// A task keeps the trace of the request that created it (both header values),
/// and a task created without one reads without one, so whoever executes,
/// cancels or ends it on any replica continues that trace.
pub async fn a_task_keeps_the_trace_it_was_created_in(store: Arc<dyn TaskStore>) {
    let traced = new_task("a_task_keeps_the_trace_it_was_created_in");
    let mut untraced = new_task("a_task_keeps_the_trace_it_was_created_in");
    untraced.trace_context = None;
    let mut parent_only = new_task("a_task_keeps_the_trace_it_was_created_in");
    parent_only.trace_context = TaskTrace::new(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
        None,
    );
    for task in [traced, untraced, parent_only] {
        let created = store.create(task.clone()).await.expect("create");
        assert_eq!(created.trace_context, task.trace_context);
        let (read, _) = store.get(&task.id).await.expect("get").expect("present");
        assert_eq!(read.trace_context, task.trace_context);
        store
            .finish(&task.id, Outcome::Cancelled)
            .await
            .expect("finish");
        let (ended, _) = store.get(&task.id).await.expect("get").expect("present");
        assert_eq!(
            ended.trace_context, task.trace_context,
            "an ending keeps it"
        );
    }
}

/// The first terminal transition wins; later ones change nothing.
pub async fn finishing_is_compare_and_set(store: Arc<dyn TaskStore>) {
    let tool = "finishing_is_compare_and_set";
    let task = new_task(tool);
    store.create(task.clone()).await.expect("create");
    let result = json!({"content": [{"type": "text", "text": "done"}]});
    assert_eq!(
        store
            .finish(&task.id, Outcome::Completed(result.clone()))
            .await
            .expect("finish"),
        Some(TaskStatus::Completed)
    );
    assert_eq!(
        store
            .finish(&task.id, Outcome::Cancelled)
            .await
            .expect("finish"),
        None
    );
    assert_eq!(
        store
            .finish(&task.id, Outcome::Failed(TaskError::internal("late")))
            .await
            .expect("finish"),
        None
    );
    let (read, _) = store.get(&task.id).await.expect("get").expect("present");
    assert_eq!(read.status, TaskStatus::Completed);
    assert_eq!(read.result, Some(result));
    assert_eq!(read.error, None);
    let audit = store.audit_for_tool(tool, 10).await.expect("audit");
    assert_eq!(audit.len(), 1, "exactly one audit row");
    assert_eq!(audit[0].outcome, "completed");
    assert!(audit[0].success);
    assert_eq!(audit[0].subject, "apikey:alice");
    assert_eq!(audit[0].context.connection.as_deref(), Some("warehouse"));
    assert_eq!(
        audit[0].call_id.as_deref(),
        Some(task.id.as_str()),
        "a task's call id is its task id"
    );
    assert_eq!(
        (audit[0].engine_user.as_deref(), audit[0].upstream_ids.len()),
        (None, 0)
    );
}

/// A task result whose `_meta` carries [`UPSTREAM_META_KEY`].
fn result_naming(upstream: Value, is_error: bool) -> Value {
    json!({
        "content": [{"type": "text", "text": "412 000 rows"}],
        "isError": is_error,
        "_meta": {UPSTREAM_META_KEY: upstream, "example.org/other": true}
    })
}

/// Ends a new task of `tool` with `outcome` (after a cancel, if `cancel_first`)
/// and returns its id and its one audit row.
async fn audited_ending(
    store: &Arc<dyn TaskStore>,
    tool: &str,
    outcome: Outcome,
    cancel_first: bool,
) -> (TaskId, AuditEntry) {
    let task = new_task(tool);
    store.create(task.clone()).await.expect("create");
    if cancel_first {
        store.request_cancel(&task.id).await.expect("cancel");
    }
    assert!(
        store
            .finish(&task.id, outcome)
            .await
            .expect("finish")
            .is_some()
    );
    let mut audit = store.audit_for_tool(tool, 10).await.expect("audit");
    assert_eq!(audit.len(), 1, "{tool}: {audit:?}");
    (task.id, audit.remove(0))
}

/// A task's audit row names who it ran as upstream and the queries it caused, as
/// its result's `_meta` says ([`Upstream::from_result`]), with the task id as the
/// call id unless the result names one; a malformed attribution is ignored, more
/// than [`MAX_UPSTREAM_IDS`] ids keep the first ones, an ending without a result
/// names only the task, and a cancel that overrules an ending keeps the
/// ending's attribution.
pub async fn task_endings_record_their_upstream_attribution(store: Arc<dyn TaskStore>) {
    let tool = "task_endings_record_their_upstream_attribution";
    let named = Upstream {
        call_id: None,
        engine_user: Some("alice@example.com".into()),
        query_ids: vec![
            "20261210_101500_00001_abcde".into(),
            "20261210_101501_00002_abcde".into(),
        ],
    };
    let (id, row) = audited_ending(
        &store,
        &format!("{tool}/completed"),
        Outcome::Completed(result_naming(named.to_meta_value(), false)),
        false,
    )
    .await;
    assert_eq!(row.outcome, "completed");
    assert_eq!(row.call_id.as_deref(), Some(id.as_str()));
    assert_eq!(row.engine_user.as_deref(), Some("alice@example.com"));
    assert_eq!(row.upstream_ids, named.query_ids);

    let own_call = Upstream {
        call_id: Some("call-0001".into()),
        ..named.clone()
    };
    let (_, row) = audited_ending(
        &store,
        &format!("{tool}/tool_error"),
        Outcome::Completed(result_naming(own_call.to_meta_value(), true)),
        false,
    )
    .await;
    assert_eq!(row.outcome, "tool_error");
    assert_eq!(row.call_id.as_deref(), Some("call-0001"));
    assert_eq!(row.engine_user.as_deref(), Some("alice@example.com"));
    assert_eq!(row.upstream_ids, named.query_ids);

    for (case, malformed) in [
        ("not_an_object", json!("alice@example.com")),
        (
            "wrong_types",
            json!({"call_id": 1, "engine_user": ["alice"], "query_ids": "20261210_101500_00001_abcde"}),
        ),
        (
            "too_long",
            json!({
                "engine_user": "a".repeat(MAX_ENGINE_USER_BYTES + 1),
                "query_ids": ["q".repeat(MAX_UPSTREAM_ID_BYTES + 1)]
            }),
        ),
    ] {
        let (id, row) = audited_ending(
            &store,
            &format!("{tool}/{case}"),
            Outcome::Completed(result_naming(malformed, false)),
            false,
        )
        .await;
        assert_eq!(row.outcome, "completed", "{case}");
        assert_eq!(row.call_id.as_deref(), Some(id.as_str()), "{case}");
        assert_eq!(
            (row.engine_user, row.upstream_ids),
            (None, Vec::new()),
            "{case}"
        );
    }

    let many: Vec<String> = (0..40)
        .map(|n| format!("20261210_101500_{n:05}_abcde"))
        .collect();
    let (_, row) = audited_ending(
        &store,
        &format!("{tool}/many"),
        Outcome::Completed(result_naming(
            json!({"engine_user": "alice@example.com", "query_ids": many}),
            false,
        )),
        false,
    )
    .await;
    assert_eq!(row.upstream_ids, many[..MAX_UPSTREAM_IDS]);

    let (id, row) = audited_ending(
        &store,
        &format!("{tool}/failed"),
        Outcome::Failed(TaskError::internal("the upstream failed")),
        false,
    )
    .await;
    assert_eq!(row.outcome, "failed");
    assert_eq!(row.call_id.as_deref(), Some(id.as_str()));
    assert_eq!((row.engine_user, row.upstream_ids), (None, Vec::new()));

    let (id, row) = audited_ending(
        &store,
        &format!("{tool}/cancelled"),
        Outcome::Cancelled,
        false,
    )
    .await;
    assert_eq!(row.outcome, "cancelled");
    assert_eq!(row.call_id.as_deref(), Some(id.as_str()));
    assert_eq!((row.engine_user, row.upstream_ids), (None, Vec::new()));

    let (id, row) = audited_ending(
        &store,
        &format!("{tool}/overruled"),
        Outcome::Completed(result_naming(named.to_meta_value(), false)),
        true,
    )
    .await;
    assert_eq!((row.outcome.as_str(), row.success), ("cancelled", false));
    assert_eq!(row.call_id.as_deref(), Some(id.as_str()));
    assert_eq!(row.engine_user.as_deref(), Some("alice@example.com"));
    assert_eq!(row.upstream_ids, named.query_ids);
}

/// A cancel that ended the task is not overwritten by a late completion.
pub async fn a_late_completion_never_overwrites_a_cancel(store: Arc<dyn TaskStore>) {
    let tool = "a_late_completion_never_overwrites_a_cancel";
    let task = new_task(tool);
    store.create(task.clone()).await.expect("create");
    store.request_cancel(&task.id).await.expect("cancel");
    let (read, _) = store.get(&task.id).await.expect("get").expect("present");
    assert!(read.cancel_requested_at.is_some());
    assert_eq!(
        read.status,
        TaskStatus::Working,
        "a cancel request alone does not end the task"
    );
    assert_eq!(
        store
            .finish(&task.id, Outcome::Cancelled)
            .await
            .expect("finish"),
        Some(TaskStatus::Cancelled)
    );
    assert_eq!(
        store
            .finish(&task.id, Outcome::Completed(json!({"content": []})))
            .await
            .expect("finish"),
        None
    );
    let (read, _) = store.get(&task.id).await.expect("get").expect("present");
    assert_eq!(read.status, TaskStatus::Cancelled);
    assert_eq!(read.result, None);
    let audit = store.audit_for_tool(tool, 10).await.expect("audit");
    assert_eq!(audit.len(), 1);
    assert_eq!(audit[0].outcome, "cancelled");
}

/// A cancel acknowledged before the work's ending is recorded wins in the ending
/// statement itself: the work that never heard it (its replica was not listening)
/// reports a result or a failure, and the task still ends cancelled, with no
/// result, audited once as cancelled.
pub async fn an_acknowledged_cancel_wins_over_a_later_ending(store: Arc<dyn TaskStore>) {
    let tool = "an_acknowledged_cancel_wins_over_a_later_ending";
    let endings = [
        Outcome::Completed(json!({"content": [{"type": "text", "text": "done"}]})),
        Outcome::Failed(TaskError::internal("the upstream failed")),
    ];
    for ending in endings {
        let task = new_task(tool);
        store.create(task.clone()).await.expect("create");
        store.request_cancel(&task.id).await.expect("cancel");
        assert_eq!(
            store.finish(&task.id, ending).await.expect("finish"),
            Some(TaskStatus::Cancelled),
            "the ending statement says what it recorded"
        );
        let (read, _) = store.get(&task.id).await.expect("get").expect("present");
        assert_eq!(read.status, TaskStatus::Cancelled);
        assert_eq!((read.result, read.error), (None, None));
        assert_eq!(read.status_message.as_deref(), Some("cancelled"));
    }
    let audit = store.audit_for_tool(tool, 10).await.expect("audit");
    assert_eq!(audit.len(), 2, "{audit:?}");
    assert!(
        audit
            .iter()
            .all(|entry| entry.outcome == "cancelled" && !entry.success),
        "{audit:?}"
    );
}

/// Many writers racing to end one task: exactly one wins, one audit row.
pub async fn racing_writers_cannot_both_win(store: Arc<dyn TaskStore>) {
    let tool = "racing_writers_cannot_both_win";
    let task = new_task(tool);
    store.create(task.clone()).await.expect("create");
    let mut handles = Vec::new();
    for writer in 0..8 {
        let store = Arc::clone(&store);
        let id = task.id.clone();
        handles.push(tokio::spawn(async move {
            let outcome = if writer % 2 == 0 {
                Outcome::Cancelled
            } else {
                Outcome::Completed(json!({"content": [], "writer": writer}))
            };
            store.finish(&id, outcome).await.expect("finish")
        }));
    }
    let mut wins = 0;
    for handle in handles {
        if handle.await.expect("joined").is_some() {
            wins += 1;
        }
    }
    assert_eq!(wins, 1);
    assert_eq!(
        store.audit_for_tool(tool, 10).await.expect("audit").len(),
        1
    );
}

/// Cancelling an ended task changes nothing.
pub async fn cancelling_an_ended_task_is_a_no_op(store: Arc<dyn TaskStore>) {
    let task = new_task("cancelling_an_ended_task_is_a_no_op");
    store.create(task.clone()).await.expect("create");
    store
        .finish(&task.id, Outcome::Completed(json!({"content": []})))
        .await
        .expect("finish");
    store.request_cancel(&task.id).await.expect("cancel");
    let (read, _) = store.get(&task.id).await.expect("get").expect("present");
    assert_eq!(read.status, TaskStatus::Completed);
    assert_eq!(read.cancel_requested_at, None);
    store
        .request_cancel(&TaskId::from_stored("no-such-task".into()))
        .await
        .expect("unknown ids are fine");
}

/// One heartbeat stamps the replica, and with it every task it runs (listed or
/// not), stores the messages it carries, and reports every task of the replica
/// with a cancel requested; another replica's tasks are left alone.
pub async fn heartbeat_stamps_and_reports_cancels(store: Arc<dyn TaskStore>) {
    let first = new_task("heartbeat_stamps_and_reports_cancels");
    let second = new_task("heartbeat_stamps_and_reports_cancels");
    let unlisted = new_task("heartbeat_stamps_and_reports_cancels");
    let mut foreign = new_task("heartbeat_stamps_and_reports_cancels");
    // Replicas of this test's own, so no other test's beat or task can show up.
    let replica = format!("a-{}", first.id.as_str());
    foreign.replica_id = format!("b-{}", first.id.as_str());
    for task in [&first, &second, &unlisted] {
        let mut task = task.clone();
        task.replica_id.clone_from(&replica);
        store.create(task).await.expect("create");
    }
    store.create(foreign.clone()).await.expect("create");
    let (before, _) = store.get(&first.id).await.expect("get").expect("present");
    let (foreign_before, _) = store.get(&foreign.id).await.expect("get").expect("present");
    store.request_cancel(&second.id).await.expect("cancel");
    store.request_cancel(&foreign.id).await.expect("cancel");
    // The stamp must be able to move: wait until the store's clock has.
    wait_until_clock_passes(&store, &first.id, before.heartbeat_at).await;
    let beats = [
        Beat {
            id: first.id.clone(),
            status_message: Some("412 000 rows written, 38 MB".into()),
        },
        Beat {
            id: foreign.id.clone(),
            status_message: Some("not mine".into()),
        },
    ];
    let cancelled = store.heartbeat(&replica, &beats).await.expect("heartbeat");
    assert_eq!(
        cancelled,
        vec![second.id.clone()],
        "the replica's pending cancels"
    );
    let (after, _) = store.get(&first.id).await.expect("get").expect("present");
    assert!(after.heartbeat_at > before.heartbeat_at);
    assert_eq!(
        after.status_message.as_deref(),
        Some("412 000 rows written, 38 MB")
    );
    let (quiet, _) = store
        .get(&unlisted.id)
        .await
        .expect("get")
        .expect("present");
    assert!(
        quiet.heartbeat_at > before.heartbeat_at,
        "a task the beat did not list is as alive as its replica"
    );
    assert_eq!(quiet.status_message.as_deref(), Some("starting"));
    let (untouched, _) = store.get(&foreign.id).await.expect("get").expect("present");
    assert_eq!(untouched.status_message.as_deref(), Some("starting"));
    assert_eq!(untouched.heartbeat_at, foreign_before.heartbeat_at);
    // A beat with no messages still stamps, and still reports the cancel.
    assert_eq!(
        store
            .heartbeat(&replica, &[])
            .await
            .expect("empty heartbeat"),
        vec![second.id.clone()]
    );
    store
        .finish(&second.id, Outcome::Cancelled)
        .await
        .expect("finish");
    assert!(
        store
            .heartbeat(&replica, &[])
            .await
            .expect("empty heartbeat")
            .is_empty(),
        "an ended task's cancel is no longer pending"
    );
}

/// Input requests and answers live with the task: partial answers keep the rest
/// outstanding, unknown keys are ignored, keys are unique for the task's life.
pub async fn input_requests_and_answers_live_with_the_task(store: Arc<dyn TaskStore>) {
    let task = new_task("input_requests_and_answers_live_with_the_task");
    store.create(task.clone()).await.expect("create");
    let requests = object(json!({
        "name": {"method": "elicitation/create", "params": {"message": "Name?", "requestedSchema": {"type": "object"}}},
        "confirm": {"method": "elicitation/create", "params": {"message": "Sure?", "requestedSchema": {"type": "object"}}}
    }));
    assert!(
        store
            .require_input(&task.id, requests)
            .await
            .expect("require")
    );
    let (read, _) = store.get(&task.id).await.expect("get").expect("present");
    assert_eq!(read.status, TaskStatus::InputRequired);
    assert_eq!(
        read.input_requests
            .as_ref()
            .and_then(Value::as_object)
            .map(Map::len),
        Some(2)
    );

    let first = object(
        json!({"name": {"action": "accept", "content": {"name": "partial-1"}}, "unknown-key": {"ignored": true}}),
    );
    store.answer_input(&task.id, &first).await.expect("answer");
    let (read, _) = store.get(&task.id).await.expect("get").expect("present");
    assert_eq!(
        read.status,
        TaskStatus::InputRequired,
        "one answer of two keeps the task waiting"
    );
    let outstanding = read
        .input_requests
        .as_ref()
        .and_then(Value::as_object)
        .expect("outstanding");
    assert!(outstanding.contains_key("confirm") && !outstanding.contains_key("name"));

    let answers = store.take_answers(&task.id).await.expect("take");
    assert_eq!(answers.keys().collect::<Vec<_>>(), ["name"]);
    assert!(
        store.take_answers(&task.id).await.expect("take").is_empty(),
        "answers are taken once"
    );

    store
        .answer_input(
            &task.id,
            &object(json!({"confirm": {"action": "accept", "content": {"confirm": true}}})),
        )
        .await
        .expect("answer");
    let (read, _) = store.get(&task.id).await.expect("get").expect("present");
    assert_eq!(read.status, TaskStatus::Working);
    assert_eq!(read.input_requests, None);

    let reused = object(
        json!({"name": {"method": "elicitation/create", "params": {"message": "Again?", "requestedSchema": {"type": "object"}}}}),
    );
    store
        .require_input(&task.id, reused)
        .await
        .expect("require");
    let (read, _) = store.get(&task.id).await.expect("get").expect("present");
    let outstanding = read
        .input_requests
        .as_ref()
        .and_then(Value::as_object)
        .map(Map::len)
        .unwrap_or(0);
    assert_eq!(outstanding, 0, "a key used once is not asked again");
}

/// The ids of the tasks a sweep ended.
fn stale_ids(swept: Vec<crate::StaleTask>) -> Vec<TaskId> {
    swept.into_iter().map(|task| task.id).collect()
}

/// A working task whose replica stopped stamping it fails, once, with an audit row
/// (one whose cancel was acknowledged ends cancelled instead); a task stamped
/// within `stale_after` and an ended task are left alone.
///
/// Nothing here depends on how fast the machine is: "fresh" is checked against a
/// threshold of an hour, and "stale" by waiting until the store's own clock shows
/// the task older than the threshold the sweep is given.
pub async fn stale_tasks_fail_once_with_an_audit_row(store: Arc<dyn TaskStore>) {
    let stale_after = Duration::from_millis(50);
    let tool = "stale_tasks_fail_once_with_an_audit_row";
    let stale = new_task(tool);
    let stamped = store.create(stale.clone()).await.expect("create");
    let ended = new_task(tool);
    store.create(ended.clone()).await.expect("create");
    // A stale task whose cancel was acknowledged ends cancelled, not failed.
    let asked = new_task(tool);
    let asked_stamped = store.create(asked.clone()).await.expect("create");
    store.request_cancel(&asked.id).await.expect("cancel");

    let failed = stale_ids(
        store
            .fail_stale(Duration::from_secs(3600))
            .await
            .expect("sweep"),
    );
    assert!(
        !failed.contains(&stale.id) && !failed.contains(&ended.id),
        "tasks stamped within stale_after are not failed: {failed:?}"
    );
    store
        .finish(&ended.id, Outcome::Completed(json!({"content": []})))
        .await
        .expect("finish");

    let last_stamp = stamped.heartbeat_at.max(asked_stamped.heartbeat_at);
    wait_until_clock_passes(&store, &stale.id, last_stamp + stale_after).await;
    let swept = store.fail_stale(stale_after).await.expect("sweep");
    let kept_trace = swept
        .iter()
        .find(|task| task.id == stale.id)
        .and_then(|task| task.trace.clone());
    assert!(stale.trace_context.is_some());
    assert_eq!(
        kept_trace, stale.trace_context,
        "the sweep tells each task's trace"
    );
    let failed = stale_ids(swept);
    assert!(
        failed.contains(&stale.id) && !failed.contains(&ended.id),
        "{failed:?}"
    );
    let (read, _) = store.get(&stale.id).await.expect("get").expect("present");
    assert_eq!(read.status, TaskStatus::Failed);
    assert!(
        read.error
            .as_ref()
            .is_some_and(|error| error.message.contains("call the tool again"))
    );
    assert!(failed.contains(&asked.id), "{failed:?}");
    let (read, _) = store.get(&asked.id).await.expect("get").expect("present");
    assert_eq!((read.status, read.error), (TaskStatus::Cancelled, None));
    assert!(
        !stale_ids(store.fail_stale(stale_after).await.expect("sweep")).contains(&stale.id),
        "a second sweep fails nothing twice"
    );
    let audit = store.audit_for_tool(tool, 10).await.expect("audit");
    let count = |outcome: &str| {
        audit
            .iter()
            .filter(|entry| entry.outcome == outcome)
            .count()
    };
    assert_eq!((count("failed"), count("cancelled")), (1, 1), "{audit:?}");
    assert_eq!(audit.len(), 3, "one row for each task: {audit:?}");
    // Each row names its task as the call, and nothing upstream: the sweep knows
    // only what the task row holds.
    for (id, outcome) in [
        (&stale.id, "failed"),
        (&asked.id, "cancelled"),
        (&ended.id, "completed"),
    ] {
        let row = audit
            .iter()
            .find(|entry| entry.call_id.as_deref() == Some(id.as_str()))
            .unwrap_or_else(|| panic!("no row names {id}: {audit:?}"));
        assert_eq!(row.outcome, outcome);
        assert_eq!((&row.engine_user, row.upstream_ids.len()), (&None, 0));
    }
}

/// A stale task of a replica that had announced its shutdown (its row says it
/// drains) was stopped by that shutdown: it reads, and the sweep records it,
/// failed "shut down", not "replica gone"; its audit row says the same.
pub async fn a_stale_task_of_a_draining_replica_reads_shut_down(store: Arc<dyn TaskStore>) {
    let stale_after = Duration::from_millis(50);
    let tool = "a_stale_task_of_a_draining_replica_reads_shut_down";
    let mut task = new_task(tool);
    task.replica_id = format!("draining-{}", task.id.as_str());
    let stamped = store.create(task.clone()).await.expect("create");
    store
        .mark_draining(&task.replica_id)
        .await
        .expect("mark draining");
    let (read, now) = store.get(&task.id).await.expect("get").expect("present");
    assert!(read.replica_draining, "the read says its replica drains");
    wait_until_clock_passes(
        &store,
        &task.id,
        now.max(stamped.heartbeat_at) + stale_after,
    )
    .await;
    let (read, now) = store.get(&task.id).await.expect("get").expect("present");
    let view = read.view(now, stale_after);
    assert!(view.stale);
    let shut_down = TaskError::shut_down().message;
    assert_eq!(view.status_message.as_deref(), Some(shut_down.as_str()));
    assert!(stale_ids(store.fail_stale(stale_after).await.expect("sweep")).contains(&task.id));
    let (recorded, _) = store.get(&task.id).await.expect("get").expect("present");
    assert_eq!(recorded.status, TaskStatus::Failed);
    assert_eq!(
        recorded.error.map(|error| error.message),
        Some(shut_down.clone())
    );
    let audit = store.audit_for_tool(tool, 10).await.expect("audit");
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(audit[0].error_message.as_deref(), Some(shut_down.as_str()));
}

/// Waits until the clock `store` reads (the database's, for a database) is past
/// `instant`, reading it through task `id`. A wait on a condition, not a guess at
/// how long something takes; the deadline only turns a hang into a failure.
async fn wait_until_clock_passes(
    store: &Arc<dyn TaskStore>,
    id: &TaskId,
    instant: time::OffsetDateTime,
) {
    let hang_guard = Duration::from_secs(60);
    let waited = tokio::time::timeout(hang_guard, async {
        loop {
            let (_, now) = store.get(id).await.expect("get").expect("present");
            if now > instant {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "the store's clock did not pass {instant} within {hang_guard:?}"
    );
}

/// Retention deletes expired tasks and keeps the rest.
pub async fn retention_deletes_only_expired_tasks(store: Arc<dyn TaskStore>) {
    let mut expired = new_task("retention_deletes_only_expired_tasks");
    expired.retention = Some(Duration::ZERO);
    let kept = new_task("retention_deletes_only_expired_tasks");
    let mut unlimited = new_task("retention_deletes_only_expired_tasks");
    unlimited.retention = None;
    let mut expires_at = None;
    for task in [&expired, &kept, &unlimited] {
        let created = store.create(task.clone()).await.expect("create");
        if task.id == expired.id {
            expires_at = created.expires_at;
        }
    }
    // Expired means the store's clock is past the expiry: wait until it is.
    let expires_at = expires_at.expect("a zero retention still expires");
    wait_until_clock_passes(&store, &kept.id, expires_at).await;
    let deleted = store.delete_expired(1000).await.expect("retention");
    assert!(deleted.contains(&expired.id));
    assert!(!deleted.contains(&kept.id) && !deleted.contains(&unlimited.id));
    assert!(store.get(&expired.id).await.expect("get").is_none());
    assert!(store.get(&kept.id).await.expect("get").is_some());
    let (read, _) = store
        .get(&unlimited.id)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(read.ttl_ms(), None);
}

/// Calls that did not become tasks are audited through the same store.
pub async fn direct_calls_are_audited(store: Arc<dyn TaskStore>) {
    let tool = "direct_calls_are_audited";
    let entry = AuditEntry {
        tool: tool.into(),
        subject: "apikey:bob".into(),
        context: AuditContext {
            persona: Some("analyst".into()),
            connection: None,
            arguments: json!({"text": "hi"}),
        },
        success: true,
        outcome: "completed".into(),
        error_message: None,
        duration_ms: 12,
        call_id: Some("call-0001".into()),
        engine_user: Some("bob@example.com".into()),
        upstream_ids: vec![
            "20261210_101500_00001_abcde".into(),
            "20261210_101501_00002_abcde".into(),
        ],
    };
    store.record_audit(entry.clone()).await.expect("audit");
    let unattributed = AuditEntry {
        success: false,
        outcome: "failed".into(),
        error_message: Some("no connection".into()),
        call_id: None,
        engine_user: None,
        upstream_ids: Vec::new(),
        ..entry.clone()
    };
    store
        .record_audit(unattributed.clone())
        .await
        .expect("audit");
    assert_eq!(
        store.audit_for_tool(tool, 10).await.expect("audit"),
        vec![unattributed, entry]
    );
}

/// A follower lists the tasks it started and those it follows as the extra
/// follower, newest first, page by page; never another's, never an expired one.
pub async fn followers_list_their_tasks_page_by_page(store: Arc<dyn TaskStore>) {
    let tool = "followers_list_their_tasks_page_by_page";
    let subject = "apikey:lister";
    let mut created = Vec::new();
    for n in 0..5 {
        let mut task = new_task(tool);
        if n == 3 {
            // A task of another's kind that names the lister as its extra follower.
            task.owner = "apikey:someone-else".into();
            task.extra_follower = Some(subject.into());
        } else {
            task.owner = subject.into();
        }
        created.push(store.create(task).await.expect("create"));
    }
    let mut foreign = new_task(tool);
    foreign.owner = "apikey:stranger".into();
    store.create(foreign.clone()).await.expect("create");
    let mut expired = new_task(tool);
    expired.owner = subject.into();
    expired.retention = Some(Duration::ZERO);
    let expires_at = store
        .create(expired.clone())
        .await
        .expect("create")
        .expires_at
        .expect("a zero retention still expires");
    wait_until_clock_passes(&store, &expired.id, expires_at).await;

    let mut expected: Vec<TaskId> = created.iter().map(|task| task.id.clone()).collect();
    expected.sort_by(|a, b| {
        let at = |id: &TaskId| {
            created
                .iter()
                .find(|task| &task.id == id)
                .map(|task| task.created_at)
        };
        (at(b), b.as_str()).cmp(&(at(a), a.as_str()))
    });
    let mut listed = Vec::new();
    let mut after = None;
    loop {
        let (page, _now) = store
            .list_followed(subject, after.as_ref(), 2)
            .await
            .expect("list");
        assert!(page.len() <= 2, "a page holds at most the limit");
        let Some(last) = page.last() else { break };
        after = Some(crate::store::TaskPosition::after(last));
        listed.extend(page.into_iter().map(|task| task.id));
    }
    assert_eq!(listed, expected, "every followed task once, newest first");
    let (theirs, _) = store
        .list_followed("apikey:stranger", None, 10)
        .await
        .expect("list");
    assert_eq!(
        theirs.iter().map(|task| &task.id).collect::<Vec<_>>(),
        vec![&foreign.id]
    );
    let (nobody, _) = store
        .list_followed("apikey:nobody", None, 10)
        .await
        .expect("list");
    assert!(nobody.is_empty());
}

/// Generates one `#[tokio::test]` per store property. `$make` is an async
/// expression yielding `(Arc<dyn TaskStore>, guard)`; the guard (for example a
/// per-test database schema) lives until the test ends.
#[macro_export]
macro_rules! store_suite {
    ($make:expr) => {
        $crate::store_suite!(@tests $make;
            created_task_is_readable,
            a_task_keeps_the_trace_it_was_created_in,
            finishing_is_compare_and_set,
            task_endings_record_their_upstream_attribution,
            a_late_completion_never_overwrites_a_cancel,
            an_acknowledged_cancel_wins_over_a_later_ending,
            racing_writers_cannot_both_win,
            cancelling_an_ended_task_is_a_no_op,
            heartbeat_stamps_and_reports_cancels,
            input_requests_and_answers_live_with_the_task,
            stale_tasks_fail_once_with_an_audit_row,
            a_stale_task_of_a_draining_replica_reads_shut_down,
            retention_deletes_only_expired_tasks,
            direct_calls_are_audited,
            followers_list_their_tasks_page_by_page,
        );
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (store, _guard) = $make.await;
                $crate::testing::$name(store).await;
            }
        )*
    };
}
