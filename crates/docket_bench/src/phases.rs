//! The run: set up both servers and the baselines, warm up, then measure in
//! this order — create latency, `tasks/get` throughput, create throughput,
//! heartbeat — and tear down.
//!
//! Paths that are compared run in alternating rounds (Docket, rmcp, bare SQL,
//! Docket, …) rather than one after the other, so a change in the machine's
//! background load lands on all of them alike. Between rounds every held task
//! is released and allowed to end, so no path shares the machine with another
//! path's leftover work.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use docket_server::Config;
use docket_storage::probe::PgProbe;
use docket_storage::sqlite_probe::SqliteProbe;
use docket_storage::test_db::{PostgresServer, TestDatabase};
use docket_storage::{ConnectOptions, PgStore, SharedStatements, Store};
use docket_task::{Outcome, TaskId, TaskStore};
use futures_util::{StreamExt as _, TryStreamExt as _};
use serde_json::json;

use crate::Args;
use crate::docket::{DocketServer, new_task};
use crate::echo::EchoServer;
use crate::gate::Gate;
use crate::load::{self, McpClient, Prepared, ResultType, Samples};
use crate::peer::PeerServer;
use crate::report::{
    CreateThroughput, CrossReplicaCancel, Embedded, Follower, GetThroughput, Heartbeat,
    HeartbeatWindow, Latency, Results, RunContext,
};
use crate::system::{self, CpuMeter, Machine};

/// Calls per path before anything is measured: connections open, statements get
/// prepared, code and data get warm.
const WARMUP_CALLS: usize = 300;

/// Latency samples are taken in this many rounds, alternating between paths.
const LATENCY_ROUNDS: usize = 8;

/// Throughput measurements are split into this many rounds per path.
const THROUGHPUT_ROUNDS: u32 = 3;

/// Running-task counts below the requested one at which the heartbeat is also
/// watched, to show how its cost grows (or does not) with the count.
const SMALLER_HEARTBEAT_COUNTS: &[usize] = &[0, 1_000];

/// How long the smaller heartbeat windows last.
const SMALLER_HEARTBEAT_WINDOW: Duration = Duration::from_secs(6);

/// Explicit `TaskRuntime::beat` calls timed with the most tasks running.
const TIMED_BEATS: usize = 3;

/// Cross-replica cancels sampled (and as many NOTIFY round trips), in
/// [`LATENCY_ROUNDS`] alternating rounds.
const CANCEL_SAMPLES: usize = 240;

/// Task ends a listening and a polling follower each time, on another replica.
const FOLLOWER_SAMPLES: usize = 30;

/// What a `CreateTaskResult` holds (a substring test, as the load generator's).
const TASK_ANSWER: &str = "\"resultType\":\"task\"";

/// What a `tasks/get` of a completed task holds.
const COMPLETE_ANSWER: &str = "\"resultType\":\"complete\"";

/// Sends the instant it is dropped: when a task's work ended, seen from inside it.
struct SeenOnDrop(Option<tokio::sync::oneshot::Sender<Instant>>);

impl Drop for SeenOnDrop {
    fn drop(&mut self) {
        if let Some(seen) = self.0.take() {
            let _ = seen.send(Instant::now());
        }
    }
}

/// Everything the phases share.
struct Bench {
    docket: DocketServer,
    peer: PeerServer,
    /// The store the Docket app runs on (the same pool), for direct calls.
    store: Arc<dyn TaskStore>,
    /// The same store as itself, for how many calls its statements carried.
    pg: Arc<PgStore>,
    probe: Arc<PgProbe>,
    meter: CpuMeter,
    create: Prepared,
    clients: usize,
    round: Duration,
    /// Tasks created on the rmcp peer so far: all of them are still in its map,
    /// since the run is shorter than its retention.
    peer_created: AtomicUsize,
}

/// `tasks/get` calls handed to the service in process for the MCP-work measurement.
const WORK_CALLS: u32 = 50_000;

