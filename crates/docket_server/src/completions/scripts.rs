//! Script names for completions: the scripts `manage_script list` would show the
//! caller (their own; every script for an administrator), and nothing to a
//! persona that may not call `manage_script`.

use std::sync::Arc;
use std::time::Instant;

use docket_catalog::ScriptStore;

use crate::features::CompletionRequest;
use crate::rate_limit::RateLimiter;

/// How many scripts (by name) are considered for one completion.
const CONSIDERED: u32 = 500;

/// Lists script names for completions.
pub(super) struct ScriptNames {
    store: Arc<dyn ScriptStore>,
    /// Each caller's budget: a listing is a database read, spent as a Trino
    /// statement is.
    limiter: Arc<RateLimiter>,
}

impl ScriptNames {
    pub(super) fn new(store: Arc<dyn ScriptStore>, limiter: Arc<RateLimiter>) -> Self {
        Self { store, limiter }
    }

    /// The caller's script names that start with what was typed, by name, each once.
    pub(super) async fn names(&self, request: &CompletionRequest) -> Vec<String> {
        let Some(persona) = &request.persona else {
            return Vec::new();
        };
        if !persona.may_call_tool("manage_script") {
            return Vec::new();
        }
        // Past the caller's budget, no names and no read (quiet, as for Trino names).
        if self
            .limiter
            .check(&request.identity.subject, Instant::now())
            .is_err()
        {
            return Vec::new();
        }
        let owner = (!persona.is_admin).then_some(request.identity.subject.as_str());
        let scripts = match self.store.list_scripts(owner, CONSIDERED).await {
            Ok(scripts) => scripts,
            Err(error) => {
                tracing::debug!(%error, "script names for a completion could not be read");
                return Vec::new();
            }
        };
        let mut names: Vec<String> = scripts
            .into_iter()
            .map(|script| script.name)
            .filter(|name| name.starts_with(request.value.as_str()))
            .collect();
        // An administrator sees same-named scripts of several owners.
        names.sort();
        names.dedup();
        names
    }
}
