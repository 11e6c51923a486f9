//! The Docket side: an [`App`] with the benchmark tool, over a PostgreSQL store
//! wrapped in a [`CountingStore`], served by `docket_server::serve` on a loopback
//! port exactly as the `docket` binary serves it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use docket_protocol::tools::CallToolResult;
use docket_server::{App, AppBuilder, Config, TaskSupport, ToolCall, ToolOutcome, ToolSpec};
use docket_storage::Store;
use docket_task::runtime::TaskRuntime;
use docket_task::store::AuditContext;
use docket_task::{NewTask, Outcome, TaskId, TaskStore};
use serde_json::json;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::counting::CountingStore;
use crate::gate::Gate;

/// The tool both servers register under the same name and schema, so the load
/// generator sends them byte-for-byte the same requests.
pub(crate) const BENCH_TOOL: &str = "bench_task";

/// The tool's description, shared with the peer.
pub(crate) const BENCH_TOOL_DESCRIPTION: &str = "Waits until the benchmark releases it, then returns {\"released\": true}. A task when the request declares the tasks extension.";

/// The tool's input schema, shared with the peer.
pub(crate) fn bench_tool_schema() -> serde_json::Value {
    json!({ "type": "object", "properties": {}, "additionalProperties": false })
}

/// A Docket server running in this process.
pub(crate) struct DocketServer {
    pub(crate) addr: SocketAddr,
    pub(crate) app: App,
    pub(crate) store: Arc<CountingStore>,
    gate: Gate,
    shutdown: Option<oneshot::Sender<()>>,
    served: Option<JoinHandle<std::io::Result<()>>>,
}

impl DocketServer {
    /// Builds the app over `store` as `docket serve` builds it — its task table and its
    /// script runs, so `tasks/*` has both places to look ids up in (see [`build_app`]) —
    /// and serves it on 127.0.0.1, any free port.
    pub(crate) async fn start(store: &Store, gate: Gate) -> anyhow::Result<Self> {
        let tasks = Arc::new(CountingStore::new(store.task_store()));
        let scripts = store.script_store();
        let app = build_app(
            Arc::clone(&tasks) as Arc<dyn TaskStore>,
            gate.clone(),
            |_| {},
            |builder| builder.scripts(scripts),
        )?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("cannot bind a loopback port for Docket")?;
        let addr = listener
            .local_addr()
            .context("cannot read Docket's address")?;
        let (shutdown, signal) = oneshot::channel::<()>();
        let served = tokio::spawn(docket_server::serve(listener, app.clone(), async {
            let _ = signal.await;
        }));
        Ok(Self {
            addr,
            app,
            store: tasks,
            gate,
            shutdown: Some(shutdown),
            served: Some(served),
        })
    }

    /// The MCP endpoint's URL.
    pub(crate) fn url(&self) -> String {
        format!("http://{}{}", self.addr, docket_server::MCP_PATH)
    }

    pub(crate) fn runtime(&self) -> anyhow::Result<&Arc<TaskRuntime>> {
        self.app
            .task_runtime()
            .context("the Docket app has no task runtime")
    }

    /// Starts one held task directly on the runtime (no HTTP): what a tool call
    /// would commit and run, for filling the replica with running tasks.
    pub(crate) async fn spawn_held(&self) -> anyhow::Result<TaskId> {
        self.start_held(false).await
    }

    /// Starts one held task as a task-creating `tools/call` does once its checks
    /// pass — the row committed, then the work on a task of its own that runs the
    /// handler on another (two spawns) — with no HTTP and no MCP around it.
    pub(crate) async fn start_like_a_call(&self) -> anyhow::Result<TaskId> {
        self.start_held(true).await
    }

    /// Starts one held task; with `handler_task`, its work waits on a tokio task of
    /// its own, as a call's handler runs.
    async fn start_held(&self, handler_task: bool) -> anyhow::Result<TaskId> {
        let runtime = self.runtime()?;
        let released = self.gate.hold();
        let record = runtime
            .spawn(
                new_task(self.app.replica_id())?,
                move |_context| async move {
                    if handler_task {
                        let _ = tokio::spawn(released).await;
                    } else {
                        released.await;
                    }
                    Outcome::Completed(json!({ "structuredContent": { "released": true } }))
                },
            )
            .await
            .context("could not start a task")?;
        Ok(record.id)
    }