/// Runs every phase and returns the numbers, on `database_url` when given, else
/// on a fresh schema of `test_server`.
pub(crate) async fn run(
    args: &Args,
    database_url: Option<String>,
    test_server: &PostgresServer,
) -> anyhow::Result<Results> {
    ensure!(
        args.samples >= LATENCY_ROUNDS,
        "--samples must be at least {LATENCY_ROUNDS}"
    );
    let load_before = system::load_average();
    let started_at = time::OffsetDateTime::now_utc();
    let Setup {
        bench,
        url,
        options,
        database,
        config,
        pool_size,
        postgres_version,
        _schema,
    } = Setup::new(args, database_url, test_server).await?;

    eprintln!("warming up ({WARMUP_CALLS} calls per path)");
    bench.warm_up().await?;
    eprintln!(
        "create latency ({} sequential calls per path)",
        args.samples
    );
    let (latency, docket_ids, peer_ids) = bench.latency(args.samples).await?;
    eprintln!("tasks/get throughput ({} clients)", args.clients);
    let get_throughput = bench.get_throughput(&docket_ids, &peer_ids).await?;
    eprintln!("tasks/get MCP work in process ({WORK_CALLS} calls)");
    let mcp_work = crate::work::measure(WORK_CALLS).await?;
    eprintln!("create throughput ({} clients)", args.clients);
    let create_throughput = bench.create_throughput().await?;
    eprintln!("cross-replica cancel ({CANCEL_SAMPLES} cancels, as many NOTIFY round trips)");
    let cancel = bench.cross_replica_cancel(&url, &options).await?;
    eprintln!(
        "followers ({FOLLOWER_SAMPLES} task ends heard on another replica, by listening and by polling)"
    );
    let follower = bench
        .follower(&url, &options, config.tasks.poll_interval_ms)
        .await?;
    eprintln!(
        "embedded default: create and get on SQLite ({} sequential calls per path)",
        args.samples
    );
    let embedded = bench.embedded(args.samples).await?;
    eprintln!("heartbeat (up to {} running tasks)", args.heartbeat_tasks);
    let heartbeat = bench
        .heartbeat(
            args.heartbeat_tasks,
            Duration::from_secs(args.heartbeat_seconds),
            pool_size,
        )
        .await?;

    let heartbeat_interval = config.tasks.heartbeat_interval;
    bench.docket.stop().await?;
    bench.peer.stop().await?;

    Ok(Results {
        context: RunContext {
            machine: Machine::read(),
            postgres_version,
            database,
            commit: args.commit.clone(),
            toolchain: args.toolchain.clone(),
            started_at,
            duration: (time::OffsetDateTime::now_utc() - started_at).unsigned_abs(),
            load_before,
            load_after: system::load_average(),
            samples: args.samples,
            clients: args.clients,
            seconds_per_path: args.seconds,
            pool_size,
            heartbeat_interval,
        },
        latency,
        get_throughput,
        mcp_work,
        create_throughput,
        cancel,
        follower,
        embedded,
        heartbeat,
    })
}

/// What the tasks suite runs against: both servers, the store and the probe on a
/// fresh schema (dropped with `_schema`).
struct Setup {
    bench: Bench,
    url: String,
    options: ConnectOptions,
    database: String,
    config: Config,
    pool_size: usize,
    postgres_version: String,
    _schema: Option<TestDatabase>,
}

impl Setup {
    async fn new(
        args: &Args,
        database_url: Option<String>,
        test_server: &PostgresServer,
    ) -> anyhow::Result<Self> {
        ensure!(args.clients > 0, "--clients must be at least 1");
        ensure!(args.seconds > 0, "--seconds must be at least 1");
        // The database: a fresh schema unless one was named. `_schema` drops it at the end.
        let (url, database, _schema) = match database_url {
            Some(url) => (url, format!("{} (as given)", crate::DATABASE_URL_VAR), None),
            None => {
                let schema = TestDatabase::postgres(test_server).await.context(
                    "PostgreSQL is not reachable; start it or set DOCKET_TEST_DATABASE_URL or DOCKET_BENCH_DATABASE_URL",
                )?;
                (
                    schema.url().to_owned(),
                    "a fresh schema on the test server".to_owned(),
                    Some(schema),
                )
            }
        };
        // Tagged, so the CPU of this run's server backends can be found.
        let url = system::with_application_name(&url);
        // The server's default pool size, for the store and the probe alike.
        let config = Config::default();
        let pool_size = usize::try_from(config.database.max_connections).unwrap_or(16);
        let options = ConnectOptions {
            max_connections: pool_size,
            migrate: true,
        };
        let opened = docket_storage::connect(&url, options.clone())
            .await
            .context("cannot open the store")?;
        let Store::Postgres(pg) = &opened else {
            bail!("the benchmark needs PostgreSQL");
        };
        let pg = Arc::clone(pg);
        let store = opened.task_store();
        let probe = Arc::new(
            PgProbe::connect(&url, &options)
                .await
                .context("cannot open the probe's pool")?,
        );
        let postgres_version = probe.server_version().await?;

        let gate = Gate::new();
        let bench = Bench {
            docket: DocketServer::start(&opened, gate.clone()).await?,
            peer: PeerServer::start(gate).await?,
            store,
            pg,
            meter: CpuMeter::new(Arc::clone(&probe)),
            probe,
            create: load::create_request()?,
            clients: args.clients,
            round: Duration::from_secs(args.seconds) / THROUGHPUT_ROUNDS,
            peer_created: AtomicUsize::new(0),
        };
        eprintln!(
            "docket on {}, rmcp on {}, PostgreSQL {postgres_version}",
            bench.docket.url(),
            bench.peer.url()
        );
        Ok(Self {
            bench,
            url,
            options,
            database,
            config,
            pool_size,
            postgres_version,
            _schema,
        })
    }
}

