//! Who a call runs as at Trino, and what it caused there.
//!
//! Every `tools/call` gets an [`Attribution`]: a call id drawn from the OS RNG,
//! the session user its Trino queries ran as, and the ids of those queries. Each
//! Trino request carries them (`X-Trino-User`, `X-Trino-Source`,
//! `X-Trino-Client-Tags`, `X-Trino-Client-Info`, `X-Trino-Trace-Token`: the active
//! trace's `traceparent` when one is recorded, else the call id), and the
//! call's audit row, call record and result `_meta` name them, so a line in
//! Trino's query log leads to the Docket call and back.

use std::sync::{Arc, Mutex, PoisonError};

use docket_export::trino::{QueryIds, Session, TrinoClient};
use docket_identity::user::{Caller, Refusal as UserRefusal};
use docket_protocol::tools::CallToolResult;
use docket_task::Upstream;
use serde_json::{Value, json};

use crate::auth::{Identity, IdentityKind};
use crate::connections::TrinoConnection;
use crate::refusal::Refusal;

pub use docket_task::UPSTREAM_META_KEY;

/// The upstream attribution of one call. Shared by everything the call runs
/// (consent, the handler, a task), so every query it causes is written down.
#[derive(Debug)]
pub struct Attribution {
    call_id: String,
    scheduled: bool,
    /// Whether Trino spans may carry the statement, scrubbed
    /// (`telemetry.capture_statements`).
    capture_statements: bool,
    engine_user: Mutex<Option<String>>,
    query_ids: Arc<QueryIds>,
}

impl Attribution {
    /// A fresh attribution with a new call id; `scheduled` for the calls of a
    /// run a schedule started.
    ///
    /// # Errors
    /// When the OS RNG cannot give a call id.
    pub fn new(scheduled: bool) -> Result<Self, getrandom::Error> {
        Ok(Self {
            call_id: docket_catalog::generate_id()?,
            scheduled,
            capture_statements: false,
            engine_user: Mutex::new(None),
            query_ids: Arc::default(),
        })
    }

    /// This attribution letting the call's Trino spans carry its statements,
    /// scrubbed of their values (`telemetry.capture_statements`).
    #[must_use]
    pub fn capturing_statements(mut self, capture: bool) -> Self {
        self.capture_statements = capture;
        self
    }

    /// The call's id, as Trino's client info and the audit row name it.
    #[must_use]
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The session user the call's Trino queries ran as, once one ran.
    #[must_use]
    pub fn engine_user(&self) -> Option<String> {
        self.engine_user
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The ids of the Trino queries the call submitted (at most
    /// [`QueryIds::LIMIT`]).
    #[must_use]
    pub fn query_ids(&self) -> Vec<String> {
        self.query_ids.snapshot().0
    }

    /// The client `identity`'s queries on `connection` run through: as the
    /// caller when the connection impersonates, labelled with `persona`, `tool`
    /// and the call's ids.
    ///
    /// # Errors
    /// A tool error naming the claim when the caller has no usable session user;
    /// nothing has been sent to Trino then.
    pub(crate) fn trino_client(
        &self,
        connection: &TrinoConnection,
        identity: &Identity,
        persona: &str,
        tool: &str,
        task_id: Option<&str>,
    ) -> Result<TrinoClient, CallToolResult> {
        let user = match &connection.impersonation {
            Some(mapping) => Some(
                mapping
                    .session_user(caller(identity))
                    .map_err(|refusal| refused_user(&connection.name, identity, &refusal))?,
            ),
            None => None,
        };
        let mut tags = vec![format!("persona={persona}"), format!("tool={tool}")];
        if self.scheduled {
            tags.push("scheduled".to_owned());
        }
        let mut info = json!({"call": self.call_id});
        // With a trace active, Trino's query log names it (the trace token, and
        // the trace id in the client info) and Trino's own tracing joins it.
        let trace = crate::telemetry::current_trace();
        if let Some(trace_id) = crate::telemetry::current_trace_id() {
            info["trace"] = json!(trace_id);
        }
        if let Some(task_id) = task_id {
            info["task"] = json!(task_id);
        }
        if let Some(run_id) = identity.run_id() {
            info["run"] = json!(run_id);
        }
        let mut session = Session::default();
        session.user = user;
        session.client_tags = tags;
        session.client_info = Some(info.to_string());
        session.trace_token = Some(match &trace {
            Some(trace) => trace.traceparent().to_owned(),
            None => self.call_id.clone(),
        });
        session.query_ids = Some(Arc::clone(&self.query_ids));
        session.propagate = Some(crate::telemetry::propagate);
        if self.capture_statements {
            session.statement_text = Some(docket_telemetry::scrub_statement);
        }
        let client = connection.client.with_session(session);
        *self
            .engine_user
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(client.session_user().to_owned());
        Ok(client)
    }

    /// The attribution as a result's `_meta` names it, or `None` when the call
    /// reached no engine.
    #[must_use]
    pub fn meta_value(&self) -> Option<Value> {
        let engine_user = self.engine_user()?;
        Some(
            Upstream {
                call_id: Some(self.call_id.clone()),
                engine_user: Some(engine_user),
                query_ids: self.query_ids(),
            }
            .to_meta_value(),
        )
    }

    /// Writes the attribution into `result`'s `_meta`, when the call reached
    /// an engine.
    pub fn stamp(&self, result: &mut CallToolResult) {
        if let Some(value) = self.meta_value() {
            result
                .meta
                .get_or_insert_with(Default::default)
                .insert(UPSTREAM_META_KEY.to_owned(), value);
        }
    }
}

/// Who `identity` is for choosing a session user. A script run is its owner,
/// with the owner's attributes the run bridge gave it.
fn caller(identity: &Identity) -> Caller<'_> {
    let attributes = &identity.attributes;
    match identity.kind {
        IdentityKind::Oidc => Caller::Claims(&attributes.claims),
        IdentityKind::ApiKey => Caller::ApiKey {
            name: &identity.display_name,
            user: attributes.key_user.as_deref(),
        },
        IdentityKind::Anonymous => Caller::Anonymous,
        _ => match (&identity.run, attributes.claims.is_empty()) {
            (Some(run), _) if run.owner.starts_with("apikey:") => Caller::ApiKey {
                name: run.owner.trim_start_matches("apikey:"),
                user: attributes.key_user.as_deref(),
            },
            (_, false) => Caller::Claims(&attributes.claims),
            _ => Caller::Anonymous,
        },
    }
}

fn refused_user(connection: &str, identity: &Identity, refusal: &UserRefusal) -> CallToolResult {
    let whose = match &identity.run {
        Some(run) => format!(" (the script's owner {})", run.owner),
        None => String::new(),
    };
    Refusal::NotAllowed.result(
        &format!("connection {connection} refused the call{whose}: {refusal}"),
        "Sign in with a token that carries that claim, or ask an administrator to map your identity for this connection.",
    )
}
