//! The tasks-extension tools (SEP-2663) the suite's `tasks-*` scenarios call: a
//! tool that never becomes a task, tools that may or must become one, tools that
//! ask for input from inside their task, and one that asks before its task exists.
//!
//! Whether a call becomes a task is the pipeline's decision (the tool allows it and
//! the request declares the extension); these handlers only read `call.task` where
//! the way of asking for input differs. Every wait watches `call.cancel`, so a
//! `tasks/cancel` stops the work at once.

use std::time::{Duration, Instant};

use docket_protocol::tools::CallToolResult;
use docket_server::registry::{Consent, ConsentFuture, ConsentRequest, ToolFuture, ToolHandler};
use docket_server::{AppBuilder, TaskSupport, ToolCall, ToolError, ToolOutcome, ToolSpec};
use serde_json::{Value, json};

use crate::input::{self, Answers, FieldType, Question, Rounds, describe};
use crate::{Registered, no_arguments};

/// Greets by name; never a task.
pub(crate) const GREET: &str = "greet";
/// Sleeps for a number of seconds; a task when the client declares the extension.
pub(crate) const SLOW_COMPUTE: &str = "slow_compute";
/// Ends with a tool error (`isError: true`) after about a second; only as a task.
pub(crate) const FAILING_JOB: &str = "failing_job";
/// Ends with a JSON-RPC error, so its task ends `failed`.
pub(crate) const PROTOCOL_ERROR_JOB: &str = "protocol_error_job";
/// Asks for a confirmation before a (pretend) deletion.
pub(crate) const CONFIRM_DELETE: &str = "confirm_delete";
/// Asks two questions at once.
pub(crate) const MULTI_INPUT: &str = "multi_input";
/// Asks for a name before its task is created, then runs only as a task.
pub(crate) const TOOL_WITH_TASK: &str = "test_tool_with_task";

/// The longest `slow_compute` accepts: long enough for any scenario (the suite
/// uses up to 60 s), short enough that a stray call cannot hold a task for hours.
const SLOW_COMPUTE_MAX_SECONDS: u64 = 3_600;
/// How often `slow_compute` reports progress (its task's status message).
const PROGRESS_STEP: Duration = Duration::from_secs(1);
/// How long `failing_job` works before it fails: long enough for a client to
/// see the task `working` first, as the suite's "~1 s" fixture does.
const FAILING_JOB_DELAY: Duration = Duration::from_secs(1);

const DELETE_CONFIRMATION: Question = Question::form(
    "confirm",
    "Delete the file? Answer confirm: true to delete it.",
    "confirm",
    FieldType::Boolean,
);
const NAME: Question = Question::form("name", "What is your name?", "name", FieldType::String);
const GO_AHEAD: Question = Question::form(
    "confirm",
    "May the tool go ahead?",
    "confirm",
    FieldType::Boolean,
);
const USER_NAME: Question =
    Question::form("user_name", "What is your name?", "name", FieldType::String);

