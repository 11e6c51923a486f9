//! The multi round-trip tools: each asks the client for input with an
//! `input_required` result and completes when the retry carries the answers, as
//! the suite's `input-required-result-*` scenarios and the `server-stateless`
//! streaming probe expect.

use docket_protocol::tools::CallToolResult;
use docket_server::{AppBuilder, ToolCall, ToolOutcome, ToolSpec};

use crate::input::{self, FieldType, Question, Rounds, describe, gather};
use crate::{Registered, no_arguments};

/// Asks for the user's name by form elicitation.
pub(crate) const ELICITATION: &str = "test_input_required_result_elicitation";
/// Asks the client's model a question.
pub(crate) const SAMPLING: &str = "test_input_required_result_sampling";
/// Asks for the client's roots.
pub(crate) const LIST_ROOTS: &str = "test_input_required_result_list_roots";
/// Asks for a confirmation and proves the `requestState` round trip.
pub(crate) const REQUEST_STATE: &str = "test_input_required_result_request_state";
/// Asks an elicitation, a sampling and a roots question in one round.
pub(crate) const MULTIPLE_INPUTS: &str = "test_input_required_result_multiple_inputs";
/// Asks two questions in two rounds, with a new state each round.
pub(crate) const MULTI_ROUND: &str = "test_input_required_result_multi_round";
/// Asks for a confirmation; a tampered `requestState` is refused by the pipeline.
pub(crate) const TAMPERED_STATE: &str = "test_input_required_result_tampered_state";
/// Asks only for what the request's capabilities allow.
pub(crate) const CAPABILITIES: &str = "test_input_required_result_capabilities";
/// Needs an elicitation; its response must never contain a server request.
pub(crate) const STREAMING_ELICITATION: &str = "test_streaming_elicitation";
/// The 2025-era elicitation scenario's tool: asks with the `message` argument for a
/// username and e-mail address. In a session it becomes `elicitation/create` on the
/// call's stream; for the current era it is an ordinary `input_required` round.
pub(crate) const LEGACY_ELICITATION: &str = "test_elicitation";
/// The 2025-era sampling scenario's tool: asks the client's model the `prompt`
/// argument. In a session it becomes `sampling/createMessage` on the call's stream;
/// for the current era it is an ordinary `input_required` round.
pub(crate) const LEGACY_SAMPLING: &str = "test_sampling";
/// Asks with a default for every primitive type (SEP-1034).
pub(crate) const SEP1034_DEFAULTS: &str = "test_elicitation_sep1034_defaults";
/// Asks with every enum variant (SEP-1330).
pub(crate) const SEP1330_ENUMS: &str = "test_elicitation_sep1330_enums";

const USER_NAME: Question =
    Question::form("user_name", "What is your name?", "name", FieldType::String);
const CAPITAL_QUESTION: Question =
    Question::sample("capital_question", "What is the capital of France?", 100);
const CLIENT_ROOTS: Question = Question::roots("client_roots");
const CONFIRM: Question = Question::form("confirm", "Please confirm", "ok", FieldType::Boolean);
const GREETING: Question = Question::sample("greeting", "Generate a greeting", 50);
const STEP_1: Question = Question::form(
    "step1",
    "Step 1: What is your name?",
    "name",
    FieldType::String,
);
const STEP_2: Question = Question::form(
    "step2",
    "Step 2: What is your favorite color?",
    "color",
    FieldType::String,
);
const ELICIT_INPUT: Question = Question::form(
    "elicit_input",
    "Elicitation input",
    "value",
    FieldType::String,
);
const SAMPLE_INPUT: Question = Question::sample("sample_input", "Sample request", 50);
const STREAM_CONFIRM: Question = Question::form(
    "stream_confirm",
    "Continue the streaming elicitation?",
    "ok",
    FieldType::Boolean,
);

