//! The HTTP API tools: `api_invoke_endpoint` (one call, the response inlined up to
//! the connection's cap) and `api_export` (one call, the response streamed to an
//! asset; a task when the request declares the extension, as `trino_export`).
//!
//! Every call is checked before any I/O, and before any task exists (in the
//! consent step): the connection's allowed methods and paths, the persona's
//! `api_routes`, and the outbound rules of [`docket_export::api`] (the path stays
//! below the base URL, no caller credentials). What the upstream answers is
//! scrubbed of the connection's secrets before it is shown.

use docket_task::runtime::TaskContext;
use std::sync::Arc;
use std::time::Instant;

use docket_catalog::{Asset, CallKind, NewAsset, NewCallRecord};
use docket_export::api::{
    ApiError, ApiExportLimits, ApiRequest, ApiResponse, CallerAuth, RequestBody, export_response,
    extension_for, is_textual, normalize_path, pagination_hint,
};
use docket_identity::connection::{Identity as UpstreamIdentity, Presented};
use docket_protocol::JsonObject;
use docket_protocol::tools::CallToolResult;
use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::assets::asset_result;
use super::exporting::{
    ExportIds, ExportStart, configured, elapsed_ms, file_name, human_bytes, open_world_write,
    save_asset, start_export,
};
pub(crate) use super::http_deps::HttpDeps;
use crate::assets::Assets;
use crate::auth::{Identity, IdentityKind};
use crate::config::ConnectionKind;
use crate::connections::HttpConnection;
use crate::persona::{Persona, glob_match};
use crate::refusal::Refusal;
use crate::registry::{
    Consent, ConsentFuture, ConsentRequest, RegistryError, TaskSupport, ToolCall, ToolFuture,
    ToolHandler, ToolOutcome, ToolRegistry, ToolSpec,
};

/// The refusal of a call the persona's `api_routes` do not allow.
pub(crate) fn route_check(
    persona: &Persona,
    connection: &HttpConnection,
    method: &str,
    path: &str,
) -> Result<(), CallToolResult> {
    persona
        .check_api_route(&connection.name, method, path)
        .map_err(|message| {
            Refusal::Unauthorized.result(
                &message,
                "Ask an administrator to allow this route for your persona.",
            )
        })
}

/// A refused or failed call as a tool result. The messages of [`ApiError`] never
/// hold a credential.
pub(crate) fn api_failure(err: &ApiError) -> CallToolResult {
    let (kind, hint) = match err {
        ApiError::Path { .. }
        | ApiError::Method { .. }
        | ApiError::Header { .. }
        | ApiError::Query { .. } => (
            Refusal::InvalidArguments,
            "Send a path below the connection, and no credentials: the connection adds them.",
        ),
        ApiError::Timeout { .. } => (Refusal::UpstreamTimeout, "Try again, or ask for less."),
        ApiError::TooLarge { .. } => (
            Refusal::TooLarge,
            "Narrow the request (a smaller page, fewer fields).",
        ),
        _ => (Refusal::UpstreamFailed, "Try again later."),
    };
    kind.result(&err.to_string(), hint)
}

/// `connection` as `identity` reaches it: unchanged for a connection with its
/// own fixed credential; for one that carries each caller's identity, a copy
/// whose client sends the caller's exchanged token or identity headers (and
/// scrubs that token from everything it returns). The caller's own token is
/// never forwarded as it is.
///
/// # Errors
/// A tool error when the caller has no identity the connection can carry (an
/// API key where a token must be exchanged, a missing claim, the identity
/// provider's refusal); nothing reached the upstream then.
///
/// Every request of the returned connection carries the active trace
/// (`traceparent`), so the upstream's own record joins it.
pub(crate) async fn for_caller(
    connection: &HttpConnection,
    identity: &Identity,
) -> Result<HttpConnection, CallToolResult> {
    let mut connection = as_caller(connection, identity).await?;
    connection.client = connection
        .client
        .with_propagation(crate::telemetry::propagate);
    Ok(connection)
}

