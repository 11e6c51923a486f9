//! Every limit ends a run with an error naming it, and cancellation stops a busy script.

use std::sync::Arc;
use std::time::Duration;

use docket_script::{LimitKind, Limits, ScriptFailure};
use tokio_util::sync::CancellationToken;

use crate::host::FakeHost;
use crate::{assert_succeeded, run_cancellable, run_on, run_script};

/// A loop that would run for hours (`range` takes 32-bit ints, hence two).
const BUSY_LOOP: &str =
    "for i in range(2000000000):\n    for j in range(2000000000):\n        pass\n";

fn limit_of(failure: &Result<serde_json::Value, ScriptFailure>) -> Option<(LimitKind, &str)> {
    match failure {
        Err(ScriptFailure::Limit { limit, message }) => Some((*limit, message.as_str())),
        _ => None,
    }
}

#[tokio::test]
async fn the_step_limit_halts_a_loop_and_names_the_limit() {
    let limits = Limits {
        max_steps: 10_000,
        ..Limits::draft()
    };
    let (report, _) = run_script(BUSY_LOOP, limits).await;
    let (limit, message) = limit_of(&report.outcome).expect("a limit failure");
    assert_eq!(limit, LimitKind::Steps);
    assert!(
        message.starts_with(
            "halted: script exceeded its execution-step limit of 10000 steps; simplify the \
             script or move the work into SQL:"
        ),
        "{message}"
    );
    assert!(report.steps > 10_000);
}

#[tokio::test]
async fn the_wall_time_limit_halts_a_busy_loop() {
    let limits = Limits {
        wall_time: Duration::from_millis(200),
        max_steps: u64::MAX,
        ..Limits::draft()
    };
    let (report, _) = run_script(BUSY_LOOP, limits).await;
    let (limit, message) = limit_of(&report.outcome).expect("a limit failure");
    assert_eq!(limit, LimitKind::WallTime);
    assert!(
        message.starts_with("halted: script exceeded its time limit"),
        "{message}"
    );
}

#[tokio::test]
async fn the_wall_time_limit_interrupts_a_host_call_that_never_answers() {
    let limits = Limits {
        wall_time: Duration::from_millis(200),
        ..Limits::draft()
    };
    let (report, host) = run_script("platform.call('hang', {})\n", limits).await;
    let (limit, _) = limit_of(&report.outcome).expect("a limit failure");
    assert_eq!(limit, LimitKind::WallTime);
    assert_eq!(host.seen().len(), 1);
    assert_eq!(report.host_calls, 1);
}

#[tokio::test]
async fn the_heap_limit_halts_a_script_that_hoards_values() {
    let limits = Limits {
        max_heap_bytes: 2 * 1024 * 1024,
        max_steps: u64::MAX,
        ..Limits::draft()
    };
    let source = "rows = []\nfor i in range(100000000):\n    rows.append(('row', i, str(i)))\n";
    let (report, _) = run_script(source, limits).await;
    let (limit, message) = limit_of(&report.outcome).expect("a limit failure");
    assert_eq!(limit, LimitKind::Heap);
    assert!(
        message.starts_with("halted: script exceeded its memory limit of 2097152 bytes"),
        "{message}"
    );
}

#[tokio::test]
async fn a_source_over_the_size_limit_is_refused_before_it_runs() {
    let limits = Limits {
        max_source_bytes: 64,
        ..Limits::draft()
    };
    let source = format!("x = '{}'\n", "a".repeat(100));
    let (report, _) = run_script(&source, limits).await;
    let (limit, message) = limit_of(&report.outcome).expect("a limit failure");
    assert_eq!(limit, LimitKind::Source);
    assert!(
        message.contains("source size limit of 64 bytes"),
        "{message}"
    );
    assert_eq!(report.steps, 0);

    let refused = docket_script::check(&source, &limits).expect_err("refused by check");
    assert!(refused.message.contains("source size limit of 64 bytes"));
}

