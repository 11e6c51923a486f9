//! The behaviour every [`PortalStore`] must have, as test functions any
//! backend can run: one source for the memory store and the database backends.
//! Use [`portal_store_suite!`](crate::portal_store_suite) to generate one
//! `#[tokio::test]` per property.
//!
//! Times are whole seconds from [`base_time`], so a backend that keeps
//! milliseconds or microseconds reads back what was written.

use std::sync::Arc;

use sha2::{Digest, Sha256};
use time::{Duration, OffsetDateTime};

use crate::store::{PendingLogin, PortalSession, PortalStore, StoreError};

/// The suite's `now`: the wall clock to the whole second.
#[must_use]
pub fn base_time() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(0).unwrap_or(now)
}

/// The SHA-256 (hex) of `seed`: a well-formed hash for a row's key.
#[must_use]
pub fn hash_of(seed: &str) -> String {
    hex::encode(Sha256::digest(seed.as_bytes()))
}

/// A login made at `at` for ten minutes.
#[must_use]
pub fn new_login(seed: &str, at: OffsetDateTime) -> PendingLogin {
    PendingLogin {
        state_hash: hash_of(seed),
        verifier: format!("verifier-{seed}"),
        return_to: "/portal".to_owned(),
        created_at: at,
        expires_at: at + Duration::minutes(10),
    }
}

/// A session of `subject` made at `at` for eight hours.
#[must_use]
pub fn new_session(seed: &str, subject: &str, at: OffsetDateTime) -> PortalSession {
    PortalSession {
        id_hash: hash_of(seed),
        subject: subject.to_owned(),
        display_name: format!("{subject} (shown)"),
        roles: vec!["analyst".to_owned(), "reader".to_owned()],
        administrator: false,
        created_at: at,
        expires_at: at + Duration::hours(8),
    }
}

/// A login is taken once, and not after it expired.
pub async fn logins_are_taken_once_and_not_after_expiry(store: Arc<dyn PortalStore>) {
    let now = base_time();
    let login = new_login("one", now);
    store.begin_login(&login, 10).await.expect("begin");
    assert_eq!(
        store
            .take_login(&login.state_hash, now)
            .await
            .expect("take"),
        Some(login.clone())
    );
    assert_eq!(
        store
            .take_login(&login.state_hash, now)
            .await
            .expect("take"),
        None
    );
    let late = new_login("late", now);
    store.begin_login(&late, 10).await.expect("begin");
    assert_eq!(
        store
            .take_login(&late.state_hash, late.expires_at)
            .await
            .expect("take"),
        None,
        "a login is over at exactly its expiry"
    );
}

/// Logins beyond the cap are refused; a taken state cannot be reused.
pub async fn logins_beyond_the_cap_or_twice_are_refused(store: Arc<dyn PortalStore>) {
    let now = base_time();
    store.begin_login(&new_login("a", now), 2).await.expect("a");
    assert!(matches!(
        store.begin_login(&new_login("a", now), 2).await,
        Err(StoreError::Conflict(_))
    ));
    store.begin_login(&new_login("b", now), 2).await.expect("b");
    assert!(matches!(
        store.begin_login(&new_login("c", now), 2).await,
        Err(StoreError::Full(_))
    ));
}

/// Records that break a bound are refused before anything is written.
pub async fn bounds_are_checked_before_anything_is_written(store: Arc<dyn PortalStore>) {
    let now = base_time();
    let mut login = new_login("bad", now);
    login.state_hash = "not a hash".to_owned();
    assert!(matches!(
        store.begin_login(&login, 10).await,
        Err(StoreError::Invalid(_))
    ));
    let mut session = new_session("bad", "oidc:alice", now);
    session.roles = vec!["r".repeat(crate::store::MAX_ROLE_BYTES + 1)];
    assert!(matches!(
        store.create_session(&session, 5).await,
        Err(StoreError::Invalid(_))
    ));
    assert_eq!(
        store.session(&session.id_hash, now).await.expect("read"),
        None
    );
}

