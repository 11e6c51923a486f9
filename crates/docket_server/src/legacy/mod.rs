//! The earlier protocol era on the same `/mcp` (revisions 2025-03-26, 2025-06-18 and
//! 2025-11-25): `initialize` opens a session kept in the [`SessionStore`], so any
//! replica serves it; later requests name it in `Mcp-Session-Id` and are served
//! with what was negotiated. Tools are the same tools through the same pipeline.
//!
//! Which era a request is of is decided by how it opens (the 2026-07-28 versioning
//! rules for a dual-era server): a request without the current era's `_meta` that
//! is `initialize`, or names a session or an earlier revision, is of the earlier
//! era; everything else is served as the current era serves it.
//!
//! Credentials are checked on every request as for the current era; a session
//! answers only the identity that opened it, and to anyone else it does not exist
//! (404, as for an unknown or expired one, so the client starts over).

mod elicit;
mod shape;
mod tasks;

use std::sync::Arc;
use std::time::Duration;

pub(crate) use shape::{Refusal, result_shape};

use docket_catalog::{NewSession, Session, SessionStore};
use docket_protocol::error::ErrorObject;
use docket_protocol::jsonrpc::Request;
use docket_protocol::legacy::{
    INITIALIZE, InitializeParams, InitializeResult, LEGACY_VERSIONS, LegacyServerCapabilities,
    SESSION_HEADER, negotiate, versions_sentence,
};
use docket_protocol::logging::LogLevel;
use docket_protocol::meta::{
    ClientCapabilities, Implementation, PROGRESS_TOKEN_KEY, PROTOCOL_VERSION_KEY, ProgressToken,
    RequestMeta,
};
use docket_protocol::tools::CallToolResult;
use http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::Value;

use crate::auth::Identity;
use crate::call;
use crate::error::McpError;
use crate::headers;
use crate::reply::Reply;
use crate::request::RequestContext;
use crate::state::App;

/// How long a session may sit unused before it is gone, unless configured.
pub(crate) const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// How many sessions one identity may hold unless configured otherwise.
pub(crate) const DEFAULT_SESSIONS_PER_IDENTITY: u32 = 100;

/// The shortest `server.session_idle_timeout` the configuration accepts: shorter,
/// a session would end between one request and the next of a client that is using it.
pub(crate) const MIN_IDLE_TIMEOUT: Duration = Duration::from_secs(1);

/// A session's last use is written again only when it is older than this, or than a
/// quarter of the idle timeout when that is shorter, so a busy session costs one
/// write a minute, not one per request, and never expires while it is used.
const TOUCH_AFTER: Duration = Duration::from_secs(60);

/// How old a session's recorded last use may grow before it is written again.
fn touch_after(idle: Duration) -> Duration {
    TOUCH_AFTER.min(idle / 4)
}

/// The methods the earlier era is served.
const METHODS: &[&str] = &[
    INITIALIZE,
    "ping",
    "tools/list",
    "tools/call",
    "logging/setLevel",
    "tasks/get",
    "tasks/result",
    "tasks/cancel",
    "tasks/list",
];

/// Whether a request is of the earlier era: one without the current era's `_meta`
/// that is `initialize` or names a session or an earlier revision.
pub(crate) fn is_legacy(request_method: &str, params: Option<&Value>, headers: &HeaderMap) -> bool {
    // A request with the current era's `_meta` is of the current era whatever its
    // method: there `initialize` is an unknown method (404), as the suite checks.
    let modern_meta = params
        .and_then(|params| params.get("_meta"))
        .and_then(|meta| meta.get(PROTOCOL_VERSION_KEY))
        .is_some();
    !modern_meta
        && (request_method == INITIALIZE
            || headers.contains_key(SESSION_HEADER)
            || header_version(headers).is_some_and(|version| LEGACY_VERSIONS.contains(&version)))
}

/// The `MCP-Protocol-Version` header, when present and readable.
fn header_version(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(headers::PROTOCOL_VERSION)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
}

/// The `Mcp-Session-Id` header, when present and readable.
pub(crate) fn session_id(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(SESSION_HEADER)
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
}

