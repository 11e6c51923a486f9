//! The OpenAPI catalog tools of `api` connections: `api_list_endpoints`
//! (operations searched by words, ranked and paged, only those the caller's
//! persona may call and the connection allows) and `api_get_endpoint_schema`
//! (one operation's parameters, request body and responses, references
//! resolved, capped in size); and [`planned`], the request of an
//! `api_invoke_endpoint` or `api_export` call named by `operation_id`, whose
//! arguments are checked against the operation before anything is sent.

use std::sync::Arc;

use docket_export::api::{ApiRequest, RequestBody};
use docket_openapi::{Catalog, Operation};
use docket_protocol::JsonObject;
use docket_protocol::tools::CallToolResult;
use serde_json::{Map, Value, json};

use super::http_deps::HttpDeps;
use super::output::read_only;
use crate::config::ConnectionKind;
use crate::connections::HttpConnection;
use crate::persona::{Persona, glob_match};
use crate::refusal::Refusal;
use crate::registry::{RegistryError, ToolCall, ToolOutcome, ToolRegistry, ToolSpec};

/// The most bytes of one endpoint's schema an answer holds.
const MAX_SCHEMA_BYTES: u64 = 128 * 1024;

/// Endpoints on one page, unless the call asks for fewer.
const DEFAULT_PAGE: u64 = 20;

/// Registers the catalog tools when any `api` connection has a catalog.
pub(crate) fn register(
    registry: &mut ToolRegistry,
    deps: Arc<HttpDeps>,
) -> Result<(), RegistryError> {
    if !deps.catalogs.any() {
        return Ok(());
    }
    use super::output::{array, boolean, count, record, string, string_or_null};
    let list_deps = Arc::clone(&deps);
    registry.register(
        ToolSpec::new(
            "api_list_endpoints",
            "Finds the endpoints of an api connection in its OpenAPI catalog: words in `query` \
             are matched against operation ids, paths, summaries, tags and descriptions, best \
             first; without a query, every endpoint by path. Only endpoints you may call are \
             listed. Call one with api_invoke_endpoint and its operation_id.",
            json!({"type": "object", "properties": {
                "connection": {"type": "string", "minLength": 1, "maxLength": 128},
                "query": {"type": "string", "maxLength": docket_openapi::MAX_QUERY_CHARS},
                "offset": {"type": "integer", "minimum": 0, "maximum": docket_openapi::MAX_OPERATIONS},
                "limit": {"type": "integer", "minimum": 1, "maximum": docket_openapi::MAX_SEARCH_LIMIT}
            }, "required": ["connection"], "additionalProperties": false}),
        )
        .with_annotations(read_only())
        .with_output_schema(record(json!({
            "connection": string("The connection."),
            "catalogs": array(record(json!({
                "name": string("Where the document comes from."),
                "title": string_or_null("Its info.title."),
                "version": string_or_null("Its info.version."),
                "digest": string("Changes whenever the document does."),
            })), "The documents searched."),
            "total": count("How many endpoints you may call match."),
            "endpoints": array(record(json!({
                "operation_id": string("Pass it as operation_id."),
                "method": string("The HTTP method."),
                "path": string("The path template."),
                "summary": string_or_null("What it does."),
                "tags": array(string("A tag."), "Its tags."),
                "deprecated": boolean("Whether the API marks it deprecated."),
            })), "This page, best first."),
            "next_offset": {"type": ["integer", "null"], "description": "Pass it as offset for the next page."},
        }))),
        move |call: ToolCall| {
            let deps = Arc::clone(&list_deps);
            async move { ToolOutcome::Result(list(&deps, &call).await) }
        },
    )?;
    registry.register(
        ToolSpec::new(
            "api_get_endpoint_schema",
            "Describes one endpoint of an api connection's OpenAPI catalog: its parameters \
             (path, query, header), request body and responses with their schemas, references \
             resolved. Credentials are the connection's: security schemes and servers are left \
             out.",
            json!({"type": "object", "properties": {
                "connection": {"type": "string", "minLength": 1, "maxLength": 128},
                "operation_id": {"type": "string", "minLength": 1, "maxLength": 256}
            }, "required": ["connection", "operation_id"], "additionalProperties": false}),
        )
        .with_annotations(read_only())
        .with_output_schema(json!({"type": "object",
            "description": "The endpoint: operation_id, method, path, summary, description, tags, deprecated, parameters, request_body, responses, notes, truncated."})),
        move |call: ToolCall| {
            let deps = Arc::clone(&deps);
            async move { ToolOutcome::Result(schema(&deps, &call).await) }
        },
    )
}

