//! The Trino tools: `trino_query`, `trino_explain`, `trino_browse`,
//! `trino_describe_table` and `trino_export`.
//!
//! SQL is checked read-only by parsing before anything reaches Trino. Queries and
//! exports whose `EXPLAIN` estimate passes `consent.trino.row_threshold` (or whose
//! connection says `consent: always`) ask the user first, through an
//! `input_required` elicitation — before any task exists.

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use docket_catalog::{CallKind, NewAsset, NewCallRecord};
use docket_export::export::{ExportError, ExportLimits, export_query};
use docket_export::format::Format;
use docket_export::readonly::{ReadOnlyStatement, StatementKind, check_read_only_with};
use docket_export::trino::{Collected, TrinoClient, TrinoError, explain_estimated_rows};
use docket_protocol::JsonObject;
use docket_protocol::meta::ClientCapabilities;
use docket_protocol::mrtr::{ElicitRequestParams, InputRequest, InputRequests};
use docket_protocol::tools::{CallToolResult, ToolAnnotations};
use serde_json::{Value, json};

use super::assets::asset_result;
use super::exporting::{
    AssetFields, ExportIds, ExportStart, begin_upload, configured, file_name, human_bytes,
    open_world_write, save_asset, start_export,
};
use super::output::{
    any, array, boolean, continuation, count, count_or_null, object, record, string,
};
use crate::assets::Assets;
use crate::config::ExportsConfig;
use crate::connections::{ConsentMode, TrinoConnection};
use crate::continuation::PageError;
use crate::refusal::Refusal;
use crate::registry::{
    Consent, ConsentFuture, ConsentRequest, RegistryError, TaskSupport, ToolCall, ToolFuture,
    ToolHandler, ToolOutcome, ToolRegistry, ToolSpec,
};

/// The longest statement a Trino tool takes, in bytes.
const MAX_SQL_BYTES: usize = 1024 * 1024;
/// Rows `trino_query` returns when the call names no limit.
const DEFAULT_QUERY_ROWS: u64 = 1000;
/// The most rows `trino_query` returns.
const MAX_QUERY_ROWS: u64 = 10_000;

/// What the Trino tools share.
pub(crate) struct TrinoDeps {
    /// The connections.
    pub(crate) connections: Vec<TrinoConnection>,
    /// Ask before statements estimated above this many rows.
    pub(crate) row_threshold: u64,
    /// Export caps.
    pub(crate) exports: ExportsConfig,
    /// Where exports go, when assets are configured.
    pub(crate) assets: Option<Assets>,
    /// Where a consent is marked used, so each runs its statement once on any
    /// replica (the sessions' store, which every replica shares).
    pub(crate) used_answers: Arc<dyn docket_catalog::SessionStore>,
    /// The byte budget of answers.
    pub(crate) results: crate::config::ResultsConfig,
    /// Where the rest of a cut answer is kept, when spools are configured.
    pub(crate) continuation: Option<Arc<crate::continuation::Continuation>>,
}

impl TrinoDeps {
    /// The connection a call that names none uses: the one marked default, or
    /// the only one.
    fn default_connection(&self) -> Option<&TrinoConnection> {
        self.connections
            .iter()
            .find(|c| c.is_default)
            .or_else(|| (self.connections.len() == 1).then(|| &self.connections[0]))
    }

    /// The connection a call names, or the default one (the one marked default, or
    /// the only one).
    fn connection(&self, arguments: &JsonObject) -> Result<&TrinoConnection, CallToolResult> {
        match arguments.get("connection").and_then(Value::as_str) {
            Some(name) => self
                .connections
                .iter()
                .find(|c| c.name == name)
                .ok_or_else(|| {
                    Refusal::NotFound.result(
                        &format!("no trino connection named {name:?}"),
                        "Call list_connections to see the connections you may use.",
                    )
                }),
            None => self.default_connection().ok_or_else(|| {
                Refusal::ConnectionRequired.result(
                    "several trino connections exist and none is the default",
                    "Pass the connection argument; list_connections names them.",
                )
            }),
        }
    }
}

fn read_only() -> ToolAnnotations {
    ToolAnnotations {
        read_only_hint: Some(true),
        destructive_hint: Some(false),
        idempotent_hint: Some(true),
        open_world_hint: Some(true),
        ..ToolAnnotations::default()
    }
}

