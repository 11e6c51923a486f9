//! An `api` connection to a real FastAPI upstream (PyPI, `testing/fastapi-upstream`)
//! that demands a client certificate of its private CA and a bearer token the real
//! OpenID provider issues by client credentials: Docket presents both, reads the
//! OpenAPI document FastAPI generates (through the connection, as the upstream
//! guards it), lists and ranks its endpoints by the caller's persona, resolves an
//! endpoint's schema, and calls and exports by `operation_id` with the arguments
//! checked before anything is sent. Administrators see the certificate's expiry in
//! `platform_info` and `/metrics`. A broken document stops the start with its line,
//! and a document URL at a private address is refused.

use docket_fastapi_upstream::{FastApiUpstream, JwtCheck, UpstreamConfig, certs::TestPki};
use docket_oidc_provider::{Client, GrantType, OidcProvider, ProviderConfig, Resource};
use docket_server::App;
use docket_server::config::Config;
use serde_json::{Value, json};

use crate::support::{TestServer, users};

const SHOP: &str = "https://shop.example/api";
const CLIENT: &str = "docket-shop";
const SECRET: &str = "docket-shop-secret-7f6e5d";

struct Fixture {
    server: TestServer,
    pki: TestPki,
    _upstream: FastApiUpstream,
    _provider: OidcProvider,
    _database: docket_storage::test_db::TestDatabase,
}

async fn fixture(test: &str) -> Option<Fixture> {
    let config = ProviderConfig::new()
        .client(Client::new(CLIENT, SECRET).grant_types([GrantType::ClientCredentials]))
        .resource(SHOP, Resource::new().scopes(["read"]));
    let provider = OidcProvider::start_or_skip(config, test)
        .await
        .expect("the OpenID provider")?;
    let pki = TestPki::generate_or_skip("docket-agent", test).expect("the PKI")?;
    let upstream = FastApiUpstream::start_or_skip(
        UpstreamConfig::new()
            .jwt(JwtCheck::new(provider.issuer(), SHOP))
            .tls(pki.mutual_tls()),
        test,
    )
    .await
    .expect("the FastAPI upstream")?;
    let yaml = format!(
        "connections:\n\
         \x20 shop:\n\
         \x20   kind: api\n\
         \x20   base_url: \"{base}\"\n\
         \x20   methods: [GET, POST]\n\
         \x20   openapi: [\"{document}\"]\n\
         \x20   auth: {{ client_credentials: {{ token_url: \"{token}\", client_id: {CLIENT}, client_secret: \"${{SHOP_SECRET}}\", resource: \"{SHOP}\", scopes: [read] }} }}\n\
         \x20   tls: {{ client_certificate: \"{cert}\", client_key: \"{key}\", ca: \"{ca}\" }}\n\
         personas:\n\
         \x20 analyst:\n\
         \x20   roles: [analyst]\n\
         \x20   tools: {{ allow: [\"*\"] }}\n\
         \x20   connections: {{ allow: [\"*\"] }}\n\
         \x20   api_routes:\n\
         \x20     - {{ connection: shop, methods: [GET], paths: [\"/items*\"], action: allow }}\n",
        base = upstream.base_url(),
        document = upstream.openapi_url(),
        token = provider.token_endpoint(),
        cert = pki.client_cert.display(),
        key = pki.client_key.display(),
        ca = pki.ca_cert.display(),
    );
    let env = |name: &str| (name == "SHOP_SECRET").then(|| SECRET.to_owned());
    let mut config = Config::from_yaml(&yaml, &env).expect("config");
    config.auth = users(&[("alice", &["admin"]), ("eve", &["analyst"])]);
    // On SQLite with assets, so api_export is there too.
    let database = docket_storage::test_db::TestDatabase::sqlite().await;
    let stored = crate::support::StoredServer::start(config, &database, false).await;
    Some(Fixture {
        server: stored.server,
        pki,
        _upstream: upstream,
        _provider: provider,
        _database: database,
    })
}

impl Fixture {
    /// A tool's result as `user`; no answer holds the client secret.
    async fn call(&self, user: &str, tool: &str, arguments: Value) -> Value {
        let body = self.server.call_as(user, tool, arguments, json!({})).await;
        assert!(
            !body.to_string().contains(SECRET),
            "the secret leaked: {body}"
        );
        body["result"].clone()
    }
}

