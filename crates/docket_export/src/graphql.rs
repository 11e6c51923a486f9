//! The outbound GraphQL caller, and the export of one query's result, optionally
//! following Relay-style cursor pagination.
//!
//! A document is parsed (`apollo-parser`) before any I/O: syntax errors, type
//! system definitions, mutations and subscriptions are refused, and the operation
//! to run is the one `operation_name` names (or the only one). The request goes to
//! the connection's endpoint through an [`ApiClient`], so GraphQL connections get
//! the same pinning, redirect refusal and credential handling as `api` ones.
//!
//! GraphQL reports failures as `errors` in the answer, often with status 200; they
//! are handed back to the caller, never dropped.

use std::time::Duration;

use apollo_parser::Parser;
use apollo_parser::cst;
use bytes::Bytes;
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::api::{ApiClient, ApiError, commit_or_abort};
use crate::sink::Upload;

/// The most tokens a document may have (apollo-parser stops beyond it).
const MAX_TOKENS: usize = 50_000;
/// The deepest nesting a document may have.
const MAX_RECURSION: usize = 200;

/// The operation of a checked document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation {
    /// Its name, if it has one.
    pub name: Option<String>,
    /// The names of the variables it declares, without `$`.
    pub variables: Vec<String>,
}

impl Operation {
    /// How the call catalog names it: `query Name`, or `query` when anonymous.
    #[must_use]
    pub fn label(&self) -> String {
        match &self.name {
            Some(name) => format!("query {name}"),
            None => "query".to_owned(),
        }
    }
}

/// Why a GraphQL call failed. No variant carries a credential.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum GraphqlError {
    /// The document does not parse.
    #[error("the GraphQL document has syntax errors: {}", .messages.join("; "))]
    Syntax {
        /// The parser's messages.
        messages: Vec<String>,
    },
    /// The document holds something other than queries and fragments.
    #[error("{reason}")]
    Refused {
        /// Why.
        reason: String,
    },
    /// The HTTP exchange failed.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The answer is not a GraphQL response.
    #[error("the endpoint's answer (HTTP {status}) is not a GraphQL response: {reason}")]
    Protocol {
        /// The HTTP status.
        status: u16,
        /// What is wrong with it.
        reason: String,
    },
    /// The answer carries GraphQL errors (an export stores nothing then).
    #[error("the GraphQL endpoint answered with errors: {}", summarize_errors(.errors))]
    Errors {
        /// The errors, as the endpoint sent them.
        errors: Vec<Value>,
    },
    /// Pagination could not continue.
    #[error("pagination failed: {reason}")]
    Pagination {
        /// Why.
        reason: String,
    },
    /// The export is larger than allowed.
    #[error("the export is larger than {limit} bytes; select fewer fields or pages")]
    TooLarge {
        /// The cap, in bytes.
        limit: u64,
    },
    /// The export ran longer than its timeout.
    #[error("the export did not finish within {} seconds", .after.as_secs())]
    Timeout {
        /// The timeout.
        after: Duration,
    },
}

impl GraphqlError {
    /// Whether it stopped because it was cancelled.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        matches!(self, GraphqlError::Api(ApiError::Cancelled))
    }
}

/// Up to three error messages, for one line of text.
#[must_use]
pub fn summarize_errors(errors: &[Value]) -> String {
    let mut messages: Vec<String> = errors
        .iter()
        .take(3)
        .map(|error| {
            error
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| error.to_string(), str::to_owned)
        })
        .collect();
    if errors.len() > 3 {
        messages.push(format!("and {} more", errors.len() - 3));
    }
    messages.join("; ")
}

