//! A durable job runner from `docket_task` and `docket_storage` alone: no MCP, no HTTP.
//!
//! A job is a task row in a SQLite file. The process that starts a job runs it (as a Docket
//! replica runs the tasks it creates: `docket_task` has no queue to hand work to another
//! worker), heartbeats it, and writes how it ended. Any other process that opens the same file
//! can read the job or ask it to stop; the worker hears that at its next heartbeat, because a
//! cancel is a row, not a signal. A worker that dies leaves its row behind: once the heartbeat
//! is `STALE_AFTER` old the job reads as failed, and the next worker to start records it
//! failed for good. The work itself is not resumed — "call the tool again" is the contract.
//!
//! ```text
//! cargo run -p docket_storage --example job_runner -- demo
//! cargo run -p docket_storage --example job_runner -- run    jobs.db [STEPS]
//! cargo run -p docket_storage --example job_runner -- status jobs.db JOB_ID
//! cargo run -p docket_storage --example job_runner -- cancel jobs.db JOB_ID
//! ```
//!
//! `demo` (what `cargo xtask test` runs) walks through both stories with second processes
//! (this same program, started again) and exits non-zero if anything is not as described.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail, ensure};
use docket_task::model::{Outcome, TaskError, TaskRecord};
use docket_task::runtime::{RuntimeConfig, TaskContext, TaskRuntime};
use docket_task::store::AuditContext;
use docket_task::{NewTask, TaskId, TaskStatus, TaskStore};
use serde_json::json;
use tokio::sync::mpsc;

/// How often a worker stamps its running jobs, and so how soon it hears a cancel taken by
/// another process (Docket's default is 2 s; short here so the demo takes seconds).
const HEARTBEAT: Duration = Duration::from_millis(100);

/// How long without a stamp before a job's worker counts as gone (Docket's default: 30 s).
const STALE_AFTER: Duration = Duration::from_secs(1);

/// How long one step of the counting job takes.
const STEP: Duration = Duration::from_millis(50);

/// How long the demo waits for something it expects before it says it did not happen.
const PATIENCE: Duration = Duration::from_secs(10);

/// The name jobs are stored under (a task's "tool").
const JOB_KIND: &str = "count";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["demo"] => demo().await,
        ["run", db] => run(Path::new(db), 40).await,
        ["run", db, steps] => {
            let steps = steps.parse().context("STEPS is a whole number")?;
            run(Path::new(db), steps).await
        }
        ["status", db, id] => status(Path::new(db), id).await,
        ["cancel", db, id] => cancel(Path::new(db), id).await,
        _ => bail!(
            "usage: job_runner demo | run DB_FILE [STEPS] | status DB_FILE JOB_ID | cancel DB_FILE JOB_ID"
        ),
    }
}

/// Opens (and creates and migrates, if need be) the job file.
async fn open(db: &Path) -> anyhow::Result<Arc<dyn TaskStore>> {
    let url = format!("sqlite://{}", db.display());
    let options = docket_storage::ConnectOptions {
        max_connections: 2,
        migrate: true,
    };
    let store = docket_storage::connect(&url, options)
        .await
        .with_context(|| format!("cannot open {url}"))?;
    Ok(store.task_store())
}

fn runtime(store: &Arc<dyn TaskStore>, replica_id: String) -> Arc<TaskRuntime> {
    TaskRuntime::new(
        Arc::clone(store),
        RuntimeConfig {
            replica_id,
            heartbeat_interval: HEARTBEAT,
            stale_after: STALE_AFTER,
            maintenance_interval: STALE_AFTER,
            ..RuntimeConfig::default()
        },
    )
}

/// A counting job of `steps` steps, started by `replica_id`.
fn new_job(steps: u64, replica_id: &str) -> anyhow::Result<NewTask> {
    Ok(NewTask {
        id: TaskId::generate().map_err(|err| anyhow!("cannot draw a job id: {err}"))?,
        tool: JOB_KIND.to_owned(),
        arguments: json!({"steps": steps}),
        owner: "job_runner".to_owned(),
        extra_follower: None,
        replica_id: replica_id.to_owned(),
        status_message: Some("queued".to_owned()),
        // Kept until someone deletes it: no expiry of its own.
        retention: None,
        poll_interval_ms: u64::try_from(HEARTBEAT.as_millis()).unwrap_or(u64::MAX),
        audit: AuditContext {
            arguments: json!({"steps": steps}),
            ..AuditContext::default()
        },
        trace_context: None,
    })
}

