//! The behaviour every [`AssetStore`] and [`CallCatalog`] must have, as test
//! functions any implementation can run: one test source for every backend, so
//! the backends cannot drift apart. Use
//! [`asset_store_suite!`](crate::asset_store_suite) and
//! [`call_catalog_suite!`](crate::call_catalog_suite) to generate one
//! `#[tokio::test]` per property; the other stores' suites
//! ([`principal_store_suite!`](crate::principal_store_suite) and the rest) follow
//! below.
//!
//! Each function expects a store of its own, empty (a fresh schema or file), and
//! panics when the store misbehaves, as a test should. Where a test needs one
//! row to be newer than another it sleeps a few milliseconds between them: the
//! stores stamp rows with the database clock, which SQLite reads to the
//! millisecond.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::Barrier;

use crate::sessions::{NewSession, SessionStore};
use crate::{
    Asset, AssetStore, CallCatalog, CallKind, CallRecord, CatalogError, CreateOutcome, NewAsset,
    NewCallRecord, PageCursor, generate_id,
};

/// Longer than one tick of the coarsest database clock (SQLite's millisecond),
/// so rows written either side of it are ordered by time.
const TICK: Duration = Duration::from_millis(5);

/// How many writers race to record one idempotency key.
const RACING_WRITERS: usize = 16;

/// Makes a valid value invalid, in one named way.
type Spoil<T> = fn(&mut T);

/// A complete asset of `owner` called `name`: every optional field set, no
/// idempotency key.
pub fn new_asset(owner: &str, name: &str) -> NewAsset {
    let id = generate_id().expect("OS random source");
    NewAsset {
        storage_key: format!("{owner}/{id}/content.csv"),
        id,
        owner: owner.to_owned(),
        name: name.to_owned(),
        description: Some("daily orders, «quoted» and 'escaped'".into()),
        tags: vec!["orders".into(), "daily".into(), "ünïcode".into()],
        format: "csv".into(),
        content_type: "text/csv".into(),
        size_bytes: 5_000_000_000,
        row_count: Some(412_000),
        connection: Some("warehouse".into()),
        tool: "trino_export".into(),
        idempotency_key: None,
        task_id: Some(generate_id().expect("OS random source")),
        call_id: Some(generate_id().expect("OS random source")),
    }
}

/// `asset` with `key` as its idempotency key.
fn keyed(mut asset: NewAsset, key: &str) -> NewAsset {
    asset.idempotency_key = Some(key.to_owned());
    asset
}

/// A complete SQL call record of `subject` that ended well.
pub fn new_call_record(subject: &str) -> NewCallRecord {
    NewCallRecord {
        id: generate_id().expect("OS random source"),
        kind: CallKind::Sql,
        tool: "trino_export".into(),
        connection: Some("warehouse".into()),
        statement: "SELECT * FROM orders WHERE note = 'it''s'".into(),
        subject: subject.to_owned(),
        persona: Some("analyst".into()),
        success: true,
        outcome: "completed".into(),
        error_message: None,
        duration_ms: 1_234,
        rows: Some(412_000),
        bytes: Some(5_000_000_000),
        asset_id: Some(generate_id().expect("OS random source")),
        task_id: Some(generate_id().expect("OS random source")),
        upstream_status: None,
        engine_user: Some("alice@example.com".into()),
        upstream_ids: vec![
            "20261210_101500_00001_abcde".into(),
            "20261210_101501_00002_abcde".into(),
        ],
    }
}

/// What `asset` reads back as, stamped `created_at`.
fn recorded(asset: &NewAsset, created_at: OffsetDateTime) -> Asset {
    let asset = asset.clone();
    Asset {
        id: asset.id,
        owner: asset.owner,
        name: asset.name,
        description: asset.description,
        tags: asset.tags,
        format: asset.format,
        content_type: asset.content_type,
        storage_key: asset.storage_key,
        size_bytes: asset.size_bytes,
        row_count: asset.row_count,
        connection: asset.connection,
        tool: asset.tool,
        idempotency_key: asset.idempotency_key,
        task_id: asset.task_id,
        call_id: asset.call_id,
        created_at,
    }
}

/// What `record` reads back as, stamped `created_at`.
fn recorded_call(record: &NewCallRecord, created_at: OffsetDateTime) -> CallRecord {
    let record = record.clone();
    CallRecord {
        id: record.id,
        kind: record.kind,
        tool: record.tool,
        connection: record.connection,
        statement: record.statement,
        subject: record.subject,
        persona: record.persona,
        success: record.success,
        outcome: record.outcome,
        error_message: record.error_message,
        duration_ms: record.duration_ms,
        rows: record.rows,
        bytes: record.bytes,
        asset_id: record.asset_id,
        task_id: record.task_id,
        upstream_status: record.upstream_status,
        engine_user: record.engine_user,
        upstream_ids: record.upstream_ids,
        created_at,
    }
}

/// Records `asset`, expecting it to be new.
async fn create(store: &dyn AssetStore, asset: &NewAsset) -> Asset {
    match store.create_or_get(asset.clone()).await.expect("create") {
        CreateOutcome::Created(created) => created,
        CreateOutcome::Existing(existing) => panic!("expected a new asset, got {existing:?}"),
    }
}

fn ids(assets: &[Asset]) -> Vec<&str> {
    assets.iter().map(|asset| asset.id.as_str()).collect()
}

fn call_ids(records: &[CallRecord]) -> Vec<&str> {
    records.iter().map(|record| record.id.as_str()).collect()
}

/// A recorded asset reads back with every field it was recorded with, by id;
/// a minimal one (no optional field, no tags) too; an unknown id is absent; a
/// second asset under an existing id is refused as a duplicate.
pub async fn recorded_assets_read_back_exactly(store: Arc<dyn AssetStore>) {
    let full = new_asset("apikey:alice", "orders.csv");
    let created = create(&*store, &full).await;
    assert_eq!(created, recorded(&full, created.created_at));
    assert_eq!(
        store.get(&full.id).await.expect("get"),
        Some(created.clone())
    );

    let minimal = NewAsset {
        description: None,
        tags: Vec::new(),
        format: "parquet".into(),
        content_type: "application/vnd.apache.parquet".into(),
        size_bytes: 0,
        row_count: None,
        connection: None,
        tool: "api_export".into(),
        task_id: None,
        call_id: None,
        ..new_asset("apikey:alice", "empty.parquet")
    };
    let created_minimal = create(&*store, &minimal).await;
    assert_eq!(
        store.get(&minimal.id).await.expect("get"),
        Some(recorded(&minimal, created_minimal.created_at))
    );
    assert!(created_minimal.created_at >= created.created_at);

    assert_eq!(store.get("no-such-asset").await.expect("get"), None);
    let mut same_id = new_asset("apikey:bob", "other.csv");
    same_id.id = full.id.clone();
    assert_eq!(
        store.create_or_get(same_id).await,
        Err(CatalogError::Duplicate)
    );
    assert_eq!(store.get(&full.id).await.expect("get"), Some(created));
}