/// Parses `document` and picks the operation to run: the one named
/// `operation_name`, or the only one.
///
/// # Errors
/// [`GraphqlError::Syntax`] with every parser message, or
/// [`GraphqlError::Refused`] for a mutation, a subscription, a type system
/// definition, no operation, an unknown name, or several operations and no name.
pub fn check_document(
    document: &str,
    operation_name: Option<&str>,
) -> Result<Operation, GraphqlError> {
    let refuse = |reason: String| Err(GraphqlError::Refused { reason });
    let tree = Parser::new(document)
        .token_limit(MAX_TOKENS)
        .recursion_limit(MAX_RECURSION)
        .parse();
    let messages: Vec<String> = tree
        .errors()
        .map(|error| format!("{} at offset {}", error.message(), error.index()))
        .collect();
    if !messages.is_empty() {
        return Err(GraphqlError::Syntax { messages });
    }
    let mut operations = Vec::new();
    for definition in tree.document().definitions() {
        match definition {
            cst::Definition::OperationDefinition(operation) => {
                if let Some(kind) = operation.operation_type() {
                    if kind.mutation_token().is_some() {
                        return refuse("mutations are not allowed; only queries run".into());
                    }
                    if kind.subscription_token().is_some() {
                        return refuse("subscriptions are not allowed; only queries run".into());
                    }
                }
                operations.push(operation);
            }
            cst::Definition::FragmentDefinition(_) => {}
            other => {
                return refuse(format!(
                    "the document may hold only queries and fragments, not a {}",
                    other.kind()
                ));
            }
        }
    }
    let name_of =
        |operation: &cst::OperationDefinition| operation.name().map(|name| name.text().to_string());
    let chosen = match (operation_name, operations.as_slice()) {
        (_, []) => return refuse("the document has no operation".into()),
        (None, [only]) => only,
        (None, _) => {
            return refuse(
                "the document has several operations; say which one in operation_name".into(),
            );
        }
        (Some(wanted), all) => match all
            .iter()
            .find(|operation| name_of(operation).as_deref() == Some(wanted))
        {
            Some(operation) => operation,
            None => return refuse(format!("the document has no operation named {wanted:?}")),
        },
    };
    let variables = chosen
        .variable_definitions()
        .map(|definitions| {
            definitions
                .variable_definitions()
                .filter_map(|definition| definition.variable()?.name())
                .map(|name| name.text().to_string())
                .collect()
        })
        .unwrap_or_default();
    Ok(Operation {
        name: name_of(chosen),
        variables,
    })
}

/// One GraphQL request.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphqlRequest {
    /// The document.
    pub query: String,
    /// The variables (a JSON object).
    pub variables: Map<String, Value>,
    /// The operation to run, when the document has several.
    pub operation_name: Option<String>,
}

impl GraphqlRequest {
    fn body(&self) -> Value {
        let mut body = json!({"query": self.query, "variables": self.variables});
        if let Some(name) = &self.operation_name {
            body["operationName"] = Value::String(name.clone());
        }
        body
    }
}

/// A GraphQL answer.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphqlResponse {
    /// The HTTP status.
    pub status: u16,
    /// `data`, `Null` when absent.
    pub data: Value,
    /// `errors`, empty when absent.
    pub errors: Vec<Value>,
    /// `extensions`, if any.
    pub extensions: Option<Value>,
    /// The size of the answer's body.
    pub bytes: u64,
}

/// Sends `request` to `client`'s endpoint and reads the answer, at most `cap`
/// bytes, within the connection's call timeout.
///
/// # Errors
/// [`GraphqlError::Api`] for the exchange, [`GraphqlError::TooLarge`] when the
/// answer passes `cap`, [`GraphqlError::Protocol`] when it is not a GraphQL
/// response. GraphQL `errors` are not an error here: they are in the response.
pub async fn execute(
    client: &ApiClient,
    request: &GraphqlRequest,
    cap: u64,
    cancel: &CancellationToken,
) -> Result<GraphqlResponse, GraphqlError> {
    let exchange = async {
        let response = client.post_json_to_base(&request.body(), cancel).await?;
        client.read_capped(response, cap, cancel).await
    };
    let response = match tokio::time::timeout(client.call_timeout(), exchange).await {
        Ok(result) => result?,
        Err(_) => {
            return Err(ApiError::Timeout {
                after: client.call_timeout(),
            }
            .into());
        }
    };
    if response.truncated {
        return Err(GraphqlError::TooLarge { limit: cap });
    }
    let status = response.status;
    let protocol = |reason: &str| GraphqlError::Protocol {
        status,
        reason: reason.to_owned(),
    };
    let mut body: Value =
        serde_json::from_slice(&response.body).map_err(|_| protocol("the body is not JSON"))?;
    let Some(object) = body.as_object_mut() else {
        return Err(protocol("the body is not a JSON object"));
    };
    let data = object.remove("data").unwrap_or(Value::Null);
    let errors = match object.remove("errors") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(errors)) => errors,
        Some(_) => return Err(protocol("errors is not a list")),
    };
    if data.is_null() && errors.is_empty() {
        return Err(protocol("it has neither data nor errors"));
    }
    Ok(GraphqlResponse {
        status,
        data,
        errors,
        extensions: object.remove("extensions"),
        bytes: response.body.len() as u64,
    })
}

