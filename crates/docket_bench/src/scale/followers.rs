//! Followers: at each size, that many `subscriptions/listen` streams held open on
//! replica B — a `docket serve` process of its own, so its memory and descriptors are
//! its streams' and nobody else's — following tasks that run and end on replica A
//! (this process's app on the same schema). Reported per size: B's resident memory
//! and open descriptors per stream (target ≤ 16 KiB a stream), and the time from a
//! task's end on A to its `notifications/tasks` arriving on each of its streams
//! (target p99 ≤ 100 ms at 10 000 streams).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use docket_storage::test_db::PostgresServer;
use docket_task::Outcome;
use futures_util::StreamExt as _;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::lab::Lab;
use super::section::{Section, Sizes, count, ms, verdict};
use crate::docket::{DocketServer, new_task};
use crate::exports::{Server, status_field, temp_dir};
use crate::gate::Gate;
use crate::load::{self, McpClient, percentile};
use crate::phases::read_stream_until;

/// Tasks followed at each size (each followed by an equal share of the streams).
const MOST_TASKS: usize = 100;

/// Listen requests in flight at once while the streams are opened.
const OPENING: usize = 64;

/// How long one end may take to reach all its streams before the run fails.
const END_TIMEOUT: Duration = Duration::from_secs(30);

/// Targets.
const MOST_BYTES_PER_STREAM: f64 = 16.0 * 1024.0;
const MOST_P99: Duration = Duration::from_millis(100);

struct Point {
    streams: usize,
    tasks: usize,
    open_time: Duration,
    rss_before: u64,
    rss_after: u64,
    fds_before: usize,
    fds_after: usize,
    latencies: Vec<Duration>,
}

/// Replica B's configuration: the schema's database, anonymous administrators, and no
/// limit below the streams held (they are one identity's).
fn config(url: &str, most_streams: usize) -> String {
    format!(
        "auth: {{ allow_anonymous: true, anonymous_roles: [admin] }}\n\
         rate_limit: {{ requests_per_minute: 0 }}\n\
         server: {{ max_connections: {}, max_connection_share_percent: 100, \
                    max_streams_per_identity: {} }}\n\
         database: {{ url: \"{url}\" }}\n",
        most_streams + 1024,
        most_streams + 1024,
    )
}

/// Resident memory and open descriptors of `pid`.
fn footprint(pid: u32) -> anyhow::Result<(u64, usize)> {
    let rss = status_field(pid, "VmRSS")?;
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .with_context(|| format!("cannot read /proc/{pid}/fd"))?
        .count();
    Ok((rss, fds))
}

pub(crate) async fn measure(sizes: &Sizes, server: &PostgresServer) -> anyhow::Result<Section> {
    let lab = Lab::open(server, 16).await?;
    let replica_a = DocketServer::start(&lab.store, Gate::new()).await?;
    let most = sizes.followers.iter().copied().max().unwrap_or(0);
    let mut points = Vec::new();
    for &streams in &sizes.followers {
        let dir = temp_dir()?;
        let point = measure_size(&lab, &replica_a, &sizes.docket_bin, &dir, streams, most).await;
        let _ = std::fs::remove_dir_all(&dir);
        points.push(point?);
    }
    replica_a.stop().await?;
    Ok(section(&points))
}

