//! The behaviour every [`OAuthStore`] must have, as test functions any backend
//! can run: one source for the memory store and the database backends, so they
//! cannot drift apart. Use [`oauth_store_suite!`](crate::oauth_store_suite) to
//! generate one `#[tokio::test]` per property.
//!
//! Times are whole seconds from [`base_time`] (the wall clock, truncated), so a
//! backend that keeps milliseconds or microseconds reads back what was written;
//! the caps of [`OAuthStore::put_once`] count against the wall clock, which
//! these times are close to.

use std::sync::Arc;

use serde_json::{Value, json};
use time::{Duration, OffsetDateTime};

use crate::store::{
    ClientRecord, Fetched, MAX_KEY_BYTES, MAX_PAYLOAD_BYTES, OAuthStore, OnceKind, RefreshToken,
    Rotation, SigningKey, StoreError, validate_payload,
};

/// The suite's `now`: the wall clock to the whole second.
pub fn base_time() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(0).unwrap_or(now)
}

/// A public client registered at `registered_at`, never used.
pub fn new_client(client_id: &str, registered_at: OffsetDateTime) -> ClientRecord {
    ClientRecord {
        client_id: client_id.to_owned(),
        metadata: json!({
            "redirect_uris": ["http://127.0.0.1:33418/callback"],
            "client_name": "Suite client",
            "token_endpoint_auth_method": "none",
            "grant_types": ["authorization_code", "refresh_token"],
        }),
        secret_hash: None,
        registered_at,
        last_used_at: None,
    }
}

/// A family's first refresh token, issued at `issued_at` for a day.
pub fn new_refresh(
    token_hash: &str,
    family: &str,
    client_id: &str,
    subject: &str,
    issued_at: OffsetDateTime,
) -> RefreshToken {
    RefreshToken {
        token_hash: token_hash.to_owned(),
        family: family.to_owned(),
        client_id: client_id.to_owned(),
        subject: subject.to_owned(),
        grant: json!({"scope": "mcp", "resource": "https://docket.example/mcp", "claims": {"sub": subject}}),
        issued_at,
        expires_at: issued_at + Duration::days(1),
    }
}

/// A signing key made at `created_at` (its key material is a placeholder: the
/// store keeps it as given).
pub fn new_signing_key(kid: &str, created_at: OffsetDateTime) -> SigningKey {
    SigningKey {
        kid: kid.to_owned(),
        private_pkcs8: "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg".to_owned(),
        public_jwk: json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
                           "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
                           "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}),
        created_at,
    }
}

/// A JSON string value that takes exactly `bytes` bytes as JSON.
fn json_of_size(bytes: usize) -> Value {
    Value::String("x".repeat(bytes.saturating_sub(2)))
}

fn is_invalid<T: std::fmt::Debug>(result: Result<T, StoreError>) -> bool {
    matches!(result, Err(StoreError::Invalid(_)))
}

/// Presents `presented` at `at`, replacing it by `next`.
async fn rotate(
    store: &Arc<dyn OAuthStore>,
    presented: &str,
    next: &str,
    at: OffsetDateTime,
) -> Rotation {
    store
        .rotate_refresh(presented, next, at)
        .await
        .expect("rotate")
}

/// Takes the record of `kind` under `key` at `now`.
async fn take(
    store: &Arc<dyn OAuthStore>,
    kind: OnceKind,
    key: &str,
    now: OffsetDateTime,
) -> Fetched {
    store.take_once(kind, key, now).await.expect("take")
}