/// Lists are newest first, per owner or (with no owner) for everyone, at most
/// `limit` long, and a cursor continues where a page ended, even after the
/// asset it came from was deleted.
pub async fn lists_are_newest_first_and_page_by_cursor(store: Arc<dyn AssetStore>) {
    let mut written = Vec::new();
    for (owner, name) in [
        ("apikey:alice", "a1"),
        ("apikey:bob", "b1"),
        ("apikey:alice", "a2"),
        ("apikey:bob", "b2"),
        ("apikey:alice", "a3"),
    ] {
        let asset = new_asset(owner, name);
        create(&*store, &asset).await;
        written.push(asset.id);
        tokio::time::sleep(TICK).await;
    }
    let [a1, b1, a2, b2, a3] = [0, 1, 2, 3, 4].map(|index| written[index].as_str());

    let alice = store
        .list(Some("apikey:alice"), 10, None)
        .await
        .expect("list");
    assert_eq!(ids(&alice), [a3, a2, a1]);
    let bob = store
        .list(Some("apikey:bob"), 10, None)
        .await
        .expect("list");
    assert_eq!(ids(&bob), [b2, b1]);
    let everyone = store.list(None, 10, None).await.expect("list");
    assert_eq!(ids(&everyone), [a3, b2, a2, b1, a1]);
    assert_eq!(
        everyone[0],
        store.get(a3).await.expect("get").expect("present")
    );
    assert!(
        store
            .list(Some("apikey:nobody"), 10, None)
            .await
            .expect("list")
            .is_empty()
    );
    assert!(store.list(None, 0, None).await.expect("list").is_empty());

    let first_page = store
        .list(Some("apikey:alice"), 2, None)
        .await
        .expect("list");
    assert_eq!(ids(&first_page), [a3, a2]);
    // The cursor travels as a token, as it would through a client.
    let token = first_page[1].cursor().encode();
    let cursor = PageCursor::decode(&token).expect("a cursor token");
    let second_page = store
        .list(Some("apikey:alice"), 2, Some(&cursor))
        .await
        .expect("list");
    assert_eq!(ids(&second_page), [a1]);
    let past_the_end = store
        .list(Some("apikey:alice"), 2, Some(&second_page[0].cursor()))
        .await
        .expect("list");
    assert!(past_the_end.is_empty());
    let everyone_after_b2 = store
        .list(None, 10, Some(&everyone[1].cursor()))
        .await
        .expect("list");
    assert_eq!(ids(&everyone_after_b2), [a2, b1, a1]);

    assert!(store.delete(a2).await.expect("delete"));
    let after_deleted = store
        .list(Some("apikey:alice"), 10, Some(&cursor))
        .await
        .expect("list");
    assert_eq!(ids(&after_deleted), [a1]);
}

/// An idempotency key gives one asset per owner: a second create with the
/// owner's key records nothing and returns the first asset, also when it is a
/// retry of the very same asset; the key is looked up per owner, so another
/// owner's same key is independent; assets without a key never collide.
pub async fn an_idempotency_key_returns_the_owners_first_asset(store: Arc<dyn AssetStore>) {
    let first = keyed(new_asset("apikey:alice", "first.csv"), "nightly-2026-12-01");
    let created = create(&*store, &first).await;

    let second = keyed(
        new_asset("apikey:alice", "second.csv"),
        "nightly-2026-12-01",
    );
    assert_eq!(
        store.create_or_get(second.clone()).await.expect("create"),
        CreateOutcome::Existing(created.clone())
    );
    assert_eq!(
        store.get(&second.id).await.expect("get"),
        None,
        "nothing recorded for the second asset"
    );
    assert_eq!(
        store.create_or_get(first.clone()).await.expect("retry"),
        CreateOutcome::Existing(created.clone()),
        "a retry of the same asset answers with it"
    );
    assert_eq!(
        store
            .find_by_idempotency_key("apikey:alice", "nightly-2026-12-01")
            .await
            .expect("find"),
        Some(created.clone())
    );
    assert_eq!(
        store
            .find_by_idempotency_key("apikey:alice", "nightly-2026-12-02")
            .await
            .expect("find"),
        None
    );
    assert_eq!(
        store
            .find_by_idempotency_key("apikey:bob", "nightly-2026-12-01")
            .await
            .expect("find"),
        None
    );

    let bobs = keyed(new_asset("apikey:bob", "first.csv"), "nightly-2026-12-01");
    let bobs_created = create(&*store, &bobs).await;
    assert_ne!(bobs_created.id, created.id);
    assert_eq!(
        store
            .find_by_idempotency_key("apikey:bob", "nightly-2026-12-01")
            .await
            .expect("find"),
        Some(bobs_created)
    );

    let unkeyed = new_asset("apikey:alice", "adhoc.csv");
    create(&*store, &unkeyed).await;
    create(&*store, &new_asset("apikey:alice", "adhoc.csv")).await;
    assert_eq!(
        store
            .list(Some("apikey:alice"), 10, None)
            .await
            .expect("list")
            .len(),
        3
    );

    let mut taken_id = keyed(new_asset("apikey:alice", "x.csv"), "another-key");
    taken_id.id = unkeyed.id;
    assert_eq!(
        store.create_or_get(taken_id).await,
        Err(CatalogError::Duplicate),
        "a new key does not excuse a taken id"
    );
}

/// Writers racing to record assets with one owner and key: exactly one
/// creates, every other gets that same asset back, and one row exists.
pub async fn racing_creates_with_one_key_record_one_asset(store: Arc<dyn AssetStore>) {
    let start = Arc::new(Barrier::new(RACING_WRITERS));
    let mut writers = Vec::new();
    for writer in 0..RACING_WRITERS {
        let store = Arc::clone(&store);
        let start = Arc::clone(&start);
        let asset = keyed(
            new_asset("apikey:alice", &format!("writer-{writer}.csv")),
            "the-one-key",
        );
        writers.push(tokio::spawn(async move {
            start.wait().await;
            store.create_or_get(asset).await.expect("create_or_get")
        }));
    }
    let mut outcomes = Vec::new();
    for writer in writers {
        outcomes.push(writer.await.expect("joined"));
    }
    let created: Vec<&Asset> = outcomes
        .iter()
        .filter(|outcome| outcome.is_created())
        .map(CreateOutcome::asset)
        .collect();
    assert_eq!(created.len(), 1, "exactly one writer creates");
    let winner = created[0];
    assert!(
        outcomes.iter().all(|outcome| outcome.asset() == winner),
        "every writer answers with the winner's asset"
    );
    let listed = store
        .list(Some("apikey:alice"), 100, None)
        .await
        .expect("list");
    assert_eq!(listed, std::slice::from_ref(winner));

    // Another owner racing with the same key is independent of the first.
    let mut writers = Vec::new();
    for owner in ["apikey:bob", "apikey:carol"] {
        let store = Arc::clone(&store);
        let asset = keyed(new_asset(owner, "mine.csv"), "the-one-key");
        writers.push(tokio::spawn(async move {
            store.create_or_get(asset).await.expect("create_or_get")
        }));
    }
    let mut distinct = HashSet::from([winner.id.clone()]);
    for writer in writers {
        let outcome = writer.await.expect("joined");
        assert!(outcome.is_created());
        distinct.insert(outcome.into_asset().id);
    }
    assert_eq!(distinct.len(), 3);
}