/// Registers the multi round-trip tools.
pub(crate) fn register(builder: AppBuilder) -> Registered {
    builder
        .tool(
            ToolSpec::new(
                LEGACY_ELICITATION,
                "Asks for a username and an e-mail address with `message`, then reports the answer.",
                serde_json::json!({
                    "type": "object",
                    "properties": {
                        "message": { "type": "string", "description": "The message to show the user." }
                    },
                    "required": ["message"],
                    "additionalProperties": false
                }),
            ),
            legacy_elicitation,
        )?
        .tool(
            ToolSpec::new(
                LEGACY_SAMPLING,
                "Asks the client's model `prompt` (at most 100 tokens), then reports its answer.",
                serde_json::json!({
                    "type": "object",
                    "properties": {
                        "prompt": { "type": "string", "description": "What to ask the model." }
                    },
                    "required": ["prompt"],
                    "additionalProperties": false
                }),
            ),
            legacy_sampling,
        )?
        .tool(
            ToolSpec::new(
                SEP1034_DEFAULTS,
                "Asks for a profile whose every field has a default, then reports the answer.",
                no_arguments(),
            ),
            sep1034_defaults,
        )?
        .tool(
            ToolSpec::new(
                SEP1330_ENUMS,
                "Asks with every kind of enum field, then reports the answer.",
                no_arguments(),
            ),
            sep1330_enums,
        )?
        .tool(
            ToolSpec::new(
                ELICITATION,
                "Asks for your name by form elicitation (key user_name), then greets you.",
                no_arguments(),
            ),
            elicitation,
        )?
        .tool(
            ToolSpec::new(
                SAMPLING,
                "Asks the client's model for the capital of France (key capital_question), then reports the answer.",
                no_arguments(),
            ),
            sampling,
        )?
        .tool(
            ToolSpec::new(
                LIST_ROOTS,
                "Asks for the client's roots (key client_roots), then lists them.",
                no_arguments(),
            ),
            list_roots,
        )?
        .tool(
            ToolSpec::new(
                REQUEST_STATE,
                "Asks for a confirmation (key confirm) with a requestState; the retry must echo the state.",
                no_arguments(),
            ),
            request_state,
        )?
        .tool(
            ToolSpec::new(
                MULTIPLE_INPUTS,
                "Asks for a name, a sampled greeting and the client's roots in one round (keys user_name, greeting, client_roots).",
                no_arguments(),
            ),
            multiple_inputs,
        )?
        .tool(
            ToolSpec::new(
                MULTI_ROUND,
                "Asks for a name (key step1), then a favourite colour (key step2), in two rounds with a new state each.",
                no_arguments(),
            ),
            multi_round,
        )?
        .tool(
            ToolSpec::new(
                TAMPERED_STATE,
                "Asks for a confirmation (key confirm) with an integrity-protected requestState; a tampered state is refused.",
                no_arguments(),
            ),
            tampered_state,
        )?
        .tool(
            ToolSpec::new(
                CAPABILITIES,
                "Asks only for the input the request's client capabilities allow (elicitation, sampling), or nothing.",
                no_arguments(),
            ),
            capabilities,
        )?
        .tool(
            ToolSpec::new(
                STREAMING_ELICITATION,
                "Needs form elicitation: asks for a confirmation as an input_required result, never as a server request.",
                no_arguments(),
            ),
            streaming_elicitation,
        )
}

/// Runs [`gather`] and, when every answer is in, builds the result with `complete`.
fn ask(
    call: &ToolCall,
    kind: &str,
    questions: &[Question],
    rounds: Rounds,
    complete: impl FnOnce(&input::Answers) -> String,
) -> ToolOutcome {
    match gather(call, kind, questions, rounds) {
        Ok(answers) => CallToolResult::text(complete(&answers)).into(),
        Err(outcome) => outcome,
    }
}

async fn elicitation(call: ToolCall) -> ToolOutcome {
    ask(
        &call,
        "elicitation",
        &[USER_NAME],
        Rounds::default(),
        |answers| {
            if accepted(answers, USER_NAME.key) {
                format!("Hello, {}!", describe(answers, USER_NAME.key))
            } else {
                format!("No name was given: {}.", describe(answers, USER_NAME.key))
            }
        },
    )
}

async fn sampling(call: ToolCall) -> ToolOutcome {
    ask(
        &call,
        "sampling",
        &[CAPITAL_QUESTION],
        Rounds::default(),
        |answers| {
            format!(
                "Sampling result: {}",
                describe(answers, CAPITAL_QUESTION.key)
            )
        },
    )
}

