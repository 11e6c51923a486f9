//! Prompts: `prompts/list` and `prompts/get`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::mrtr::InputResponses;
use crate::result::{CacheScope, ResultType};
use crate::tools::ContentBlock;

/// A prompt a client may get.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    /// Its name.
    pub name: String,
    /// A title for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments it takes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub arguments: Vec<PromptArgument>,
}

/// One argument of a prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// What to give.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
}

/// One message of a prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// What it says.
    pub content: ContentBlock,
}

impl PromptMessage {
    /// A user message with one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: "user".to_owned(),
            content: ContentBlock::text(text),
        }
    }
}

/// The result of `prompts/list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPromptsResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
    /// The prompts the caller may get.
    pub prompts: Vec<Prompt>,
    /// The cursor of the next page, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// How long the list may be cached, in milliseconds.
    pub ttl_ms: u64,
    /// Who may reuse it.
    pub cache_scope: CacheScope,
}

/// The params of `prompts/get` (multi round-trip fields included).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetPromptParams {
    /// The prompt's name.
    pub name: String,
    /// Its arguments, by name.
    #[serde(default)]
    pub arguments: Option<serde_json::Map<String, Value>>,
    /// Answers to the previous round's questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<InputResponses>,
    /// The previous round's sealed state, echoed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
}

/// The result of `prompts/get`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetPromptResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
    /// What the prompt is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its messages.
    pub messages: Vec<PromptMessage>,
}
