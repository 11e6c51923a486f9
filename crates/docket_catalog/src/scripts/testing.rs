//! The behaviour every [`ScriptStore`] must have, as test functions any
//! implementation can run: one test source for both backends. Use
//! [`script_store_suite!`](crate::script_store_suite) to generate one
//! `#[tokio::test]` per property.
//!
//! Each function expects a store of its own, empty, and panics when the store
//! misbehaves. Where a lease must expire, the test leases for a millisecond and
//! sleeps a little longer: the claim compares with the database clock.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use time::OffsetDateTime;
use time::macros::datetime;

use super::{
    CancelOutcome, Fire, FireOutcome, FireStatus, NewRun, NewSchedule, NewScript, Renewal, Run,
    RunEnding, RunErrorKind, RunFilter, RunStatus, RunTrigger, ScriptChange, ScriptStatus,
    ScriptStore,
};
use crate::{CatalogError, generate_id};

/// Longer than the coarsest database clock tick, so rows are ordered in time.
const TICK: Duration = Duration::from_millis(5);

/// A lease long enough never to expire during a test.
const LONG: Duration = Duration::from_secs(600);

/// A script of `owner` called `name`, saved by its owner as an analyst.
pub fn new_script(owner: &str, name: &str) -> NewScript {
    NewScript {
        id: generate_id().expect("OS random source"),
        owner: owner.to_owned(),
        name: name.to_owned(),
        description: "counts «orders»".into(),
        params: json!([{"name": "day", "type": "string", "required": true}]),
        source: "print('it''s')\nresult = 1".into(),
        author: owner.to_owned(),
        author_roles: vec!["analyst".into(), "ünïcode".into()],
    }
}

/// A run of `script` asked for by `requested_by`.
pub fn new_run(script: &super::Script, requested_by: &str) -> NewRun {
    NewRun {
        id: generate_id().expect("OS random source"),
        script_id: script.id.clone(),
        script_name: script.name.clone(),
        script_owner: script.owner.clone(),
        version: script.version,
        params: json!({"day": "2026-12-01"}),
        requested_by: requested_by.to_owned(),
        trace_context: Some(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\nrojo=00f067aa0ba902b7"
                .to_owned(),
        ),
    }
}

/// A successful ending with a result and a log.
pub fn succeeded(result: Value) -> RunEnding {
    RunEnding {
        status: RunStatus::Succeeded,
        result: Some(result),
        error: None,
        error_kind: None,
        log: "line one\nline two".into(),
        log_truncated: false,
        metrics: json!({"steps": 10, "host_calls": 2, "duration_ms": 5}),
    }
}

async fn queued_run(store: &dyn ScriptStore, owner: &str) -> Run {
    let (script, _) = store
        .create_script(
            new_script(owner, &format!("s-{}", generate_id().expect("random"))),
            u32::MAX,
        )
        .await
        .expect("create script");
    store
        .enqueue(new_run(&script, owner))
        .await
        .expect("enqueue")
}

/// A run keeps the trace of the request that queued it, through its claim (so the
/// worker on any replica continues that trace); a run queued without one reads
/// without one, and a trace past its bound or with more than one line break is
/// refused.
pub async fn runs_keep_the_trace_they_were_queued_in(store: Arc<dyn ScriptStore>) {
    let queued = queued_run(&*store, "alice").await;
    let traced = new_run(
        &store
            .script(&queued.script_id)
            .await
            .expect("get")
            .expect("present"),
        "alice",
    );
    assert_eq!(queued.trace_context, traced.trace_context);
    let (read, _) = store.run(&queued.id).await.expect("run").expect("present");
    assert_eq!(read.trace_context, traced.trace_context);
    let claimed = store
        .claim("w", Duration::from_secs(60), u32::MAX)
        .await
        .expect("claim")
        .expect("the run");
    assert_eq!(claimed.trace_context, traced.trace_context);
    let mut untraced = traced.clone();
    untraced.id = generate_id().expect("random");
    untraced.trace_context = None;
    let run = store.enqueue(untraced).await.expect("enqueue");
    assert_eq!(run.trace_context, None);
    for refused in [
        "0".repeat(super::MAX_TRACE_CONTEXT_BYTES + 1),
        "00-a\nb=1\nc=2".to_owned(),
    ] {
        let mut bad = traced.clone();
        bad.id = generate_id().expect("random");
        bad.trace_context = Some(refused);
        assert!(matches!(
            store.enqueue(bad).await,
            Err(CatalogError::Invalid(_))
        ));
    }
}