/// Deleting removes the row once (a second delete finds nothing) and frees
/// its idempotency key for a new asset.
pub async fn deleting_an_asset_frees_its_key(store: Arc<dyn AssetStore>) {
    let asset = keyed(new_asset("apikey:alice", "gone.csv"), "k");
    create(&*store, &asset).await;
    let other = new_asset("apikey:alice", "stays.csv");
    let kept = create(&*store, &other).await;

    assert!(store.delete(&asset.id).await.expect("delete"));
    assert_eq!(store.get(&asset.id).await.expect("get"), None);
    assert!(!store.delete(&asset.id).await.expect("delete again"));
    assert!(!store.delete("no-such-asset").await.expect("delete unknown"));
    assert_eq!(
        store
            .find_by_idempotency_key("apikey:alice", "k")
            .await
            .expect("find"),
        None
    );
    assert_eq!(
        store
            .list(Some("apikey:alice"), 10, None)
            .await
            .expect("list"),
        [kept]
    );

    let again = keyed(new_asset("apikey:alice", "again.csv"), "k");
    let recreated = create(&*store, &again).await;
    assert_eq!(recreated.id, again.id);
}

/// Out-of-range values are refused as invalid, before anything is written.
pub async fn invalid_assets_are_refused(store: Arc<dyn AssetStore>) {
    let cases: [(&str, Spoil<NewAsset>); 5] = [
        ("empty id", |asset| asset.id.clear()),
        ("empty owner", |asset| asset.owner.clear()),
        ("negative size", |asset| asset.size_bytes = -1),
        ("negative rows", |asset| asset.row_count = Some(-1)),
        ("empty key", |asset| {
            asset.idempotency_key = Some(String::new())
        }),
    ];
    for (case, spoil) in cases {
        let mut asset = new_asset("apikey:alice", case);
        spoil(&mut asset);
        let refused = store.create_or_get(asset).await;
        assert!(
            matches!(refused, Err(CatalogError::Invalid(_))),
            "{case}: {refused:?}"
        );
    }
    assert!(store.list(None, 10, None).await.expect("list").is_empty());
}

/// A recorded call reads back with every field it was recorded with (its engine
/// user and query ids, in order, too; a minimal record with neither reads back
/// with `None` and no ids); an unknown id is absent; a call is recorded once, and
/// out-of-range values are refused.
pub async fn call_records_read_back_exactly(catalog: Arc<dyn CallCatalog>) {
    let full = new_call_record("apikey:alice");
    catalog.record(full.clone()).await.expect("record");
    let read = catalog.get(&full.id).await.expect("get").expect("present");
    assert_eq!(read, recorded_call(&full, read.created_at));
    assert_eq!(read.engine_user.as_deref(), Some("alice@example.com"));
    assert_eq!(
        read.upstream_ids,
        ["20261210_101500_00001_abcde", "20261210_101501_00002_abcde"],
        "the query ids read back in order"
    );

    let minimal = NewCallRecord {
        kind: CallKind::Api,
        tool: "api_invoke_endpoint".into(),
        connection: None,
        statement: "GET /items?page=2".into(),
        persona: None,
        success: false,
        outcome: "failed".into(),
        error_message: Some("upstream answered 502".into()),
        duration_ms: 0,
        rows: None,
        bytes: None,
        asset_id: None,
        task_id: None,
        upstream_status: Some(502),
        engine_user: None,
        upstream_ids: Vec::new(),
        ..new_call_record("apikey:alice")
    };
    catalog.record(minimal.clone()).await.expect("record");
    let read_minimal = catalog
        .get(&minimal.id)
        .await
        .expect("get")
        .expect("present");
    assert_eq!(
        read_minimal,
        recorded_call(&minimal, read_minimal.created_at)
    );
    assert_eq!(
        (
            read_minimal.engine_user.as_deref(),
            read_minimal.upstream_ids.len()
        ),
        (None, 0)
    );
    assert!(read_minimal.created_at >= read.created_at);

    assert_eq!(catalog.get("no-such-call").await.expect("get"), None);
    let mut again = new_call_record("apikey:bob");
    again.id = full.id.clone();
    assert_eq!(catalog.record(again).await, Err(CatalogError::Duplicate));
    assert_eq!(catalog.get(&full.id).await.expect("get"), Some(read));

    let cases: [(&str, Spoil<NewCallRecord>); 6] = [
        ("empty id", |record| record.id.clear()),
        ("negative duration", |record| record.duration_ms = -1),
        ("negative rows", |record| record.rows = Some(-1)),
        ("negative bytes", |record| record.bytes = Some(-1)),
        ("status below 100", |record| {
            record.upstream_status = Some(99)
        }),
        ("status above 999", |record| {
            record.upstream_status = Some(1000);
        }),
    ];
    for (case, spoil) in cases {
        let mut record = new_call_record("apikey:alice");
        spoil(&mut record);
        let refused = catalog.record(record).await;
        assert!(
            matches!(refused, Err(CatalogError::Invalid(_))),
            "{case}: {refused:?}"
        );
    }
    assert_eq!(catalog.recent(None, 10).await.expect("recent").len(), 2);
}

/// Recent calls are newest first, per subject or (with no subject) for
/// everyone, at most `limit` of them.
pub async fn recent_calls_are_newest_first(catalog: Arc<dyn CallCatalog>) {
    let mut written = Vec::new();
    for (subject, kind) in [
        ("apikey:alice", CallKind::Sql),
        ("apikey:bob", CallKind::Api),
        ("apikey:alice", CallKind::Graphql),
    ] {
        let record = NewCallRecord {
            kind,
            ..new_call_record(subject)
        };
        catalog.record(record.clone()).await.expect("record");
        written.push(record.id);
        tokio::time::sleep(TICK).await;
    }
    let [c1, c2, c3] = [0, 1, 2].map(|index| written[index].as_str());

    let alice = catalog
        .recent(Some("apikey:alice"), 10)
        .await
        .expect("recent");
    assert_eq!(call_ids(&alice), [c3, c1]);
    assert_eq!(alice[0].kind, CallKind::Graphql);
    let everyone = catalog.recent(None, 10).await.expect("recent");
    assert_eq!(call_ids(&everyone), [c3, c2, c1]);
    assert!(
        everyone
            .windows(2)
            .all(|pair| pair[0].created_at >= pair[1].created_at)
    );
    let newest_two = catalog.recent(None, 2).await.expect("recent");
    assert_eq!(call_ids(&newest_two), [c3, c2]);
    assert!(
        catalog
            .recent(Some("apikey:nobody"), 10)
            .await
            .expect("recent")
            .is_empty()
    );
}

