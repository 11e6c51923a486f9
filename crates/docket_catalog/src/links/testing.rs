//! The behaviour every [`LinkStore`] must have, as test functions any
//! implementation can run; [`link_store_suite!`](crate::link_store_suite)
//! generates one `#[tokio::test]` per property. Each function expects an empty
//! store of its own. Times are the suite's own clock, whole milliseconds after
//! a fixed instant, so SQLite's millisecond text keeps them exactly.

use std::collections::HashSet;
use std::sync::Arc;

use time::OffsetDateTime;
use time::macros::datetime;

use super::{LinkKey, LinkStore, NewShare, Share, ShareAudience};
use crate::{CatalogError, generate_id};

/// `seconds` after a fixed instant: the suite's clock.
pub fn at(seconds: i64) -> OffsetDateTime {
    datetime!(2026-12-19 00:00:00 UTC) + time::Duration::seconds(seconds)
}

/// A key called `kid`, made at `at(seconds)`.
pub fn key(kid: &str, seconds: i64) -> LinkKey {
    LinkKey {
        kid: kid.to_owned(),
        secret: "ab".repeat(32),
        created_at: at(seconds),
    }
}

/// A share of `asset_id` by `owner` to `audience`, made at `at(0)`, expiring an
/// hour later.
pub fn new_share(owner: &str, asset_id: &str, audience: ShareAudience) -> NewShare {
    NewShare {
        id: generate_id().expect("OS random source"),
        asset_id: asset_id.to_owned(),
        owner: owner.to_owned(),
        audience,
        expires_at: at(3600),
        created_at: at(0),
    }
}

/// Keys are added by compare-and-set on the newest, read newest first, and old
/// ones are removed but never the newest.
pub async fn link_keys_rotate_by_compare_and_set(store: Arc<dyn LinkStore>) {
    assert!(store.link_keys().await.expect("keys").is_empty());
    assert!(
        store
            .add_link_key(&key("k1", 0), None)
            .await
            .expect("first")
    );
    // A replica that also saw no key loses the race.
    assert!(
        !store
            .add_link_key(&key("k1b", 0), None)
            .await
            .expect("lost")
    );
    // A replica that rotates from a key that is no longer the newest loses too.
    assert!(
        store
            .add_link_key(&key("k2", 10), Some("k1"))
            .await
            .expect("second")
    );
    assert!(
        !store
            .add_link_key(&key("k3", 20), Some("k1"))
            .await
            .expect("stale")
    );
    let kids: Vec<String> = store
        .link_keys()
        .await
        .expect("keys")
        .into_iter()
        .map(|key| key.kid)
        .collect();
    assert_eq!(kids, ["k2", "k1"]);
    let read = store.link_keys().await.expect("keys");
    assert_eq!(read[0], key("k2", 10), "a key reads back exactly");
    assert_eq!(
        store.remove_link_keys_before(at(5)).await.expect("remove"),
        1
    );
    // Even when every key is old, the newest stays: links are still signed with it.
    assert_eq!(
        store
            .remove_link_keys_before(at(100))
            .await
            .expect("remove"),
        0
    );
    let kids: Vec<String> = store
        .link_keys()
        .await
        .expect("keys")
        .into_iter()
        .map(|key| key.kid)
        .collect();
    assert_eq!(kids, ["k2"]);
    let mut bad = key("k 4", 30);
    assert!(matches!(
        store.add_link_key(&bad, Some("k2")).await,
        Err(CatalogError::Invalid(_))
    ));
    bad.kid = "k4".into();
    bad.secret = String::new();
    assert!(matches!(
        store.add_link_key(&bad, Some("k2")).await,
        Err(CatalogError::Invalid(_))
    ));
}