/// Which of Docket's task paths [`load_alone`] drives.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Load {
    /// `tasks/get` of completed tasks.
    Get,
    /// Task-creating `tools/call`s (their tasks held until the end).
    Create,
    /// Bare INSERTs: the create's baseline alone.
    Insert,
    /// The bare primary-key SELECTs of the same tasks: the get's baseline alone.
    Select,
    /// `TaskStore::get` of the same tasks, no HTTP and no MCP.
    StoreGet,
    /// The same `tasks/get` requests handed to Docket's service in process.
    ServiceGet,
    /// The same `tasks/get` requests answered with Docket's bytes by a listener
    /// doing nothing else.
    EchoGet,
}

/// One of Docket's task paths alone, `--seconds` long, from the tasks suite's
/// clients: for a profiler to watch.
pub(crate) async fn load_alone(
    load: Load,
    args: &Args,
    database_url: Option<String>,
    test_server: &PostgresServer,
) -> anyhow::Result<()> {
    let setup = Setup::new(args, database_url, test_server).await?;
    let mut bench = setup.bench;
    bench.warm_up().await?;
    let duration = Duration::from_secs(args.seconds);
    // The paths measured beside a get run one round each, as long as the load.
    bench.round = duration;
    eprintln!(
        "{load:?} load alone: {} clients for {} s (pid {})",
        args.clients,
        args.seconds,
        std::process::id()
    );
    let samples = match load {
        Load::Create => {
            eprintln!("measuring");
            bench.http_creates(&bench.docket.url(), duration).await?
        }
        Load::Insert => {
            eprintln!("measuring");
            let samples = bench.bare_inserts().await?;
            bench.probe.delete_rows().await?;
            samples
        }
        Load::Get | Load::Select | Load::StoreGet | Load::ServiceGet | Load::EchoGet => {
            bench.gets_alone(load, args.samples, duration).await?
        }
    };
    let (process, postgres) = samples.cpu_per_call();
    println!(
        "{load:?}: {:.0}/s, CPU per call {:.1} µs in this process, {:.1} µs in PostgreSQL",
        samples.rate(),
        process.as_secs_f64() * 1e6,
        postgres.as_secs_f64() * 1e6
    );
    bench.docket.stop().await?;
    bench.peer.stop().await?;
    Ok(())
}

/// A `tasks/get` request for each task.
fn get_requests(ids: &[String]) -> anyhow::Result<Arc<Vec<Prepared>>> {
    Ok(Arc::new(
        ids.iter()
            .map(|id| load::get_request(id))
            .collect::<anyhow::Result<_>>()?,
    ))
}

/// Adds to `total` the calls and statements from `before` to `after`.
fn add_since(total: &mut SharedStatements, before: SharedStatements, after: SharedStatements) {
    total.calls += after.calls.saturating_sub(before.calls);
    total.statements += after.statements.saturating_sub(before.statements);
}

/// The tasks' ids as the store reads them.
fn stored_ids(ids: &[String]) -> Arc<Vec<TaskId>> {
    Arc::new(
        ids.iter()
            .map(|id| TaskId::from_stored(id.clone()))
            .collect(),
    )
}

impl Bench {
    /// One of the get paths alone for `duration`, over the tasks the latency phase
    /// creates (completed, as the tasks suite reads them).
    async fn gets_alone(
        &self,
        load: Load,
        samples: usize,
        duration: Duration,
    ) -> anyhow::Result<Samples> {
        let (_, docket_ids, _) = self.latency(samples).await?;
        let requests = get_requests(&docket_ids)?;
        let task_ids = stored_ids(&docket_ids);
        // The echo listener answers with Docket's answer, so it starts after Docket gave one.
        let echo = match load {
            Load::EchoGet => {
                Some(EchoServer::start(self.docket_client()?.answer(&requests[0]).await?).await?)
            }
            _ => None,
        };
        let url = echo
            .as_ref()
            .map_or_else(|| self.docket.url(), EchoServer::url);
        eprintln!("measuring");
        match load {
            Load::Select => self.bare_selects(&task_ids).await,
            Load::StoreGet => self.store_gets(&task_ids).await,
            Load::ServiceGet => self.service_gets(&requests).await,
            // `Get` on Docket's listener, `EchoGet` on the echo's.
            _ => self.http_gets(&url, &requests, duration).await,
        }
    }