/// The job: counts to `steps`, one step per [`STEP`], reporting how far it got. It does not
/// watch for cancels itself: the runtime stops it (drops this future) when one arrives. Work
/// that holds something to clean up would also watch `context.cancelled()`.
async fn count(context: TaskContext, steps: u64) -> Outcome {
    for step in 1..=steps {
        tokio::time::sleep(STEP).await;
        context.set_status_message(format!("counted {step} of {steps}"));
    }
    Outcome::Completed(json!({"counted": steps}))
}

/// `run`: records the jobs of vanished workers as failed, then starts a job and works it in
/// this process until it ends.
async fn run(db: &Path, steps: u64) -> anyhow::Result<()> {
    let store = open(db).await?;
    // What every Docket replica's maintenance pass does; done first here so the output says it.
    for stale in store.fail_stale(STALE_AFTER).await? {
        println!(
            "recorded job {} failed: its worker stopped heartbeating before it finished",
            stale.id
        );
    }
    let replica_id = format!("worker-{}", std::process::id());
    let runtime = runtime(&store, replica_id.clone());
    runtime.start_background();
    let job = runtime
        .spawn(new_job(steps, &replica_id)?, move |context| {
            count(context, steps)
        })
        .await?;
    // The row is committed before `spawn` returns: from here on any process can read it.
    println!("job {} started by {replica_id}", job.id);
    // Draining waits for the running job to end (it is the only one), then stops the loops.
    let longest = STEP * u32::try_from(steps).unwrap_or(u32::MAX) + PATIENCE;
    runtime.drain(longest).await;
    let (record, _) = store
        .get(&job.id)
        .await?
        .context("the job's row disappeared")?;
    println!("job {} ended: {}", job.id, describe(&record));
    Ok(())
}

/// `status`: how a job stands, as any process reads it.
async fn status(db: &Path, id: &str) -> anyhow::Result<()> {
    let store = open(db).await?;
    let id = TaskId::from_client(id).context("a job id is 32 lower-case hex digits")?;
    let (record, now) = store.get(&id).await?.context("no such job")?;
    let view = record.view(now, STALE_AFTER);
    if view.stale {
        println!(
            "job {id}: failed ({}); stored as {} with \"{}\", last heartbeat {}",
            view.status_message.unwrap_or_default(),
            record.status.as_str(),
            record.status_message.unwrap_or_default(),
            record.heartbeat_at,
        );
    } else {
        println!("job {id}: {}", describe(&record));
    }
    Ok(())
}

/// `cancel`: records a cancel request; the job's worker hears it at its next heartbeat.
async fn cancel(db: &Path, id: &str) -> anyhow::Result<()> {
    let store = open(db).await?;
    let id = TaskId::from_client(id).context("a job id is 32 lower-case hex digits")?;
    let (record, _) = store.get(&id).await?.context("no such job")?;
    if record.status.is_terminal() {
        println!("job {id} has already ended: {}", describe(&record));
        return Ok(());
    }
    store.request_cancel(&id).await?;
    println!(
        "cancel of job {id} recorded (it was at \"{}\"); its worker stops it at its next heartbeat",
        record.status_message.unwrap_or_default()
    );
    Ok(())
}

/// A stored job in one line.
fn describe(record: &TaskRecord) -> String {
    let mut line = record.status.as_str().to_owned();
    // An ended job is told by its result or error; its last progress message is history.
    if let Some(message) = record
        .status_message
        .as_ref()
        .filter(|_| !record.status.is_terminal())
    {
        line.push_str(&format!(" — {message}"));
    }
    if let Some(result) = &record.result {
        line.push_str(&format!(" — result {result}"));
    }
    if let Some(error) = &record.error {
        line.push_str(&format!(" — error {}: {}", error.code, error.message));
    }
    line
}

/// `demo`: the two stories, checked.
async fn demo() -> anyhow::Result<()> {
    let folder = std::env::temp_dir().join(format!(
        "docket-job-runner-{}",
        TaskId::generate().map_err(|err| anyhow!("cannot draw a name: {err}"))?
    ));
    std::fs::create_dir_all(&folder)
        .with_context(|| format!("cannot create {}", folder.display()))?;
    let db = folder.join("jobs.db");
    let outcome = demo_in(&db).await;
    // Best effort: a leftover folder under the temporary directory harms nothing.
    let _ = std::fs::remove_dir_all(&folder);
    outcome?;
    println!("\nall expectations held");
    Ok(())
}

