//! `completion/complete`: suggested values for a prompt's argument or a resource
//! template's variable.

use serde::{Deserialize, Serialize};

use crate::JsonObject;
use crate::result::ResultType;

/// What is being completed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum CompletionReference {
    /// An argument of the prompt `name`.
    #[serde(rename = "ref/prompt")]
    Prompt {
        /// The prompt's name.
        name: String,
    },
    /// A variable of the resource template `uri`.
    #[serde(rename = "ref/resource")]
    Resource {
        /// The template's URI template.
        uri: String,
    },
}

/// The argument being completed and what has been typed so far.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionArgument {
    /// The argument's (or variable's) name.
    pub name: String,
    /// The value so far.
    pub value: String,
}

/// The params of `completion/complete`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompleteParams {
    /// What is being completed.
    #[serde(rename = "ref")]
    pub reference: CompletionReference,
    /// The argument and its value so far.
    pub argument: CompletionArgument,
    /// Arguments already given (`{"arguments": {...}}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<JsonObject>,
}

/// Suggested values.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// At most 100 values, best first.
    pub values: Vec<String>,
    /// How many values there are in all, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Whether there are more than those listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
}

/// The result of `completion/complete`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteResult {
    /// Always [`ResultType::Complete`].
    pub result_type: ResultType,
    /// The suggestions.
    pub completion: Completion,
}
