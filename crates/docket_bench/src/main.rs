//! `docket_bench`: the benchmarks behind `cargo xtask bench` (docs/design.md, Testing and
//! Performance).
//!
//! One process starts a Docket server on a fresh PostgreSQL schema, an rmcp 3.11
//! server with its in-memory task manager, and a load generator that sends both
//! the very same requests. Every number is reported next to a baseline measured
//! in the same run — bare SQL through a pool set up as the store's, and the
//! in-memory peer — so the ratios mean something on whatever machine runs it.
//! Targets are reported, never asserted: a benchmark is not a timed test.
//!
//! The export suite (`exports`) serves a real `docket serve` process (the binary
//! named by `--docket-bin`) a million-row `trino_export` from the Trino double,
//! against the raw page fetch, and watches the server's resident memory.
//!
//! The script suite (`scripts`) starts runs on two run bridges on SQLite, one
//! evaluating in process and one in `docket script-child` processes, and times
//! queue → first call and one `platform.call`'s round trip.
//!
//! The flood suite (`flood`) floods a `docket serve` process with reads, half-open
//! sockets and task creations and compares its footprint before and after.
//!
//! The tracing suite (`overhead`) serves three apps that differ only in their telemetry
//! (off, OTLP on but unsampled, OTLP on and exported to a real OTLP receiver) the same
//! `tools/call` and `tasks/get` load, and reports each against off.
//!
//! The work suite (`work`) hands `tasks/get` and a task-creating `tools/call` to the
//! service in process, over an in-memory store, and reports the MCP work of one call
//! with nothing else measured.
//!
//! `get-load` and `create-load` drive one of Docket's task paths alone, with the tasks
//! suite's clients, for `--seconds`, so a profiler (`perf record -a`) sees that path
//! and nothing else; they print its rate and CPU per call and write no report.
//! `insert-load` does the same for the create's baseline, the bare INSERT, and
//! `select-load`, `store-get-load`, `service-get-load` and `echo-get-load` for what the
//! get is measured beside: the bare SELECT, the store's read, the service in process
//! and an exchange of the get's size, so two profiles can be compared.
//!
//! The scale suite (`scale`, not part of `all`) measures how each cost grows with the
//! work: curves over table sizes, expired backlogs, followers, queued runs and replicas.
//!
//! Usage: `docket_bench [--suite all|tasks|exports|scripts|flood|overhead|work|scale|get-load|create-load|insert-load|
//! select-load|store-get-load|service-get-load|echo-get-load] [--output FILE] [--commit SHA]
//! [--toolchain TEXT] [--samples N] [--clients N] [--seconds S]
//! [--heartbeat-tasks N] [--heartbeat-seconds S] [--docket-bin PATH]
//! [--export-rounds N] [--work-calls N] [--overhead-samples N] [--overhead-seconds S]`. PostgreSQL comes from `DOCKET_BENCH_DATABASE_URL`
//! (used as is, migrated), or else a fresh schema on the test server
//! (`DOCKET_TEST_DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/test`).

mod counting;
mod docket;
mod echo;
mod exports;
mod flood;
mod gate;
mod load;
mod overhead;
mod peer;
mod phases;
mod report;
mod scale;
mod scripts;
mod system;
mod work;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use docket_storage::test_db::PostgresServer;

/// The variable naming a database to benchmark on instead of a fresh test schema.
const DATABASE_URL_VAR: &str = "DOCKET_BENCH_DATABASE_URL";