/// Registers the Trino tools.
pub(crate) fn register(
    registry: &mut ToolRegistry,
    deps: Arc<TrinoDeps>,
) -> Result<(), RegistryError> {
    let connection = json!({"type": "string", "maxLength": 128, "description": "The trino connection; the default one when omitted."});
    // The connection a call without one uses; the pipeline authorizes it.
    let default = deps.default_connection().map(|c| c.name.clone());
    registry.register(
        ToolSpec::new(
            "trino_query",
            "Runs one read-only SQL statement (SELECT, WITH, VALUES, SHOW, DESCRIBE, EXPLAIN) on Trino and returns \
             up to `limit` rows (default 1000, at most 10 000) and at most `max_result_bytes` of them. An answer cut \
             there says `truncated` and carries a `cursor`: call again with the cursor instead of sql for the next \
             rows of the same result (the query is not run again).",
            json!({"type": "object", "properties": {
                "connection": connection,
                "sql": {"type": "string", "minLength": 1, "maxLength": MAX_SQL_BYTES, "description": "One read-only statement. Leave it out when sending a cursor."},
                "cursor": {"type": "string", "minLength": 1, "maxLength": crate::continuation::MAX_CURSOR_BYTES, "description": "The cursor of an earlier, cut answer: returns its next rows."},
                "limit": {"type": "integer", "minimum": 1, "maximum": MAX_QUERY_ROWS},
                "max_result_bytes": {"type": "integer", "minimum": 1024, "maximum": deps.results.max_bytes, "description": "The most bytes of rows the answer holds."}
            }, "additionalProperties": false}),
        )
        .with_annotations(read_only())
        .with_default_connection(default.clone())
        .with_ui_resource(crate::apps::RESULTS_VIEW_URI)
        .with_output_schema(query_schema()),
        QueryTool(Arc::clone(&deps)),
    )?;
    let explain_deps = Arc::clone(&deps);
    registry.register(
        ToolSpec::new(
            "trino_explain",
            "Shows Trino's plan for a read-only statement, with its row estimates, without running it.",
            json!({"type": "object", "properties": {
                "connection": connection,
                "sql": {"type": "string", "minLength": 1, "maxLength": MAX_SQL_BYTES}
            }, "required": ["sql"], "additionalProperties": false}),
        )
        .with_annotations(read_only())
        .with_default_connection(default.clone())
        .with_output_schema(record(json!({
            "plan": string("Trino's plan, as EXPLAIN prints it."),
            "estimated_rows": count_or_null("The plan's estimate of the rows the statement returns, when Trino gives one."),
        }))),
        move |call: ToolCall| {
            let deps = Arc::clone(&explain_deps);
            async move { ToolOutcome::Result(explain(&deps, &call).await) }
        },
    )?;
    let browse_deps = Arc::clone(&deps);
    registry.register(
        ToolSpec::new(
            "trino_browse",
            "Lists catalogs, the schemas of a catalog, or the tables of a schema.",
            json!({"type": "object", "properties": {
                "connection": connection,
                "catalog": {"type": "string", "maxLength": 256},
                "schema": {"type": "string", "maxLength": 256}
            }, "additionalProperties": false}),
        )
        .with_annotations(read_only())
        .with_default_connection(default.clone())
        .with_output_schema(browse_schema()),
        move |call: ToolCall| {
            let deps = Arc::clone(&browse_deps);
            async move { ToolOutcome::Result(browse(&deps, &call).await) }
        },
    )?;
    let describe_deps = Arc::clone(&deps);
    registry.register(
        ToolSpec::new(
            "trino_describe_table",
            "Describes a table's columns and types. `table` is catalog.schema.table (or shorter, using the connection's defaults).",
            json!({"type": "object", "properties": {
                "connection": connection,
                "table": {"type": "string", "minLength": 1, "maxLength": 1024}
            }, "required": ["table"], "additionalProperties": false}),
        )
        .with_annotations(read_only())
        .with_default_connection(default.clone())
        .with_output_schema(record(json!({
            "connection": string("The connection it ran on."),
            "table": string("The table, as asked."),
            "columns": array(record(json!({
                "name": any("The column's name."),
                "type": any("Its Trino type."),
                "extra": any("Trino's extra information."),
                "comment": any("Its comment."),
            })), "The table's columns, in order."),
        }))),
        move |call: ToolCall| {
            let deps = Arc::clone(&describe_deps);
            async move { ToolOutcome::Result(describe(&deps, &call).await) }
        },
    )?;
    if deps.assets.is_some() {
        let formats: Vec<&str> = Format::ALL
            .iter()
            .filter(|f| f.is_available())
            .map(|f| f.as_str())
            .collect();
        registry.register(
            ToolSpec::new(
                "trino_export",
                "Exports the result of one read-only statement to an asset file (csv, json, jsonl, parquet, or xlsx: a spreadsheet of at most 1 048 575 rows) and \
                 returns the asset's metadata and download URL, not the data. Validate the query with trino_query \
                 and a small LIMIT first. Runs as a task when the client declares the tasks extension.",
                json!({"type": "object", "properties": {
                    "connection": connection,
                    "sql": {"type": "string", "minLength": 1, "maxLength": MAX_SQL_BYTES},
                    "format": {"type": "string", "enum": formats},
                    "name": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Also the download file name."},
                    "description": {"type": "string", "maxLength": 2000},
                    "tags": {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 50}},
                    "limit": {"type": "integer", "minimum": 1, "description": "The most rows to export."},
                    "timeout_seconds": {"type": "integer", "minimum": 1},
                    "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 200}
                }, "required": ["sql", "format", "name"], "additionalProperties": false}),
            )
            .with_annotations(open_world_write())
            .with_task_support(TaskSupport::Optional)
            .with_default_connection(default)
            .with_ui_resource(crate::apps::RESULTS_VIEW_URI)
            .with_output_schema(super::assets::export_schema()),
            ExportTool(deps),
        )?;
    }
    Ok(())
}