/// Creating, reading, updating (a new version each time, the old ones kept with
/// their author's roles), listing and deleting scripts; names are unique per
/// owner.
pub async fn scripts_keep_every_version(store: Arc<dyn ScriptStore>) {
    let new = new_script("alice", "daily");
    let (script, version) = store
        .create_script(new.clone(), u32::MAX)
        .await
        .expect("create");
    assert_eq!(
        (script.owner.as_str(), script.name.as_str(), script.version),
        ("alice", "daily", 1)
    );
    assert_eq!(script.status, ScriptStatus::Active);
    assert!(script.enabled);
    assert_eq!(version.source, new.source);
    assert_eq!(version.author_roles, new.author_roles);
    assert_eq!(version.params, new.params);

    let mut same_name = new_script("alice", "daily");
    same_name.source = "x = 2".into();
    assert_eq!(
        store.create_script(same_name, u32::MAX).await,
        Err(CatalogError::Duplicate)
    );
    store
        .create_script(new_script("bob", "daily"), u32::MAX)
        .await
        .expect("another owner may use the name");

    let (changed, v2) = store
        .update_script(
            &script.id,
            ScriptChange {
                source: Some("result = 2".into()),
                enabled: Some(false),
                editor: "admin".into(),
                editor_roles: vec!["admin".into()],
                ..ScriptChange::default()
            },
        )
        .await
        .expect("update")
        .expect("exists");
    assert_eq!(changed.version, 2);
    assert!(!changed.enabled);
    // A change made against version 1 no longer applies: nothing is saved.
    let stale = store
        .update_script(
            &script.id,
            ScriptChange {
                source: Some("result = 3".into()),
                base_version: Some(1),
                editor: "admin".into(),
                ..ScriptChange::default()
            },
        )
        .await;
    assert_eq!(stale, Err(CatalogError::Stale(2)));
    assert_eq!(changed.description, new.description);
    assert_eq!(v2.source, "result = 2");
    assert_eq!(v2.author, "admin", "new source makes its editor the author");
    assert_eq!(v2.author_roles, vec!["admin".to_owned()]);
    assert_eq!(v2.params, new.params, "unchanged fields carry over");
    let v1 = store
        .script_version(&script.id, 1)
        .await
        .expect("read")
        .expect("kept");
    assert_eq!(v1, version);

    assert_eq!(
        store.find_script("alice", "daily").await.expect("find"),
        Some(changed.clone())
    );
    assert_eq!(
        store.find_script("carol", "daily").await.expect("find"),
        None
    );
    assert_eq!(store.script(&script.id).await.expect("get"), Some(changed));
    let alices = store.list_scripts(Some("alice"), 10).await.expect("list");
    assert_eq!(alices.len(), 1);
    assert_eq!(store.list_scripts(None, 10).await.expect("list").len(), 2);
    assert!(
        store
            .update_script("missing", ScriptChange::default())
            .await
            .expect("update")
            .is_none()
    );

    let run = store
        .enqueue(new_run(&alices[0], "alice"))
        .await
        .expect("enqueue");
    assert!(store.delete_script(&script.id).await.expect("delete"));
    assert!(!store.delete_script(&script.id).await.expect("delete"));
    assert!(store.script(&script.id).await.expect("get").is_none());
    assert!(
        store
            .script_version(&script.id, 1)
            .await
            .expect("get")
            .is_none()
    );
    assert!(
        store.run(&run.id).await.expect("get").is_none(),
        "a script's runs go with it"
    );
}

/// A queued run reads back as queued; claims take the oldest first, each run
/// once, raising the attempt and setting the lease.
pub async fn claims_take_the_oldest_run_once(store: Arc<dyn ScriptStore>) {
    assert!(
        store
            .claim("w1", LONG, u32::MAX)
            .await
            .expect("claim")
            .is_none()
    );
    let first = queued_run(store.as_ref(), "alice").await;
    assert_eq!(first.status, RunStatus::Queued);
    assert_eq!(
        (first.attempt, first.platform_faults, first.reclaims),
        (0, 0, 0)
    );
    assert_eq!(first.params, json!({"day": "2026-12-01"}));
    tokio::time::sleep(TICK).await;
    let second = queued_run(store.as_ref(), "bob").await;

    let claimed = store
        .claim("w1", LONG, u32::MAX)
        .await
        .expect("claim")
        .expect("a run");
    assert_eq!(claimed.id, first.id);
    assert_eq!(claimed.status, RunStatus::Running);
    assert_eq!(claimed.attempt, 1);
    assert_eq!(claimed.lease_owner.as_deref(), Some("w1"));
    assert!(claimed.lease_expires_at.is_some() && claimed.started_at.is_some());
    let next = store
        .claim("w2", LONG, u32::MAX)
        .await
        .expect("claim")
        .expect("a run");
    assert_eq!(next.id, second.id);
    assert!(
        store
            .claim("w3", LONG, u32::MAX)
            .await
            .expect("claim")
            .is_none()
    );

    let (read, now) = store.run(&first.id).await.expect("get").expect("present");
    assert_eq!(read, claimed);
    assert!(now >= read.created_at);
    assert!(store.run("missing").await.expect("get").is_none());
}

/// Many workers claiming at once take every run exactly once.
pub async fn concurrent_claims_take_each_run_once(store: Arc<dyn ScriptStore>) {
    let mut ids = HashSet::new();
    for _ in 0..12 {
        ids.insert(queued_run(store.as_ref(), "alice").await.id);
    }
    let mut workers = Vec::new();
    for worker in 0..4 {
        let store = Arc::clone(&store);
        workers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(run) = store
                .claim(&format!("w{worker}"), LONG, u32::MAX)
                .await
                .expect("claim")
            {
                mine.push(run.id);
            }
            mine
        }));
    }
    let mut claimed = Vec::new();
    for worker in workers {
        claimed.extend(worker.await.expect("worker"));
    }
    assert_eq!(claimed.len(), ids.len(), "no run claimed twice");
    assert_eq!(claimed.into_iter().collect::<HashSet<_>>(), ids);
}

/// A worker whose lease expired and was reclaimed writes nothing: renewals
/// report the loss, finishing and requeueing are refused; the new holder's
/// writes land. The reclaim counts as a reclaim, not a platform fault.
pub async fn writes_are_fenced_by_the_lease(store: Arc<dyn ScriptStore>) {
    let run = queued_run(store.as_ref(), "alice").await;
    let old = store
        .claim("old", Duration::from_millis(1), u32::MAX)
        .await
        .expect("claim")
        .expect("a run");
    let old_lease = old.lease().expect("leased");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let new = store
        .claim("new", LONG, u32::MAX)
        .await
        .expect("claim")
        .expect("the expired lease is reclaimed");
    assert_eq!(new.id, run.id);
    assert_eq!((new.attempt, new.platform_faults, new.reclaims), (2, 0, 1));
    let new_lease = new.lease().expect("leased");

    assert_eq!(
        store.renew(&old_lease, LONG, 5).await.expect("renew"),
        Renewal::Lost
    );
    assert_eq!(
        store
            .finish(&old_lease, succeeded(json!(1)))
            .await
            .expect("finish"),
        None
    );
    assert!(
        !store
            .retry(&old_lease, "boom", Duration::ZERO)
            .await
            .expect("retry")
    );
    assert!(!store.release(&old_lease).await.expect("release"));
    // The same worker name with the old attempt is still fenced out.
    let mut stale = new_lease.clone();
    stale.attempt -= 1;
    assert_eq!(
        store.renew(&stale, LONG, 1).await.expect("renew"),
        Renewal::Lost
    );

    assert_eq!(
        store.renew(&new_lease, LONG, 7).await.expect("renew"),
        Renewal::Held {
            cancel_requested: false
        }
    );
    assert_eq!(
        store
            .run(&run.id)
            .await
            .expect("get")
            .expect("present")
            .0
            .host_calls,
        7
    );
    assert_eq!(
        store
            .finish(&new_lease, succeeded(json!({"rows": 3})))
            .await
            .expect("finish"),
        Some(RunStatus::Succeeded)
    );
    let (ended, _) = store.run(&run.id).await.expect("get").expect("present");
    assert_eq!(ended.status, RunStatus::Succeeded);
    assert_eq!(ended.result, Some(json!({"rows": 3})));
    assert_eq!(ended.log.as_deref(), Some("line one\nline two"));
    assert_eq!(ended.metrics["steps"], json!(10));
    assert!(ended.finished_at.is_some() && ended.lease_owner.is_none());
    assert_eq!(
        store
            .finish(&new_lease, succeeded(json!(2)))
            .await
            .expect("finish"),
        None,
        "a run ends once"
    );
    assert!(
        store
            .claim("third", LONG, u32::MAX)
            .await
            .expect("claim")
            .is_none(),
        "an ended run is never claimed"
    );
}

