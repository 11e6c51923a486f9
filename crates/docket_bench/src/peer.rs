//! The peer: a small MCP server on the rmcp crate (3.11) with its in-memory
//! `TaskManager` and one task tool equivalent to Docket's benchmark tool, served
//! over streamable HTTP on a loopback port.
//!
//! It answers 2026-07-28 requests statelessly, in JSON (`json_response`), as
//! Docket does for a request without a progress token, so both servers send
//! the same kind of answer. It is hosted with `axum::serve` — rmcp's own way of
//! hosting its `StreamableHttpService` (hyper underneath) — with `TCP_NODELAY` on
//! every connection, as Docket sets it (docs/design.md, Performance).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use axum::serve::ListenerExt as _;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, CreateTaskResult,
    GetTaskParams, GetTaskResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool, UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::docket::{BENCH_TOOL, BENCH_TOOL_DESCRIPTION, bench_tool_schema};
use crate::gate::Gate;

/// The rmcp handler: the benchmark tool as a task, and `tasks/*` answered by
/// the `TaskManager`, as rmcp's own task tests wire it.
#[derive(Clone)]
struct PeerHandler {
    tasks: TaskManager,
    gate: Gate,
}

impl ServerHandler for PeerHandler {
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != BENCH_TOOL {
            return Err(ErrorData::invalid_params(
                format!("Unknown tool: {}", request.name),
                None,
            ));
        }
        let done = || CallToolResult::structured(json!({ "released": true }));
        let declares_tasks = context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.supports_tasks());
        if !declares_tasks {
            return Ok(CallToolResponse::Complete(done()));
        }
        let released = self.gate.hold();
        let task = self.tasks.spawn(TaskOptions::new(), move |context| {
            Box::pin(async move {
                tokio::select! {
                    () = released => Ok(done()),
                    () = context.cancelled() => Err(TaskExit::Cancelled),
                }
            })
        });
        Ok(CallToolResponse::Task(CreateTaskResult::new(task)))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = match bench_tool_schema() {
            serde_json::Value::Object(schema) => schema,
            _ => serde_json::Map::new(),
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            BENCH_TOOL,
            BENCH_TOOL_DESCRIPTION,
            Arc::new(schema),
        )]))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.tasks.cancel_task(&request.task_id)
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tasks()
                .build(),
        )
    }
}

/// The rmcp server running in this process.
pub(crate) struct PeerServer {
    pub(crate) addr: SocketAddr,
    tasks: TaskManager,
    gate: Gate,
    shutdown: CancellationToken,
    served: Option<JoinHandle<std::io::Result<()>>>,
}

impl PeerServer {
    pub(crate) async fn start(gate: Gate) -> anyhow::Result<Self> {
        let tasks = TaskManager::new();
        let handler = PeerHandler {
            tasks: tasks.clone(),
            gate: gate.clone(),
        };
        let shutdown = CancellationToken::new();
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_cancellation_token(shutdown.child_token());
        let service = StreamableHttpService::new(
            move || Ok(handler.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let router = axum::Router::new().route_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("cannot bind a loopback port for the rmcp peer")?;
        let addr = listener
            .local_addr()
            .context("cannot read the rmcp peer's address")?;
        // Without TCP_NODELAY each small answer waits ~40 ms for the delayed ACK.
        let listener = listener.tap_io(|stream| {
            let _ = stream.set_nodelay(true);
        });
        let stopped = shutdown.clone();
        let served = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move { stopped.cancelled().await })
                .await
        });
        Ok(Self {
            addr,
            tasks,
            gate,
            shutdown,
            served: Some(served),
        })
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Releases every held task and waits until none runs.
    pub(crate) async fn release_all(&self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.tasks.running_task_count() > 0 {
            if Instant::now() > deadline {
                bail!("rmcp tasks still running a minute after their release");
            }
            self.gate.release();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(())
    }

    pub(crate) async fn stop(mut self) -> anyhow::Result<()> {
        self.release_all().await?;
        self.shutdown.cancel();
        if let Some(served) = self.served.take() {
            served
                .await
                .context("the rmcp peer task panicked")?
                .context("the rmcp peer stopped with an error")?;
        }
        Ok(())
    }
}
