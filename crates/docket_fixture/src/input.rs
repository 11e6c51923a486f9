//! Gathering input over multi round-trip requests: the fixture's tools describe the
//! questions they need answered, and [`gather`] turns a call into either the
//! answers or the next `input_required` round.
//!
//! Answers so far travel in the handler state, which the pipeline seals into the
//! `requestState` and verifies on the retry, so a tool never trusts an answer the
//! client merely claims to have given earlier. Every rule of the multi round-trip
//! pattern the suite checks lives here once:
//!
//! - only request kinds the client declared in *this* request are asked for;
//!   nothing askable at all is a -32021 naming the capabilities needed;
//! - a missing answer is asked for again (a new `input_required`), not an error;
//! - answers under unknown keys are ignored;
//! - an answer of the wrong shape is a -32602.
//!
//! Inside a task the same questions are asked through the task instead
//! ([`gather_in_task`]): the requests are stored with the task and answered by
//! `tasks/update`, so there is no state to carry between rounds.

use docket_protocol::JsonObject;
use docket_protocol::meta::{ClientCapabilities, ElicitationCapability};
use docket_protocol::mrtr::{
    ElicitAction, ElicitRequestParams, ElicitResult, InputRequest, InputRequests,
};
use docket_server::{InputRound, ToolCall, ToolError, ToolOutcome};
use serde_json::{Value, json};

/// One piece of input a tool needs, under the key the client answers it by.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Question {
    /// The key in `inputRequests` and `inputResponses`.
    pub(crate) key: &'static str,
    /// How to ask.
    pub(crate) ask: Ask,
}

/// How a question is asked.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Ask {
    /// A form elicitation with one required field.
    Form {
        /// What to tell the user.
        message: &'static str,
        /// The field's name.
        field: &'static str,
        /// The field's type.
        field_type: FieldType,
    },
    /// A sampling request with one user message.
    Sample {
        /// The user message.
        prompt: &'static str,
        /// The token budget.
        max_tokens: u32,
    },
    /// A request for the client's roots.
    Roots,
}

/// The type of a form field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FieldType {
    /// A string.
    String,
    /// A boolean.
    Boolean,
}

impl FieldType {
    fn name(self) -> &'static str {
        match self {
            FieldType::String => "string",
            FieldType::Boolean => "boolean",
        }
    }

    fn accepts(self, value: &Value) -> bool {
        match self {
            FieldType::String => value.is_string(),
            FieldType::Boolean => value.is_boolean(),
        }
    }
}

impl Question {
    /// A form elicitation with one required field.
    pub(crate) const fn form(
        key: &'static str,
        message: &'static str,
        field: &'static str,
        field_type: FieldType,
    ) -> Self {
        Self {
            key,
            ask: Ask::Form {
                message,
                field,
                field_type,
            },
        }
    }

    /// A sampling request with one user message.
    pub(crate) const fn sample(key: &'static str, prompt: &'static str, max_tokens: u32) -> Self {
        Self {
            key,
            ask: Ask::Sample { prompt, max_tokens },
        }
    }

    /// A roots request.
    pub(crate) const fn roots(key: &'static str) -> Self {
        Self {
            key,
            ask: Ask::Roots,
        }
    }

    /// Whether this request's capabilities allow asking the question.
    pub(crate) fn is_askable(&self, capabilities: &ClientCapabilities) -> bool {
        match self.ask {
            Ask::Form { .. } => capabilities.supports_form_elicitation(),
            Ask::Sample { .. } => capabilities.supports_sampling(),
            Ask::Roots => capabilities.supports_roots(),
        }
    }

    /// Adds the capability this question needs to `required`.
    fn require(&self, required: &mut ClientCapabilities) {
        match self.ask {
            Ask::Form { .. } => required.elicitation = Some(ElicitationCapability::default()),
            Ask::Sample { .. } => required.sampling = Some(Value::Object(JsonObject::new())),
            Ask::Roots => required.roots = Some(Value::Object(JsonObject::new())),
        }
    }

    /// The input request that asks this question.
    pub(crate) fn request(&self) -> InputRequest {
        match self.ask {
            Ask::Form {
                message,
                field,
                field_type,
            } => InputRequest::Elicit(ElicitRequestParams::form(
                message,
                json!({
                    "type": "object",
                    "properties": { field: { "type": field_type.name() } },
                    "required": [field]
                }),
            )),
            Ask::Sample { prompt, max_tokens } => InputRequest::CreateMessage(json!({
                "messages": [{ "role": "user", "content": { "type": "text", "text": prompt } }],
                "maxTokens": max_tokens
            })),
            Ask::Roots => InputRequest::ListRoots(json!({})),
        }
    }