    fn docket_client(&self) -> anyhow::Result<McpClient> {
        McpClient::new(&self.docket.url())
    }

    fn peer_client(&self) -> anyhow::Result<McpClient> {
        McpClient::new(&self.peer.url())
    }

    async fn warm_up(&self) -> anyhow::Result<()> {
        let docket = self.docket_client()?;
        let peer = self.peer_client()?;
        let replica = self.docket.app.replica_id().to_owned();
        let mut direct = Vec::new();
        for _ in 0..WARMUP_CALLS {
            let id = docket.create(&self.create).await?;
            docket
                .expect(&load::get_request(&id)?, ResultType::Complete)
                .await?;
            let id = peer.create(&self.create).await?;
            self.peer_created.fetch_add(1, Ordering::Relaxed);
            peer.expect(&load::get_request(&id)?, ResultType::Complete)
                .await?;
            let id = self.probe.insert_row().await?;
            ensure!(self.probe.select_by_id(&id).await?, "a probe row vanished");
            self.probe.insert_row_unprepared().await?;
            docket.health().await?;
            let record = self.store.create(new_task(&replica)?).await?;
            self.store.get(&record.id).await?;
            direct.push(record.id);
        }
        self.settle(&direct).await
    }

    /// Ends everything the last measurement left: held tasks on both servers,
    /// tasks created on the store directly, and the probe's rows (before the
    /// stale-task sweep would fail them as a vanished replica's).
    async fn settle(&self, direct: &[TaskId]) -> anyhow::Result<()> {
        self.docket.release_all().await?;
        self.peer.release_all().await?;
        let store = &self.store;
        futures_util::stream::iter(direct)
            .map(|id| async move {
                store
                    .finish(id, Outcome::Completed(json!({ "structuredContent": {} })))
                    .await
            })
            .buffer_unordered(8)
            .try_collect::<Vec<_>>()
            .await?;
        self.probe.delete_rows().await?;
        Ok(())
    }

    /// Sequential create latency on every path; returns the ids created over
    /// HTTP on each server, for the `tasks/get` measurement.
    async fn latency(&self, samples: usize) -> anyhow::Result<(Latency, Vec<String>, Vec<String>)> {
        let docket = self.docket_client()?;
        let peer = self.peer_client()?;
        let replica = self.docket.app.replica_id().to_owned();
        let per_round = samples / LATENCY_ROUNDS;
        let mut latency = Latency::default();
        let (mut docket_ids, mut peer_ids) = (Vec::new(), Vec::new());
        for _ in 0..LATENCY_ROUNDS {
            let (samples, ids) =
                load::sequential(&self.meter, per_round, |_| docket.create(&self.create)).await?;
            latency.docket.merge(samples);
            docket_ids.extend(ids);

            let service = self.docket.app.service();
            let (samples, _) = load::sequential(&self.meter, per_round, |_| {
                crate::work::answered(
                    &mut service.clone(),
                    &self.create,
                    "tools/call",
                    TASK_ANSWER,
                )
            })
            .await?;
            latency.service_create.merge(samples);

            let (samples, ids) =
                load::sequential(&self.meter, per_round, |_| peer.create(&self.create)).await?;
            latency.rmcp.merge(samples);
            self.peer_created.fetch_add(ids.len(), Ordering::Relaxed);
            peer_ids.extend(ids);

            let (samples, _) = load::sequential(&self.meter, per_round, |_| async {
                Ok(self.probe.insert_row().await?)
            })
            .await?;
            latency.bare_insert.merge(samples);

            let (samples, _) = load::sequential(&self.meter, per_round, |_| async {
                Ok(self.probe.insert_row_unprepared().await?)
            })
            .await?;
            latency.bare_insert_unprepared.merge(samples);

            let (samples, records) = load::sequential(&self.meter, per_round, |_| async {
                Ok(self.store.create(new_task(&replica)?).await?)
            })
            .await?;
            latency.store_create.merge(samples);

            let (samples, _) =
                load::sequential(&self.meter, per_round, |_| self.docket.start_like_a_call())
                    .await?;
            latency.runtime_spawn.merge(samples);

            let (samples, _) =
                load::sequential(&self.meter, per_round, |_| docket.health()).await?;
            latency.http_floor.merge(samples);
            let direct: Vec<TaskId> = records.into_iter().map(|record| record.id).collect();
            // Ended after every round, so the heartbeat never stamps more than one
            // round's tasks while latency is measured.
            self.settle(&direct).await?;
        }
        Ok((latency, docket_ids, peer_ids))
    }

