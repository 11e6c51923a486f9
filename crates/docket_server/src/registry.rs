//! The tool registry: what each tool declares (name, description, input schema,
//! annotations, whether it may become a task) and the handler that runs it.
//!
//! Embedders register their own tools here through [`ToolRegistry::register`];
//! Docket's tools and the conformance fixture's tools use the same path.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use docket_protocol::JsonObject;
use docket_protocol::jsonrpc::{JsonRpcVersion, OutgoingNotification};
use docket_protocol::logging::{LOG_MESSAGE_METHOD, LogLevel, LoggingMessageParams};
use docket_protocol::meta::{ClientCapabilities, ProgressToken};
use docket_protocol::mrtr::{InputRequests, InputResponses};
use docket_protocol::tools::{CallToolResult, Tool, ToolAnnotations};
use docket_task::TaskRecord;
use docket_task::runtime::TaskContext;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::attribution::Attribution;
use crate::auth::Identity;
use crate::persona::Persona;

/// Whether a call to a tool may, or must, become a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskSupport {
    /// Always answered directly.
    Never,
    /// A task when the request declares the tasks extension, direct otherwise.
    Optional,
    /// Only as a task; a request that does not declare the extension gets -32021.
    Required,
}

/// What a tool declares about itself.
#[derive(Clone, Debug)]
pub struct ToolSpec {
    /// The unique name.
    pub name: String,
    /// A human-readable title.
    pub title: Option<String>,
    /// What it does, for the model. Always present in `tools/list`.
    pub description: String,
    /// The JSON Schema of its arguments (`type: object` at the root). Arguments are
    /// validated against it before the handler runs; to refuse unknown arguments, a
    /// schema says `additionalProperties: false`, as every Docket tool does.
    pub input_schema: Value,
    /// The JSON Schema (2020-12, `type: object` at the root) of its
    /// `structuredContent`, if it declares one: what
    /// [`ToolSpec::with_output_schema`] made of the success shape, so that it also
    /// admits the `{error: {code, category, message, hint}}` of every refusal the
    /// pipeline or the tool answers with.
    pub output_schema: Option<Value>,
    /// Behaviour hints.
    pub annotations: Option<ToolAnnotations>,
    /// Whether calls may become tasks.
    pub task_support: TaskSupport,
    /// The connection a call uses when its `connection` argument is left out, for
    /// tools that fall back to one. The pipeline authorizes the connection a call
    /// actually uses: the one it names, or this one.
    pub default_connection: Option<String>,
    /// Whether the per-caller rate limit applies. A tool that must stay callable
    /// when a caller is limited (`platform_info`, so a caller can always find out
    /// who it is) turns it off.
    pub rate_limited: bool,
    /// The `ui://` view (MCP Apps) a host that renders views shows this tool's
    /// results in; hosts that declare no such support are never told of it.
    pub ui_resource: Option<String>,
}

