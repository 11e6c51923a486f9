//! Links that open in a browser with no header, on SQLite and on PostgreSQL:
//! the signed `download_url` an owner receives (the headers every download
//! carries, forgery, another asset's id, expiry, a deleted asset), and
//! `share_asset`'s shares (named people must sign in as themselves, anyone
//! signed in, public logged out; counted and audited; revoked or deleted
//! stops at once; the per-owner cap; the per-address rate limit). The holder
//! of a link is the party THREATS.md calls "whoever holds a link".

use std::time::Duration;

use bytes::Bytes;
use docket_catalog::NewAsset;
use docket_export::sink::{FilesystemSink, ObjectSink as _};
use docket_server::config::Config;
use docket_storage::test_db::TestDatabase;
use serde_json::{Value, json};

use crate::support::{Backend, StoredServer, key_of, on_both_backends, users};

on_both_backends!(
    a_signed_link_opens_with_no_header_until_it_expires,
    forged_and_moved_links_open_nothing,
    shares_open_for_their_audience_until_revoked,
    a_deleted_asset_stops_its_links_and_shares_at_once,
    shares_are_capped_per_owner_and_opens_limited_per_address,
);

const CSV: &[u8] = b"orderkey,status\n1,open\n2,shipped\n";

struct Fixture {
    stored: StoredServer,
    _database: TestDatabase,
}

async fn fixture(backend: Backend, extra_yaml: &str) -> Option<Fixture> {
    let database = backend.database().await?;
    let yaml = format!(
        "personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n{extra_yaml}"
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[
        ("alice", &["analyst"]),
        ("bob", &["analyst"]),
        ("eve", &["analyst"]),
        ("root", &["admin"]),
    ]);
    let stored = StoredServer::start(config, &database, false).await;
    Some(Fixture {
        stored,
        _database: database,
    })
}

impl Fixture {
    /// An asset of `owner` holding [`CSV`], recorded as an export would.
    async fn asset(&self, owner: &str, name: &str) -> String {
        let id = docket_catalog::generate_id().expect("id");
        let key = format!("{owner}/{id}/content.csv");
        let sink = FilesystemSink::new(&self.stored.files);
        let mut upload = sink.begin(&key).await.expect("begin");
        upload.write(Bytes::from_static(CSV)).await.expect("write");
        upload.commit().await.expect("commit");
        self.stored
            .store
            .asset_store()
            .create_or_get(NewAsset {
                id: id.clone(),
                owner: format!("apikey:{owner}"),
                name: name.into(),
                description: None,
                tags: Vec::new(),
                format: "csv".into(),
                content_type: "text/csv".into(),
                storage_key: key,
                size_bytes: i64::try_from(CSV.len()).expect("small"),
                row_count: Some(2),
                connection: None,
                tool: "trino_export".into(),
                idempotency_key: None,
                task_id: None,
                call_id: None,
            })
            .await
            .expect("asset");
        id
    }

    /// A tool's structured result as `user`.
    async fn call(&self, user: &str, tool: &str, arguments: Value) -> Value {
        let body = self
            .stored
            .server
            .call_as(user, tool, arguments, json!({}))
            .await;
        body["result"]["structuredContent"].clone()
    }

    /// `url` on the test server: links start with `server.public_base_url`,
    /// which the test's configuration leaves at its default, while the server
    /// listens on a port of its own.
    fn local(&self, url: &str) -> String {
        let path = url
            .strip_prefix("http://127.0.0.1:8080")
            .unwrap_or_else(|| panic!("a link of this server: {url}"));
        self.stored.server.url(path)
    }

    /// `GET url` with no header at all, as a browser opening a link.
    async fn open(&self, url: &str) -> reqwest::Response {
        self.stored
            .server
            .http
            .get(self.local(url))
            .send()
            .await
            .expect("sent")
    }

    /// `GET url` as `user` (their API key).
    async fn open_as(&self, user: &str, url: &str) -> reqwest::Response {
        self.stored
            .server
            .http
            .get(self.local(url))
            .header("x-api-key", key_of(user))
            .send()
            .await
            .expect("sent")
    }