    /// `tasks/get` with concurrent keep-alive clients against bare primary-key
    /// SELECTs (and the store's own read) with as many concurrent tasks on the
    /// pool. Every path reads the same completed tasks, spread over the clients.
    async fn get_throughput(
        &self,
        docket_ids: &[String],
        peer_ids: &[String],
    ) -> anyhow::Result<GetThroughput> {
        ensure!(
            !docket_ids.is_empty() && !peer_ids.is_empty(),
            "no tasks to read"
        );
        let docket_requests = get_requests(docket_ids)?;
        let peer_requests = get_requests(peer_ids)?;
        let task_ids = stored_ids(docket_ids);
        // The same requests answered with Docket's answer, byte for byte, by a listener
        // that does nothing else.
        let answer = self.docket_client()?.answer(&docket_requests[0]).await?;
        let echo = EchoServer::start(answer).await?;
        let mut result = GetThroughput {
            tasks: docket_ids.len(),
            ..GetThroughput::default()
        };
        for _ in 0..THROUGHPUT_ROUNDS {
            let before = self.pg.shared_reads();
            result.docket.merge(
                self.http_gets(&self.docket.url(), &docket_requests, self.round)
                    .await?,
            );
            add_since(&mut result.docket_shared, before, self.pg.shared_reads());
            result.rmcp.merge(
                self.http_gets(&self.peer.url(), &peer_requests, self.round)
                    .await?,
            );
            result
                .bare_select
                .merge(self.bare_selects(&task_ids).await?);
            let before = self.pg.shared_reads();
            result.store_get.merge(self.store_gets(&task_ids).await?);
            add_since(&mut result.store_shared, before, self.pg.shared_reads());
            result
                .service_get
                .merge(self.service_gets(&docket_requests).await?);
            result.http_floor.merge(self.http_floor().await?);
            result.same_size_floor.merge(
                self.http_gets(&echo.url(), &docket_requests, self.round)
                    .await?,
            );
        }
        Ok(result)
    }

    /// `tasks/get` from as many keep-alive clients for `duration`; each client
    /// cycles through the requests from its own starting point.
    async fn http_gets(
        &self,
        url: &str,
        requests: &Arc<Vec<Prepared>>,
        duration: Duration,
    ) -> anyhow::Result<Samples> {
        let mut workers = Vec::new();
        for client_index in 0..self.clients {
            let client = McpClient::new(url)?;
            let requests = Arc::clone(requests);
            let offset = client_index * requests.len() / self.clients;
            workers.push(move |round: u64| {
                let client = client.clone();
                let requests = Arc::clone(&requests);
                async move {
                    let index = (offset + round as usize) % requests.len();
                    client.expect(&requests[index], ResultType::Complete).await
                }
            });
        }
        load::concurrent(&self.meter, workers, duration).await
    }

    /// `GET /healthz` from as many keep-alive clients.
    async fn http_floor(&self) -> anyhow::Result<Samples> {
        let mut workers = Vec::new();
        for _ in 0..self.clients {
            let client = self.docket_client()?;
            workers.push(move |_round: u64| {
                let client = client.clone();
                async move { client.health().await }
            });
        }
        load::concurrent(&self.meter, workers, self.round).await
    }

    async fn bare_selects(&self, ids: &Arc<Vec<TaskId>>) -> anyhow::Result<Samples> {
        let workers = (0..self.clients).map(|client_index| {
            let probe = Arc::clone(&self.probe);
            let ids = Arc::clone(ids);
            let offset = client_index * ids.len() / self.clients;
            move |round: u64| {
                let probe = Arc::clone(&probe);
                let ids = Arc::clone(&ids);
                async move {
                    let id = &ids[(offset + round as usize) % ids.len()];
                    ensure!(probe.select_by_id(id).await?, "task {id} not found");
                    Ok(())
                }
            }
        });
        load::concurrent(&self.meter, workers, self.round).await
    }

    /// The same `tasks/get` requests handed to Docket's service in process, from as
    /// many concurrent tasks: everything but the HTTP exchange.
    async fn service_gets(&self, requests: &Arc<Vec<Prepared>>) -> anyhow::Result<Samples> {
        let workers = (0..self.clients).map(|client_index| {
            let service = self.docket.app.service();
            let requests = Arc::clone(requests);
            let offset = client_index * requests.len() / self.clients;
            move |round: u64| {
                let request = &requests[(offset + round as usize) % requests.len()];
                crate::work::answered(&mut service.clone(), request, "tasks/get", COMPLETE_ANSWER)
            }
        });
        load::concurrent(&self.meter, workers, self.round).await
    }