/// An answer of the earlier era.
pub(crate) struct Answer {
    /// What the method answered.
    pub(crate) reply: Reply,
    /// The session to name in `Mcp-Session-Id` (set by `initialize`).
    pub(crate) new_session: Option<String>,
}

/// Serves one earlier-era request from `identity`.
pub(crate) async fn handle(
    app: &App,
    identity: Arc<Identity>,
    headers: HeaderMap,
    request: Request,
) -> Result<Answer, Refusal> {
    let requested = header_version(&headers);
    if let Some(version) = requested
        && !LEGACY_VERSIONS.contains(&version)
    {
        return Err(unsupported_version(version));
    }
    if request.method == INITIALIZE {
        // A session is a row kept for its idle timeout: opening one costs a token.
        if let Err(limited) = crate::dispatch::spend_rate_limit(app, &identity.subject, INITIALIZE)
        {
            return Err(Refusal::new(
                StatusCode::TOO_MANY_REQUESTS,
                docket_protocol::error::LIMIT_REACHED,
                limited.to_string(),
            ));
        }
        return initialize(app, &identity, request.params).await;
    }
    let Some(id) = session_id(&headers) else {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            docket_protocol::error::INVALID_REQUEST,
            format!(
                "this request has no Mcp-Session-Id and no _meta: send initialize first to open a \
                 session, or send _meta on every request ({})",
                versions_sentence()
            ),
        ));
    };
    let session = open_session(app, &identity, id).await?;
    // The header must name the session's revision; without one, the session tells.
    if let Some(version) = requested
        && version != session.protocol_version
    {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            docket_protocol::error::INVALID_REQUEST,
            format!(
                "MCP-Protocol-Version {version} does not match the session's {}",
                session.protocol_version
            ),
        ));
    }
    let reply = serve(app, identity, headers, &session, request).await?;
    Ok(Answer {
        reply,
        new_session: None,
    })
}

/// Answers a notification of the earlier era: accepted when its session (if it
/// names one) is the caller's.
pub(crate) async fn notification(
    app: &App,
    identity: &Identity,
    headers: &HeaderMap,
) -> Result<(), Refusal> {
    match session_id(headers) {
        Some(id) => open_session(app, identity, id).await.map(drop),
        None => Ok(()),
    }
}

/// `DELETE /mcp`: ends the caller's session.
pub(crate) async fn end_session(
    app: &App,
    identity: &Identity,
    headers: &HeaderMap,
) -> Result<(), Refusal> {
    let Some(id) = session_id(headers) else {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            docket_protocol::error::INVALID_REQUEST,
            "name the session to end in Mcp-Session-Id",
        ));
    };
    let session = open_session(app, identity, id).await?;
    app.state
        .sessions
        .delete_session(id)
        .await
        .map_err(|err| Refusal::unavailable(&err))?;
    let lasted = time::OffsetDateTime::now_utc() - session.created_at;
    crate::telemetry::session_ended(&session.protocol_version, lasted.as_seconds_f64());
    tracing::info!(subject = identity.subject, "session ended by its client");
    Ok(())
}

/// The session `id` if it exists, is not idle and belongs to `identity`, marked used.
async fn open_session(app: &App, identity: &Identity, id: &str) -> Result<Session, Refusal> {
    let store: &Arc<dyn SessionStore> = &app.state.sessions;
    let idle = app.config().server.session_idle_timeout;
    let found = store
        .find_session(id, idle)
        .await
        .map_err(|err| Refusal::unavailable(&err))?;
    let Some((session, now)) =
        found.filter(|(session, _)| session.subject == session_subject(identity, id))
    else {
        return Err(Refusal::no_session());
    };
    if now - session.last_used_at > touch_after(idle)
        && let Err(err) = store.touch_session(id).await
    {
        // The session still serves this request; it may expire a little early.
        tracing::warn!(error = %err, "could not mark a session used");
    }
    Ok(session)
}

/// The subject a session of `identity` with id `id` is kept under. Anonymous callers
/// share one identity, so each of their sessions is a subject of its own: its id (a
/// 128-bit secret) is all that opens it, and no flood of anonymous sessions ends
/// another's (the per-subject cap ends a subject's own least recently used).
fn session_subject(identity: &Identity, id: &str) -> String {
    if identity.kind == crate::auth::IdentityKind::Anonymous {
        format!("{}:{id}", Identity::ANONYMOUS_SUBJECT)
    } else {
        identity.subject.clone()
    }
}