async fn demo_in(db: &Path) -> anyhow::Result<()> {
    println!("jobs are kept in {}", db.display());
    let cancelled = cancel_from_another_process(db).await?;
    survive_a_worker_that_dies(db, &cancelled).await
}

/// Story 1: a job runs here; a second process cancels it; this worker stops it.
async fn cancel_from_another_process(db: &Path) -> anyhow::Result<TaskId> {
    println!("\n1. a cancel from a second process");
    let store = open(db).await?;
    let runtime = runtime(&store, "demo".to_owned());
    runtime.start_background();
    let job = runtime
        .spawn(new_job(100_000, "demo")?, move |context| {
            count(context, 100_000)
        })
        .await?;
    println!(
        "   job {} started here; it would count for over an hour",
        job.id
    );
    let working = wait_for(&store, &job.id, "the job to report progress", |record| {
        record
            .status_message
            .as_deref()
            .is_some_and(|m| m.starts_with("counted"))
    })
    .await?;
    println!("   it is working: {}", describe(&working));

    let mut second = Command::new(this_program()?);
    second.args(["cancel", &db.display().to_string(), job.id.as_str()]);
    let output = tokio::task::spawn_blocking(move || second.output())
        .await?
        .context("cannot start the second process")?;
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        println!("     [second process] {line}");
    }
    ensure!(
        output.status.success(),
        "the cancelling process failed ({}): {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );

    // The worker learns of the cancel from its heartbeat's answer, stops the work, writes the
    // ending, and only then forgets the job: an empty runtime means all three happened.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while runtime.running_count() > 0 {
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the worker did not stop the job within {PATIENCE:?} of the cancel"
        );
        tokio::time::sleep(HEARTBEAT / 4).await;
    }
    let (record, _) = store.get(&job.id).await?.context("the job's row is gone")?;
    println!("   this worker stopped it: {}", describe(&record));
    ensure!(
        record.status == TaskStatus::Cancelled,
        "expected the job cancelled, found {}",
        record.status.as_str()
    );
    ensure!(
        record.cancel_requested_at.is_some(),
        "the row does not record the cancel request"
    );
    runtime.drain(Duration::ZERO).await;
    Ok(job.id)
}

/// Story 2: a worker process is killed mid-job; its job's row outlives it, reads as failed once
/// the heartbeat is stale, and the next worker records it failed and runs its own job.
async fn survive_a_worker_that_dies(db: &Path, cancelled: &TaskId) -> anyhow::Result<()> {
    println!("\n2. a worker killed mid-job, and a restart");
    let mut first = Worker::start(db, 100_000)?;
    let job = first.job_id().await?;
    // This store is opened after the worker created the file's rows; it is another process's
    // view of the same file.
    let store = open(db).await?;
    let working = wait_for(
        &store,
        &job,
        "the worker's job to report progress",
        |record| {
            record
                .status_message
                .as_deref()
                .is_some_and(|m| m.starts_with("counted"))
        },
    )
    .await?;
    println!("   the worker is counting: {}", describe(&working));
    first.kill()?;
    println!("   killed the worker (SIGKILL): nothing ran its shutdown");

    let (record, now) = store.get(&job).await?.context("the job's row is gone")?;
    println!("   the row is still there: {}", describe(&record));
    ensure!(
        record.status == TaskStatus::Working,
        "a killed worker cannot have ended its job, yet it is {}",
        record.status.as_str()
    );
    if !record.view(now, STALE_AFTER).stale {
        println!("   it still reads as working until its heartbeat is {STALE_AFTER:?} old");
    }
    let stale = wait_until_stale(&store, &job).await?;
    println!("   now it reads as failed (\"{stale}\"), though it is still stored as working");
    drop(store);

    println!("   starting a new worker on the same file");
    let mut second = Worker::start(db, 20)?;
    let next = second.job_id().await?;
    second.wait_for_exit().await?;

    // A fresh open of the file: what survives is what is on disk.
    let store = open(db).await?;
    let (old, _) = store
        .get(&job)
        .await?
        .context("the killed worker's job is gone")?;
    println!("   the killed worker's job, as stored: {}", describe(&old));
    // The worker was waiting in its drain for its one job (its row says it drains),
    // so the job reads as stopped by a shutdown, not as lost to a vanished replica.
    ensure!(
        old.status == TaskStatus::Failed && old.error.as_ref() == Some(&TaskError::shut_down()),
        "expected the new worker to have recorded the job failed as stale"
    );
    ensure!(
        old.result.is_none(),
        "a job that was not finished has no result"
    );
    let (new, _) = store
        .get(&next)
        .await?
        .context("the new worker's job is gone")?;
    println!("   the new worker's job: {}", describe(&new));
    ensure!(
        new.status == TaskStatus::Completed && new.result == Some(json!({"counted": 20})),
        "expected the new worker's job completed with {{\"counted\": 20}}"
    );
    let (first_story, _) = store
        .get(cancelled)
        .await?
        .context("the cancelled job is gone")?;
    println!(
        "   and the job cancelled in story 1: {}",
        describe(&first_story)
    );
    ensure!(
        first_story.status == TaskStatus::Cancelled,
        "the cancelled job did not stay cancelled"
    );
    Ok(())
}

