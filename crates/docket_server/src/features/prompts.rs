//! Prompts an embedder registers ([`crate::AppBuilder::prompt`]): what each takes,
//! and the handler that writes its messages (or asks the client first, as a tool
//! may).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use docket_protocol::meta::ClientCapabilities;
use docket_protocol::mrtr::InputRequests;
use docket_protocol::prompts::{Prompt, PromptArgument, PromptMessage};
use serde_json::Value;

use crate::auth::Identity;
use crate::registry::{InputRound, ToolError};

/// A prompt and the arguments it takes.
#[derive(Clone, Debug, PartialEq)]
pub struct PromptSpec {
    /// Its name.
    pub name: String,
    /// What it is for (clients show it; the conformance suite requires it).
    pub description: String,
    /// Its arguments.
    pub arguments: Vec<PromptArgument>,
}

impl PromptSpec {
    /// A prompt without arguments.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            arguments: Vec::new(),
        }
    }

    /// With one more argument.
    pub fn with_argument(
        mut self,
        name: impl Into<String>,
        description: impl Into<String>,
        required: bool,
    ) -> Self {
        self.arguments.push(PromptArgument {
            name: name.into(),
            description: Some(description.into()),
            required: Some(required),
        });
        self
    }

    pub(crate) fn to_wire(&self) -> Prompt {
        Prompt {
            name: self.name.clone(),
            title: None,
            description: Some(self.description.clone()),
            arguments: self.arguments.clone(),
        }
    }
}

/// One `prompts/get`.
#[derive(Clone, Debug)]
pub struct PromptRequest {
    /// The arguments given, by name (every required one is there).
    pub arguments: BTreeMap<String, String>,
    /// Who asks.
    pub identity: Arc<Identity>,
    /// What the client declared for this request.
    pub client_capabilities: ClientCapabilities,
    /// The answers to an earlier `input_required` round, with the state the handler
    /// returned then (already verified).
    pub input: Option<InputRound>,
}

/// What a prompt handler returns.
#[derive(Debug)]
pub enum PromptOutcome {
    /// The prompt's messages.
    Messages {
        /// What the prompt is for, as filled in.
        description: Option<String>,
        /// Its messages.
        messages: Vec<PromptMessage>,
    },
    /// Ask the client first; `state` comes back, integrity-protected, on the retry.
    InputRequired {
        /// The questions, by key.
        requests: InputRequests,
        /// What the handler needs on the retry.
        state: Value,
    },
}

/// What a prompt handler's future resolves to.
pub type PromptFuture = Pin<Box<dyn Future<Output = Result<PromptOutcome, ToolError>> + Send>>;

/// Writes a registered prompt. Closures `Fn(PromptRequest) -> impl Future` are handlers.
pub trait PromptHandler: Send + Sync + 'static {
    /// The prompt for `request`.
    fn get(&self, request: PromptRequest) -> PromptFuture;
}

impl<F, Fut> PromptHandler for F
where
    F: Fn(PromptRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<PromptOutcome, ToolError>> + Send + 'static,
{
    fn get(&self, request: PromptRequest) -> PromptFuture {
        Box::pin(self(request))
    }
}
