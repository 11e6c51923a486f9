//! Consent (and any other question a call asks) in a session of the earlier era,
//! whose client declared elicitation, sampling or roots at `initialize`: the call's
//! answer becomes an SSE stream, each question a server request on it
//! (`elicitation/create`, `sampling/createMessage` or `roots/list`, each only if the
//! client declared it); the client
//! POSTs its answer as a JSON-RPC response to whichever replica it reaches, which
//! keeps it in the session ([`SessionStore::put_answer`]) if the question waits
//! (it was recorded before it was asked, [`SessionStore::ask`]) and signals it;
//! this stream, on the replica running the call, is woken by the signal (or reads
//! the store each second), takes the answer and makes the call again with the
//! answers, as a current-era client makes a multi round-trip call. Nothing is
//! called before every question is answered, and a declined question is the
//! pipeline's to refuse, as for any client.

use std::sync::Arc;
use std::time::Duration;

use docket_catalog::SessionStore;
use docket_protocol::error::ErrorObject;
use docket_protocol::meta::RequestMeta;
use docket_protocol::mrtr::{InputRequest, InputRequiredResult};
use futures_util::StreamExt;
use http::HeaderMap;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::auth::Identity;
use crate::call;
use crate::error::McpError;
use crate::reply::{Items, Reply, StreamItem};
use crate::request::RequestContext;
use crate::state::App;

/// How often the stream reads the store for the client's answer when no signal
/// came: signals (in-process, or NOTIFY on PostgreSQL) wake it at once, and a
/// signal lost while a listening connection reconnects costs at most this.
const ANSWER_POLL: Duration = Duration::from_secs(1);

/// Rounds of questions one call may ask before it is refused.
const MAX_ROUNDS: usize = 8;

/// The method of the server's question.
const ELICIT_METHOD: &str = "elicitation/create";

/// Whether the session's client declared at `initialize` anything a call may ask of
/// it: elicitation, sampling or roots.
pub(super) fn declared(capabilities: &Value) -> bool {
    ["elicitation", "sampling", "roots"]
        .iter()
        .any(|name| capabilities.get(name).is_some_and(Value::is_object))
}

/// Whether a result asks for input (a multi round-trip `input_required`).
pub(super) fn asks_for_input(result: &Value) -> bool {
    result.get("resultType").and_then(Value::as_str) == Some("input_required")
}

/// The call being asked about: who makes it, with what, in which session.
pub(super) struct Conversation {
    pub(super) app: App,
    pub(super) identity: Arc<Identity>,
    pub(super) headers: HeaderMap,
    pub(super) meta: RequestMeta,
    pub(super) session_id: String,
    pub(super) version: String,
    /// The call's params, to make it again with the answers.
    pub(super) params: Value,
    /// How the final result is shaped for this era (a created task, for one).
    pub(super) shape: fn(Value) -> Value,
}

/// A call's first answer, as the pipeline gave it.
pub(super) enum FirstAnswer {
    /// A result (one that asks for input, or the call would not be here).
    Result(Value),
    /// A stream of progress and log messages that ends with the result.
    Stream(Items),
}

/// Answers a call whose answer asks for input, or may (it streams), with a stream
/// that passes on what the call streams, asks the client each question, and carries
/// the call's final answer.
pub(super) fn converse(conversation: Conversation, first: FirstAnswer) -> Reply {
    let (items, receiver) = mpsc::channel(16);
    tokio::spawn(async move {
        let answered = match first {
            FirstAnswer::Result(result) => Ok(result),
            FirstAnswer::Stream(inner) => forward(inner, &items).await,
        };
        let item = match answered {
            Ok(first) => conversation.run(first, &items).await,
            Err(error) => Err(error),
        };
        let item = match item {
            Ok(result) => StreamItem::Result((conversation.shape)(result)),
            Err(Some(error)) => StreamItem::Error(error),
            // The client went away: nobody to tell.
            Err(None) => return,
        };
        let _ = items.send(item).await;
    });
    Reply::channel(receiver)
}

