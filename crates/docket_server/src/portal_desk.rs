//! The portal's [`Desk`] as the server answers it: every page acts as the
//! signed-in person — an identity made from their portal session (subject,
//! name, roles at login) and the claims the principal directory remembers
//! for them, so a connection that runs as the caller's e-mail at Trino does
//! so from the portal too. Tool calls go through the whole pipeline
//! (`call::call_in_process`: persona, rate limit, validation, audit); tasks
//! are read and cancelled by `tasks::find`, the rule of `tasks/get`; an
//! export's rows are read by `docket_export::view` after the asset tools'
//! visibility rule; the audit log and replicas only for an administrator.

use std::sync::Arc;

use async_trait::async_trait;
use docket_portal::{AuditSearch, Desk, DeskError, Person, RowPage, TaskLine};
use docket_task::oversight::{AuditQuery, Oversight};
use serde_json::{Map, Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::auth::{Attributes, Identity, IdentityKind};
use crate::call::call_in_process;
use crate::error::McpError;
use crate::request::RequestContext;
use crate::state::App;
use crate::tasks;

/// How many audit rows one search shows.
const AUDIT_ROWS: u32 = 200;

/// How many replicas the page lists.
const REPLICAS_SHOWN: u32 = 100;

/// The desk of one portal request.
pub(crate) struct ServerDesk<'a> {
    pub(crate) app: &'a App,
    pub(crate) viewer: &'a docket_export::view::Viewer,
    pub(crate) oversight: Option<&'a Arc<dyn Oversight>>,
}

/// The identity the portal acts as for `person`.
///
/// # Errors
/// [`DeskError::Unavailable`] when the principal directory cannot be read.
pub(crate) async fn identity_of(app: &App, person: &Person) -> Result<Arc<Identity>, DeskError> {
    let mut claims = app
        .state
        .principals
        .store
        .claims_of(&person.subject)
        .await
        .map_err(|error| DeskError::Unavailable(error.to_string()))?
        .unwrap_or_default();
    // The session is the person's by its subject: its `sub` is theirs.
    if let Some(sub) = person.subject.strip_prefix("oidc:") {
        claims.insert("sub".into(), Value::from(sub));
    }
    let email = claims
        .get("email")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(Arc::new(Identity {
        subject: person.subject.clone(),
        display_name: person.display_name.clone(),
        email,
        roles: person.roles.clone(),
        kind: IdentityKind::Oidc,
        run: None,
        attributes: Attributes {
            claims: Arc::new(claims),
            key_user: None,
            token: None,
        },
    }))
}

/// What a request of the person looks like to the task rules.
pub(crate) fn context_of(identity: Arc<Identity>) -> RequestContext {
    RequestContext::in_process(identity, None)
}

/// Whether `person`'s persona, as their roles select it now, is the
/// administrators'.
fn is_admin(app: &App, person: &Person) -> bool {
    app.state
        .personas
        .resolve(&person.roles)
        .is_some_and(|persona| persona.is_admin)
}

fn desk_error(error: McpError) -> DeskError {
    match error {
        McpError::Unavailable(message) | McpError::Internal(message) => {
            DeskError::Unavailable(message)
        }
        McpError::InvalidParams(message) if message == "Unknown task" => DeskError::NotFound,
        other => DeskError::Refused(other.to_string()),
    }
}