/// A session reads back as written until it expires, and ends when asked.
pub async fn sessions_read_back_until_they_expire_or_end(store: Arc<dyn PortalStore>) {
    let now = base_time();
    let mut session = new_session("s1", "oidc:alice", now);
    session.administrator = true;
    store.create_session(&session, 5).await.expect("create");
    assert_eq!(
        store.session(&session.id_hash, now).await.expect("read"),
        Some(session.clone())
    );
    assert_eq!(
        store
            .session(&session.id_hash, session.expires_at)
            .await
            .expect("read"),
        None,
        "a session is over at exactly its expiry"
    );
    assert!(matches!(
        store.create_session(&session, 5).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(store.end_session(&session.id_hash).await.expect("end"));
    assert!(!store.end_session(&session.id_hash).await.expect("end"));
    assert_eq!(
        store.session(&session.id_hash, now).await.expect("read"),
        None
    );
}

/// A person keeps at most the cap of sessions: the oldest go; other people's
/// stay.
pub async fn a_person_keeps_at_most_the_cap_of_sessions(store: Arc<dyn PortalStore>) {
    let now = base_time();
    let bob = new_session("bob", "oidc:bob", now);
    store.create_session(&bob, 2).await.expect("bob");
    let sessions: Vec<PortalSession> = (0..4)
        .map(|index| {
            new_session(
                &format!("alice-{index}"),
                "oidc:alice",
                now + Duration::seconds(index),
            )
        })
        .collect();
    for session in &sessions {
        store.create_session(session, 2).await.expect("create");
    }
    let mut kept = Vec::new();
    for session in &sessions {
        kept.push(
            store
                .session(&session.id_hash, now)
                .await
                .expect("read")
                .is_some(),
        );
    }
    assert_eq!(kept, [false, false, true, true]);
    assert!(
        store
            .session(&bob.id_hash, now)
            .await
            .expect("read")
            .is_some()
    );
}

/// A sweep removes what expired, in batches, and nothing else.
pub async fn sweeps_remove_only_what_expired_in_batches(store: Arc<dyn PortalStore>) {
    let now = base_time();
    for index in 0..3 {
        let mut session = new_session(&format!("old-{index}"), "oidc:carol", now);
        session.created_at = now - Duration::hours(9);
        session.expires_at = now - Duration::hours(1);
        store.create_session(&session, 10).await.expect("old");
        let mut login = new_login(&format!("old-{index}"), now);
        login.created_at = now - Duration::hours(1);
        login.expires_at = now - Duration::minutes(50);
        store.begin_login(&login, 10).await.expect("old login");
    }
    let live = new_session("live", "oidc:carol", now);
    store.create_session(&live, 10).await.expect("live");
    let fresh = new_login("fresh", now);
    store.begin_login(&fresh, 10).await.expect("fresh");
    let first = store.sweep(now, 2).await.expect("sweep");
    assert_eq!((first.sessions, first.logins), (2, 2));
    let second = store.sweep(now, 2).await.expect("sweep");
    assert_eq!((second.sessions, second.logins), (1, 1));
    let third = store.sweep(now, 2).await.expect("sweep");
    assert_eq!((third.sessions, third.logins), (0, 0));
    assert!(
        store
            .session(&live.id_hash, now)
            .await
            .expect("read")
            .is_some()
    );
    assert!(
        store
            .take_login(&fresh.state_hash, now)
            .await
            .expect("take")
            .is_some()
    );
}

/// Racing takes of one login give it to one taker.
pub async fn racing_takes_of_one_login_give_it_once(store: Arc<dyn PortalStore>) {
    let now = base_time();
    let login = new_login("race", now);
    store.begin_login(&login, 10).await.expect("begin");
    let mut takes = Vec::new();
    for _ in 0..8 {
        let store = Arc::clone(&store);
        let state_hash = login.state_hash.clone();
        takes.push(tokio::spawn(async move {
            store.take_login(&state_hash, now).await
        }));
    }
    let mut got = 0;
    for take in takes {
        got += usize::from(take.await.expect("joined").expect("take").is_some());
    }
    assert_eq!(got, 1);
}

/// Generates one `#[tokio::test]` per property of [`crate::testing`] for the
/// store `$make` makes: an expression whose future gives `(store, guard)`, the
/// guard kept alive for the test (a database, a schema).
#[macro_export]
macro_rules! portal_store_suite {
    ($make:expr) => {
        $crate::portal_store_suite!(@tests $make;
            logins_are_taken_once_and_not_after_expiry,
            logins_beyond_the_cap_or_twice_are_refused,
            bounds_are_checked_before_anything_is_written,
            sessions_read_back_until_they_expire_or_end,
            a_person_keeps_at_most_the_cap_of_sessions,
            sweeps_remove_only_what_expired_in_batches,
            racing_takes_of_one_login_give_it_once,
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