/// What `trino_query` answers: the columns with their Trino types, the rows as
/// arrays in column order, and whether the limit cut the result; a cut result may
/// carry the continuation fields.
fn query_schema() -> Value {
    let mut properties = json!({
        "connection": string("The connection it ran on."),
        "columns": array(record(json!({
            "name": string("The column's name."),
            "type": string("Its Trino type."),
        })), "The result's columns, in order."),
        "rows": array(
            array(any("A value, as Trino sent it."), "One row, in column order."),
            "The rows read, at most `limit`.",
        ),
        "row_count": count("How many rows are here."),
        "truncated": boolean("Whether more rows existed than were returned."),
        "query_id": string("Trino's id of the query, for its own records."),
    });
    continuation(&mut properties);
    object(
        properties,
        &[
            "connection",
            "columns",
            "rows",
            "row_count",
            "truncated",
            "query_id",
        ],
    )
}

/// What `trino_browse` answers: the names at the level asked for, under one of
/// `catalogs`, `schemas` or `tables`.
fn browse_schema() -> Value {
    let names = |what: &str| array(any("A name."), what);
    let level = |key: &str, what: &str| {
        let mut properties = serde_json::Map::new();
        properties.insert("connection".into(), string("The connection it ran on."));
        properties.insert(key.into(), names(what));
        record(Value::Object(properties))
    };
    json!({
        "type": "object",
        "anyOf": [
            level("catalogs", "The catalogs."),
            level("schemas", "The schemas of the catalog."),
            level("tables", "The tables of the schema."),
        ]
    })
}