    /// Checks the client's answer and reduces it to what the tool keeps in its state:
    /// `{"action": "accept", "value": …}` or `{"action": "decline"|"cancel"}` for a
    /// form, `{"text": …}` for sampling, `{"roots": [uri, …]}` for roots.
    pub(crate) fn read_answer(&self, answer: &Value) -> Result<Value, String> {
        let key = self.key;
        match self.ask {
            Ask::Form {
                field, field_type, ..
            } => {
                let result: ElicitResult =
                    serde_json::from_value(answer.clone()).map_err(|err| {
                        format!("inputResponses.{key} is not an elicitation result: {err}")
                    })?;
                match result.action {
                    ElicitAction::Accept => {
                        let value = result
                            .content
                            .as_ref()
                            .and_then(|content| content.get(field))
                            .filter(|value| field_type.accepts(value))
                            .ok_or_else(|| {
                                format!(
                                    "inputResponses.{key}: an accepted form must carry {field:?} as a {}",
                                    field_type.name()
                                )
                            })?;
                        Ok(json!({ "action": "accept", "value": value }))
                    }
                    ElicitAction::Decline => Ok(json!({ "action": "decline" })),
                    ElicitAction::Cancel => Ok(json!({ "action": "cancel" })),
                }
            }
            Ask::Sample { .. } => {
                let content = answer.get("content").ok_or_else(|| {
                    format!("inputResponses.{key} is not a sampling result: it has no content")
                })?;
                // A sampling result carries one content block, or (since 2025-11-25) an array of them.
                let blocks = match content {
                    Value::Array(blocks) => blocks.iter().collect::<Vec<_>>(),
                    block => vec![block],
                };
                if blocks
                    .iter()
                    .any(|block| block.get("type").and_then(Value::as_str).is_none())
                {
                    return Err(format!(
                        "inputResponses.{key} is not a sampling result: a content block has no type"
                    ));
                }
                let text = blocks
                    .iter()
                    .find_map(|block| block.get("text").and_then(Value::as_str))
                    .unwrap_or("(a non-text answer)");
                Ok(json!({ "text": text }))
            }
            Ask::Roots => {
                let roots = answer
                    .get("roots")
                    .and_then(Value::as_array)
                    .ok_or_else(|| {
                        format!("inputResponses.{key} is not a roots result: it has no roots array")
                    })?;
                let uris = roots
                    .iter()
                    .map(|root| root.get("uri").and_then(Value::as_str))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        format!("inputResponses.{key}: every root needs a uri string")
                    })?;
                Ok(json!({ "roots": uris }))
            }
        }
    }
}

/// How [`gather`] runs the rounds.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Rounds {
    /// Accept answers only together with a verified state of this tool, so that the
    /// tool can prove the `requestState` round trip; without one, start over.
    pub(crate) require_state: bool,
    /// Ask one question per round, in order, instead of all at once.
    pub(crate) one_at_a_time: bool,
}

/// The answers gathered so far, by question key (see [`Question`] for the shapes).
pub(crate) type Answers = JsonObject;

/// Reads the answers to `questions` from `call` and its verified state (tagged
/// `kind`), and returns them all, or the outcome to send instead: the next
/// `input_required` round, a -32021 when the client declared nothing that could be
/// asked, or a -32602 for a malformed answer.
///
/// Questions the client cannot be asked (its capabilities lack the request kind)
/// are skipped once at least one answer is in; their keys are absent from the
/// answers.
///
/// The state written for the next round is `{"kind", "answers", "asked"}`; `asked`
/// lists the keys of that round's requests.
pub(crate) fn gather(
    call: &ToolCall,
    kind: &str,
    questions: &[Question],
    rounds: Rounds,
) -> Result<Answers, ToolOutcome> {
    gather_from(
        call.input.as_ref(),
        &call.client_capabilities,
        kind,
        questions,
        rounds,
    )
}

