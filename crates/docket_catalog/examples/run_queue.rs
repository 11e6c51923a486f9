//! The run queue on its own, in memory: a script is saved, two runs are queued,
//! a worker claims them oldest first, renews its lease, hears a cancel taken
//! meanwhile, and ends each run through the lease that fences its writes.
//!
//! `cargo run -p docket_catalog --example run_queue`

use std::error::Error;
use std::time::Duration;

use docket_catalog::generate_id;
use docket_catalog::memory::MemoryScripts;
use docket_catalog::scripts::{
    CancelOutcome, NewRun, NewScript, Renewal, RunEnding, RunStatus, ScriptStore,
};
use serde_json::json;

/// How long a claim holds a run before another worker may take it back.
const LEASE: Duration = Duration::from_secs(30);

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let store = MemoryScripts::new();
    let (script, version) = store
        .create_script(
            NewScript {
                id: generate_id()?,
                owner: "apikey:alice".into(),
                name: "daily-orders".into(),
                description: "counts yesterday's orders".into(),
                params: json!([{"name": "day", "type": "string", "required": true}]),
                source: "result = platform.query('warehouse', 'SELECT 1')".into(),
                author: "apikey:alice".into(),
                author_roles: vec!["analyst".into()],
            },
            u32::MAX,
        )
        .await?;
    println!("saved {} version {}", script.name, version.version);

    let mut queued = Vec::new();
    for day in ["2026-11-30", "2026-12-01"] {
        let run = store
            .enqueue(NewRun {
                id: generate_id()?,
                script_id: script.id.clone(),
                script_name: script.name.clone(),
                script_owner: script.owner.clone(),
                version: script.version,
                params: json!({ "day": day }),
                requested_by: "apikey:alice".into(),
                trace_context: None,
            })
            .await?;
        println!("queued run {} for {day}", run.id);
        queued.push(run);
    }

    // Someone cancels the second run while the worker is busy with the first.
    let first = store
        .claim("worker-1", LEASE, u32::MAX)
        .await?
        .ok_or("a queued run")?;
    let lease = first.lease().ok_or("a claimed run has a lease")?;
    let second = store
        .claim("worker-1", LEASE, u32::MAX)
        .await?
        .ok_or("a second run")?;
    let second_lease = second.lease().ok_or("a claimed run has a lease")?;
    if let Some(CancelOutcome::Requested) = store.cancel_run(&second.id).await? {
        println!("asked run {} to stop", second.id);
    }

    let renewal = store.renew(&lease, LEASE, 1).await?;
    println!("run {} renewed: {renewal:?}", first.id);
    store
        .finish(
            &lease,
            RunEnding {
                status: RunStatus::Succeeded,
                result: Some(json!({"orders": 412})),
                error: None,
                error_kind: None,
                log: String::new(),
                log_truncated: false,
                metrics: json!({"steps": 12, "host_calls": 1, "duration_ms": 3}),
            },
        )
        .await?;

    if let Renewal::Held {
        cancel_requested: true,
    } = store.renew(&second_lease, LEASE, 0).await?
    {
        store
            .finish(
                &second_lease,
                RunEnding {
                    status: RunStatus::Cancelled,
                    result: None,
                    error: None,
                    error_kind: None,
                    log: String::new(),
                    log_truncated: false,
                    metrics: json!({}),
                },
            )
            .await?;
    }

    // What a reader should see, checked, so `cargo xtask test` notices if it changes:
    // the oldest run succeeded, the cancelled one ended cancelled.
    let mut ended = Vec::new();
    for run in &queued {
        let (run, _) = store.run(&run.id).await?.ok_or("the run is kept")?;
        println!(
            "run {} for {}: {} after {} attempt(s)",
            run.id, run.params["day"], run.status, run.attempt
        );
        ended.push(run.status);
    }
    if ended != [RunStatus::Succeeded, RunStatus::Cancelled] {
        return Err(format!(
            "expected the first run succeeded and the second cancelled, got {ended:?}"
        )
        .into());
    }
    Ok(())
}