fn sql_argument(arguments: &JsonObject) -> &str {
    arguments
        .get("sql")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The call's statement as the read-only gate checked it under `connection`'s rules;
/// its [`ReadOnlyStatement::sql`] is exactly what Trino receives.
fn check_sql(
    arguments: &JsonObject,
    connection: &TrinoConnection,
) -> Result<ReadOnlyStatement, CallToolResult> {
    check_read_only_with(sql_argument(arguments), &connection.readonly).map_err(|err| {
        Refusal::ReadOnly.result(
            &format!("only read-only SQL is allowed: {err}"),
            "Send one SELECT, WITH … SELECT, VALUES, SHOW, DESCRIBE or EXPLAIN statement.",
        )
    })
}

fn trino_failure(err: &TrinoError) -> CallToolResult {
    // Trino's access control refused to let Docket's principal act as the
    // caller: the caller's rights at Trino, not a fault of the statement.
    if let TrinoError::Query { name, message, .. } = err
        && name == "PERMISSION_DENIED"
        && message.contains("cannot impersonate")
    {
        return Refusal::NotAllowed.result(
            &format!("Trino refused to run the query as you: {message}"),
            "Ask the Trino administrators to allow this connection's principal to impersonate you.",
        );
    }
    Refusal::QueryFailed.result(
        &format!("query execution failed: {err}"),
        "Fix the statement and try again.",
    )
}

/// The consent step shared by `trino_query` and `trino_export`.
async fn consent(
    deps: Arc<TrinoDeps>,
    arguments: JsonObject,
    capabilities: ClientCapabilities,
    answer: Option<(Value, String)>,
    owner: String,
    client_for: impl FnOnce(&TrinoConnection) -> Result<TrinoClient, CallToolResult>,
) -> Consent {
    // An export whose idempotency key already produced an asset runs nothing, so
    // there is nothing to consent to (and no EXPLAIN to send).
    if let (Some(assets), Some(key)) = (
        &deps.assets,
        arguments.get("idempotency_key").and_then(Value::as_str),
    ) && let Ok(Some(_)) = assets.store.find_by_idempotency_key(&owner, key).await
    {
        return Consent::Proceed;
    }
    // Anything malformed is refused by the handler itself, with a better message.
    let Ok(connection) = deps.connection(&arguments) else {
        return Consent::Proceed;
    };
    let Ok(statement) = check_sql(&arguments, connection) else {
        return Consent::Proceed;
    };
    let (kind, sql) = (statement.kind(), statement.sql());
    if connection.consent == ConsentMode::Never
        || matches!(
            kind,
            StatementKind::Explain | StatementKind::Show | StatementKind::Describe
        )
    {
        return Consent::Proceed;
    }
    if let Some((answer, consent_id)) = answer {
        let accepted = answer.get("action").and_then(Value::as_str) == Some("accept")
            && answer.pointer("/content/proceed") != Some(&Value::Bool(false));
        return if accepted {
            let lifetime = Duration::from_secs(crate::request_state::STATE_LIFETIME_SECONDS);
            match deps
                .used_answers
                .use_answer_once(&format!("consent:{consent_id}"), lifetime)
                .await
            {
                Ok(true) => Consent::Proceed,
                Ok(false) => Consent::Refuse(Refusal::UserDeclined.result(
                    "this consent was already used: one answer runs the statement once",
                    "Call the tool again without requestState to be asked again.",
                )),
                Err(error) => Consent::Error(crate::registry::ToolError::Internal(format!(
                    "could not record the consent as used: {error}"
                ))),
            }
        } else {
            Consent::Refuse(Refusal::UserDeclined.result(
                "query declined: the user did not agree to run it",
                "Narrow the query, or ask again when the user agrees.",
            ))
        };
    }
    // The EXPLAIN runs as the caller would: a caller the connection cannot run
    // as is refused here, before anything reaches Trino.
    let client = match client_for(connection) {
        Ok(client) => client,
        Err(refusal) => return Consent::Refuse(refusal),
    };
    let estimate = estimate_rows(&client, sql).await;
    let message = match (connection.consent, estimate) {
        (ConsentMode::Always, Some(rows)) => {
            format!(
                "Run this statement on {}? Trino estimates it reads about {rows} rows.",
                connection.name
            )
        }
        (ConsentMode::Always, None) => format!("Run this statement on {}?", connection.name),
        (_, Some(rows)) if rows > deps.row_threshold => format!(
            "This query is estimated to scan approximately {rows} rows (threshold: {}). Proceed?",
            deps.row_threshold
        ),
        _ => return Consent::Proceed,
    };
    if !capabilities.supports_form_elicitation() {
        return Consent::Error(crate::registry::ToolError::MissingCapability {
            message: format!(
                "{message} Asking needs the elicitation capability, which this request did not declare."
            ),
            required: Box::new(ClientCapabilities::with_elicitation()),
        });
    }
    let mut requests = InputRequests::new();
    let schema = json!({"type": "object", "properties": {"proceed": {"type": "boolean", "title": "Proceed", "default": true}}});
    requests.insert(
        "consent".into(),
        InputRequest::Elicit(ElicitRequestParams::form(message, schema)),
    );
    // A random id in the sealed state makes the answer to this question good for
    // one run (`TrinoDeps::used_consents`).
    let Ok(consent_id) = docket_catalog::generate_id() else {
        return Consent::Error(crate::registry::ToolError::Internal(
            "the OS random source failed".to_owned(),
        ));
    };
    Consent::Ask {
        requests,
        state: json!({"estimate": estimate, "consent_id": consent_id}),
    }
}

/// Trino's row estimate for `sql`, or None when EXPLAIN fails or gives none (the
/// original platform proceeds then too).
async fn estimate_rows(client: &TrinoClient, sql: &str) -> Option<u64> {
    explain_estimated_rows(&explain_plan(client, sql).await.ok()?)
}

/// The most rows a metadata statement (EXPLAIN, SHOW, DESCRIBE) is read for.
const METADATA_ROWS: usize = 10_000;

/// Runs a small metadata statement and collects its rows.
async fn collect_small(client: &TrinoClient, sql: &str) -> Result<Collected, TrinoError> {
    client.query(sql).await?.collect(METADATA_ROWS).await
}

/// Trino's plan for `sql`, as the text `EXPLAIN` returns.
async fn explain_plan(client: &TrinoClient, sql: &str) -> Result<String, TrinoError> {
    let collected = collect_small(client, &format!("EXPLAIN {sql}")).await?;
    let lines: Vec<&str> = collected
        .rows
        .iter()
        .filter_map(|row| row.first().and_then(Value::as_str))
        .collect();
    Ok(lines.join("\n"))
}

fn consent_future(
    deps: &Arc<TrinoDeps>,
    request: &ConsentRequest<'_>,
    tool: &'static str,
) -> ConsentFuture {
    // An answer counts only beside the sealed state of the question it answers: one
    // sent without a requestState (or with another's) was never asked for.
    let answer = request.input.and_then(|round| {
        let consent_id = round.state.get("consent_id")?.as_str()?.to_owned();
        Some((round.responses.get("consent")?.clone(), consent_id))
    });
    Box::pin(consent(
        Arc::clone(deps),
        request.arguments.clone(),
        request.client_capabilities.clone(),
        answer,
        request.identity.subject.clone(),
        {
            let identity = request.identity.clone();
            let persona = request.persona.name.clone();
            let attribution = Arc::clone(request.attribution);
            move |connection: &TrinoConnection| {
                attribution.trino_client(connection, &identity, &persona, tool, None)
            }
        },
    ))
}

/// The client `call`'s queries on `connection` go through: as the caller when
/// the connection impersonates, labelled for Trino's query log.
fn client_for(
    call: &ToolCall,
    connection: &TrinoConnection,
    tool: &str,
) -> Result<TrinoClient, CallToolResult> {
    let task_id = call.task.as_ref().map(|task| task.id().to_string());
    call.attribution.trino_client(
        connection,
        &call.identity,
        &call.persona.name,
        tool,
        task_id.as_deref(),
    )
}

struct QueryTool(Arc<TrinoDeps>);

impl ToolHandler for QueryTool {
    fn call(&self, call: ToolCall) -> ToolFuture {
        let deps = Arc::clone(&self.0);
        Box::pin(async move { ToolOutcome::Result(query(&deps, &call).await) })
    }

    fn consent(&self, request: &ConsentRequest<'_>) -> ConsentFuture {
        consent_future(&self.0, request, "trino_query")
    }
}

async fn query(deps: &TrinoDeps, call: &ToolCall) -> CallToolResult {
    let limit = call
        .arguments
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_QUERY_ROWS)
        .min(MAX_QUERY_ROWS);
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let budget = crate::continuation::budget(&deps.results, &call.arguments);
    if let Some(cursor) = call.arguments.get("cursor").and_then(Value::as_str) {
        return next_page(deps, call, cursor, limit, budget).await;
    }
    if !call.arguments.contains_key("sql") {
        return Refusal::InvalidArguments.result(
            "send sql, or the cursor of an earlier answer",
            "Send one read-only statement as sql.",
        );
    }
    let connection = match deps.connection(&call.arguments) {
        Ok(connection) => connection,
        Err(refusal) => return refusal,
    };
    let statement = match check_sql(&call.arguments, connection) {
        Ok(statement) => statement,
        Err(refusal) => return refusal,
    };
    let sql = statement.sql();
    let client = match client_for(call, connection, "trino_query") {
        Ok(client) => client,
        Err(refusal) => return refusal,
    };
    let mut stream = match client.query(sql).await {
        Ok(stream) => stream,
        Err(err) => return trino_failure(&err),
    };
    let mut rows: Vec<Value> = Vec::new();
    let mut bytes = 0u64;
    // The rows read past the cut: the start of what a continuation keeps.
    let mut rest: Option<Vec<Value>> = None;
    let mut cut_by_bytes = false;
    while rest.is_none() {
        let page = tokio::select! {
            page = stream.next_page() => page,
            () = call.cancel.cancelled() => {
                let _ = stream.cancel().await;
                return Refusal::QueryFailed.result(
                    "the query was cancelled",
                    "The call was cancelled; call it again to run the query.",
                );
            }
        };
        match page {
            Ok(Some(page)) => {
                let mut page_rows = page.rows.into_iter().map(Value::Array);
                for row in page_rows.by_ref() {
                    let size = crate::continuation::row_bytes(&row);
                    if rows.len() >= limit || bytes + size > budget {
                        cut_by_bytes = rows.len() < limit;
                        let mut left = vec![row];
                        left.extend(page_rows.by_ref());
                        rest = Some(left);
                        break;
                    }
                    bytes += size;
                    rows.push(row);
                }
                call.progress.report(
                    rows.len() as u64,
                    None,
                    Some(format!("{} rows read", rows.len())),
                );
            }
            Ok(None) => break,
            Err(err) => return trino_failure(&err),
        }
    }
    let columns: Vec<Value> = stream
        .columns()
        .map(|columns| {
            columns
                .iter()
                .map(|c| json!({"name": c.name, "type": c.type_name}))
                .collect()
        })
        .unwrap_or_default();
    let query_id = stream.query_id().to_owned();
    let mut result = json!({
        "connection": connection.name,
        "columns": columns,
        "row_count": rows.len(),
        "truncated": rest.is_some(),
        "query_id": &query_id,
    });
    if let Some(rest) = rest {
        let why = if cut_by_bytes {
            format!("the rows reached max_result_bytes ({budget} bytes)")
        } else {
            format!("the rows reached the limit of {limit}")
        };
        let kept = match &deps.continuation {
            Some(continuation) => continuation
                .keep_rest(
                    crate::continuation::CutAnswer {
                        owner: &call.identity.subject,
                        tool: "trino_query",
                        connection: &connection.name,
                        columns: Value::Array(columns),
                        source_id: Some(query_id),
                    },
                    rest,
                    Box::new(stream),
                )
                .await
                .map_err(|not_kept| not_kept.to_string()),
            None => {
                let _ = stream.cancel().await;
                Err("this server keeps no continuations".to_owned())
            }
        };
        result["note"] = Value::String(match kept {
            Ok(cursor) => {
                result["cursor"] = Value::String(cursor.encode());
                format!(
                    "{why}; call trino_query with this cursor (and no sql) for the next rows of the \
                     same result, or run trino_export for all of them"
                )
            }
            Err(not_kept) => format!("{why}; {not_kept}; run trino_export for all of them"),
        });
    }
    result["rows"] = Value::Array(rows);
    CallToolResult::structured(result)
}

