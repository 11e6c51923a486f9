//! The language a script sees: the original's dialect and predeclared names, and nothing that
//! reaches outside the sandbox.

use docket_script::{Limits, ScriptFailure};

use crate::{assert_succeeded, run_script};

/// Runs a script that checks itself with `fail`, and asserts that it passed.
async fn assert_script_passes(source: &str) {
    let (report, _) = run_script(source, Limits::draft()).await;
    assert_succeeded(&report);
}

/// The error message of a run that must fail as a script error.
async fn script_error(source: &str) -> String {
    let (report, _) = run_script(source, Limits::draft()).await;
    match report.outcome {
        Err(ScriptFailure::Error { message }) => message,
        other => panic!("{source}: expected a script error, got {other:?}"),
    }
}

#[tokio::test]
async fn nothing_reaches_the_file_system_network_clock_or_randomness() {
    for name in [
        "open",
        "exec",
        "eval",
        "compile",
        "input",
        "time",
        "now",
        "random",
        "os",
        "sys",
        "http",
        "socket",
        "debug",
        "breakpoint",
        "call_stack",
        "__import__",
        "struct",
    ] {
        let message = script_error(&format!("x = {name}\n")).await;
        assert!(message.contains("not found"), "{name}: {message}");
    }
    for (member, namespace) in [("now", "date"), ("today", "date"), ("dumps", "json")] {
        let message = script_error(&format!("x = {namespace}.{member}\n")).await;
        assert!(message.contains(member), "{namespace}.{member}: {message}");
    }
}

#[tokio::test]
async fn load_is_refused_with_a_clear_error() {
    let source = "load('//lib.star', 'helper')\nhelper()\n";
    let (report, _) = run_script(source, Limits::draft()).await;
    let Err(ScriptFailure::Syntax(error)) = &report.outcome else {
        panic!("{:?}", report.outcome);
    };
    assert!(
        error.message.contains("`load` is not allowed"),
        "{}",
        error.message
    );
    assert_eq!(error.line, Some(1));
    assert!(docket_script::check(source, &Limits::draft()).is_err());
}

#[tokio::test]
async fn while_does_not_exist_as_in_the_original() {
    let source = "x = 0\nwhile x < 3:\n    x += 1\n";
    let error = docket_script::check(source, &Limits::draft()).expect_err("while is refused");
    assert_eq!(error.line, Some(2));
}

#[tokio::test]
async fn a_syntax_error_reports_its_line() {
    let source = "x = 1\nrows = []\nfor row in rows\n    print(row)\n";
    let error = docket_script::check(source, &Limits::draft()).expect_err("a syntax error");
    assert_eq!(error.line, Some(3), "{}", error.message);
    let (report, host) = run_script(source, Limits::draft()).await;
    assert_eq!(report.outcome, Err(ScriptFailure::Syntax(error)));
    assert!(host.seen().is_empty());
}

#[tokio::test]
async fn check_accepts_a_valid_script_without_running_it() {
    let source = "platform.call('never', {})\nfor i in range(10):\n    print(i)\n";
    assert_eq!(docket_script::check(source, &Limits::run()), Ok(()));
}

#[tokio::test]
async fn check_refuses_a_name_nothing_defines_with_its_line() {
    let source = "rows = []\nresult = platfrom.call('echo', {})\n";
    let error = docket_script::check(source, &Limits::draft()).expect_err("undefined name");
    assert_eq!(error.line, Some(2));
    assert!(error.message.contains("platfrom"), "{}", error.message);
    // Every predeclared name, and globals defined after the function that uses them, resolve.
    let source = "def total():\n    return sum(values)\nvalues = [1]\n\
                  x = [platform, json, date, run, sum, print, set, len, range, fail, total()]\n";
    assert_eq!(docket_script::check(source, &Limits::draft()), Ok(()));
}

#[tokio::test]
async fn hostile_sources_do_not_crash_the_parser() {
    let limits = Limits::run();
    let budget = limits.max_source_bytes - 16;
    for source in [
        format!("x = {}1", "-".repeat(budget)),
        format!("x = {}1", "not ".repeat(budget / 4)),
        format!("x = {}1", "1 + ".repeat(budget / 4)),
        format!("x = {}", "[".repeat(budget)),
        format!("x = {}", "(".repeat(budget)),
        format!("x = {}1", "lambda: ".repeat(budget / 8)),
        format!("x = 1 {}", "if 1 else 1 ".repeat(budget / 12)),
    ] {
        // Accepted or refused: what matters is that the process survives.
        let _ = docket_script::check(&source, &limits);
    }
    let deep = format!("x = {}1{}\n", "[".repeat(1000), "]".repeat(1000));
    let (report, _) = run_script(&deep, limits).await;
    assert!(matches!(report.outcome, Err(ScriptFailure::Syntax(_))));
}