impl ToolSpec {
    /// A spec with the given name, description and input schema, never a task.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: description.into(),
            input_schema,
            output_schema: None,
            annotations: None,
            task_support: TaskSupport::Never,
            default_connection: None,
            rate_limited: true,
            ui_resource: None,
        }
    }

    /// Declares the shape of the tool's `structuredContent` on success (a JSON
    /// Schema 2020-12 with `type: object` at its root). The declared
    /// `outputSchema` is that shape or a refusal's (`{error: {code, category,
    /// message, hint}}`, [`crate::refusal::Refusal`]): the pipeline can refuse any
    /// call (persona, rate limit) before the tool runs, and the specification asks
    /// every `structuredContent` of a tool with an output schema to conform to it,
    /// errors included. Optional: a tool without one (an embedder's) answers
    /// with whatever `structuredContent` it likes.
    pub fn with_output_schema(mut self, success: Value) -> Self {
        self.output_schema = Some(crate::refusal::output_schema(success));
        self
    }

    /// Shows the tool's results in the view at `uri` (a `ui://` resource) in hosts
    /// that render views.
    pub fn with_ui_resource(mut self, uri: impl Into<String>) -> Self {
        self.ui_resource = Some(uri.into());
        self
    }

    /// Exempts the tool from the per-caller rate limit.
    pub fn without_rate_limit(mut self) -> Self {
        self.rate_limited = false;
        self
    }

    /// Sets the connection a call uses when it names none.
    pub fn with_default_connection(mut self, connection: Option<String>) -> Self {
        self.default_connection = connection;
        self
    }

    /// Sets the annotations.
    pub fn with_annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.annotations = Some(annotations);
        self
    }

    /// Sets whether calls may become tasks.
    pub fn with_task_support(mut self, task_support: TaskSupport) -> Self {
        self.task_support = task_support;
        self
    }

    /// The wire description of this tool.
    pub fn to_wire(&self) -> Tool {
        Tool {
            name: self.name.clone(),
            title: self.title.clone(),
            description: Some(self.description.clone()),
            input_schema: self.input_schema.clone(),
            output_schema: self.output_schema.clone(),
            annotations: self.annotations.clone(),
            extra: JsonObject::new(),
        }
    }

    /// The wire description for a client that renders views or not: with `ui`, a
    /// tool that has a view names it in `_meta.ui.resourceUri`.
    pub(crate) fn to_wire_for(&self, ui: bool) -> Tool {
        let mut tool = self.to_wire();
        if let (true, Some(uri)) = (ui, &self.ui_resource) {
            let ui = docket_protocol::ui::ToolUi {
                resource_uri: uri.clone(),
            };
            tool.extra.insert(
                "_meta".to_owned(),
                Value::Object(docket_protocol::ui::meta(&ui)),
            );
        }
        tool
    }
}

/// Everything a handler gets for one call.
pub struct ToolCall {
    /// The validated arguments.
    pub arguments: JsonObject,
    /// Who is calling.
    pub identity: Arc<Identity>,
    /// The caller's persona.
    pub persona: Arc<Persona>,
    /// What the client declared for this request.
    pub client_capabilities: ClientCapabilities,
    /// Progress reporting; does nothing when the request asked for no progress.
    pub progress: Progress,
    /// Log messages for the caller; does nothing when the caller asked for none.
    pub log: Logger,
    /// The answers to an earlier `input_required` round, with the state the handler
    /// returned then (already verified and decoded).
    pub input: Option<InputRound>,
    /// Fires when the call should stop: the client went away, the task was
    /// cancelled, or the server is stopping.
    pub cancel: CancellationToken,
    /// The task this call runs as, when it became one.
    pub task: Option<Arc<TaskContext>>,
    /// The call's id and what it ran as and caused upstream; Trino clients
    /// are made through it ([`Attribution`]).
    pub attribution: Arc<Attribution>,
}

impl ToolCall {
    /// Asks the client for input while running as a task: the requests are stored
    /// with the task (`input_required`), and this waits until every key is answered
    /// through `tasks/update`.
    ///
    /// # Errors
    /// [`ToolError::InvalidParams`] when the call is not a task (a direct call asks
    /// by returning [`ToolOutcome::InputRequired`] instead), and
    /// [`ToolError::Internal`] when the task is cancelled or its store fails.
    pub async fn request_input(
        &self,
        requests: InputRequests,
    ) -> Result<InputResponses, ToolError> {
        let Some(task) = &self.task else {
            return Err(ToolError::InvalidParams(
                "input can only be requested this way inside a task".into(),
            ));
        };
        let requests = serde_json::to_value(requests)
            .ok()
            .and_then(|value| value.as_object().cloned())
            .unwrap_or_default();
        let answers = task
            .request_input(requests)
            .await
            .map_err(|err| ToolError::Internal(err.to_string()))?;
        Ok(answers.into_iter().collect())
    }
}

