#![doc = include_str!("../README.md")]

pub mod attribution;
pub mod auth;
pub mod config;
mod connections;
mod headers;
pub mod metrics;
pub mod persona;
pub mod rate_limit;
pub mod refusal;
pub mod registry;
mod request_state;
mod tools;

mod answers;
mod app;
mod apps;
mod asset_resources;
mod assets;
mod audit;
mod call;
pub mod catalogs;
mod completions;
mod continuation;
mod dispatch;
mod downloads;
mod error;
mod features;
mod holds;
mod http;
mod legacy;
mod links;
mod listen;
mod oauth;
mod opener;
mod portal;
mod portal_desk;
mod portal_events;
mod portal_routes;
mod reply;
mod request;
mod retention;
mod server_span;
mod sse;
mod state;
mod tasks;
mod telemetry;

pub use app::{AppBuilder, BuildError};
pub use config::{Config, object_sink};
/// Where scripts are evaluated ([`AppBuilder::script_isolation`]), and the child process's
/// side of the protocol ([`script_child::serve`], the `docket script-child` subcommand).
pub use docket_script::child as script_child;
pub use docket_script::{ChildProcess, Isolation};
pub use error::McpError;
pub use features::{
    CompletionFuture, CompletionProvider, CompletionRequest, PromptFuture, PromptHandler,
    PromptOutcome, PromptRequest, PromptSpec, ResourceError, ResourceFuture, ResourceRead,
    ResourceReader, ResourceSpec, ResourceTemplateSpec,
};
pub use http::{Background, Body, MCP_PATH, McpService, serve};
pub use portal::{PORTAL_CLIENT_ID, PortalSection};
pub use registry::{
    InputRound, Logger, Progress, TaskSupport, ToolCall, ToolError, ToolOutcome, ToolSpec,
};
pub use retention::{RetentionAges, RetentionReport};
pub use state::{App, SERVER_NAME};
pub use tasks::{CALL_TASK_IDS, FoundTask, TaskSource};