/// The keys and payloads every backend refuses, checked by [`validate_payload`]
/// and by each write.
pub async fn payload_bounds_are_checked_before_anything_is_written(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    let longest = "k".repeat(MAX_KEY_BYTES);
    let too_long = "k".repeat(MAX_KEY_BYTES + 1);
    assert!(validate_payload(&longest, &json_of_size(MAX_PAYLOAD_BYTES)).is_ok());
    assert!(validate_payload("", &json!({})).is_err(), "an empty key");
    assert!(validate_payload(&too_long, &json!({})).is_err());
    assert!(validate_payload("a\0b", &json!({})).is_err(), "a NUL");
    assert!(validate_payload("k", &json_of_size(MAX_PAYLOAD_BYTES + 1)).is_err());

    // One-shot records.
    let later = now + Duration::minutes(10);
    for key in ["", too_long.as_str(), "a\0b"] {
        assert!(
            is_invalid(
                store
                    .put_once(OnceKind::Pending, key, &json!({}), later, 100)
                    .await
            ),
            "a once key of {} bytes",
            key.len()
        );
    }
    assert!(is_invalid(
        store
            .put_once(
                OnceKind::Code,
                "big",
                &json_of_size(MAX_PAYLOAD_BYTES + 1),
                later,
                100
            )
            .await
    ));
    store
        .put_once(
            OnceKind::Code,
            &longest,
            &json_of_size(MAX_PAYLOAD_BYTES),
            later,
            100,
        )
        .await
        .expect("the largest record fits");
    assert_eq!(
        take(&store, OnceKind::Code, &longest, now).await,
        Fetched::Fresh(json_of_size(MAX_PAYLOAD_BYTES))
    );
    assert_eq!(
        take(&store, OnceKind::Code, "big", now).await,
        Fetched::Missing,
        "a refused record was not written"
    );

    // Clients.
    for id in ["", too_long.as_str(), "a\0b"] {
        assert!(is_invalid(
            store.register_client(&new_client(id, now), 100).await
        ));
    }
    let mut big = new_client("big-client", now);
    big.metadata = json_of_size(MAX_PAYLOAD_BYTES + 1);
    assert!(is_invalid(store.register_client(&big, 100).await));
    assert_eq!(store.client("big-client").await.expect("read"), None);

    // Refresh tokens: every key of one, and its grant.
    let good = new_refresh("hash", "family", "client", "oidc:alice", now);
    for broken in [
        RefreshToken {
            token_hash: too_long.clone(),
            ..good.clone()
        },
        RefreshToken {
            family: String::new(),
            ..good.clone()
        },
        RefreshToken {
            client_id: "a\0b".to_owned(),
            ..good.clone()
        },
        RefreshToken {
            subject: too_long.clone(),
            ..good.clone()
        },
        RefreshToken {
            grant: json_of_size(MAX_PAYLOAD_BYTES + 1),
            ..good.clone()
        },
    ] {
        assert!(is_invalid(store.put_refresh(&broken, 10).await));
    }
    assert_eq!(
        rotate(&store, "hash", "next", now).await,
        Rotation::Missing,
        "a refused token was not written"
    );

    // Consents and signing keys.
    assert!(is_invalid(store.put_consent("", "client", now).await));
    assert!(is_invalid(
        store.put_consent("oidc:alice", &too_long, now).await
    ));
    assert!(!store.consented("", "client").await.expect("read"));
    assert!(is_invalid(
        store.add_signing_key(&new_signing_key("", now), None).await
    ));
    let mut big_key = new_signing_key("big", now);
    big_key.public_jwk = json_of_size(MAX_PAYLOAD_BYTES + 1);
    assert!(is_invalid(store.add_signing_key(&big_key, None).await));
    assert!(store.signing_keys().await.expect("keys").is_empty());
}