async fn list_roots(call: ToolCall) -> ToolOutcome {
    ask(
        &call,
        "list-roots",
        &[CLIENT_ROOTS],
        Rounds::default(),
        |answers| format!("Found {}", describe(answers, CLIENT_ROOTS.key)),
    )
}

async fn request_state(call: ToolCall) -> ToolOutcome {
    let rounds = Rounds {
        require_state: true,
        ..Rounds::default()
    };
    ask(&call, "request-state", &[CONFIRM], rounds, |answers| {
        format!(
            "state-ok: requestState verified; confirmed: {}",
            describe(answers, CONFIRM.key)
        )
    })
}

async fn multiple_inputs(call: ToolCall) -> ToolOutcome {
    ask(
        &call,
        "multiple-inputs",
        &[USER_NAME, GREETING, CLIENT_ROOTS],
        Rounds::default(),
        |answers| {
            format!(
                "Name: {}; Greeting: {}; Roots: {}",
                describe(answers, USER_NAME.key),
                describe(answers, GREETING.key),
                describe(answers, CLIENT_ROOTS.key)
            )
        },
    )
}

async fn multi_round(call: ToolCall) -> ToolOutcome {
    // The state of round 2 carries the answer of round 1, so it differs from the
    // state of round 1, as the suite requires.
    let rounds = Rounds {
        require_state: true,
        one_at_a_time: true,
    };
    ask(&call, "multi-round", &[STEP_1, STEP_2], rounds, |answers| {
        format!(
            "Multi-round complete for {} who likes {}",
            describe(answers, STEP_1.key),
            describe(answers, STEP_2.key)
        )
    })
}

async fn tampered_state(call: ToolCall) -> ToolOutcome {
    // Nothing to check here: the pipeline refuses a requestState that fails its
    // HMAC before this handler runs, so any state it sees is one it sealed.
    let rounds = Rounds {
        require_state: true,
        ..Rounds::default()
    };
    ask(&call, "tamper-test", &[CONFIRM], rounds, |answers| {
        format!(
            "integrity-ok: requestState verified; confirmed: {}",
            describe(answers, CONFIRM.key)
        )
    })
}

async fn capabilities(call: ToolCall) -> ToolOutcome {
    const KIND: &str = "capabilities";
    // On a retry, finish the questions of the earlier round; on a first call, ask
    // only what this request's capabilities allow.
    let questions: Vec<Question> = match input::asked_keys(&call, KIND) {
        Some(asked) => [ELICIT_INPUT, SAMPLE_INPUT]
            .into_iter()
            .filter(|question| asked.contains(&question.key))
            .collect(),
        None => [ELICIT_INPUT, SAMPLE_INPUT]
            .into_iter()
            .filter(|question| question.is_askable(&call.client_capabilities))
            .collect(),
    };
    if questions.is_empty() {
        return CallToolResult::text(
            "No input can be requested: the request declared neither elicitation nor sampling.",
        )
        .into();
    }
    ask(&call, KIND, &questions, Rounds::default(), |answers| {
        let received: Vec<String> = answers
            .keys()
            .map(|key| format!("{key} = {}", describe(answers, key)))
            .collect();
        format!("capabilities-ok: received {}", received.join("; "))
    })
}

async fn streaming_elicitation(call: ToolCall) -> ToolOutcome {
    ask(
        &call,
        "streaming-elicitation",
        &[STREAM_CONFIRM],
        Rounds::default(),
        |answers| {
            format!(
                "Streaming elicitation complete; confirmed: {}",
                describe(answers, STREAM_CONFIRM.key)
            )
        },
    )
}

/// Whether the form answer under `key` was accepted.
fn accepted(answers: &input::Answers, key: &str) -> bool {
    answers
        .get(key)
        .and_then(|answer| answer.get("action"))
        .and_then(serde_json::Value::as_str)
        == Some("accept")
}