/// How a GraphQL export is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphqlFormat {
    /// One JSON array of records.
    Json,
    /// One record per line.
    Jsonl,
}

impl GraphqlFormat {
    /// `json` or `jsonl`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            GraphqlFormat::Json => "json",
            GraphqlFormat::Jsonl => "jsonl",
        }
    }

    /// The content type it is stored with.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            GraphqlFormat::Json => "application/json",
            GraphqlFormat::Jsonl => "application/x-ndjson",
        }
    }
}

/// Relay-style cursor pagination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pagination {
    /// The dotted path below `data` of the `pageInfo { hasNextPage endCursor }`
    /// object, such as `items.pageInfo`.
    pub page_info_path: String,
    /// The variable the next page's cursor goes into.
    pub cursor_variable: String,
    /// The most pages to fetch.
    pub max_pages: u32,
}

/// The caps a GraphQL export runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraphqlExportLimits {
    /// The most bytes the stored export may have.
    pub max_bytes: u64,
    /// The most bytes one answer may have.
    pub max_response_bytes: u64,
    /// How long the export may take, every page included.
    pub timeout: Duration,
}

/// What a finished GraphQL export stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GraphqlExportReport {
    /// The HTTP status of the last page's answer.
    pub status: u16,
    /// Pages fetched.
    pub pages: u32,
    /// Records written.
    pub records: u64,
    /// Bytes stored.
    pub bytes: u64,
    /// Whether the last page said more exist (`max_pages` was reached).
    pub has_more: bool,
}

/// What a GraphQL export runs: the request, how it pages, and how it is written.
#[derive(Clone, Debug, PartialEq)]
pub struct GraphqlExportPlan {
    /// The first page's request.
    pub request: GraphqlRequest,
    /// How to follow pages, if at all.
    pub pagination: Option<Pagination>,
    /// How the records are written.
    pub format: GraphqlFormat,
}

/// Progress of a GraphQL export: pages fetched, records and bytes written.
pub type GraphqlProgress = dyn Fn(u32, u64, u64) + Send + Sync;

/// Runs the plan's request, and with pagination each following page, writing the records
/// into `upload` as one JSON array or as JSON Lines. Without pagination the one
/// record is the answer's `data`; with it, the records are the nodes of the
/// connection that holds the `pageInfo` (its `nodes`, or each `edges[].node`).
/// One page is held at a time. Commits only when every page was written without
/// GraphQL errors and within the caps; otherwise aborts the upload.
///
/// # Errors
/// [`GraphqlError`]; the upload is aborted first.
pub async fn export_query(
    client: &ApiClient,
    plan: GraphqlExportPlan,
    mut upload: Box<dyn Upload>,
    limits: GraphqlExportLimits,
    cancel: &CancellationToken,
    progress: &GraphqlProgress,
) -> Result<GraphqlExportReport, GraphqlError> {
    let run = write_pages(client, plan, upload.as_mut(), limits, cancel, progress);
    let outcome = match tokio::time::timeout(limits.timeout, run).await {
        Ok(result) => result,
        Err(_) => Err(GraphqlError::Timeout {
            after: limits.timeout,
        }),
    };
    let (mut report, bytes) = commit_or_abort(upload, outcome, |error| {
        GraphqlError::Api(ApiError::Sink(error))
    })
    .await?;
    report.bytes = bytes;
    Ok(report)
}