/// A registered client reads back as registered; an id is registered once; a
/// use is noted.
pub async fn clients_read_back_as_registered(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    let public = new_client("public-client", now);
    let mut confidential = new_client("confidential-client", now - Duration::minutes(1));
    confidential.secret_hash = Some("ab".repeat(32));
    confidential.metadata = json!({"redirect_uris": ["https://app.example/cb"], "n": 1.5,
                                   "nested": {"unicode": "é\u{1F600}", "list": [1, 2, 3]}});
    store.register_client(&public, 10).await.expect("register");
    store
        .register_client(&confidential, 10)
        .await
        .expect("register");
    assert_eq!(
        store.client("public-client").await.expect("read"),
        Some(public.clone())
    );
    assert_eq!(
        store.client("confidential-client").await.expect("read"),
        Some(confidential.clone())
    );
    assert_eq!(store.client("nobody").await.expect("read"), None);

    let mut again = new_client("public-client", now + Duration::seconds(5));
    again.metadata = json!({"redirect_uris": ["https://evil.example/cb"]});
    assert!(matches!(
        store.register_client(&again, 10).await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store.client("public-client").await.expect("read"),
        Some(public.clone()),
        "a conflicting registration changes nothing"
    );

    let used = now + Duration::seconds(30);
    store
        .touch_client("public-client", used)
        .await
        .expect("touch");
    let touched = store
        .client("public-client")
        .await
        .expect("read")
        .expect("present");
    assert_eq!(touched.last_used_at, Some(used));
    assert_eq!(touched.registered_at, public.registered_at);
    store
        .touch_client("nobody", used)
        .await
        .expect("touching an unknown client is no error");
    assert_eq!(store.client("nobody").await.expect("read"), None);
}

/// No more than the cap of clients register; a refused one is not stored.
pub async fn clients_beyond_the_cap_are_refused(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    assert!(matches!(
        store
            .register_client(&new_client("none-allowed", now), 0)
            .await,
        Err(StoreError::Full(_))
    ));
    store
        .register_client(&new_client("first", now), 2)
        .await
        .expect("first");
    store
        .register_client(&new_client("second", now), 2)
        .await
        .expect("second");
    assert!(matches!(
        store.register_client(&new_client("third", now), 2).await,
        Err(StoreError::Full(_))
    ));
    assert_eq!(store.client("third").await.expect("read"), None);
    store
        .register_client(&new_client("third", now), 3)
        .await
        .expect("a higher cap lets it in");
}

/// Clients never used since long before, and clients idle for long, are
/// deleted in batches with their consents and refresh tokens; the others and
/// what is theirs stay.
pub async fn unused_and_idle_clients_are_reaped_with_what_is_theirs(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    let long_ago = now - Duration::days(60);
    // never used, registered long ago: reaped
    store
        .register_client(&new_client("abandoned", long_ago), 10)
        .await
        .expect("register");
    // registered long ago, used lately: kept
    store
        .register_client(&new_client("busy", long_ago), 10)
        .await
        .expect("register");
    store
        .touch_client("busy", now - Duration::hours(1))
        .await
        .expect("touch");
    // registered lately, never used: kept
    store
        .register_client(&new_client("newcomer", now - Duration::minutes(5)), 10)
        .await
        .expect("register");
    // used, but long ago: reaped
    store
        .register_client(&new_client("idle", long_ago), 10)
        .await
        .expect("register");
    store
        .touch_client("idle", now - Duration::days(40))
        .await
        .expect("touch");
    // never used, registered long ago: reaped
    store
        .register_client(&new_client("forgotten", long_ago), 10)
        .await
        .expect("register");

    for client in ["abandoned", "busy", "idle"] {
        store
            .put_consent("oidc:alice", client, now)
            .await
            .expect("consent");
        store
            .put_refresh(
                &new_refresh(
                    &format!("{client}-token"),
                    &format!("{client}-family"),
                    client,
                    "oidc:alice",
                    now - Duration::hours(2),
                ),
                10,
            )
            .await
            .expect("refresh");
    }

    let unused_before = now - Duration::days(1);
    let idle_before = now - Duration::days(30);
    let mut reaped = 0;
    let mut batches = Vec::new();
    loop {
        let batch = store
            .reap_clients(unused_before, idle_before, 2)
            .await
            .expect("reap");
        batches.push(batch);
        reaped += batch;
        if batch < 2 {
            break;
        }
    }
    assert_eq!(reaped, 3, "abandoned, idle and forgotten: {batches:?}");
    assert!(batches.iter().all(|batch| *batch <= 2), "{batches:?}");
    for gone in ["abandoned", "idle", "forgotten"] {
        assert_eq!(store.client(gone).await.expect("read"), None, "{gone}");
    }
    for kept in ["busy", "newcomer"] {
        assert!(store.client(kept).await.expect("read").is_some(), "{kept}");
    }
    for gone in ["abandoned", "idle"] {
        assert!(
            !store.consented("oidc:alice", gone).await.expect("read"),
            "{gone}'s consent"
        );
        assert_eq!(
            rotate(
                &store,
                &format!("{gone}-token"),
                &format!("{gone}-next"),
                now
            )
            .await,
            Rotation::Missing,
            "{gone}'s refresh token"
        );
        assert_eq!(
            store
                .revoke_family(&format!("{gone}-family"))
                .await
                .expect("revoke"),
            0
        );
    }
    assert!(store.consented("oidc:alice", "busy").await.expect("read"));
    assert!(matches!(
        rotate(&store, "busy-token", "busy-next", now).await,
        Rotation::Rotated(_)
    ));
    assert_eq!(
        store
            .reap_clients(unused_before, idle_before, 10)
            .await
            .expect("reap"),
        0
    );
}

/// A one-shot record is fresh once, replayed until it expires, and of its
/// kind only.
pub async fn once_records_are_taken_once_then_replayed(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    let expires_at = now + Duration::minutes(10);
    let payload = json!({"client_id": "c", "code_challenge": "abc", "n": [1, 2.5, null],
                         "text": "line\nbreak \u{1F600}"});
    store
        .put_once(OnceKind::Code, "code-hash", &payload, expires_at, 10)
        .await
        .expect("put");
    assert_eq!(
        take(&store, OnceKind::Pending, "code-hash", now).await,
        Fetched::Missing,
        "a code is no pending authorization"
    );
    assert_eq!(
        take(&store, OnceKind::Code, "code-hash", now).await,
        Fetched::Fresh(payload.clone())
    );
    assert_eq!(
        take(
            &store,
            OnceKind::Code,
            "code-hash",
            now + Duration::seconds(1)
        )
        .await,
        Fetched::Replayed(payload.clone())
    );
    assert_eq!(
        take(
            &store,
            OnceKind::Code,
            "code-hash",
            expires_at - Duration::seconds(1)
        )
        .await,
        Fetched::Replayed(payload.clone()),
        "replayed until it expires"
    );
    assert_eq!(
        take(&store, OnceKind::Code, "code-hash", expires_at).await,
        Fetched::Missing,
        "expired at exactly its time"
    );
    assert_eq!(
        take(&store, OnceKind::Code, "no-such-code", now).await,
        Fetched::Missing
    );
}

/// A record never taken is missing once `now` reaches its expiry, not before.
pub async fn once_records_expire_at_exactly_now(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    let expires_at = now + Duration::minutes(5);
    for key in ["late", "in-time"] {
        store
            .put_once(OnceKind::Pending, key, &json!({"key": key}), expires_at, 10)
            .await
            .expect("put");
    }
    assert_eq!(
        take(&store, OnceKind::Pending, "late", expires_at).await,
        Fetched::Missing
    );
    assert_eq!(
        take(
            &store,
            OnceKind::Pending,
            "late",
            expires_at - Duration::seconds(1)
        )
        .await,
        Fetched::Fresh(json!({"key": "late"})),
        "looking at it after expiry did not take it"
    );
    assert_eq!(
        take(
            &store,
            OnceKind::Pending,
            "in-time",
            expires_at - Duration::seconds(1)
        )
        .await,
        Fetched::Fresh(json!({"key": "in-time"}))
    );
}

/// A key is kept once per kind; the same key of the other kind is another
/// record.
pub async fn once_keys_are_unique_per_kind(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    let expires_at = now + Duration::minutes(10);
    store
        .put_once(
            OnceKind::Pending,
            "shared",
            &json!({"first": true}),
            expires_at,
            10,
        )
        .await
        .expect("put");
    assert!(matches!(
        store
            .put_once(
                OnceKind::Pending,
                "shared",
                &json!({"second": true}),
                expires_at,
                10
            )
            .await,
        Err(StoreError::Conflict(_))
    ));
    store
        .put_once(
            OnceKind::Code,
            "shared",
            &json!({"code": true}),
            expires_at,
            10,
        )
        .await
        .expect("another kind");
    assert_eq!(
        take(&store, OnceKind::Pending, "shared", now).await,
        Fetched::Fresh(json!({"first": true})),
        "the conflicting put changed nothing"
    );
    assert_eq!(
        take(&store, OnceKind::Code, "shared", now).await,
        Fetched::Fresh(json!({"code": true}))
    );
}

/// Each kind holds at most its cap of unexpired records; taken ones still
/// count until they expire, expired ones do not.
pub async fn once_records_beyond_the_cap_are_refused(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    let later = now + Duration::minutes(10);
    // Expired by the clock already: kept until purged, never counted.
    store
        .put_once(
            OnceKind::Pending,
            "expired",
            &json!({}),
            now - Duration::hours(1),
            1,
        )
        .await
        .expect("an expired record takes no room");
    store
        .put_once(OnceKind::Pending, "one", &json!({}), later, 2)
        .await
        .expect("one");
    store
        .put_once(OnceKind::Pending, "two", &json!({}), later, 2)
        .await
        .expect("two");
    assert!(matches!(
        store
            .put_once(OnceKind::Pending, "three", &json!({}), later, 2)
            .await,
        Err(StoreError::Full(_))
    ));
    assert_eq!(
        take(&store, OnceKind::Pending, "three", now).await,
        Fetched::Missing,
        "a refused record was not written"
    );
    assert!(matches!(
        take(&store, OnceKind::Pending, "one", now).await,
        Fetched::Fresh(_)
    ));
    assert!(
        matches!(
            store
                .put_once(OnceKind::Pending, "three", &json!({}), later, 2)
                .await,
            Err(StoreError::Full(_))
        ),
        "a taken record counts until it expires"
    );
    store
        .put_once(OnceKind::Code, "other-kind", &json!({}), later, 2)
        .await
        .expect("each kind has its own cap");
    assert!(matches!(
        store
            .put_once(OnceKind::Code, "none-allowed", &json!({}), later, 0)
            .await,
        Err(StoreError::Full(_))
    ));
}

/// Of many takes of one record at once, exactly one gets it fresh.
pub async fn racing_takes_of_one_record_give_it_once(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    store
        .put_once(
            OnceKind::Code,
            "raced",
            &json!({"code": 1}),
            now + Duration::minutes(10),
            10,
        )
        .await
        .expect("put");
    let takers: Vec<_> = (0..8)
        .map(|_| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.take_once(OnceKind::Code, "raced", now).await })
        })
        .collect();
    let mut fresh = 0;
    let mut replayed = 0;
    for taker in takers {
        match taker.await.expect("joined").expect("take") {
            Fetched::Fresh(_) => fresh += 1,
            Fetched::Replayed(_) => replayed += 1,
            Fetched::Missing => panic!("a racing take found nothing"),
        }
    }
    assert_eq!((fresh, replayed), (1, 7));
}

