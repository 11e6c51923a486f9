//! The platform's own completion suggestions, for the built-in prompts and the
//! prompt library's: an argument is completed by what its name says it holds —
//! `connection` (the Trino connections the caller's persona may use), `format`
//! (the export formats), `catalog`, `schema` and `table` (names a Trino connection
//! lists, narrowed by the context's `connection`, `catalog` and `schema`), and
//! script names (`script`, `script_name`, `…_script`: the caller's scripts, as
//! `manage_script list` shows them). Everything is filtered by the typed prefix;
//! `completion/complete` caps the answer and bounds the time it may take.

mod scripts;
mod trino;

use std::sync::Arc;

use docket_catalog::ScriptStore;

use crate::connections::TrinoConnection;
use crate::features::CompletionRequest;
use crate::rate_limit::RateLimiter;

/// What the platform completes prompt arguments from.
pub(crate) struct PlatformCompletions {
    /// The Trino connections.
    trino: trino::TrinoNames,
    /// The export formats this build writes.
    formats: Vec<String>,
    /// The managed scripts, when they are offered.
    scripts: Option<scripts::ScriptNames>,
}

impl PlatformCompletions {
    /// Completions over these connections, formats and (when offered) scripts; each
    /// statement sent to Trino and each listing of scripts spends a token of the
    /// caller's budget in `limiter` (the one tool calls spend).
    pub(crate) fn new(
        connections: Vec<TrinoConnection>,
        formats: Vec<String>,
        scripts: Option<Arc<dyn ScriptStore>>,
        limiter: Arc<RateLimiter>,
    ) -> Self {
        Self {
            trino: trino::TrinoNames::new(connections, Arc::clone(&limiter)),
            formats,
            scripts: scripts.map(|store| scripts::ScriptNames::new(store, limiter)),
        }
    }

    /// Suggestions for `request`, by its argument's name; `script_argument` names
    /// one more argument that holds a script name (`write_script`'s `name`).
    pub(crate) async fn suggest(
        &self,
        request: &CompletionRequest,
        script_argument: Option<&str>,
    ) -> Vec<String> {
        let typed = request.value.as_str();
        match request.argument.as_str() {
            "connection" => self.trino.connection_names(request),
            "format" => self
                .formats
                .iter()
                .filter(|format| format.starts_with(typed))
                .cloned()
                .collect(),
            "catalog" => self.trino.names(request, trino::Level::Catalog).await,
            "schema" => self.trino.names(request, trino::Level::Schema).await,
            "table" => self.trino.names(request, trino::Level::Table).await,
            argument if names_a_script(argument) || script_argument == Some(argument) => {
                match &self.scripts {
                    Some(scripts) => scripts.names(request).await,
                    None => Vec::new(),
                }
            }
            _ => Vec::new(),
        }
    }
}

/// Whether an argument called `name` holds a script's name.
fn names_a_script(name: &str) -> bool {
    matches!(name, "script" | "script_name") || name.ends_with("_script")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_arguments_are_known_by_name() {
        for name in ["script", "script_name", "cleanup_script"] {
            assert!(names_a_script(name), "{name}");
        }
        for name in ["scripts", "description", "table", "scripted"] {
            assert!(!names_a_script(name), "{name}");
        }
    }
}