/// `initialize`: negotiates the revision and opens a session.
async fn initialize(
    app: &App,
    identity: &Identity,
    params: Option<Value>,
) -> Result<Answer, Refusal> {
    let params = InitializeParams::deserialize(params.unwrap_or(Value::Null)).map_err(|err| {
        Refusal::new(
            StatusCode::BAD_REQUEST,
            docket_protocol::error::INVALID_PARAMS,
            format!(
                "invalid initialize params ({err}): send protocolVersion, capabilities and \
                 clientInfo; {}",
                versions_sentence()
            ),
        )
    })?;
    let version = negotiate(&params.protocol_version);
    let id = docket_catalog::generate_id().map_err(|err| {
        Refusal::from_error(&McpError::Internal(format!(
            "the OS random source failed: {err}"
        )))
    })?;
    let session = NewSession {
        id: id.clone(),
        protocol_version: version.to_owned(),
        client_capabilities: Value::Object(params.capabilities),
        client_info: params.client_info,
        subject: session_subject(identity, &id),
    };
    // Said before anything is stored: a session keeps what its client declared.
    let declared = session.declaration_bytes();
    if declared > docket_catalog::sessions::MAX_CLIENT_DECLARATION_BYTES {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            docket_protocol::error::INVALID_PARAMS,
            format!(
                "the capabilities and clientInfo of initialize take {declared} bytes, over the \
                 limit of {}; declare only what the client supports",
                docket_catalog::sessions::MAX_CLIENT_DECLARATION_BYTES
            ),
        ));
    }
    app.state
        .sessions
        .create_session(session, app.config().server.max_sessions_per_identity)
        .await
        .map_err(|err| Refusal::unavailable(&err))?;
    tracing::info!(
        subject = identity.subject,
        requested = params.protocol_version,
        version,
        "session opened"
    );
    let result = InitializeResult {
        protocol_version: version.to_owned(),
        capabilities: LegacyServerCapabilities {
            tools: Some(Default::default()),
            logging: Some(Default::default()),
            tasks: offers_tasks(app, version).then(tasks::server_capability),
            extra: legacy_capabilities(app),
        },
        server_info: app.state.server_info.clone(),
        instructions: Some(crate::dispatch::INSTRUCTIONS.to_owned()),
    };
    let result = serde_json::to_value(&result)
        .map_err(|err| Refusal::from_error(&McpError::Internal(err.to_string())))?;
    Ok(Answer {
        reply: Reply::Json(result),
        new_session: Some(id),
    })
}

/// The features' capabilities, with the extensions they bring (the UI one, which
/// hosts of this era declare in `initialize`).
fn legacy_capabilities(app: &App) -> docket_protocol::JsonObject {
    let mut capabilities = app.state.features.capabilities();
    let extensions = app.state.features.extensions();
    if !extensions.is_empty() {
        capabilities.insert("extensions".to_owned(), Value::Object(extensions));
    }
    capabilities
}