/// What to measure and where to write it.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "docket_bench",
    about = "Docket's task paths against bare SQL and rmcp's in-memory task manager"
)]
pub(crate) struct Args {
    /// Write the Markdown report into this file (between its generated-section
    /// markers; the rest of the file is kept).
    #[arg(long)]
    output: Option<PathBuf>,
    /// The commit being measured, for the report.
    #[arg(long, default_value = "unknown")]
    commit: String,
    /// The compiler that built this binary, for the report.
    #[arg(long, default_value = "unknown")]
    toolchain: String,
    /// Sequential calls per path for the latency percentiles.
    #[arg(long, default_value_t = 2000)]
    samples: usize,
    /// Concurrent clients (or tasks, for the SQL baselines) in the throughput runs.
    #[arg(long, default_value_t = 32)]
    clients: usize,
    /// Seconds each path is driven in each throughput measurement (split into
    /// rounds that alternate between the paths).
    #[arg(long, default_value_t = 6)]
    seconds: u64,
    /// Running tasks on the replica for the heartbeat measurement.
    #[arg(long, default_value_t = 10_000)]
    heartbeat_tasks: usize,
    /// Seconds the heartbeat is watched with that many tasks running.
    #[arg(long, default_value_t = 10)]
    heartbeat_seconds: u64,
    /// Which benchmarks to run.
    #[arg(long, value_enum, default_value_t = Suite::All)]
    suite: Suite,
    /// The `docket` binary the export benchmark serves with (build it in release
    /// mode; `cargo xtask bench` does).
    #[arg(long)]
    docket_bin: Option<PathBuf>,
    /// Rounds of the export benchmark (raw fetch, CSV, Parquet in each).
    #[arg(long, default_value_t = 3)]
    export_rounds: usize,
    /// Calls per loop of the work suite.
    #[arg(long, default_value_t = 50_000)]
    work_calls: u32,
    /// Sequential calls per operation and app in the tracing suite.
    #[arg(long, default_value_t = 1000)]
    overhead_samples: usize,
    /// Seconds each operation is driven per app in the tracing suite's throughput runs
    /// (from `--clients` clients).
    #[arg(long, default_value_t = 4)]
    overhead_seconds: u64,
    /// The scale suite's table sizes: rows in the task table (and the run table).
    #[arg(long, value_delimiter = ',', default_values_t = [10_000u64, 100_000, 1_000_000])]
    scale_rows: Vec<u64>,
    /// Expired rows of each kind the scale suite's retention pass deletes.
    #[arg(long, default_value_t = 100_000)]
    scale_expired: u64,
    /// The scale suite's follower counts: `subscriptions/listen` streams on one replica.
    #[arg(long, value_delimiter = ',', default_values_t = [100usize, 1_000, 10_000])]
    scale_followers: Vec<usize>,
    /// Queued runs the scale suite drains.
    #[arg(long, default_value_t = 1000)]
    scale_runs: usize,
    /// The most replicas the scale suite puts on one database.
    #[arg(long, default_value_t = 3)]
    scale_replicas: usize,
    /// Sequential calls per path for each of the scale suite's latency percentiles.
    #[arg(long, default_value_t = 2000)]
    scale_samples: usize,
    /// Seconds each path is driven per throughput measurement of the scale suite.
    #[arg(long, default_value_t = 2)]
    scale_seconds: u64,
    /// Create-latency runs in a row in the scale suite.
    #[arg(long, default_value_t = 5)]
    scale_latency_runs: usize,
    /// The scale suite's parts to run (all of them unless named).
    #[arg(long, value_enum, value_delimiter = ',')]
    scale_parts: Vec<scale::Part>,
}

