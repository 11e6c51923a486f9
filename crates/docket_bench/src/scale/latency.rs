//! Create latency, several runs in a row: each run measures Docket's task-creating
//! `tools/call` over HTTP against its floor — an empty HTTP exchange on Docket's
//! listener (`GET /healthz`) plus the bare INSERT on a pool set up like the store's —
//! in alternating rounds, as the tasks suite does once, each run on a connection of its
//! own. Target: p50 within 0.08 ms of the floor in at least four of five runs.

use std::time::Duration;

use docket_storage::test_db::PostgresServer;

use super::lab::Lab;
use super::section::{Section, Sizes, ms, verdict};
use crate::docket::DocketServer;
use crate::gate::Gate;
use crate::load::{self, McpClient, Samples};

/// Alternating rounds per run.
const ROUNDS: usize = 8;

/// Calls per path before the first run.
const WARM_UP: usize = 300;

/// Calls per path on each run's new connection before its rounds.
const CONNECTION_WARM_UP: usize = 50;

/// How far above the floor the p50 may be.
const MARGIN: Duration = Duration::from_micros(80);

#[derive(Default)]
struct Measured {
    create: Samples,
    exchange: Samples,
    insert: Samples,
}

impl Measured {
    fn floor(&self) -> Duration {
        self.exchange.percentile(50.0) + self.insert.percentile(50.0)
    }

    fn met(&self) -> bool {
        self.create.percentile(50.0) <= self.floor() + MARGIN
    }
}

pub(crate) async fn measure(sizes: &Sizes, server: &PostgresServer) -> anyhow::Result<Section> {
    let lab = Lab::open(server, 16).await?;
    let docket = DocketServer::start(&lab.store, Gate::new()).await?;
    let client = McpClient::new(&docket.url())?;
    let create = load::create_request()?;
    for _ in 0..WARM_UP {
        client.create(&create).await?;
        client.health().await?;
        lab.probe.insert_row().await?;
    }
    docket.release_all().await?;
    let per_round = (sizes.samples / ROUNDS).max(1);
    let mut runs = Vec::with_capacity(sizes.latency_runs);
    for _ in 0..sizes.latency_runs {
        // Each run on a connection of its own: runs that shared one connection shared
        // its verdict (a process read all five fast or all five slow), so five runs were
        // one trial, not five.
        let client = McpClient::new(&docket.url())?;
        for _ in 0..CONNECTION_WARM_UP {
            client.create(&create).await?;
            client.health().await?;
        }
        let mut measured = Measured::default();
        for _ in 0..ROUNDS {
            let (samples, _) =
                load::sequential(&lab.meter, per_round, |_| client.create(&create)).await?;
            measured.create.merge(samples);
            let (samples, _) = load::sequential(&lab.meter, per_round, |_| client.health()).await?;
            measured.exchange.merge(samples);
            let (samples, _) = load::sequential(&lab.meter, per_round, |_| async {
                Ok(lab.probe.insert_row().await?)
            })
            .await?;
            measured.insert.merge(samples);
            docket.release_all().await?;
        }
        runs.push(measured);
    }
    docket.stop().await?;
    Ok(section(sizes, &runs))
}

fn section(sizes: &Sizes, runs: &[Measured]) -> Section {
    let rows = runs
        .iter()
        .enumerate()
        .map(|(index, run)| {
            let p50 = run.create.percentile(50.0);
            vec![
                (index + 1).to_string(),
                ms(p50),
                ms(run.create.percentile(99.0)),
                ms(run.exchange.percentile(50.0)),
                ms(run.insert.percentile(50.0)),
                ms(run.floor()),
                format!(
                    "{:+.3} ms",
                    (p50.as_secs_f64() - run.floor().as_secs_f64()) * 1000.0
                ),
                verdict(run.met()).to_owned(),
            ]
        })
        .collect();
    let met = runs.iter().filter(|run| run.met()).count();
    let needed = (runs.len() * 4).div_ceil(5);
    Section {
        title: "Create latency, runs in a row".to_owned(),
        method: format!(
            "One replica on a fresh schema, warmed by {WARM_UP} calls of each path; then {} runs \
             in a row, each on a new keep-alive connection (warmed by {CONNECTION_WARM_UP} calls \
             of each path) and each {} sequential task-creating `tools/call`s over HTTP, as many \
             `GET /healthz` on the same connection and as many bare INSERTs on the probe's pool, \
             in {ROUNDS} alternating rounds. Floor: the exchange's p50 plus the INSERT's. \
             Target: Docket's p50 ≤ floor + 0.08 ms in at least four runs of five",
            sizes.latency_runs,
            per_round_total(sizes),
        ),
        header: vec![
            "run",
            "create p50",
            "p99",
            "exchange p50",
            "bare INSERT p50",
            "floor",
            "p50 − floor",
            "",
        ],
        rows,
        findings: vec![format!(
            "Met in {met} of {} runs (target: {needed}): {}.",
            runs.len(),
            verdict(met >= needed),
        )],
        took: Duration::ZERO,
    }
}

fn per_round_total(sizes: &Sizes) -> usize {
    (sizes.samples / ROUNDS).max(1) * ROUNDS
}
