//! `docket_chaos`: the chaos soak behind `cargo xtask chaos` (docs/design.md, Testing).
//!
//! Three (`--replicas`) `docket serve` processes of the binary under test
//! (`--docket-bin`) on a fresh PostgreSQL schema, each behind a fault proxy, with the
//! Trino double and an HTTP upstream in this process. For `--seconds` a mixed load —
//! `diagnostics_sleep` tasks of 1–6 s and direct calls, `trino_export` and `api_export`
//! tasks, `run_script` runs, and `tasks/cancel` of some of them through another
//! replica — runs while replicas are killed (`kill -9`), stopped (SIGTERM) and started
//! again, and all of them are cut from the database for 1–10 s at once. Every task is
//! read on every replica until it ends, and once more on each at the end. The schedule
//! of load and faults follows from `--seed` (printed; random when not given), so a
//! failing seed can be replayed.
//!
//! Then the checks ([`checks`]) judge what was seen and what the database holds, print
//! one line each and a summary, and the evidence goes to `--evidence/<seed>/`; the exit
//! status is non-zero when any check failed.

mod checks;
mod cluster;
mod database;
mod evidence;
mod facts;
mod faults;
mod journal;
mod load;
mod mcp;
mod plan;
mod rng;
mod timing;
mod upstream;
mod verdict;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use clap::Parser;
use docket_storage::test_db::{PostgresServer, TestDatabase};
use docket_trino_double::TrinoDouble;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::cluster::{Cluster, Settings};
use crate::database::Snapshot;
use crate::facts::Facts;
use crate::faults::Faults;
use crate::journal::{Answer, Clock, Shared};
use crate::load::Load;
use crate::mcp::Mcp;
use crate::plan::Plan;

/// How the soak is run.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "docket_chaos",
    about = "Docket's chaos soak: replicas killed, stopped and cut from the database under load"
)]
struct Args {
    /// How long the load and the faults go on; settling and the checks come after.
    #[arg(long, default_value_t = 180)]
    seconds: u64,
    /// The seed the schedule of load and faults is drawn from (random when not given).
    #[arg(long)]
    seed: Option<u64>,
    /// Replicas (at least 2).
    #[arg(long, default_value_t = 3)]
    replicas: usize,
    /// The `docket` binary under test.
    #[arg(long)]
    docket_bin: PathBuf,
    /// Where each soak's evidence goes, in a folder named after its seed.
    #[arg(long, default_value = "target/chaos")]
    evidence: PathBuf,
}

/// How long, after the load, the soak waits for every task to end before it reads
/// what is left as it is.
const SETTLE_LIMIT: Duration = Duration::from_secs(150);

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    match soak(&args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("docket_chaos: {error:#}");
            ExitCode::from(2)
        }
    }
}

fn random_u64() -> anyhow::Result<u64> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).context("no OS randomness")?;
    Ok(u64::from_le_bytes(bytes))
}