/// Passes on what a call streams before its answer; the answer. `Err(None)` when the
/// client went away.
async fn forward(
    mut inner: Items,
    items: &mpsc::Sender<StreamItem>,
) -> Result<Value, Option<ErrorObject>> {
    while let Some(item) = inner.next().await {
        match item {
            StreamItem::Result(result) => return Ok(result),
            StreamItem::Error(error) => return Err(Some(error)),
            other => items.send(other).await.map_err(|_| None)?,
        }
    }
    Err(Some(ErrorObject::internal(
        "the call ended without an answer",
    )))
}

impl Conversation {
    /// Asks until the call answers without questions. `Err(None)` when the client went
    /// away.
    async fn run(
        &self,
        first: Value,
        items: &mpsc::Sender<StreamItem>,
    ) -> Result<Value, Option<ErrorObject>> {
        let mut answer = first;
        for _ in 0..MAX_ROUNDS {
            if !asks_for_input(&answer) {
                return Ok(answer);
            }
            let asked: InputRequiredResult = serde_json::from_value(answer).map_err(|err| {
                Some(ErrorObject::internal(format!(
                    "could not read the call's questions: {err}"
                )))
            })?;
            let mut responses = Map::new();
            for (key, request) in asked.input_requests.unwrap_or_default() {
                let method = request.method();
                let response = self.ask(self.question(request)?, method, items).await?;
                responses.insert(key, answer_for(method, response)?);
            }
            let mut params = self.params.clone();
            if let Value::Object(object) = &mut params {
                object.insert("inputResponses".into(), Value::Object(responses));
                match &asked.request_state {
                    Some(state) => object.insert("requestState".into(), json!(state)),
                    None => object.remove("requestState"),
                };
            }
            answer = self.call(params, items).await?;
        }
        Err(Some(ErrorObject::invalid_params(format!(
            "the call asked more than {MAX_ROUNDS} rounds of questions"
        ))))
    }

    /// The params of the request that asks `request` of this session's client, if the
    /// client declared what it needs at `initialize`.
    fn question(&self, request: InputRequest) -> Result<Value, Option<ErrorObject>> {
        let capabilities = &self.meta.client_capabilities;
        let declared = match &request {
            InputRequest::Elicit(_) => capabilities.elicitation.is_some(),
            InputRequest::CreateMessage(_) => capabilities.supports_sampling(),
            InputRequest::ListRoots(_) => capabilities.supports_roots(),
        };
        if !declared {
            return Err(Some(ErrorObject::invalid_params(format!(
                "the call asks the client for {}, which it did not declare at initialize",
                request.method()
            ))));
        }
        let mut params = match request {
            InputRequest::Elicit(params) => serde_json::to_value(params)
                .map_err(|err| Some(ErrorObject::internal(err.to_string())))?,
            InputRequest::CreateMessage(params) | InputRequest::ListRoots(params) => params,
        };
        // `mode` arrived with 2025-11-25; the revisions before it do not know it.
        if self.version.as_str() < "2025-11-25"
            && let Value::Object(object) = &mut params
        {
            object.remove("mode");
        }
        Ok(params)
    }

