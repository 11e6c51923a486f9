//! The platform a script talks to: every `platform.*` call of a run (or a
//! draft) is one `tools/call` through the whole pipeline, in-process, as the
//! run's identity — `script:<name>` with the roles the version's author held
//! when saving it (a draft: the caller) — and audited with the run id.
//!
//! - `platform.call(tool, args)` answers the tool's `structuredContent`, or
//!   `{"text": …}` for a plain-text result; a refusal or tool error fails the
//!   script (a script error), an unavailable platform is a platform fault.
//! - `platform.query(sql, connection=, params=)` binds `:name` parameters as
//!   SQL literals, runs `trino_query`, and answers `{"rows": [{column:
//!   value}…], "columns": […], "row_count": n}`; a truncated result fails the
//!   script, as on the original platform.
//! - `platform.export(name, rows, format)` writes the rows (a list of dicts)
//!   as a `csv`, `json` or `jsonl` asset owned by the script's identity.
//!
//! A run acts upstream on behalf of its owner. For an owner who signs in with
//! OIDC, the run starts knowing only their `sub`; before its first tool call the
//! host reads the claims the owner was last seen with from the principal
//! directory, once per run, and calls with those (a scheduled run has no person
//! behind it, so this is how it still runs at Trino as, say, the owner's
//! e-mail). An owner never seen keeps the `sub` alone, and a connection that
//! needs another claim refuses the call by that claim's name.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use bytes::Bytes;
use docket_catalog::{NewAsset, generate_id};
use docket_export::format::{ChunkBuffer, ColumnSpec, Format, RowWriter};
use docket_script::{Host, HostError};
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use super::assets::asset_json;
use super::exporting::{file_name, save_asset};
use crate::auth::{Identity, IdentityKind};
use crate::call::call_in_process;
use crate::error::McpError;
use crate::state::{App, AppState};

/// The most rows `platform.query` asks `trino_query` for.
const QUERY_ROWS: u64 = 10_000;

/// The host of one run or draft.
pub(crate) struct ScriptHost {
    app: Weak<AppState>,
    /// The run's identity as the run bridge built it (a draft: its caller).
    identity: Arc<Identity>,
    run_id: String,
    /// The identity its tool calls are made as: [`ScriptHost::identity`] with an
    /// OIDC owner's remembered claims, resolved before the first call.
    calling_as: tokio::sync::OnceCell<Arc<Identity>>,
}

impl ScriptHost {
    /// The host of the run (or draft) `run_id`, calling as `identity`.
    pub(crate) fn new(app: Weak<AppState>, identity: Arc<Identity>, run_id: String) -> Self {
        Self {
            app,
            identity,
            run_id,
            calling_as: tokio::sync::OnceCell::new(),
        }
    }

    /// The identity tool calls are made as, read once: for a run of an OIDC
    /// owner, its identity with the claims the owner was last seen with (their
    /// `sub` alone when they never were); anyone else's as it is.
    ///
    /// # Errors
    /// A platform fault when the directory cannot be read (the run is tried
    /// again); nothing is kept, so a later call reads it again.
    async fn calling_identity(&self, app: &App) -> Result<Arc<Identity>, HostError> {
        self.calling_as
            .get_or_try_init(|| async {
                let owner = match &self.identity.run {
                    Some(run)
                        if self.identity.kind == IdentityKind::Script
                            && run.owner.starts_with("oidc:") =>
                    {
                        run.owner.as_str()
                    }
                    _ => return Ok(Arc::clone(&self.identity)),
                };
                let store = &app.state.principals.store;
                let remembered = store.claims_of(owner).await.map_err(|error| {
                    HostError::Platform(format!(
                        "could not read what the script's owner signed in with: {error}"
                    ))
                })?;
                let Some(mut claims) = remembered else {
                    return Ok(Arc::clone(&self.identity));
                };
                // The row is the owner's by its key: its `sub` is theirs.
                claims.insert("sub".into(), Value::from(owner.trim_start_matches("oidc:")));
                let mut identity = (*self.identity).clone();
                identity.attributes.claims = Arc::new(claims);
                identity.attributes.token = None;
                Ok(Arc::new(identity))
            })
            .await
            .cloned()
    }