/// A version carries the roles of the author of its source: a change without
/// new source (description, enabled, params, status, or the same source
/// again) keeps the current author and roles, whoever makes it; new source
/// makes its editor the author, with the editor's roles.
pub async fn versions_keep_the_roles_of_their_sources_author(store: Arc<dyn ScriptStore>) {
    let new = new_script("alice", "owned");
    let (script, v1) = store
        .create_script(new.clone(), u32::MAX)
        .await
        .expect("create");
    let admin = |change: ScriptChange| ScriptChange {
        editor: "root".into(),
        editor_roles: vec!["admin".into()],
        ..change
    };
    let authorship = |version: &super::ScriptVersion| {
        (
            version.version,
            version.author.clone(),
            version.author_roles.clone(),
        )
    };

    let (changed, v2) = store
        .update_script(
            &script.id,
            admin(ScriptChange {
                description: Some("now described by an administrator".into()),
                enabled: Some(false),
                ..ScriptChange::default()
            }),
        )
        .await
        .expect("update")
        .expect("exists");
    assert_eq!(
        authorship(&v2),
        (2, "alice".to_owned(), new.author_roles.clone()),
        "a description and enabled change keeps the source's author"
    );
    assert_eq!(v2.source, v1.source);
    assert_eq!(v2.description, "now described by an administrator");
    assert!(!changed.enabled);

    let (_, v3) = store
        .update_script(
            &script.id,
            admin(ScriptChange {
                params: Some(json!([])),
                status: Some(ScriptStatus::Deprecated),
                enabled: Some(true),
                source: Some(v1.source.clone()),
                ..ScriptChange::default()
            }),
        )
        .await
        .expect("update")
        .expect("exists");
    assert_eq!(
        authorship(&v3),
        (3, "alice".to_owned(), new.author_roles.clone()),
        "params, status and the same source again keep the source's author"
    );
    assert_eq!(v3.params, json!([]));

    let (_, v4) = store
        .update_script(
            &script.id,
            admin(ScriptChange {
                source: Some("result = 'rewritten'".into()),
                ..ScriptChange::default()
            }),
        )
        .await
        .expect("update")
        .expect("exists");
    assert_eq!(
        authorship(&v4),
        (4, "root".to_owned(), vec!["admin".to_owned()]),
        "new source makes its editor the author"
    );

    let (_, v5) = store
        .update_script(
            &script.id,
            ScriptChange {
                description: Some("the owner only describes it".into()),
                editor: "alice".into(),
                editor_roles: new.author_roles.clone(),
                ..ScriptChange::default()
            },
        )
        .await
        .expect("update")
        .expect("exists");
    assert_eq!(
        authorship(&v5),
        (5, "root".to_owned(), vec!["admin".to_owned()]),
        "the owner's description change keeps the administrator's source and roles"
    );
    assert_eq!(v5.source, "result = 'rewritten'");
    assert_eq!(
        store.script_version(&script.id, 2).await.expect("read"),
        Some(v2),
        "earlier versions are kept as they were"
    );
}

/// A claim that takes back a run whose lease expired counts a reclaim, not a
/// platform fault; a retry counts a fault and no reclaim; a release counts
/// neither.
pub async fn reclaims_count_apart_from_platform_faults(store: Arc<dyn ScriptStore>) {
    let run = queued_run(store.as_ref(), "alice").await;
    let expire = Duration::from_millis(1);
    let first = store
        .claim("w1", expire, u32::MAX)
        .await
        .expect("claim")
        .expect("run");
    assert_eq!((first.platform_faults, first.reclaims), (0, 0));
    for reclaims in 1..=2 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let taken = store
            .claim("w2", expire, u32::MAX)
            .await
            .expect("claim")
            .expect("the expired lease is reclaimed");
        assert_eq!(taken.id, run.id);
        assert_eq!(
            (taken.attempt, taken.platform_faults, taken.reclaims),
            (reclaims + 1, 0, reclaims)
        );
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let lease = store
        .claim("w3", LONG, u32::MAX)
        .await
        .expect("claim")
        .expect("run")
        .lease()
        .expect("lease");
    assert!(
        store
            .retry(&lease, "the database went away", Duration::ZERO)
            .await
            .expect("retry")
    );
    let lease = store
        .claim("w3", LONG, u32::MAX)
        .await
        .expect("claim")
        .expect("a retried run is claimed from the queue")
        .lease()
        .expect("lease");
    assert!(store.release(&lease).await.expect("release"));
    let (read, _) = store.run(&run.id).await.expect("get").expect("present");
    assert_eq!(
        (read.status, read.platform_faults, read.reclaims),
        (RunStatus::Queued, 1, 3),
        "a queued run's claim is no reclaim; a retry is a fault"
    );
}