/// What a tool's consent step decides before any work (or task) starts.
#[derive(Debug)]
pub enum Consent {
    /// Go ahead.
    Proceed,
    /// Ask the client first (a multi round-trip `input_required` result); the call
    /// is retried with the answers and this state, verified.
    Ask {
        /// What to ask, by key.
        requests: InputRequests,
        /// State for the next round.
        state: Value,
    },
    /// Refuse with this result.
    Refuse(CallToolResult),
    /// Refuse with a JSON-RPC error (a capability the request lacks, an unusable
    /// answer).
    Error(ToolError),
}

/// What a consent step sees.
pub struct ConsentRequest<'a> {
    /// The validated arguments.
    pub arguments: &'a JsonObject,
    /// Who is calling.
    pub identity: &'a Identity,
    /// The caller's persona (already allowed to call the tool).
    pub persona: &'a Persona,
    /// What the client declared for this request.
    pub client_capabilities: &'a ClientCapabilities,
    /// The answers of an earlier round, verified.
    pub input: Option<&'a InputRound>,
    /// The call's attribution, for queries consent runs (EXPLAIN).
    pub attribution: &'a Arc<Attribution>,
}

/// The future a consent step returns.
pub type ConsentFuture = Pin<Box<dyn Future<Output = Consent> + Send>>;

/// The answers of one multi round-trip retry.
#[derive(Clone, Debug)]
pub struct InputRound {
    /// The client's answers by key.
    pub responses: InputResponses,
    /// The state the handler returned with its `input_required` result.
    pub state: Value,
}

/// What a handler returns.
#[derive(Debug)]
pub enum ToolOutcome {
    /// The final result (a tool failure is a result with `isError`).
    Result(CallToolResult),
    /// Ask the client for input; `state` comes back, integrity-protected, on the retry.
    InputRequired {
        /// What to ask, by key.
        requests: InputRequests,
        /// The handler's private state for the next round.
        state: Value,
    },
    /// A protocol-level failure.
    Error(ToolError),
}

impl From<CallToolResult> for ToolOutcome {
    fn from(result: CallToolResult) -> Self {
        ToolOutcome::Result(result)
    }
}

/// Failures a handler reports as JSON-RPC errors rather than tool results.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// The arguments or input responses are unusable (-32602).
    #[error("invalid params: {0}")]
    InvalidParams(String),
    /// The call needs a client capability the request did not declare (-32021).
    #[error("missing client capability: {message}")]
    MissingCapability {
        /// What to tell the client.
        message: String,
        /// The capabilities needed, shaped like `ClientCapabilities` (boxed: it is large
        /// and rare).
        required: Box<ClientCapabilities>,
    },
    /// Something failed inside the server (-32603); the message must be safe to show.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The future a handler returns.
pub type ToolFuture = Pin<Box<dyn Future<Output = ToolOutcome> + Send>>;

/// Runs a tool.
pub trait ToolHandler: Send + Sync + 'static {
    /// Runs one call.
    fn call(&self, call: ToolCall) -> ToolFuture;

    /// Decides, before any work or task starts, whether to ask the client first.
    /// The default proceeds.
    fn consent(&self, request: &ConsentRequest<'_>) -> ConsentFuture {
        let _ = request;
        Box::pin(async { Consent::Proceed })
    }

    /// For a tool whose work is durable on its own (a script run is a row in
    /// `script_runs` that any replica's worker picks up): starts that work for a call
    /// that becomes a task and answers with its own task record, which a
    /// [`TaskSource`](crate::TaskSource) registered for those rows
    /// ([`AppBuilder::task_source`](crate::AppBuilder::task_source)) then reports on. `None`,
    /// the default, lets the pipeline create a row in the task table and run
    /// [`ToolHandler::call`] as the task's work.
    fn start_own_task<'a>(&'a self, call: &'a ToolCall) -> Option<OwnTaskFuture<'a>> {
        let _ = call;
        None
    }
}

/// What [`ToolHandler::start_own_task`] returns: the task record of the started
/// work, or the refusal to answer instead (nothing started).
pub type OwnTaskFuture<'a> =
    Pin<Box<dyn Future<Output = Result<TaskRecord, ToolOutcome>> + Send + 'a>>;