/// Registers the tasks-extension tools.
pub(crate) fn register(builder: AppBuilder) -> Registered {
    builder
        .tool(
            ToolSpec::new(
                GREET,
                "Returns \"Hello, {name}!\". Always answers directly, never as a task.",
                json!({
                    "type": "object",
                    "properties": { "name": { "type": "string", "description": "Who to greet." } },
                    "required": ["name"],
                    "additionalProperties": false
                }),
            ),
            greet,
        )?
        .tool(
            ToolSpec::new(
                SLOW_COMPUTE,
                "Works for `seconds` seconds (reporting progress each second), then returns text. A task when the request declares the tasks extension; cancelling it stops the work at once.",
                json!({
                    "type": "object",
                    "properties": {
                        "seconds": {
                            "type": "number",
                            "minimum": 0,
                            "maximum": SLOW_COMPUTE_MAX_SECONDS,
                            "description": "How long to work, in seconds."
                        },
                        "label": { "type": "string", "description": "A label echoed in the result." }
                    },
                    "required": ["seconds"],
                    "additionalProperties": false
                }),
            )
            .with_task_support(TaskSupport::Optional),
            slow_compute,
        )?
        .tool(
            ToolSpec::new(
                FAILING_JOB,
                "Runs only as a task: works for about a second, then fails with a tool error (isError: true), so the task ends completed.",
                no_arguments(),
            )
            .with_task_support(TaskSupport::Required),
            failing_job,
        )?
        .tool(
            ToolSpec::new(
                PROTOCOL_ERROR_JOB,
                "Fails with a JSON-RPC internal error (-32603); as a task it ends failed with that error.",
                no_arguments(),
            )
            .with_task_support(TaskSupport::Optional),
            protocol_error_job,
        )?
        .tool(
            ToolSpec::new(
                CONFIRM_DELETE,
                "Asks for a confirmation (key confirm, {confirm: boolean}) before pretending to delete `filename`; no file is touched. In a task it waits in input_required for tasks/update.",
                json!({
                    "type": "object",
                    "properties": { "filename": { "type": "string", "description": "The file to pretend to delete." } },
                    "required": ["filename"],
                    "additionalProperties": false
                }),
            )
            .with_task_support(TaskSupport::Optional),
            confirm_delete,
        )?
        .tool(
            ToolSpec::new(
                MULTI_INPUT,
                "Asks two questions at once (keys name and confirm); in a task it stays input_required until both are answered.",
                no_arguments(),
            )
            .with_task_support(TaskSupport::Optional),
            multi_input,
        )?
        .tool(
            ToolSpec::new(
                TOOL_WITH_TASK,
                "Runs only as a task, and asks for your name (key user_name) before the task is created; the task's result greets you.",
                no_arguments(),
            )
            .with_task_support(TaskSupport::Required),
            ToolWithTask,
        )
}

async fn greet(call: ToolCall) -> ToolOutcome {
    // The schema requires a string name, so the fallback never shows.
    let name = call
        .arguments
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    CallToolResult::text(format!("Hello, {name}!")).into()
}

async fn slow_compute(call: ToolCall) -> ToolOutcome {
    // The schema bounds `seconds` to 0..=SLOW_COMPUTE_MAX_SECONDS, so the
    // conversion only fails for a value validation would already have refused.
    let Some(total) = call
        .arguments
        .get("seconds")
        .and_then(Value::as_f64)
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
    else {
        return ToolOutcome::Error(ToolError::InvalidParams(format!(
            "seconds must be a number from 0 to {SLOW_COMPUTE_MAX_SECONDS}"
        )));
    };
    let label = call.arguments.get("label").and_then(Value::as_str);
    let total_seconds = total.as_secs() + u64::from(total.subsec_nanos() > 0);
    let started = Instant::now();
    loop {
        let elapsed = started.elapsed();
        if elapsed >= total {
            break;
        }
        call.progress.report(
            elapsed.as_secs(),
            Some(total_seconds),
            Some(format!(
                "computing: {} of {total_seconds} s",
                elapsed.as_secs()
            )),
        );
        if let Err(stopped) = pause(&call, (total - elapsed).min(PROGRESS_STEP)).await {
            return stopped;
        }
    }
    let text = match label {
        Some(label) => format!("slow_compute {label:?} finished after {total:?}."),
        None => format!("slow_compute finished after {total:?}."),
    };
    CallToolResult::text(text).into()
}

async fn failing_job(call: ToolCall) -> ToolOutcome {
    if let Err(stopped) = pause(&call, FAILING_JOB_DELAY).await {
        return stopped;
    }
    CallToolResult::error(
        "failing_job failed on purpose: this is a tool error, not a protocol error",
    )
    .into()
}

async fn protocol_error_job(_call: ToolCall) -> ToolOutcome {
    ToolOutcome::Error(ToolError::Internal(
        "protocol_error_job failed on purpose with a JSON-RPC error".into(),
    ))
}