/// A retry puts the run back (counting a fault, waiting its delay); a release
/// puts it back at once without counting one; failures keep their kind.
pub async fn retries_and_releases_requeue(store: Arc<dyn ScriptStore>) {
    let run = queued_run(store.as_ref(), "alice").await;
    let lease = store
        .claim("w", LONG, u32::MAX)
        .await
        .expect("claim")
        .expect("run")
        .lease()
        .expect("lease");
    assert!(
        store
            .retry(&lease, "the database went away", Duration::ZERO)
            .await
            .expect("retry")
    );
    let (requeued, _) = store.run(&run.id).await.expect("get").expect("present");
    assert_eq!(requeued.status, RunStatus::Queued);
    assert_eq!(requeued.platform_faults, 1);
    assert_eq!(requeued.error.as_deref(), Some("the database went away"));

    let lease = store
        .claim("w", LONG, u32::MAX)
        .await
        .expect("claim")
        .expect("run")
        .lease()
        .expect("lease");
    assert_eq!(lease.attempt, 2);
    assert!(store.release(&lease).await.expect("release"));
    let (released, _) = store.run(&run.id).await.expect("get").expect("present");
    assert_eq!(
        (released.status, released.platform_faults),
        (RunStatus::Queued, 1)
    );

    let lease = store
        .claim("w", LONG, u32::MAX)
        .await
        .expect("claim")
        .expect("run")
        .lease()
        .expect("lease");
    assert!(store.retry(&lease, "again", LONG).await.expect("retry"));
    assert!(
        store
            .claim("w", LONG, u32::MAX)
            .await
            .expect("claim")
            .is_none(),
        "a retried run waits for its delay"
    );

    let other = queued_run(store.as_ref(), "bob").await;
    let lease = store
        .claim("w", LONG, u32::MAX)
        .await
        .expect("claim")
        .expect("run")
        .lease()
        .expect("lease");
    let failure = RunEnding {
        status: RunStatus::Failed,
        result: None,
        error: Some("line 3: division by zero".into()),
        error_kind: Some(RunErrorKind::Script),
        log: String::new(),
        log_truncated: true,
        metrics: json!({}),
    };
    assert_eq!(
        store.finish(&lease, failure).await.expect("finish"),
        Some(RunStatus::Failed)
    );
    let (failed, _) = store.run(&other.id).await.expect("get").expect("present");
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(failed.error_kind, Some(RunErrorKind::Script));
    assert!(failed.log_truncated);
    assert!(matches!(
        store
            .finish(
                &lease,
                RunEnding {
                    status: RunStatus::Running,
                    ..succeeded(json!(1))
                }
            )
            .await,
        Err(CatalogError::Invalid(_))
    ));
}

/// Cancelling: a queued run ends at once; a running run is marked and its
/// holder hears it at its next renewal, and its ending is cancelled whatever the
/// holder reports; an ended run keeps its outcome; an
/// unknown id is `None`.
pub async fn cancels_end_queued_runs_and_mark_running_ones(store: Arc<dyn ScriptStore>) {
    assert_eq!(store.cancel_run("missing").await.expect("cancel"), None);
    let queued = queued_run(store.as_ref(), "alice").await;
    let Some(CancelOutcome::Ended(ended)) = store.cancel_run(&queued.id).await.expect("cancel")
    else {
        panic!("a queued run ends at once");
    };
    assert_eq!(ended.status, RunStatus::Cancelled);
    assert!(ended.finished_at.is_some() && ended.cancel_requested_at.is_some());
    assert!(
        store
            .claim("w", LONG, u32::MAX)
            .await
            .expect("claim")
            .is_none()
    );

    let running = queued_run(store.as_ref(), "alice").await;
    let lease = store
        .claim("w", LONG, u32::MAX)
        .await
        .expect("claim")
        .expect("run")
        .lease()
        .expect("lease");
    assert_eq!(
        store.cancel_run(&running.id).await.expect("cancel"),
        Some(CancelOutcome::Requested)
    );
    assert_eq!(
        store.renew(&lease, LONG, 0).await.expect("renew"),
        Renewal::Held {
            cancel_requested: true
        }
    );
    // The worker did not hear the cancel in time and reports a success: the
    // cancel, acknowledged first, wins in the ending statement itself.
    assert_eq!(
        store
            .finish(&lease, succeeded(json!({"rows": 1})))
            .await
            .expect("finish"),
        Some(RunStatus::Cancelled)
    );
    let (ended, _) = store.run(&running.id).await.expect("get").expect("present");
    assert_eq!(ended.status, RunStatus::Cancelled);
    assert_eq!(
        (ended.result, ended.error, ended.error_kind),
        (None, None, None)
    );
    assert_eq!(
        ended.log.as_deref(),
        Some("line one\nline two"),
        "its log is kept"
    );
    assert_eq!(
        store.cancel_run(&running.id).await.expect("cancel"),
        Some(CancelOutcome::AlreadyEnded)
    );
    assert_eq!(
        store.cancel_run(&queued.id).await.expect("cancel"),
        Some(CancelOutcome::AlreadyEnded)
    );
}

/// Retention deletes ended runs older than the retention, never unfinished
/// ones.
pub async fn retention_deletes_only_ended_runs(store: Arc<dyn ScriptStore>) {
    let ended = queued_run(store.as_ref(), "alice").await;
    store.cancel_run(&ended.id).await.expect("cancel");
    let waiting = queued_run(store.as_ref(), "alice").await;
    let running = queued_run(store.as_ref(), "alice").await;
    store.claim("w", LONG, u32::MAX).await.expect("claim");
    assert!(
        store
            .delete_finished_runs(LONG, 100)
            .await
            .expect("delete")
            .is_empty(),
        "nothing is old enough"
    );
    tokio::time::sleep(TICK).await;
    let deleted = store
        .delete_finished_runs(Duration::from_millis(1), 100)
        .await
        .expect("delete");
    assert_eq!(deleted, vec![ended.id.clone()]);
    assert!(store.run(&ended.id).await.expect("get").is_none());
    assert!(store.run(&waiting.id).await.expect("get").is_some());
    assert!(store.run(&running.id).await.expect("get").is_some());
}