/// Each refresh replaces the newest token; presenting a replaced one revokes
/// the whole family, every token of it, and no other family.
pub async fn refresh_rotation_and_reuse_revokes_the_family(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    let first = new_refresh("t0", "family", "client", "oidc:alice", now);
    store.put_refresh(&first, 10).await.expect("put");
    let bystander = new_refresh("other-0", "other-family", "client", "oidc:alice", now);
    store.put_refresh(&bystander, 10).await.expect("put");

    let at = now + Duration::minutes(1);
    let Rotation::Rotated(second) = rotate(&store, "t0", "t1", at).await else {
        panic!("the first token rotates");
    };
    assert_eq!(
        second,
        RefreshToken {
            token_hash: "t1".to_owned(),
            issued_at: at,
            ..first.clone()
        },
        "the new token copies the old one, issued now, ending with the family"
    );
    let later = now + Duration::minutes(2);
    let Rotation::Rotated(third) = rotate(&store, "t1", "t2", later).await else {
        panic!("the newest token rotates");
    };
    assert_eq!(third.token_hash, "t2");
    assert_eq!(third.expires_at, first.expires_at);

    let reuse_at = now + Duration::minutes(3);
    assert_eq!(
        rotate(&store, "t0", "stolen", reuse_at).await,
        Rotation::Reused(first.clone()),
        "a replaced token is reuse, and says what it was"
    );
    assert_eq!(
        rotate(&store, "t2", "t3", reuse_at).await,
        Rotation::Reused(third.clone()),
        "the family's newest token was revoked with it"
    );
    assert_eq!(
        rotate(&store, "t1", "t3", reuse_at).await,
        Rotation::Reused(second)
    );
    assert_eq!(
        rotate(&store, "stolen", "t4", reuse_at).await,
        Rotation::Missing,
        "a reuse issued nothing"
    );
    assert_eq!(store.revoke_family("family").await.expect("revoke"), 0);
    assert!(
        matches!(
            rotate(&store, "other-0", "other-1", reuse_at).await,
            Rotation::Rotated(_)
        ),
        "another family of the same person is untouched"
    );
    assert_eq!(
        rotate(&store, "no-such-token", "next", reuse_at).await,
        Rotation::Missing
    );
}