/// The page of an earlier answer's result that `cursor` names.
async fn next_page(
    deps: &TrinoDeps,
    call: &ToolCall,
    cursor: &str,
    limit: usize,
    budget: u64,
) -> CallToolResult {
    if call.arguments.contains_key("sql") {
        return Refusal::InvalidArguments.result(
            "a cursor continues an earlier result: send it without sql",
            "Send either sql (a new query) or the cursor of an earlier answer.",
        );
    }
    let Some(continuation) = &deps.continuation else {
        return Refusal::NotConfigured.result(
            "this server keeps no continuations",
            "Run the query again, or export it with trino_export.",
        );
    };
    let page = match continuation
        .page(&call.identity.subject, "trino_query", cursor, limit, budget)
        .await
    {
        Ok(page) => page,
        Err(error @ (PageError::Unknown | PageError::PastEnd)) => {
            return Refusal::NotFound.result(&error.to_string(), "Run the query again.");
        }
        Err(error @ PageError::RowTooLarge(_)) => {
            return Refusal::InvalidArguments.result(
                &error.to_string(),
                "Raise max_result_bytes, or export the result with trino_export.",
            );
        }
        Err(error @ PageError::Unavailable(_)) => {
            return Refusal::Unavailable.result(&error.to_string(), "Try again in a moment.");
        }
    };
    // The persona's reach is checked again: access that ended, ends for the rest
    // of a result too.
    if !call.persona.may_use_connection(&page.connection) {
        return Refusal::NotFound.result(&PageError::Unknown.to_string(), "Run the query again.");
    }
    let mut result = json!({
        "connection": page.connection,
        "columns": page.columns,
        "row_count": page.rows.len(),
        "truncated": page.next.is_some(),
        "query_id": page.source_id.unwrap_or_default(),
    });
    if let Some(next) = &page.next {
        result["cursor"] = Value::String(next.encode());
    }
    if let Some((rows, bytes)) = page.remaining {
        result["remaining_rows"] = json!(rows);
        result["remaining_bytes"] = json!(bytes);
    }
    if let Some(note) = page.note {
        result["note"] = Value::String(note);
    }
    result["rows"] = Value::Array(page.rows);
    CallToolResult::structured(result)
}