/// Serves a request inside `session`.
async fn serve(
    app: &App,
    identity: Arc<Identity>,
    headers: HeaderMap,
    session: &Session,
    request: Request,
) -> Result<Reply, Refusal> {
    if !METHODS.contains(&request.method.as_str()) && !app.state.features.serves(&request.method) {
        return Err(Refusal::from_error(&McpError::MethodNotFound(
            request.method,
        )));
    }
    match request.method.as_str() {
        "ping" => Ok(Reply::Json(Value::Object(Default::default()))),
        "logging/setLevel" => {
            let level = request
                .params
                .as_ref()
                .and_then(|params| params.get("level"))
                .and_then(Value::as_str)
                .and_then(LogLevel::parse)
                .ok_or_else(|| {
                    let levels: Vec<&str> =
                        LogLevel::ALL.iter().map(|level| level.as_str()).collect();
                    Refusal::from_error(&McpError::InvalidParams(format!(
                        "logging/setLevel needs a level, one of {}",
                        levels.join(", ")
                    )))
                })?;
            app.state
                .sessions
                .set_session_log_level(&session.id, level.as_str())
                .await
                .map_err(|err| Refusal::unavailable(&err))?;
            Ok(Reply::Json(Value::Object(Default::default())))
        }
        method => {
            let with_tasks = offers_tasks(app, &session.protocol_version);
            let mut context = RequestContext {
                identity,
                meta: session_meta(session, request.params.as_ref()),
                headers,
                run_id: None,
            };
            let reply = match method {
                "tools/list" => crate::dispatch::list_tools(app, &context)
                    .map(|listed| Reply::Json(list_shape(app, listed, with_tasks))),
                feature if app.state.features.serves(feature) => 'feature: {
                    let subject = &context.identity.subject;
                    if let Err(limited) = crate::dispatch::spend_rate_limit(app, subject, feature) {
                        break 'feature Err(limited);
                    }
                    let caller = crate::features::Caller::new(&context, &app.state.personas);
                    crate::features::handle(
                        &app.state.features,
                        &app.state.state_key,
                        &caller,
                        feature,
                        request.params,
                    )
                    .await
                    .and_then(feature_shape)
                }
                "tools/call" => {
                    if with_tasks && asks_for_task(request.params.as_ref()) {
                        must_run_as_task(app, request.params.as_ref()).map_err(|error| {
                            Refusal::new(
                                StatusCode::OK,
                                docket_protocol::error::METHOD_NOT_FOUND,
                                error,
                            )
                        })?;
                        context.meta.client_capabilities =
                            tasks::with_tasks_extension(context.meta.client_capabilities);
                    }
                    // Kept to make the call again with the client's answers.
                    let retry = elicit::declared(&session.client_capabilities).then(|| {
                        (
                            Arc::clone(&context.identity),
                            context.headers.clone(),
                            context.meta.clone(),
                            request.params.clone().unwrap_or(Value::Null),
                        )
                    });
                    let first = match call::call_tool(app, context, request.params).await {
                        Ok(Reply::Json(result)) if elicit::asks_for_input(&result) => {
                            Ok(elicit::FirstAnswer::Result(result))
                        }
                        // A streamed answer (progress, log messages) may end asking.
                        Ok(Reply::Stream(inner)) if retry.is_some() => {
                            Ok(elicit::FirstAnswer::Stream(inner))
                        }
                        other => Err(other),
                    };
                    match (first, retry) {
                        (Ok(first), Some((identity, headers, meta, params))) => {
                            Ok(elicit::converse(
                                elicit::Conversation {
                                    app: app.clone(),
                                    identity,
                                    headers,
                                    meta,
                                    session_id: session.id.clone(),
                                    version: session.protocol_version.clone(),
                                    params,
                                    shape: call_result_shape,
                                },
                                first,
                            ))
                        }
                        (Ok(_), None) => Err(McpError::Internal(
                            "a call asked for input in a session that cannot answer".into(),
                        )),
                        (Err(other), _) => other.and_then(call_shape),
                    }
                }
                _ if with_tasks => tasks::serve(app, &context, method, request.params).await,
                other => Err(McpError::MethodNotFound(other.to_owned())),
            };
            let reply = match method {
                "tools/list" | "tools/call" => reply
                    .and_then(|reply| shape::typed_output_for(&session.protocol_version, reply)),
                _ => reply,
            };
            match reply {
                Ok(reply) => Ok(reply),
                // A tool that runs only as a task, called without `task`.
                Err(McpError::MissingCapability { message, required })
                    if required.declares_tasks() =>
                {
                    Err(Refusal::new(
                        StatusCode::OK,
                        docket_protocol::error::METHOD_NOT_FOUND,
                        format!(
                            "{message}; in a session of revision {}, call it with params.task",
                            session.protocol_version
                        ),
                    ))
                }
                // Consent is asked by elicitation, which this session's client did not
                // declare: the call is refused, never made, and says how to proceed.
                Err(error) if elicit::could_not_ask(&error) => {
                    let message = match &error {
                        McpError::MissingCapability { message, .. } => message.as_str(),
                        _ => "",
                    };
                    let refusal = CallToolResult::error(format!(
                        "{message} This client did not declare elicitation when it opened this \
                         session (protocol revision {}), so Docket cannot ask, and the call was \
                         not made. Use a client that declares elicitation at initialize, or one \
                         that speaks 2026-07-28, to answer the question; or ask an administrator \
                         whether consent is needed for this connection.",
                        session.protocol_version
                    ));
                    serde_json::to_value(&refusal)
                        .map(Reply::Json)
                        .map_err(|err| Refusal::from_error(&McpError::Internal(err.to_string())))
                }
                // Any other capability the client did not declare (sampling, roots):
                // -32021 is the current era's code, so it is said as invalid params.
                Err(McpError::MissingCapability { message, .. }) => {
                    Err(Refusal::from_error(&McpError::InvalidParams(format!(
                        "{message} Declare it at initialize to be asked (this session is of \
                         protocol revision {}).",
                        session.protocol_version
                    ))))
                }
                Err(error) => Err(Refusal::from_error(&error)),
            }
        }
    }
}