async fn legacy_elicitation(call: ToolCall) -> ToolOutcome {
    let message = call
        .arguments
        .get("message")
        .and_then(serde_json::Value::as_str)
        .unwrap_or("Please provide your information")
        .to_owned();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "username": { "type": "string", "description": "User's response" },
            "email": { "type": "string", "description": "User's email address" }
        },
        "required": ["username", "email"]
    });
    ask_once(call, message, schema, |action, content| {
        format!("User response: action: {action}, content: {content}")
    })
}

async fn legacy_sampling(call: ToolCall) -> ToolOutcome {
    use docket_protocol::meta::ClientCapabilities;
    use docket_protocol::mrtr::InputRequest;
    if !call.client_capabilities.supports_sampling() {
        return ToolOutcome::Error(docket_server::ToolError::MissingCapability {
            message: format!("{LEGACY_SAMPLING} needs the client to declare sampling"),
            required: Box::new(ClientCapabilities::with_sampling()),
        });
    }
    let Some(round) = call.input else {
        let prompt = call
            .arguments
            .get("prompt")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("Hello");
        let question = InputRequest::CreateMessage(serde_json::json!({
            "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
            "maxTokens": 100
        }));
        return ToolOutcome::InputRequired {
            requests: [("sample".to_owned(), question)].into_iter().collect(),
            state: serde_json::Value::Null,
        };
    };
    let answer = round.responses.get("sample").cloned().unwrap_or_default();
    // One content block, or (since 2025-11-25) an array of them.
    let content = match &answer["content"] {
        serde_json::Value::Array(blocks) => blocks.first().cloned().unwrap_or_default(),
        block => block.clone(),
    };
    let text = content["text"].as_str().unwrap_or("(no text)");
    CallToolResult::text(format!("LLM response: {text}")).into()
}

async fn sep1034_defaults(call: ToolCall) -> ToolOutcome {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "default": "John Doe" },
            "age": { "type": "integer", "default": 30 },
            "score": { "type": "number", "default": 95.5 },
            "status": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" },
            "verified": { "type": "boolean", "default": true }
        }
    });
    ask_once(
        call,
        "Please review your profile".to_owned(),
        schema,
        completed,
    )
}

async fn sep1330_enums(call: ToolCall) -> ToolOutcome {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "untitledSingle": { "type": "string", "enum": ["option1", "option2", "option3"] },
            "titledSingle": { "type": "string", "oneOf": [
                { "const": "value1", "title": "First Option" },
                { "const": "value2", "title": "Second Option" },
                { "const": "value3", "title": "Third Option" }
            ] },
            "legacyEnum": { "type": "string", "enum": ["opt1", "opt2", "opt3"],
                            "enumNames": ["Option One", "Option Two", "Option Three"] },
            "untitledMulti": { "type": "array", "items": { "type": "string", "enum": ["option1", "option2", "option3"] } },
            "titledMulti": { "type": "array", "items": { "anyOf": [
                { "const": "value1", "title": "First Choice" },
                { "const": "value2", "title": "Second Choice" },
                { "const": "value3", "title": "Third Choice" }
            ] } }
        }
    });
    ask_once(call, "Please choose".to_owned(), schema, completed)
}

/// The 2025-era scenarios' summary of an answer.
fn completed(action: &str, content: &serde_json::Value) -> String {
    format!("Elicitation completed: action={action}, content={content}")
}

/// Asks one form question (key `user`), then reports the answer through `report`.
fn ask_once(
    call: ToolCall,
    message: String,
    schema: serde_json::Value,
    report: fn(&str, &serde_json::Value) -> String,
) -> ToolOutcome {
    use docket_protocol::mrtr::{ElicitRequestParams, InputRequest};
    let Some(round) = call.input else {
        let question = InputRequest::Elicit(ElicitRequestParams::form(message, schema));
        return ToolOutcome::InputRequired {
            requests: [("user".to_owned(), question)].into_iter().collect(),
            state: serde_json::Value::Null,
        };
    };
    let answer = round.responses.get("user").cloned().unwrap_or_default();
    let content = answer.get("content").cloned().unwrap_or_default();
    CallToolResult::text(report(
        answer["action"].as_str().unwrap_or("none"),
        &content,
    ))
    .into()
}
