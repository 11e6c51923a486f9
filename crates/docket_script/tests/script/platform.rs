//! `platform.*` host calls: values cross both ways intact, tool errors fail the script, platform
//! faults fail the run as faults, and the original's documentation-style script runs unchanged.

use std::sync::Arc;

use docket_script::{Limits, RunProgress, ScriptFailure, ScriptInput};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::host::{FakeHost, Seen};
use crate::{assert_succeeded, run_observed, run_script};

#[tokio::test]
async fn the_documentation_style_script_runs_unchanged() {
    // Query, loop over the rows, export: the shape of the original platform's examples.
    let source = r#"
day = run.params["day"]
result = platform.query(
    "SELECT region, total FROM sales WHERE day = :day",
    connection="warehouse",
    params={"day": day},
)

rows = []
grand_total = 0.0
for row in result["rows"]:
    total = float(row["total"])
    grand_total += total
    rows.append({"region": row["region"], "total": total, "day": day})

print("regions:", len(rows), "total:", grand_total)
out = platform.export("daily-sales", rows, "csv")
print("wrote", out["asset_id"], "with", out["row_count"], "rows")
"#;
    assert_eq!(docket_script::check(source, &Limits::run()), Ok(()));
    let (report, host, progress) =
        run_observed(source, Limits::run(), CancellationToken::new()).await;
    assert_succeeded(&report);
    assert_eq!(
        report.log,
        "regions: 2 total: 19.75\nwrote asset-1 with 2 rows\n"
    );
    assert_eq!(
        host.seen(),
        vec![
            Seen::Query {
                sql: "SELECT region, total FROM sales WHERE day = :day".to_owned(),
                connection: Some("warehouse".to_owned()),
                params: json!({"day": "2026-11-30"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            },
            Seen::Export {
                name: "daily-sales".to_owned(),
                rows: json!([
                    {"region": "north", "total": 12.5, "day": "2026-11-30"},
                    {"region": "south", "total": 7.25, "day": "2026-11-30"},
                ]),
                format: "csv".to_owned(),
            },
        ]
    );
    let output =
        json!({"asset_id": "asset-1", "name": "daily-sales", "format": "csv", "row_count": 2});
    assert_eq!(progress.queries(), 1);
    assert_eq!(progress.outputs(), vec![output.clone()]);
    assert_eq!(report.host_calls, 2);
    assert_eq!(
        report.outcome,
        Ok(json!({"queries": 1, "outputs": [output]}))
    );
}

#[tokio::test]
async fn values_round_trip_through_a_host_call() {
    let source = r#"
sent = {
    "int": 42,
    "negative": -7,
    "big": 123456789012345678901234567890,
    "float": 2.5,
    "bool": True,
    "none": None,
    "list": [1, "two", [3]],
    "tuple": (1, 2),
    "nested": {"a": {"b": ["c"]}},
    "unicode": "grüße ✓",
}
back = platform.call("echo", sent)
expected = dict(sent)
expected["tuple"] = [1, 2]
if back != expected:
    fail("round trip changed the value: %r" % back)
if type(back["big"]) != "int" or back["big"] != 123456789012345678901234567890:
    fail("big int changed: %r" % back["big"])
if platform.call("text") != {"text": "plain words"}:
    fail("plain text result")
"#;
    let (report, host) = run_script(source, Limits::draft()).await;
    assert_succeeded(&report);
    let Some(Seen::Call { tool, args }) = host.seen().first().cloned() else {
        panic!("no call seen: {:?}", host.seen());
    };
    assert_eq!(tool, "echo");
    assert_eq!(args["int"], json!(42));
    assert_eq!(args["negative"], json!(-7));
    assert_eq!(args["big"].to_string(), "123456789012345678901234567890");
    assert_eq!(args["float"].as_f64(), Some(2.5));
    assert_eq!(args["bool"], json!(true));
    assert_eq!(args["none"], json!(null));
    assert_eq!(args["list"], json!([1, "two", [3]]));
    assert_eq!(args["tuple"], json!([1, 2]));
    assert_eq!(args["nested"], json!({"a": {"b": ["c"]}}));
    assert_eq!(args["unicode"], json!("grüße ✓"));
}

#[tokio::test]
async fn call_without_args_sends_an_empty_object() {
    let (report, host) = run_script("platform.call('echo')\n", Limits::draft()).await;
    assert_succeeded(&report);
    assert_eq!(
        host.seen(),
        vec![Seen::Call {
            tool: "echo".to_owned(),
            args: json!({})
        }]
    );
}

#[tokio::test]
async fn values_json_cannot_carry_are_refused_before_the_call() {
    for (source, needle) in [
        (
            "platform.call('echo', {'f': lambda: 1})\n",
            "args cannot be converted to JSON",
        ),
        (
            "platform.call('echo', {'f': len})\n",
            "args cannot be converted to JSON",
        ),
        (
            "platform.call('echo', [1])\n",
            "args must be a dict, got list",
        ),
        ("platform.call('', {})\n", "tool is empty"),
        (
            "platform.query('SELECT 1', connection=1)\n",
            "connection must be a string",
        ),
        (
            "platform.export('x', [], 'csv', destination='bucket')\n",
            "destination= and key=",
        ),
    ] {
        let (report, host) = run_script(source, Limits::draft()).await;
        let Err(ScriptFailure::Error { message }) = &report.outcome else {
            panic!("{source}: {:?}", report.outcome);
        };
        assert!(message.contains(needle), "{source}: {message}");
        assert!(host.seen().is_empty(), "{source}");
    }
}

#[tokio::test]
async fn a_tool_error_fails_the_script_with_its_message() {
    let source = "print('start')\nplatform.call('refuse', {})\nprint('never')\n";
    let (report, _) = run_script(source, Limits::draft()).await;
    let Err(ScriptFailure::Error { message }) = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert!(
        message.contains("in platform.call: the persona may not call this tool"),
        "{message}"
    );
    // The traceback points at the line of the call.
    assert!(message.contains("script.star:2"), "{message}");
    assert_eq!(report.log, "start\n");
}

#[tokio::test]
async fn a_platform_fault_fails_the_run_as_a_fault() {
    let (report, _) = run_script("platform.call('broken', {})\n", Limits::draft()).await;
    assert_eq!(
        report.outcome,
        Err(ScriptFailure::Platform("the database is down".to_owned()))
    );
}

#[tokio::test]
async fn a_host_that_panics_fails_the_run_as_a_fault_not_the_process() {
    let (report, _) = run_script("platform.call('panic')\n", Limits::draft()).await;
    let Err(ScriptFailure::Platform(message)) = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert!(message.contains("ended without an answer"), "{message}");
}

#[tokio::test]
async fn outputs_written_before_a_failure_are_reported() {
    let source = "platform.export('first', [{'a': 1}])\nfail('later')\n";
    let (report, host, progress) =
        run_observed(source, Limits::draft(), CancellationToken::new()).await;
    assert!(matches!(report.outcome, Err(ScriptFailure::Error { .. })));
    assert_eq!(progress.outputs().len(), 1);
    assert_eq!(progress.queries(), 0);
    // The format defaults to csv, as in the original.
    assert!(matches!(&host.seen()[..], [Seen::Export { format, .. }] if format == "csv"));
}

#[tokio::test]
async fn progress_counts_host_calls_while_the_run_goes() {
    let progress = Arc::new(RunProgress::new());
    let report = docket_script::run_with_progress(
        "for i in range(3):\n    platform.call('echo', {'i': i})\n".to_owned(),
        ScriptInput::default(),
        Arc::new(FakeHost::default()),
        Limits::draft(),
        CancellationToken::new(),
        progress.clone(),
    )
    .await;
    assert_succeeded(&report);
    assert_eq!(report.host_calls, 3);
    assert_eq!(progress.host_calls(), 3);
    assert_eq!(progress.steps(), report.steps);
}
