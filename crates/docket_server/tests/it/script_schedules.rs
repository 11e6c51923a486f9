//! Script schedules through the server, on SQLite and PostgreSQL, with the
//! scheduler on a clock the test drives: `schedule_set` refuses bad cron
//! expressions, unknown zones and arguments the script does not take, and
//! shows the next fire times; `schedule_list`, `schedule_enable` and
//! `schedule_disable` are the owner's and administrators'; a fire runs the
//! script with trigger `schedule`, `${fire_date}` bound and `run.fire_time`
//! pinned; after an outage the
//! latest fire runs once and the missed ones are counted; a disabled script's
//! schedule fires no more. (Two replicas firing one schedule, overlaps and
//! the daylight-saving rule are tested in `docket_run_bridge` and
//! `docket_run_bridge::cadence`.)

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use docket_run_bridge::clock::{Clock, ManualClock};
use docket_server::config::Config;
use docket_storage::test_db::TestDatabase;
use serde_json::{Value, json};
use time::macros::datetime;

use crate::support::{Backend, StoredServer, TestServer, key_of, on_both_backends, users};

/// A hang guard, never an assertion about speed.
const PATIENCE: Duration = Duration::from_secs(60);

async fn patiently<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not happen within {PATIENCE:?}"))
}

struct Fixture {
    server: TestServer,
    clock: Arc<ManualClock>,
    _database: TestDatabase,
    _files: std::path::PathBuf,
}

on_both_backends!(
    schedule_commands_check_their_input_and_show_the_next_fires,
    a_schedule_fires_on_the_driven_clock_and_recovers_from_an_outage_once,
);

async fn fixture(backend: Backend) -> Option<Fixture> {
    let mut config = Config::from_yaml(
        "scripts: { heartbeat_interval: 100ms, schedules: { interval: 10s } }\n\
         rate_limit: { requests_per_minute: 100000, burst: 10000 }\n\
         personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] }, connections: { allow: [\"*\"] } }\n",
        &|_| None,
    )
    .expect("config");
    config.auth = users(&[
        ("alice", &["analyst"]),
        ("bob", &["analyst"]),
        ("root", &["admin"]),
    ]);
    let database = backend.database().await?;
    let clock = Arc::new(ManualClock::new(datetime!(2026-06-01 03:59:30 UTC)));
    let driven = Arc::clone(&clock) as Arc<dyn Clock>;
    let stored = StoredServer::start_with(config, &database, true, move |builder| {
        builder.schedule_clock(driven)
    })
    .await;
    Some(Fixture {
        server: stored.server,
        clock,
        _database: database,
        _files: stored.files,
    })
}

impl Fixture {
    async fn manage(&self, user: &str, arguments: Value) -> Value {
        let (_, body) = self
            .server
            .rpc(
                "tools/call",
                json!({"name": "manage_script", "arguments": arguments}),
            )
            .header("x-api-key", &key_of(user))
            .send()
            .await;
        body.get("result").cloned().unwrap_or(body)
    }

    async fn ok(&self, user: &str, arguments: Value) -> Value {
        let result = self.manage(user, arguments.clone()).await;
        assert_ne!(result["isError"], json!(true), "{arguments} -> {result}");
        result["structuredContent"].clone()
    }

    async fn refused(&self, user: &str, arguments: Value) -> Value {
        let result = self.manage(user, arguments.clone()).await;
        assert_eq!(result["isError"], json!(true), "{arguments} -> {result}");
        result["structuredContent"]["error"].clone()
    }