/// Generates one `#[tokio::test]` per [`AssetStore`] property in
/// [`crate::testing`]. `$make` is awaited and must yield
/// `(Arc<dyn AssetStore>, guard)`; the guard (a test database, say) lives until
/// the test ends.
#[macro_export]
macro_rules! asset_store_suite {
    ($make:expr) => {
        $crate::catalog_suite!(@tests $make;
            recorded_assets_read_back_exactly,
            lists_are_newest_first_and_page_by_cursor,
            an_idempotency_key_returns_the_owners_first_asset,
            racing_creates_with_one_key_record_one_asset,
            deleting_an_asset_frees_its_key,
            invalid_assets_are_refused,
        );
    };
}

/// Generates one `#[tokio::test]` per [`CallCatalog`] property in
/// [`crate::testing`]. `$make` is awaited and must yield
/// `(Arc<dyn CallCatalog>, guard)`; the guard lives until the test ends.
#[macro_export]
macro_rules! call_catalog_suite {
    ($make:expr) => {
        $crate::catalog_suite!(@tests $make;
            call_records_read_back_exactly,
            recent_calls_are_newest_first,
        );
    };
}

/// A session of `subject` that declared elicitation and sent its info.
pub fn new_session(subject: &str) -> NewSession {
    NewSession {
        id: generate_id().expect("the OS random source"),
        protocol_version: "2025-11-25".to_owned(),
        client_capabilities: serde_json::json!({"elicitation": {}, "tasks": {"requests": {}}}),
        client_info: Some(serde_json::json!({"name": "example-client", "version": "1.0.0"})),
        subject: subject.to_owned(),
    }
}

/// A session reads back as it was opened, with its log level once set, and is
/// still there after a touch; ids are unique and invalid sessions refused.
pub async fn sessions_read_back_exactly(store: Arc<dyn SessionStore>) {
    let opened = new_session("apikey:alice");
    let before = OffsetDateTime::now_utc() - Duration::from_secs(5);
    store
        .create_session(opened.clone(), ROOMY)
        .await
        .expect("create");
    let (session, now) = store
        .find_session(&opened.id, Duration::from_secs(3600))
        .await
        .expect("find")
        .expect("the session");
    assert_eq!(session.id, opened.id);
    assert_eq!(session.protocol_version, opened.protocol_version);
    assert_eq!(session.client_capabilities, opened.client_capabilities);
    assert_eq!(session.client_info, opened.client_info);
    assert_eq!(session.subject, opened.subject);
    assert_eq!(session.log_level, None);
    assert!(session.created_at >= before && session.created_at <= now);
    assert_eq!(session.last_used_at, session.created_at);

    store
        .set_session_log_level(&opened.id, "warning")
        .await
        .expect("set level");
    tokio::time::sleep(TICK).await;
    store.touch_session(&opened.id).await.expect("touch");
    let (touched, _) = store
        .find_session(&opened.id, Duration::from_secs(3600))
        .await
        .expect("find")
        .expect("the session");
    assert_eq!(touched.log_level.as_deref(), Some("warning"));
    assert!(touched.last_used_at > session.last_used_at);
    assert_eq!(touched.created_at, session.created_at);

    let mut without_info = new_session("anonymous");
    without_info.client_info = None;
    store
        .create_session(without_info.clone(), ROOMY)
        .await
        .expect("create");
    let (read, _) = store
        .find_session(&without_info.id, Duration::from_secs(3600))
        .await
        .expect("find")
        .expect("the session");
    assert_eq!(read.client_info, None);

    assert!(matches!(
        store.create_session(opened.clone(), ROOMY).await,
        Err(CatalogError::Duplicate)
    ));
    let spoilers: [Spoil<NewSession>; 4] = [
        |session| session.id.clear(),
        |session| session.protocol_version.clear(),
        |session| session.subject.clear(),
        |session| session.client_capabilities = serde_json::json!([]),
    ];
    for spoil in spoilers {
        let mut session = new_session("apikey:alice");
        spoil(&mut session);
        assert!(matches!(
            store.create_session(session, ROOMY).await,
            Err(CatalogError::Invalid(_))
        ));
    }
    assert!(
        store
            .find_session("no-such-session", Duration::from_secs(3600))
            .await
            .expect("find")
            .is_none()
    );
}