    async fn store_gets(&self, ids: &Arc<Vec<TaskId>>) -> anyhow::Result<Samples> {
        let workers = (0..self.clients).map(|client_index| {
            let store = Arc::clone(&self.store);
            let ids = Arc::clone(ids);
            let offset = client_index * ids.len() / self.clients;
            move |round: u64| {
                let store = Arc::clone(&store);
                let ids = Arc::clone(&ids);
                async move {
                    let id = &ids[(offset + round as usize) % ids.len()];
                    ensure!(store.get(id).await?.is_some(), "task {id} not found");
                    Ok(())
                }
            }
        });
        load::concurrent(&self.meter, workers, self.round).await
    }

    /// Creates with concurrent clients on each server, and bare INSERTs with as
    /// many concurrent tasks on the pool. Each round's tasks are released and
    /// ended before the next round. Nothing is emptied between rounds: Docket's
    /// table keeps its rows and rmcp's manager keeps its tasks (for 2 × its
    /// 5-minute TTL), as each would in service.
    async fn create_throughput(&self) -> anyhow::Result<CreateThroughput> {
        let mut result = CreateThroughput {
            rmcp_tasks_before: self.peer_created.load(Ordering::Relaxed),
            ..CreateThroughput::default()
        };
        for _ in 0..THROUGHPUT_ROUNDS {
            let before = self.pg.shared_creates();
            result
                .docket
                .merge(self.http_creates(&self.docket.url(), self.round).await?);
            add_since(&mut result.docket_shared, before, self.pg.shared_creates());
            self.docket.release_all().await?;

            let samples = self.http_creates(&self.peer.url(), self.round).await?;
            self.peer_created
                .fetch_add(samples.latencies.len(), Ordering::Relaxed);
            result.rmcp.merge(samples);
            self.peer.release_all().await?;

            result.bare_insert.merge(self.bare_inserts().await?);
            self.probe.delete_rows().await?;
        }
        result.rmcp_tasks_after = self.peer_created.load(Ordering::Relaxed);
        Ok(result)
    }

    /// Bare INSERTs, each committing on its own, from as many concurrent tasks on
    /// the pool.
    async fn bare_inserts(&self) -> anyhow::Result<Samples> {
        let workers = (0..self.clients).map(|_| {
            let probe = Arc::clone(&self.probe);
            move |_round: u64| {
                let probe = Arc::clone(&probe);
                async move {
                    probe.insert_row().await?;
                    Ok(())
                }
            }
        });
        load::concurrent(&self.meter, workers, self.round).await
    }

    /// Task-creating calls from as many keep-alive clients for `duration`.
    async fn http_creates(&self, url: &str, duration: Duration) -> anyhow::Result<Samples> {
        let mut workers = Vec::new();
        for _ in 0..self.clients {
            let client = McpClient::new(url)?;
            let create = self.create.clone();
            workers.push(move |_round: u64| {
                let client = client.clone();
                let create = create.clone();
                async move { client.expect(&create, ResultType::Task).await }
            });
        }
        load::concurrent(&self.meter, workers, duration).await
    }

    /// Waits until half an interval after a heartbeat was sent, so a window of
    /// whole intervals that starts now holds exactly one beat per interval. With
    /// nothing running no beat comes, and it returns after two intervals.
    async fn between_beats(&self, interval: Duration) {
        let sent = self.docket.store.counts().heartbeats;
        let deadline = Instant::now() + 2 * interval;
        while self.docket.store.counts().heartbeats == sent && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(interval / 2).await;
    }

    /// Cancels a task running here through a second replica's store (its own
    /// pool, as `tasks/cancel` on another replica writes it) and times how long
    /// until the work sees the cancel, round by round beside the bare NOTIFY
    /// round trip that carries it.
    async fn cross_replica_cancel(
        &self,
        url: &str,
        options: &ConnectOptions,
    ) -> anyhow::Result<CrossReplicaCancel> {
        let replica_b = docket_storage::connect(url, options.clone())
            .await
            .context("cannot open replica B's store")?
            .task_store();
        let runtime = self.docket.runtime()?;
        let per_round = CANCEL_SAMPLES / LATENCY_ROUNDS;
        let mut result = CrossReplicaCancel::default();
        for _ in 0..LATENCY_ROUNDS {
            for _ in 0..per_round {
                let (seen, observed) = tokio::sync::oneshot::channel();
                let record = runtime
                    .spawn(
                        new_task(self.docket.app.replica_id())?,
                        move |context| async move {
                            // The runtime may drop the work at its cancel rather
                            // than let it see the token: either way the guard goes.
                            let _seen = SeenOnDrop(Some(seen));
                            context.cancelled().cancelled().await;
                            Outcome::Cancelled
                        },
                    )
                    .await
                    .context("could not start a task")?;
                let asked = Instant::now();
                replica_b
                    .request_cancel(&record.id)
                    .await
                    .context("replica B could not record the cancel")?;
                let seen_at = tokio::time::timeout(Duration::from_secs(10), observed)
                    .await
                    .context("the work did not see the cancel within 10 s")?
                    .context("the work ended without a word")?;
                result.cancel.push(seen_at.duration_since(asked));
            }
            result
                .notify
                .extend(self.probe.notify_latencies(per_round).await?);
        }
        Ok(result)
    }