/// Runs list newest first, by script, and by who may see them (whoever asked
/// for them and the script's owner).
pub async fn runs_list_by_script_and_visibility(store: Arc<dyn ScriptStore>) {
    let (script, _) = store
        .create_script(new_script("alice", "a"), u32::MAX)
        .await
        .expect("create");
    let mine = store
        .enqueue(new_run(&script, "alice"))
        .await
        .expect("enqueue");
    tokio::time::sleep(TICK).await;
    let bobs = store
        .enqueue(new_run(&script, "bob"))
        .await
        .expect("enqueue");
    // Its own instant, so "newest first" has one answer (SQLite keeps milliseconds).
    tokio::time::sleep(TICK).await;
    let other = queued_run(store.as_ref(), "carol").await;

    let ids = |runs: Vec<Run>| runs.into_iter().map(|run| run.id).collect::<Vec<_>>();
    let by_script = RunFilter {
        script_id: Some(script.id.clone()),
        ..RunFilter::default()
    };
    assert_eq!(
        ids(store.list_runs(&by_script, 10).await.expect("list")),
        vec![bobs.id.clone(), mine.id.clone()]
    );
    let for_bob = RunFilter {
        visible_to: Some("bob".into()),
        ..RunFilter::default()
    };
    assert_eq!(
        ids(store.list_runs(&for_bob, 10).await.expect("list")),
        vec![bobs.id.clone()]
    );
    let for_alice = RunFilter {
        visible_to: Some("alice".into()),
        ..RunFilter::default()
    };
    assert_eq!(
        ids(store.list_runs(&for_alice, 10).await.expect("list")),
        vec![bobs.id.clone(), mine.id.clone()]
    );
    // Page by page: the next page starts strictly after the last run listed.
    let first = store.list_runs(&for_alice, 1).await.expect("list");
    let next = RunFilter {
        before: first.last().map(|run| crate::PageCursor {
            created_at: run.created_at,
            id: run.id.clone(),
        }),
        ..for_alice.clone()
    };
    assert_eq!(ids(first), vec![bobs.id]);
    assert_eq!(
        ids(store.list_runs(&next, 10).await.expect("list")),
        vec![mine.id]
    );
    let everyone = store
        .list_runs(&RunFilter::default(), 2)
        .await
        .expect("list");
    assert_eq!(everyone.len(), 2);
    assert_eq!(everyone[0].id, other.id);
    // By status: every run here is queued, none has succeeded.
    let queued = RunFilter {
        status: Some(RunStatus::Queued),
        ..by_script.clone()
    };
    assert_eq!(store.list_runs(&queued, 10).await.expect("list").len(), 2);
    let succeeded = RunFilter {
        status: Some(RunStatus::Succeeded),
        ..by_script
    };
    assert!(
        store
            .list_runs(&succeeded, 10)
            .await
            .expect("list")
            .is_empty()
    );
}

/// A schedule of `script` waiting for `next_fire_at`.
fn new_schedule(script: &super::Script, next_fire_at: OffsetDateTime) -> NewSchedule {
    NewSchedule {
        script_id: script.id.clone(),
        cron: "* * * * *".into(),
        timezone: "Europe/Berlin".into(),
        args: json!({"day": "${fire_date}"}),
        next_fire_at,
        set_by: script.owner.clone(),
    }
}

/// The fire of `script`'s schedule at `fire_time`, one minute apart.
fn fire_at(script: &super::Script, fire_time: OffsetDateTime, replica: &str) -> Fire {
    Fire {
        script_id: script.id.clone(),
        expected_next_fire_at: fire_time,
        fire_time,
        missed: 0,
        next_fire_at: fire_time + time::Duration::minutes(1),
        fired_by: replica.into(),
        run: Some(new_run(script, "")),
    }
}

/// A schedule is one per script: set replaces it, list and read show it,
/// enable and disable switch it (enabling sets the time it waits for), and
/// it goes with its script.
pub async fn schedules_are_one_per_script(store: Arc<dyn ScriptStore>) {
    let (script, _) = store
        .create_script(new_script("alice", "nightly"), u32::MAX)
        .await
        .expect("create");
    let (other, _) = store
        .create_script(new_script("bob", "hourly"), u32::MAX)
        .await
        .expect("create");
    assert_eq!(store.schedule(&script.id).await.expect("read"), None);
    let first = datetime!(2026-06-01 04:00 UTC);
    let set = store
        .set_schedule(new_schedule(&script, first), u32::MAX)
        .await
        .expect("set");
    assert_eq!(set.script_name, "nightly");
    assert_eq!(set.script_owner, "alice");
    assert!(set.enabled);
    assert_eq!(set.next_fire_at, first);
    assert_eq!(set.args, json!({"day": "${fire_date}"}));
    let replaced = store
        .set_schedule(
            NewSchedule {
                cron: "@daily".into(),
                ..new_schedule(&script, first + time::Duration::days(1))
            },
            u32::MAX,
        )
        .await
        .expect("replace");
    assert_eq!(replaced.cron, "@daily");
    assert_eq!(replaced.created_at, set.created_at);
    store
        .set_schedule(new_schedule(&other, first), u32::MAX)
        .await
        .expect("set");
    let mine = store.list_schedules(Some("alice"), 10).await.expect("list");
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].cron, "@daily");
    assert_eq!(store.list_schedules(None, 10).await.expect("list").len(), 2);

    let off = store
        .set_schedule_enabled(&script.id, false, first)
        .await
        .expect("disable")
        .expect("exists");
    assert!(!off.enabled);
    assert!(
        store
            .due_schedules(first + time::Duration::days(30), 10)
            .await
            .expect("due")
            .iter()
            .all(|(schedule, _)| schedule.script_id != script.id),
        "a disabled schedule is never due"
    );
    let later = datetime!(2026-07-01 04:00 UTC);
    let on = store
        .set_schedule_enabled(&script.id, true, later)
        .await
        .expect("enable")
        .expect("exists");
    assert!(on.enabled);
    assert_eq!(on.next_fire_at, later);
    // Enabling an enabled schedule does not move it.
    let again = store
        .set_schedule_enabled(&script.id, true, later + time::Duration::days(1))
        .await
        .expect("enable")
        .expect("exists");
    assert_eq!(again.next_fire_at, later);
    assert_eq!(
        store
            .set_schedule_enabled("no-such-script", true, later)
            .await
            .expect("enable"),
        None
    );
    assert!(matches!(
        store
            .set_schedule(new_schedule(&script, first), u32::MAX)
            .await
            .map(|_| ()),
        Ok(())
    ));
    let missing = super::Script {
        id: "no-such-script".into(),
        ..script.clone()
    };
    assert!(
        store
            .set_schedule(new_schedule(&missing, first), u32::MAX)
            .await
            .is_err()
    );
    assert!(store.delete_script(&script.id).await.expect("delete"));
    assert_eq!(store.schedule(&script.id).await.expect("read"), None);
}