/// Whether sessions of `version` are offered tasks: the revision has them and this
/// app runs them.
fn offers_tasks(app: &App, version: &str) -> bool {
    version == tasks::TASKS_REVISION && app.tasks_enabled()
}

/// Whether a `tools/call` asks to run as a task (`params.task`, an object).
fn asks_for_task(params: Option<&Value>) -> bool {
    params
        .and_then(|params| params.get("task"))
        .is_some_and(Value::is_object)
}

/// Refuses a task-augmented call of a tool that never runs as a task (the revision
/// asks for -32601). An unknown tool is left to the pipeline, which names it.
fn must_run_as_task(app: &App, params: Option<&Value>) -> Result<(), String> {
    let name = params
        .and_then(|params| params.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    match app.state.registry.get(name) {
        Some(tool) if tool.spec.task_support == crate::registry::TaskSupport::Never => Err(
            format!("the tool {name} does not run as a task; call it without params.task"),
        ),
        _ => Ok(()),
    }
}

/// `tools/list` in this era's shape; with tasks, each tool says whether it runs as one.
fn list_shape(app: &App, listed: Value, with_tasks: bool) -> Value {
    let mut listed = result_shape(listed);
    if with_tasks && let Some(Value::Array(tools)) = listed.get_mut("tools") {
        for tool in tools {
            let support = tool
                .get("name")
                .and_then(Value::as_str)
                .and_then(|name| app.state.registry.get(name))
                .and_then(|registered| tasks::execution(registered.spec.task_support));
            if let (Some(execution), Value::Object(tool)) = (support, tool) {
                tool.insert("execution".into(), execution);
            }
        }
    }
    listed
}

/// A `tools/call` answer in this era's shape: a created task as `{"task": {...}}`.
fn call_shape(reply: Reply) -> Result<Reply, McpError> {
    let result = match reply {
        Reply::Json(result) => result,
        Reply::Encoded(bytes) => serde_json::from_slice(&bytes)
            .map_err(|err| McpError::Internal(format!("could not read back a result: {err}")))?,
        stream @ Reply::Stream(_) => return Ok(stream),
    };
    Ok(Reply::Json(call_result_shape(result)))
}

/// A `tools/call` result in this era's shape (see [`call_shape`]).
fn call_result_shape(result: Value) -> Value {
    if tasks::is_created_task(&result) {
        tasks::create_answer(result)
    } else {
        result
    }
}

/// A resources, prompts or completion answer in this era's shape: without the
/// current era's `resultType` and caching hints. A prompt that asks for input first
/// cannot ask in a session; it is refused with the way forward.
fn feature_shape(reply: Reply) -> Result<Reply, McpError> {
    let Reply::Json(result) = reply else {
        return Ok(reply);
    };
    if elicit::asks_for_input(&result) {
        return Err(McpError::InvalidParams(
            "this asks the client for input before it answers, which Docket asks only of \
             clients of revision 2026-07-28"
                .to_owned(),
        ));
    }
    let mut result = result_shape(result);
    if let Value::Object(object) = &mut result {
        object.remove("ttlMs");
        object.remove("cacheScope");
    }
    Ok(Reply::Json(result))
}

/// Whether a message is a JSON-RPC response (the client answering the server).
pub(crate) fn is_response(message: &Value) -> bool {
    message.get("method").is_none()
        && message.get("id").is_some()
        && (message.get("result").is_some() || message.get("error").is_some())
}

/// Takes a client's answer to one of the server's requests in its session, for the
/// call waiting for it on whichever replica runs it.
pub(crate) async fn answer(
    app: &App,
    identity: &Identity,
    headers: &HeaderMap,
    response: Value,
) -> Result<(), Refusal> {
    let Some(id) = session_id(headers) else {
        return Err(Refusal::no_session());
    };
    let session = open_session(app, identity, id).await?;
    let Some(request_id) = response.get("id").and_then(Value::as_str) else {
        return Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            docket_protocol::error::INVALID_REQUEST,
            "this response answers no request the server sent (its id is not one of them)",
        ));
    };
    match app
        .state
        .sessions
        .put_answer(&session.id, request_id, elicit::answer_of(&response))
        .await
    {
        Ok(true) => Ok(()),
        // Never asked, answered already, or nobody waits any more: one answer.
        Ok(false) => Err(Refusal::new(
            StatusCode::BAD_REQUEST,
            docket_protocol::error::INVALID_REQUEST,
            "no question with this id waits for an answer in this session: it was \
             answered already, its call ended, or the server never asked it",
        )),
        Err(err) => Err(Refusal::unavailable(&err)),
    }
}