/// A time as the page shows it.
fn shown(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

/// A time a person typed: RFC 3339, or a bare date (midnight UTC).
fn typed_time(text: Option<&String>, field: &str) -> Result<Option<OffsetDateTime>, DeskError> {
    let Some(text) = text else {
        return Ok(None);
    };
    if let Ok(at) = OffsetDateTime::parse(text, &Rfc3339) {
        return Ok(Some(at));
    }
    let date_only = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(text, &date_only)
        .map(|date| Some(date.midnight().assume_utc()))
        .map_err(|_| {
            DeskError::Refused(format!(
                "{field}: give a date (2026-12-01) or a time (2026-12-01T09:00:00Z)"
            ))
        })
}

/// A task's result or error as text.
fn outcome(record: &docket_task::TaskRecord) -> Option<String> {
    if let Some(error) = &record.error {
        return Some(error.message.clone());
    }
    let result = record.result.as_ref()?;
    // A tool result: its structured content when it has one, else its text.
    Some(match result.get("structuredContent") {
        Some(structured) => structured.to_string(),
        None => crate::call::result_text(result),
    })
}

/// One task as the work page shows it.
pub(crate) fn task_line(
    record: &docket_task::TaskRecord,
    view: &docket_task::TaskView,
) -> TaskLine {
    TaskLine {
        id: record.id.as_str().to_owned(),
        tool: record.tool.clone(),
        status: view.status.as_str().to_owned(),
        message: view.status_message.clone(),
        created_at: shown(record.created_at),
        outcome: if view.status.is_terminal() {
            outcome(record).or_else(|| view.error.as_ref().map(|error| error.message.clone()))
        } else {
            None
        },
    }
}

#[async_trait]
impl Desk for ServerDesk<'_> {
    async fn tasks(
        &self,
        person: &Person,
        cursor: Option<&str>,
    ) -> Result<(Vec<TaskLine>, Option<String>), DeskError> {
        let Some(surface) = &self.app.state.tasks else {
            return Ok((Vec::new(), None));
        };
        let context = context_of(identity_of(self.app, person).await?);
        let (listed, next) =
            tasks::list_followed(surface, &context, is_admin(self.app, person), cursor)
                .await
                .map_err(desk_error)?;
        Ok((
            listed
                .iter()
                .map(|(record, view)| task_line(record, view))
                .collect(),
            next,
        ))
    }

    async fn cancel_task(&self, person: &Person, id: &str) -> Result<(), DeskError> {
        let Some(surface) = &self.app.state.tasks else {
            return Err(DeskError::NotFound);
        };
        let context = context_of(identity_of(self.app, person).await?);
        let (found, _) = tasks::find(surface, &context.identity, is_admin(self.app, person), id)
            .await
            .map_err(desk_error)?;
        tasks::cancel(&found).await.map_err(desk_error)
    }

    async fn call(
        &self,
        person: &Person,
        tool: &str,
        arguments: Value,
    ) -> Result<Value, DeskError> {
        let identity = identity_of(self.app, person).await?;
        let answer = call_in_process(self.app, identity, None, tool, arguments)
            .await
            .map_err(desk_error)?;
        let text = || crate::call::result_text(&answer);
        if answer.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(DeskError::Refused(text()));
        }
        if answer.get("resultType").and_then(Value::as_str) == Some("input_required") {
            return Err(DeskError::Refused(format!(
                "{tool} asks for a confirmation the portal does not give; use an MCP client"
            )));
        }
        Ok(match answer.get("structuredContent") {
            Some(structured) => structured.clone(),
            None => json!({ "text": text() }),
        })
    }

    async fn rows(
        &self,
        person: &Person,
        asset_id: &str,
        first_row: u64,
        rows: usize,
    ) -> Result<RowPage, DeskError> {
        let Some(assets) = &self.app.state.assets else {
            return Err(DeskError::NotFound);
        };
        let asset = crate::assets::visible_asset(
            assets,
            asset_id,
            &person.subject,
            is_admin(self.app, person),
        )
        .await
        .map_err(DeskError::Unavailable)?
        .ok_or(DeskError::NotFound)?;
        let page = self
            .viewer
            .page(
                assets.sink.as_ref(),
                &asset.storage_key,
                &asset.format,
                first_row,
                rows,
            )
            .await
            .map_err(|error| match error {
                docket_export::view::ViewError::Sink(sink) => {
                    DeskError::Unavailable(sink.to_string())
                }
                other => DeskError::Refused(other.to_string()),
            })?;
        Ok(RowPage {
            columns: page.columns,
            rows: page.rows,
            first_row: page.first_row,
            more: page.more,
        })
    }

    async fn audit(&self, person: &Person, search: &AuditSearch) -> Result<Value, DeskError> {
        if !is_admin(self.app, person) {
            return Err(DeskError::NotFound);
        }
        let Some(oversight) = self.oversight else {
            return Err(DeskError::Unavailable(
                "this server keeps no audit log in a database".to_owned(),
            ));
        };
        let query = AuditQuery {
            subject: search.subject.clone(),
            tool: search.tool.clone(),
            since: typed_time(search.since.as_ref(), "since")?,
            until: typed_time(search.until.as_ref(), "until")?,
            limit: AUDIT_ROWS,
        };
        let rows = oversight
            .search_audit(&query)
            .await
            .map_err(|error| DeskError::Unavailable(error.to_string()))?;
        let listed: Vec<Value> = rows
            .iter()
            .map(|row| {
                let entry = &row.entry;
                json!({
                    "at": shown(row.at),
                    "person": entry.subject,
                    "tool": entry.tool,
                    "outcome": entry.outcome,
                    "duration_ms": entry.duration_ms,
                    "persona": entry.context.persona,
                    "connection": entry.context.connection,
                    "arguments": entry.context.arguments,
                    "error": entry.error_message,
                })
            })
            .collect();
        let mut answer = Map::new();
        answer.insert("rows".into(), json!(listed.len()));
        answer.insert("audit".into(), Value::Array(listed));
        Ok(Value::Object(answer))
    }

    async fn replicas(&self, person: &Person) -> Result<Value, DeskError> {
        if !is_admin(self.app, person) {
            return Err(DeskError::NotFound);
        }
        let Some(oversight) = self.oversight else {
            return Err(DeskError::Unavailable(
                "this server keeps no replicas in a database".to_owned(),
            ));
        };
        let (replicas, now) = oversight
            .replicas(REPLICAS_SHOWN)
            .await
            .map_err(|error| DeskError::Unavailable(error.to_string()))?;
        let stale_after = self.app.state.tasks.as_ref().map(|tasks| tasks.stale_after);
        let listed: Vec<Value> = replicas
            .iter()
            .map(|replica| {
                let silent = now - replica.last_beat_at;
                let state = match stale_after {
                    _ if replica.draining => "draining",
                    Some(stale_after) if silent > stale_after => "gone",
                    _ => "beating",
                };
                json!({
                    "replica": replica.id,
                    "this_one": replica.id == self.app.state.replica_id,
                    "state": state,
                    "last_beat": shown(replica.last_beat_at),
                    "seconds_since_beat": silent.whole_seconds().max(0),
                    "started": shown(replica.started_at),
                })
            })
            .collect();
        Ok(json!({ "replicas": listed }))
    }
}