    async fn download_url(&self, user: &str, asset_id: &str) -> String {
        let got = self
            .call(user, "get_asset", json!({"asset_id": asset_id}))
            .await;
        got["download_url"]
            .as_str()
            .unwrap_or_else(|| panic!("no download_url: {got}"))
            .to_owned()
    }

    async fn share(&self, user: &str, arguments: Value) -> Value {
        let mut arguments = arguments;
        arguments["command"] = json!("create");
        self.call(user, "share_asset", arguments).await
    }
}

/// Every download carries these, whoever opens it and however.
async fn assert_attachment(response: reqwest::Response, file_name: &str) {
    assert_eq!(response.status(), 200);
    let headers = response.headers();
    assert_eq!(
        headers["content-disposition"],
        format!("attachment; filename=\"{file_name}\"").as_str()
    );
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert_eq!(
        headers["content-security-policy"],
        "sandbox; default-src 'none'"
    );
    assert_eq!(headers["content-type"], "text/csv");
    assert_eq!(response.bytes().await.expect("body").as_ref(), CSV);
}

async fn a_signed_link_opens_with_no_header_until_it_expires(backend: Backend) {
    let Some(f) = fixture(backend, "storage: { link_ttl: 2s }\n").await else {
        return;
    };
    let asset = f.asset("alice", "orders \"q1\"").await;
    let url = f.download_url("alice", &asset).await;
    assert!(
        url.contains(&format!("/assets/{asset}/content?expires=")) && url.contains("&sig="),
        "{url}"
    );
    // No header at all: a browser, or whoever the owner forwarded it to.
    assert_attachment(f.open(&url).await, "orders__q1_.csv").await;
    // list_assets hands out signed links too.
    let listed = f.call("alice", "list_assets", json!({})).await;
    let listed_url = listed["assets"][0]["download_url"].as_str().expect("url");
    assert_attachment(f.open(listed_url).await, "orders__q1_.csv").await;
    // The owner's bearer download carries the same headers.
    assert_attachment(
        f.stored.server.download_as("alice", &asset).await,
        "orders__q1_.csv",
    )
    .await;
    // Without the signature it is the bearer route: no header, no download.
    let unsigned = url.split('?').next().expect("path").to_owned();
    assert_eq!(f.open(&unsigned).await.status(), 401);
    // Past its expiry a genuine link says so, and opens nothing.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let expired = f.open(&url).await;
    assert_eq!(expired.status(), 410);
    assert_eq!(
        expired.headers()["content-security-policy"],
        "sandbox; default-src 'none'"
    );
}

async fn forged_and_moved_links_open_nothing(backend: Backend) {
    let Some(f) = fixture(backend, "").await else {
        return;
    };
    let mine = f.asset("alice", "mine").await;
    let theirs = f.asset("bob", "theirs").await;
    let url = f.download_url("alice", &mine).await;
    assert_eq!(f.open(&url).await.status(), 200);
    let (path, query) = url.split_once('?').expect("query");
    // Any changed character of the signature.
    let sig_at = url.find("sig=").expect("sig") + 4;
    for offset in [0, 10, 42] {
        let mut forged = url.clone().into_bytes();
        forged[sig_at + offset] = if forged[sig_at + offset] == b'A' {
            b'B'
        } else {
            b'A'
        };
        let forged = String::from_utf8(forged).expect("ascii");
        assert_eq!(f.open(&forged).await.status(), 404, "{forged}");
    }
    // A later expiry, another key id, a parameter twice.
    let later = url.replace("expires=", "expires=9");
    assert_eq!(f.open(&later).await.status(), 404);
    let moved_key = regex_free_replace(&url, "kid=", "kid=0");
    assert_eq!(f.open(&moved_key).await.status(), 404);
    assert_eq!(f.open(&format!("{url}&kid=x")).await.status(), 404);
    // Alice's valid signature on Bob's asset, and path tricks around her own.
    let base = path.trim_end_matches(&format!("/assets/{mine}/content"));
    for moved in [
        format!("{base}/assets/{theirs}/content?{query}"),
        format!("{base}/assets/{mine}%2F/content?{query}"),
        format!("{base}/assets/..%2F{mine}/content?{query}"),
        format!("{base}/assets/{}/content?{query}", mine.to_uppercase()),
    ] {
        let status = f.open(&moved).await.status();
        assert!(status == 404 || status == 400, "{moved}: {status}");
    }
    // Bob's bytes never came out: his asset still answers his own download.
    assert_eq!(
        f.stored.server.download_as("bob", &theirs).await.status(),
        200
    );
}

