//! Replicas: one, two, … `--scale-replicas` Docket replicas (apps with stores and pools
//! of their own) on one PostgreSQL schema, the same `tasks/get` and create load spread
//! over them, against the bare statements from as many clients: aggregate throughput,
//! and CPU a call in this process and in PostgreSQL.

use std::time::Duration;

use docket_storage::test_db::PostgresServer;

use super::lab::{self, Lab};
use super::section::{Section, Sizes, per_second, times};
use crate::docket::DocketServer;
use crate::gate::Gate;
use crate::load::Samples;

/// Completed tasks the get load reads.
const READ_TASKS: usize = 2000;

/// Alternating rounds per measurement.
const ROUNDS: usize = 2;

#[derive(Default)]
struct Point {
    replicas: usize,
    gets: Samples,
    selects: Samples,
    creates: Samples,
    inserts: Samples,
}

pub(crate) async fn measure(sizes: &Sizes, server: &PostgresServer) -> anyhow::Result<Section> {
    let lab = Lab::open(server, 16).await?;
    let gate = Gate::new();
    let first = DocketServer::start(&lab.store, gate.clone()).await?;
    let mut ids = Vec::with_capacity(READ_TASKS);
    for _ in 0..READ_TASKS {
        ids.push(first.spawn_held().await?.as_str().to_owned());
    }
    first.release_all().await?;
    let mut replicas = vec![first];
    let mut points = Vec::new();
    for count in 1..=sizes.replicas.max(1) {
        while replicas.len() < count {
            let store = lab.another_store().await?;
            replicas.push(DocketServer::start(&store, gate.clone()).await?);
        }
        let urls: Vec<String> = replicas.iter().map(DocketServer::url).collect();
        let mut point = Point {
            replicas: count,
            ..Point::default()
        };
        for _ in 0..ROUNDS {
            point.gets.merge(
                lab::http_gets(&lab.meter, &urls, &ids, sizes.clients, sizes.seconds).await?,
            );
            point.selects.merge(
                lab::bare_selects(&lab.meter, &lab.probe, &ids, sizes.clients, sizes.seconds)
                    .await?,
            );
            point
                .creates
                .merge(lab::http_creates(&lab.meter, &urls, sizes.clients, sizes.seconds).await?);
            for replica in &replicas {
                replica.release_all().await?;
            }
            point.inserts.merge(
                lab::bare_inserts(&lab.meter, &lab.probe, sizes.clients, sizes.seconds).await?,
            );
        }
        points.push(point);
    }
    for replica in replicas {
        replica.stop().await?;
    }
    Ok(section(sizes, &points))
}

fn micros(duration: Duration) -> String {
    format!("{:.0} µs", duration.as_secs_f64() * 1e6)
}

fn section(sizes: &Sizes, points: &[Point]) -> Section {
    let rows = points
        .iter()
        .map(|point| {
            let (get_process, get_postgres) = point.gets.cpu_per_call();
            let (_, select_postgres) = point.selects.cpu_per_call();
            let (create_process, create_postgres) = point.creates.cpu_per_call();
            let (_, insert_postgres) = point.inserts.cpu_per_call();
            vec![
                point.replicas.to_string(),
                per_second(point.gets.rate()),
                times(point.gets.rate(), point.selects.rate()),
                format!("{} + {}", micros(get_process), micros(get_postgres)),
                micros(select_postgres),
                per_second(point.creates.rate()),
                times(point.creates.rate(), point.inserts.rate()),
                format!("{} + {}", micros(create_process), micros(create_postgres)),
                micros(insert_postgres),
            ]
        })
        .collect();
    let mut findings = Vec::new();
    if let (Some(one), Some(most)) = (points.first(), points.last())
        && points.len() > 1
    {
        let (_, one_get_pg) = one.gets.cpu_per_call();
        let (_, most_get_pg) = most.gets.cpu_per_call();
        let (_, one_create_pg) = one.creates.cpu_per_call();
        let (_, most_create_pg) = most.creates.cpu_per_call();
        findings.push(format!(
            "{} replicas against one: `tasks/get` {} the throughput at {} the PostgreSQL CPU a get; creates {} the throughput at {} the PostgreSQL CPU a create. Every replica shares the same two cores, so more replicas cannot add throughput here; what they must not do is make each call dearer for the database.",
            most.replicas,
            times(most.gets.rate(), one.gets.rate()),
            times(most_get_pg.as_secs_f64(), one_get_pg.as_secs_f64()),
            times(most.creates.rate(), one.creates.rate()),
            times(most_create_pg.as_secs_f64(), one_create_pg.as_secs_f64()),
        ));
    }
    Section {
        title: "Replicas".to_owned(),
        method: format!(
            "Replicas are apps in this process, each with its own store and pool of 16 on one \
             fresh schema, served on ports of their own; {} keep-alive clients are spread over \
             them round-robin. Each measurement is {ROUNDS} alternating rounds of {:.0} s: \
             `tasks/get` of {READ_TASKS} completed tasks, the bare primary-key SELECT of the \
             same rows from as many tasks, task-creating `tools/call`s (held, released after \
             the round), and the bare INSERT. CPU a call is this process + the PostgreSQL \
             backends of this run",
            sizes.clients,
            sizes.seconds.as_secs_f64(),
        ),
        header: vec![
            "replicas",
            "`tasks/get`",
            "of bare SELECT",
            "CPU a get (process + PostgreSQL)",
            "bare SELECT: PostgreSQL",
            "creates",
            "of bare INSERT",
            "CPU a create",
            "bare INSERT: PostgreSQL",
        ],
        rows,
        findings,
        took: Duration::ZERO,
    }
}