async fn write_pages(
    client: &ApiClient,
    plan: GraphqlExportPlan,
    upload: &mut dyn Upload,
    limits: GraphqlExportLimits,
    cancel: &CancellationToken,
    progress: &GraphqlProgress,
) -> Result<GraphqlExportReport, GraphqlError> {
    let GraphqlExportPlan {
        mut request,
        pagination,
        format,
    } = plan;
    let pagination = pagination.as_ref();
    let mut pages = 0u32;
    let mut records = 0u64;
    let mut has_more = false;
    let mut status;
    let write = async |chunk: Vec<u8>, upload: &mut dyn Upload| {
        // Every record is serialized whole into one chunk, so scrubbing each chunk
        // finds every secret a field echoed back.
        let chunk = client.scrubber().scrub_bytes(&chunk);
        if upload.bytes_written() + chunk.len() as u64 > limits.max_bytes {
            return Err(GraphqlError::TooLarge {
                limit: limits.max_bytes,
            });
        }
        upload
            .write(Bytes::from(chunk))
            .await
            .map_err(|error| GraphqlError::Api(ApiError::Sink(error)))
    };
    if format == GraphqlFormat::Json {
        write(b"[".to_vec(), upload).await?;
    }
    loop {
        let response = execute(client, &request, limits.max_response_bytes, cancel).await?;
        if !response.errors.is_empty() {
            return Err(GraphqlError::Errors {
                errors: response.errors,
            });
        }
        pages += 1;
        status = response.status;
        let (page_records, next_cursor) = match pagination {
            None => (vec![response.data], None),
            Some(pagination) => page_records(response.data, pagination, pages)?,
        };
        let mut chunk = Vec::new();
        for record in &page_records {
            match format {
                GraphqlFormat::Json => {
                    chunk.extend_from_slice(if records == 0 { b"\n" } else { b",\n" });
                }
                GraphqlFormat::Jsonl => {}
            }
            serde_json::to_writer(&mut chunk, record).map_err(|error| GraphqlError::Protocol {
                status: response.status,
                reason: error.to_string(),
            })?;
            if format == GraphqlFormat::Jsonl {
                chunk.push(b'\n');
            }
            records += 1;
        }
        write(chunk, upload).await?;
        progress(pages, records, upload.bytes_written());
        let (Some(pagination), Some(cursor)) = (pagination, next_cursor) else {
            break;
        };
        if pages >= pagination.max_pages {
            has_more = true;
            break;
        }
        request
            .variables
            .insert(pagination.cursor_variable.clone(), Value::String(cursor));
    }
    if format == GraphqlFormat::Json {
        write(b"\n]\n".to_vec(), upload).await?;
    }
    Ok(GraphqlExportReport {
        status,
        pages,
        records,
        bytes: upload.bytes_written(),
        has_more,
    })
}