/// [`for_caller`] before the trace is added.
async fn as_caller(
    connection: &HttpConnection,
    identity: &Identity,
) -> Result<HttpConnection, CallToolResult> {
    let credential = match &connection.identity {
        UpstreamIdentity::Fixed => return Ok(connection.clone()),
        // Identity headers read the caller's claims, whoever they are: a
        // token's, an API key's entry, a script run's owner's.
        UpstreamIdentity::Headers(templates) => templates
            .fill(&identity.attributes.claims)
            .map(|headers| CallerAuth {
                bearer: None,
                headers,
            })
            .map_err(|refusal| refused_identity(connection, &refusal.to_string())),
        UpstreamIdentity::TokenExchange(_) => {
            let presented = match (&identity.kind, &identity.attributes.token) {
                (IdentityKind::Oidc, Some(token)) => Presented::AccessToken {
                    token: token.expose(),
                    claims: &identity.attributes.claims,
                },
                (IdentityKind::ApiKey, _) => Presented::ApiKey {
                    name: &identity.display_name,
                },
                _ if identity.run.is_some() => {
                    return Err(refused_identity(
                        connection,
                        "a script run has no access token of its owner to exchange; call this connection in person",
                    ));
                }
                _ => Presented::Anonymous,
            };
            match connection.identity.credential(presented).await {
                Ok(Some(credential)) => Ok(CallerAuth {
                    bearer: credential.bearer.map(|token| token.expose().to_owned()),
                    headers: credential.headers,
                }),
                Ok(None) => return Ok(connection.clone()),
                Err(error) => Err(refused_identity(connection, &error.to_string())),
            }
        }
    }?;
    let client = connection
        .client
        .with_caller(credential)
        .map_err(|err| refused_identity(connection, &err.to_string()))?;
    Ok(HttpConnection {
        client,
        ..connection.clone()
    })
}

fn refused_identity(connection: &HttpConnection, reason: &str) -> CallToolResult {
    Refusal::NotAllowed.result(
        &format!(
            "connection {} carries each caller's identity, and yours could not be given: {reason}",
            connection.name
        ),
        "Sign in with your identity provider's token, or ask an administrator.",
    )
}

/// A JSON result with every secret of `connection` replaced, since an upstream may
/// echo what it was sent.
pub(crate) fn scrubbed(connection: &HttpConnection, value: &Value) -> CallToolResult {
    let text = connection.client.scrub(&value.to_string());
    let value = serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()));
    CallToolResult::structured(value)
}

fn request_schema(export: bool, max_result_bytes: u64) -> Value {
    let mut properties = json!({
        "connection": {"type": "string", "minLength": 1, "maxLength": 128, "description": "An api connection (list_connections)."},
        "method": {"type": "string", "enum": ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]},
        "path": {"type": "string", "minLength": 1, "maxLength": 2048,
                 "description": "Below the connection's base URL, starting with /; no query string."},
        "query_params": {"type": "object", "maxProperties": 64, "additionalProperties": {
            "type": ["string", "number", "boolean", "array"], "maxLength": 4096, "maxItems": 64,
            "items": {"type": ["string", "number", "boolean"], "maxLength": 4096}}},
        "headers": {"type": "object", "maxProperties": 32, "additionalProperties": {"type": "string", "maxLength": 8192},
                    "description": "Extra headers; never Authorization or the connection's key header."},
        "body": {"description": "A JSON value (sent as JSON) or a string (sent as is)."},
        "operation_id": {"type": "string", "minLength": 1, "maxLength": 256,
                         "description": "Instead of method and path: an operation of the connection's OpenAPI catalog (api_list_endpoints); its arguments are checked against the operation before anything is sent."},
        "path_params": {"type": "object", "maxProperties": 64,
                        "description": "With operation_id: the path parameters by name."}
    });
    // method and path, or operation_id (checked when the call runs).
    let mut required = vec!["connection"];
    if export {
        if let Some(properties) = properties.as_object_mut() {
            properties.extend(export_properties());
            properties.insert(
                "timeout_seconds".into(),
                json!({"type": "integer", "minimum": 1}),
            );
        }
        required.push("name");
    } else if let Some(properties) = properties.as_object_mut() {
        // With a cursor, a call reads on in a body already fetched: it names the
        // connection, and the method and path are the first call's.
        required.retain(|key| *key == "connection");
        properties.insert(
            "cursor".into(),
            json!({"type": "string", "minLength": 1, "maxLength": crate::continuation::MAX_CURSOR_BYTES,
                   "description": "The cursor of an earlier, cut answer: returns what follows in its body. Send it with the connection only."}),
        );
        properties.insert(
            "max_result_bytes".into(),
            json!({"type": "integer", "minimum": 1024, "maximum": max_result_bytes,
                   "description": "The most bytes of body the answer holds (at most the connection's inline cap)."}),
        );
    }
    json!({"type": "object", "properties": properties, "required": required,
           "additionalProperties": false})
}

