//! Runs: `--scale-runs` short runs queued at once (spread over [`OWNERS`] owners, so
//! the one-running-run-per-owner rule does not make them one queue) and drained by a
//! run bridge with the server's default workers on PostgreSQL, each run evaluated in a
//! child process (`docket script-child`), against the same runs evaluated in process.
//! Reported: runs a second, queue → running and running → first `platform.call` p50 /
//! p99, and the CPU a run costs this process (the bridge), its children and
//! PostgreSQL — and so how much of a child run's cost is the child's start.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use docket_catalog::ScriptStore;
use docket_catalog::scripts::{NewRun, NewScript, Run, Script, ScriptVersion};
use docket_run_bridge::{BridgeConfig, RunBridge, SandboxRunner};
use docket_script::{ChildProcess, Isolation, Limits};
use docket_storage::test_db::PostgresServer;
use serde_json::json;
use time::OffsetDateTime;

use super::lab::Lab;
use super::section::{Section, Sizes, ms, per_second};
use crate::load::percentile;
use crate::scripts::MarkingHost;

/// Owners the queued runs are spread over.
const OWNERS: usize = 8;

/// The run: one call to the host, so its start is seen from outside.
const SOURCE: &str = "platform.call('mark', {})\n";

/// One drain: how it went.
struct Lane {
    label: &'static str,
    runs: usize,
    drain: Duration,
    queued: Vec<Duration>,
    started: Vec<Duration>,
    process_cpu: Duration,
    children_cpu: Duration,
    postgres_cpu: Duration,
}

/// CPU time of this process's waited-for children (`cutime` + `cstime`).
fn children_cpu() -> Duration {
    let ticks = std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            let rest = &stat[stat.rfind(')')? + 1..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let user: u64 = fields.get(13)?.parse().ok()?;
            let system: u64 = fields.get(14)?.parse().ok()?;
            Some(user + system)
        })
        .unwrap_or(0);
    Duration::from_millis(ticks * 10)
}

async fn save(store: &dyn ScriptStore, owner: &str) -> anyhow::Result<Script> {
    let (script, _) = store
        .create_script(
            NewScript {
                id: RunBridge::new_run_id().context("an id")?,
                owner: owner.into(),
                name: format!("scale-{owner}"),
                description: String::new(),
                params: json!([]),
                source: SOURCE.into(),
                author: owner.into(),
                author_roles: Vec::new(),
            },
            u32::MAX,
        )
        .await
        .context("cannot save a script")?;
    Ok(script)
}

