//! Completion providers an embedder registers ([`crate::AppBuilder::completion`]):
//! suggested values for a prompt's argument or a resource template's variable.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::auth::Identity;
use crate::persona::Persona;

/// One `completion/complete` for an argument of a registered prompt or a variable
/// of a registered resource template.
#[derive(Clone, Debug)]
pub struct CompletionRequest {
    /// The argument's (or variable's) name.
    pub argument: String,
    /// What has been typed so far.
    pub value: String,
    /// Arguments already given, by name.
    pub context: BTreeMap<String, String>,
    /// Who asks.
    pub identity: Arc<Identity>,
    /// Their persona, when one applies to them: a provider that suggests names
    /// from a connection checks that the persona may use it before it asks.
    pub persona: Option<Arc<Persona>>,
}

/// What a provider's future resolves to: suggestions, best first (at most 100 are
/// sent; a provider that takes longer than `server.completion_timeout` suggests
/// nothing).
pub type CompletionFuture = Pin<Box<dyn Future<Output = Vec<String>> + Send>>;

/// Suggests values. Closures `Fn(CompletionRequest) -> impl Future` are providers.
pub trait CompletionProvider: Send + Sync + 'static {
    /// Suggestions for `request`.
    fn complete(&self, request: CompletionRequest) -> CompletionFuture;
}

impl<F, Fut> CompletionProvider for F
where
    F: Fn(CompletionRequest) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Vec<String>> + Send + 'static,
{
    fn complete(&self, request: CompletionRequest) -> CompletionFuture {
        Box::pin(self(request))
    }
}