/// Of many presentations of one token at once, one rotates and the others find
/// it reused (which revokes the family, the winner's new token too).
pub async fn racing_rotations_of_one_token_rotate_once(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    store
        .put_refresh(
            &new_refresh("raced", "family", "client", "oidc:alice", now),
            10,
        )
        .await
        .expect("put");
    let at = now + Duration::minutes(1);
    let presenters: Vec<_> = (0..8)
        .map(|round| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .rotate_refresh("raced", &format!("next-{round}"), at)
                    .await
            })
        })
        .collect();
    let mut winners = Vec::new();
    let mut reused = 0;
    for presenter in presenters {
        match presenter.await.expect("joined").expect("rotate") {
            Rotation::Rotated(next) => winners.push(next.token_hash),
            Rotation::Reused(presented) => {
                assert_eq!(presented.token_hash, "raced");
                reused += 1;
            }
            Rotation::Missing => panic!("a racing presentation found nothing"),
        }
    }
    assert_eq!((winners.len(), reused), (1, 7), "{winners:?}");
    assert!(
        matches!(
            rotate(&store, &winners[0], "after", at).await,
            Rotation::Reused(_)
        ),
        "the reuse revoked the family"
    );
}

/// A family ends at exactly its `expires_at`, whatever its refreshes.
pub async fn refresh_families_expire_at_exactly_now(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    let first = new_refresh("t0", "family", "client", "oidc:alice", now);
    store.put_refresh(&first, 10).await.expect("put");
    assert_eq!(
        rotate(&store, "t0", "late", first.expires_at).await,
        Rotation::Missing,
        "expired at exactly its time"
    );
    let just_before = first.expires_at - Duration::seconds(1);
    let Rotation::Rotated(next) = rotate(&store, "t0", "t1", just_before).await else {
        panic!("a second before the end it still rotates");
    };
    assert_eq!(
        next.expires_at, first.expires_at,
        "a refresh never extends it"
    );
    assert_eq!(
        rotate(&store, "t1", "t2", first.expires_at).await,
        Rotation::Missing
    );
    assert_eq!(
        rotate(&store, "t0", "t2", first.expires_at + Duration::days(1)).await,
        Rotation::Missing,
        "a replaced token of an expired family is missing, not reuse"
    );
}