fn operation_ids(listed: &Value) -> Vec<String> {
    listed["structuredContent"]["endpoints"]
        .as_array()
        .expect("endpoints")
        .iter()
        .map(|endpoint| endpoint["operation_id"].as_str().expect("id").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fastapi_upstream_is_found_and_called_by_operation_over_mutual_tls_with_a_client_credentials_token()
 {
    let Some(f) =
        fixture("a_fastapi_upstream_is_found_and_called_by_operation_over_mutual_tls").await
    else {
        return;
    };

    // Both credentials reach the upstream: its /whoami saw the provider's token
    // for this client and the client certificate.
    let whoami = f
        .call(
            "alice",
            "api_invoke_endpoint",
            json!({"connection": "shop", "method": "GET", "path": "/whoami"}),
        )
        .await;
    let body = &whoami["structuredContent"]["body"];
    assert_eq!(whoami["structuredContent"]["status"], 200, "{whoami}");
    assert_eq!(body["client_id"], CLIENT, "{body}");
    assert_eq!(body["aud"], SHOP, "{body}");
    assert_eq!(body["client_cert_cn"], "docket-agent", "{body}");

    // The catalog FastAPI generated: ranked by words, the operation id first.
    let found = f
        .call(
            "alice",
            "api_list_endpoints",
            json!({"connection": "shop", "query": "create item"}),
        )
        .await;
    assert_eq!(operation_ids(&found)[0], "create_item", "{found}");
    let catalog = &found["structuredContent"]["catalogs"][0];
    assert!(
        catalog["name"]
            .as_str()
            .is_some_and(|name| name.ends_with("/openapi.json")),
        "{catalog}"
    );
    assert!(
        catalog["digest"]
            .as_str()
            .is_some_and(|digest| digest.len() == 16),
        "{catalog}"
    );
    // A persona that may only GET /items* sees only those, without paging past them.
    let seen = f
        .call(
            "eve",
            "api_list_endpoints",
            json!({"connection": "shop", "limit": 50}),
        )
        .await;
    let mut ids = operation_ids(&seen);
    ids.sort();
    assert_eq!(ids, ["get_item", "list_items"], "{seen}");
    assert_eq!(seen["structuredContent"]["total"], 2);
    let hidden = f
        .call(
            "eve",
            "api_get_endpoint_schema",
            json!({"connection": "shop", "operation_id": "create_item"}),
        )
        .await;
    assert_eq!(hidden["isError"], true, "{hidden}");

    // One endpoint's schema, its body's $ref resolved.
    let schema = f
        .call(
            "alice",
            "api_get_endpoint_schema",
            json!({"connection": "shop", "operation_id": "create_item"}),
        )
        .await;
    let described = &schema["structuredContent"];
    assert_eq!(described["method"], "POST", "{described}");
    let text = described["request_body"].to_string();
    assert!(
        text.contains("\"price\"") && text.contains("\"name\""),
        "{text}"
    );
    assert!(
        !described.to_string().contains("$ref\":\"#/components"),
        "{described}"
    );

    // A call by operation, its body checked first: a bad one is refused with
    // what is wrong and nothing is created; a good one is.
    let refused = f
        .call("alice", "api_invoke_endpoint", json!({"connection": "shop", "operation_id": "create_item", "body": {"name": "pen", "price": "cheap"}}))
        .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(refused.to_string().contains("body"), "{refused}");
    let created = f
        .call("alice", "api_invoke_endpoint", json!({"connection": "shop", "operation_id": "create_item", "body": {"name": "fountain pen", "price": 12.5}}))
        .await;
    assert_eq!(created["structuredContent"]["status"], 201, "{created}");
    let id = created["structuredContent"]["body"]["id"]
        .as_i64()
        .expect("an id");
    let got = f
        .call("eve", "api_invoke_endpoint", json!({"connection": "shop", "operation_id": "get_item", "path_params": {"item_id": id}}))
        .await;
    assert_eq!(
        got["structuredContent"]["body"]["name"], "fountain pen",
        "{got}"
    );
    // A path parameter cannot change the path, and the persona's routes hold.
    let sneaky = f
        .call("eve", "api_invoke_endpoint", json!({"connection": "shop", "operation_id": "get_item", "path_params": {"item_id": "../whoami"}}))
        .await;
    assert_eq!(sneaky["isError"], true, "{sneaky}");
    let denied = f
        .call("eve", "api_invoke_endpoint", json!({"connection": "shop", "operation_id": "create_item", "body": {"name": "x", "price": 1}}))
        .await;
    assert_eq!(denied["isError"], true, "{denied}");
    let searched = f
        .call("eve", "api_invoke_endpoint", json!({"connection": "shop", "operation_id": "list_items", "query_params": {"q": "fountain", "limit": 5}}))
        .await;
    let items = searched["structuredContent"]["body"]
        .as_array()
        .expect("items");
    assert!(items.iter().any(|item| item["id"] == id), "{searched}");

    // An export by operation, its query checked the same way.
    let exported = f
        .call("alice", "api_export", json!({"connection": "shop", "operation_id": "list_items", "query_params": {"limit": 100}, "name": "all items"}))
        .await;
    assert_eq!(
        exported["structuredContent"]["upstream_status"], 200,
        "{exported}"
    );
    assert_eq!(
        exported["structuredContent"]["format"], "json",
        "{exported}"
    );
    let refused = f
        .call("alice", "api_export", json!({"connection": "shop", "operation_id": "list_items", "query_params": {"limit": 1000}, "name": "too many"}))
        .await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert!(
        refused.to_string().contains("query_params.limit"),
        "{refused}"
    );

    // The certificate's expiry: for administrators, and as a metric.
    let info = f.call("alice", "platform_info", json!({})).await;
    let certificates = &info["structuredContent"]["client_certificates"];
    assert_eq!(certificates[0]["connection"], "shop", "{info}");
    assert_eq!(
        certificates[0]["expires_at"],
        f.pki.client_not_after.as_str(),
        "{info}"
    );
    let info = f.call("eve", "platform_info", json!({})).await;
    assert!(
        info["structuredContent"]
            .get("client_certificates")
            .is_none(),
        "{info}"
    );
    let metrics = reqwest::get(f.server.url("/metrics"))
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("docket_api_client_certificate_expiry_seconds{connection=\"shop\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_broken_document_stops_the_start_with_its_line_and_private_urls_are_refused() {
    let dir = std::env::temp_dir().join(format!("docket-openapi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let broken = dir.join("broken.yaml");
    std::fs::write(
        &broken,
        "openapi: 3.1.0\ninfo: { title: t, version: '1' }\npaths:\n  /a:\n    get:\n      parameters:\n        - { name: x, in: nowhere }\n      responses: {}\n",
    )
    .expect("write");
    let start = |openapi: String| {
        let yaml = format!(
            "connections:\n  shop: {{ kind: api, base_url: \"https://shop.example/v1\", openapi: [\"{openapi}\"] }}\n"
        );
        let config = Config::from_yaml(&yaml, &|_| None).expect("config");
        App::builder(config)
            .build()
            .err()
            .map(|error| error.to_string())
    };
    let error = start(broken.display().to_string()).expect("refused");
    assert!(error.contains("connections.shop.openapi[0]"), "{error}");
    assert!(error.contains("line 7"), "{error}");
    // A document elsewhere than the API, at a loopback address: refused unless
    // its host is allowed.
    let error = start("http://127.0.0.1:9/openapi.json".to_owned()).expect("refused");
    assert!(error.contains("not a public address"), "{error}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A document below the connection's base URL is fetched through it on first
/// use, and again once `catalogs.refresh` passed, with `If-None-Match`: an
/// unchanged one (304) keeps its version, a changed one is the new version.
#[tokio::test]
async fn a_fetched_document_is_refreshed_with_its_etag() {
    let upstream = crate::upstream::Upstream::start().await;
    let yaml = format!(
        "catalogs: {{ refresh: 1s }}\n\
         connections:\n  shop: {{ kind: api, base_url: \"{base}\", openapi: [\"{document}\"] }}\n",
        base = upstream.url("/v1"),
        document = upstream.url("/v1/openapi.json"),
    );
    let mut config = Config::from_yaml(&yaml, &|_| None).expect("config");
    config.auth = users(&[("alice", &["admin"])]);
    let server = TestServer::start(App::builder(config).build().expect("app")).await;
    let list = || async {
        let body = server
            .call_as(
                "alice",
                "api_list_endpoints",
                json!({"connection": "shop"}),
                json!({}),
            )
            .await;
        let result = &body["result"]["structuredContent"];
        (
            result["catalogs"][0]["digest"]
                .as_str()
                .expect("digest")
                .to_owned(),
            operation_ids(&body["result"]),
        )
    };
    let fetches = || {
        upstream
            .seen()
            .into_iter()
            .filter(|seen| seen.path == "/v1/openapi.json")
            .collect::<Vec<_>>()
    };
    let (first, ids) = list().await;
    assert_eq!(ids, ["list_items"]);
    assert_eq!(fetches().len(), 1);
    // Used as it is until it is older than the refresh.
    list().await;
    assert_eq!(fetches().len(), 1, "fetched again before its refresh");
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (again, _) = list().await;
    assert_eq!(again, first, "a 304 keeps the version");
    let asked = fetches();
    assert!(asked.len() >= 2, "{asked:?}");
    assert_eq!(
        asked.last().and_then(|seen| seen.header("if-none-match")),
        Some("\"v1\"")
    );
    upstream.set_openapi_version(2);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (changed, ids) = list().await;
    assert_ne!(changed, first, "a new document is a new version");
    assert_eq!(ids, ["list_items", "list_orders"]);
}
