//! Multi round-trip requests: a server that needs input answers `input_required`
//! with input requests and an opaque `requestState`; the client retries the call
//! with `inputResponses` and the state echoed. The server never sends requests.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::JsonObject;
use crate::result::ResultType;

/// Input requests by key; keys are chosen by the server and unique per request.
pub type InputRequests = BTreeMap<String, InputRequest>;

/// Answers by the key of the request they answer. Each value is an `ElicitResult`,
/// a `CreateMessageResult` or a `ListRootsResult`, depending on the request.
pub type InputResponses = BTreeMap<String, Value>;

/// An interim result asking the client for input.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequiredResult {
    /// Always [`ResultType::InputRequired`].
    pub result_type: ResultType,
    /// What the server needs, by key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// State the client must echo on the retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// One request for input: what the server would have sent as a JSON-RPC request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", content = "params")]
pub enum InputRequest {
    /// Ask the user (form or URL).
    #[serde(rename = "elicitation/create")]
    Elicit(ElicitRequestParams),
    /// Ask the client's model (deprecated in 2026-07-28, still valid).
    #[serde(rename = "sampling/createMessage")]
    CreateMessage(Value),
    /// Ask for the client's roots (deprecated, still valid).
    #[serde(rename = "roots/list")]
    ListRoots(Value),
}

impl InputRequest {
    /// The method this request stands for.
    pub fn method(&self) -> &'static str {
        match self {
            InputRequest::Elicit(_) => "elicitation/create",
            InputRequest::CreateMessage(_) => "sampling/createMessage",
            InputRequest::ListRoots(_) => "roots/list",
        }
    }
}

/// The params of an elicitation: a form or a URL.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ElicitRequestParams {
    /// Ask the user to open a URL (only if the client declared `elicitation.url`).
    Url(ElicitUrlParams),
    /// Ask the user to fill a flat form.
    Form(ElicitFormParams),
}

/// A form elicitation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitFormParams {
    /// `"form"`; optional on the wire because form is the default mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// What to tell the user.
    pub message: String,
    /// A flat object schema of primitive properties.
    pub requested_schema: Value,
}

/// A URL elicitation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElicitUrlParams {
    /// Always `"url"`.
    pub mode: UrlMode,
    /// What to tell the user.
    pub message: String,
    /// The URL to open.
    pub url: String,
}

/// The literal `"url"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UrlMode {
    /// URL mode.
    Url,
}

impl ElicitRequestParams {
    /// A form elicitation.
    pub fn form(message: impl Into<String>, requested_schema: Value) -> Self {
        ElicitRequestParams::Form(ElicitFormParams {
            mode: Some("form".into()),
            message: message.into(),
            requested_schema,
        })
    }
}

/// The user's answer to an elicitation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// What the user did.
    pub action: ElicitAction,
    /// The form's values, on accept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<JsonObject>,
}

/// What the user did with an elicitation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    /// Submitted.
    Accept,
    /// Explicitly refused.
    Decline,
    /// Dismissed.
    Cancel,
}
