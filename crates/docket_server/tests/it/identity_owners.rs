//! A script's OIDC owner at Trino when no person is behind the run, on SQLite
//! and PostgreSQL, with a real OpenID provider: a person who signs in has their
//! verified claims remembered in the principal directory, so their script's
//! scheduled run (no token, no request) still runs at Trino as their e-mail
//! claim transformed; an owner who never signed in has no claims to act by, and
//! their run is refused by the claim's name before anything reaches Trino.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use docket_catalog::scripts::{NewSchedule, NewScript, RunFilter, RunStatus};
use docket_run_bridge::clock::{Clock, ManualClock};
use docket_server::config::Config;
use docket_trino_double::{RecordedRequest, TrinoDouble};
use serde_json::{Value, json};
use time::macros::datetime;

use crate::support::{Backend, StoredServer, on_both_backends};

on_both_backends!(scheduled_runs_act_as_their_owners_remembered_claims);

/// A hang guard, never an assertion about speed.
const PATIENCE: Duration = Duration::from_secs(60);

async fn patiently<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {PATIENCE:?}"))
}

/// The resource Docket's tokens are issued for.
const DOCKET_RESOURCE: &str = "http://127.0.0.1/docket";

/// A script that queries Trino once.
const QUERY_SCRIPT: &str = "rows = platform.query(\"SELECT 1 AS one\")\nprint(rows[\"rows\"])\n";

/// The client tags a statement carried.
fn tags(request: &RecordedRequest) -> Vec<String> {
    request
        .header("x-trino-client-tags")
        .unwrap_or_default()
        .split(',')
        .map(str::to_owned)
        .collect()
}