/// Revoking by token (RFC 7009) or by family ends every token of the family.
pub async fn revocation_ends_a_family(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    store
        .put_refresh(
            &new_refresh("a0", "family-a", "client", "oidc:alice", now),
            10,
        )
        .await
        .expect("put");
    store
        .put_refresh(
            &new_refresh("b0", "family-b", "client", "oidc:bob", now),
            10,
        )
        .await
        .expect("put");
    let at = now + Duration::minutes(1);
    assert!(matches!(
        rotate(&store, "a0", "a1", at).await,
        Rotation::Rotated(_)
    ));
    assert_eq!(
        store.revoke_refresh("a0").await.expect("revoke"),
        Some("family-a".to_owned()),
        "a replaced token still names its family"
    );
    assert!(matches!(
        rotate(&store, "a1", "a2", at).await,
        Rotation::Reused(_)
    ));
    assert_eq!(
        store.revoke_refresh("no-such-token").await.expect("revoke"),
        None
    );
    assert_eq!(
        store.revoke_refresh("a1").await.expect("revoke"),
        Some("family-a".to_owned()),
        "revoking twice is no error"
    );

    assert!(matches!(
        rotate(&store, "b0", "b1", at).await,
        Rotation::Rotated(_)
    ));
    assert_eq!(
        store.revoke_family("family-b").await.expect("revoke"),
        1,
        "only the newest token was still usable"
    );
    assert_eq!(store.revoke_family("family-b").await.expect("revoke"), 0);
    assert_eq!(
        store.revoke_family("no-such-family").await.expect("revoke"),
        0
    );
    assert!(matches!(
        rotate(&store, "b1", "b2", at).await,
        Rotation::Reused(_)
    ));
}

/// A token hash and a family id are each kept once.
pub async fn refresh_tokens_and_families_are_unique(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    let first = new_refresh("t0", "family", "client", "oidc:alice", now);
    store.put_refresh(&first, 10).await.expect("put");
    assert!(matches!(
        store
            .put_refresh(&new_refresh("t0", "another", "client", "oidc:bob", now), 10)
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store
            .put_refresh(
                &new_refresh("t9", "family", "client", "oidc:alice", now),
                10
            )
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(
        store.revoke_refresh("t9").await.expect("revoke"),
        None,
        "the conflicting token was not written"
    );
    let Rotation::Rotated(next) = rotate(&store, "t0", "t1", now + Duration::seconds(1)).await
    else {
        panic!("the first token is untouched");
    };
    assert_eq!(next.subject, "oidc:alice");
}

/// A subject keeps at most its cap of live families: a new login revokes its
/// oldest; revoked and expired families take no room; other subjects are
/// untouched.
pub async fn a_subject_keeps_at_most_its_cap_of_families(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    // f1 began long ago and lasts; the expired family began after it.
    let mut f1 = new_refresh(
        "f1-0",
        "f1",
        "client",
        "oidc:alice",
        now - Duration::days(3),
    );
    f1.expires_at = now + Duration::days(1);
    store.put_refresh(&f1, 2).await.expect("put");
    let mut expired = new_refresh("expired-0", "expired", "client", "oidc:alice", now);
    expired.issued_at = now - Duration::days(2);
    expired.expires_at = now - Duration::days(1);
    store.put_refresh(&expired, 2).await.expect("put");
    store
        .put_refresh(&new_refresh("bob-0", "bob", "client", "oidc:bob", now), 2)
        .await
        .expect("put");
    store
        .put_refresh(
            &new_refresh(
                "f2-0",
                "f2",
                "client",
                "oidc:alice",
                now + Duration::minutes(1),
            ),
            2,
        )
        .await
        .expect("put");
    assert!(
        matches!(
            rotate(&store, "f1-0", "f1-1", now + Duration::minutes(2)).await,
            Rotation::Rotated(_)
        ),
        "the expired family took no room, so f1 and f2 both stay"
    );
    store
        .put_refresh(
            &new_refresh(
                "f3-0",
                "f3",
                "client",
                "oidc:alice",
                now + Duration::minutes(3),
            ),
            2,
        )
        .await
        .expect("put");
    let at = now + Duration::minutes(10);
    assert!(
        matches!(
            rotate(&store, "f1-1", "f1-2", at).await,
            Rotation::Reused(_)
        ),
        "the oldest family was revoked"
    );
    let rotated = rotate(&store, "f2-0", "f2-1", at).await;
    assert!(matches!(rotated, Rotation::Rotated(_)), "{rotated:?}");
    assert!(matches!(
        rotate(&store, "f3-0", "f3-1", at).await,
        Rotation::Rotated(_)
    ));
    assert!(
        matches!(
            rotate(&store, "bob-0", "bob-1", at).await,
            Rotation::Rotated(_)
        ),
        "another person's family is untouched"
    );

    // A revoked family takes no room: after revoking f2, f4 joins f3.
    assert_eq!(store.revoke_family("f2").await.expect("revoke"), 1);
    store
        .put_refresh(
            &new_refresh(
                "f4-0",
                "f4",
                "client",
                "oidc:alice",
                now + Duration::minutes(4),
            ),
            2,
        )
        .await
        .expect("put");
    assert!(matches!(
        rotate(&store, "f3-1", "f3-2", at).await,
        Rotation::Rotated(_)
    ));
    assert!(matches!(
        rotate(&store, "f4-0", "f4-1", at).await,
        Rotation::Rotated(_)
    ));

    // With a cap of one, the new family is the one that stays.
    store
        .put_refresh(
            &new_refresh(
                "f5-0",
                "f5",
                "client",
                "oidc:alice",
                now + Duration::minutes(5),
            ),
            1,
        )
        .await
        .expect("put");
    assert!(matches!(
        rotate(&store, "f5-0", "f5-1", at).await,
        Rotation::Rotated(_)
    ));
    for (presented, next) in [("f3-2", "f3-3"), ("f4-1", "f4-2")] {
        assert!(
            matches!(
                rotate(&store, presented, next, at).await,
                Rotation::Reused(_)
            ),
            "{presented}'s family was revoked"
        );
    }
}

/// A consent is per subject and client, and giving it again is no error.
pub async fn consents_are_per_subject_and_client(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    assert!(!store.consented("oidc:alice", "client").await.expect("read"));
    store
        .put_consent("oidc:alice", "client", now)
        .await
        .expect("consent");
    assert!(store.consented("oidc:alice", "client").await.expect("read"));
    assert!(!store.consented("oidc:alice", "other").await.expect("read"));
    assert!(!store.consented("oidc:bob", "client").await.expect("read"));
    store
        .put_consent("oidc:alice", "client", now + Duration::minutes(1))
        .await
        .expect("consenting again");
    assert!(store.consented("oidc:alice", "client").await.expect("read"));
    // A metadata-document client is not stored, yet it can be consented to.
    let document = "https://app.example/oauth/client.json";
    store
        .put_consent("oidc:bob", document, now)
        .await
        .expect("consent");
    assert!(store.consented("oidc:bob", document).await.expect("read"));
}

/// Signing keys read back newest first; one is added only while the newest is
/// the one the caller saw.
pub async fn signing_keys_are_added_by_compare_and_set(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    assert!(store.signing_keys().await.expect("keys").is_empty());
    let first = new_signing_key("k1", now - Duration::days(1));
    assert!(
        !store
            .add_signing_key(&first, Some("k0"))
            .await
            .expect("add"),
        "there is no k0"
    );
    assert!(store.add_signing_key(&first, None).await.expect("add"));
    assert!(
        !store
            .add_signing_key(&new_signing_key("k1b", now), None)
            .await
            .expect("add"),
        "there is a key already"
    );
    let second = new_signing_key("k2", now);
    assert!(
        store
            .add_signing_key(&second, Some("k1"))
            .await
            .expect("add")
    );
    assert!(
        !store
            .add_signing_key(&new_signing_key("k2b", now), Some("k1"))
            .await
            .expect("add"),
        "k1 is no longer the newest"
    );
    assert_eq!(
        store.signing_keys().await.expect("keys"),
        vec![second.clone(), first.clone()]
    );
    // The newest is the one added last, even with an earlier clock.
    let skewed = new_signing_key("k3", now - Duration::hours(1));
    assert!(
        store
            .add_signing_key(&skewed, Some("k2"))
            .await
            .expect("add")
    );
    assert_eq!(
        store
            .signing_keys()
            .await
            .expect("keys")
            .iter()
            .map(|key| key.kid.as_str())
            .collect::<Vec<_>>(),
        vec!["k3", "k2", "k1"]
    );
}

/// Of replicas rotating from one newest key at once, one adds its key.
pub async fn racing_key_rotations_add_one_key(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    assert!(
        store
            .add_signing_key(&new_signing_key("k1", now), None)
            .await
            .expect("add")
    );
    let rotators: Vec<_> = (0..8)
        .map(|round| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                store
                    .add_signing_key(&new_signing_key(&format!("next-{round}"), now), Some("k1"))
                    .await
            })
        })
        .collect();
    let mut added = 0;
    for rotator in rotators {
        added += usize::from(rotator.await.expect("joined").expect("add"));
    }
    assert_eq!(added, 1);
    assert_eq!(store.signing_keys().await.expect("keys").len(), 2);
}