/// What the pipeline reads of a request, from the session and the request's own
/// `_meta` (which in this era carries only the progress token).
fn session_meta(session: &Session, params: Option<&Value>) -> RequestMeta {
    let declared =
        ClientCapabilities::deserialize(&session.client_capabilities).unwrap_or_default();
    let progress_token = params
        .and_then(|params| params.get("_meta"))
        .and_then(|meta| meta.get(PROGRESS_TOKEN_KEY))
        .and_then(|token| ProgressToken::deserialize(token).ok());
    RequestMeta {
        protocol_version: session.protocol_version.clone(),
        // Of the extensions, this era has only the UI one, declared in `initialize`
        // (a task-augmented call adds the tasks one; a declared tasks extension
        // must not turn on the current era's task rules).
        client_capabilities: ClientCapabilities {
            extensions: declared.extensions.as_ref().and_then(|extensions| {
                let ui = extensions.get(docket_protocol::UI_EXTENSION)?;
                let mut kept = docket_protocol::JsonObject::new();
                kept.insert(docket_protocol::UI_EXTENSION.to_owned(), ui.clone());
                Some(kept)
            }),
            ..declared
        },
        client_info: session
            .client_info
            .as_ref()
            .and_then(|info| Implementation::deserialize(info).ok()),
        progress_token,
        log_level: session.log_level.clone(),
    }
}

/// The refusal of a revision Docket does not speak, naming the ones it does.
fn unsupported_version(requested: &str) -> Refusal {
    Refusal {
        status: StatusCode::BAD_REQUEST,
        error: ErrorObject {
            code: docket_protocol::error::INVALID_REQUEST,
            message: format!(
                "Unsupported protocol version {requested:?} in MCP-Protocol-Version: {}",
                versions_sentence()
            ),
            data: Some(serde_json::json!({
                "supported": LEGACY_VERSIONS,
                "requested": requested,
            })),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_used_within_its_idle_timeout_is_always_touched_in_time() {
        // Written at least four times within any idle timeout, never more than once
        // a minute: a session used every 2 s with an 8 s timeout is touched every 2 s.
        assert_eq!(touch_after(Duration::from_secs(8)), Duration::from_secs(2));
        assert_eq!(touch_after(DEFAULT_IDLE_TIMEOUT), TOUCH_AFTER);
        for seconds in [1, 8, 60, 61, 200, 239, 240, 241, 3600, 86_400] {
            let idle = Duration::from_secs(seconds);
            assert!(touch_after(idle) * 4 <= idle, "{seconds}");
            assert!(touch_after(idle) <= TOUCH_AFTER, "{seconds}");
        }
    }
}
