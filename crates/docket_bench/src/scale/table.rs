//! Table size: create latency and `tasks/get` throughput with the task table (and the
//! run table) at each size, against the bare INSERT and SELECT at the same size.
//! Reads are of ids picked at random over the whole table, not only of recent
//! rows, so a larger table is also a larger working set. Target: every figure at
//! the largest size within 10 % of the smallest size's.

use std::time::Duration;

use anyhow::Context as _;
use docket_storage::test_db::PostgresServer;

use super::fill;
use super::lab::{self, Lab};
use super::section::{Section, Sizes, count, ms, per_second, times, verdict};
use crate::docket::DocketServer;
use crate::gate::Gate;
use crate::load::{self, McpClient, Samples};

/// Latency rounds per size, alternating between Docket's create and the bare INSERT.
const ROUNDS: usize = 4;

/// Throughput rounds per size, alternating between the paths.
const THROUGHPUT_ROUNDS: usize = 3;

/// Ids each read path cycles through.
const READ_IDS: usize = 2000;

/// The largest size's figure may be this much worse than the smallest's.
const FLAT: f64 = 0.10;

#[derive(Default)]
struct Point {
    rows: u64,
    fill: Duration,
    create: Samples,
    insert: Samples,
    gets: Samples,
    selects: Samples,
    run_gets: Samples,
}

pub(crate) async fn measure(sizes: &Sizes, server: &PostgresServer) -> anyhow::Result<Section> {
    let lab = Lab::open(server, 16).await?;
    let gate = Gate::new();
    let docket = DocketServer::start(&lab.store, gate.clone()).await?;
    let client = McpClient::new(&docket.url())?;
    let create = load::create_request()?;
    // The templates: an ended task and an ended run, as Docket writes them.
    let task_template = docket.spawn_held().await?;
    docket.release_all().await?;
    let run_template = fill::run_template(lab.store.script_store().as_ref(), &lab.sql).await?;
    let mut points = Vec::new();
    for &size in &sizes.rows {
        let filling = std::time::Instant::now();
        let tasks = fill::rows(&lab.sql, "call_tasks").await?;
        fill::tasks(
            &lab.sql,
            task_template.as_str(),
            size.saturating_sub(tasks),
            false,
        )
        .await?;
        let runs = fill::rows(&lab.sql, "script_runs").await?;
        fill::runs(&lab.sql, &run_template, size.saturating_sub(runs), false).await?;
        lab.sql
            .batch_execute("ANALYZE call_tasks; ANALYZE script_runs")
            .await
            .context("cannot analyze")?;
        let mut point = Point {
            rows: size,
            fill: filling.elapsed(),
            ..Point::default()
        };
        eprintln!(
            "  {} rows (filled in {:.1} s)",
            count(size),
            point.fill.as_secs_f64()
        );
        let per_round = sizes.samples / ROUNDS;
        for _ in 0..ROUNDS {
            let (samples, _) =
                load::sequential(&lab.meter, per_round, |_| client.create(&create)).await?;
            point.create.merge(samples);
            let (samples, _) = load::sequential(&lab.meter, per_round, |_| async {
                Ok(lab.probe.insert_row().await?)
            })
            .await?;
            point.insert.merge(samples);
            docket.release_all().await?;
        }
        let task_ids =
            fill::sample_ids(&lab.sql, "call_tasks", "task_id", "task_", READ_IDS).await?;
        let run_ids = fill::sample_ids(&lab.sql, "script_runs", "id", "run_", READ_IDS).await?;
        let urls = [docket.url()];
        let round = sizes.seconds;
        for _ in 0..THROUGHPUT_ROUNDS {
            point
                .gets
                .merge(lab::http_gets(&lab.meter, &urls, &task_ids, sizes.clients, round).await?);
            point.selects.merge(
                lab::bare_selects(&lab.meter, &lab.probe, &task_ids, sizes.clients, round).await?,
            );
            point
                .run_gets
                .merge(lab::http_gets(&lab.meter, &urls, &run_ids, sizes.clients, round).await?);
        }
        points.push(point);
    }
    docket.stop().await?;
    Ok(section(sizes, &points))
}