/// What `api_invoke_endpoint` answers ([`describe_response`]); a body cut at the
/// connection's cap may carry the continuation fields.
fn invoke_schema() -> Value {
    use super::output::{any, boolean, continuation, count, object, string, string_or_null};
    let mut properties = json!({
        "connection": string("The connection it called."),
        "method": string("The HTTP method sent."),
        "path": string("The path sent, below the connection's base URL."),
        "status": {"type": "integer", "description": "The HTTP status."},
        "ok": boolean("Whether the status is 2xx."),
        "content_type": string_or_null("The response's media type."),
        "headers": {"type": "object", "additionalProperties": {"type": "string"},
                    "description": "The response headers (no Set-Cookie), repeated ones joined by commas."},
        "size_bytes": count("How many bytes of the body were read."),
        "truncated": boolean("Whether the body was cut at the connection's inline cap."),
        "body": any("The body: parsed JSON, text, or null when empty or binary."),
        "pagination": {
            "type": ["object", "null"],
            "description": "A hint that there is a next page (Link rel=next or a cursor field); never followed.",
            "properties": {
                "has_more": boolean("Whether there is more."),
                "next_url": string_or_null("The next page's URL, when the hint is a link."),
                "next_cursor": any("The next page's cursor, when the hint is a field."),
                "source": string("Where the hint came from."),
            }
        },
        "binary": object(json!({
            "content_type": string_or_null("The binary body's media type."),
            "size_bytes": count("Its size."),
            "note": string("Why it is not inlined."),
        }), &["content_type", "size_bytes", "note"]),
        "note": string("Why the body was cut, and what to do."),
    });
    continuation(&mut properties);
    object(
        properties,
        &[
            "connection",
            "method",
            "path",
            "status",
            "ok",
            "content_type",
            "headers",
            "size_bytes",
            "truncated",
            "body",
            "pagination",
        ],
    )
}

/// What `api_export` answers: an export's result, with the upstream's status and
/// the content type it declared when that differs from what was stored.
fn export_output_schema() -> Value {
    let mut schema = super::assets::export_schema();
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        properties.insert(
            "upstream_status".into(),
            json!({"type": "integer", "description": "The HTTP status the API answered with."}),
        );
        properties.insert(
            "declared_content_type".into(),
            super::output::string("The content type the API declared."),
        );
    }
    schema
}

/// The asset properties every export tool takes.
pub(crate) fn export_properties() -> serde_json::Map<String, Value> {
    let properties = json!({
        "name": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Also the download file name."},
        "description": {"type": "string", "maxLength": 2000},
        "tags": {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 50}},
        "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 200}
    });
    properties.as_object().cloned().unwrap_or_default()
}

/// Registers `api_invoke_endpoint`, and `api_export` when assets are configured.
pub(crate) fn register(
    registry: &mut ToolRegistry,
    deps: Arc<HttpDeps>,
) -> Result<(), RegistryError> {
    if !deps.has(ConnectionKind::Api) {
        return Ok(());
    }
    registry.register(
        ToolSpec::new(
            "api_invoke_endpoint",
            "Calls one endpoint of an HTTP API connection and returns the status, headers and body \
             (JSON parsed, text inlined up to the connection's cap, binary bodies described, not \
             inlined), with pagination hints from Link rel=next or cursor fields. It never follows \
             pages or redirects.",
            request_schema(false, deps.results.max_bytes),
        )
        .with_annotations(open_world_write())
        .with_output_schema(invoke_schema()),
        HttpTool {
            deps: Arc::clone(&deps),
            run: |deps, call| Box::pin(invoke(deps, call)),
            // A cursor continues a body already fetched: its route is checked
            // again when its page is read.
            check: |deps, arguments, persona| {
                // A cursor continues a body already fetched, and an operation
                // is planned from its catalog when the call runs: both are
                // checked there.
                if arguments.contains_key("cursor") || arguments.contains_key("operation_id") {
                    return None;
                }
                prepare(deps, arguments, persona).err()
            },
        },
    )?;
    if deps.assets.is_some() {
        registry.register(
            ToolSpec::new(
                "api_export",
                "Calls one endpoint of an HTTP API connection and streams the response body to an \
                 asset file, whatever the status (reported as upstream_status), and returns the asset's \
                 metadata and download URL, not the data. Runs as a task when the client declares the \
                 tasks extension.",
                request_schema(true, deps.results.max_bytes),
            )
            .with_annotations(open_world_write())
            .with_task_support(TaskSupport::Optional)
            .with_ui_resource(crate::apps::RESULTS_VIEW_URI)
            .with_output_schema(export_output_schema()),
            HttpTool {
                deps,
                run: |deps, call| Box::pin(export_call(deps, call)),
                check: |deps, arguments, persona| {
                    if arguments.contains_key("operation_id") {
                        return None;
                    }
                    prepare(deps, arguments, persona).err()
                },
            },
        )?;
    }
    Ok(())
}