async fn drain(
    lab: &Lab,
    label: &'static str,
    isolation: Isolation,
    runs: usize,
) -> anyhow::Result<Lane> {
    let store = lab.store.script_store();
    let mut scripts = Vec::with_capacity(OWNERS);
    for owner in 0..OWNERS {
        scripts.push(
            save(
                store.as_ref(),
                &format!("{}-owner-{owner}", label.replace(' ', "-")),
            )
            .await?,
        );
    }
    let calls = Arc::new(MarkingHost::default());
    let host = Arc::clone(&calls);
    let runner = SandboxRunner::new(
        Limits::run(),
        isolation,
        move |run: &Run, _version: &ScriptVersion, _roles: &[String]| host.for_run(&run.id),
    );
    let bridge = RunBridge::new(
        Arc::clone(&store),
        None,
        Arc::new(runner),
        BridgeConfig::new(label),
    );
    let mut ids = Vec::with_capacity(runs);
    let new_run = |index: usize| -> anyhow::Result<NewRun> {
        let script = &scripts[index % OWNERS];
        Ok(NewRun {
            id: RunBridge::new_run_id().context("an id")?,
            script_id: script.id.clone(),
            script_name: script.name.clone(),
            script_owner: script.owner.clone(),
            version: script.version,
            params: json!({}),
            requested_by: script.owner.clone(),
            trace_context: None,
        })
    };
    // Queued before any worker runs: the whole backlog is there at once.
    for index in 0..runs {
        let run = new_run(index)?;
        ids.push(run.id.clone());
        bridge.enqueue(run).await.context("cannot queue a run")?;
    }
    // The host notes instants, the database wall-clock times: one reading of both maps
    // the one onto the other.
    let (instant_base, wall_base) = (Instant::now(), OffsetDateTime::now_utc());
    let reading = lab.meter.start().await?;
    let children_before = children_cpu();
    let started = Instant::now();
    bridge.start();
    let script_ids: Vec<String> = scripts.iter().map(|script| script.id.clone()).collect();
    loop {
        let row = lab
            .sql
            .query_one(
                "SELECT count(*) FILTER (WHERE status IN ('succeeded', 'failed', 'cancelled')) \
                 FROM script_runs WHERE script_id = ANY($1)",
                &[&script_ids],
            )
            .await
            .context("cannot count ended runs")?;
        if usize::try_from(row.get::<_, i64>(0)).unwrap_or(0) >= runs {
            break;
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!("{label}: the runs did not drain within ten minutes");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let drain_time = started.elapsed();
    let cpu = reading.stop().await?;
    let children = children_cpu().saturating_sub(children_before);
    bridge.shutdown(Duration::from_secs(5)).await;
    let rows = lab
        .sql
        .query(
            "SELECT id, status, created_at, started_at FROM script_runs WHERE script_id = ANY($1)",
            &[&script_ids],
        )
        .await
        .context("cannot read the runs")?;
    let (mut queued, mut begun) = (Vec::new(), Vec::new());
    for row in rows {
        let id: String = row.get(0);
        let status: String = row.get(1);
        ensure!(status == "succeeded", "{label}: run {id} ended {status}");
        let created: std::time::SystemTime = row.get(2);
        let claimed: std::time::SystemTime = row.get(3);
        let created = OffsetDateTime::from(created);
        let claimed = OffsetDateTime::from(claimed);
        let first = *calls
            .marks(&id)
            .first()
            .with_context(|| format!("{label}: run {id} never called the host"))?;
        let first = wall_base + first.saturating_duration_since(instant_base);
        queued.push((claimed - created).unsigned_abs());
        begun.push((first - claimed).unsigned_abs());
    }
    Ok(Lane {
        label,
        runs: ids.len(),
        drain: drain_time,
        queued,
        started: begun,
        process_cpu: cpu.process,
        children_cpu: children,
        postgres_cpu: cpu.postgres,
    })
}

pub(crate) async fn measure(sizes: &Sizes, server: &PostgresServer) -> anyhow::Result<Section> {
    let lab = Lab::open(server, 16).await?;
    let child = || Isolation::Child(ChildProcess::new(&sizes.docket_bin, ["script-child"]));
    // A short warm-up of each, so the binary is in the page cache and statements are
    // prepared.
    drain(&lab, "warm-up child", child(), 20).await?;
    drain(&lab, "warm-up in process", Isolation::InProcess, 20).await?;
    // The workers' number of children started ahead, as `docket serve` keeps them.
    let warm = || {
        Isolation::Child(
            ChildProcess::new(&sizes.docket_bin, ["script-child"])
                .warm(BridgeConfig::new("").workers),
        )
    };
    drain(&lab, "warm-up warm", warm(), 20).await?;
    let lanes = vec![
        drain(&lab, "in process", Isolation::InProcess, sizes.runs).await?,
        drain(&lab, "child process", child(), sizes.runs).await?,
        drain(&lab, "child process started ahead", warm(), sizes.runs).await?,
    ];
    Ok(section(&sizes.docket_bin, &lanes))
}

fn per_run(total: Duration, runs: usize) -> Duration {
    total / u32::try_from(runs.max(1)).unwrap_or(u32::MAX)
}

fn section(docket_bin: &Path, lanes: &[Lane]) -> Section {
    let rows = lanes
        .iter()
        .map(|lane| {
            vec![
                lane.label.to_owned(),
                lane.runs.to_string(),
                format!("{:.1} s", lane.drain.as_secs_f64()),
                per_second(lane.runs as f64 / lane.drain.as_secs_f64().max(f64::MIN_POSITIVE)),
                format!(
                    "{} / {}",
                    ms(percentile(&lane.queued, 50.0)),
                    ms(percentile(&lane.queued, 99.0))
                ),
                format!(
                    "{} / {}",
                    ms(percentile(&lane.started, 50.0)),
                    ms(percentile(&lane.started, 99.0))
                ),
                ms(per_run(lane.process_cpu, lane.runs)),
                ms(per_run(lane.children_cpu, lane.runs)),
                ms(per_run(lane.postgres_cpu, lane.runs)),
            ]
        })
        .collect();
    let mut findings = Vec::new();
    if let [in_process, child, ahead] = lanes {
        let cost = |lane: &Lane| {
            per_run(
                lane.process_cpu + lane.children_cpu + lane.postgres_cpu,
                lane.runs,
            )
        };
        let start_share =
            1.0 - cost(in_process).as_secs_f64() / cost(child).as_secs_f64().max(f64::MIN_POSITIVE);
        findings.push(format!(
            "A run in a child costs {} of CPU in all against {} in process: the child's start \
             (spawn, its limits, the run handed over) is {:.0} % of a short run's cost, and \
             running → first call takes {} at p50 against {}.",
            ms(cost(child)),
            ms(cost(in_process)),
            start_share * 100.0,
            ms(percentile(&child.started, 50.0)),
            ms(percentile(&in_process.started, 50.0)),
        ));
        findings.push(format!(
            "With children started ahead (as `docket serve` keeps them, one per worker), \
             running → first call takes {} at p50 ({} without) and the backlog drains at {:.0} \
             runs/s ({:.0} without): the start moves off the run's path, its CPU does not.",
            ms(percentile(&ahead.started, 50.0)),
            ms(percentile(&child.started, 50.0)),
            ahead.runs as f64 / ahead.drain.as_secs_f64().max(f64::MIN_POSITIVE),
            child.runs as f64 / child.drain.as_secs_f64().max(f64::MIN_POSITIVE),
        ));
    }
    Section {
        title: "Runs".to_owned(),
        method: format!(
            "A run bridge with the default configuration (2 workers, one running run per owner) \
             on a fresh PostgreSQL schema drains runs queued all at once over {OWNERS} owners, \
             each run one `platform.call` its host answers at once; first evaluated in this \
             process, then each in a child (`{} script-child`) started when its run is claimed, \
             then in children started ahead (one per worker, as `docket serve` keeps them). \
             Queue → running is the run's claim (`started_at`) less its queueing; running → first call is the host seeing \
             the call less the claim. CPU is this process (the bridge, the host and, in \
             process, the evaluation), its children (reaped) and the PostgreSQL backends, a run",
            docket_bin
                .file_name()
                .map_or_else(|| "docket".into(), |name| name.to_string_lossy())
        ),
        header: vec![
            "evaluated",
            "runs",
            "drained in",
            "runs/s",
            "queue → running p50 / p99",
            "running → first call p50 / p99",
            "CPU a run: this process",
            "children",
            "PostgreSQL",
        ],
        rows,
        findings,
        took: Duration::ZERO,
    }
}
