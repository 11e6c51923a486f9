//! The GraphQL tools: `graphql_query` (one query, its `data` and `errors`
//! returned) and `graphql_export` (a query's result, optionally page after page
//! through a Relay `pageInfo`, written to one JSON or JSON Lines asset; a task when
//! the request declares the extension, as `trino_export`).
//!
//! Documents are parsed before any I/O and before any task exists: syntax errors,
//! mutations and subscriptions are refused, the operation is chosen by
//! `operation_name`, and a pagination cursor variable must be one the operation
//! declares. GraphQL `errors` are reported, never hidden: a query shows them
//! beside any data; an export with errors stores nothing and says why.

use std::sync::Arc;

use docket_catalog::{CallKind, NewAsset, NewCallRecord};
use docket_export::graphql::{
    GraphqlError, GraphqlExportLimits, GraphqlExportPlan, GraphqlFormat, GraphqlRequest, Operation,
    Pagination, check_document, execute, export_query, summarize_errors,
};
use docket_protocol::JsonObject;
use docket_protocol::tools::{CallToolResult, ToolAnnotations};
use serde_json::{Value, json};

use super::api::{
    CallRecorder, HttpDeps, HttpTool, api_failure, export_properties, for_caller, route_check,
    scrubbed,
};
use super::assets::asset_result;
use super::exporting::{
    ExportIds, ExportStart, begin_upload, configured, file_name, human_bytes, open_world_write,
    start_export,
};
use crate::config::ConnectionKind;
use crate::connections::HttpConnection;
use crate::persona::Persona;
use crate::refusal::Refusal;
use crate::registry::{RegistryError, TaskSupport, ToolCall, ToolRegistry, ToolSpec};

/// The most pages `graphql_export` follows.
const MAX_PAGES: u64 = 10_000;

fn schema(export: bool, max_result_bytes: u64) -> Value {
    let mut properties = json!({
        "connection": {"type": "string", "minLength": 1, "maxLength": 128, "description": "A graphql connection (list_connections)."},
        "query": {"type": "string", "minLength": 1, "maxLength": 100000, "description": "A GraphQL document: queries (and fragments) only."},
        "variables": {"type": "object"},
        "operation_name": {"type": "string", "minLength": 1, "maxLength": 256, "description": "Which operation to run when the document has several."}
    });
    let mut required = vec!["connection", "query"];
    if export {
        if let Some(properties) = properties.as_object_mut() {
            properties.extend(export_properties());
            properties.insert(
                "format".into(),
                json!({"type": "string", "enum": ["json", "jsonl"]}),
            );
            properties.insert(
                "timeout_seconds".into(),
                json!({"type": "integer", "minimum": 1}),
            );
            properties.insert(
                "paginate".into(),
                json!({"type": "object", "properties": {
                    "page_info_path": {"type": "string", "minLength": 1, "maxLength": 500,
                        "description": "Dotted path below data of a Relay pageInfo { hasNextPage endCursor }, e.g. items.pageInfo."},
                    "cursor_variable": {"type": "string", "minLength": 1, "maxLength": 100,
                        "description": "The variable endCursor is fed into, e.g. after."},
                    "max_pages": {"type": "integer", "minimum": 1, "maximum": MAX_PAGES}
                }, "required": ["page_info_path", "cursor_variable", "max_pages"], "additionalProperties": false}),
            );
        }
        required.extend(["name", "format"]);
    } else if let Some(properties) = properties.as_object_mut() {
        properties.insert(
            "max_result_bytes".into(),
            json!({"type": "integer", "minimum": 1024, "maximum": max_result_bytes,
                   "description": "The most bytes of response the answer may hold (at most the connection's cap); a larger one is refused."}),
        );
    }
    json!({"type": "object", "properties": properties, "required": required,
           "additionalProperties": false})
}