/// One API or GraphQL tool: what it runs, and the checks that refuse a call before
/// anything (or any task) starts.
pub(crate) struct HttpTool {
    pub(crate) deps: Arc<HttpDeps>,
    pub(crate) run: for<'a> fn(&'a HttpDeps, &'a ToolCall) -> BoxFuture<'a, CallToolResult>,
    pub(crate) check: fn(&HttpDeps, &JsonObject, &Persona) -> Option<CallToolResult>,
}

impl ToolHandler for HttpTool {
    fn call(&self, call: ToolCall) -> ToolFuture {
        let deps = Arc::clone(&self.deps);
        let run = self.run;
        Box::pin(async move { ToolOutcome::Result(run(&deps, &call).await) })
    }

    fn consent(&self, request: &ConsentRequest<'_>) -> ConsentFuture {
        let refusal = (self.check)(&self.deps, request.arguments, request.persona);
        Box::pin(async move {
            match refusal {
                Some(refusal) => Consent::Refuse(refusal),
                None => Consent::Proceed,
            }
        })
    }
}

/// The request the arguments describe, checked against the connection, the
/// persona's routes and the outbound rules.
fn prepare<'a>(
    deps: &'a HttpDeps,
    arguments: &JsonObject,
    persona: &Persona,
) -> Result<(&'a HttpConnection, ApiRequest), CallToolResult> {
    let connection = deps.connection(arguments, ConnectionKind::Api)?;
    let request = request_from(arguments)?;
    checked(connection, request, persona).map(|request| (connection, request))
}

/// The request the arguments describe — by `operation_id` from the
/// connection's catalog, or by method and path — checked as [`prepare`] checks.
async fn prepare_call<'a>(
    deps: &'a HttpDeps,
    arguments: &JsonObject,
    persona: &Persona,
) -> Result<(&'a HttpConnection, ApiRequest), CallToolResult> {
    let Some(operation_id) = arguments.get("operation_id").and_then(Value::as_str) else {
        return prepare(deps, arguments, persona);
    };
    let connection = deps.connection(arguments, ConnectionKind::Api)?;
    if arguments.contains_key("method") || arguments.contains_key("path") {
        return Err(Refusal::InvalidArguments.result(
            "send operation_id, or method and path, not both",
            "An operation names its own method and path.",
        ));
    }
    let request = super::endpoints::planned(deps, connection, operation_id, arguments).await?;
    checked(connection, request, persona).map(|request| (connection, request))
}

/// `request` checked against the connection, the persona's routes and the
/// outbound rules, its path in the one form every rule matches.
fn checked(
    connection: &HttpConnection,
    mut request: ApiRequest,
    persona: &Persona,
) -> Result<ApiRequest, CallToolResult> {
    // One form of the path: what every rule below matches is what is sent.
    request.path = normalize_path(&request.path).map_err(|err| api_failure(&err))?;
    if !connection.methods.contains(&request.method) {
        return Err(Refusal::NotAllowed.result(
            &format!(
                "the connection {} does not allow {} (it allows {})",
                connection.name,
                request.method,
                connection.methods.join(", ")
            ),
            "Use an allowed method, or ask an administrator to allow it.",
        ));
    }
    if !connection.paths.is_empty()
        && !connection
            .paths
            .iter()
            .any(|glob| glob_match(glob, &request.path))
    {
        return Err(Refusal::NotAllowed.result(
            &format!(
                "the connection {} does not allow the path {}",
                connection.name, request.path
            ),
            "Use a path the connection allows.",
        ));
    }
    route_check(persona, connection, &request.method, &request.path)?;
    connection
        .client
        .check(&request)
        .map_err(|err| api_failure(&err))?;
    Ok(request)
}

