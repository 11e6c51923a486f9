//! Consent (and any other question a call asks) in a session of the earlier era,
//! whose client declared elicitation at `initialize`: the call's answer becomes an
//! SSE stream, each question an `elicitation/create` request on it; the client
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
use docket_protocol::mrtr::{ElicitRequestParams, InputRequest, InputRequiredResult};
use http::HeaderMap;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::auth::Identity;
use crate::call;
use crate::error::McpError;
use crate::reply::{Reply, StreamItem};
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

/// Whether the session's client declared elicitation at `initialize`.
pub(super) fn declared(capabilities: &Value) -> bool {
    capabilities
        .get("elicitation")
        .is_some_and(Value::is_object)
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
    Stream(mpsc::Receiver<StreamItem>),
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
    Reply::Stream(receiver)
}

/// Passes on what a call streams before its answer; the answer. `Err(None)` when the
/// client went away.
async fn forward(
    mut inner: mpsc::Receiver<StreamItem>,
    items: &mpsc::Sender<StreamItem>,
) -> Result<Value, Option<ErrorObject>> {
    while let Some(item) = inner.recv().await {
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
                let InputRequest::Elicit(params) = request else {
                    return Err(Some(ErrorObject::invalid_params(format!(
                        "the call asks the client for {}, which Docket does not ask in a \
                         session of revision {}",
                        request.method(),
                        self.version
                    ))));
                };
                let response = self.ask(params, items).await?;
                responses.insert(key, response);
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

    /// Sends one question and waits for its answer, stored by whichever replica the
    /// client posted it to.
    async fn ask(
        &self,
        params: ElicitRequestParams,
        items: &mpsc::Sender<StreamItem>,
    ) -> Result<Value, Option<ErrorObject>> {
        let id = docket_catalog::generate_id()
            .map(|id| format!("elicit-{id}"))
            .map_err(|err| {
                Some(ErrorObject::internal(format!(
                    "the OS random source failed: {err}"
                )))
            })?;
        let mut params = serde_json::to_value(params)
            .map_err(|err| Some(ErrorObject::internal(err.to_string())))?;
        // `mode` arrived with 2025-11-25; the revisions before it do not know it.
        if self.version.as_str() < "2025-11-25"
            && let Value::Object(object) = &mut params
        {
            object.remove("mode");
        }
        let question =
            json!({"jsonrpc": "2.0", "id": id, "method": ELICIT_METHOD, "params": params});
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

/// What the client answered, as the call takes it: the elicitation result, or a
/// cancel when the client answered with an error.
pub(super) fn answer_of(response: &Value) -> Value {
    match response.get("result") {
        Some(result) => result.clone(),
        None => json!({"action": "cancel"}),
    }
}

/// A missing-capability refusal the pipeline gives a call whose client could not be
/// asked; said as an error the era knows.
pub(super) fn could_not_ask(error: &McpError) -> bool {
    matches!(error, McpError::MissingCapability { required, .. } if required.elicitation.is_some())
}
