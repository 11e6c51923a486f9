//! Catalog, schema and table names for completions, from the Trino connection the
//! request's context names (or the default one) — only when the caller's persona
//! may use that connection and call `trino_browse`, checked before any statement
//! is sent; otherwise no names, as for a connection that does not exist.
//!
//! A name is completed a part at a time: `schema` as `catalog.schema` and `table`
//! as `catalog.schema.table`, unless the context already gives the `catalog` (and
//! `schema`); a part that is not the last is suggested with its trailing dot. One
//! `SHOW … LIKE 'prefix%'` per completion lets Trino filter; the names it returns
//! are filtered by the exact prefix again (`_` is a LIKE wildcard). Each caller's
//! statements are held to `rate_limit` (a budget of its own, beside the one tool
//! calls spend): a client asks on every keystroke, and past the budget it gets no
//! names rather than sending Trino a statement.

use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::attribution::Attribution;
use crate::connections::TrinoConnection;
use crate::features::CompletionRequest;
use crate::rate_limit::RateLimiter;

/// How many names one completion reads from Trino at most.
const MAX_NAMES: usize = 1000;

/// The longest name part considered (as `trino_browse` accepts).
const MAX_PART: usize = 128;

/// What an argument names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Level {
    /// A catalog.
    Catalog,
    /// A schema, as `catalog.schema`.
    Schema,
    /// A table, as `catalog.schema.table`.
    Table,
}

impl Level {
    /// How many dotted parts a full name of this level has.
    fn parts(self) -> usize {
        match self {
            Level::Catalog => 1,
            Level::Schema => 2,
            Level::Table => 3,
        }
    }
}

/// Lists names on the Trino connections.
pub(super) struct TrinoNames {
    connections: Vec<TrinoConnection>,
    /// Each caller's budget of statements.
    limiter: Arc<RateLimiter>,
}

impl TrinoNames {
    pub(super) fn new(connections: Vec<TrinoConnection>, limiter: Arc<RateLimiter>) -> Self {
        Self {
            connections,
            limiter,
        }
    }

    /// The connections the caller's persona may use whose names start with what was
    /// typed.
    pub(super) fn connection_names(&self, request: &CompletionRequest) -> Vec<String> {
        let Some(persona) = &request.persona else {
            return Vec::new();
        };
        self.connections
            .iter()
            .map(|connection| &connection.name)
            .filter(|name| name.starts_with(request.value.as_str()))
            .filter(|name| persona.may_use_connection(name))
            .cloned()
            .collect()
    }

    /// The connection the context names, or the default one (the one marked
    /// default, or the only one) — only if the caller's persona may browse it.
    fn connection(&self, request: &CompletionRequest) -> Option<&TrinoConnection> {
        let persona = request.persona.as_ref()?;
        let connection = match request.context.get("connection") {
            Some(name) => self.connections.iter().find(|c| &c.name == name)?,
            None => self
                .connections
                .iter()
                .find(|c| c.is_default)
                .or_else(|| (self.connections.len() == 1).then(|| &self.connections[0]))?,
        };
        (persona.may_call_tool("trino_browse") && persona.may_use_connection(&connection.name))
            .then_some(connection)
    }

    /// Names of `level` that continue what was typed, given the context's catalog
    /// and schema.
    pub(super) async fn names(&self, request: &CompletionRequest, level: Level) -> Vec<String> {
        let Some(connection) = self.connection(request) else {
            return Vec::new();
        };
        let Some(plan) = Plan::new(request, level) else {
            return Vec::new();
        };
        if self
            .limiter
            .check(&request.identity.subject, Instant::now())
            .is_err()
        {
            return Vec::new();
        }
        // The names a person may see are theirs at Trino: the listing runs as
        // the caller when the connection impersonates.
        let Ok(attribution) = Attribution::new(false) else {
            return Vec::new();
        };
        let persona = request
            .persona
            .as_ref()
            .map_or("", |persona| persona.name.as_str());
        let client = match attribution.trino_client(
            connection,
            &request.identity,
            persona,
            "completion/complete",
            None,
        ) {
            Ok(client) => client,
            Err(_) => return Vec::new(),
        };
        let listed = match client.query(&plan.statement()).await {
            Ok(stream) => stream.collect(MAX_NAMES).await,
            Err(error) => Err(error),
        };
        let rows = match listed {
            Ok(collected) => collected.rows,
            Err(error) => {
                tracing::debug!(%error, connection = %connection.name, "names for a completion could not be listed");
                return Vec::new();
            }
        };
        rows.iter()
            .filter_map(|row| row.first().and_then(Value::as_str))
            .filter(|name| name.starts_with(plan.prefix.as_str()))
            .map(|name| plan.suggestion(name))
            .collect()
    }
}

/// One completion's listing: the parts already chosen, the one being typed, and
/// how the names listed become suggestions.
#[derive(Debug, PartialEq, Eq)]
struct Plan {
    /// The parts before the one being typed (from the context, then typed).
    chosen: Vec<String>,
    /// What was typed of the part being completed.
    prefix: String,
    /// What the suggestions start with: the parts typed before this one, dotted.
    typed_head: String,
    /// Whether a suggestion is a part with more to come (it ends with a dot).
    more_to_come: bool,
}