    /// Reads `name`'s runs until `done` says they are what the test waits for.
    async fn runs_until(
        &self,
        name: &str,
        what: &str,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        patiently(what, async {
            loop {
                let runs = self
                    .ok("alice", json!({"command": "runs", "name": name}))
                    .await;
                let runs = runs["runs"].as_array().cloned().unwrap_or_default();
                if done(&runs) {
                    return runs;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    }
}

/// Prints what a scheduled run sees: its bound day, its fire time, and the
/// roles it acts with (its version author's).
const DAY_SCRIPT: &str = "me = platform.call(\"platform_info\", {})\n\
     print(\"day\", run.params[\"day\"], \"fired\", run.fire_time, \"as\", me[\"identity\"][\"roles\"])\n";

async fn create(f: &Fixture, name: &str) {
    f.ok(
        "alice",
        json!({"command": "create", "name": name, "source": DAY_SCRIPT,
               "params": [{"name": "day", "type": "string", "required": true}]}),
    )
    .await;
}

async fn schedule_commands_check_their_input_and_show_the_next_fires(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    create(&f, "nightly").await;
    let set = |cron: &str, timezone: &str, args: Value| {
        json!({"command": "schedule_set", "name": "nightly", "cron": cron,
               "timezone": timezone, "args": args})
    };
    let day = json!({"day": "${fire_date}"});

    let bad_cron = f
        .refused("alice", set("61 * * * *", "UTC", day.clone()))
        .await;
    assert_eq!(bad_cron["code"], "invalid_arguments");
    assert!(
        bad_cron["message"]
            .as_str()
            .expect("message")
            .contains("five fields"),
        "{bad_cron}"
    );
    let seconds = f
        .refused("alice", set("0 0 6 * * *", "UTC", day.clone()))
        .await;
    assert!(
        seconds["message"]
            .as_str()
            .expect("message")
            .contains("not 5"),
        "{seconds}"
    );
    let zone = f
        .refused("alice", set("0 6 * * *", "Mars/Olympus", day.clone()))
        .await;
    assert!(
        zone["message"].as_str().expect("message").contains("IANA"),
        "{zone}"
    );
    let no_args = f.refused("alice", set("0 6 * * *", "UTC", json!({}))).await;
    assert!(
        no_args["message"]
            .as_str()
            .expect("message")
            .contains("day"),
        "{no_args}"
    );
    let unknown_arg = f
        .refused(
            "alice",
            set("0 6 * * *", "UTC", json!({"day": "x", "night": 1})),
        )
        .await;
    assert!(
        unknown_arg["message"]
            .as_str()
            .expect("message")
            .contains("night")
    );

    // 06:00 in Berlin is 04:00 UTC in June; the clock shows 05:59:30 there.
    let scheduled = f
        .ok("alice", set("0 6 * * *", "Europe/Berlin", day.clone()))
        .await;
    assert_eq!(scheduled["enabled"], true);
    assert_eq!(scheduled["timezone"], "Europe/Berlin");
    assert_eq!(
        scheduled["next_fire_times"],
        json!([
            "2026-06-01T04:00:00Z",
            "2026-06-02T04:00:00Z",
            "2026-06-03T04:00:00Z",
            "2026-06-04T04:00:00Z",
            "2026-06-05T04:00:00Z",
        ])
    );
    assert!(
        scheduled["dst_rule"]
            .as_str()
            .expect("rule")
            .contains("repeated hour")
    );
    // Without a zone, UTC.
    let utc = f.ok("alice", set("@daily", "UTC", day.clone())).await;
    assert_eq!(utc["next_fire_at"], "2026-06-02T00:00:00Z");
    let (_, body) = f
        .server
        .rpc(
            "tools/call",
            json!({"name": "manage_script", "arguments":
                {"command": "schedule_set", "name": "nightly", "cron": "0 6 * * *", "args": day}}),
        )
        .header("x-api-key", &key_of("alice"))
        .send()
        .await;
    assert_eq!(body["result"]["structuredContent"]["timezone"], "UTC");

    // The owner's and administrators' only.
    let mine = f.ok("alice", json!({"command": "schedule_list"})).await;
    assert_eq!(mine["count"], 1);
    assert_eq!(mine["schedules"][0]["name"], "nightly");
    let bobs = f.ok("bob", json!({"command": "schedule_list"})).await;
    assert_eq!(bobs["count"], 0);
    let everyone = f.ok("root", json!({"command": "schedule_list"})).await;
    assert_eq!(everyone["count"], 1);
    for command in [
        "schedule_set",
        "schedule_enable",
        "schedule_disable",
        "schedule_list",
    ] {
        let hidden = f
            .refused(
                "bob",
                json!({"command": command, "name": "nightly", "cron": "* * * * *"}),
            )
            .await;
        assert_eq!(hidden["code"], "not_found", "{command}");
    }
    let one = f
        .ok(
            "alice",
            json!({"command": "schedule_list", "name": "nightly"}),
        )
        .await;
    assert_eq!(one["fires"], json!([]));
    assert_eq!(one["missed_fires"], 0);

    let off = f
        .ok(
            "root",
            json!({"command": "schedule_disable", "name": "nightly", "owner": "apikey:alice"}),
        )
        .await;
    assert_eq!(off["enabled"], false);
    assert_eq!(off["next_fire_times"], json!([]));
    let on = f
        .ok(
            "alice",
            json!({"command": "schedule_enable", "name": "nightly"}),
        )
        .await;
    assert_eq!(on["enabled"], true);
    assert_eq!(on["next_fire_at"], "2026-06-01T06:00:00Z");

    create(&f, "unscheduled").await;
    let none = f
        .refused(
            "alice",
            json!({"command": "schedule_enable", "name": "unscheduled"}),
        )
        .await;
    assert!(
        none["message"]
            .as_str()
            .expect("message")
            .contains("no schedule")
    );
}

async fn a_schedule_fires_on_the_driven_clock_and_recovers_from_an_outage_once(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    create(&f, "minutely").await;
    f.ok(
        "alice",
        json!({"command": "schedule_set", "name": "minutely", "cron": "* * * * *",
               "args": {"day": "${fire_date}"}}),
    )
    .await;

    f.clock.advance(Duration::from_secs(60));
    let runs = f
        .runs_until("minutely", "the 04:00 fire's run", |runs| {
            runs.len() == 1 && runs[0]["finished_at"].is_string()
        })
        .await;
    assert_eq!(runs[0]["status"], "succeeded", "{}", runs[0]);
    assert_eq!(runs[0]["trigger"], "schedule");
    assert_eq!(runs[0]["fire_time"], "2026-06-01T04:00:00Z");
    assert_eq!(
        runs[0]["log"],
        "day 2026-06-01 fired 2026-06-01T04:00:00Z as [\"analyst\"]\n"
    );
    assert_eq!(runs[0]["tool_calls"], 1);
    let read = f
        .ok(
            "alice",
            json!({"command": "get_run", "run_id": runs[0]["run_id"]}),
        )
        .await;
    assert_eq!(read["params"], json!({"day": "2026-06-01"}));

    // Ten minutes pass at once (the replicas were down): the latest fire runs
    // once, and the nine before it are counted as missed.
    f.clock.advance(Duration::from_secs(600));
    let runs = f
        .runs_until("minutely", "the run after the outage", |runs| {
            runs.len() == 2 && runs.iter().all(|run| run["finished_at"].is_string())
        })
        .await;
    assert!(
        runs.iter().all(|run| run["status"] == "succeeded"),
        "{runs:?}"
    );
    assert_eq!(runs[0]["fire_time"], "2026-06-01T04:10:00Z");
    let schedule = f
        .ok(
            "alice",
            json!({"command": "schedule_list", "name": "minutely"}),
        )
        .await;
    assert_eq!(schedule["missed_fires"], 9);
    assert_eq!(schedule["fires"][0]["fire_time"], "2026-06-01T04:10:00Z");
    assert_eq!(schedule["fires"][0]["missed"], 9);
    assert_eq!(schedule["fires"][0]["status"], "queued");
    assert_eq!(schedule["fires"].as_array().expect("fires").len(), 2);

    // A disabled script's schedule moves on without running it.
    f.ok(
        "alice",
        json!({"command": "update", "name": "minutely", "enabled": false}),
    )
    .await;
    f.clock.advance(Duration::from_secs(60));
    patiently("the schedule to move past 04:11", async {
        loop {
            let schedule = f
                .ok(
                    "alice",
                    json!({"command": "schedule_list", "name": "minutely"}),
                )
                .await;
            if schedule["next_fire_at"] == "2026-06-01T04:12:00Z" {
                assert_eq!(schedule["script_enabled"], false);
                assert_eq!(schedule["missed_fires"], 9);
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let runs = f
        .ok("alice", json!({"command": "runs", "name": "minutely"}))
        .await;
    assert_eq!(runs["count"], 2);
}