async fn measure_size(
    lab: &Lab,
    replica_a: &DocketServer,
    docket_bin: &Path,
    dir: &Path,
    streams: usize,
    most: usize,
) -> anyhow::Result<Point> {
    let replica_b = Server::start_with(docket_bin, dir, &config(&lab.url, most))?;
    let client = McpClient::new(&replica_b.url)?;
    let runtime = replica_a.runtime()?;
    let tasks = streams.clamp(1, MOST_TASKS);
    let mut releases = Vec::with_capacity(tasks);
    let mut ids = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        let (release, released) = oneshot::channel::<()>();
        let record = runtime
            .spawn(
                new_task(replica_a.app.replica_id())?,
                move |_context| async move {
                    let _ = released.await;
                    Outcome::Completed(json!({ "content": [] }))
                },
            )
            .await
            .context("could not start a task")?;
        releases.push(release);
        ids.push(record.id.as_str().to_owned());
    }
    // Warm-up: a few streams opened, heard and closed, so what is measured next is
    // what the streams hold, not the server's first-use growth.
    for id in ids.iter().take(16) {
        let mut stream = client.open(&load::listen_request(id)?).await?;
        let mut pending = String::new();
        read_stream_until(&mut stream, &mut pending, |message| {
            message["method"] == "notifications/tasks"
        })
        .await?;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss_before, fds_before) = footprint(replica_b.pid())?;

    let close = CancellationToken::new();
    let (heard_tx, mut heard) = mpsc::unbounded_channel::<(usize, Instant)>();
    let (ready_tx, mut ready) = mpsc::unbounded_channel::<()>();
    let opening = Instant::now();
    let opened = futures_util::stream::iter(0..streams)
        .map(|index| {
            let task = index % tasks;
            let request = load::listen_request(&ids[task]);
            let client = client.clone();
            async move { anyhow::Ok((task, client.open(&request?).await?)) }
        })
        .buffer_unordered(OPENING);
    futures_util::pin_mut!(opened);
    let mut readers = Vec::with_capacity(streams);
    while let Some(stream) = opened.next().await {
        let (task, mut stream) = stream?;
        let (heard_tx, ready_tx, close) = (heard_tx.clone(), ready_tx.clone(), close.clone());
        readers.push(tokio::spawn(async move {
            let mut pending = String::new();
            read_stream_until(&mut stream, &mut pending, |message| {
                message["method"] == "notifications/tasks"
            })
            .await?;
            let _ = ready_tx.send(());
            let at = read_stream_until(&mut stream, &mut pending, |message| {
                message["method"] == "notifications/tasks"
                    && message["params"]["status"] == "completed"
            })
            .await?;
            let _ = heard_tx.send((task, at));
            // Held open until the size is over, as a follower keeps listening.
            close.cancelled().await;
            anyhow::Ok(())
        }));
    }
    for _ in 0..streams {
        tokio::time::timeout(END_TIMEOUT, ready.recv())
            .await
            .context("a stream never heard its task's state")?
            .context("the readers are gone")?;
    }
    let open_time = opening.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss_after, fds_after) = footprint(replica_b.pid())?;

    let mut latencies = Vec::with_capacity(streams);
    for (task, release) in releases.into_iter().enumerate() {
        let followers = (0..streams).filter(|index| index % tasks == task).count();
        let ended = Instant::now();
        let _ = release.send(());
        for _ in 0..followers {
            let (heard_task, at) = tokio::time::timeout(END_TIMEOUT, heard.recv())
                .await
                .context("a stream did not hear its task end")?
                .context("the readers are gone")?;
            if heard_task != task {
                bail!("a stream heard task {heard_task} end while task {task} ended");
            }
            latencies.push(at.duration_since(ended));
        }
    }
    close.cancel();
    for reader in readers {
        reader.await.context("a reader panicked")??;
    }
    drop(replica_b);
    Ok(Point {
        streams,
        tasks,
        open_time,
        rss_before,
        rss_after,
        fds_before,
        fds_after,
        latencies,
    })
}

fn per_stream(point: &Point) -> f64 {
    point.rss_after.saturating_sub(point.rss_before) as f64 / point.streams.max(1) as f64
}

fn section(points: &[Point]) -> Section {
    let rows = points
        .iter()
        .map(|point| {
            vec![
                count(point.streams as u64),
                point.tasks.to_string(),
                format!("{:.1} s", point.open_time.as_secs_f64()),
                format!(
                    "{:.1} → {:.1} MiB",
                    point.rss_before as f64 / 1048576.0,
                    point.rss_after as f64 / 1048576.0
                ),
                format!("{:.1} KiB", per_stream(point) / 1024.0),
                format!("{} → {}", point.fds_before, point.fds_after),
                format!(
                    "{:.2}",
                    point.fds_after.saturating_sub(point.fds_before) as f64
                        / point.streams.max(1) as f64
                ),
                ms(percentile(&point.latencies, 50.0)),
                ms(percentile(&point.latencies, 99.0)),
            ]
        })
        .collect();
    let mut findings = Vec::new();
    if let Some(last) = points.last() {
        let p99 = percentile(&last.latencies, 99.0);
        findings.push(format!(
            "At {} streams: {:.1} KiB of replica B's resident memory a stream (target ≤ 16 KiB: {}), end-to-push p99 {} (target ≤ 100 ms: {}).",
            count(last.streams as u64),
            per_stream(last) / 1024.0,
            verdict(per_stream(last) <= MOST_BYTES_PER_STREAM),
            ms(p99),
            verdict(p99 <= MOST_P99),
        ));
    }
    Section {
        title: "Followers".to_owned(),
        method: format!(
            "Replica B is a `docket serve` process on the same schema as replica A, this \
             process's app. At each size B is started afresh, warmed by 16 streams opened and \
             closed, and measured (resident memory, open descriptors); then that many \
             `subscriptions/listen` streams are opened on it ({OPENING} at a time), each \
             following one of up to {MOST_TASKS} tasks running on A, and B is measured again \
             once every stream has heard its task's state. The tasks then end on A one at a \
             time, each after the last one's streams have all heard it; a sample is the time \
             from the end on A to the `notifications/tasks` saying `completed` read on one \
             stream (A's ending statement NOTIFYs, B's runtime hears it and writes to each \
             stream). Targets at the largest size: ≤ 16 KiB a stream, p99 ≤ 100 ms"
        ),
        header: vec![
            "streams",
            "tasks",
            "opened in",
            "B resident",
            "a stream",
            "B descriptors",
            "a stream",
            "end → push p50",
            "p99",
        ],
        rows,
        findings,
        took: Duration::ZERO,
    }
}