impl<F, Fut> ToolHandler for F
where
    F: Fn(ToolCall) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ToolOutcome> + Send + 'static,
{
    fn call(&self, call: ToolCall) -> ToolFuture {
        Box::pin(self(call))
    }
}

/// A registered tool: its spec, compiled argument validator and handler.
pub struct RegisteredTool {
    /// What it declares.
    pub spec: ToolSpec,
    validator: jsonschema::Validator,
    handler: Arc<dyn ToolHandler>,
}

impl RegisteredTool {
    /// Checks arguments against the input schema; `Err` lists every violation.
    ///
    /// # Errors
    /// A message naming each invalid or unknown argument.
    pub fn validate(&self, arguments: &JsonObject) -> Result<(), String> {
        let instance = Value::Object(arguments.clone());
        let problems: Vec<String> = self
            .validator
            .iter_errors(&instance)
            .map(|error| {
                let path = error.instance_path().to_string();
                if path.is_empty() {
                    error.to_string()
                } else {
                    format!("{path}: {error}")
                }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }

    /// The handler.
    pub fn handler(&self) -> Arc<dyn ToolHandler> {
        Arc::clone(&self.handler)
    }
}

/// Adds to `found` the place (`tool` and a JSON pointer) of every string without a
/// `maxLength` and every array without a `maxItems` in the input schema `schema`; a
/// value held to an `enum` or a `const` is bounded by itself. Every tool Docket
/// registers declares the size of each input (THREATS.md, "Bounds"), and a test
/// holds every one to it.
pub fn unbounded_inputs(schema: &Value, tool: &str, found: &mut Vec<String>) {
    walk_schema(schema, &mut format!("{tool}:"), found);
}

fn walk_schema(schema: &Value, at: &mut String, found: &mut Vec<String>) {
    let Some(object) = schema.as_object() else {
        return;
    };
    let types: Vec<&str> = match object.get("type") {
        Some(Value::String(name)) => vec![name.as_str()],
        Some(Value::Array(names)) => names.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let fixed = object.contains_key("enum") || object.contains_key("const");
    if types.contains(&"string") && !fixed && !object.contains_key("maxLength") {
        found.push(format!("{at} string without maxLength"));
    }
    if types.contains(&"array") && !fixed && !object.contains_key("maxItems") {
        found.push(format!("{at} array without maxItems"));
    }
    let mut descend = |key: &str, value: &Value, at: &mut String| {
        let length = at.len();
        at.push('/');
        at.push_str(key);
        walk_schema(value, at, found);
        at.truncate(length);
    };
    for (key, value) in object {
        match key.as_str() {
            "properties" | "$defs" | "definitions" | "patternProperties" => {
                if let Some(children) = value.as_object() {
                    for (name, child) in children {
                        descend(&format!("{key}/{name}"), child, at);
                    }
                }
            }
            "items" | "additionalProperties" | "not" | "contains" => descend(key, value, at),
            "anyOf" | "oneOf" | "allOf" | "prefixItems" => {
                for (index, child) in value.as_array().into_iter().flatten().enumerate() {
                    descend(&format!("{key}/{index}"), child, at);
                }
            }
            _ => {}
        }
    }
}

/// Checks that `schema` can be a tool's `outputSchema`: an object schema
/// (`type: object` at the root, which revisions 2025-06-18 and 2025-11-25 require)
/// that is valid under the JSON Schema 2020-12 meta-schema and compiles.
///
/// # Errors
/// Why it cannot, in words.
pub fn check_output_schema(schema: &Value) -> Result<(), String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the root must have type: object".into());
    }
    jsonschema::draft202012::meta::validate(schema).map_err(|err| err.to_string())?;
    jsonschema::draft202012::new(schema)
        .map(drop)
        .map_err(|err| err.to_string())
}

/// Why a tool could not be registered.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// Two tools with one name.
    #[error("a tool named {0:?} is already registered")]
    Duplicate(String),
    /// The name is not 1–128 characters of `[A-Za-z0-9_.-]`.
    #[error("tool name {0:?} must be 1 to 128 characters of letters, digits, '_', '.' or '-'")]
    BadName(String),
    /// The input schema does not compile or is not an object schema.
    #[error("the input schema of tool {name:?} is invalid: {reason}")]
    BadSchema {
        /// The tool.
        name: String,
        /// Why.
        reason: String,
    },
    /// The output schema is not a JSON Schema 2020-12 with `type: object` at its
    /// root (the earlier protocol revisions that carry output schemas accept
    /// only object schemas).
    #[error("the output schema of tool {name:?} is invalid: {reason}")]
    BadOutputSchema {
        /// The tool.
        name: String,
        /// Why.
        reason: String,
    },
}

