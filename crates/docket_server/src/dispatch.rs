//! JSON-RPC method dispatch for a request that passed the transport checks:
//! `server/discover`, `tools/list` and `tools/call`.

use docket_protocol::jsonrpc::Request;
use docket_protocol::result::{CacheScope, ResultType};
use docket_protocol::server::{DiscoverResult, ServerCapabilities, ToolsCapability};
use docket_protocol::tools::ListToolsResult;
use serde_json::Value;

use crate::call;
use crate::error::McpError;
use crate::reply::{Reply, to_value};
use crate::request::RequestContext;
use crate::state::App;
use crate::tasks;

/// How long clients may cache `server/discover`, in milliseconds.
const DISCOVER_TTL_MS: u64 = 5 * 60 * 1000;
/// How long clients may cache `tools/list`, in milliseconds.
const TOOLS_LIST_TTL_MS: u64 = 60 * 1000;

/// How to use the server, for the model (`server/discover` and `initialize`).
pub(crate) const INSTRUCTIONS: &str = "Docket runs SQL on Trino, calls HTTP and GraphQL APIs, and \
     runs managed scripts. Call platform_info first to see who you are and what you may use.";

/// The methods this server implements.
const METHODS: &[&str] = &["server/discover", "tools/list", "tools/call"];

/// Whether `method` is implemented here; `tasks/*` only when tasks are enabled.
pub(crate) fn is_known_method(app: &App, method: &str) -> bool {
    METHODS.contains(&method)
        || (app.tasks_enabled() && tasks::METHODS.contains(&method))
        || app.state.features.serves(method)
        || (method == crate::listen::METHOD && crate::listen::offered(app))
}

/// The value the `Mcp-Name` header must carry for `method`, when it needs one.
pub(crate) fn routing_name(method: &str, params: Option<&Value>) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    params?.get(key)?.as_str().map(str::to_owned)
}

/// Runs one request.
pub(crate) async fn dispatch(
    app: &App,
    context: RequestContext,
    request: Request,
) -> Result<Reply, McpError> {
    match request.method.as_str() {
        "server/discover" => Ok(Reply::Json(discover(app)?)),
        "tools/list" => Ok(Reply::Json(list_tools(app, &context)?)),
        // The big pipelines are boxed, so a request's future is as large as the
        // method it runs, not as large as the largest method.
        "tools/call" => Box::pin(call::call_tool(app, context, request.params)).await,
        crate::listen::METHOD if crate::listen::offered(app) => {
            spend_rate_limit(app, &context.identity.subject, &request.method)?;
            Box::pin(crate::listen::listen(
                app,
                context,
                &request.id,
                request.params,
            ))
            .await
        }
        method if app.state.features.serves(method) => {
            spend_rate_limit(app, &context.identity.subject, method)?;
            let caller = crate::features::Caller::new(&context, &app.state.personas);
            Box::pin(crate::features::handle(
                &app.state.features,
                &app.state.state_key,
                &caller,
                method,
                request.params,
            ))
            .await
        }
        method if tasks::METHODS.contains(&method) => {
            let Some(surface) = &app.state.tasks else {
                return Err(McpError::MethodNotFound(method.to_owned()));
            };
            let is_admin = app
                .state
                .personas
                .resolve(&context.identity.roles)
                .is_some_and(|persona| persona.is_admin);
            tasks::handle(
                surface,
                &context,
                is_admin,
                method,
                request.params,
                &app.state.server_info,
            )
            .await
        }
        other => Err(McpError::MethodNotFound(other.to_owned())),
    }
}

/// Spends one of the caller's rate-limit tokens on `method`, as a tool call does:
/// the reads that cost (a prompt rendered, a listing, a resource read, a listen
/// opened, a session opened) are held to the same budget as the calls. Except
/// `completion/complete`, which a client sends on every keystroke: it spends a
/// token only for what costs (a statement it sends Trino), and past the budget
/// suggests nothing rather than failing, so typing stays quiet.
///
/// # Errors
/// [`McpError::Limited`] saying when to come back.
pub(crate) fn spend_rate_limit(app: &App, subject: &str, method: &str) -> Result<(), McpError> {
    if method == crate::features::COMPLETION_METHOD {
        return Ok(());
    }
    app.state
        .rate_limiter
        .check(subject, std::time::Instant::now())
        .map_err(|limited| {
            McpError::Limited(format!(
                "too many requests in a short window (rate_limit); wait {} seconds",
                limited.retry_after.as_secs().max(1)
            ))
        })
}

fn discover(app: &App) -> Result<Value, McpError> {
    // The tasks extension is advertised exactly when a store is configured and
    // tasks are on; the UI extension when a tool has a view.
    let mut extensions = app.state.features.extensions();
    if app.tasks_enabled() {
        extensions.insert(
            docket_protocol::TASKS_EXTENSION.to_owned(),
            Value::Object(Default::default()),
        );
    }
    let extensions = (!extensions.is_empty()).then_some(extensions);
    let result = DiscoverResult {
        result_type: ResultType::Complete,
        supported_versions: docket_protocol::SUPPORTED_VERSIONS
            .iter()
            .map(|v| (*v).to_owned())
            .collect(),
        capabilities: ServerCapabilities {
            tools: Some(ToolsCapability { list_changed: None }),
            extensions,
            extra: app.state.features.capabilities(),
        },
        instructions: Some(INSTRUCTIONS.to_owned()),
        ttl_ms: DISCOVER_TTL_MS,
        cache_scope: CacheScope::Public,
        meta: None,
    };
    to_value(&result)
}

pub(crate) fn list_tools(app: &App, context: &RequestContext) -> Result<Value, McpError> {
    let persona = app.state.personas.resolve(&context.identity.roles);
    // Views are named only to hosts that render them; others get today's list.
    let ui = context.meta.client_capabilities.declares_ui();
    let tools = app
        .state
        .registry
        .iter()
        .filter(|tool| {
            persona
                .as_ref()
                .is_some_and(|persona| persona.may_call_tool(&tool.spec.name))
        })
        .map(|tool| tool.spec.to_wire_for(ui))
        .collect();
    // The list depends on who asks, so only this caller may reuse it.
    let result = ListToolsResult {
        result_type: ResultType::Complete,
        tools,
        next_cursor: None,
        ttl_ms: TOOLS_LIST_TTL_MS,
        cache_scope: CacheScope::Private,
    };
    to_value(&result)
}
