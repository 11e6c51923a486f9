//! `manage_script`'s authoring commands through the server, on SQLite and
//! PostgreSQL: `patch` with the anchored edit grammar (each edit's index, op,
//! matches and line, a unified diff, `dry_run`, and the stable codes that
//! abort the whole call: `PATCH_NO_MATCH`, `PATCH_AMBIGUOUS`,
//! `PATCH_STALE_BASE`), `diff` between versions, `outline`, `stats`, `runs`
//! and `get_run` with a status filter, `list_runs`' status filter, `help`,
//! what `validate` reports it checked, and the known commands named for an
//! unknown one. Another user's script stays out of reach of every command.

use docket_server::config::Config;
use docket_storage::test_db::TestDatabase;
use serde_json::{Value, json};

use crate::support::{Backend, StoredServer, TestServer, key_of, on_both_backends, users};

const SOURCE: &str = "\
def total(rows):
    sum = 0
    for row in rows:
        sum += row[\"n\"]
    return sum

rows = [{\"n\": 1}, {\"n\": 2}]
print(total(rows))
print(\"done\")
";

struct Fixture {
    server: TestServer,
    _database: TestDatabase,
    _files: std::path::PathBuf,
}

on_both_backends!(
    patch_edits_the_newest_source_in_place,
    a_patch_that_cannot_apply_changes_nothing_and_says_why,
    diff_outline_stats_help_and_validate_describe_a_script,
    runs_and_get_run_read_a_scripts_runs_by_status,
);

async fn fixture(backend: Backend) -> Option<Fixture> {
    let mut config = Config::from_yaml(
        "personas:\n  analyst: { roles: [analyst], tools: { allow: [\"*\"] }, connections: { allow: [\"*\"] } }\n",
        &|_| None,
    )
    .expect("config");
    config.auth = users(&[
        ("alice", &["analyst"]),
        ("bob", &["analyst"]),
        ("root", &["admin"]),
    ]);
    let database = backend.database().await?;
    let stored = StoredServer::start(config, &database, true).await;
    Some(Fixture {
        server: stored.server,
        _database: database,
        _files: stored.files,
    })
}

impl Fixture {
    async fn call(&self, user: &str, tool: &str, arguments: Value) -> Value {
        let (_, body) = self
            .server
            .rpc("tools/call", json!({"name": tool, "arguments": arguments}))
            .header("x-api-key", &key_of(user))
            .send()
            .await;
        body.get("result").cloned().unwrap_or(body)
    }

    async fn manage(&self, user: &str, arguments: Value) -> Value {
        self.call(user, "manage_script", arguments).await
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

    async fn source(&self, name: &str) -> (String, i64) {
        let script = self
            .ok("alice", json!({"command": "get", "name": name}))
            .await;
        (
            script["source"].as_str().expect("source").to_owned(),
            script["version"].as_i64().expect("version"),
        )
    }
}

async fn patch_edits_the_newest_source_in_place(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    f.ok(
        "alice",
        json!({"command": "create", "name": "report", "source": SOURCE}),
    )
    .await;

    let patched = f
        .ok(
            "alice",
            json!({"command": "patch", "name": "report", "base_version": 1, "edits": [
                {"find": "print(\"done\")", "replace": "print(\"finished\")"},
                {"op": "insert_before", "find": "    return sum\n", "text": "    print(sum)\n", "section": "total"},
                {"op": "append", "text": "print(\"bye\")\n"},
            ]}),
        )
        .await;
    assert_eq!(patched["version"], 2);
    assert_eq!(patched["base_version"], 1);
    assert_eq!(
        patched["edits"],
        json!([
            {"index": 0, "op": "replace", "matches": 1, "line": 9},
            {"index": 1, "op": "insert_before", "matches": 1, "line": 5},
            {"index": 2, "op": "append", "matches": 0, "line": 11},
        ])
    );
    let diff = patched["diff"].as_str().expect("diff");
    assert!(
        diff.contains("-print(\"done\")\n+print(\"finished\")"),
        "{diff}"
    );
    assert!(diff.contains("+    print(sum)"), "{diff}");
    assert_eq!(patched["lines_added"], 3);
    assert_eq!(patched["lines_removed"], 1);
    assert!(
        patched.get("source").is_none(),
        "the answer never carries the source"
    );
    let (source, version) = f.source("report").await;
    assert_eq!(version, 2);
    assert!(source.contains("    print(sum)\n    return sum\n"));
    assert!(source.ends_with("print(\"finished\")\nprint(\"bye\")\n"));

    // A dry run shows the diff and saves nothing.
    let dry = f
        .ok(
            "alice",
            json!({"command": "patch", "name": "report", "dry_run": true, "edits": [
                {"find": "print(\"bye\")\n", "replace": ""},
            ]}),
        )
        .await;
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["valid"], true);
    assert!(
        dry["diff"]
            .as_str()
            .expect("diff")
            .contains("-print(\"bye\")")
    );
    assert_eq!(f.source("report").await.1, 2);

    // Occurrences choose among several matches.
    let all = f
        .ok(
            "alice",
            json!({"command": "patch", "name": "report", "edits": [
                {"pattern": "print\\(", "replace": "log(", "occurrence": "all"},
                {"op": "prepend", "text": "def log(value):\n    print(value)\n\n"},
            ]}),
        )
        .await;
    assert_eq!(all["edits"][0]["matches"], 4);
    assert_eq!(all["version"], 3);
    // The patch left a script that runs.
    let ran = f
        .call("alice", "run_script", json!({"name": "report"}))
        .await;
    assert_eq!(ran["structuredContent"]["status"], "succeeded", "{ran}");

    // Another user's script is out of reach; an administrator may patch it.
    let hidden = f
        .refused(
            "bob",
            json!({"command": "patch", "name": "report", "edits": [{"find": "x", "replace": "y"}]}),
        )
        .await;
    assert_eq!(hidden["code"], "not_found");
    let by_admin = f
        .ok(
            "root",
            json!({"command": "patch", "name": "report", "owner": "apikey:alice", "edits": [
                {"op": "append", "text": "# reviewed\n"},
            ]}),
        )
        .await;
    assert_eq!(by_admin["author"], "apikey:root");
}

async fn a_patch_that_cannot_apply_changes_nothing_and_says_why(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    f.ok(
        "alice",
        json!({"command": "create", "name": "report", "source": SOURCE}),
    )
    .await;
    let patch = |edits: Value| json!({"command": "patch", "name": "report", "edits": edits});

    let no_match = f
        .refused(
            "alice",
            patch(json!([
                {"find": "print(\"done\")", "replace": "print(\"ok\")"},
                {"find": "not in the script", "replace": "x"},
            ])),
        )
        .await;
    assert_eq!(no_match["code"], "PATCH_NO_MATCH");
    assert_eq!(no_match["edit"], 1);
    let ambiguous = f
        .refused(
            "alice",
            patch(json!([{"find": "print(", "replace": "log("}])),
        )
        .await;
    assert_eq!(ambiguous["code"], "PATCH_AMBIGUOUS");
    assert!(
        ambiguous["message"]
            .as_str()
            .expect("message")
            .contains("2 times"),
        "{ambiguous}"
    );
    let section = f
        .refused(
            "alice",
            patch(json!([{"find": "sum", "replace": "s", "section": "nope"}])),
        )
        .await;
    assert_eq!(section["code"], "PATCH_SECTION_NOT_FOUND");
    let bad_pattern = f
        .refused("alice", patch(json!([{"pattern": "(", "replace": "x"}])))
        .await;
    assert_eq!(bad_pattern["code"], "PATCH_BAD_PATTERN");
    let bad_edit = f
        .refused("alice", patch(json!([{"op": "replace", "replace": "x"}])))
        .await;
    assert_eq!(bad_edit["code"], "PATCH_BAD_EDIT");
    // Nothing was saved by any of them.
    assert_eq!(f.source("report").await, (SOURCE.to_owned(), 1));

    // A stale base is refused, whatever the edits.
    f.ok(
        "alice",
        json!({"command": "update", "name": "report", "description": "v2"}),
    )
    .await;
    let stale = f
        .refused(
            "alice",
            json!({"command": "patch", "name": "report", "base_version": 1,
                   "edits": [{"op": "append", "text": "# x\n"}]}),
        )
        .await;
    assert_eq!(stale["code"], "PATCH_STALE_BASE");
    assert!(stale["hint"].as_str().expect("hint").contains("re-read"));
    // A patch that breaks the syntax is refused on save, shown on a dry run.
    let broken = patch(json!([{"find": "def total(rows):", "replace": "def total(rows)"}]));
    let refused = f.refused("alice", broken.clone()).await;
    assert_eq!(refused["code"], "invalid_script");
    let mut dry = broken;
    dry["dry_run"] = json!(true);
    let shown = f.ok("alice", dry).await;
    assert_eq!(shown["valid"], false);
    assert_eq!(shown["problem_line"], 1);
    assert_eq!(f.source("report").await.1, 2);
}

async fn diff_outline_stats_help_and_validate_describe_a_script(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    f.ok(
        "alice",
        json!({"command": "create", "name": "report", "source": SOURCE}),
    )
    .await;
    f.ok(
        "alice",
        json!({"command": "update", "name": "report",
               "source": SOURCE.replace("print(\"done\")", "print(\"all done\")")}),
    )
    .await;

    let diff = f
        .ok("alice", json!({"command": "diff", "name": "report"}))
        .await;
    assert_eq!(
        (diff["from_version"].clone(), diff["to_version"].clone()),
        (json!(1), json!(2))
    );
    assert!(
        diff["diff"]
            .as_str()
            .expect("diff")
            .contains("-print(\"done\")\n+print(\"all done\")"),
        "{diff}"
    );
    let same = f
        .ok(
            "alice",
            json!({"command": "diff", "name": "report", "from_version": 2, "to_version": 2}),
        )
        .await;
    assert_eq!(same["identical"], true);
    let missing = f
        .refused(
            "alice",
            json!({"command": "diff", "name": "report", "from_version": 7}),
        )
        .await;
    assert_eq!(missing["code"], "not_found");

    let outline = f
        .ok("alice", json!({"command": "outline", "name": "report"}))
        .await;
    assert_eq!(
        outline["items"],
        json!([
            {"kind": "function", "name": "total", "line": 1, "end_line": 5},
            {"kind": "assignment", "name": "rows", "line": 7, "end_line": 7},
            {"kind": "expression", "name": "print(total(rows))", "line": 8, "end_line": 8},
            {"kind": "expression", "name": "print(\"all done\")", "line": 9, "end_line": 9},
        ])
    );

    let stats = f
        .ok("alice", json!({"command": "stats", "name": "report"}))
        .await;
    assert_eq!(stats["lines"], 9);
    assert_eq!(stats["functions"], 1);
    assert_eq!(stats["versions"], 2);
    assert_eq!(stats["platform_calls"]["query"], 0);

    let help = f.ok("alice", json!({"command": "help"})).await;
    let commands: Vec<&str> = help["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .filter_map(|command| command["command"].as_str())
        .collect();
    for expected in [
        "patch",
        "diff",
        "outline",
        "stats",
        "runs",
        "get_run",
        "schedule_set",
        "schedule_list",
        "schedule_enable",
        "schedule_disable",
    ] {
        assert!(commands.contains(&expected), "{expected} in {commands:?}");
    }
    assert!(
        help["patch"]["codes"]
            .to_string()
            .contains("PATCH_STALE_BASE")
    );

    let validated = f
        .ok(
            "alice",
            json!({"command": "validate", "source": SOURCE,
                   "params": [{"name": "day", "type": "date"}]}),
        )
        .await;
    assert_eq!(validated["valid"], true);
    let checked = validated["checked"].to_string();
    for check in ["size", "nesting", "syntax", "names", "params"] {
        assert!(checked.contains(check), "{check} in {checked}");
    }

    // An unknown command is answered with the known ones.
    let unknown = f.manage("alice", json!({"command": "rename"})).await;
    assert_eq!(unknown["isError"], true);
    let said = unknown["content"][0]["text"].as_str().expect("text");
    for command in ["create", "patch", "schedule_set", "help"] {
        assert!(said.contains(command), "{said}");
    }

    // Bob learns nothing about Alice's script from any of them.
    for command in ["diff", "outline", "stats", "runs"] {
        let hidden = f
            .refused("bob", json!({"command": command, "name": "report"}))
            .await;
        assert_eq!(hidden["code"], "not_found", "{command}");
    }
}

async fn runs_and_get_run_read_a_scripts_runs_by_status(backend: Backend) {
    let Some(f) = fixture(backend).await else {
        return;
    };
    f.ok(
        "alice",
        json!({"command": "create", "name": "report", "source": SOURCE}),
    )
    .await;
    f.ok(
        "alice",
        json!({"command": "create", "name": "broken", "source": "fail(\"no\")\n"}),
    )
    .await;
    let mut run_ids = Vec::new();
    for _ in 0..2 {
        let ran = f
            .call("alice", "run_script", json!({"name": "report"}))
            .await;
        assert_eq!(ran["structuredContent"]["status"], "succeeded", "{ran}");
        run_ids.push(ran["structuredContent"]["run_id"].clone());
    }
    let failed = f
        .call("alice", "run_script", json!({"name": "broken"}))
        .await;
    assert_eq!(failed["structuredContent"]["status"], "failed", "{failed}");

    let runs = f
        .ok("alice", json!({"command": "runs", "name": "report"}))
        .await;
    assert_eq!(runs["count"], 2);
    assert!(
        runs["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .all(|run| run["trigger"] == "tool")
    );
    let succeeded = f
        .ok(
            "alice",
            json!({"command": "runs", "name": "report", "run_status": "succeeded", "limit": 1}),
        )
        .await;
    assert_eq!(succeeded["count"], 1);
    assert_eq!(succeeded["runs"][0]["run_id"], run_ids[1]);
    let none = f
        .ok(
            "alice",
            json!({"command": "runs", "name": "report", "run_status": "failed"}),
        )
        .await;
    assert_eq!(none["count"], 0);

    let read = f
        .ok("alice", json!({"command": "get_run", "run_id": run_ids[0]}))
        .await;
    assert_eq!(read["run_id"], run_ids[0]);
    assert_eq!(read["status"], "succeeded");
    let no_id = f.refused("alice", json!({"command": "get_run"})).await;
    assert!(
        no_id["message"]
            .as_str()
            .expect("message")
            .contains("run_id")
    );
    let hidden = f
        .refused("bob", json!({"command": "get_run", "run_id": run_ids[0]}))
        .await;
    assert_eq!(hidden["message"], "run not found");

    // list_runs filters by status too.
    let listed = f
        .call("alice", "list_runs", json!({"status": "failed"}))
        .await;
    let listed = &listed["structuredContent"];
    assert_eq!(listed["count"], 1, "{listed}");
    assert_eq!(listed["runs"][0]["name"], "broken");
    // A status no run has is refused before the tool runs (the input schema).
    let bad = f
        .call("alice", "list_runs", json!({"status": "exploded"}))
        .await;
    assert!(
        bad["error"]["message"]
            .as_str()
            .expect("an error")
            .contains("status"),
        "{bad}"
    );
}
