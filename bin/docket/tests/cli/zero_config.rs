//! `docket serve` with no configuration: SQLite under `./docket-data/`, the tasks
//! extension advertised, and tasks still readable after a restart.

use serde_json::json;

use crate::support::{Replica, temp_dir};

#[tokio::test]
async fn the_embedded_default_keeps_tasks_across_a_restart() {
    let dir = temp_dir("zero-config");
    let mut first = Replica::start(&dir, &["--address", "127.0.0.1:0"]);
    let discover = first.rpc("server/discover", json!({}), false).await;
    assert_eq!(
        discover["result"]["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}}),
        "{discover}"
    );
    assert!(
        dir.join("docket-data/docket.db").exists(),
        "the database lives in ./docket-data/"
    );

    // The embedded default registers no task-capable tool yet, so the restarts below
    // use the same database with the diagnostics tool turned on.
    first.signal("-TERM");
    first.wait();

    let config = dir.join("docket.yaml");
    std::fs::write(
        &config,
        "server: { address: \"127.0.0.1:0\" }\n\
         database: { url: \"sqlite://./docket-data/docket.db\" }\n\
         auth: { allow_anonymous: true, anonymous_roles: [admin] }\n\
         diagnostics: { enabled: true }\n",
    )
    .expect("config written");
    let config = config.to_str().expect("utf-8 path").to_owned();
    let mut second = Replica::start(&dir, &["--config", &config]);
    let id = second.start_sleep(0.2).await;
    second.wait_for(&id, "completed").await;
    let running = second.start_sleep(600.0).await;
    second.signal("-TERM");
    second.wait();

    let third = Replica::start(&dir, &["--config", &config]);
    let done = third.get_task(&id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["structuredContent"]["slept_seconds"], 0.2);
    let interrupted = third.get_task(&running).await;
    assert_eq!(interrupted["status"], "failed", "{interrupted}");
    assert!(
        interrupted["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("call the tool again"))
    );
}

/// A configuration file without `database:` runs on the same embedded SQLite
/// database as no file at all: tasks are offered and kept in `./docket-data/`.
#[tokio::test]
async fn a_configuration_without_a_database_uses_the_embedded_one() {
    let dir = temp_dir("no-database-key");
    let config = dir.join("docket.yaml");
    std::fs::write(
        &config,
        "server: { address: \"127.0.0.1:0\" }\n\
         auth: { allow_anonymous: true, anonymous_roles: [admin] }\n\
         diagnostics: { enabled: true }\n",
    )
    .expect("config written");
    let server = Replica::start(&dir, &["--config", config.to_str().expect("utf-8")]);
    let discover = server.rpc("server/discover", json!({}), false).await;
    assert_eq!(
        discover["result"]["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}}),
        "{discover}"
    );
    let id = server.start_sleep(0.1).await;
    server.wait_for(&id, "completed").await;
    assert!(dir.join("docket-data/docket.db").exists());
}

/// `docket serve` started while its PostgreSQL does not answer (every connection
/// refused for 4 s, through a proxy, so the shared server is never stopped) waits
/// for it, trying again with backoff (`database.start_timeout`), and serves once it
/// answers, instead of exiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_waits_for_a_database_that_is_not_up_yet() {
    let Some(database) =
        docket_storage::test_db::TestDatabase::postgres(&crate::support::postgres_server()).await
    else {
        return;
    };
    let proxy =
        docket_storage::test_db::FaultProxy::start(database.server_authority().expect("postgres"))
            .await;
    let url = database.url_through(&proxy).expect("url");
    let dir = temp_dir("start-wait");
    let config = dir.join("docket.yaml");
    std::fs::write(
        &config,
        format!(
            "server: {{ address: \"127.0.0.1:0\" }}\n\
             database: {{ url: \"{url}\", max_connections: 2, start_timeout: 60s }}\n\
             auth: {{ allow_anonymous: true, anonymous_roles: [admin] }}\n"
        ),
    )
    .expect("config written");
    proxy.cut(std::time::Duration::from_secs(4));
    let server = Replica::start(&dir, &["--config", config.to_str().expect("utf-8")]);
    let discover = server.rpc("server/discover", json!({}), false).await;
    assert_eq!(
        discover["result"]["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/tasks": {}}),
        "{discover}"
    );
}
