//! The work suite: what one `tasks/get` costs Docket beyond its store read, and one
//! task-creating `tools/call` beyond its store insert, with no network, no database
//! and no load generator in the measurement.
//!
//! The request the load generator sends is handed to [`docket_server::McpService`] in
//! process, over an in-memory store, on one thread; beside it, the same number of
//! direct store reads, and the same number of requests built and dropped (what this
//! harness itself spends). The difference is the MCP work of one call: everything the
//! server does between the request's bytes and the answer's bytes but the read. Run
//! under `valgrind --tool=callgrind`, the same code gives instruction counts that do
//! not depend on what else the machine is doing (docs/benchmarks.md says how).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail};
use docket_task::memory::MemoryStore;
use docket_task::{TaskId, TaskStore};
use http_body_util::BodyExt as _;
use tower_service::Service as _;

use crate::docket;
use crate::gate::Gate;
use crate::load;
use crate::system::process_cpu;

/// Calls made before measuring, so allocators and caches are warm.
const WARMUP: u32 = 1_000;

/// CPU per call of each loop.
#[derive(Clone, Debug, Default)]
pub(crate) struct WorkResults {
    /// Calls per loop.
    pub(crate) calls: u32,
    /// One `tasks/get` through the service, request building included.
    pub(crate) service: Duration,
    /// One direct `TaskStore::get` on the same store.
    pub(crate) store: Duration,
    /// Building one request and dropping it.
    pub(crate) harness: Duration,
    /// One `tools/call` → `CreateTaskResult` through the service, request building
    /// included (its task's work started, and held).
    pub(crate) create_service: Duration,
    /// One direct `TaskStore::create` of the same row on the same store.
    pub(crate) create_store: Duration,
}

impl WorkResults {
    /// What a call costs beyond the store read and the harness.
    pub(crate) fn mcp_work(&self) -> Duration {
        self.service.saturating_sub(self.store + self.harness)
    }

    /// What a create costs beyond the store's insert and the harness: the call
    /// pipeline, the task's work started, the answer encoded.
    pub(crate) fn create_work(&self) -> Duration {
        self.create_service
            .saturating_sub(self.create_store + self.harness)
    }

    /// The plain-text summary.
    pub(crate) fn text(&self) -> String {
        let micros = |duration: Duration| duration.as_secs_f64() * 1e6;
        format!(
            "tasks/get in process, {} calls each (CPU per call):\n  \
             through McpService      {:>7.2} µs\n  \
             TaskStore::get alone    {:>7.2} µs\n  \
             request built, dropped  {:>7.2} µs\n  \
             MCP work                {:>7.2} µs\n\
             tools/call → CreateTaskResult in process (CPU per call):\n  \
             through McpService      {:>7.2} µs\n  \
             TaskStore::create alone {:>7.2} µs\n  \
             MCP work                {:>7.2} µs\n",
            self.calls,
            micros(self.service),
            micros(self.store),
            micros(self.harness),
            micros(self.mcp_work()),
            micros(self.create_service),
            micros(self.create_store),
            micros(self.create_work()),
        )
    }
}

/// Measures `calls` gets of each kind on a current-thread runtime.
pub(crate) fn run(calls: u32) -> anyhow::Result<WorkResults> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(measure(calls))
}

/// Measures `calls` gets of each kind on the current runtime (the tasks suite calls it
/// between its phases, when nothing else runs in this process).
pub(crate) async fn measure(calls: u32) -> anyhow::Result<WorkResults> {
    let calls = calls.max(1);
    let store = Arc::new(MemoryStore::new());
    let gate = Gate::new();
    // The loops below never yield, so no heartbeat runs while they do: the task must
    // not read as stale however slowly they run (under callgrind, say).
    let app = docket::build_app(
        Arc::clone(&store) as Arc<dyn TaskStore>,
        gate.clone(),
        |config| config.tasks.stale_after = Duration::from_secs(86_400),
        |builder| builder,
    )?;
    let runtime = app
        .task_runtime()
        .context("the Docket app has no task runtime")?;
    let released = gate.hold();
    let record = runtime
        .spawn(
            docket::new_task(app.replica_id())?,
            move |_context| async move {
                released.await;
                docket_task::Outcome::Completed(serde_json::json!({}))
            },
        )
        .await
        .context("could not start a task")?;
    let id = record.id;
    let prepared = load::get_request(id.as_str())?;
    let mut service = app.service();

    let service_cpu = timed(calls, || {
        answered(
            &mut service,
            &prepared,
            "tasks/get",
            "\"status\":\"working\"",
        )
    })
    .await?;
    let store_cpu = timed(calls, || read(&store, &id)).await?;
    let harness_cpu = timed(calls, || {
        drop(prepared.to_http());
        async { Ok(()) }
    })
    .await?;
    // Creates: each task's work starts and waits at the gate; they are released
    // together at the end, so no ending is measured.
    let create = load::create_request()?;
    let create_cpu = timed(calls, || {
        answered(
            &mut service,
            &create,
            "tools/call",
            "\"resultType\":\"task\"",
        )
    })
    .await?;
    let replica = app.replica_id().to_owned();
    let create_store_cpu = timed(calls, || {
        let store = Arc::clone(&store);
        let task = docket::new_task(&replica);
        async move {
            store
                .create(task?)
                .await
                .map_err(|error| anyhow::anyhow!("the store failed: {error}"))?;
            Ok(())
        }
    })
    .await?;
    // The held tasks end before the caller's next phase starts, not during it.
    docket::release_until_idle(runtime, &gate).await?;
    Ok(WorkResults {
        calls,
        service: service_cpu,
        store: store_cpu,
        harness: harness_cpu,
        create_service: create_cpu,
        create_store: create_store_cpu,
    })
}

/// Hands `request` to `service` and checks that the answer succeeded and holds `needle`.
pub(crate) fn answered(
    service: &mut docket_server::McpService,
    request: &load::Prepared,
    method: &'static str,
    needle: &'static str,
) -> impl Future<Output = anyhow::Result<()>> + use<> {
    let answer = service.call(request.to_http());
    async move {
        let Ok(response) = answer.await;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .context("cannot read an answer")?
            .to_bytes();
        if !status.is_success() || !contains(&body, needle.as_bytes()) {
            bail!(
                "{method} answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        Ok(())
    }
}

async fn read(store: &MemoryStore, id: &TaskId) -> anyhow::Result<()> {
    match store.get(id).await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => bail!("the task is gone"),
        Err(error) => bail!("the store failed: {error}"),
    }
}

/// Runs `call` `WARMUP` times, then `calls` times, and returns the CPU per call of
/// the measured ones.
async fn timed<F, Fut>(calls: u32, mut call: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    for _ in 0..WARMUP {
        call().await?;
    }
    let before = process_cpu();
    for _ in 0..calls {
        call().await?;
    }
    Ok(process_cpu().saturating_sub(before) / calls)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}