#[tokio::test]
async fn the_log_keeps_its_head_and_says_it_was_cut() {
    let limits = Limits {
        max_log_bytes: 100,
        ..Limits::draft()
    };
    let source = "for i in range(1000):\n    print('line', i)\nprint('the end')\n";
    let (report, _) = run_script(source, limits).await;
    // The original only truncates: a long log is not an error.
    assert_succeeded(&report);
    assert!(report.log_truncated);
    assert!(
        report.log.starts_with("line 0\nline 1\nline 2\n"),
        "{}",
        report.log
    );
    assert!(!report.log.contains("the end"));
    let (head, marker) = report.log.split_at(100);
    assert!(!head.contains("[log truncated"), "{}", report.log);
    assert!(marker.contains("[log truncated: the log limit of 100 bytes was reached"));
}

#[tokio::test]
async fn a_short_log_is_kept_whole() {
    let (report, _) = run_script("print('a', 1, None)\nprint({'k': [1]})\n", Limits::draft()).await;
    assert_succeeded(&report);
    assert_eq!(report.log, "a 1 None\n{\"k\": [1]}\n");
    assert!(!report.log_truncated);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_stops_a_busy_loop() {
    let limits = Limits {
        max_steps: u64::MAX,
        wall_time: Duration::from_secs(3600),
        ..Limits::draft()
    };
    // The script makes one host call before its loop, so the cancel is sent once the
    // run is under way, never before it started.
    let source = format!("platform.call('echo', {{}})\nprint('looping')\n{BUSY_LOOP}");
    let host = Arc::new(FakeHost::default());
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    let watched = Arc::clone(&host);
    tokio::spawn(async move {
        watched.called().await;
        canceller.cancel();
    });
    let (report, _, _) = run_on(host, &source, limits, cancel).await;
    assert_eq!(report.outcome, Err(ScriptFailure::Cancelled));
}

#[tokio::test]
async fn the_wall_time_limit_stops_a_long_sum() {
    let limits = Limits {
        wall_time: Duration::from_millis(200),
        ..Limits::draft()
    };
    let (report, _) = run_script("sum(range(2000000000))\n", limits).await;
    let (limit, _) = limit_of(&report.outcome).expect("a limit failure");
    assert_eq!(limit, LimitKind::WallTime);
}

#[tokio::test]
async fn cancelling_interrupts_a_host_call() {
    // The cancel is sent once the call that never answers has arrived at the host.
    let host = Arc::new(FakeHost::default());
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    let watched = Arc::clone(&host);
    tokio::spawn(async move {
        watched.called().await;
        canceller.cancel();
    });
    let source = "print('before')\nplatform.call('hang')\nprint('after')\n";
    let (report, _, _) = run_on(host, source, Limits::run(), cancel).await;
    assert_eq!(report.outcome, Err(ScriptFailure::Cancelled));
    assert_eq!(report.log, "before\n");
}

#[tokio::test]
async fn a_run_cancelled_before_it_starts_does_not_run() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    let (report, host) = run_cancellable("platform.call('echo')\n", Limits::run(), cancel).await;
    assert_eq!(report.outcome, Err(ScriptFailure::Cancelled));
    assert!(host.seen().is_empty());
}

#[tokio::test]
async fn deep_recursion_is_an_error_not_a_crash() {
    let source = "def down(n):\n    return down(n + 1)\ndown(0)\n";
    let (report, _) = run_script(source, Limits::draft()).await;
    assert!(
        matches!(report.outcome, Err(ScriptFailure::Error { .. })),
        "{:?}",
        report.outcome
    );
}

#[test]
fn the_run_and_draft_limits_are_the_original_platforms() {
    let run = Limits::run();
    assert_eq!(run.max_steps, 20_000_000);
    assert_eq!(run.wall_time, Duration::from_secs(600));
    assert_eq!(run.max_log_bytes, 64 * 1024);
    assert_eq!(run.max_source_bytes, 256 * 1024);
    let draft = Limits::draft();
    assert_eq!(draft.max_steps, 2_000_000);
    assert_eq!(draft.wall_time, Duration::from_secs(60));
    assert_eq!(draft.max_log_bytes, 64 * 1024);
    assert_eq!(draft.max_source_bytes, 256 * 1024);
}