/// All tools, by name, in a deterministic (sorted) order.
#[derive(Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, RegisteredTool>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool.
    ///
    /// # Errors
    /// [`RegistryError`] for a duplicate or badly formed name, or a schema that does not compile.
    pub fn register(
        &mut self,
        spec: ToolSpec,
        handler: impl ToolHandler,
    ) -> Result<(), RegistryError> {
        let name = spec.name.clone();
        let well_formed = !name.is_empty()
            && name.len() <= 128
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
        if !well_formed {
            return Err(RegistryError::BadName(name));
        }
        if self.tools.contains_key(&name) {
            return Err(RegistryError::Duplicate(name));
        }
        if spec.input_schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(RegistryError::BadSchema {
                name,
                reason: "the root must have type: object".into(),
            });
        }
        let validator = jsonschema::validator_for(&spec.input_schema).map_err(|err| {
            RegistryError::BadSchema {
                name: name.clone(),
                reason: err.to_string(),
            }
        })?;
        if let Some(schema) = &spec.output_schema {
            check_output_schema(schema).map_err(|reason| RegistryError::BadOutputSchema {
                name: name.clone(),
                reason,
            })?;
        }
        self.tools.insert(
            name,
            RegisteredTool {
                spec,
                validator,
                handler: Arc::new(handler),
            },
        );
        Ok(())
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&RegisteredTool> {
        self.tools.get(name)
    }

    /// Every tool, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = &RegisteredTool> {
        self.tools.values()
    }
}

/// Reports progress for one call: as `notifications/progress` on the response
/// stream when the request carried a progress token, as the task's status message
/// when the call runs as a task, and nowhere otherwise.
#[derive(Clone, Default)]
pub struct Progress {
    sink: Sink,
}

#[derive(Clone, Default)]
enum Sink {
    #[default]
    Nowhere,
    Stream(ProgressToken, mpsc::UnboundedSender<ProgressUpdate>),
    Task(Arc<TaskContext>),
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.sink {
            Sink::Nowhere => "nowhere",
            Sink::Stream(..) => "stream",
            Sink::Task(_) => "task",
        };
        f.debug_struct("Progress").field("sink", &kind).finish()
    }
}

/// One progress report.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgressUpdate {
    /// The request's token.
    pub token: ProgressToken,
    /// Progress so far.
    pub progress: u64,
    /// The total, when known.
    pub total: Option<u64>,
    /// What is happening.
    pub message: Option<String>,
}

impl Progress {
    /// A reporter that sends updates for `token` into `sender`.
    pub fn new(token: ProgressToken, sender: mpsc::UnboundedSender<ProgressUpdate>) -> Self {
        Self {
            sink: Sink::Stream(token, sender),
        }
    }

    /// A reporter that writes the task's status message.
    pub fn for_task(task: Arc<TaskContext>) -> Self {
        Self {
            sink: Sink::Task(task),
        }
    }

    /// Whether anyone will see progress.
    pub fn is_enabled(&self) -> bool {
        !matches!(self.sink, Sink::Nowhere)
    }

