//! The docket_script integration tests, one binary with one module per concern, run against a
//! fake platform (`host`) so that every host call is visible.

// The modules live in `tests/script/`, where cargo does not take them for test binaries.
#[path = "script/host.rs"]
mod host;
#[path = "script/language.rs"]
mod language;
#[path = "script/limits.rs"]
mod limits;
#[path = "script/platform.rs"]
mod platform;

use std::sync::Arc;
use std::time::Duration;

use docket_script::{Limits, RunProgress, ScriptInput, ScriptReport};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::host::FakeHost;

/// A hang guard for every run: far longer than any run here takes, so it only fires when the
/// sandbox fails to stop.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// Runs `source` under `limits` against a fresh fake host, with `run.params` `{"day":
/// "2026-11-30"}`.
async fn run_script(source: &str, limits: Limits) -> (ScriptReport, Arc<FakeHost>) {
    run_cancellable(source, limits, CancellationToken::new()).await
}

/// [`run_script`] with a cancellation token the test holds.
async fn run_cancellable(
    source: &str,
    limits: Limits,
    cancel: CancellationToken,
) -> (ScriptReport, Arc<FakeHost>) {
    let (report, host, _) = run_observed(source, limits, cancel).await;
    (report, host)
}

/// [`run_cancellable`], also answering the run's progress.
async fn run_observed(
    source: &str,
    limits: Limits,
    cancel: CancellationToken,
) -> (ScriptReport, Arc<FakeHost>, Arc<RunProgress>) {
    run_on(Arc::new(FakeHost::default()), source, limits, cancel).await
}

/// [`run_observed`] against `host`, which the test may already be watching.
async fn run_on(
    host: Arc<FakeHost>,
    source: &str,
    limits: Limits,
    cancel: CancellationToken,
) -> (ScriptReport, Arc<FakeHost>, Arc<RunProgress>) {
    let progress = Arc::new(RunProgress::new());
    let input = ScriptInput {
        run_id: "run-1".to_owned(),
        params: json!({"day": "2026-11-30"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
        fire_time: None,
    };
    let report = tokio::time::timeout(
        HANG_GUARD,
        docket_script::run_with_progress(
            source.to_owned(),
            input,
            host.clone(),
            limits,
            cancel,
            progress.clone(),
        ),
    )
    .await
    .expect("the run did not end within the hang guard");
    (report, host, progress)
}

/// Asserts that the run succeeded, printing its failure otherwise.
fn assert_succeeded(report: &ScriptReport) {
    assert!(
        report.outcome.is_ok(),
        "the run failed: {:?}\nlog:\n{}",
        report.outcome,
        report.log
    );
}