async fn explain(deps: &TrinoDeps, call: &ToolCall) -> CallToolResult {
    let connection = match deps.connection(&call.arguments) {
        Ok(connection) => connection,
        Err(refusal) => return refusal,
    };
    let statement = match check_sql(&call.arguments, connection) {
        Ok(statement) => statement,
        Err(refusal) => return refusal,
    };
    let sql = statement.sql();
    let client = match client_for(call, connection, "trino_explain") {
        Ok(client) => client,
        Err(refusal) => return refusal,
    };
    match explain_plan(&client, sql).await {
        Ok(plan) => {
            let estimate = explain_estimated_rows(&plan);
            let mut result = CallToolResult::text(plan.clone());
            result.structured_content = Some(json!({"plan": plan, "estimated_rows": estimate}));
            result
        }
        Err(err) => trino_failure(&err),
    }
}

/// Checks a catalog, schema or table name: letters, digits, `_` and `-` only, so it
/// can be quoted into a statement safely.
fn identifier(kind: &str, value: &str) -> Result<String, CallToolResult> {
    let valid = !value.is_empty()
        && value.len() <= 128
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if valid {
        Ok(format!("\"{value}\""))
    } else {
        Err(Refusal::InvalidArguments.result(
            &format!("{kind} {value:?} is not a valid name"),
            "Use the names trino_browse lists.",
        ))
    }
}