/// The records of one page and the cursor of the next, if `hasNextPage`.
fn page_records(
    mut data: Value,
    pagination: &Pagination,
    page: u32,
) -> Result<(Vec<Value>, Option<String>), GraphqlError> {
    let fail = |reason: String| GraphqlError::Pagination {
        reason: format!("page {page}: {reason}"),
    };
    let segments: Vec<&str> = pagination.page_info_path.split('.').collect();
    let Some((_, connection_path)) = segments.split_last() else {
        return Err(fail("page_info_path is empty".into()));
    };
    let pointer = |path: &[&str]| {
        path.iter()
            .map(|segment| format!("/{}", segment.replace('~', "~0").replace('/', "~1")))
            .collect::<String>()
    };
    let page_info = data
        .pointer(&pointer(&segments))
        .ok_or_else(|| fail(format!("no object at {}", pagination.page_info_path)))?;
    let has_next = page_info
        .get("hasNextPage")
        .and_then(Value::as_bool)
        .ok_or_else(|| {
            fail(format!(
                "{}.hasNextPage is missing",
                pagination.page_info_path
            ))
        })?;
    let cursor = page_info
        .get("endCursor")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let next = match (has_next, cursor) {
        (false, _) => None,
        (true, Some(cursor)) => Some(cursor),
        (true, None) => {
            return Err(fail(format!(
                "hasNextPage is true but {}.endCursor is missing",
                pagination.page_info_path
            )));
        }
    };
    let connection = data
        .pointer_mut(&pointer(connection_path))
        .ok_or_else(|| fail("the connection holding pageInfo is missing".into()))?;
    let records = if let Some(Value::Array(nodes)) = connection.get_mut("nodes") {
        std::mem::take(nodes)
    } else if let Some(Value::Array(edges)) = connection.get_mut("edges") {
        edges
            .iter_mut()
            .map(|edge| edge.get_mut("node").map(Value::take).unwrap_or(Value::Null))
            .collect()
    } else {
        return Err(fail(
            "the connection holding pageInfo has neither nodes nor edges".into(),
        ));
    };
    Ok((records, next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_pass_and_their_variables_are_listed() {
        let operation = check_document(
            "query Items($first: Int, $after: String) { items(first: $first, after: $after) { nodes { id } } }",
            None,
        )
        .expect("valid");
        assert_eq!(operation.name.as_deref(), Some("Items"));
        assert_eq!(operation.variables, ["first", "after"]);
        assert_eq!(operation.label(), "query Items");
        let shorthand = check_document("{ a }", None).expect("valid");
        assert_eq!(shorthand.name, None);
        let with_fragment =
            check_document("query Q { ...F } fragment F on Query { a }", None).expect("valid");
        assert_eq!(with_fragment.name.as_deref(), Some("Q"));
    }

    #[test]
    fn syntax_errors_mutations_and_subscriptions_are_refused() {
        assert!(matches!(
            check_document("query { a ", None),
            Err(GraphqlError::Syntax { .. })
        ));
        assert!(matches!(
            check_document("mutation { drop }", None),
            Err(GraphqlError::Refused { reason }) if reason.contains("mutations")
        ));
        assert!(matches!(
            check_document("subscription { ticks }", None),
            Err(GraphqlError::Refused { reason }) if reason.contains("subscriptions")
        ));
        // A mutation beside the chosen query is refused too: the document is
        // checked whole.
        assert!(check_document("query A { a } mutation B { b }", Some("A")).is_err());
        assert!(check_document("type T { a: Int }", None).is_err());
        assert!(check_document("", None).is_err());
    }

    #[test]
    fn the_operation_is_chosen_by_name() {
        let document = "query A { a } query B($x: Int) { b(x: $x) }";
        assert!(check_document(document, None).is_err());
        let b = check_document(document, Some("B")).expect("B");
        assert_eq!(b.variables, ["x"]);
        assert!(check_document(document, Some("C")).is_err());
    }

    #[test]
    fn pages_yield_nodes_or_edges_and_the_next_cursor() {
        let pagination = Pagination {
            page_info_path: "items.pageInfo".into(),
            cursor_variable: "after".into(),
            max_pages: 5,
        };
        let data = json!({"items": {"nodes": [{"id": 1}, {"id": 2}],
                                     "pageInfo": {"hasNextPage": true, "endCursor": "c2"}}});
        let (records, next) = page_records(data, &pagination, 1).expect("page");
        assert_eq!(records, [json!({"id": 1}), json!({"id": 2})]);
        assert_eq!(next.as_deref(), Some("c2"));
        let data = json!({"items": {"edges": [{"node": {"id": 3}}],
                                     "pageInfo": {"hasNextPage": false, "endCursor": null}}});
        let (records, next) = page_records(data, &pagination, 2).expect("page");
        assert_eq!(records, [json!({"id": 3})]);
        assert_eq!(next, None);
        assert!(page_records(json!({"other": {}}), &pagination, 1).is_err());
        let no_cursor = json!({"items": {"nodes": [], "pageInfo": {"hasNextPage": true}}});
        assert!(page_records(no_cursor, &pagination, 1).is_err());
    }

    #[test]
    fn error_summaries_are_short() {
        let errors: Vec<Value> = (0..5)
            .map(|i| json!({"message": format!("e{i}")}))
            .collect();
        assert_eq!(summarize_errors(&errors), "e0; e1; e2; and 2 more");
    }
}