async fn confirm_delete(call: ToolCall) -> ToolOutcome {
    let answers = match ask(&call, "confirm-delete", &[DELETE_CONFIRMATION]).await {
        Ok(answers) => answers,
        Err(outcome) => return outcome,
    };
    // The schema requires a string filename, so the fallback never shows.
    let filename = call
        .arguments
        .get("filename")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let text = if accepted_value(&answers, DELETE_CONFIRMATION.key) == Some(&Value::Bool(true)) {
        format!("Deleted {filename} (a pretend deletion: the fixture touches no files).")
    } else {
        format!(
            "Kept {filename}: the deletion was not confirmed ({}).",
            describe(&answers, DELETE_CONFIRMATION.key)
        )
    };
    CallToolResult::text(text).into()
}

async fn multi_input(call: ToolCall) -> ToolOutcome {
    match ask(&call, "multi-input", &[NAME, GO_AHEAD]).await {
        Ok(answers) => CallToolResult::text(format!(
            "Name: {}; confirmed: {}",
            describe(&answers, NAME.key),
            describe(&answers, GO_AHEAD.key)
        ))
        .into(),
        Err(outcome) => outcome,
    }
}

/// `test_tool_with_task`: its consent step asks for the name before the task
/// exists (a multi round-trip round on the `tools/call` itself), and the task it
/// then runs as greets by that name.
struct ToolWithTask;

impl ToolWithTask {
    const KIND: &'static str = "tool-with-task";
    /// The answers must come back with the sealed state of the first round, so the
    /// retry is provably the continuation of that round.
    const ROUNDS: Rounds = Rounds {
        require_state: true,
        one_at_a_time: false,
    };
}

impl ToolHandler for ToolWithTask {
    fn call(&self, call: ToolCall) -> ToolFuture {
        Box::pin(async move {
            // The consent step let the call through only with every answer in, and
            // the pipeline hands the same verified round to the handler.
            match input::gather(&call, Self::KIND, &[USER_NAME], Self::ROUNDS) {
                Ok(answers) => CallToolResult::text(format!(
                    "Hello, {}! This task ran after you answered.",
                    describe(&answers, USER_NAME.key)
                ))
                .into(),
                Err(outcome) => outcome,
            }
        })
    }

    fn consent(&self, request: &ConsentRequest<'_>) -> ConsentFuture {
        let decision = match input::gather_from(
            request.input,
            request.client_capabilities,
            Self::KIND,
            &[USER_NAME],
            Self::ROUNDS,
        ) {
            Ok(_) => Consent::Proceed,
            Err(ToolOutcome::InputRequired { requests, state }) => Consent::Ask { requests, state },
            // Consent cannot answer with a JSON-RPC error, so a request that cannot
            // be asked (no elicitation declared) or a malformed answer is refused
            // with a tool error that says why.
            Err(ToolOutcome::Error(error)) => {
                Consent::Refuse(CallToolResult::error(error.to_string()))
            }
            Err(ToolOutcome::Result(result)) => Consent::Refuse(result),
        };
        Box::pin(async move { decision })
    }
}

/// Asks `questions` the way the call allows: through its task when it runs as
/// one, otherwise as a multi round-trip `input_required` result tagged `kind`.
async fn ask(call: &ToolCall, kind: &str, questions: &[Question]) -> Result<Answers, ToolOutcome> {
    if call.task.is_some() {
        input::gather_in_task(call, questions).await
    } else {
        input::gather(call, kind, questions, Rounds::default())
    }
}

/// The value of an accepted form answer under `key`.
fn accepted_value<'a>(answers: &'a Answers, key: &str) -> Option<&'a Value> {
    let answer = answers.get(key)?;
    if answer.get("action").and_then(Value::as_str) != Some("accept") {
        return None;
    }
    answer.get("value")
}

/// Waits `duration`, or stops early with an error outcome when the call is
/// cancelled. In a task the runtime records `cancelled` whatever this returns.
async fn pause(call: &ToolCall, duration: Duration) -> Result<(), ToolOutcome> {
    tokio::select! {
        () = tokio::time::sleep(duration) => Ok(()),
        () = call.cancel.cancelled() => Err(ToolOutcome::Error(ToolError::Internal(
            "the call was cancelled".into(),
        ))),
    }
}