    /// Releases every held task and waits until none runs on this replica, so the
    /// next measurement does not share the machine with their endings.
    pub(crate) async fn release_all(&self) -> anyhow::Result<()> {
        release_until_idle(self.runtime()?, &self.gate).await
    }

    /// Shuts the server down as SIGTERM would, after releasing held tasks.
    pub(crate) async fn stop(mut self) -> anyhow::Result<()> {
        self.release_all().await?;
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(served) = self.served.take() {
            served
                .await
                .context("the Docket server task panicked")?
                .context("the Docket server stopped with an error")?;
        }
        Ok(())
    }
}

/// Releases `gate` until no task runs on `runtime`, so the next measurement does not
/// share the machine with their endings.
pub(crate) async fn release_until_idle(runtime: &TaskRuntime, gate: &Gate) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    // Released repeatedly: a task whose work started after a release (its
    // create was still in flight) waits for the next one.
    while runtime.running_count() > 0 {
        if Instant::now() > deadline {
            bail!(
                "{} Docket tasks still running two minutes after their release",
                runtime.running_count()
            );
        }
        gate.release();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

/// The app both the served benchmark and the in-process work suite measure: the
/// embedded default configuration (anonymous callers are administrators, audit on,
/// 2 s heartbeats), adjusted by `adjust`, with the rate limit off — the benchmark
/// sends thousands of calls a second as one identity, and a limit is a policy, not a
/// cost — over `store` and what `extend` adds (the script store, whose runs
/// `tasks/*` then looks ids up in too, as in `docket serve`), with the benchmark tool
/// held by `gate`.
pub(crate) fn build_app(
    store: Arc<dyn TaskStore>,
    gate: Gate,
    adjust: impl FnOnce(&mut Config),
    extend: impl FnOnce(AppBuilder) -> AppBuilder,
) -> anyhow::Result<App> {
    let mut config = Config::embedded_default();
    config.rate_limit.requests_per_minute = 0;
    // Every load is one (anonymous) identity: the per-identity shares would measure
    // themselves, not the paths.
    config.server.max_connection_share_percent = 100;
    config.server.max_streams_per_identity = u32::MAX;
    adjust(&mut config);
    let app = extend(App::builder(config))
        .task_store(store)
        .tool(
            ToolSpec::new(BENCH_TOOL, BENCH_TOOL_DESCRIPTION, bench_tool_schema())
                .with_task_support(TaskSupport::Optional),
            move |call: ToolCall| {
                let released = gate.hold();
                async move {
                    tokio::select! {
                        () = released => {}
                        () = call.cancel.cancelled() => {}
                    }
                    ToolOutcome::Result(CallToolResult::structured(json!({ "released": true })))
                }
            },
        )
        .context("cannot register the benchmark tool")?
        .build()
        .context("cannot build the Docket app")?;
    if !app.tasks_enabled() {
        bail!("the Docket app has tasks turned off");
    }
    Ok(app)
}

/// The row a `tools/call bench_task {}` from the anonymous administrator creates.
pub(crate) fn new_task(replica_id: &str) -> anyhow::Result<NewTask> {
    Ok(NewTask {
        id: TaskId::generate_in(docket_server::CALL_TASK_IDS)
            .context("the OS random source failed")?,
        tool: BENCH_TOOL.to_owned(),
        arguments: json!({}),
        owner: "anonymous".to_owned(),
        extra_follower: None,
        replica_id: replica_id.to_owned(),
        status_message: Some("working".to_owned()),
        retention: Some(Duration::from_secs(7 * 86_400)),
        poll_interval_ms: 1000,
        audit: AuditContext {
            persona: Some("admin".to_owned()),
            connection: None,
            arguments: json!({}),
        },
        trace_context: None,
    })
}