/// A fire happens once: of two fires for the same time only one writes, it
/// queues a run with trigger `schedule` and its fire time, and the schedule
/// moves on; a fire while that run is open is recorded `skipped_overlap`; a
/// fire without a run only advances; missed fires add up.
pub async fn a_fire_time_fires_once(store: Arc<dyn ScriptStore>) {
    let (script, _) = store
        .create_script(new_script("alice", "minutely"), u32::MAX)
        .await
        .expect("create");
    let first = datetime!(2026-06-01 04:00 UTC);
    store
        .set_schedule(new_schedule(&script, first), u32::MAX)
        .await
        .expect("set");
    let due = store.due_schedules(first, 10).await.expect("due");
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].1.id, script.id);
    assert!(
        store
            .due_schedules(first - time::Duration::seconds(1), 10)
            .await
            .expect("due")
            .is_empty()
    );

    let (one, two) = tokio::join!(
        store.fire_schedule(fire_at(&script, first, "a")),
        store.fire_schedule(fire_at(&script, first, "b")),
    );
    let outcomes = [one.expect("fire"), two.expect("fire")];
    let queued: Vec<&Run> = outcomes
        .iter()
        .filter_map(|outcome| match outcome {
            FireOutcome::Queued(run) => Some(run.as_ref()),
            _ => None,
        })
        .collect();
    assert_eq!(queued.len(), 1, "{outcomes:?}");
    assert!(outcomes.contains(&FireOutcome::Lost), "{outcomes:?}");
    let run = queued[0].clone();
    assert_eq!(run.trigger, RunTrigger::Schedule);
    assert_eq!(run.fire_time, Some(first));
    assert_eq!(run.status, RunStatus::Queued);
    let schedule = store
        .schedule(&script.id)
        .await
        .expect("read")
        .expect("set");
    assert_eq!(schedule.next_fire_at, first + time::Duration::minutes(1));
    assert_eq!(schedule.last_fire_at, Some(first));
    // A fire for a time already fired (the schedule set back to it) writes nothing.
    store
        .set_schedule(new_schedule(&script, first), u32::MAX)
        .await
        .expect("set back");
    assert_eq!(
        store
            .fire_schedule(fire_at(&script, first, "c"))
            .await
            .expect("fire"),
        FireOutcome::Lost
    );
    assert_eq!(
        store
            .schedule(&script.id)
            .await
            .expect("read")
            .expect("set")
            .next_fire_at,
        first
    );
    store
        .set_schedule(
            new_schedule(&script, first + time::Duration::minutes(1)),
            u32::MAX,
        )
        .await
        .expect("set forward");

    // The run is still queued: the next fire overlaps it, and says so.
    let second = first + time::Duration::minutes(1);
    let overlapping = Fire {
        missed: 2,
        ..fire_at(&script, second, "a")
    };
    assert_eq!(
        store.fire_schedule(overlapping).await.expect("fire"),
        FireOutcome::SkippedOverlap
    );
    let schedule = store
        .schedule(&script.id)
        .await
        .expect("read")
        .expect("set");
    assert_eq!(schedule.missed_fires, 2);
    assert_eq!(schedule.next_fire_at, second + time::Duration::minutes(1));

    // Once it ended, the next fire queues again.
    let claimed = store
        .claim("w", LONG, u32::MAX)
        .await
        .expect("claim")
        .expect("run");
    assert_eq!(claimed.id, run.id);
    let lease = claimed.lease().expect("leased");
    assert_eq!(
        store
            .finish(&lease, succeeded(json!({})))
            .await
            .expect("finish"),
        Some(RunStatus::Succeeded)
    );
    let third = second + time::Duration::minutes(1);
    assert!(matches!(
        store
            .fire_schedule(fire_at(&script, third, "b"))
            .await
            .expect("fire"),
        FireOutcome::Queued(_)
    ));
    // A fire with no run (the script is disabled) only moves the schedule on.
    let fourth = third + time::Duration::minutes(1);
    assert_eq!(
        store
            .fire_schedule(Fire {
                run: None,
                missed: 5,
                ..fire_at(&script, fourth, "a")
            })
            .await
            .expect("fire"),
        FireOutcome::Advanced
    );
    let schedule = store
        .schedule(&script.id)
        .await
        .expect("read")
        .expect("set");
    assert_eq!(schedule.next_fire_at, fourth + time::Duration::minutes(1));
    assert_eq!(
        schedule.missed_fires, 2,
        "an advance without a run misses nothing"
    );

    let fires = store.schedule_fires(&script.id, 10).await.expect("fires");
    let summary: Vec<(OffsetDateTime, FireStatus, i64)> = fires
        .iter()
        .map(|fire| (fire.fire_time, fire.status, fire.missed))
        .collect();
    assert_eq!(
        summary,
        vec![
            (third, FireStatus::Queued, 0),
            (second, FireStatus::SkippedOverlap, 2),
            (first, FireStatus::Queued, 0),
        ]
    );
    assert_eq!(fires[2].run_id.as_deref(), Some(run.id.as_str()));
    assert_eq!(fires[1].run_id, None);
    // Scheduled runs list like any run, and by status.
    let scheduled = store
        .list_runs(
            &RunFilter {
                script_id: Some(script.id.clone()),
                status: Some(RunStatus::Succeeded),
                ..RunFilter::default()
            },
            10,
        )
        .await
        .expect("list");
    assert_eq!(scheduled.len(), 1);
    assert_eq!(scheduled[0].trigger, RunTrigger::Schedule);
    // Fire records have a retention: none is old yet.
    assert_eq!(
        store
            .delete_old_fires(Duration::from_secs(3600), 100)
            .await
            .expect("retention"),
        0
    );
    tokio::time::sleep(TICK).await;
    assert_eq!(
        store
            .delete_old_fires(Duration::ZERO, 100)
            .await
            .expect("retention"),
        3
    );
}