/// Keys made before the cutoff are removed, except the newest, which always
/// stays.
pub async fn old_signing_keys_go_but_never_the_newest(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    assert_eq!(
        store.remove_signing_keys_before(now).await.expect("remove"),
        0
    );
    let mut expected = None;
    for (days, kid) in [(3, "k1"), (2, "k2"), (1, "k3")] {
        assert!(
            store
                .add_signing_key(&new_signing_key(kid, now - Duration::days(days)), expected)
                .await
                .expect("add")
        );
        expected = Some(kid);
    }
    assert_eq!(
        store
            .remove_signing_keys_before(now - Duration::days(2))
            .await
            .expect("remove"),
        1,
        "k1 only: k2 was made at the cutoff, not before"
    );
    assert_eq!(
        store
            .remove_signing_keys_before(now + Duration::days(1))
            .await
            .expect("remove"),
        1,
        "k2; k3 is older than the cutoff but the newest"
    );
    let kept = store.signing_keys().await.expect("keys");
    assert_eq!(kept, vec![new_signing_key("k3", now - Duration::days(1))]);
    assert_eq!(
        store
            .remove_signing_keys_before(now + Duration::days(1))
            .await
            .expect("remove"),
        0
    );
}

/// Purging deletes, in batches, the one-shot records and refresh tokens whose
/// time ended at or before `now` (a revoked family's tokens included), and
/// nothing else: a live family's replaced tokens stay, so reuse is still
/// caught.
pub async fn purging_removes_only_what_ended_in_batches(store: Arc<dyn OAuthStore>) {
    let now = base_time();
    let later = now + Duration::minutes(10);
    // Ended: three records (one taken, one expiring at exactly now).
    for (key, expires_at) in [
        ("old", now - Duration::minutes(5)),
        ("taken", now - Duration::minutes(1)),
        ("exact", now),
    ] {
        store
            .put_once(OnceKind::Code, key, &json!({}), expires_at, 10)
            .await
            .expect("put");
    }
    assert!(matches!(
        take(&store, OnceKind::Code, "taken", now - Duration::minutes(2)).await,
        Fetched::Fresh(_)
    ));
    // Ended: a revoked family of two tokens, an expired family of one.
    let issued = now - Duration::hours(1);
    store
        .put_refresh(
            &new_refresh("r0", "revoked", "client", "oidc:alice", issued),
            10,
        )
        .await
        .expect("put");
    assert!(matches!(
        rotate(&store, "r0", "r1", issued).await,
        Rotation::Rotated(_)
    ));
    store.revoke_family("revoked").await.expect("revoke");
    let mut expired = new_refresh("e0", "expired", "client", "oidc:bob", issued);
    expired.expires_at = now;
    store.put_refresh(&expired, 10).await.expect("put");
    // Live: a record and a family with a replaced token.
    store
        .put_once(OnceKind::Pending, "live", &json!({"live": true}), later, 10)
        .await
        .expect("put");
    store
        .put_refresh(
            &new_refresh("l0", "live", "client", "oidc:carol", issued),
            10,
        )
        .await
        .expect("put");
    assert!(matches!(
        rotate(&store, "l0", "l1", issued).await,
        Rotation::Rotated(_)
    ));

    let mut batches = Vec::new();
    loop {
        let batch = store.purge_expired(now, 4).await.expect("purge");
        batches.push(batch);
        if batch < 4 {
            break;
        }
    }
    assert_eq!(batches.iter().sum::<u64>(), 6, "{batches:?}");
    assert!(batches.iter().all(|batch| *batch <= 4), "{batches:?}");
    assert_eq!(store.purge_expired(now, 4).await.expect("purge"), 0);

    assert_eq!(
        take(&store, OnceKind::Code, "taken", now - Duration::minutes(2)).await,
        Fetched::Missing,
        "purged, not just hidden"
    );
    assert_eq!(store.revoke_refresh("r1").await.expect("revoke"), None);
    assert_eq!(store.revoke_refresh("e0").await.expect("revoke"), None);
    assert_eq!(
        take(&store, OnceKind::Pending, "live", now).await,
        Fetched::Fresh(json!({"live": true}))
    );
    assert!(
        matches!(
            rotate(&store, "l0", "stolen", now).await,
            Rotation::Reused(_)
        ),
        "a live family's replaced token was kept to catch its reuse"
    );
    // A purged record's key is free again.
    store
        .put_once(OnceKind::Code, "old", &json!({"again": true}), later, 10)
        .await
        .expect("a purged key is free");
}