async fn run_listing(
    connection: &TrinoConnection,
    client: &TrinoClient,
    sql: &str,
    key: &str,
) -> CallToolResult {
    match collect_small(client, sql).await {
        Ok(collected) => {
            let names: Vec<&Value> = collected
                .rows
                .iter()
                .filter_map(|row| row.first())
                .collect();
            CallToolResult::structured(json!({ "connection": connection.name, key: names }))
        }
        Err(err) => trino_failure(&err),
    }
}

async fn browse(deps: &TrinoDeps, call: &ToolCall) -> CallToolResult {
    let connection = match deps.connection(&call.arguments) {
        Ok(connection) => connection,
        Err(refusal) => return refusal,
    };
    let catalog = call.arguments.get("catalog").and_then(Value::as_str);
    let schema = call.arguments.get("schema").and_then(Value::as_str);
    let statement = match (catalog, schema) {
        (None, None) => Ok(("SHOW CATALOGS".to_owned(), "catalogs")),
        (Some(catalog), None) => {
            identifier("catalog", catalog).map(|c| (format!("SHOW SCHEMAS FROM {c}"), "schemas"))
        }
        (Some(catalog), Some(schema)) => identifier("catalog", catalog).and_then(|c| {
            identifier("schema", schema).map(|s| (format!("SHOW TABLES FROM {c}.{s}"), "tables"))
        }),
        (None, Some(_)) => {
            Err(Refusal::InvalidArguments.result("a schema needs its catalog", "Pass catalog too."))
        }
    };
    match statement {
        Ok((sql, key)) => match client_for(call, connection, "trino_browse") {
            Ok(client) => run_listing(connection, &client, &sql, key).await,
            Err(refusal) => refusal,
        },
        Err(refusal) => refusal,
    }
}

async fn describe(deps: &TrinoDeps, call: &ToolCall) -> CallToolResult {
    let connection = match deps.connection(&call.arguments) {
        Ok(connection) => connection,
        Err(refusal) => return refusal,
    };
    let table = call
        .arguments
        .get("table")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let parts: Result<Vec<String>, CallToolResult> = table
        .split('.')
        .map(|part| identifier("table", part))
        .collect();
    let parts = match parts {
        Ok(parts) if parts.len() <= 3 => parts,
        Ok(_) => {
            return Refusal::InvalidArguments.result(
                "a table name has at most three parts",
                "Use catalog.schema.table.",
            );
        }
        Err(refusal) => return refusal,
    };
    let client = match client_for(call, connection, "trino_describe_table") {
        Ok(client) => client,
        Err(refusal) => return refusal,
    };
    match collect_small(&client, &format!("DESCRIBE {}", parts.join("."))).await {
        Ok(collected) => {
            let columns: Vec<Value> = collected
                .rows
                .iter()
                .map(|row| json!({"name": row.first(), "type": row.get(1), "extra": row.get(2), "comment": row.get(3)}))
                .collect();
            CallToolResult::structured(
                json!({"connection": connection.name, "table": table, "columns": columns}),
            )
        }
        Err(err) => trino_failure(&err),
    }
}

struct ExportTool(Arc<TrinoDeps>);

impl ToolHandler for ExportTool {
    fn call(&self, call: ToolCall) -> ToolFuture {
        let deps = Arc::clone(&self.0);
        Box::pin(async move { ToolOutcome::Result(export(&deps, &call).await) })
    }

    fn consent(&self, request: &ConsentRequest<'_>) -> ConsentFuture {
        consent_future(&self.0, request, "trino_export")
    }
}