/// Each owner holds at most the scripts and the schedules the limit given
/// allows, counted atomically: of racing creates of one owner exactly the
/// limit succeed; other owners are not counted; replacing a schedule adds none.
pub async fn owners_are_capped_in_scripts_and_schedules(store: Arc<dyn ScriptStore>) {
    let creates = (0..6).map(|index| {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .create_script(new_script("alice", &format!("s{index}")), 3)
                .await
        })
    });
    let mut outcomes = Vec::new();
    for create in creates {
        outcomes.push(create.await.expect("join"));
    }
    assert_eq!(outcomes.iter().filter(|outcome| outcome.is_ok()).count(), 3);
    assert!(
        outcomes
            .iter()
            .filter_map(|outcome| outcome.as_ref().err())
            .all(|error| *error == CatalogError::LimitReached(3)),
        "{outcomes:?}"
    );
    let (bobs, _) = store
        .create_script(new_script("bob", "s0"), 3)
        .await
        .expect("bob's first");

    let alices: Vec<super::Script> = outcomes
        .into_iter()
        .filter_map(Result::ok)
        .map(|(script, _)| script)
        .collect();
    let at = datetime!(2026-06-01 04:00 UTC);
    store
        .set_schedule(new_schedule(&alices[0], at), 1)
        .await
        .expect("the first schedule");
    store
        .set_schedule(new_schedule(&alices[0], at), 1)
        .await
        .expect("replacing it adds none");
    assert_eq!(
        store.set_schedule(new_schedule(&alices[1], at), 1).await,
        Err(CatalogError::LimitReached(1))
    );
    store
        .set_schedule(new_schedule(&bobs, at), 1)
        .await
        .expect("bob's count is his own");
}

/// A claim passes over the runs of an owner who already holds
/// `max_running_per_owner` running runs, so another owner's run queued later
/// starts; a lease that expired holds nothing, and an ended run frees its place.
pub async fn claims_pass_over_owners_at_their_share(store: Arc<dyn ScriptStore>) {
    let first = queued_run(store.as_ref(), "alice").await;
    tokio::time::sleep(TICK).await;
    let second = queued_run(store.as_ref(), "alice").await;
    tokio::time::sleep(TICK).await;
    let bobs = queued_run(store.as_ref(), "bob").await;

    let claimed = store
        .claim("w1", LONG, 1)
        .await
        .expect("claim")
        .expect("a run");
    assert_eq!(claimed.id, first.id);
    let claimed = store
        .claim("w2", LONG, 1)
        .await
        .expect("claim")
        .expect("a run");
    assert_eq!(
        claimed.id, bobs.id,
        "alice holds her share; bob's run starts"
    );
    assert!(
        store.claim("w3", LONG, 1).await.expect("claim").is_none(),
        "both owners hold their share"
    );
    assert_eq!(
        store
            .claim("w3", LONG, 2)
            .await
            .expect("claim")
            .map(|run| run.id),
        Some(second.id.clone()),
        "a larger share takes alice's next run"
    );

    // An ended run frees its owner's place.
    let third = queued_run(store.as_ref(), "alice").await;
    let first_lease = store
        .run(&first.id)
        .await
        .expect("read")
        .and_then(|(run, _)| run.lease())
        .expect("leased");
    assert_eq!(
        store
            .finish(&first_lease, succeeded(json!({})))
            .await
            .expect("finish"),
        Some(RunStatus::Succeeded)
    );
    assert!(
        store
            .claim("w4", LONG, 2)
            .await
            .expect("claim")
            .is_some_and(|run| run.id == third.id)
    );

    // A run whose lease expired holds no place: it is taken back.
    let fourth = queued_run(store.as_ref(), "carol").await;
    let dead = store
        .claim("dead", Duration::from_millis(1), 1)
        .await
        .expect("claim")
        .expect("carol's run");
    assert_eq!(dead.id, fourth.id);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let reclaimed = store
        .claim("w5", LONG, 1)
        .await
        .expect("claim")
        .expect("taken back");
    assert_eq!((reclaimed.id, reclaimed.reclaims), (fourth.id, 1));
}

/// Generates one `#[tokio::test]` per [`ScriptStore`] property in
/// [`crate::scripts::testing`]. `$make` is awaited and must yield
/// `(Arc<dyn ScriptStore>, guard)`; the guard lives until the test ends.
#[macro_export]
macro_rules! script_store_suite {
    ($make:expr) => {
        $crate::script_store_suite!(@tests $make;
            scripts_keep_every_version,
            runs_keep_the_trace_they_were_queued_in,
            claims_take_the_oldest_run_once,
            concurrent_claims_take_each_run_once,
            writes_are_fenced_by_the_lease,
            versions_keep_the_roles_of_their_sources_author,
            reclaims_count_apart_from_platform_faults,
            retries_and_releases_requeue,
            cancels_end_queued_runs_and_mark_running_ones,
            retention_deletes_only_ended_runs,
            runs_list_by_script_and_visibility,
            schedules_are_one_per_script,
            a_fire_time_fires_once,
            owners_are_capped_in_scripts_and_schedules,
            claims_pass_over_owners_at_their_share,
        );
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (store, _guard) = $make.await;
                $crate::scripts::testing::$name(store).await;
            }
        )*
    };
}

/// A [`ScriptStore`] that forwards to another, counts the calls, and fails every
/// call on demand, as a database that went away would: for tests of what callers
/// do then. [`FlakyScripts::deaf`] also loses every signal, as a replica whose
/// notifications never arrive would.
pub struct FlakyScripts {
    inner: Arc<dyn ScriptStore>,
    failing: std::sync::atomic::AtomicBool,
    calls: std::sync::atomic::AtomicUsize,
    deaf: bool,
}

impl FlakyScripts {
    /// Forwards to `inner` until told to fail.
    pub fn new(inner: Arc<dyn ScriptStore>) -> Self {
        Self {
            inner,
            failing: std::sync::atomic::AtomicBool::new(false),
            calls: std::sync::atomic::AtomicUsize::new(0),
            deaf: false,
        }
    }

    /// Forwards to `inner`, but its listener hears no signal (a cancel or an
    /// ending another replica recorded): what it learns, it learns by reading.
    pub fn deaf(inner: Arc<dyn ScriptStore>) -> Self {
        Self {
            deaf: true,
            ..Self::new(inner)
        }
    }