    /// Reports progress; a no-op when nobody asked for it or the client has gone away.
    pub fn report(&self, progress: u64, total: Option<u64>, message: Option<String>) {
        match &self.sink {
            Sink::Nowhere => {}
            Sink::Stream(token, sender) => {
                let update = ProgressUpdate {
                    token: token.clone(),
                    progress,
                    total,
                    message,
                };
                // A closed channel means the response stream is gone; the call's cancel
                // token fires for that, so there is nothing to do here.
                let _ = sender.send(update);
            }
            Sink::Task(task) => {
                // Task progress goes to the status message: the task's progress channel.
                let text = match (message, total) {
                    (Some(message), _) => message,
                    (None, Some(total)) => format!("{progress} of {total}"),
                    (None, None) => format!("{progress} done"),
                };
                task.set_status_message(text);
            }
        }
    }
}

/// Sends a call's log messages to its caller as `notifications/message`, on the
/// call's own stream, when the caller asked for them at or above a level; otherwise
/// it does nothing. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Logger {
    sink: Option<(LogLevel, mpsc::UnboundedSender<OutgoingNotification>)>,
}

impl Logger {
    /// A logger that sends messages of `minimum` and above into `sender`.
    pub fn new(minimum: LogLevel, sender: mpsc::UnboundedSender<OutgoingNotification>) -> Self {
        Self {
            sink: Some((minimum, sender)),
        }
    }

    /// Whether a message at `level` would be sent.
    pub fn is_enabled(&self, level: LogLevel) -> bool {
        self.sink
            .as_ref()
            .is_some_and(|(minimum, _)| level >= *minimum)
    }

    /// Sends `data` at `level` from `logger`; a no-op below the caller's level, when
    /// the caller asked for no logs, or when the stream is gone.
    pub fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) {
        let Some((minimum, sender)) = &self.sink else {
            return;
        };
        if level < *minimum {
            return;
        }
        let params = LoggingMessageParams {
            level,
            logger: logger.map(str::to_owned),
            data,
        };
        let notification = OutgoingNotification {
            jsonrpc: JsonRpcVersion,
            method: LOG_MESSAGE_METHOD.to_owned(),
            params: serde_json::to_value(params).unwrap_or(Value::Null),
        };
        // A closed channel means the response stream is gone; the call's cancel
        // token fires for that.
        let _ = sender.send(notification);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answer(_: ToolCall) -> std::future::Ready<ToolOutcome> {
        std::future::ready(ToolOutcome::Result(CallToolResult::text("ok")))
    }

    #[test]
    fn a_declared_output_schema_also_admits_refusals_and_is_a_2020_12_schema() {
        let spec = ToolSpec::new("typed", "A typed tool.", json!({"type": "object"}))
            .with_output_schema(json!({
                "type": "object",
                "properties": {"n": {"type": "integer"}},
                "required": ["n"],
                "additionalProperties": false
            }));
        let schema = spec.output_schema.clone().expect("declared");
        check_output_schema(&schema).expect("valid");
        jsonschema::draft7::meta::validate(&schema).expect("draft-07 reads it too");
        let validator = jsonschema::draft202012::new(&schema).expect("compiles");
        assert!(validator.is_valid(&json!({"n": 1})));
        let refusal = crate::refusal::Refusal::NotFound.result("no", "Look elsewhere.");
        assert!(validator.is_valid(&refusal.structured_content.expect("structured")));
        assert!(!validator.is_valid(&json!({"n": "one"})));
        assert!(!validator.is_valid(&json!({"error": "a string is no refusal"})));
        let mut registry = ToolRegistry::new();
        registry.register(spec, answer).expect("registers");
    }

    #[test]
    fn an_output_schema_that_is_not_an_object_schema_or_not_a_schema_is_refused() {
        for schema in [
            json!({"type": "array"}),
            json!({"type": "object", "properties": {"n": {"type": "integer-ish"}}}),
            json!({"type": "object", "required": "n"}),
        ] {
            let mut spec = ToolSpec::new("typed", "A typed tool.", json!({"type": "object"}));
            spec.output_schema = Some(schema.clone());
            let mut registry = ToolRegistry::new();
            assert!(
                matches!(
                    registry.register(spec, answer),
                    Err(RegistryError::BadOutputSchema { .. })
                ),
                "{schema}"
            );
        }
    }
}