/// The connection a call names, when it has a catalog.
fn with_catalog<'a>(
    deps: &'a HttpDeps,
    arguments: &JsonObject,
) -> Result<&'a HttpConnection, CallToolResult> {
    let connection = deps.connection(arguments, ConnectionKind::Api)?;
    if deps.catalogs.has(&connection.name) {
        Ok(connection)
    } else {
        Err(Refusal::NotFound.result(
            &format!("the connection {} has no OpenAPI catalog", connection.name),
            "Call it by method and path with api_invoke_endpoint.",
        ))
    }
}

async fn catalogs_of(
    deps: &HttpDeps,
    connection: &HttpConnection,
) -> Result<Vec<Arc<Catalog>>, CallToolResult> {
    deps.catalogs
        .of(&connection.name)
        .await
        .map_err(|why| Refusal::Unavailable.result(&why, "Try again later."))
}

/// Whether `persona` may call `operation` on `connection`, and the
/// connection allows it: the rules a call by method and path meets.
fn callable(persona: &Persona, connection: &HttpConnection, operation: &Operation) -> bool {
    connection.methods.contains(&operation.method)
        && (connection.paths.is_empty()
            || connection
                .paths
                .iter()
                .any(|glob| glob_match(glob, &operation.path)))
        && persona
            .check_api_route(&connection.name, &operation.method, &operation.path)
            .is_ok()
}

async fn list(deps: &HttpDeps, call: &ToolCall) -> CallToolResult {
    let connection = match with_catalog(deps, &call.arguments) {
        Ok(connection) => connection,
        Err(refused) => return refused,
    };
    let catalogs = match catalogs_of(deps, connection).await {
        Ok(catalogs) => catalogs,
        Err(refused) => return refused,
    };
    let number = |key: &str, default: u64| {
        call.arguments
            .get(key)
            .and_then(Value::as_u64)
            .unwrap_or(default)
    };
    let query = call
        .arguments
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let offset = usize::try_from(number("offset", 0)).unwrap_or(usize::MAX);
    let limit = usize::try_from(number("limit", DEFAULT_PAGE)).unwrap_or(20);
    let allowed = |operation: &Operation| callable(&call.persona, connection, operation);
    // Each document ranks its own endpoints; several follow one another, so
    // the page starts in the document the offset falls in.
    let mut total = 0;
    let mut endpoints = Vec::new();
    let mut skip = offset;
    for catalog in &catalogs {
        let want = limit - endpoints.len();
        let page = catalog.search(query, &allowed, skip, want.max(1));
        total += page.total;
        skip = skip.saturating_sub(page.total);
        if want == 0 {
            continue;
        }
        endpoints.extend(page.results.into_iter().map(|found| {
            json!({
                "operation_id": found.operation_id,
                "method": found.method,
                "path": found.path,
                "summary": found.summary,
                "tags": found.tags,
                "deprecated": found.deprecated,
            })
        }));
    }
    let next = offset + endpoints.len();
    CallToolResult::structured(json!({
        "connection": connection.name,
        "catalogs": catalogs.iter().map(|catalog| {
            let version = catalog.version();
            json!({"name": catalog.name(), "title": version.title, "version": version.version, "digest": version.digest})
        }).collect::<Vec<_>>(),
        "total": total,
        "endpoints": endpoints,
        "next_offset": (next < total).then_some(next),
    }))
}