/// A share reads back as made, with every audience kind; listings are the
/// owner's, of one asset when asked, newest first.
pub async fn shares_read_back_and_list_newest_first(store: Arc<dyn LinkStore>) {
    let asset = generate_id().expect("random");
    let other_asset = generate_id().expect("random");
    let mut made = Vec::new();
    for (second, audience) in [
        ShareAudience::People(vec!["bob".into(), "oidc:ünïcode".into()]),
        ShareAudience::SignedIn,
        ShareAudience::Public,
    ]
    .into_iter()
    .enumerate()
    {
        let mut share = new_share("alice", &asset, audience);
        share.created_at = at(i64::try_from(second).expect("small"));
        made.push(store.create_share(&share, 10).await.expect("create"));
    }
    let mut elsewhere = new_share("alice", &other_asset, ShareAudience::SignedIn);
    elsewhere.created_at = at(5);
    store.create_share(&elsewhere, 10).await.expect("create");
    store
        .create_share(&new_share("carol", &asset, ShareAudience::Public), 10)
        .await
        .expect("create");
    for share in &made {
        assert_eq!(share.open_count, 0);
        assert_eq!(share.revoked_at, None);
        assert_eq!(share.last_opened_at, None);
        assert_eq!(
            store.share(&share.id).await.expect("read").as_ref(),
            Some(share)
        );
    }
    let listed: Vec<Share> = store
        .list_shares("alice", Some(&asset), 10)
        .await
        .expect("list");
    let ids: Vec<&str> = listed.iter().map(|share| share.id.as_str()).collect();
    let expected: Vec<&str> = made.iter().rev().map(|share| share.id.as_str()).collect();
    assert_eq!(ids, expected);
    assert_eq!(
        store
            .list_shares("alice", None, 10)
            .await
            .expect("list")
            .len(),
        4
    );
    assert_eq!(
        store
            .list_shares("alice", None, 2)
            .await
            .expect("list")
            .len(),
        2
    );
    assert!(
        store
            .share(&generate_id().expect("random"))
            .await
            .expect("read")
            .is_none()
    );
    // A taken id is a duplicate.
    let mut again = new_share("alice", &asset, ShareAudience::SignedIn);
    again.id.clone_from(&made[0].id);
    assert_eq!(
        store.create_share(&again, 10).await,
        Err(CatalogError::Duplicate)
    );
}

/// Shares that break the rules are refused before anything is written.
pub async fn invalid_shares_are_refused(store: Arc<dyn LinkStore>) {
    let spoils: [fn(&mut NewShare); 4] = [
        |share| share.audience = ShareAudience::People(Vec::new()),
        |share| share.audience = ShareAudience::People(vec![String::new()]),
        |share| share.audience = ShareAudience::People(vec!["p".into(); 51]),
        |share| share.expires_at = share.created_at,
    ];
    for spoil in spoils {
        let mut share = new_share("alice", "asset", ShareAudience::Public);
        spoil(&mut share);
        assert!(matches!(
            store.create_share(&share, 10).await,
            Err(CatalogError::Invalid(_))
        ));
    }
    assert!(
        store
            .list_shares("alice", None, 10)
            .await
            .expect("list")
            .is_empty()
    );
}