/// `text` with the first `from` replaced by `to`.
fn regex_free_replace(text: &str, from: &str, to: &str) -> String {
    text.replacen(from, to, 1)
}

async fn shares_open_for_their_audience_until_revoked(backend: Backend) {
    let Some(f) = fixture(backend, "").await else {
        return;
    };
    let asset = f.asset("alice", "report").await;

    // To a named person: they sign in as themselves; nobody else opens it.
    let to_bob = f
        .share(
            "alice",
            json!({"asset_id": asset, "audience": "people", "people": ["apikey:bob"]}),
        )
        .await;
    let bob_url = to_bob["url"].as_str().unwrap_or_else(|| panic!("{to_bob}"));
    assert_eq!(to_bob["audience"], "people");
    assert!(to_bob["expires_at"].is_string());
    let logged_out = f.open(bob_url).await;
    assert_eq!(logged_out.status(), 401);
    assert!(logged_out.headers().contains_key("www-authenticate"));
    assert_eq!(f.open_as("eve", bob_url).await.status(), 404);
    assert_attachment(f.open_as("bob", bob_url).await, "report.csv").await;

    // To anyone signed in.
    let signed_in = f
        .share("alice", json!({"asset_id": asset, "audience": "signed_in"}))
        .await;
    let signed_in_url = signed_in["url"].as_str().expect("url");
    assert_eq!(f.open(signed_in_url).await.status(), 401);
    assert_attachment(f.open_as("eve", signed_in_url).await, "report.csv").await;

    // Public: opens logged out, and must expire.
    let public = f
        .share(
            "alice",
            json!({"asset_id": asset, "audience": "public", "expires_in_seconds": 600}),
        )
        .await;
    let public_url = public["url"].as_str().expect("url");
    assert_attachment(f.open(public_url).await, "report.csv").await;
    assert_attachment(f.open(public_url).await, "report.csv").await;
    // Only the share's own id opens it: no other spelling, no guessed id.
    let share_id = public["share_id"].as_str().expect("id");
    for tricked in [
        format!("{public_url}/"),
        format!("{public_url}%2F"),
        format!("{public_url}/.."),
        public_url.replace(share_id, &share_id.to_uppercase()),
        public_url.replace(share_id, &docket_catalog::generate_id().expect("id")),
        public_url.replace(share_id, &asset),
    ] {
        let status = f.open(&tricked).await.status();
        assert!(status == 404 || status == 400, "{tricked}: {status}");
    }

    // Opens are counted on the share and audited.
    let listed = f
        .call(
            "alice",
            "share_asset",
            json!({"command": "list", "asset_id": asset}),
        )
        .await;
    let shares = listed["shares"].as_array().expect("shares");
    assert_eq!(shares.len(), 3);
    let count_of = |id: &Value| {
        shares
            .iter()
            .find(|share| share["share_id"] == *id)
            .map(|share| share["open_count"].clone())
    };
    assert_eq!(count_of(&public["share_id"]), Some(json!(2)));
    assert_eq!(count_of(&to_bob["share_id"]), Some(json!(1)));
    assert!(shares.iter().all(|share| share["live"] == true));
    let audit = f.stored.store.task_store();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let rows = loop {
        let rows = audit
            .audit_for_tool("share_asset.open", 100)
            .await
            .expect("audit");
        if rows.len() >= 4 {
            break rows;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "open audit rows: {}",
            rows.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(rows.len(), 4, "one row per open, none for refusals");
    assert!(rows.iter().any(|row| row.subject == "apikey:bob"));
    assert_eq!(
        rows.iter().filter(|row| row.subject == "anonymous").count(),
        2
    );

    // Not yours reads as does not exist: eve cannot see, revoke or share.
    let unknown = docket_catalog::generate_id().expect("id");
    let eve_revokes = f
        .stored
        .server
        .call_as(
            "eve",
            "share_asset",
            json!({"command": "revoke", "share_id": public["share_id"]}),
            json!({}),
        )
        .await;
    let nobody_revokes = f
        .stored
        .server
        .call_as(
            "eve",
            "share_asset",
            json!({"command": "revoke", "share_id": unknown}),
            json!({}),
        )
        .await;
    assert_eq!(eve_revokes["result"]["isError"], true);
    assert_eq!(
        eve_revokes["result"]["structuredContent"]["error"]["code"],
        nobody_revokes["result"]["structuredContent"]["error"]["code"]
    );
    let eve_shares = f
        .stored
        .server
        .call_as(
            "eve",
            "share_asset",
            json!({"command": "create", "asset_id": asset, "audience": "public"}),
            json!({}),
        )
        .await;
    assert_eq!(eve_shares["result"]["isError"], true, "{eve_shares}");
    assert_eq!(
        eve_shares["result"]["structuredContent"]["error"]["code"],
        nobody_revokes["result"]["structuredContent"]["error"]["code"]
    );
    assert_eq!(
        f.call("eve", "share_asset", json!({"command": "list"}))
            .await["shares"],
        json!([])
    );

    // Revoked: stops at once, and is shown revoked.
    let revoked = f
        .call(
            "alice",
            "share_asset",
            json!({"command": "revoke", "share_id": public["share_id"]}),
        )
        .await;
    assert_eq!(revoked["live"], false, "{revoked}");
    assert!(revoked["revoked_at"].is_string());
    assert_eq!(f.open(public_url).await.status(), 404);
    // An administrator may revoke another's share.
    f.call(
        "root",
        "share_asset",
        json!({"command": "revoke", "share_id": signed_in["share_id"]}),
    )
    .await;
    assert_eq!(f.open_as("eve", signed_in_url).await.status(), 404);
    // Bob's share still opens.
    assert_eq!(f.open_as("bob", bob_url).await.status(), 200);
}

async fn a_deleted_asset_stops_its_links_and_shares_at_once(backend: Backend) {
    let Some(f) = fixture(backend, "").await else {
        return;
    };
    let asset = f.asset("alice", "gone").await;
    let url = f.download_url("alice", &asset).await;
    let public = f
        .share("alice", json!({"asset_id": asset, "audience": "public"}))
        .await;
    let public_url = public["url"].as_str().expect("url").to_owned();
    assert_eq!(f.open(&url).await.status(), 200);
    assert_eq!(f.open(&public_url).await.status(), 200);
    assert!(
        f.stored
            .store
            .asset_store()
            .delete(&asset)
            .await
            .expect("delete")
    );
    assert_eq!(f.open(&url).await.status(), 404);
    assert_eq!(f.open(&public_url).await.status(), 404);
}

async fn shares_are_capped_per_owner_and_opens_limited_per_address(backend: Backend) {
    let Some(f) = fixture(
        backend,
        "storage: { shares: { max_per_owner: 2, opens_per_minute: 1, opens_burst: 3 } }\n",
    )
    .await
    else {
        return;
    };
    let asset = f.asset("alice", "capped").await;
    let public = f
        .share("alice", json!({"asset_id": asset, "audience": "public"}))
        .await;
    f.share("alice", json!({"asset_id": asset, "audience": "signed_in"}))
        .await;
    let third = f
        .stored
        .server
        .call_as(
            "alice",
            "share_asset",
            json!({"command": "create", "asset_id": asset, "audience": "public"}),
            json!({}),
        )
        .await;
    assert_eq!(third["result"]["isError"], true, "{third}");
    assert_eq!(
        third["result"]["structuredContent"]["error"]["code"],
        "limit_reached"
    );
    // Bob has a cap of his own.
    let bobs = f.asset("bob", "his").await;
    assert!(
        f.share("bob", json!({"asset_id": bobs, "audience": "public"}))
            .await["url"]
            .is_string()
    );
    // Three opens from this address, then the fourth waits.
    let url = public["url"].as_str().expect("url");
    for _ in 0..3 {
        assert_eq!(f.open(url).await.status(), 200);
    }
    let limited = f.open(url).await;
    assert_eq!(limited.status(), 429);
    assert!(limited.headers().contains_key("retry-after"));
    // Signed links spend the same allowance.
    let signed = f.download_url("alice", &asset).await;
    assert_eq!(f.open(&signed).await.status(), 429);
}