async fn scheduled_runs_act_as_their_owners_remembered_claims(backend: Backend) {
    use docket_oidc_provider::{Account, Client, OidcProvider, ProviderConfig, Resource};
    let provider_config = ProviderConfig::new()
        .account(
            "alice",
            Account::new().email("Alice@Example.com").roles(["analyst"]),
        )
        .client(Client::new("docket", "docket-test-secret"))
        .resource(DOCKET_RESOURCE, Resource::new());
    let Some(provider) = OidcProvider::start_or_skip(provider_config, "identity_owners")
        .await
        .expect("the OpenID provider starts")
    else {
        return;
    };
    let Some(database) = backend.database().await else {
        return;
    };
    let double = TrinoDouble::start().await.expect("double");
    let yaml = format!(
        "connections:\n  warehouse: {{ kind: trino, url: \"{}\", user: docket, catalog: memory, schema: default, \
         source: docket-tests, impersonation: {{ user_claim: email, transforms: [strip_domain, lowercase] }} }}\n\
         auth: {{ oidc: {{ issuer: \"{}\", audience: \"{DOCKET_RESOURCE}\" }} }}\n\
         tasks: {{ heartbeat_interval: 100ms }}\n\
         scripts: {{ heartbeat_interval: 100ms, lease: 5s, schedules: {{ interval: 10s }} }}\n\
         consent: {{ trino: {{ row_threshold: 1000000000 }} }}\n\
         personas:\n  analyst: {{ roles: [analyst], tools: {{ allow: [\"*\"] }}, connections: {{ allow: [\"*\"] }} }}\n",
        double.url(),
        provider.issuer(),
    );
    let config = Config::from_yaml(&yaml, &|_| None).expect("config");
    let clock = Arc::new(ManualClock::new(datetime!(2026-06-01 03:59:30 UTC)));
    let driven = Arc::clone(&clock) as Arc<dyn Clock>;
    let stored = StoredServer::start_with(config, &database, true, move |builder| {
        builder.schedule_clock(driven)
    })
    .await;

    // Alice signs in: her bearer token's claims are remembered.
    let token = provider
        .user_token("alice", "docket", DOCKET_RESOURCE)
        .await
        .expect("a token from the provider");
    let sub = docket_oidc_provider::jwt_claims(&token).expect("claims")["sub"]
        .as_str()
        .expect("a sub")
        .to_owned();
    let alice = format!("oidc:{sub}");
    let call = |tool: &'static str, arguments: Value| {
        let (server, token) = (&stored.server, token.clone());
        async move {
            let (_, body) = server
                .rpc("tools/call", json!({"name": tool, "arguments": arguments}))
                .header("authorization", &format!("Bearer {token}"))
                .send()
                .await;
            body["result"].clone()
        }
    };
    let created = call(
        "manage_script",
        json!({"command": "create", "name": "probe", "source": QUERY_SCRIPT}),
    )
    .await;
    assert_ne!(created["isError"], true, "{created}");
    let set = call(
        "manage_script",
        json!({"command": "schedule_set", "name": "probe", "cron": "* * * * *"}),
    )
    .await;
    assert_ne!(set["isError"], true, "{set}");
    let principals = stored.store.principal_store();
    let remembered = patiently("alice's claims in the principal directory", async {
        loop {
            if let Some(claims) = principals.claims_of(&alice).await.expect("read") {
                return claims;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(remembered["email"], "Alice@Example.com", "{remembered:?}");
    assert!(
        !remembered.contains_key("exp") && !remembered.contains_key("jti"),
        "the token's own claims are not kept: {remembered:?}"
    );

    // Someone whose script exists but who never signed in here (their script
    // came with the database, say), on the same schedule.
    let scripts = stored.store.script_store();
    let ghost = "oidc:never-signed-in";
    let (ghost_script, _) = scripts
        .create_script(
            NewScript {
                id: docket_catalog::generate_id().expect("id"),
                owner: ghost.to_owned(),
                name: "probe".into(),
                description: "queries once".into(),
                params: json!([]),
                source: QUERY_SCRIPT.into(),
                author: ghost.to_owned(),
                author_roles: vec!["analyst".into()],
            },
            u32::MAX,
        )
        .await
        .expect("the ghost's script");
    scripts
        .set_schedule(
            NewSchedule {
                script_id: ghost_script.id.clone(),
                cron: "* * * * *".into(),
                timezone: "UTC".into(),
                args: json!({}),
                next_fire_at: datetime!(2026-06-01 04:00:00 UTC),
                set_by: ghost.to_owned(),
            },
            u32::MAX,
        )
        .await
        .expect("the ghost's schedule");
    assert!(double.submitted().is_empty(), "{:?}", double.submitted());

    // A minute on, both schedules fire; no person and no token is behind either run.
    clock.advance(Duration::from_secs(60));
    let submitted = patiently("the scheduled run's query", async {
        loop {
            let submitted = double.submitted();
            if !submitted.is_empty() {
                return submitted;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let statement = &submitted[0];
    assert_eq!(
        statement.header("x-trino-user"),
        Some("alice"),
        "alice's e-mail claim, domain stripped and lower-cased: {}",
        statement.body
    );
    let tags = tags(statement);
    assert!(tags.contains(&"scheduled".to_owned()), "{tags:?}");
    assert!(tags.contains(&"tool=trino_query".to_owned()), "{tags:?}");

    let ghost_run = patiently("the ghost's run to end", async {
        loop {
            let runs = scripts
                .list_runs(
                    &RunFilter {
                        script_id: Some(ghost_script.id.clone()),
                        ..RunFilter::default()
                    },
                    10,
                )
                .await
                .expect("runs");
            if let Some(run) = runs
                .into_iter()
                .find(|run| !matches!(run.status, RunStatus::Queued | RunStatus::Running))
            {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert_eq!(ghost_run.status, RunStatus::Failed, "{ghost_run:?}");
    let error = ghost_run.error.clone().unwrap_or_default();
    assert!(
        error.contains("`email`"),
        "the refusal names the claim: {error}"
    );
    assert!(error.contains(ghost), "and whose run it was: {error}");
    // Nothing of the ghost's run reached Trino: every statement ran as alice.
    for statement in double.submitted() {
        assert_eq!(
            statement.header("x-trino-user"),
            Some("alice"),
            "{}",
            statement.body
        );
    }

    // The retention pass forgets whoever was not seen within its age.
    let app = &stored.server.app;
    assert_eq!(app.forget_unseen_principals(PATIENCE).await, 0);
    assert_eq!(app.forget_unseen_principals(Duration::ZERO).await, 1);
    assert_eq!(principals.claims_of(&alice).await.expect("read"), None);
}