    /// Sends one question (`method` with `params`) and waits for the client's
    /// response, stored by whichever replica the client posted it to.
    async fn ask(
        &self,
        params: Value,
        method: &str,
        items: &mpsc::Sender<StreamItem>,
    ) -> Result<Value, Option<ErrorObject>> {
        let id = docket_catalog::generate_id()
            .map(|id| format!("ask-{id}"))
            .map_err(|err| {
                Some(ErrorObject::internal(format!(
                    "the OS random source failed: {err}"
                )))
            })?;
        let question = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let store: &Arc<dyn SessionStore> = &self.app.state.sessions;
        // Registered before the question is recorded, so no answer's signal is missed.
        let waiting = self
            .app
            .state
            .answer_waiters
            .register(&self.session_id, &id);
        match store.ask(&self.session_id, &id).await {
            Ok(true) => {}
            Ok(false) => {
                return Err(Some(ErrorObject::invalid_params(
                    "the session ended while the call was asking; initialize again",
                )));
            }
            Err(err) => {
                return Err(Some(ErrorObject::internal(format!(
                    "could not keep the question in the session; try again: {err}"
                ))));
            }
        }
        if items.send(StreamItem::Message(question)).await.is_err() {
            self.forget(&id).await;
            return Err(None);
        }
        let mut warned = false;
        loop {
            match store.take_answer(&self.session_id, &id).await {
                Ok(Some(answer)) => return Ok(answer),
                Ok(None) => {}
                // Said once per question, not ten times a second while the store is away.
                Err(err) if !warned => {
                    warned = true;
                    tracing::warn!(error = %err, "could not read an elicitation answer; still waiting");
                }
                Err(_) => {}
            }
            tokio::select! {
                () = waiting.notified() => {}
                () = tokio::time::sleep(ANSWER_POLL) => {}
                () = items.closed() => {
                    self.forget(&id).await;
                    return Err(None);
                }
            }
        }
    }

    /// Ends a question whose call's stream closed, so its late answer is refused.
    async fn forget(&self, id: &str) {
        if let Err(err) = self
            .app
            .state
            .sessions
            .forget_question(&self.session_id, id)
            .await
        {
            // It goes with its session when the session ends.
            tracing::warn!(error = %err, "could not forget an elicitation question");
        }
    }

    /// Makes the call again with the answers; progress and log messages it streams are
    /// passed on.
    async fn call(
        &self,
        params: Value,
        items: &mpsc::Sender<StreamItem>,
    ) -> Result<Value, Option<ErrorObject>> {
        let context = RequestContext {
            identity: Arc::clone(&self.identity),
            meta: self.meta.clone(),
            headers: self.headers.clone(),
            run_id: None,
        };
        match call::call_tool(&self.app, context, Some(params)).await {
            Ok(Reply::Json(result)) => Ok(result),
            Ok(Reply::Encoded(bytes)) => serde_json::from_slice(&bytes)
                .map_err(|err| Some(ErrorObject::internal(err.to_string()))),
            Ok(Reply::Stream(inner)) => forward(inner, items).await,
            Err(error) => Err(Some(super::shape::Refusal::from_error(&error).error)),
        }
    }
}

/// What the session keeps of a client's JSON-RPC response: its `result` or its
/// `error`, read by [`answer_for`] once the question's method is known.
pub(super) fn answer_of(response: &Value) -> Value {
    match (response.get("result"), response.get("error")) {
        (Some(result), _) => json!({ "result": result }),
        (None, Some(error)) => json!({ "error": error }),
        (None, None) => {
            json!({ "error": {"message": "the response carried neither result nor error"} })
        }
    }
}

/// The input response a call gets for the client's answer to `method`: its result;
/// for an elicitation answered with an error, a cancel (the user saw no form); for
/// anything else answered with an error, the call ends with that error.
fn answer_for(method: &str, kept: Value) -> Result<Value, Option<ErrorObject>> {
    match kept.get("result") {
        Some(result) => Ok(result.clone()),
        None if method == ELICIT_METHOD => Ok(json!({"action": "cancel"})),
        None => {
            let said = kept
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no reason given");
            Err(Some(ErrorObject::invalid_params(format!(
                "the client answered {method} with an error: {said}"
            ))))
        }
    }
}

/// A missing-capability refusal the pipeline gives a call whose client could not be
/// asked; said as an error the era knows.
pub(super) fn could_not_ask(error: &McpError) -> bool {
    matches!(error, McpError::MissingCapability { required, .. } if required.elicitation.is_some())
}
