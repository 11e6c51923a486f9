//! Retention under load: one replica holding `--scale-expired` expired tasks, as many
//! ended runs past their retention and old audit rows, and a tenth as many old assets
//! (bytes and row), runs its retention passes — the task runtime's maintenance, the
//! run bridge's, and the audit and asset pass — while `tasks/get` load reads live
//! tasks. Target: the get's p99 during the passes within 1.5× of the same load
//! without them; the passes' own durations are reported.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use docket_export::sink::FilesystemSink;
use docket_storage::test_db::PostgresServer;

use super::fill;
use super::lab::{self, Lab};
use super::section::{Section, Sizes, count, ms, times, verdict};
use crate::docket::DocketServer;
use crate::gate::Gate;
use crate::load::Samples;

/// Live tasks the load reads.
const LIVE_TASKS: usize = 2000;

/// Each load measurement is cut into rounds this long, so the load during the
/// passes stops when they do.
const ROUND: Duration = Duration::from_millis(500);

/// The p99 during the passes may be this many times the p99 without.
const TARGET: f64 = 1.5;

struct Pass {
    what: &'static str,
    deleted: u64,
    took: Duration,
}

pub(crate) async fn measure(sizes: &Sizes, server: &PostgresServer) -> anyhow::Result<Section> {
    let lab = Lab::open(server, 16).await?;
    // Replica A serves the load and leaves retention to replica B, whose passes are
    // the ones timed (its own maintenance loop would otherwise delete some of the
    // backlog first, every 15 s).
    let gate = Gate::new();
    let docket = DocketServer::start(&lab.store, gate.clone()).await?;
    docket.store.leave_retention_elsewhere();
    let mut live = Vec::with_capacity(LIVE_TASKS);
    for _ in 0..LIVE_TASKS {
        live.push(docket.spawn_held().await?.as_str().to_owned());
    }
    docket.release_all().await?;
    // Replica B runs the passes: an app on a store of its own, with assets on the
    // filesystem and the retention store, never served, so none of its loops runs a
    // pass before the measured one.
    let assets_dir = crate::exports::temp_dir()?;
    let store_b = lab.another_store().await?;
    let (asset_store, calls, retention, scripts) = (
        store_b.asset_store(),
        store_b.call_catalog(),
        store_b.retention(),
        store_b.script_store(),
    );
    let sink = Arc::new(FilesystemSink::new(&assets_dir));
    let replica_b = crate::docket::build_app(
        store_b.task_store(),
        gate,
        |_| {},
        move |builder| {
            builder
                .scripts(scripts)
                .assets(asset_store, Some(calls), sink)
                .retention(retention)
        },
    )?;

    let expired = sizes.expired;
    let assets = (expired / 10).max(1);
    let filling = Instant::now();
    fill::tasks(&lab.sql, &live[0], expired, true).await?;
    let run_template = fill::run_template(lab.store.script_store().as_ref(), &lab.sql).await?;
    fill::runs(&lab.sql, &run_template, expired, true).await?;
    fill::old_audit_rows(&lab.sql, expired).await?;
    fill::old_assets(&lab.sql, assets).await?;
    // Each old asset's bytes, as an export left them.
    for row in lab
        .sql
        .query("SELECT storage_key FROM assets", &[])
        .await
        .context("cannot read the asset keys")?
    {
        let path = assets_dir.join(row.get::<_, String>(0));
        if let Some(folder) = path.parent() {
            std::fs::create_dir_all(folder).context("cannot make an asset folder")?;
        }
        std::fs::write(&path, b"id\n1\n").context("cannot write an asset's bytes")?;
    }
    lab.sql
        .batch_execute(
            "ANALYZE call_tasks; ANALYZE script_runs; ANALYZE audit_logs; ANALYZE assets",
        )
        .await
        .context("cannot analyze")?;
    let fill_time = filling.elapsed();
    eprintln!("  filled in {:.1} s", fill_time.as_secs_f64());

    let urls = [docket.url()];
    let window = sizes.seconds * 3;
    let mut quiet = Samples::default();
    let started = Instant::now();
    while started.elapsed() < window {
        quiet.merge(lab::http_gets(&lab.meter, &urls, &live, sizes.clients, ROUND).await?);
    }

    let app = replica_b.clone();
    let passes = tokio::spawn(async move {
        let mut passes = Vec::new();
        let runtime = app.task_runtime().context("no task runtime")?;
        let started = Instant::now();
        let before = runtime.expired_tasks_deleted();
        runtime.maintain().await;
        passes.push(Pass {
            what: "tasks (the task runtime's maintenance)",
            deleted: runtime.expired_tasks_deleted() - before,
            took: started.elapsed(),
        });
        let bridge = app.run_bridge().context("no run bridge")?;
        let started = Instant::now();
        let deleted = bridge.delete_expired_runs().await;
        passes.push(Pass {
            what: "runs (the run bridge's)",
            deleted: u64::try_from(deleted).unwrap_or(u64::MAX),
            took: started.elapsed(),
        });
        // The audit and asset pass, one kind at a time so each is timed on its own.
        let configured = docket_server::RetentionAges::from_config(app.config());
        let started = Instant::now();
        let report = app
            .delete_expired(docket_server::RetentionAges {
                assets: None,
                assets_with_their_task: false,
                ..configured
            })
            .await;
        passes.push(Pass {
            what: "audit rows (the retention pass)",
            deleted: report.audit,
            took: started.elapsed(),
        });
        let started = Instant::now();
        let report = app
            .delete_expired(docket_server::RetentionAges {
                audit: None,
                calls: None,
                ..configured
            })
            .await;
        passes.push(Pass {
            what: "assets, bytes and row (the retention pass)",
            deleted: report.assets,
            took: started.elapsed(),
        });
        anyhow::Ok(passes)
    });
    let mut during = Samples::default();
    let pass_started = Instant::now();
    while !passes.is_finished() {
        during.merge(lab::http_gets(&lab.meter, &urls, &live, sizes.clients, ROUND).await?);
    }
    let passes = passes.await.context("the passes panicked")??;
    let pass_time = pass_started.elapsed();
    let left = fill::rows(&lab.sql, "call_tasks").await?;
    ensure!(
        left as usize <= LIVE_TASKS,
        "{left} tasks left after the pass: expired ones were not all deleted"
    );
    let runs_left = fill::rows(&lab.sql, "script_runs").await?;
    let assets_left = fill::rows(&lab.sql, "assets").await?;
    ensure!(
        runs_left <= 1 && assets_left == 0,
        "{runs_left} runs and {assets_left} assets left after the pass"
    );
    docket.stop().await?;
    let _ = std::fs::remove_dir_all(&assets_dir);

    let p99 = |samples: &Samples| samples.percentile(99.0).as_secs_f64();
    let ratio = p99(&during) / p99(&quiet).max(f64::MIN_POSITIVE);
    let mut rows: Vec<Vec<String>> = passes
        .iter()
        .map(|pass| {
            vec![
                pass.what.to_owned(),
                count(pass.deleted),
                format!("{:.2} s", pass.took.as_secs_f64()),
                format!(
                    "{:.0}/s",
                    pass.deleted as f64 / pass.took.as_secs_f64().max(f64::MIN_POSITIVE)
                ),
            ]
        })
        .collect();
    rows.push(vec![
        "all passes, under the load".to_owned(),
        count(passes.iter().map(|pass| pass.deleted).sum::<u64>()),
        format!("{:.2} s", pass_time.as_secs_f64()),
        String::new(),
    ]);
    let findings = vec![
        format!(
            "`tasks/get` from {} clients: p50 / p99 {} / {} without the passes ({:.0}/s), {} / {} during them ({:.0}/s): p99 {} the quiet figure, target ≤ {TARGET}×: {}.",
            sizes.clients,
            ms(quiet.percentile(50.0)),
            ms(quiet.percentile(99.0)),
            quiet.rate(),
            ms(during.percentile(50.0)),
            ms(during.percentile(99.0)),
            during.rate(),
            times(p99(&during), p99(&quiet)),
            verdict(ratio <= TARGET),
        ),
        format!(
            "Filling the {} expired rows of each kind took {:.1} s.",
            count(expired),
            fill_time.as_secs_f64()
        ),
    ];
    Ok(Section {
        title: "Retention under load".to_owned(),
        method: format!(
            "One replica (assets on the filesystem) holds {} expired tasks, {} ended runs past \
             the run retention, {} audit rows past the audit retention and {} assets past the \
             asset retention, each with its bytes; {LIVE_TASKS} live tasks are read on replica \
             A by `tasks/get` from {} clients for {:.0} s, then the same load runs while \
             replica B (same database, a pool of its own) runs its passes one after another: the task runtime's maintenance \
             (`TaskRuntime::maintain`), the run bridge's (`delete_expired_runs`) and the audit \
             and asset pass (`App::delete_expired`), with the configuration's retention",
            count(expired),
            count(expired),
            count(expired),
            count(assets),
            sizes.clients,
            window.as_secs_f64(),
        ),
        header: vec!["pass", "deleted", "took", "rate"],
        rows,
        findings,
        took: Duration::ZERO,
    })
}