#[tokio::test]
async fn top_level_control_flow_and_reassignment_work() {
    assert_script_passes(
        "total = 0\nfor i in range(5):\n    if i % 2 == 0:\n        total += i\ntotal = total * 10\n\
         if total != 60:\n    fail(total)\n",
    )
    .await;
}

#[tokio::test]
async fn run_carries_the_run_id_and_frozen_params() {
    assert_script_passes(
        "if run.run_id != 'run-1':\n    fail(run.run_id)\n\
         if run.params != {'day': '2026-11-30'}:\n    fail(run.params)\n\
         if run.fire_time != None:\n    fail(run.fire_time)\n",
    )
    .await;
    let message = script_error("run.params['day'] = 'tomorrow'\n").await;
    assert!(message.to_lowercase().contains("immutable"), "{message}");
}

#[tokio::test]
async fn json_encodes_and_decodes() {
    assert_script_passes(
        r#"
if json.encode({"a": [1, 2.5, True, None], "b": "x"}) != '{"a":[1,2.5,true,null],"b":"x"}':
    fail(json.encode({"a": [1, 2.5, True, None], "b": "x"}))
if json.encode((1, 2)) != "[1,2]":
    fail("tuple")
if json.decode('{"k": [1, null, false, "v"], "f": 1.5}') != {"k": [1, None, False, "v"], "f": 1.5}:
    fail("decode")
if json.decode("123456789123456789123456789") != 123456789123456789123456789:
    fail("big int")
if json.decode("not json", default = "fallback") != "fallback":
    fail("default")
if json.indent('{"a":[1]}', indent = "  ") != '{\n  "a": [\n    1\n  ]\n}':
    fail(json.indent('{"a":[1]}', indent = "  "))
if json.encode_indent([1], prefix = "> ", indent = " ") != '[\n>  1\n> ]':
    fail(json.encode_indent([1], prefix = "> ", indent = " "))
if json.decode(json.encode({"n": {"m": [1, "2"]}})) != {"n": {"m": [1, "2"]}}:
    fail("round trip")
"#,
    )
    .await;
    let message = script_error("json.decode('{broken')\n").await;
    assert!(message.contains("in json.decode"), "{message}");
    let message = script_error("json.encode(len)\n").await;
    assert!(message.contains("in json.encode"), "{message}");
}

#[tokio::test]
async fn json_refuses_values_nested_too_deep_with_an_error_not_a_crash() {
    // 100 levels are fine, both ways.
    assert_script_passes(
        r#"
x = 0
for i in range(100):
    x = [x]
if json.decode(json.encode(x)) != x:
    fail("100 levels")
"#,
    )
    .await;
    let deep = |what: &str| {
        format!("x = []\nfor i in range(100000):\n    x = [x]\n    x = {{'k': x}}\n{what}\n")
    };
    for (call, binding) in [
        ("json.encode(x)", "json.encode"),
        ("json.encode_indent(x)", "json.encode_indent"),
        ("platform.call('platform_info', {'x': x})", "platform.call"),
    ] {
        let message = script_error(&deep(call)).await;
        assert!(
            message.contains(binding) && message.contains("nested more than 128 levels"),
            "{call}: {message}"
        );
    }
    let message = script_error(&format!("json.decode('{}')\n", "[".repeat(100_000))).await;
    assert!(message.contains("in json.decode"), "{message}");
}

#[tokio::test]
async fn date_and_sum_are_predeclared_as_in_the_original() {
    assert_script_passes(
        r#"
day = date.parse(run.params["day"])
if date.add_days(day, -1) != "2026-11-29":
    fail("add_days")
if date.add_months(day, 1) != "2026-12-30":
    fail("add_months")
if date.start_of_month(day) != "2026-11-01":
    fail("start_of_month")
if date.weekday(day) != "monday":
    fail(date.weekday(day))
if date.diff_days("2026-01-01", day) != 333:
    fail("diff_days")
if date.format(day, "YYYY/MM/DD") != "2026/11/30":
    fail("format")
if date.of("2026-11-30T23:30:00-02:00") != "2026-12-01":
    fail("of")
if sum([1, 2, 3]) != 6 or sum([0.5, 1], start = 1) != 2.5 or sum([]) != 0:
    fail("sum")
if type(sum([1, 2])) != "int":
    fail("sum of ints is an int")
s = set([1, 2, 2])
if len(s) != 2:
    fail("set")
"#,
    )
    .await;
    let message = script_error("sum(['12.50'])\n").await;
    assert!(
        message.contains("element 0 is string, not a number"),
        "{message}"
    );
    let message = script_error("sum([True])\n").await;
    assert!(message.contains("element 0 is bool"), "{message}");
    let message = script_error("date.parse('30/11/2026')\n").await;
    assert!(
        message.contains("is not a date in YYYY-MM-DD form"),
        "{message}"
    );
}