/// Generates one `#[tokio::test]` per [`OAuthStore`] property. `$make` is an
/// async expression yielding `(Arc<dyn OAuthStore>, guard)`; the guard (for
/// example a per-test database schema) lives until the test ends.
#[macro_export]
macro_rules! oauth_store_suite {
    ($make:expr) => {
        $crate::oauth_store_suite!(@tests $make;
            payload_bounds_are_checked_before_anything_is_written,
            clients_read_back_as_registered,
            clients_beyond_the_cap_are_refused,
            unused_and_idle_clients_are_reaped_with_what_is_theirs,
            once_records_are_taken_once_then_replayed,
            once_records_expire_at_exactly_now,
            once_keys_are_unique_per_kind,
            once_records_beyond_the_cap_are_refused,
            racing_takes_of_one_record_give_it_once,
            refresh_rotation_and_reuse_revokes_the_family,
            racing_rotations_of_one_token_rotate_once,
            refresh_families_expire_at_exactly_now,
            revocation_ends_a_family,
            refresh_tokens_and_families_are_unique,
            a_subject_keeps_at_most_its_cap_of_families,
            consents_are_per_subject_and_client,
            signing_keys_are_added_by_compare_and_set,
            racing_key_rotations_add_one_key,
            old_signing_keys_go_but_never_the_newest,
            purging_removes_only_what_ended_in_batches,
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