/// An answer is used once: the first mark wins, every later one (from any
/// replica: the store is the arbiter) is refused while the mark lives; concurrent
/// marks of one answer let exactly one through; a mark past its lifetime is swept
/// and the key can be marked again.
pub async fn an_answer_is_used_once(store: Arc<dyn SessionStore>) {
    let long = Duration::from_secs(900);
    let key = format!("consent:{}", crate::generate_id().expect("id"));
    assert!(store.use_answer_once(&key, long).await.expect("mark"));
    assert!(!store.use_answer_once(&key, long).await.expect("mark"));
    assert!(!store.use_answer_once(&key, long).await.expect("mark"));

    let raced = format!("consent:{}", crate::generate_id().expect("id"));
    let racers: Vec<_> = (0..8)
        .map(|_| {
            let store = Arc::clone(&store);
            let raced = raced.clone();
            tokio::spawn(async move { store.use_answer_once(&raced, long).await.expect("mark") })
        })
        .collect();
    let mut marks = Vec::new();
    for racer in racers {
        marks.push(racer.await.expect("racer"));
    }
    assert_eq!(marks.iter().filter(|&&won| won).count(), 1, "{marks:?}");

    let brief = format!("consent:{}", crate::generate_id().expect("id"));
    assert!(
        store
            .use_answer_once(&brief, Duration::from_millis(100))
            .await
            .expect("mark")
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    store
        .delete_idle_sessions(Duration::from_secs(3600), 100)
        .await
        .expect("sweep");
    assert!(
        store.use_answer_once(&brief, long).await.expect("mark"),
        "a mark past its lifetime is gone"
    );
    assert!(
        !store.use_answer_once(&key, long).await.expect("mark"),
        "a live mark stays"
    );
}

/// A session idle for longer than the timeout is not found, and the sweep
/// deletes exactly the idle ones, telling each one's version and how long it was in
/// use (creation to last use); a deleted session is gone.
pub async fn idle_and_deleted_sessions_are_gone(store: Arc<dyn SessionStore>) {
    let mut idle = new_session("apikey:alice");
    idle.protocol_version = "2025-06-18".to_owned();
    let started = std::time::Instant::now();
    store
        .create_session(idle.clone(), ROOMY)
        .await
        .expect("create");
    tokio::time::sleep(Duration::from_millis(200)).await;
    store.touch_session(&idle.id).await.expect("touch");
    // Its life can have been no longer than this (timestamps are kept to the millisecond).
    let longest = started.elapsed() + Duration::from_millis(5);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let fresh = new_session("apikey:alice");
    store
        .create_session(fresh.clone(), ROOMY)
        .await
        .expect("create");

    let short = Duration::from_millis(150);
    assert!(
        store
            .find_session(&idle.id, short)
            .await
            .expect("find")
            .is_none()
    );
    assert!(
        store
            .find_session(&fresh.id, short)
            .await
            .expect("find")
            .is_some()
    );
    let ended = store.delete_idle_sessions(short, 100).await.expect("sweep");
    assert_eq!(ended.len(), 1, "only the idle session: {ended:?}");
    assert_eq!(ended[0].protocol_version, "2025-06-18");
    assert!(
        ended[0].lasted >= Duration::from_millis(195) && ended[0].lasted <= longest,
        "in use from its creation to its last use, not until the sweep: {:?}",
        ended[0].lasted
    );
    assert!(
        store
            .delete_idle_sessions(short, 100)
            .await
            .expect("sweep")
            .is_empty(),
        "a session is ended once"
    );
    assert!(
        store
            .find_session(&idle.id, Duration::from_secs(3600))
            .await
            .expect("find")
            .is_none()
    );

    assert!(store.delete_session(&fresh.id).await.expect("delete"));
    assert!(!store.delete_session(&fresh.id).await.expect("delete"));
    assert!(
        store
            .find_session(&fresh.id, Duration::from_secs(3600))
            .await
            .expect("find")
            .is_none()
    );
}

/// The idle sweep deletes at most its limit, the least recently used first, and the
/// next sweep takes the rest.
pub async fn the_idle_sweep_takes_at_most_its_limit(store: Arc<dyn SessionStore>) {
    let mut created = Vec::new();
    for _ in 0..3 {
        let session = new_session("apikey:carol");
        store
            .create_session(session.clone(), ROOMY)
            .await
            .expect("create");
        created.push(session.id);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let short = Duration::from_millis(100);
    let first = store.delete_idle_sessions(short, 2).await.expect("sweep");
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(
        store
            .find_session(&created[2], Duration::from_secs(3600))
            .await
            .expect("find")
            .is_some(),
        "the most recently used one waits for the next sweep"
    );
    let rest = store.delete_idle_sessions(short, 2).await.expect("sweep");
    assert_eq!(rest.len(), 1, "{rest:?}");
}

/// How many sessions per subject the tests allow where the cap is not tested.
const ROOMY: u32 = 100;

/// An answer is kept only for a question that waits, once, in its own session;
/// taken once; a forgotten question refuses its late answer; ending the session
/// drops its questions; every kept answer is signalled.
pub async fn answers_are_kept_only_for_waiting_questions(store: Arc<dyn SessionStore>) {
    let heard = Arc::new(std::sync::Mutex::new(Vec::new()));
    let hears = Arc::clone(&heard);
    store.set_answer_listener(Arc::new(move |signal| {
        hears.lock().expect("heard").push(signal);
    }));
    let session = new_session("apikey:alice");
    let other = new_session("apikey:alice");
    store
        .create_session(session.clone(), ROOMY)
        .await
        .expect("create");
    store
        .create_session(other.clone(), ROOMY)
        .await
        .expect("create");
    // PostgreSQL's listener connects in the background, and a NOTIFY sent before its
    // LISTEN is lost (by design: it costs only latency). Throwaway questions of a
    // session of their own are answered until one is heard, so the signals below go
    // to a listener that listens.
    let primer = new_session("apikey:alice");
    store
        .create_session(primer.clone(), ROOMY)
        .await
        .expect("create");
    let hang_guard = std::time::Instant::now();
    for attempt in 0u32.. {
        if !heard.lock().expect("heard").is_empty()
            || hang_guard.elapsed() > Duration::from_secs(30)
        {
            break;
        }
        let request = format!("primer-{attempt}");
        assert!(store.ask(&primer.id, &request).await.expect("ask"));
        assert!(
            store
                .put_answer(&primer.id, &request, serde_json::json!({}))
                .await
                .expect("put")
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !heard.lock().expect("heard").is_empty(),
        "the answer listener heard nothing in 30 s"
    );
    let answer = serde_json::json!({"action": "accept", "content": {"confirm": true}});
    let put = |session: &str, request: &str, answer: serde_json::Value| {
        let store = Arc::clone(&store);
        let (session, request) = (session.to_owned(), request.to_owned());
        async move {
            store
                .put_answer(&session, &request, answer)
                .await
                .expect("put")
        }
    };
    let take = |session: &str, request: &str| {
        let store = Arc::clone(&store);
        let (session, request) = (session.to_owned(), request.to_owned());
        async move { store.take_answer(&session, &request).await.expect("take") }
    };

    // Nobody asked: refused, nothing kept.
    assert!(!put(&session.id, "elicit-1", answer.clone()).await);
    assert!(store.ask(&session.id, "elicit-1").await.expect("ask"));
    assert!(matches!(
        store.ask(&session.id, "elicit-1").await,
        Err(CatalogError::Duplicate)
    ));
    assert!(!store.ask("no-such-session", "elicit-1").await.expect("ask"));
    assert_eq!(
        take(&session.id, "elicit-1").await,
        None,
        "not answered yet"
    );
    // The same request id in another session is another question.
    assert!(!put(&other.id, "elicit-1", answer.clone()).await);
    assert!(put(&session.id, "elicit-1", answer.clone()).await);
    assert!(
        !put(&session.id, "elicit-1", serde_json::json!({})).await,
        "a second answer is refused"
    );
    assert_eq!(take(&other.id, "elicit-1").await, None);
    assert_eq!(take(&session.id, "elicit-1").await, Some(answer));
    assert_eq!(take(&session.id, "elicit-1").await, None, "taken once");
    assert!(
        !put(&session.id, "elicit-1", serde_json::json!({})).await,
        "a late answer to an ended question is refused"
    );

    // A question nobody waits for any more refuses its answer.
    assert!(store.ask(&session.id, "elicit-2").await.expect("ask"));
    store
        .forget_question(&session.id, "elicit-2")
        .await
        .expect("forget");
    assert!(!put(&session.id, "elicit-2", serde_json::json!({})).await);

    // Ending the session drops its questions.
    assert!(store.ask(&session.id, "elicit-3").await.expect("ask"));
    assert!(store.delete_session(&session.id).await.expect("delete"));
    assert!(!put(&session.id, "elicit-3", serde_json::json!({})).await);

    // Each kept answer was signalled, once; PostgreSQL's arrive through NOTIFY.
    let expected = crate::AnswerSignal {
        session_id: session.id.clone(),
        request_id: "elicit-1".into(),
    };
    // All but the primers': a primer's signal may still be on its way.
    let heard_here = || {
        heard
            .lock()
            .expect("heard")
            .iter()
            .filter(|signal| signal.session_id != primer.id)
            .cloned()
            .collect::<Vec<_>>()
    };
    let hang_guard = std::time::Instant::now();
    while heard_here().is_empty() && hang_guard.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(heard_here(), vec![expected]);
}

/// A subject beyond its cap of sessions loses its least recently used ones, and
/// nobody else loses any.
pub async fn a_subject_beyond_its_session_cap_loses_its_least_recently_used(
    store: Arc<dyn SessionStore>,
) {
    let idle = Duration::from_secs(3600);
    let first = new_session("apikey:busy");
    let second = new_session("apikey:busy");
    let third = new_session("apikey:busy");
    let bystander = new_session("apikey:quiet");
    store
        .create_session(bystander.clone(), 2)
        .await
        .expect("create");
    store
        .create_session(first.clone(), 2)
        .await
        .expect("create");
    // Distinct instants, so "least recently used" has one answer (SQLite keeps
    // milliseconds).
    tokio::time::sleep(Duration::from_millis(5)).await;
    store
        .create_session(second.clone(), 2)
        .await
        .expect("create");
    tokio::time::sleep(Duration::from_millis(5)).await;
    // The first is used again: the second is now the least recently used.
    store.touch_session(&first.id).await.expect("touch");
    tokio::time::sleep(Duration::from_millis(5)).await;
    store
        .create_session(third.clone(), 2)
        .await
        .expect("create");
    let live = |id: String| {
        let store = Arc::clone(&store);
        async move { store.find_session(&id, idle).await.expect("find").is_some() }
    };
    assert!(live(first.id.clone()).await);
    assert!(
        !live(second.id.clone()).await,
        "the least recently used ended"
    );
    assert!(live(third.id.clone()).await, "the new session always stays");
    assert!(
        live(bystander.id.clone()).await,
        "another subject's session stays"
    );
}

fn new_prompt(name: &str, owner: &str) -> crate::NewPrompt {
    crate::NewPrompt {
        name: name.to_owned(),
        owner: owner.to_owned(),
        description: "Explore a table.".to_owned(),
        template: "Explore {{table}} and say what stands out.".to_owned(),
        arguments: vec![crate::prompts::PromptArgumentSpec {
            name: "table".to_owned(),
            description: Some("The table.".to_owned()),
            required: true,
        }],
        scripts: vec!["profile".to_owned()],
        shared_with: vec!["analyst".to_owned()],
    }
}

/// A generous owner limit, for tests about other things.
const ANY_NUMBER_OF_PROMPTS: u32 = 500;

/// A prompt reads back exactly, names are unique, an update keeps the name, owner
/// and creation time, a listing is newest first, and a deleted prompt is gone.
pub async fn prompts_read_back_update_and_delete(store: Arc<dyn crate::PromptLibrary>) {
    let created = store
        .create_prompt(new_prompt("explore", "apikey:alice"), ANY_NUMBER_OF_PROMPTS)
        .await
        .expect("create");
    assert_eq!(created.owner, "apikey:alice");
    assert_eq!(created.scripts, vec!["profile".to_owned()]);
    let read = store.prompt("explore").await.expect("read").expect("there");
    assert_eq!(read, created);
    assert!(matches!(
        store
            .create_prompt(new_prompt("explore", "apikey:bob"), ANY_NUMBER_OF_PROMPTS)
            .await,
        Err(CatalogError::Duplicate)
    ));
    let mut invalid = new_prompt("broken", "apikey:alice");
    invalid.template = "{{nope}}".to_owned();
    assert!(matches!(
        store.create_prompt(invalid, ANY_NUMBER_OF_PROMPTS).await,
        Err(CatalogError::Invalid(_))
    ));
    // Every field a caller writes has its cap, on create and on update alike.
    let oversized: [fn(&mut crate::NewPrompt); 4] = [
        |prompt| prompt.description = "d".repeat(crate::prompts::MAX_DESCRIPTION_BYTES + 1),
        |prompt| {
            prompt.arguments[0].description =
                Some("d".repeat(crate::prompts::MAX_ARGUMENT_DESCRIPTION_BYTES + 1));
        },
        |prompt| prompt.scripts = vec!["s".repeat(crate::prompts::MAX_REFERENCE_BYTES + 1)],
        |prompt| prompt.shared_with = vec!["p".repeat(crate::prompts::MAX_REFERENCE_BYTES + 1)],
    ];
    for oversize in oversized {
        let mut too_big = new_prompt("too-big", "apikey:alice");
        oversize(&mut too_big);
        assert!(matches!(
            store
                .create_prompt(too_big.clone(), ANY_NUMBER_OF_PROMPTS)
                .await,
            Err(CatalogError::Invalid(_))
        ));
        too_big.name = "explore".to_owned();
        assert!(matches!(
            store.update_prompt(too_big).await,
            Err(CatalogError::Invalid(_))
        ));
    }
    let mut change = new_prompt("explore", "apikey:someone-else");
    change.description = "Explore it well.".to_owned();
    change.shared_with = vec![crate::prompts::EVERYONE.to_owned()];
    let updated = store
        .update_prompt(change)
        .await
        .expect("update")
        .expect("there");
    assert_eq!(updated.description, "Explore it well.");
    assert_eq!(updated.owner, "apikey:alice", "an update keeps the owner");
    assert_eq!(updated.created_at, created.created_at);
    assert!(updated.updated_at >= created.updated_at);
    assert_eq!(
        store
            .update_prompt(new_prompt("absent", "apikey:alice"))
            .await
            .expect("update"),
        None
    );
    store
        .create_prompt(new_prompt("another", "apikey:bob"), ANY_NUMBER_OF_PROMPTS)
        .await
        .expect("create");
    let admin = crate::PromptViewer {
        subject: "apikey:root",
        persona: None,
        is_admin: true,
    };
    let names: Vec<String> = store
        .prompts(&admin, None, 10)
        .await
        .expect("list")
        .into_iter()
        .map(|prompt| prompt.name)
        .collect();
    assert_eq!(names, vec!["another".to_owned(), "explore".to_owned()]);
    assert!(store.delete_prompt("explore").await.expect("delete"));
    assert!(!store.delete_prompt("explore").await.expect("delete"));
    assert_eq!(store.prompt("explore").await.expect("read"), None);
}

/// One owner creates at most the limit given, even when the creates race; others
/// are not held back by it, and a deleted prompt frees its place.
pub async fn prompts_per_owner_stop_at_the_limit(store: Arc<dyn crate::PromptLibrary>) {
    let limit = 4;
    let racing: Vec<_> = (0..7)
        .map(|index| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .create_prompt(new_prompt(&format!("mine-{index}"), "apikey:alice"), limit)
                    .await
            })
        })
        .collect();
    let mut created = 0;
    for outcome in racing {
        match outcome.await.expect("joined") {
            Ok(_) => created += 1,
            Err(CatalogError::LimitReached(said)) => assert_eq!(said, limit),
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(created, limit, "exactly the limit is created");
    store
        .create_prompt(new_prompt("theirs", "apikey:bob"), limit)
        .await
        .expect("another owner is not held back");
    let admin = crate::PromptViewer {
        subject: "apikey:root",
        persona: None,
        is_admin: true,
    };
    let victim = store
        .prompts(&admin, None, 100)
        .await
        .expect("list")
        .into_iter()
        .find(|prompt| prompt.owner == "apikey:alice")
        .expect("one of alice's");
    assert!(store.delete_prompt(&victim.name).await.expect("delete"));
    store
        .create_prompt(new_prompt("mine-again", "apikey:alice"), limit)
        .await
        .expect("a deleted prompt frees its place");
}

/// A listing holds exactly what the viewer may see ([`crate::LibraryPrompt::visible_to`]),
/// newest first, and its pages, followed by their cursors, hold each such prompt
/// once.
pub async fn prompt_pages_hold_what_the_viewer_sees(store: Arc<dyn crate::PromptLibrary>) {
    let shared = |name: &str, owner: &str, with: &[&str]| {
        let mut prompt = new_prompt(name, owner);
        prompt.shared_with = with.iter().map(|entry| (*entry).to_owned()).collect();
        prompt
    };
    for prompt in [
        shared("alice-own", "apikey:alice", &[]),
        shared("for-analysts", "apikey:bob", &["analyst"]),
        shared("for-everyone", "apikey:bob", &[crate::prompts::EVERYONE]),
        shared("bob-own", "apikey:bob", &[]),
        shared("for-auditors", "apikey:carol", &["auditor", "ops"]),
        shared("for-both", "apikey:carol", &["ops", "analyst"]),
        shared("alice-shared", "apikey:alice", &["auditor"]),
    ] {
        store
            .create_prompt(prompt, ANY_NUMBER_OF_PROMPTS)
            .await
            .expect("create");
    }
    let viewers = [
        crate::PromptViewer {
            subject: "apikey:alice",
            persona: Some("analyst"),
            is_admin: false,
        },
        crate::PromptViewer {
            subject: "apikey:dave",
            persona: None,
            is_admin: false,
        },
        crate::PromptViewer {
            subject: "apikey:erin",
            persona: Some("auditor"),
            is_admin: false,
        },
        crate::PromptViewer {
            subject: "apikey:root",
            persona: Some("admin"),
            is_admin: true,
        },
    ];
    let admin = viewers[3];
    let everything = store.prompts(&admin, None, 100).await.expect("list");
    assert_eq!(everything.len(), 7);
    for viewer in viewers {
        let expected: Vec<String> = everything
            .iter()
            .filter(|prompt| viewer.sees(prompt))
            .map(|prompt| prompt.name.clone())
            .collect();
        let mut paged = Vec::new();
        let mut before = None;
        loop {
            let page = store
                .prompts(&viewer, before.as_ref(), 2)
                .await
                .expect("a page");
            assert!(page.len() <= 2);
            paged.extend(page.iter().map(|prompt| prompt.name.clone()));
            match page.last() {
                Some(last) if page.len() == 2 => before = Some(last.cursor()),
                _ => break,
            }
        }
        assert_eq!(paged, expected, "{viewer:?}");
    }
    let positions: Vec<_> = everything
        .iter()
        .map(|prompt| (prompt.created_at, prompt.name.clone()))
        .collect();
    assert!(
        positions.windows(2).all(|pair| pair[0] > pair[1]),
        "newest first: {positions:?}"
    );
}

/// Generates one `#[tokio::test]` per property of a [`crate::PromptLibrary`].
#[macro_export]
macro_rules! prompt_library_suite {
    ($make:expr) => {
        $crate::catalog_suite!(@tests $make;
            prompts_read_back_update_and_delete,
            prompts_per_owner_stop_at_the_limit,
            prompt_pages_hold_what_the_viewer_sees,
        );
    };
}

/// Generates one `#[tokio::test]` per property of a [`SessionStore`] from an
/// expression that yields `(Arc<dyn SessionStore>, guard)`.
#[macro_export]
macro_rules! session_store_suite {
    ($make:expr) => {
        $crate::catalog_suite!(@tests $make;
            sessions_read_back_exactly,
            idle_and_deleted_sessions_are_gone,
            the_idle_sweep_takes_at_most_its_limit,
            answers_are_kept_only_for_waiting_questions,
            a_subject_beyond_its_session_cap_loses_its_least_recently_used,
            an_answer_is_used_once,
        );
    };
}

/// The claims a sign-in gives a person: a subject, an e-mail address, names
/// with quotes and accents, roles in a list and in an object, a fraction and a
/// negative number.
pub fn principal_claims(sub: &str, email: &str) -> serde_json::Map<String, serde_json::Value> {
    let claims = serde_json::json!({
        "sub": sub,
        "email": email,
        "email_verified": true,
        "name": "Ålice «Q» O'Brien",
        "groups": ["analyst", "ops"],
        "realm_access": {"roles": ["analyst"]},
        "acr": 0.5,
        "offset": -3,
        "nickname": null,
    });
    match claims {
        serde_json::Value::Object(claims) => claims,
        _ => serde_json::Map::new(),
    }
}

/// `seconds` after a fixed instant: the principal suite's clock.
fn sighting(seconds: i64) -> OffsetDateTime {
    time::macros::datetime!(2026-12-16 00:00:00 UTC) + time::Duration::seconds(seconds)
}

/// A principal reads back with the claims it was remembered with; a later
/// sighting replaces them and an earlier one (a slower writer) does not; each
/// subject is one row whose sighting time moves with the latest claims; an
/// unknown subject has none.
pub async fn remembered_claims_read_back_and_the_latest_win(store: Arc<dyn crate::PrincipalStore>) {
    let alice = "oidc:alice-sub";
    let first = principal_claims("alice-sub", "Alice@Example.com");
    assert_eq!(store.claims_of(alice).await.expect("read"), None);
    store
        .remember(alice, &first, sighting(0))
        .await
        .expect("remember");
    assert_eq!(
        store.claims_of(alice).await.expect("read"),
        Some(first.clone())
    );

    let renamed = principal_claims("alice-sub", "alice@new.example");
    store
        .remember(alice, &renamed, sighting(60))
        .await
        .expect("remember");
    assert_eq!(
        store.claims_of(alice).await.expect("read"),
        Some(renamed.clone())
    );
    store
        .remember(alice, &first, sighting(30))
        .await
        .expect("an older sighting is no error");
    assert_eq!(
        store.claims_of(alice).await.expect("read"),
        Some(renamed.clone()),
        "an older sighting changes nothing"
    );

    let bob = principal_claims("bob-sub", "bob@corp.example");
    store
        .remember("oidc:bob-sub", &bob, sighting(0))
        .await
        .expect("remember");
    let nothing = serde_json::Map::new();
    store
        .remember("oidc:no-claims", &nothing, sighting(0))
        .await
        .expect("remember");
    assert_eq!(
        store.claims_of("oidc:bob-sub").await.expect("read"),
        Some(bob)
    );
    assert_eq!(
        store.claims_of("oidc:no-claims").await.expect("read"),
        Some(nothing)
    );
    assert_eq!(
        store.claims_of(alice).await.expect("read"),
        Some(renamed),
        "another subject's row is another row"
    );
    assert_eq!(store.claims_of("oidc:nobody").await.expect("read"), None);

    // Alice was seen last at 60 s, the others at 0 s, and alice is one row
    // however often she was remembered.
    assert_eq!(
        store
            .forget_unseen_before(sighting(60), 100)
            .await
            .expect("forget"),
        2
    );
    assert!(store.claims_of(alice).await.expect("read").is_some());
    assert_eq!(
        store
            .forget_unseen_before(sighting(61), 100)
            .await
            .expect("forget"),
        1
    );
    assert_eq!(store.claims_of(alice).await.expect("read"), None);
}

/// A subject that is empty, longer than 512 bytes or holds a NUL, and claims
/// over 16 KiB of JSON, are refused and change nothing; exactly at the bounds
/// they are kept.
pub async fn principals_beyond_the_bounds_are_refused(store: Arc<dyn crate::PrincipalStore>) {
    use crate::principals::{MAX_CLAIMS_BYTES, MAX_SUBJECT_BYTES, claims_bytes};
    let padded = |bytes: usize| {
        let mut claims = serde_json::Map::new();
        claims.insert("pad".into(), serde_json::json!(""));
        let around = claims_bytes(&claims);
        claims.insert("pad".into(), serde_json::json!("x".repeat(bytes - around)));
        claims
    };
    let at_the_bound = padded(MAX_CLAIMS_BYTES);
    assert_eq!(claims_bytes(&at_the_bound), MAX_CLAIMS_BYTES);
    store
        .remember("oidc:large", &at_the_bound, sighting(0))
        .await
        .expect("16 KiB of claims are kept");
    assert_eq!(
        store.claims_of("oidc:large").await.expect("read"),
        Some(at_the_bound.clone())
    );
    let over = padded(MAX_CLAIMS_BYTES + 1);
    for subject in ["oidc:large", "oidc:too-large"] {
        assert!(matches!(
            store.remember(subject, &over, sighting(60)).await,
            Err(CatalogError::Invalid(_))
        ));
    }
    assert_eq!(
        store.claims_of("oidc:large").await.expect("read"),
        Some(at_the_bound),
        "a refused write leaves the row as it was"
    );
    assert_eq!(store.claims_of("oidc:too-large").await.expect("read"), None);

    // Two bytes a character: the bound counts bytes.
    let longest = "é".repeat(MAX_SUBJECT_BYTES / 2);
    let claims = principal_claims("é", "e@example.com");
    store
        .remember(&longest, &claims, sighting(0))
        .await
        .expect("a 512-byte subject is kept");
    assert_eq!(
        store.claims_of(&longest).await.expect("read"),
        Some(claims.clone())
    );
    for subject in [format!("{longest}x"), String::new(), "oidc:a\0b".to_owned()] {
        assert!(
            matches!(
                store.remember(&subject, &claims, sighting(0)).await,
                Err(CatalogError::Invalid(_))
            ),
            "{subject:?}"
        );
    }
}

/// Forgetting takes the principals last seen before the cutoff, those seen
/// longest ago first, at most the limit at a time; a principal seen again since
/// stays.
pub async fn principals_unseen_since_the_cutoff_are_forgotten_in_batches(
    store: Arc<dyn crate::PrincipalStore>,
) {
    let claims = principal_claims("someone", "someone@example.com");
    for second in 0..5 {
        store
            .remember(&format!("oidc:old-{second}"), &claims, sighting(second))
            .await
            .expect("remember");
    }
    store
        .remember("oidc:fresh", &claims, sighting(100))
        .await
        .expect("remember");
    store
        .remember("oidc:again", &claims, sighting(0))
        .await
        .expect("remember");
    store
        .remember("oidc:again", &claims, sighting(200))
        .await
        .expect("seen again");
    let remembered = |subject: String| {
        let store = Arc::clone(&store);
        async move { store.claims_of(&subject).await.expect("read").is_some() }
    };
    // `oidc:again` was seen at 0 s too, but its row says 200 s.
    let mut batches = Vec::new();
    loop {
        let forgotten = store
            .forget_unseen_before(sighting(5), 2)
            .await
            .expect("forget");
        batches.push(forgotten);
        if forgotten < 2 {
            break;
        }
    }
    assert_eq!(batches, vec![2, 2, 1]);
    for second in 0..5 {
        assert!(!remembered(format!("oidc:old-{second}")).await);
    }
    assert!(remembered("oidc:fresh".into()).await);
    assert!(remembered("oidc:again".into()).await);

    // Oldest first: of two due, a batch of one takes the one seen longer ago.
    store
        .remember("oidc:older", &claims, sighting(10))
        .await
        .expect("remember");
    store
        .remember("oidc:newer", &claims, sighting(20))
        .await
        .expect("remember");
    assert_eq!(
        store
            .forget_unseen_before(sighting(150), 1)
            .await
            .expect("forget"),
        1
    );
    assert!(!remembered("oidc:older".into()).await);
    assert!(remembered("oidc:newer".into()).await);
    assert_eq!(
        store
            .forget_unseen_before(sighting(150), 100)
            .await
            .expect("forget"),
        2,
        "the newer and the fresh"
    );
    assert!(remembered("oidc:again".into()).await);
    assert_eq!(
        store
            .forget_unseen_before(sighting(150), 100)
            .await
            .expect("forget"),
        0
    );
}

/// Property: whatever claims a subject is remembered with (any JSON object of
/// nulls, booleans, integers, any text and nested arrays and objects) read back
/// exactly. Floats are left out: JSON text does not promise a float's every
/// bit back without serde_json's `float_roundtrip`.
///
/// Runs on the multi-threaded runtime the suite macros give: each case waits on
/// the store from the property's synchronous body.
pub async fn what_is_remembered_is_read_back(store: Arc<dyn crate::PrincipalStore>) {
    use proptest::prelude::*;
    use proptest::test_runner::{TestCaseError, TestRunner};
    use serde_json::{Map, Value};

    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        "(?s).{0,24}".prop_map(Value::from),
    ];
    let value = leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("(?s).{0,8}", inner, 0..4)
                .prop_map(|object| Value::Object(object.into_iter().collect())),
        ]
    });
    let principal = (
        "\\PC{1,64}",
        proptest::collection::btree_map("(?s).{0,12}", value, 0..8),
    );
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let handle = tokio::runtime::Handle::current();
    // Every case is a later sighting than the one before, so its claims win.
    let sightings = std::sync::atomic::AtomicI64::new(0);
    let failed = |error: CatalogError| TestCaseError::fail(error.to_string());
    let outcome = tokio::task::block_in_place(|| {
        runner.run(&principal, |(subject, claims)| {
            let subject = format!("oidc:{subject}");
            let claims: Map<String, Value> = claims.into_iter().collect();
            let now = sighting(sightings.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
            handle.block_on(async {
                store
                    .remember(&subject, &claims, now)
                    .await
                    .map_err(failed)?;
                let read = store.claims_of(&subject).await.map_err(failed)?;
                prop_assert_eq!(read, Some(claims));
                Ok(())
            })
        })
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// Generates one `#[tokio::test]` per property of a
/// [`PrincipalStore`](crate::PrincipalStore) from an expression that yields
/// `(Arc<dyn PrincipalStore>, guard)`.
#[macro_export]
macro_rules! principal_store_suite {
    ($make:expr) => {
        $crate::catalog_suite!(@tests $make;
            remembered_claims_read_back_and_the_latest_win,
            principals_beyond_the_bounds_are_refused,
            principals_unseen_since_the_cutoff_are_forgotten_in_batches,
            what_is_remembered_is_read_back,
        );
    };
}

/// The test generator behind [`asset_store_suite!`](crate::asset_store_suite)
/// and [`call_catalog_suite!`](crate::call_catalog_suite).
#[doc(hidden)]
#[macro_export]
macro_rules! catalog_suite {
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