fn request_from(arguments: &JsonObject) -> Result<ApiRequest, CallToolResult> {
    if !(arguments.contains_key("method") && arguments.contains_key("path")) {
        return Err(Refusal::InvalidArguments.result(
            "send method and path, an operation_id, or the cursor of an earlier answer",
            "Name the endpoint with method and path, or by its operation_id (api_list_endpoints).",
        ));
    }
    let text = |key: &str| {
        arguments
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut query = Vec::new();
    if let Some(params) = arguments.get("query_params").and_then(Value::as_object) {
        for (name, value) in params {
            let values = match value {
                Value::Array(items) => items.iter().collect(),
                other => vec![other],
            };
            for value in values {
                let value = match value {
                    Value::String(text) => text.clone(),
                    Value::Number(_) | Value::Bool(_) => value.to_string(),
                    _ => {
                        return Err(Refusal::InvalidArguments.result(
&format!(
                                "query parameter {name:?} must be a string, number, boolean or a list of them"
                            ),
                            "Flatten the value.",
                        ));
                    }
                };
                query.push((name.clone(), value));
            }
        }
    }
    let headers = arguments
        .get("headers")
        .and_then(Value::as_object)
        .map(|headers| {
            headers
                .iter()
                .map(|(name, value)| (name.clone(), value.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let body = match arguments.get("body") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(RequestBody::Text(text.clone())),
        Some(value) => Some(RequestBody::Json(value.clone())),
    };
    Ok(ApiRequest {
        method: text("method"),
        path: text("path"),
        query,
        headers,
        body,
    })
}

/// `GET /items`, for the call catalog.
fn statement(request: &ApiRequest) -> String {
    format!("{} {}", request.method, request.path)
}

/// The call record of an API call, completed by the caller.
fn call_record(
    call: &ToolCall,
    connection: &HttpConnection,
    tool: &str,
    statement: String,
) -> NewCallRecord {
    NewCallRecord {
        id: String::new(),
        kind: match connection.kind {
            ConnectionKind::Graphql => CallKind::Graphql,
            _ => CallKind::Api,
        },
        tool: tool.to_owned(),
        connection: Some(connection.name.clone()),
        statement,
        subject: call.identity.subject.clone(),
        persona: Some(call.persona.name.clone()),
        success: false,
        outcome: "failed".into(),
        error_message: None,
        duration_ms: 0,
        rows: None,
        bytes: None,
        asset_id: None,
        task_id: call.task.as_ref().map(|task| task.id().to_string()),
        upstream_status: None,
        engine_user: None,
        upstream_ids: Vec::new(),
    }
}

/// A call's catalog row while the call runs. [`CallRecorder::finish`] records how
/// it ended; a recorder dropped before that (the call was aborted: its task was
/// cancelled or its client went away) records the call as cancelled, so every
/// call leaves its row.
pub(crate) struct CallRecorder {
    assets: Option<Assets>,
    /// The row so far.
    pub(crate) row: NewCallRecord,
    started: Instant,
    done: bool,
}

impl CallRecorder {
    /// Starts timing `row`; nothing is recorded without a catalog.
    pub(crate) fn new(assets: Option<&Assets>, row: NewCallRecord) -> Self {
        Self {
            assets: assets.cloned(),
            row,
            started: Instant::now(),
            done: false,
        }
    }

    /// Records the call: `Ok(upstream status)` when the upstream answered (a
    /// status of 400 or more is recorded as unsuccessful), or `Err((outcome,
    /// message))`.
    pub(crate) async fn finish(mut self, ended: Result<Option<u16>, (&str, String)>) {
        self.done = true;
        let Some(assets) = self.assets.clone() else {
            return;
        };
        let mut record = self.row.clone();
        record.duration_ms = elapsed_ms(self.started);
        match ended {
            Ok(status) => {
                record.upstream_status = status.or(record.upstream_status);
                record.success = status.is_none_or(|status| status < 400);
                record.outcome = "completed".into();
                if let Some(status) = status.filter(|status| *status >= 400) {
                    record.error_message = Some(format!("upstream answered {status}"));
                }
            }
            Err((outcome, message)) => {
                record.success = false;
                record.outcome = outcome.to_owned();
                record.error_message = Some(message);
            }
        }
        write_record(&assets, record).await;
    }

    /// Stores an export's asset row and ends the call with it (`bytes`, `rows`,
    /// the asset, the upstream `status`); when the row cannot be stored the call
    /// is recorded as failed and the refusal is returned.
    pub(crate) async fn finish_with_asset(
        mut self,
        assets: &Assets,
        asset: NewAsset,
        task: Option<&TaskContext>,
        (rows, status): (Option<i64>, u16),
    ) -> Result<Asset, CallToolResult> {
        let bytes = asset.size_bytes;
        match save_asset(assets, asset, task).await {
            Ok(asset) => {
                self.row.bytes = Some(bytes);
                self.row.rows = rows;
                self.row.asset_id = Some(asset.id.clone());
                self.finish(Ok(Some(status))).await;
                Ok(asset)
            }
            Err(refusal) => {
                self.fail(false, "the asset could not be recorded".into())
                    .await;
                Err(refusal)
            }
        }
    }

    /// Records a call that failed (or was cancelled) with `message`.
    pub(crate) async fn fail(self, cancelled: bool, message: String) {
        let outcome = if cancelled { "cancelled" } else { "failed" };
        self.finish(Err((outcome, message))).await;
    }
}

impl Drop for CallRecorder {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (Some(assets), Ok(runtime)) =
            (self.assets.clone(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let mut record = self.row.clone();
        record.duration_ms = elapsed_ms(self.started);
        record.success = false;
        record.outcome = "cancelled".into();
        record.error_message = Some("the call was cancelled before it finished".into());
        runtime.spawn(async move { write_record(&assets, record).await });
    }
}

async fn write_record(assets: &Assets, mut record: NewCallRecord) {
    if record.id.is_empty() {
        match docket_catalog::generate_id() {
            Ok(id) => record.id = id,
            Err(_) => return,
        }
    }
    assets.record_call(record).await;
}

async fn invoke(deps: &HttpDeps, call: &ToolCall) -> CallToolResult {
    if let Some(cursor) = call.arguments.get("cursor").and_then(Value::as_str) {
        return next_body_page(deps, call, cursor).await;
    }
    let (connection, request) = match prepare_call(deps, &call.arguments, &call.persona).await {
        Ok(prepared) => prepared,
        Err(refusal) => return refusal,
    };
    let connection = &match for_caller(connection, &call.identity).await {
        Ok(connection) => connection,
        Err(refusal) => return refusal,
    };
    let mut recorder = CallRecorder::new(
        deps.assets.as_ref(),
        call_record(call, connection, "api_invoke_endpoint", statement(&request)),
    );
    let cap = inline_cap(deps, connection, call);
    let fetched = match &deps.continuation {
        Some(_) => {
            connection
                .client
                .fetch_continuing(&request, cap, &call.cancel)
                .await
        }
        None => connection
            .client
            .fetch(&request, cap, &call.cancel)
            .await
            .map(|response| (response, None)),
    };
    let (mut response, rest) = match fetched {
        Ok(fetched) => fetched,
        Err(err) => {
            recorder
                .fail(matches!(err, ApiError::Cancelled), err.to_string())
                .await;
            return api_failure(&err);
        }
    };
    recorder.row.bytes = i64::try_from(response.body.len()).ok();
    recorder.finish(Ok(Some(response.status))).await;
    let textual = response.content_type().as_deref().is_none_or(is_textual);
    let kept = match (rest, &deps.continuation) {
        (Some(rest), Some(continuation)) if textual => {
            // One scrub over the cut part and the rest, so a secret split between
            // them is found; the part answered ends at a whole character.
            let mut scrubber = connection.client.scrubber().stream();
            let settled = scrubber.push(&response.body);
            let (text, carry) = crate::continuation::text_and_carry(&settled);
            response.body = bytes::Bytes::from(text);
            let head = describe_response(connection, &request, &response, cap);
            let head = json!([{
                "method": head["method"], "path": head["path"], "status": head["status"],
                "ok": head["ok"], "content_type": head["content_type"], "headers": head["headers"],
            }]);
            Some(
                continuation
                    .keep_rest(
                        crate::continuation::CutAnswer {
                            owner: &call.identity.subject,
                            tool: "api_invoke_endpoint",
                            connection: &connection.name,
                            columns: head,
                            source_id: None,
                        },
                        Vec::new(),
                        Box::new(crate::continuation::BodySource::new(rest, scrubber, carry)),
                    )
                    .await,
            )
        }
        _ => None,
    };
    let mut result = describe_response(connection, &request, &response, cap);
    match kept {
        Some(Ok(cursor)) => {
            result["cursor"] = Value::String(cursor.encode());
            result["note"] = Value::String(format!(
                "the body is longer than the {cap} bytes an answer holds (max_result_bytes) and was cut \
                 there; call \
                 api_invoke_endpoint with this cursor (and the connection) for what follows, \
                 or use api_export for the whole body"
            ));
        }
        Some(Err(not_kept)) => {
            result["note"] = Value::String(format!(
                "the body is longer than the {cap} bytes an answer holds (max_result_bytes) and was cut \
                 there; \
                 {not_kept}; use api_export for the whole body"
            ));
        }
        None => {}
    }
    scrubbed(connection, &result)
}

/// What follows a cut body, from the spool its cursor names.
async fn next_body_page(deps: &HttpDeps, call: &ToolCall, cursor: &str) -> CallToolResult {
    let Some(continuation) = &deps.continuation else {
        return Refusal::NotConfigured.result(
            "this server keeps no continuations",
            "Call the endpoint again, or use api_export for the whole body.",
        );
    };
    let connection = match deps.connection(&call.arguments, ConnectionKind::Api) {
        Ok(connection) => connection,
        Err(refusal) => return refusal,
    };
    let budget = inline_cap(deps, connection, call);
    let unknown = || {
        Refusal::NotFound.result(
            &crate::continuation::PageError::Unknown.to_string(),
            "Call the endpoint again.",
        )
    };
    let page = match continuation
        .page(
            &call.identity.subject,
            "api_invoke_endpoint",
            cursor,
            usize::MAX,
            budget,
        )
        .await
    {
        Ok(page) => page,
        Err(
            error @ (crate::continuation::PageError::Unknown
            | crate::continuation::PageError::PastEnd),
        ) => {
            return Refusal::NotFound.result(&error.to_string(), "Call the endpoint again.");
        }
        Err(error @ crate::continuation::PageError::RowTooLarge(_)) => {
            return Refusal::InvalidArguments.result(
                &error.to_string(),
                "Raise max_result_bytes, or use api_export for the whole body.",
            );
        }
        Err(error) => {
            return Refusal::Unavailable.result(&error.to_string(), "Try again in a moment.");
        }
    };
    let head = &page.columns[0];
    // The connection named must be the body's, and the persona's reach is checked
    // again: access that ended, ends for the rest of a body too.
    let still_allowed = page.connection == connection.name
        && call.persona.may_use_connection(&page.connection)
        && call
            .persona
            .check_api_route(
                &page.connection,
                head["method"].as_str().unwrap_or_default(),
                head["path"].as_str().unwrap_or_default(),
            )
            .is_ok();
    if !still_allowed {
        return unknown();
    }
    let body: String = page.rows.iter().filter_map(Value::as_str).collect();
    let mut result = json!({
        "connection": page.connection,
        "method": head["method"],
        "path": head["path"],
        "status": head["status"],
        "ok": head["ok"],
        "content_type": head["content_type"],
        "headers": head["headers"],
        "size_bytes": body.len(),
        "truncated": page.next.is_some(),
        "body": body,
        "pagination": null,
    });
    if let Some(next) = &page.next {
        result["cursor"] = Value::String(next.encode());
    }
    if let Some((_, bytes)) = page.remaining {
        result["remaining_bytes"] = json!(bytes);
    }
    if let Some(note) = page.note {
        result["note"] = Value::String(note.replace("trino_export", "api_export"));
    }
    scrubbed(connection, &result)
}

/// The most body bytes an inline answer holds: the call's byte budget
/// (`max_result_bytes`, else `results.default_bytes`), never past the connection's
/// inline cap.
fn inline_cap(deps: &HttpDeps, connection: &HttpConnection, call: &ToolCall) -> u64 {
    crate::continuation::budget(&deps.results, &call.arguments).min(connection.max_response_bytes)
}

/// The inline answer: status, headers (no `Set-Cookie`), the body parsed as JSON,
/// as text, or described when binary, and a pagination hint.
fn describe_response(
    connection: &HttpConnection,
    request: &ApiRequest,
    response: &ApiResponse,
    cap: u64,
) -> Value {
    let mut headers = serde_json::Map::new();
    for (name, value) in &response.headers {
        if name == reqwest::header::SET_COOKIE {
            continue;
        }
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match headers.get_mut(name.as_str()) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(&value);
            }
            _ => {
                headers.insert(name.as_str().to_owned(), Value::String(value));
            }
        }
    }
    let content_type = response.content_type();
    let text = std::str::from_utf8(&response.body).ok();
    let textual = content_type.as_deref().map_or(text.is_some(), is_textual);
    let size = response.body.len();
    let (body, parsed, binary) = match text {
        Some(text) if textual => {
            let parsed: Option<Value> = (!response.truncated)
                .then(|| serde_json::from_str(text).ok())
                .flatten();
            match parsed {
                Some(json) => (json.clone(), Some(json), Value::Null),
                None => (Value::String(text.to_owned()), None, Value::Null),
            }
        }
        _ if size == 0 => (Value::Null, None, Value::Null),
        _ => (
            Value::Null,
            None,
            json!({
                "content_type": content_type,
                "size_bytes": size,
                "note": "a binary body is not inlined; use api_export to store it as an asset",
            }),
        ),
    };
    let pagination = pagination_hint(&response.headers, parsed.as_ref()).map(|hint| {
        json!({"has_more": hint.has_more, "next_url": hint.next_url,
               "next_cursor": hint.next_cursor, "source": hint.source})
    });
    let mut result = json!({
        "connection": connection.name,
        "method": request.method,
        "path": request.path,
        "status": response.status,
        "ok": (200..300).contains(&response.status),
        "content_type": content_type,
        "headers": headers,
        "size_bytes": size,
        "truncated": response.truncated,
        "body": body,
        "pagination": pagination,
    });
    if !binary.is_null() {
        result["binary"] = binary;
    }
    if response.truncated {
        result["note"] = Value::String(format!(
            "the body is longer than the {cap} bytes an answer holds (max_result_bytes, at most the connection's inline cap of {} bytes) and was cut there; use api_export for the whole body",
            connection.max_response_bytes
        ));
    }
    result
}

async fn export_call(deps: &HttpDeps, call: &ToolCall) -> CallToolResult {
    let assets = match configured(deps.assets.as_ref()) {
        Ok(assets) => assets,
        Err(refusal) => return refusal,
    };
    let (connection, request) = match prepare_call(deps, &call.arguments, &call.persona).await {
        Ok(prepared) => prepared,
        Err(refusal) => return refusal,
    };
    let connection = &match for_caller(connection, &call.identity).await {
        Ok(connection) => connection,
        Err(refusal) => return refusal,
    };
    let ExportStart {
        timeout,
        owner,
        fields,
        ids: ExportIds { asset_id, call_id },
    } = match start_export(
        assets,
        &deps.exports,
        call,
        "this idempotency key already produced this asset; the API was not called again",
    )
    .await
    {
        Ok(start) => start,
        Err(answer) => return answer,
    };
    let mut recorder = CallRecorder::new(
        deps.assets.as_ref(),
        call_record(call, connection, "api_export", statement(&request)),
    );
    recorder.row.id = call_id.clone();
    let progress = call.progress.clone();
    let report_progress = move |bytes: u64| {
        progress.report(
            bytes,
            None,
            Some(format!("{} received", human_bytes(bytes))),
        );
    };
    let key_for = |content_type: &str| {
        format!(
            "{asset_id}/{}",
            file_name(&fields.name, extension_for(content_type))
        )
    };
    let outcome = export_response(
        &connection.client,
        &request,
        assets.sink.as_ref(),
        &key_for,
        ApiExportLimits {
            max_bytes: deps.exports.max_bytes,
            timeout,
        },
        &call.cancel,
        &report_progress,
    )
    .await;
    let report = match outcome {
        Ok(report) => report,
        Err(err) => {
            recorder.fail(err.is_cancelled(), err.to_string()).await;
            return Refusal::ExportFailed.result(
                &format!("the export failed: {err}"),
                "Nothing was stored. Fix the cause and call again.",
            );
        }
    };
    let extension = extension_for(&report.content_type);
    let new_asset = NewAsset {
        id: asset_id.clone(),
        owner,
        name: fields.name.clone(),
        description: fields.description,
        tags: fields.tags,
        format: extension.to_owned(),
        content_type: report.content_type.clone(),
        storage_key: key_for(&report.content_type),
        size_bytes: i64::try_from(report.bytes).unwrap_or(i64::MAX),
        row_count: None,
        connection: Some(connection.name.clone()),
        tool: "api_export".into(),
        idempotency_key: fields.idempotency_key,
        task_id: recorder.row.task_id.clone(),
        call_id: Some(call_id.clone()),
    };
    let asset = match recorder
        .finish_with_asset(
            assets,
            new_asset,
            call.task.as_deref(),
            (None, report.status),
        )
        .await
    {
        Ok(asset) => asset,
        Err(refusal) => return refusal,
    };
    let mut message = format!(
        "exported {} from {} (HTTP {}) to {}",
        human_bytes(report.bytes),
        statement(&request),
        report.status,
        asset.name
    );
    if report.status >= 400 {
        message.push_str(
            "; the upstream answered with an error status, and its body was stored as it came",
        );
    }
    let mut result = asset_result(assets, &asset, &message, Some(&call_id)).await;
    if let Some(content) = result.structured_content.as_mut() {
        content["upstream_status"] = json!(report.status);
        if let Some(declared) = &report.declared_content_type {
            content["declared_content_type"] = json!(declared);
        }
    }
    match &result.structured_content {
        Some(content) => CallToolResult::structured(content.clone()),
        None => result,
    }
}