/// [`gather`] for a step that has no [`ToolCall`] yet, such as a tool's consent
/// step before its task exists: reads the earlier round's answers from `input` and
/// asks only what `capabilities` allow.
pub(crate) fn gather_from(
    input: Option<&InputRound>,
    capabilities: &ClientCapabilities,
    kind: &str,
    questions: &[Question],
    rounds: Rounds,
) -> Result<Answers, ToolOutcome> {
    let state = input
        .map(|input| &input.state)
        .filter(|state| state_kind(state) == Some(kind));
    let mut answers = state
        .and_then(|state| state.get("answers"))
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let responses = input
        .filter(|_| !rounds.require_state || state.is_some())
        .map(|input| &input.responses);
    if let Some(responses) = responses {
        for question in questions {
            if answers.contains_key(question.key) {
                continue;
            }
            if let Some(answer) = responses.get(question.key) {
                let reduced = question
                    .read_answer(answer)
                    .map_err(|message| ToolOutcome::Error(ToolError::InvalidParams(message)))?;
                answers.insert(question.key.to_owned(), reduced);
            }
        }
    }

    let pending: Vec<&Question> = questions
        .iter()
        .filter(|question| !answers.contains_key(question.key))
        .collect();
    if pending.is_empty() {
        return Ok(answers);
    }
    let mut askable = pending
        .iter()
        .copied()
        .filter(|question| question.is_askable(capabilities));
    let to_ask: Vec<&Question> = if rounds.one_at_a_time {
        askable.next().into_iter().collect()
    } else {
        askable.collect()
    };
    if to_ask.is_empty() {
        if !answers.is_empty() {
            return Ok(answers);
        }
        return Err(ToolOutcome::Error(missing_capability(&pending)));
    }

    let requests: InputRequests = to_ask
        .iter()
        .map(|question| (question.key.to_owned(), question.request()))
        .collect();
    let asked: Vec<&str> = to_ask.iter().map(|question| question.key).collect();
    Err(ToolOutcome::InputRequired {
        requests,
        state: json!({ "kind": kind, "answers": answers, "asked": asked }),
    })
}

/// Asks `questions` through the task `call` runs as and waits for the answers,
/// which arrive by `tasks/update`. The rules of [`gather`] hold here too: only
/// questions this request's capabilities allow are asked (the others are absent
/// from the answers), nothing askable is a -32021, and a malformed answer is a
/// -32602 (the task then ends `failed` with it).
///
/// A cancel while waiting is an error outcome; the task runtime records the task
/// `cancelled` whatever the outcome says.
pub(crate) async fn gather_in_task(
    call: &ToolCall,
    questions: &[Question],
) -> Result<Answers, ToolOutcome> {
    let askable: Vec<&Question> = questions
        .iter()
        .filter(|question| question.is_askable(&call.client_capabilities))
        .collect();
    if askable.is_empty() {
        let pending: Vec<&Question> = questions.iter().collect();
        return Err(ToolOutcome::Error(missing_capability(&pending)));
    }
    let requests: InputRequests = askable
        .iter()
        .map(|question| (question.key.to_owned(), question.request()))
        .collect();
    let responses = call
        .request_input(requests)
        .await
        .map_err(ToolOutcome::Error)?;
    let mut answers = Answers::new();
    for question in askable {
        if let Some(answer) = responses.get(question.key) {
            let reduced = question
                .read_answer(answer)
                .map_err(|message| ToolOutcome::Error(ToolError::InvalidParams(message)))?;
            answers.insert(question.key.to_owned(), reduced);
        }
    }
    Ok(answers)
}

/// The -32021 for questions none of which this request's capabilities allow.
fn missing_capability(pending: &[&Question]) -> ToolError {
    let mut required = ClientCapabilities::default();
    for question in pending {
        question.require(&mut required);
    }
    let keys: Vec<&str> = pending.iter().map(|question| question.key).collect();
    ToolError::MissingCapability {
        message: format!(
            "this tool needs input ({}) that the request's client capabilities do not allow asking for",
            keys.join(", ")
        ),
        required: Box::new(required),
    }
}

/// The `kind` tag of a verified state, if it has one.
pub(crate) fn state_kind(state: &Value) -> Option<&str> {
    state.get("kind").and_then(Value::as_str)
}

/// The keys asked for in the round a verified state of `kind` came from.
pub(crate) fn asked_keys<'a>(call: &'a ToolCall, kind: &str) -> Option<Vec<&'a str>> {
    let state = &call.input.as_ref()?.state;
    if state_kind(state) != Some(kind) {
        return None;
    }
    state
        .get("asked")?
        .as_array()?
        .iter()
        .map(Value::as_str)
        .collect()
}

/// An answer as text for a result: the form value, the sampled text or the roots,
/// or a note when it was declined or never asked.
pub(crate) fn describe(answers: &Answers, key: &str) -> String {
    let Some(answer) = answers.get(key) else {
        return "(not asked: the client did not declare the capability)".to_owned();
    };
    if let Some(action) = answer.get("action").and_then(Value::as_str) {
        return match answer.get("value") {
            Some(Value::String(text)) => text.clone(),
            Some(value) => value.to_string(),
            None => format!("(the user chose {action})"),
        };
    }
    if let Some(text) = answer.get("text").and_then(Value::as_str) {
        return text.to_owned();
    }
    let roots: Vec<&str> = answer
        .get("roots")
        .and_then(Value::as_array)
        .map(|roots| roots.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    format!("{} root(s) [{}]", roots.len(), roots.join(", "))
}