async fn export(deps: &TrinoDeps, call: &ToolCall) -> CallToolResult {
    let assets = match configured(deps.assets.as_ref()) {
        Ok(assets) => assets,
        Err(refusal) => return refusal,
    };
    let arguments = &call.arguments;
    let format = match arguments
        .get("format")
        .and_then(Value::as_str)
        .map(Format::from_str)
    {
        Some(Ok(format)) if format.is_available() => format,
        _ => {
            return Refusal::InvalidArguments.result(
                "unsupported format",
                "Use csv, json, jsonl, parquet or xlsx.",
            );
        }
    };
    let connection = match deps.connection(arguments) {
        Ok(connection) => connection,
        Err(refusal) => return refusal,
    };
    let statement = match check_sql(arguments, connection) {
        Ok(statement) => statement,
        Err(refusal) => return refusal,
    };
    let sql = statement.sql();
    let client = match client_for(call, connection, "trino_export") {
        Ok(client) => client,
        Err(refusal) => return refusal,
    };
    let limits = &deps.exports;
    let max_rows = match arguments.get("limit").and_then(Value::as_u64) {
        Some(limit) if limit > limits.max_rows => {
            return Refusal::InvalidArguments.result(
                &format!(
                    "limit {limit} exceeds the deployment maximum of {} rows",
                    limits.max_rows
                ),
                "Lower the limit.",
            );
        }
        Some(limit) => limit,
        None => limits.max_rows,
    };
    let ExportStart {
        timeout,
        owner,
        fields:
            AssetFields {
                name,
                description,
                tags,
                idempotency_key,
            },
        ids: ExportIds { asset_id, call_id },
    } = match start_export(
        assets,
        limits,
        call,
        "this idempotency key already produced this asset; the query was not run again",
    )
    .await
    {
        Ok(start) => start,
        Err(answer) => return answer,
    };
    let storage_key = format!("{asset_id}/{}", file_name(&name, format.extension()));
    let started = Instant::now();
    let upload = match begin_upload(assets, &storage_key).await {
        Ok(upload) => upload,
        Err(refusal) => return refusal,
    };
    let progress = call.progress.clone();
    let report_progress = move |rows: u64, bytes: u64| {
        progress.report(
            rows,
            None,
            Some(format!("{rows} rows, {} written", human_bytes(bytes))),
        );
    };
    let outcome = export_query(
        &client,
        sql,
        format,
        upload,
        ExportLimits {
            max_rows,
            max_bytes: limits.max_bytes,
            timeout,
        },
        &call.cancel,
        &report_progress,
    )
    .await;
    let task_id = call.task.as_ref().map(|task| task.id().to_string());
    let record = |success: bool,
                  outcome: &str,
                  error: Option<String>,
                  rows: Option<i64>,
                  bytes: Option<i64>,
                  asset: Option<String>| {
        NewCallRecord {
            id: call_id.clone(),
            kind: CallKind::Sql,
            tool: "trino_export".into(),
            connection: Some(connection.name.clone()),
            statement: sql.to_owned(),
            subject: owner.clone(),
            persona: Some(call.persona.name.clone()),
            success,
            outcome: outcome.to_owned(),
            error_message: error,
            duration_ms: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
            rows,
            bytes,
            asset_id: asset,
            task_id: task_id.clone(),
            upstream_status: None,
            engine_user: call.attribution.engine_user(),
            upstream_ids: call.attribution.query_ids(),
        }
    };
    let report = match outcome {
        Ok(report) => report,
        Err(err) => {
            let cancelled = matches!(err, ExportError::Cancelled);
            assets
                .record_call(record(
                    false,
                    if cancelled { "cancelled" } else { "failed" },
                    Some(err.to_string()),
                    None,
                    None,
                    None,
                ))
                .await;
            return Refusal::ExportFailed.result(
                &format!("the export failed: {err}"),
                "Nothing was stored. Fix the cause and call again.",
            );
        }
    };
    let new_asset = NewAsset {
        id: asset_id,
        owner: owner.clone(),
        name: name.clone(),
        description,
        tags,
        format: format.as_str().to_owned(),
        content_type: format.content_type().to_owned(),
        storage_key: storage_key.clone(),
        size_bytes: i64::try_from(report.bytes).unwrap_or(i64::MAX),
        row_count: i64::try_from(report.rows).ok(),
        connection: Some(connection.name.clone()),
        tool: "trino_export".into(),
        idempotency_key,
        task_id: task_id.clone(),
        call_id: Some(call_id.clone()),
    };
    let asset = match save_asset(assets, new_asset, call.task.as_deref()).await {
        Ok(asset) => asset,
        Err(refusal) => return refusal,
    };
    assets
        .record_call(record(
            true,
            "completed",
            None,
            i64::try_from(report.rows).ok(),
            i64::try_from(report.bytes).ok(),
            Some(asset.id.clone()),
        ))
        .await;
    let message = format!(
        "exported {} rows ({}) to {}",
        report.rows,
        human_bytes(report.bytes),
        asset.name
    );
    asset_result(assets, &asset, &message, Some(&call_id)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_checked_before_quoting() {
        assert_eq!(
            identifier("catalog", "memory").ok(),
            Some("\"memory\"".to_owned())
        );
        assert!(identifier("catalog", "x\"; DROP TABLE y; --").is_err());
        assert!(identifier("catalog", "").is_err());
    }
}