/// Registers `graphql_query`, and `graphql_export` when assets are configured.
pub(crate) fn register(
    registry: &mut ToolRegistry,
    deps: Arc<HttpDeps>,
) -> Result<(), RegistryError> {
    if !deps.has(ConnectionKind::Graphql) {
        return Ok(());
    }
    registry.register(
        ToolSpec::new(
            "graphql_query",
            "Runs one GraphQL query (no mutations or subscriptions) on a graphql connection and returns \
             its data and any GraphQL errors.",
            schema(false, deps.results.max_bytes),
        )
        .with_annotations(ToolAnnotations {
            read_only_hint: Some(true),
            destructive_hint: Some(false),
            idempotent_hint: Some(true),
            open_world_hint: Some(true),
            ..ToolAnnotations::default()
        })
        .with_output_schema(query_schema()),
        HttpTool {
            deps: Arc::clone(&deps),
            run: |deps, call| Box::pin(query(deps, call)),
            check: |deps, arguments, persona| prepare(deps, arguments, persona).err(),
        },
    )?;
    if deps.assets.is_some() {
        registry.register(
            ToolSpec::new(
                "graphql_export",
                "Runs one GraphQL query and writes the result to an asset file (json or jsonl), \
                 optionally following Relay cursor pagination (paginate) and writing the connection's \
                 nodes of every page; returns the asset's metadata and download URL, not the data. \
                 Runs as a task when the client declares the tasks extension.",
                schema(true, deps.results.max_bytes),
            )
            .with_annotations(open_world_write())
            .with_task_support(TaskSupport::Optional)
            .with_ui_resource(crate::apps::RESULTS_VIEW_URI)
            .with_output_schema(export_output_schema()),
            HttpTool {
                deps,
                run: |deps, call| Box::pin(export_call(deps, call)),
                check: |deps, arguments, persona| prepare(deps, arguments, persona).err(),
            },
        )?;
    }
    Ok(())
}

/// What `graphql_query` answers, also when it is an error (no data, or a status
/// that is not 2xx): the data, the GraphQL errors when there are any, and the
/// continuation fields when a cut answer carries them.
fn query_schema() -> Value {
    use super::output::{any, array, continuation, object, string, string_or_null};
    let mut properties = json!({
        "connection": string("The connection it ran on."),
        "operation": string_or_null("The operation run, when the document names it."),
        "status": {"type": "integer", "description": "The HTTP status of the endpoint's answer."},
        "data": any("The answer's data, as the endpoint sent it (null when it sent none)."),
        "errors": array(any("One GraphQL error, as sent."), "The answer's GraphQL errors."),
        "message": string("The errors, summarized."),
        "extensions": any("The answer's extensions, as sent."),
    });
    continuation(&mut properties);
    object(properties, &["connection", "operation", "status", "data"])
}

/// What `graphql_export` answers: an export's result with the pages read and
/// whether more exist beyond `max_pages` (absent on an idempotent replay).
fn export_output_schema() -> Value {
    let mut schema = super::assets::export_schema();
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        properties.insert(
            "pages".into(),
            super::output::count("How many pages were read."),
        );
        properties.insert(
            "has_more".into(),
            super::output::boolean("Whether more pages exist beyond max_pages."),
        );
    }
    schema
}

/// A checked call: the connection, the operation, the request and the pagination.
struct Prepared<'a> {
    connection: &'a HttpConnection,
    operation: Operation,
    request: GraphqlRequest,
    pagination: Option<Pagination>,
}

fn prepare<'a>(
    deps: &'a HttpDeps,
    arguments: &JsonObject,
    persona: &Persona,
) -> Result<Prepared<'a>, CallToolResult> {
    let connection = deps.connection(arguments, ConnectionKind::Graphql)?;
    let document = arguments
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let operation_name = arguments
        .get("operation_name")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let operation =
        check_document(document, operation_name.as_deref()).map_err(|err| graphql_failure(&err))?;
    route_check(
        persona,
        connection,
        "POST",
        connection.client.base_url().path(),
    )?;
    let pagination = match arguments.get("paginate").and_then(Value::as_object) {
        None => None,
        Some(paginate) => {
            let text = |key: &str| {
                paginate
                    .get(key)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            let pagination = Pagination {
                page_info_path: text("page_info_path"),
                cursor_variable: text("cursor_variable"),
                max_pages: paginate
                    .get("max_pages")
                    .and_then(Value::as_u64)
                    .and_then(|pages| u32::try_from(pages).ok())
                    .unwrap_or(1),
            };
            if !operation.variables.contains(&pagination.cursor_variable) {
                return Err(Refusal::InvalidArguments.result(
&format!(
                        "the operation declares no variable ${} for the cursor",
                        pagination.cursor_variable
                    ),
                    "Declare the cursor variable in the operation, e.g. query($after: String), and pass it to the connection field.",
                ));
            }
            if pagination.page_info_path.split('.').any(str::is_empty) {
                return Err(Refusal::InvalidArguments.result(
                    "page_info_path must be a dotted path such as items.pageInfo",
                    "Name the fields from data down to pageInfo.",
                ));
            }
            Some(pagination)
        }
    };
    let request = GraphqlRequest {
        query: document.to_owned(),
        variables: arguments
            .get("variables")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        operation_name,
    };
    Ok(Prepared {
        connection,
        operation,
        request,
        pagination,
    })
}