    /// How many calls reached this store so far, failed ones included.
    pub fn calls(&self) -> usize {
        self.calls.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// From now on every call fails (`true`) or is forwarded (`false`).
    pub fn set_failing(&self, failing: bool) {
        self.failing
            .store(failing, std::sync::atomic::Ordering::SeqCst);
    }

    fn check(&self) -> Result<(), CatalogError> {
        self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.failing.load(std::sync::atomic::Ordering::SeqCst) {
            Err(CatalogError::Unavailable(
                "the test made the store fail".into(),
            ))
        } else {
            Ok(())
        }
    }
}

#[async_trait::async_trait]
impl ScriptStore for FlakyScripts {
    async fn create_script(
        &self,
        script: NewScript,
        owner_limit: u32,
    ) -> Result<(super::Script, super::ScriptVersion), CatalogError> {
        self.check()?;
        self.inner.create_script(script, owner_limit).await
    }
    async fn update_script(
        &self,
        id: &str,
        change: ScriptChange,
    ) -> Result<Option<(super::Script, super::ScriptVersion)>, CatalogError> {
        self.check()?;
        self.inner.update_script(id, change).await
    }
    async fn find_script(
        &self,
        owner: &str,
        name: &str,
    ) -> Result<Option<super::Script>, CatalogError> {
        self.check()?;
        self.inner.find_script(owner, name).await
    }
    async fn script(&self, id: &str) -> Result<Option<super::Script>, CatalogError> {
        self.check()?;
        self.inner.script(id).await
    }
    async fn list_scripts(
        &self,
        owner: Option<&str>,
        limit: u32,
    ) -> Result<Vec<super::Script>, CatalogError> {
        self.check()?;
        self.inner.list_scripts(owner, limit).await
    }
    async fn delete_script(&self, id: &str) -> Result<bool, CatalogError> {
        self.check()?;
        self.inner.delete_script(id).await
    }
    async fn script_version(
        &self,
        script_id: &str,
        version: i32,
    ) -> Result<Option<super::ScriptVersion>, CatalogError> {
        self.check()?;
        self.inner.script_version(script_id, version).await
    }
    async fn enqueue(&self, run: NewRun) -> Result<Run, CatalogError> {
        self.check()?;
        self.inner.enqueue(run).await
    }
    async fn run(&self, id: &str) -> Result<Option<(Run, time::OffsetDateTime)>, CatalogError> {
        self.check()?;
        self.inner.run(id).await
    }
    async fn list_runs(
        &self,
        filter: &super::RunFilter,
        limit: u32,
    ) -> Result<Vec<Run>, CatalogError> {
        self.check()?;
        self.inner.list_runs(filter, limit).await
    }
    async fn claim(
        &self,
        worker: &str,
        lease: Duration,
        max_running_per_owner: u32,
    ) -> Result<Option<Run>, CatalogError> {
        self.check()?;
        self.inner.claim(worker, lease, max_running_per_owner).await
    }
    async fn renew(
        &self,
        lease: &super::Lease,
        duration: Duration,
        host_calls: i64,
    ) -> Result<super::Renewal, CatalogError> {
        self.check()?;
        self.inner.renew(lease, duration, host_calls).await
    }
    async fn finish(
        &self,
        lease: &super::Lease,
        ending: super::RunEnding,
    ) -> Result<Option<RunStatus>, CatalogError> {
        self.check()?;
        self.inner.finish(lease, ending).await
    }
    async fn retry(
        &self,
        lease: &super::Lease,
        error: &str,
        delay: Duration,
    ) -> Result<bool, CatalogError> {
        self.check()?;
        self.inner.retry(lease, error, delay).await
    }
    async fn release(&self, lease: &super::Lease) -> Result<bool, CatalogError> {
        self.check()?;
        self.inner.release(lease).await
    }
    async fn cancel_run(&self, id: &str) -> Result<Option<super::CancelOutcome>, CatalogError> {
        self.check()?;
        self.inner.cancel_run(id).await
    }
    async fn delete_finished_runs(
        &self,
        retention: Duration,
        limit: u32,
    ) -> Result<Vec<String>, CatalogError> {
        self.check()?;
        self.inner.delete_finished_runs(retention, limit).await
    }
    async fn set_schedule(
        &self,
        schedule: super::NewSchedule,
        owner_limit: u32,
    ) -> Result<super::Schedule, CatalogError> {
        self.check()?;
        self.inner.set_schedule(schedule, owner_limit).await
    }
    async fn schedule(&self, script_id: &str) -> Result<Option<super::Schedule>, CatalogError> {
        self.check()?;
        self.inner.schedule(script_id).await
    }
    async fn list_schedules(
        &self,
        owner: Option<&str>,
        limit: u32,
    ) -> Result<Vec<super::Schedule>, CatalogError> {
        self.check()?;
        self.inner.list_schedules(owner, limit).await
    }
    async fn set_schedule_enabled(
        &self,
        script_id: &str,
        enabled: bool,
        next_fire_at: time::OffsetDateTime,
    ) -> Result<Option<super::Schedule>, CatalogError> {
        self.check()?;
        self.inner
            .set_schedule_enabled(script_id, enabled, next_fire_at)
            .await
    }
    async fn due_schedules(
        &self,
        now: time::OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<(super::Schedule, super::Script)>, CatalogError> {
        self.check()?;
        self.inner.due_schedules(now, limit).await
    }
    async fn fire_schedule(&self, fire: super::Fire) -> Result<super::FireOutcome, CatalogError> {
        self.check()?;
        self.inner.fire_schedule(fire).await
    }
    async fn schedule_fires(
        &self,
        script_id: &str,
        limit: u32,
    ) -> Result<Vec<super::FireRecord>, CatalogError> {
        self.check()?;
        self.inner.schedule_fires(script_id, limit).await
    }
    async fn delete_old_fires(&self, retention: Duration, limit: u32) -> Result<u64, CatalogError> {
        self.check()?;
        self.inner.delete_old_fires(retention, limit).await
    }
    fn set_run_listener(&self, listener: super::RunSignalListener) {
        if !self.deaf {
            self.inner.set_run_listener(listener);
        }
    }
}