fn section(sizes: &Sizes, points: &[Point]) -> Section {
    let first = points.first();
    let rows = points
        .iter()
        .map(|point| {
            let base = first.unwrap_or(point);
            vec![
                count(point.rows),
                format!("{:.1} s", point.fill.as_secs_f64()),
                format!(
                    "{} / {}",
                    ms(point.create.percentile(50.0)),
                    ms(point.create.percentile(99.0))
                ),
                times(
                    point.create.percentile(50.0).as_secs_f64(),
                    base.create.percentile(50.0).as_secs_f64(),
                ),
                ms(point.insert.percentile(50.0)),
                per_second(point.gets.rate()),
                times(point.gets.rate(), base.gets.rate()),
                per_second(point.selects.rate()),
                per_second(point.run_gets.rate()),
                times(point.run_gets.rate(), base.run_gets.rate()),
            ]
        })
        .collect();
    let mut findings = Vec::new();
    if let (Some(first), Some(last)) = (points.first(), points.last())
        && points.len() > 1
    {
        let create = last.create.percentile(50.0).as_secs_f64()
            / first
                .create
                .percentile(50.0)
                .as_secs_f64()
                .max(f64::MIN_POSITIVE);
        let create_p99 = last.create.percentile(99.0).as_secs_f64()
            / first
                .create
                .percentile(99.0)
                .as_secs_f64()
                .max(f64::MIN_POSITIVE);
        let gets = last.gets.rate() / first.gets.rate().max(f64::MIN_POSITIVE);
        let run_gets = last.run_gets.rate() / first.run_gets.rate().max(f64::MIN_POSITIVE);
        let insert = last.insert.percentile(50.0).as_secs_f64()
            / first
                .insert
                .percentile(50.0)
                .as_secs_f64()
                .max(f64::MIN_POSITIVE);
        let selects = last.selects.rate() / first.selects.rate().max(f64::MIN_POSITIVE);
        findings.push(format!(
            "Create p50 at {} rows is {create:.2}× the figure at {} (p99 {create_p99:.2}×; the bare INSERT {insert:.2}×): {}.",
            count(last.rows),
            count(first.rows),
            verdict(create <= 1.0 + FLAT),
        ));
        findings.push(format!(
            "`tasks/get` throughput at {} rows is {gets:.2}× the figure at {} (the bare SELECT {selects:.2}×; a run's get {run_gets:.2}×): {}.",
            count(last.rows),
            count(first.rows),
            verdict(gets >= 1.0 - FLAT && run_gets >= 1.0 - FLAT),
        ));
    }
    Section {
        title: "Table size".to_owned(),
        method: format!(
            "One replica on a fresh schema, its task and run tables filled to each size with \
             copies of an ended task and an ended run as Docket writes them. At each size: \
             create latency, {} sequential task-creating `tools/call`s over HTTP against as \
             many bare INSERTs, in {ROUNDS} alternating rounds; then `tasks/get` throughput \
             from {} clients reading {READ_IDS} task ids picked at random over the whole \
             table, against bare primary-key SELECTs of the same ids, and `tasks/get` of \
             {READ_IDS} random run ids, {THROUGHPUT_ROUNDS} alternating rounds of {:.0} s. \
             Target: at the largest size within 10 % of the smallest size's figures",
            sizes.samples,
            sizes.clients,
            sizes.seconds.as_secs_f64(),
        ),
        header: vec![
            "rows",
            "filled in",
            "create p50 / p99",
            "create p50 vs first",
            "bare INSERT p50",
            "`tasks/get`",
            "vs first",
            "bare SELECT",
            "run `tasks/get`",
            "vs first",
        ],
        rows,
        findings,
        took: Duration::ZERO,
    }
}