/// The benchmark suites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Suite {
    /// Everything.
    All,
    /// The task paths against bare SQL and rmcp (needs PostgreSQL).
    Tasks,
    /// The million-row export against the raw page fetch, and the server's memory.
    Exports,
    /// Script runs in child processes against in-process evaluation: start latency and
    /// the cost of one `platform.call`.
    Scripts,
    /// Floods a `docket serve` process (reads, half-open sockets, task creations) and
    /// compares its memory and descriptors before and after.
    Flood,
    /// What tracing costs: the same `tools/call` and `tasks/get` load against apps with
    /// telemetry off, OTLP on but unsampled, and OTLP on and exported (needs PostgreSQL).
    Overhead,
    /// One `tasks/get`'s MCP work in process: no network, no database, no load
    /// generator (run it under callgrind for instruction counts).
    Work,
    /// How the cost grows with the work: table size, retention under load, followers,
    /// queued runs, replicas, and create latency runs in a row (needs PostgreSQL; not
    /// part of `all`).
    Scale,
    /// Docket's `tasks/get` load alone for `--seconds`, after the tasks suite's
    /// set-up, for a profiler to watch (`perf record -a` meanwhile); reports its
    /// rate and CPU per call, writes no report.
    GetLoad,
    /// Docket's task-creating `tools/call` load alone, as `get-load` does.
    CreateLoad,
    /// The create's baseline alone, as `create-load` runs Docket's: bare INSERTs
    /// from as many concurrent tasks on the pool.
    InsertLoad,
    /// The get's baseline alone, as `get-load` runs Docket's: bare primary-key SELECTs
    /// of the same tasks, from as many concurrent tasks on the pool.
    SelectLoad,
    /// `TaskStore::get` alone, as `select-load` runs the SELECTs.
    StoreGetLoad,
    /// The same `tasks/get` requests handed to Docket's service in process, alone.
    ServiceGetLoad,
    /// The same `tasks/get` requests answered with Docket's bytes by a listener doing
    /// nothing else, alone.
    EchoGetLoad,
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("docket_bench: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    if let Some(load) = match args.suite {
        Suite::GetLoad => Some(phases::Load::Get),
        Suite::CreateLoad => Some(phases::Load::Create),
        Suite::InsertLoad => Some(phases::Load::Insert),
        Suite::SelectLoad => Some(phases::Load::Select),
        Suite::StoreGetLoad => Some(phases::Load::StoreGet),
        Suite::ServiceGetLoad => Some(phases::Load::ServiceGet),
        Suite::EchoGetLoad => Some(phases::Load::EchoGet),
        _ => None,
    } {
        let database_url = std::env::var(DATABASE_URL_VAR).ok();
        let test_server = PostgresServer::from_lookup(|name| std::env::var(name).ok());
        runtime.block_on(phases::load_alone(load, &args, database_url, &test_server))?;
        return Ok(());
    }
    if matches!(args.suite, Suite::All | Suite::Tasks) {
        let database_url = std::env::var(DATABASE_URL_VAR).ok();
        let test_server = PostgresServer::from_lookup(|name| std::env::var(name).ok());
        let results = runtime.block_on(phases::run(&args, database_url, &test_server))?;
        println!("{}", report::text(&results));
        if let Some(path) = &args.output {
            report::write_markdown(path, &results)
                .with_context(|| format!("cannot write {}", path.display()))?;
            println!("wrote {}", path.display());
        }
    }
    if args.suite == Suite::Scale {
        let docket_bin = args
            .docket_bin
            .clone()
            .context("the scale suite needs --docket-bin PATH")?;
        let test_server = PostgresServer::from_lookup(|name| std::env::var(name).ok());
        let sizes = scale::Sizes {
            rows: args.scale_rows.clone(),
            expired: args.scale_expired,
            followers: args.scale_followers.clone(),
            runs: args.scale_runs,
            replicas: args.scale_replicas,
            samples: args.scale_samples,
            clients: args.clients,
            seconds: std::time::Duration::from_secs(args.scale_seconds.max(1)),
            latency_runs: args.scale_latency_runs.max(1),
            parts: if args.scale_parts.is_empty() {
                scale::Part::ALL.to_vec()
            } else {
                args.scale_parts.clone()
            },
            docket_bin,
        };
        let results = scale::run(sizes, &args.commit, &test_server)?;
        println!("{}", results.text());
        if let Some(path) = &args.output {
            scale::write(&results, path)?;
            println!("wrote the scale section of {}", path.display());
        }
        return Ok(());
    }
    if matches!(args.suite, Suite::All | Suite::Overhead) {
        let test_server = PostgresServer::from_lookup(|name| std::env::var(name).ok());
        let sizes = overhead::Sizes {
            samples: args.overhead_samples,
            clients: args.clients,
            seconds: args.overhead_seconds,
        };
        let results = overhead::run(&runtime, sizes, &args.commit, &test_server)?;
        println!("{}", results.text());
        if let Some(path) = &args.output {
            results
                .write_markdown(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            println!("wrote the tracing section of {}", path.display());
        }
    }
    if matches!(args.suite, Suite::All | Suite::Work) {
        let results = work::run(args.work_calls)?;
        println!("{}", results.text());
    }
    if matches!(args.suite, Suite::All | Suite::Scripts) {
        let docket_bin = args
            .docket_bin
            .as_deref()
            .context("the script benchmark needs --docket-bin PATH")?;
        let test_server = PostgresServer::from_lookup(|name| std::env::var(name).ok());
        let results = runtime.block_on(scripts::run(docket_bin, &args.commit, &test_server))?;
        println!("{}", results.text());
        if let Some(path) = &args.output {
            results
                .write_markdown(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            println!("wrote the script section of {}", path.display());
        }
    }
    if matches!(args.suite, Suite::All | Suite::Flood) {
        let docket_bin = args
            .docket_bin
            .as_deref()
            .context("the flood benchmark needs --docket-bin PATH")?;
        let results = runtime.block_on(flood::run(docket_bin, &args.commit))?;
        println!("{}", results.text());
        if let Some(path) = &args.output {
            results
                .write_markdown(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            println!("wrote the flood section of {}", path.display());
        }
    }
    if matches!(args.suite, Suite::All | Suite::Exports) {
        let docket_bin = args
            .docket_bin
            .as_deref()
            .context("the export benchmark needs --docket-bin PATH")?;
        let results =
            runtime.block_on(exports::run(docket_bin, args.export_rounds, &args.commit))?;
        println!("{}", results.text());
        if let Some(path) = &args.output {
            results
                .write_markdown(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            println!("wrote the export section of {}", path.display());
        }
    }
    Ok(())
}