/// An owner holds at most the limit of shares, also when creates race.
pub async fn shares_per_owner_stop_at_the_limit(store: Arc<dyn LinkStore>) {
    let mut racers = Vec::new();
    for _ in 0..8 {
        let store = Arc::clone(&store);
        racers.push(tokio::spawn(async move {
            store
                .create_share(&new_share("alice", "asset", ShareAudience::SignedIn), 3)
                .await
        }));
    }
    let mut created = 0;
    for racer in racers {
        match racer.await.expect("joined") {
            Ok(_) => created += 1,
            Err(CatalogError::LimitReached(3)) => {}
            Err(other) => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(created, 3);
    // Another owner has a limit of their own.
    store
        .create_share(&new_share("bob", "asset", ShareAudience::SignedIn), 3)
        .await
        .expect("bob's first");
}

/// An open is counted only while the share is live: a revoked or expired share
/// opens no more and counts nothing.
pub async fn opens_are_counted_only_while_live(store: Arc<dyn LinkStore>) {
    let share = store
        .create_share(&new_share("alice", "asset", ShareAudience::Public), 10)
        .await
        .expect("create");
    let opened = store
        .record_open(&share.id, at(10))
        .await
        .expect("open")
        .expect("live");
    assert_eq!(opened.open_count, 1);
    assert_eq!(opened.last_opened_at, Some(at(10)));
    let opened = store
        .record_open(&share.id, at(20))
        .await
        .expect("open")
        .expect("live");
    assert_eq!(opened.open_count, 2);
    assert_eq!(opened.last_opened_at, Some(at(20)));
    // At its expiry it is over.
    assert_eq!(
        store.record_open(&share.id, at(3600)).await.expect("open"),
        None
    );
    assert!(store.revoke_share(&share.id, at(30)).await.expect("revoke"));
    assert!(!store.revoke_share(&share.id, at(31)).await.expect("again"));
    assert_eq!(
        store.record_open(&share.id, at(40)).await.expect("open"),
        None
    );
    let read = store.share(&share.id).await.expect("read").expect("kept");
    assert_eq!(read.open_count, 2);
    assert_eq!(read.revoked_at, Some(at(30)));
    assert!(!read.is_live(at(40)));
    assert_eq!(
        store
            .record_open(&generate_id().expect("random"), at(10))
            .await
            .expect("open"),
        None
    );
    assert!(
        !store
            .revoke_share(&generate_id().expect("random"), at(10))
            .await
            .expect("revoke")
    );
}

/// The retention pass deletes shares that ended (expired or revoked) before
/// its cutoff, in batches, and keeps the live ones.
pub async fn ended_shares_are_deleted_in_batches(store: Arc<dyn LinkStore>) {
    let mut ended = HashSet::new();
    for _ in 0..3 {
        let mut share = new_share("alice", "asset", ShareAudience::Public);
        share.expires_at = at(60);
        ended.insert(store.create_share(&share, 100).await.expect("create").id);
    }
    let revoked = store
        .create_share(&new_share("alice", "asset", ShareAudience::SignedIn), 100)
        .await
        .expect("create");
    store
        .revoke_share(&revoked.id, at(30))
        .await
        .expect("revoke");
    ended.insert(revoked.id);
    let live = store
        .create_share(&new_share("alice", "asset", ShareAudience::SignedIn), 100)
        .await
        .expect("create");
    assert_eq!(
        store.delete_ended_shares(at(120), 3).await.expect("batch"),
        3
    );
    assert_eq!(
        store.delete_ended_shares(at(120), 3).await.expect("batch"),
        1
    );
    assert_eq!(
        store.delete_ended_shares(at(120), 3).await.expect("batch"),
        0
    );
    let left: Vec<String> = store
        .list_shares("alice", None, 10)
        .await
        .expect("list")
        .into_iter()
        .map(|share| share.id)
        .collect();
    assert_eq!(left, [live.id]);
    for id in ended {
        assert!(store.share(&id).await.expect("read").is_none());
    }
}

/// Generates one `#[tokio::test]` per [`LinkStore`] property in
/// [`crate::links::testing`]. `$make` is awaited and must yield
/// `(Arc<dyn LinkStore>, guard)`; the guard lives until the test ends.
#[macro_export]
macro_rules! link_store_suite {
    ($make:expr) => {
        $crate::link_store_suite!(@tests $make;
            link_keys_rotate_by_compare_and_set,
            shares_read_back_and_list_newest_first,
            invalid_shares_are_refused,
            shares_per_owner_stop_at_the_limit,
            opens_are_counted_only_while_live,
            ended_shares_are_deleted_in_batches,
        );
    };
    (@tests $make:expr; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let (store, _guard) = $make.await;
                $crate::links::testing::$name(store).await;
            }
        )*
    };
}