/// Polls the job until it reads (database clock, [`STALE_AFTER`]) as failed because its
/// worker stopped heartbeating; returns the message it reads with.
async fn wait_until_stale(store: &Arc<dyn TaskStore>, id: &TaskId) -> anyhow::Result<String> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (record, now) = store.get(id).await?.context("the job's row is gone")?;
        let view = record.view(now, STALE_AFTER);
        if view.stale && view.status == TaskStatus::Failed {
            return Ok(view.status_message.unwrap_or_default());
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the job of a dead worker never read as failed"
        );
        tokio::time::sleep(HEARTBEAT).await;
    }
}

/// Polls the job until `ready` holds, for at most [`PATIENCE`].
async fn wait_for(
    store: &Arc<dyn TaskStore>,
    id: &TaskId,
    what: &str,
    ready: impl Fn(&TaskRecord) -> bool,
) -> anyhow::Result<TaskRecord> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some((record, _)) = store.get(id).await?
            && ready(&record)
        {
            return Ok(record);
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "waited {PATIENCE:?} for {what}"
        );
        tokio::time::sleep(HEARTBEAT / 2).await;
    }
}

fn this_program() -> anyhow::Result<PathBuf> {
    std::env::current_exe().context("cannot find this program to start it again")
}

/// A `run` child process, its output relayed line by line.
struct Worker {
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
}

impl Worker {
    fn start(db: &Path, steps: u64) -> anyhow::Result<Self> {
        let mut child = Command::new(this_program()?)
            .args(["run", &db.display().to_string(), &steps.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .context("cannot start a worker process")?;
        let stdout = child.stdout.take().context("the worker has no stdout")?;
        let (sender, lines) = mpsc::unbounded_channel();
        let pid = child.id();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                println!("     [worker {pid}] {line}");
                // Nobody listening any more is fine: the lines are still shown.
                let _ = sender.send(line);
            }
        });
        Ok(Self { child, lines })
    }

    /// The id of the job the worker started, from its `job … started` line.
    async fn job_id(&mut self) -> anyhow::Result<TaskId> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv())
                .await
                .context("the worker did not start a job in time")?
                .context("the worker stopped before it started a job")?;
            let id = line
                .strip_prefix("job ")
                .and_then(|rest| rest.split_once(" started"))
                .and_then(|(id, _)| TaskId::from_client(id));
            if let Some(id) = id {
                return Ok(id);
            }
        }
    }

    fn kill(&mut self) -> anyhow::Result<()> {
        self.child.kill().context("cannot kill the worker")?;
        self.child.wait().context("cannot reap the worker")?;
        Ok(())
    }

    async fn wait_for_exit(&mut self) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            if let Some(exit) = self
                .child
                .try_wait()
                .context("cannot wait for the worker")?
            {
                ensure!(exit.success(), "the worker failed: {exit}");
                return Ok(());
            }
            ensure!(
                tokio::time::Instant::now() < deadline,
                "the worker did not finish within {PATIENCE:?}"
            );
            tokio::time::sleep(STEP).await;
        }
    }
}

impl Drop for Worker {
    /// A demo that fails half-way leaves no worker counting for an hour behind it.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