    fn app(&self) -> Result<App, HostError> {
        self.app
            .upgrade()
            .map(|state| App { state })
            .ok_or_else(|| HostError::Platform("the server is shutting down".into()))
    }

    /// One tool call; its answer as a script sees it.
    async fn tool(&self, tool: &str, arguments: Value) -> Result<Value, HostError> {
        let app = self.app()?;
        // A script's call is held to what a request may carry, as a person's is.
        let limit = app.config().server.max_request_bytes;
        let size = serde_json::to_vec(&arguments).map_or(usize::MAX, |encoded| encoded.len());
        if size > limit {
            return Err(HostError::Tool(format!(
                "{tool}: the arguments take {size} bytes, over server.max_request_bytes ({limit})"
            )));
        }
        let identity = self.calling_identity(&app).await?;
        // Each `platform.call` is a span of the run's trace, named for a registered
        // tool only.
        let label = if app.state.metrics.is_known_tool(tool) {
            tool
        } else {
            "other"
        };
        let span = tracing::info_span!(
            "platform_call",
            otel.name = %format_args!("platform.call {label}"),
            otel.kind = "internal",
            "gen_ai.tool.name" = label,
        );
        let answer = call_in_process(&app, identity, Some(&self.run_id), tool, arguments)
            .instrument(span)
            .await
            .map_err(|error| match error {
                McpError::Unavailable(message) | McpError::Internal(message) => {
                    HostError::Platform(message)
                }
                other => HostError::Tool(format!("{tool}: {other}")),
            })?;
        if answer.get("resultType").and_then(Value::as_str) == Some("input_required") {
            return Err(HostError::Tool(format!(
                "{tool} asked for the user's consent, which a script run cannot give"
            )));
        }
        let text = crate::call::result_text(&answer);
        if answer.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(HostError::Tool(format!("{tool}: {text}")));
        }
        Ok(match answer.get("structuredContent") {
            Some(structured) => structured.clone(),
            None => json!({ "text": text }),
        })
    }
}

#[async_trait]
impl Host for ScriptHost {
    async fn call(&self, tool: String, args: Value) -> Result<Value, HostError> {
        let args = if args.is_null() { json!({}) } else { args };
        self.tool(&tool, args).await
    }