/// The catalog of `connection` that holds `operation_id`, when the persona may
/// call it; one answer for unknown and not allowed.
async fn operation_of(
    deps: &HttpDeps,
    connection: &HttpConnection,
    persona: &Persona,
    operation_id: &str,
) -> Result<Arc<Catalog>, CallToolResult> {
    let catalogs = catalogs_of(deps, connection).await?;
    catalogs
        .into_iter()
        .find(|catalog| {
            catalog
                .operation(operation_id)
                .is_some_and(|operation| callable(persona, connection, operation))
        })
        .ok_or_else(|| {
            Refusal::NotFound.result(
                &format!(
                    "no endpoint {operation_id:?} you may call on {}",
                    connection.name
                ),
                "Find one with api_list_endpoints.",
            )
        })
}

async fn schema(deps: &HttpDeps, call: &ToolCall) -> CallToolResult {
    let connection = match with_catalog(deps, &call.arguments) {
        Ok(connection) => connection,
        Err(refused) => return refused,
    };
    let operation_id = call
        .arguments
        .get("operation_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let catalog = match operation_of(deps, connection, &call.persona, operation_id).await {
        Ok(catalog) => catalog,
        Err(refused) => return refused,
    };
    let cap = MAX_SCHEMA_BYTES.min(deps.results.max_bytes);
    match catalog.endpoint_schema(operation_id, usize::try_from(cap).unwrap_or(usize::MAX)) {
        Ok(schema) => CallToolResult::structured(schema),
        Err(error) => Refusal::InvalidArguments.result(&error.to_string(), "Try another endpoint."),
    }
}

/// The request of a call by `operation_id`: its arguments (`path_params`,
/// `query_params`, `headers`, `body`) checked against the operation, which the
/// caller's persona must be allowed to call.
///
/// # Errors
/// The refusal that names every argument problem, or an unknown operation.
pub(crate) async fn planned(
    deps: &HttpDeps,
    connection: &HttpConnection,
    operation_id: &str,
    arguments: &JsonObject,
) -> Result<ApiRequest, CallToolResult> {
    if !deps.catalogs.has(&connection.name) {
        return Err(Refusal::NotFound.result(
            &format!("the connection {} has no OpenAPI catalog", connection.name),
            "Call it by method and path.",
        ));
    }
    let catalogs = catalogs_of(deps, connection).await?;
    let Some(catalog) = catalogs
        .iter()
        .find(|catalog| catalog.operation(operation_id).is_some())
    else {
        return Err(Refusal::NotFound.result(
            &format!(
                "no endpoint {operation_id:?} you may call on {}",
                connection.name
            ),
            "Find one with api_list_endpoints.",
        ));
    };
    let mut args = Map::new();
    for (from, to) in [
        ("path_params", "path"),
        ("query_params", "query"),
        ("headers", "headers"),
        ("body", "body"),
    ] {
        if let Some(value) = arguments.get(from) {
            args.insert(to.to_owned(), value.clone());
        }
    }
    let plan = catalog.plan_call(operation_id, &args).map_err(|problems| {
        let said: Vec<String> = problems
            .iter()
            .take(20)
            .map(|problem| format!("{}: {}", rename(&problem.argument), problem.problem))
            .collect();
        Refusal::InvalidArguments.result(
            &format!(
                "the arguments do not fit {operation_id}: {}",
                said.join("; ")
            ),
            "See api_get_endpoint_schema for what it takes.",
        )
    })?;
    let mut headers = plan.headers;
    if plan.body.is_some()
        && let Some(content_type) = plan.content_type
    {
        headers.push(("Content-Type".to_owned(), content_type));
    }
    Ok(ApiRequest {
        method: plan.method,
        path: plan.path,
        query: plan.query,
        headers,
        body: plan.body.map(RequestBody::Json),
    })
}

/// An argument as the catalog names it (`path.id`), as the tool's caller
/// named it (`path_params.id`).
fn rename(argument: &str) -> String {
    for (inner, outer) in [("path", "path_params"), ("query", "query_params")] {
        if let Some(rest) = argument.strip_prefix(inner)
            && (rest.is_empty() || rest.starts_with('.'))
        {
            return format!("{outer}{rest}");
        }
    }
    argument.to_owned()
}