impl Plan {
    /// The listing for `request`; `None` when what is given cannot name anything
    /// (too many parts, or a part that is no valid name).
    fn new(request: &CompletionRequest, level: Level) -> Option<Self> {
        let context = |key: &str| request.context.get(key).filter(|value| !value.is_empty());
        let fixed: Vec<String> = match level {
            Level::Catalog => Vec::new(),
            Level::Schema => context("catalog").into_iter().cloned().collect(),
            Level::Table => match (context("catalog"), context("schema")) {
                (Some(catalog), Some(schema)) => vec![catalog.clone(), schema.clone()],
                (Some(catalog), None) => vec![catalog.clone()],
                _ => Vec::new(),
            },
        };
        let mut typed: Vec<&str> = request.value.split('.').collect();
        let prefix = typed.pop().unwrap_or_default();
        let chosen: Vec<String> = fixed
            .iter()
            .cloned()
            .chain(typed.iter().map(|part| (*part).to_owned()))
            .collect();
        if chosen.len() >= level.parts() || !chosen.iter().all(|part| is_name(part)) {
            return None;
        }
        if !prefix.is_empty() && !is_name(prefix) {
            return None;
        }
        Some(Self {
            more_to_come: chosen.len() + 1 < level.parts(),
            typed_head: typed.iter().map(|part| format!("{part}.")).collect(),
            chosen,
            prefix: prefix.to_owned(),
        })
    }

    /// The `SHOW` statement that lists the part being typed. Every part is a
    /// checked name (letters, digits, `_`, `-`), so quoting it is safe.
    fn statement(&self) -> String {
        let quoted: Vec<String> = self
            .chosen
            .iter()
            .map(|part| format!("\"{part}\""))
            .collect();
        let show = match quoted.as_slice() {
            [] => "SHOW CATALOGS".to_owned(),
            [catalog] => format!("SHOW SCHEMAS FROM {catalog}"),
            [catalog, schema, ..] => format!("SHOW TABLES FROM {catalog}.{schema}"),
        };
        match self.prefix.as_str() {
            "" => show,
            prefix => format!("{show} LIKE '{prefix}%'"),
        }
    }

    /// The suggestion for a listed `name`.
    fn suggestion(&self, name: &str) -> String {
        let dot = if self.more_to_come { "." } else { "" };
        format!("{}{name}{dot}", self.typed_head)
    }
}

/// Whether `part` is a name `trino_browse` would accept.
fn is_name(part: &str) -> bool {
    !part.is_empty()
        && part.len() <= MAX_PART
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::*;
    use crate::auth::{Identity, IdentityKind};

    fn request(value: &str, context: &[(&str, &str)]) -> CompletionRequest {
        CompletionRequest {
            argument: "table".into(),
            value: value.into(),
            context: context
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect::<BTreeMap<_, _>>(),
            identity: Arc::new(Identity {
                subject: "apikey:alice".into(),
                display_name: "alice".into(),
                email: None,
                roles: Vec::new(),
                kind: IdentityKind::ApiKey,
                run: None,
                attributes: Default::default(),
            }),
            persona: None,
        }
    }

    #[test]
    fn a_name_is_completed_a_part_at_a_time() {
        let plan = Plan::new(&request("mem", &[]), Level::Table).expect("a plan");
        assert_eq!(plan.statement(), "SHOW CATALOGS LIKE 'mem%'");
        assert_eq!(plan.suggestion("memory"), "memory.");
        let plan = Plan::new(&request("memory.de", &[]), Level::Table).expect("a plan");
        assert_eq!(plan.statement(), "SHOW SCHEMAS FROM \"memory\" LIKE 'de%'");
        assert_eq!(plan.suggestion("default"), "memory.default.");
        let plan = Plan::new(&request("memory.default.", &[]), Level::Table).expect("a plan");
        assert_eq!(plan.statement(), "SHOW TABLES FROM \"memory\".\"default\"");
        assert_eq!(plan.suggestion("orders"), "memory.default.orders");
        // The context's catalog and schema come first.
        let given = [("catalog", "tpch"), ("schema", "tiny")];
        let plan = Plan::new(&request("na", &given), Level::Table).expect("a plan");
        assert_eq!(
            plan.statement(),
            "SHOW TABLES FROM \"tpch\".\"tiny\" LIKE 'na%'"
        );
        assert_eq!(plan.suggestion("nation"), "nation");
        let plan = Plan::new(&request("ti", &given[..1]), Level::Schema).expect("a plan");
        assert_eq!(plan.suggestion("tiny"), "tiny");
        assert_eq!(
            Plan::new(&request("", &[]), Level::Catalog).map(|plan| plan.statement()),
            Some("SHOW CATALOGS".to_owned())
        );
    }

    #[test]
    fn what_cannot_name_anything_sends_nothing() {
        for (value, level) in [
            ("a.b.c.d", Level::Table),
            ("a.b", Level::Catalog),
            ("me'm", Level::Catalog),
            ("x\".y", Level::Schema),
            ("..", Level::Table),
        ] {
            assert_eq!(Plan::new(&request(value, &[]), level), None, "{value}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 256,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Whatever is typed, a statement is sent only with checked names: no quote
        /// or other character that could leave its identifier or literal.
        #[test]
        fn typed_text_never_leaves_its_quotes(value in "\\PC{0,40}", catalog in "\\PC{0,12}") {
            let given = [("catalog", catalog.as_str())];
            for level in [Level::Catalog, Level::Schema, Level::Table] {
                if let Some(plan) = Plan::new(&request(&value, &given), level) {
                    let statement = plan.statement();
                    let inner: String = statement
                        .chars()
                        .filter(|c| !matches!(c, '"' | '\'' | '%' | '.' | ' '))
                        .collect();
                    proptest::prop_assert!(inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'), "{statement}");
                    proptest::prop_assert_eq!(statement.matches('\'').count() % 2, 0);
                }
            }
        }
    }
}