    /// Ends a task running on replica A and times how long until a follower on
    /// replica B (a second Docket app on the same database) learns of it: one that
    /// holds a `subscriptions/listen` stream open, and one that polls `tasks/get`
    /// every `poll_interval_ms`, started at a random point of its cycle.
    async fn follower(
        &self,
        url: &str,
        options: &ConnectOptions,
        poll_interval_ms: u64,
    ) -> anyhow::Result<Follower> {
        let store_b = docket_storage::connect(url, options.clone())
            .await
            .context("cannot open replica B's store")?;
        let replica_b = DocketServer::start(&store_b, Gate::new()).await?;
        let client = McpClient::new(&replica_b.url())?;
        let runtime = self.docket.runtime()?;
        let poll = Duration::from_millis(poll_interval_ms);
        let mut result = Follower {
            poll_interval: poll,
            ..Follower::default()
        };
        for _ in 0..FOLLOWER_SAMPLES {
            let (release, released) = tokio::sync::oneshot::channel::<()>();
            let record = runtime
                .spawn(
                    new_task(self.docket.app.replica_id())?,
                    move |_context| async move {
                        let _ = released.await;
                        Outcome::Completed(json!({"content": []}))
                    },
                )
                .await
                .context("could not start a task")?;
            let id = record.id.as_str().to_owned();
            let mut listening = client.open(&load::listen_request(&id)?).await?;
            let mut pending = String::new();
            // The acknowledgement and the task as it is: the stream is live.
            read_stream_until(&mut listening, &mut pending, |message| {
                message["method"] == "notifications/tasks"
            })
            .await?;
            let poller = {
                let (client, get) = (client.clone(), load::get_request(&id)?);
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(poll).await;
                        let message = client.call(&get).await?;
                        if message["result"]["status"] == "completed" {
                            return anyhow::Ok(Instant::now());
                        }
                    }
                })
            };
            // The end lands at a random point of the poller's cycle.
            let mut random = [0u8; 4];
            getrandom::fill(&mut random).context("the OS random source failed")?;
            let phase = f64::from(u32::from_le_bytes(random)) / f64::from(u32::MAX);
            tokio::time::sleep(poll.mul_f64(phase)).await;
            let ended = Instant::now();
            let _ = release.send(());
            let heard = tokio::time::timeout(
                Duration::from_secs(10),
                read_stream_until(&mut listening, &mut pending, |message| {
                    message["method"] == "notifications/tasks"
                        && message["params"]["status"] == "completed"
                }),
            )
            .await
            .context("the listener did not hear the end within 10 s")??;
            result.listen.push(heard.duration_since(ended));
            let seen = tokio::time::timeout(poll * 3, poller)
                .await
                .context("the poller did not see the end within three polls")?
                .context("the poller failed")??;
            result.poll.push(seen.duration_since(ended));
        }
        replica_b.stop().await?;
        Ok(result)
    }

    /// The embedded default: a second Docket app on a fresh SQLite file (the
    /// store's own setup: WAL, `synchronous = FULL`), create and get over HTTP
    /// and through the store, against a bare INSERT and SELECT on a connection
    /// set up like the store's writer, sequentially, in alternating rounds.
    async fn embedded(&self, samples: usize) -> anyhow::Result<Embedded> {
        let database = TestDatabase::sqlite().await;
        let opened = docket_storage::connect(database.url(), ConnectOptions::default())
            .await
            .context("cannot open the SQLite store")?;
        let store = opened.task_store();
        let path = database
            .url()
            .strip_prefix("sqlite://")
            .context("the SQLite test database has no file path")?;
        let probe = SqliteProbe::connect(std::path::Path::new(path))
            .await
            .context("cannot open the SQLite probe")?;
        let server = DocketServer::start(&opened, Gate::new()).await?;
        let client = McpClient::new(&server.url())?;
        let replica = server.app.replica_id().to_owned();
        let per_round = samples / LATENCY_ROUNDS;
        let mut embedded = Embedded::default();
        let (mut over_http, mut direct, mut bare) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..LATENCY_ROUNDS {
            let (round, ids) =
                load::sequential(&self.meter, per_round, |_| client.create(&self.create)).await?;
            embedded.http_create.merge(round);
            over_http.extend(ids);
            let (round, records) = load::sequential(&self.meter, per_round, |_| async {
                Ok(store.create(new_task(&replica)?).await?)
            })
            .await?;
            embedded.store_create.merge(round);
            direct.extend(records.into_iter().map(|record| record.id));
            let (round, ids) = load::sequential(&self.meter, per_round, |_| async {
                Ok(probe.insert_row().await?)
            })
            .await?;
            embedded.bare_insert.merge(round);
            bare.extend(ids);
        }
        let gets = over_http
            .iter()
            .map(|id| load::get_request(id))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for round in 0..LATENCY_ROUNDS {
            let pick = |index: usize| round * per_round + index;
            let (samples, _) = load::sequential(&self.meter, per_round, |index| {
                client.call(&gets[pick(index) % gets.len()])
            })
            .await?;
            embedded.http_get.merge(samples);
            let (samples, _) = load::sequential(&self.meter, per_round, |index| {
                let id = &direct[pick(index) % direct.len()];
                async { Ok(store.get(id).await?) }
            })
            .await?;
            embedded.store_get.merge(samples);
            let (samples, _) = load::sequential(&self.meter, per_round, |index| {
                let id = &bare[pick(index) % bare.len()];
                async { Ok(probe.select_by_id(id).await?) }
            })
            .await?;
            embedded.bare_select.merge(samples);
        }
        server.stop().await?;
        Ok(embedded)
    }

    /// Fills the replica with held tasks and watches its heartbeat: statements,
    /// their time, and the CPU this process and PostgreSQL spend, at a few task
    /// counts up to `most`.
    async fn heartbeat(
        &self,
        most: usize,
        window: Duration,
        pool_size: usize,
    ) -> anyhow::Result<Heartbeat> {
        let runtime = self.docket.runtime()?;
        let interval = runtime.config().heartbeat_interval;
        let mut counts: Vec<(usize, Duration)> = SMALLER_HEARTBEAT_COUNTS
            .iter()
            .filter(|count| **count < most)
            .map(|count| (*count, SMALLER_HEARTBEAT_WINDOW))
            .collect();
        counts.push((most, window));
        let mut heartbeat = Heartbeat::default();
        for (target, window) in counts {
            let missing = target.saturating_sub(runtime.running_count());
            let filling = Instant::now();
            futures_util::stream::iter(0..missing)
                .map(|_| self.docket.spawn_held())
                .buffer_unordered(pool_size)
                .try_collect::<Vec<_>>()
                .await?;
            let fill_time = filling.elapsed();
            // One full interval first, so every beat in the window covers them all.
            tokio::time::sleep(interval + Duration::from_millis(100)).await;
            self.between_beats(interval).await;
            let running = runtime.running_count();
            let counts_before = self.docket.store.counts();
            let reading = self.meter.start().await?;
            let started = Instant::now();
            tokio::time::sleep(window).await;
            let wall = started.elapsed();
            let cpu = reading.stop().await?;
            heartbeat.windows.push(HeartbeatWindow {
                running,
                fill_time,
                wall,
                counts: self.docket.store.counts() - counts_before,
                process_cpu: cpu.process,
                postgres_cpu: cpu.postgres,
            });
        }
        heartbeat.timed_beat_tasks = runtime.running_count();
        for _ in 0..TIMED_BEATS {
            // Between two of the loop's beats: two beats at once would queue on
            // each other's row locks and time the wait, not the beat.
            self.between_beats(interval).await;
            let started = Instant::now();
            runtime.beat().await.context("a heartbeat failed")?;
            heartbeat.timed_beats.push(started.elapsed());
        }
        self.docket.release_all().await?;
        Ok(heartbeat)
    }
}

/// Reads SSE events from `response` (keeping a partial one in `pending`) until a
/// message `wanted` says is the one; when it was read.
pub(crate) async fn read_stream_until(
    response: &mut reqwest::Response,
    pending: &mut String,
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> anyhow::Result<Instant> {
    loop {
        while let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            let found = event
                .lines()
                .filter_map(|line| line.strip_prefix("data:"))
                .filter_map(|data| serde_json::from_str::<serde_json::Value>(data.trim()).ok())
                .any(|message| wanted(&message));
            if found {
                return Ok(Instant::now());
            }
        }
        let chunk = response
            .chunk()
            .await
            .context("the listen stream failed")?
            .context("the listen stream ended")?;
        pending.push_str(&String::from_utf8_lossy(&chunk));
    }
}