fn graphql_failure(err: &GraphqlError) -> CallToolResult {
    match err {
        GraphqlError::Api(api) => api_failure(api),
        GraphqlError::Syntax { .. } | GraphqlError::Refused { .. } => Refusal::InvalidQuery.result(
            &err.to_string(),
            "Send one read-only query document; name the operation when there are several.",
        ),
        GraphqlError::Errors { .. } => Refusal::GraphqlErrors.result(
            &err.to_string(),
            "Fix the query (fields, arguments, variables) and call again.",
        ),
        _ => Refusal::UpstreamFailed.result(
            &err.to_string(),
            "Check the query and the endpoint, then call again.",
        ),
    }
}

/// Records a failed call, its message scrubbed of the connection's secrets.
async fn fail(recorder: CallRecorder, connection: &HttpConnection, err: &GraphqlError) {
    recorder
        .fail(
            err.is_cancelled(),
            connection.client.scrub(&err.to_string()),
        )
        .await;
}

fn call_record(call: &ToolCall, prepared: &Prepared<'_>, tool: &str) -> NewCallRecord {
    NewCallRecord {
        id: String::new(),
        kind: CallKind::Graphql,
        tool: tool.to_owned(),
        connection: Some(prepared.connection.name.clone()),
        statement: prepared.operation.label(),
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

async fn query(deps: &HttpDeps, call: &ToolCall) -> CallToolResult {
    let mut prepared = match prepare(deps, &call.arguments, &call.persona) {
        Ok(prepared) => prepared,
        Err(refusal) => return refusal,
    };
    let caller_connection = match for_caller(prepared.connection, &call.identity).await {
        Ok(connection) => connection,
        Err(refusal) => return refusal,
    };
    prepared.connection = &caller_connection;
    let mut recorder = CallRecorder::new(
        deps.assets.as_ref(),
        call_record(call, &prepared, "graphql_query"),
    );
    let connection = prepared.connection;
    // The call's byte budget, never past the connection's cap: a GraphQL response is
    // one JSON document that means something only whole, so one larger than the
    // budget is refused (TooLarge), not cut.
    let cap = crate::continuation::budget(&deps.results, &call.arguments)
        .min(connection.max_response_bytes);
    let response = match execute(&connection.client, &prepared.request, cap, &call.cancel).await {
        Ok(response) => response,
        Err(err) => {
            fail(recorder, connection, &err).await;
            return scrub_result(connection, graphql_failure(&err));
        }
    };
    recorder.row.bytes = i64::try_from(response.bytes).ok();
    let failed = response.data.is_null() || !(200..300).contains(&response.status);
    let ended = if response.errors.is_empty() && !failed {
        Ok(Some(response.status))
    } else {
        recorder.row.upstream_status = Some(response.status);
        Err((
            "tool_error",
            connection.client.scrub(&summarize_errors(&response.errors)),
        ))
    };
    recorder.finish(ended).await;
    let mut value = json!({
        "connection": connection.name,
        "operation": prepared.operation.name,
        "status": response.status,
        "data": response.data,
    });
    if !response.errors.is_empty() {
        value["errors"] = Value::Array(response.errors.clone());
        value["message"] = json!(format!(
            "the endpoint answered with {} GraphQL error(s): {}",
            response.errors.len(),
            summarize_errors(&response.errors)
        ));
    }
    if let Some(extensions) = response.extensions {
        value["extensions"] = extensions;
    }
    let mut result = scrubbed(connection, &value);
    if failed {
        result.is_error = Some(true);
    }
    result
}

/// `result` with the connection's secrets replaced in its text and content.
fn scrub_result(connection: &HttpConnection, result: CallToolResult) -> CallToolResult {
    let Ok(text) = serde_json::to_string(&result) else {
        return result;
    };
    serde_json::from_str(&connection.client.scrub(&text)).unwrap_or(result)
}

async fn export_call(deps: &HttpDeps, call: &ToolCall) -> CallToolResult {
    let assets = match configured(deps.assets.as_ref()) {
        Ok(assets) => assets,
        Err(refusal) => return refusal,
    };
    let mut prepared = match prepare(deps, &call.arguments, &call.persona) {
        Ok(prepared) => prepared,
        Err(refusal) => return refusal,
    };
    let caller_connection = match for_caller(prepared.connection, &call.identity).await {
        Ok(connection) => connection,
        Err(refusal) => return refusal,
    };
    prepared.connection = &caller_connection;
    let format = match call.arguments.get("format").and_then(Value::as_str) {
        Some("jsonl") => GraphqlFormat::Jsonl,
        _ => GraphqlFormat::Json,
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
        "this idempotency key already produced this asset; the query was not run again",
    )
    .await
    {
        Ok(start) => start,
        Err(answer) => return answer,
    };
    let connection = prepared.connection;
    let storage_key = format!("{asset_id}/{}", file_name(&fields.name, format.as_str()));
    let upload = match begin_upload(assets, &storage_key).await {
        Ok(upload) => upload,
        Err(refusal) => return refusal,
    };
    let mut recorder = CallRecorder::new(
        deps.assets.as_ref(),
        call_record(call, &prepared, "graphql_export"),
    );
    recorder.row.id = call_id.clone();
    let progress = call.progress.clone();
    let report_progress = move |pages: u32, records: u64, bytes: u64| {
        progress.report(
            u64::from(pages),
            None,
            Some(format!(
                "{pages} pages, {records} records, {} written",
                human_bytes(bytes)
            )),
        );
    };
    let outcome = export_query(
        &connection.client,
        GraphqlExportPlan {
            request: prepared.request.clone(),
            pagination: prepared.pagination.clone(),
            format,
        },
        upload,
        GraphqlExportLimits {
            max_bytes: deps.exports.max_bytes,
            max_response_bytes: connection.max_response_bytes,
            timeout,
        },
        &call.cancel,
        &report_progress,
    )
    .await;
    let report = match outcome {
        Ok(report) => report,
        Err(err) => {
            fail(recorder, connection, &err).await;
            let mut result = graphql_failure(&err);
            if let (GraphqlError::Errors { errors }, Some(content)) =
                (&err, result.structured_content.as_mut())
            {
                content["errors"] = Value::Array(errors.clone());
            }
            return scrub_result(connection, result);
        }
    };
    let new_asset = NewAsset {
        id: asset_id,
        owner,
        name: fields.name.clone(),
        description: fields.description,
        tags: fields.tags,
        format: format.as_str().to_owned(),
        content_type: format.content_type().to_owned(),
        storage_key,
        size_bytes: i64::try_from(report.bytes).unwrap_or(i64::MAX),
        row_count: i64::try_from(report.records).ok(),
        connection: Some(connection.name.clone()),
        tool: "graphql_export".into(),
        idempotency_key: fields.idempotency_key,
        task_id: recorder.row.task_id.clone(),
        call_id: Some(call_id.clone()),
    };
    let rows = i64::try_from(report.records).ok();
    let asset = match recorder
        .finish_with_asset(
            assets,
            new_asset,
            call.task.as_deref(),
            (rows, report.status),
        )
        .await
    {
        Ok(asset) => asset,
        Err(refusal) => return refusal,
    };
    let mut message = format!(
        "exported {} records from {} page(s) ({}) to {}",
        report.records,
        report.pages,
        human_bytes(report.bytes),
        asset.name
    );
    if report.has_more {
        message.push_str("; more pages exist beyond max_pages");
    }
    let mut result = asset_result(assets, &asset, &message, Some(&call_id)).await;
    if let Some(content) = result.structured_content.as_mut() {
        content["pages"] = json!(report.pages);
        content["has_more"] = json!(report.has_more);
        let content = content.clone();
        result = CallToolResult::structured(content);
    }
    result
}