    async fn query(
        &self,
        sql: String,
        connection: Option<String>,
        params: Map<String, Value>,
    ) -> Result<Value, HostError> {
        let sql = bind(&sql, &params).map_err(HostError::Tool)?;
        let mut arguments = json!({"sql": sql, "limit": QUERY_ROWS});
        if let Some(connection) = connection {
            arguments["connection"] = Value::String(connection);
        }
        let answer = self.tool("trino_query", arguments).await?;
        if answer.get("truncated").and_then(Value::as_bool) == Some(true) {
            return Err(HostError::Tool(format!(
                "the query returned more than {QUERY_ROWS} rows; a script's query must not be \
                 truncated: aggregate in SQL, or export the rows with trino_export"
            )));
        }
        let names: Vec<String> = answer
            .get("columns")
            .and_then(Value::as_array)
            .map(|columns| {
                columns
                    .iter()
                    .map(|column| {
                        column
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned()
                    })
                    .collect()
            })
            .unwrap_or_default();
        let rows: Vec<Value> = answer
            .get("rows")
            .and_then(Value::as_array)
            .map(|rows| {
                rows.iter()
                    .map(|row| match row {
                        Value::Array(values) => Value::Object(
                            names.iter().cloned().zip(values.iter().cloned()).collect(),
                        ),
                        other => other.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(json!({
            "row_count": rows.len(),
            "rows": rows,
            "columns": answer.get("columns").cloned().unwrap_or(Value::Array(Vec::new())),
        }))
    }

    async fn export(&self, name: String, rows: Value, format: String) -> Result<Value, HostError> {
        let app = self.app()?;
        let Some(assets) = app.state.assets.clone() else {
            return Err(HostError::Tool(
                "platform.export needs asset storage, and this server has none".into(),
            ));
        };
        let format: Format = match format.parse() {
            Ok(format @ (Format::Csv | Format::Json | Format::Jsonl)) => format,
            _ => {
                return Err(HostError::Tool(format!(
                    "platform.export writes csv, json or jsonl, not {format:?}"
                )));
            }
        };
        let Value::Array(rows) = rows else {
            return Err(HostError::Tool(
                "platform.export takes a list of rows".into(),
            ));
        };
        let mut columns: Vec<String> = Vec::new();
        for row in &rows {
            let Value::Object(row) = row else {
                return Err(HostError::Tool("each exported row must be a dict".into()));
            };
            for key in row.keys() {
                if !columns.contains(key) {
                    columns.push(key.clone());
                }
            }
        }
        let table: Vec<Vec<Value>> = rows
            .iter()
            .map(|row| {
                columns
                    .iter()
                    .map(|column| row.get(column).cloned().unwrap_or(Value::Null))
                    .collect()
            })
            .collect();
        let buffer = ChunkBuffer::new();
        let written = (|| {
            let mut writer = RowWriter::new(format, buffer.clone())?;
            let specs: Vec<ColumnSpec> = columns
                .iter()
                .map(|column| ColumnSpec::new(column.clone(), "json"))
                .collect();
            writer.begin(&specs)?;
            writer.write_rows(&table)?;
            writer.finish().map(|(report, _)| report)
        })()
        .map_err(|err| {
            HostError::Tool(format!("platform.export could not write the rows: {err}"))
        })?;
        let bytes: Bytes = buffer.take();
        let id = generate_id().map_err(|err| HostError::Platform(err.to_string()))?;
        let storage_key = format!("{id}/{}", file_name(&name, format.extension()));
        let platform =
            |err: &dyn std::fmt::Display| HostError::Platform(format!("platform.export: {err}"));
        let mut upload = assets
            .sink
            .begin(&storage_key)
            .await
            .map_err(|err| platform(&err))?;
        upload.write(bytes).await.map_err(|err| platform(&err))?;
        let size = upload.commit().await.map_err(|err| platform(&err))?;
        // A run's exports stand whatever the run ends with: its log names them.
        let asset = save_asset(
            &assets,
            NewAsset {
                id,
                owner: self.identity.on_behalf_of().to_owned(),
                name,
                description: Some(format!(
                    "exported by run {} of {}",
                    self.run_id, self.identity.display_name
                )),
                tags: vec!["script".into()],
                format: format.as_str().to_owned(),
                content_type: format.content_type().to_owned(),
                storage_key,
                size_bytes: i64::try_from(size).unwrap_or(i64::MAX),
                row_count: i64::try_from(written.rows).ok(),
                connection: None,
                tool: "platform.export".into(),
                idempotency_key: None,
                // The run is its own task: its id is the taskId.
                task_id: Some(self.run_id.clone()),
                call_id: None,
            },
            None,
        )
        .await
        .map_err(|refused| {
            HostError::Platform(format!(
                "platform.export: {}",
                refused
                    .structured_content
                    .map_or(Value::Null, |value| value["error"]["message"].clone())
            ))
        })?;
        Ok(asset_json(&assets, &asset).await)
    }
}

/// `sql` with each `:name` replaced by `params[name]` as an SQL literal. Text inside
/// quotes, comments (`--` to the end of the line, `/* … */`, ended where Trino ends
/// them) and `::` casts is left alone.
pub(crate) fn bind(sql: &str, params: &Map<String, Value>) -> Result<String, String> {
    let mut out = String::with_capacity(sql.len());
    let chars: Vec<char> = sql.chars().collect();
    let mut index = 0;
    while index < chars.len() {
        let c = chars[index];
        let next = chars.get(index + 1).copied();
        // A span copied as it is: a quoted literal or identifier, or a comment.
        let verbatim_end = match (c, next) {
            ('\'' | '"', _) => Some(
                chars[index + 1..]
                    .iter()
                    .position(|&d| d == c)
                    .map_or(chars.len(), |at| index + 1 + at + 1),
            ),
            ('-', Some('-')) => Some(
                chars[index..]
                    .iter()
                    .position(|&d| d == '\n' || d == '\r')
                    .map_or(chars.len(), |at| index + at),
            ),
            ('/', Some('*')) => Some(
                chars[index + 2..]
                    .windows(2)
                    .position(|pair| pair == ['*', '/'])
                    .map_or(chars.len(), |at| index + 2 + at + 2),
            ),
            _ => None,
        };
        if let Some(end) = verbatim_end {
            out.extend(&chars[index..end]);
            index = end;
            continue;
        }
        let starts_name = c == ':'
            && next.is_some_and(|next| next.is_ascii_alphabetic() || next == '_')
            && (index == 0 || chars[index - 1] != ':');
        if !starts_name {
            out.push(c);
            index += 1;
            continue;
        }
        let mut end = index + 1;
        while end < chars.len() && (chars[end].is_ascii_alphanumeric() || chars[end] == '_') {
            end += 1;
        }
        let name: String = chars[index + 1..end].iter().collect();
        let value = params
            .get(&name)
            .ok_or_else(|| format!("the query uses :{name}, which params does not give"))?;
        out.push_str(&literal(value).ok_or_else(|| {
            format!("the parameter :{name} must be a string, number, bool or None")
        })?);
        index = end;
    }
    Ok(out)
}

fn literal(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("NULL".into()),
        Value::Bool(flag) => Some(if *flag { "TRUE" } else { "FALSE" }.into()),
        Value::Number(number) => Some(number.to_string()),
        Value::String(text) => Some(format!("'{}'", text.replace('\'', "''"))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_bind_as_literals_outside_quotes_and_casts() {
        let params = json!({"day": "it's", "n": 3, "flag": true})
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            bind(
                "SELECT ':day', x::date FROM t WHERE d = :day AND n > :n AND f = :flag",
                &params
            ),
            Ok("SELECT ':day', x::date FROM t WHERE d = 'it''s' AND n > 3 AND f = TRUE".into())
        );
        assert!(bind("SELECT :missing", &params).is_err());
    }

    #[test]
    fn comments_and_literals_are_not_bound() {
        let params = json!({"a": 1}).as_object().cloned().unwrap_or_default();
        assert_eq!(
            bind(
                "SELECT :a -- where :b\n, ':b', \"x:b\" /* :b */ FROM t -- :b",
                &params
            ),
            Ok("SELECT 1 -- where :b\n, ':b', \"x:b\" /* :b */ FROM t -- :b".into())
        );
        // Trino ends a line comment at a carriage return, and does not nest block comments.
        assert_eq!(
            bind("-- :b\r:a /* /* :b */ :a", &params),
            Ok("-- :b\r1 /* /* :b */ 1".into())
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 512,
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Statements built from pieces bind exactly the parameters outside quotes and
        /// comments, and leave every other piece as it was.
        #[test]
        fn only_parameters_outside_quotes_and_comments_are_bound(
            pieces in proptest::collection::vec(0usize..7, 0..24),
        ) {
            let params = json!({"p": "it's"}).as_object().cloned().unwrap_or_default();
            let (mut sql, mut expected) = (String::new(), String::new());
            for piece in pieces {
                let (text, bound) = match piece {
                    0 => (" :p ", " 'it''s' "),
                    1 => (" ':q' ", " ':q' "),
                    2 => (" -- :q\n", " -- :q\n"),
                    3 => (" /* :q */ ", " /* :q */ "),
                    4 => (" \":q\" ", " \":q\" "),
                    5 => (" x::int ", " x::int "),
                    _ => (" SELECT a FROM t ", " SELECT a FROM t "),
                };
                sql.push_str(text);
                expected.push_str(bound);
            }
            proptest::prop_assert_eq!(bind(&sql, &params), Ok(expected));
        }

        #[test]
        fn no_text_makes_the_binder_panic(sql in "\\PC{0,200}") {
            let _ = bind(&sql, &Map::new());
        }
    }
}