fn random_hex(bytes: usize) -> anyhow::Result<String> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).context("no OS randomness")?;
    Ok(buffer.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Runs the soak; whether every check passed.
async fn soak(args: &Args) -> anyhow::Result<bool> {
    ensure!(args.replicas >= 2, "--replicas must be at least 2");
    let seed = match args.seed {
        Some(seed) => seed,
        None => random_u64()?,
    };
    let replay = format!(
        "cargo xtask chaos --seed {seed} --seconds {} --replicas {}",
        args.seconds, args.replicas
    );
    println!(
        "chaos soak: seed {seed}, {} s of load and faults, {} replicas (replay: {replay})",
        args.seconds, args.replicas
    );
    let docket_bin = std::fs::canonicalize(&args.docket_bin)
        .with_context(|| format!("no docket binary at {}", args.docket_bin.display()))?;
    let evidence = std::path::absolute(args.evidence.join(seed.to_string()))?;
    let _ = std::fs::remove_dir_all(&evidence);
    std::fs::create_dir_all(&evidence)
        .with_context(|| format!("cannot create {}", evidence.display()))?;

    let server = PostgresServer::from_lookup(|name| std::env::var(name).ok());
    let Some(database) = TestDatabase::postgres(&server).await else {
        bail!(
            "the soak needs PostgreSQL at {} (DOCKET_TEST_DATABASE_URL), which is not reachable",
            docket_storage::test_db::DEFAULT_DATABASE_URL
        );
    };
    let clock = Clock::start();
    let journal = Shared::default();
    let double = TrinoDouble::start()
        .await
        .context("cannot start the Trino double")?;
    // A thousand rows in ten pages, 150 ms apart: an export takes a second or two.
    double.set_page_rows(100);
    double.set_page_delay(Duration::from_millis(150));
    let upstream_url = upstream::start(journal.clone(), clock).await?;
    let work_dir = std::env::temp_dir().join(format!("docket-chaos-{seed}-{}", random_hex(4)?));
    std::fs::create_dir_all(&work_dir)?;
    let api_key = random_hex(24)?;
    let settings = Settings {
        docket_bin,
        dir: work_dir.clone(),
        logs: evidence.join("logs"),
        trino_url: double.url(),
        upstream_url,
        api_key: api_key.clone(),
        replicas: args.replicas,
    };
    let cluster = Cluster::start(settings, &database, journal.clone(), clock).await?;
    let mcp = Mcp::new(&api_key, journal.clone(), clock)?;
    save_script(&cluster, &mcp, &journal, clock).await?;

    let plan = Plan::new(seed, Duration::from_secs(args.seconds), args.replicas);
    journal.lock().event(
        clock.now(),
        format!(
            "plan: {} requests, {} faults over {} s",
            plan.ops.len(),
            plan.faults.len(),
            args.seconds
        ),
    );
    let load = Load {
        cluster: cluster.clone(),
        mcp: mcp.clone(),
        journal: journal.clone(),
        clock,
    };
    let faults = Faults {
        cluster: cluster.clone(),
        journal: journal.clone(),
        clock,
    };
    // The load and its readers stop only at the settle limit; the faults at their end.
    let (stop_followers, stop_faults, stop_supervisor) = (
        CancellationToken::new(),
        CancellationToken::new(),
        CancellationToken::new(),
    );
    let supervisor = {
        let (faults, stop) = (faults.clone(), stop_supervisor.clone());
        tokio::spawn(async move { faults.supervise(&stop).await })
    };
    let sending = {
        let (load, stop) = (load.clone(), stop_followers.clone());
        tokio::spawn(async move { load.run(plan.ops, &stop).await })
    };
    let striking = {
        let (faults, stop) = (faults.clone(), stop_faults.clone());
        tokio::spawn(async move { faults.run(plan.faults, &stop).await })
    };
    let mut followers = sending.await.context("the load panicked")?;
    let mut restarts = striking.await.context("the faults panicked")?;
    stop_faults.cancel();
    while restarts.join_next().await.is_some() {}
    let cut_end = journal.lock().cuts.last().map_or(0.0, |cut| cut.end);
    let wait = (cut_end - clock.now()).max(0.0);
    tokio::time::sleep(Duration::from_secs_f64(wait)).await;
    faults.restore().await;
    journal.lock().event(
        clock.now(),
        "load and faults over; waiting for every task to end",
    );
    let settled = tokio::time::timeout(SETTLE_LIMIT, async {
        while followers.join_next().await.is_some() {}
    })
    .await
    .is_ok();
    if !settled {
        journal.lock().event(
            clock.now(),
            format!(
                "some tasks had not ended {SETTLE_LIMIT:?} after the load; reading them as they are"
            ),
        );
        stop_followers.cancel();
        while followers.join_next().await.is_some() {}
    }
    let final_reads_from = clock.now();
    read_everything_everywhere(&load).await;
    stop_supervisor.cancel();
    let _ = supervisor.await;
    journal
        .lock()
        .event(clock.now(), "stopping every replica (SIGTERM)");
    cluster.stop_all().await;

    let snapshot = Snapshot::read(database.url()).await?;
    let assets_dir = cluster.assets_dir();
    let journal = journal.lock();
    let facts = Facts::new(&journal, &snapshot, clock, assets_dir, final_reads_from);
    let verdicts = checks::run_all(&facts);
    let mut summary = format!(
        "chaos soak: seed {seed}, {} s, {} replicas\n",
        args.seconds, args.replicas
    );
    for verdict in &verdicts {
        summary.push_str(&verdict.line());
        summary.push('\n');
        for violation in verdict.violations.iter().take(5) {
            let task = violation.task.as_deref().unwrap_or("-");
            summary.push_str(&format!("    {task}: {}\n", violation.detail));
        }
        if verdict.violations.len() > 5 {
            summary.push_str(&format!(
                "    … and {} more (violations.json)\n",
                verdict.violations.len() - 5
            ));
        }
    }
    summary.push_str("HTTP answers and refusals:\n");
    for line in checks::http_breakdown(&facts) {
        summary.push_str(&line);
        summary.push('\n');
    }
    let failed = verdicts.iter().filter(|verdict| !verdict.passed()).count();
    let faults_struck = journal
        .timeline
        .iter()
        .filter(|event| {
            event.what.starts_with("-KILL") && event.what.contains("Fault")
                || event.what.starts_with("-TERM") && event.what.contains("Fault")
                || event.what.starts_with("database cut")
        })
        .count();
    summary.push_str(&format!(
        "summary: {} of {} checks passed; {} tasks, {} faults, {} replica processes; seed {seed}\n",
        verdicts.len() - failed,
        verdicts.len(),
        journal.tasks.len(),
        faults_struck,
        journal.processes.len(),
    ));
    if failed > 0 {
        summary.push_str(&format!(
            "evidence: {}\nreplay: {replay}\n",
            evidence.display()
        ));
    }
    println!("\n{summary}");
    evidence::write(&evidence, &facts, &verdicts, &summary)?;
    if failed == 0 {
        let _ = std::fs::remove_dir_all(&work_dir);
    } else {
        println!(
            "the replicas' folder (configurations, assets) is kept at {}",
            work_dir.display()
        );
    }
    Ok(failed == 0)
}

/// Saves the script every run runs, through the first replica, before any fault.
async fn save_script(
    cluster: &Cluster,
    mcp: &Mcp,
    journal: &Shared,
    clock: Clock,
) -> anyhow::Result<()> {
    let target = cluster
        .target(0)
        .context("the first replica is not serving")?;
    let arguments = json!({
        "command": "create",
        "name": load::SCRIPT_NAME,
        "source": load::SCRIPT_SOURCE,
        "params": [
            {"name": "seconds", "type": "float", "required": true},
            {"name": "calls", "type": "int", "required": true},
        ],
    });
    let answer = mcp
        .request(
            target.process,
            &target.url,
            "tools/call",
            json!({"name": "manage_script", "arguments": arguments}),
            false,
        )
        .await;
    match answer {
        Answer::Result(result) if result["isError"] != true => {
            journal.lock().event(clock.now(), "saved the runs' script");
            Ok(())
        }
        other => bail!("could not save the soak's script: {:?}", other.to_json()),
    }
}

/// Reads every task once on every replica (a few tries each), for check 1.
async fn read_everything_everywhere(load: &Load) {
    let ids: Vec<String> = load
        .journal
        .lock()
        .tasks
        .iter()
        .map(|task| task.id.clone())
        .collect();
    let slots = load.cluster.slot_count();
    let readers = (0..slots).map(|slot| {
        let ids = &ids;
        async move {
            for id in ids {
                for _ in 0..3 {
                    let Some(target) = load.cluster.target(slot) else {
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    };
                    if let Some(read) = load.read(id, &target).await {
                        if let Some(task) = load.journal.lock().task_mut(id) {
                            task.reads.push(read);
                        }
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
    });
    futures_util::future::join_all(readers).await;
}
