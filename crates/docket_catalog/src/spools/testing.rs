//! The behaviour every [`SpoolStore`] must have, as test functions;
//! `spool_store_suite!` runs them against a backend.

use std::sync::Arc;

use serde_json::json;
use time::{Duration, OffsetDateTime};

use super::{NewSpool, SpoolProgress, SpoolState, SpoolStore};
use crate::CatalogError;

/// A fixed instant the suite counts from (stores take their times from callers).
fn base_time() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(1_800_000_000).expect("a valid instant")
}

/// A new spool of `owner`, made at `base + made` seconds, living `lives` seconds.
pub fn new_spool(owner: &str, made: i64, lives: i64) -> NewSpool {
    let created_at = base_time() + Duration::seconds(made);
    NewSpool {
        id: crate::generate_id().expect("OS random source"),
        owner: owner.to_owned(),
        tool: "trino_query".to_owned(),
        connection: "warehouse".to_owned(),
        columns: json!([{"name": "n", "type": "bigint"}, {"name": "s", "type": "varchar"}]),
        source_id: Some("20261206_052800_00042_abcde".to_owned()),
        created_at,
        expires_at: created_at + Duration::seconds(lives),
    }
}

/// A spool reads back as made, filling and empty; its progress reads back as
/// recorded; it reads as gone once expired and after it is deleted.
pub async fn spools_read_back_and_record_progress(store: Arc<dyn SpoolStore>) {
    let made = new_spool("apikey:alice", 0, 600);
    store.create_spool(made.clone(), 10).await.expect("create");
    let read = store
        .spool(&made.id, made.created_at)
        .await
        .expect("read")
        .expect("present");
    assert_eq!(
        (&read.owner, &read.tool, &read.connection, &read.columns),
        (&made.owner, &made.tool, &made.connection, &made.columns)
    );
    assert_eq!(read.source_id, made.source_id);
    assert_eq!(
        (read.created_at, read.expires_at),
        (made.created_at, made.expires_at)
    );
    assert_eq!(read.progress.state, SpoolState::Filling);
    assert_eq!(
        (
            read.progress.chunks,
            read.progress.rows,
            read.progress.bytes
        ),
        (0, 0, 0)
    );

    let progress = SpoolProgress {
        chunks: 3,
        rows: 2_500,
        bytes: 9_000_000_000,
        state: SpoolState::Failed,
        error: Some("the query failed midway".to_owned()),
        updated_at: made.created_at + Duration::seconds(5),
    };
    assert!(
        store
            .record_spool_progress(&made.id, &progress)
            .await
            .expect("record")
    );
    let read = store
        .spool(&made.id, made.created_at)
        .await
        .expect("read")
        .expect("present");
    assert_eq!(read.progress, progress);

    assert!(
        store
            .spool(&made.id, made.expires_at)
            .await
            .expect("read")
            .is_none(),
        "expired at its expiry"
    );
    let deleted = store.delete_spool(&made.id).await.expect("delete");
    assert_eq!(deleted.map(|spool| spool.id), Some(made.id.clone()));
    assert!(
        store
            .delete_spool(&made.id)
            .await
            .expect("delete")
            .is_none()
    );
    assert!(
        !store
            .record_spool_progress(&made.id, &progress)
            .await
            .expect("record"),
        "a deleted spool takes no progress"
    );
}

/// An owner holds at most its cap of live spools; expired ones do not count, and
/// other owners are not held back; spools out of bounds are refused.
pub async fn spools_per_owner_stop_at_the_cap(store: Arc<dyn SpoolStore>) {
    for _ in 0..2 {
        store
            .create_spool(new_spool("apikey:bob", 0, 60), 2)
            .await
            .expect("within the cap");
    }
    assert!(matches!(
        store.create_spool(new_spool("apikey:bob", 1, 60), 2).await,
        Err(CatalogError::LimitReached(2))
    ));
    store
        .create_spool(new_spool("apikey:carol", 1, 60), 2)
        .await
        .expect("another owner");
    store
        .create_spool(new_spool("apikey:bob", 61, 60), 2)
        .await
        .expect("the first two expired by then");

    let mut bad = new_spool("apikey:bob", 0, 60);
    bad.id = "not-hex".to_owned();
    assert!(matches!(
        store.create_spool(bad, 100).await,
        Err(CatalogError::Invalid(_))
    ));
    let mut bad = new_spool("apikey:bob", 0, 60);
    bad.columns = json!({"not": "an array"});
    assert!(matches!(
        store.create_spool(bad, 100).await,
        Err(CatalogError::Invalid(_))
    ));
    let made = new_spool("apikey:dave", 0, 60);
    store.create_spool(made.clone(), 100).await.expect("create");
    assert!(matches!(
        store.create_spool(made, 100).await,
        Err(CatalogError::Duplicate)
    ));
}

/// The sweep takes expired spools in batches, each once, and leaves live ones.
pub async fn expired_spools_are_taken_in_batches(store: Arc<dyn SpoolStore>) {
    let mut expired = Vec::new();
    for second in 0..5 {
        let spool = new_spool("apikey:erin", second, 10);
        expired.push(spool.id.clone());
        store.create_spool(spool, 100).await.expect("create");
    }
    let live = new_spool("apikey:erin", 0, 3_600);
    store.create_spool(live.clone(), 100).await.expect("create");
    let now = base_time() + Duration::seconds(100);
    let first = store.take_expired_spools(now, 3).await.expect("sweep");
    assert_eq!(first.len(), 3);
    let rest = store.take_expired_spools(now, 3).await.expect("sweep");
    assert_eq!(rest.len(), 2);
    let mut taken: Vec<String> = first
        .into_iter()
        .chain(rest)
        .map(|spool| spool.id)
        .collect();
    taken.sort();
    expired.sort();
    assert_eq!(taken, expired);
    assert!(
        store
            .take_expired_spools(now, 3)
            .await
            .expect("sweep")
            .is_empty()
    );
    assert!(store.spool(&live.id, now).await.expect("read").is_some());
}

/// Runs the spool behaviour suite against the store `$make` builds (an async
/// block giving the store and a guard kept alive for the test).
#[macro_export]
macro_rules! spool_store_suite {
    ($make:expr) => {
        $crate::spool_store_suite!(@tests $make;
            spools_read_back_and_record_progress,
            spools_per_owner_stop_at_the_cap,
            expired_spools_are_taken_in_batches,
        );
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (store, _guard) = $make.await;
                $crate::spools::testing::$name(store).await;
            }
        )*
    };
}
