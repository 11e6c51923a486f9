//! `subscriptions/listen` (2026-07-28): a long-lived SSE answer that pushes what
//! the client asked to hear. Docket honours the tasks extension's `taskIds`: the
//! acknowledgement comes first (naming what is honoured: the ids the caller may
//! follow; others, unknown or not theirs alike, are left out), then each followed
//! task as it is now, then `notifications/tasks` with the whole task each time it
//! changes — it ends, begins or stops waiting for input, or has a new status
//! message — wherever it changed (the task runtime hears other replicas through
//! the store: NOTIFY on PostgreSQL), script runs' ends included. A signal that
//! finds the task as it was last sent sends nothing. It honours
//! `promptsListChanged` (the prompt library changed) and `resourcesListChanged` (an
//! asset of the caller's was recorded or deleted), announced by whichever replica
//! made the change (`ChangeFeed`). Every message carries the subscription id (the listen
//! request's id); on shutdown the stream ends with the closing response. Tools (and
//! personas) never change while a server runs, so `toolsListChanged` is not
//! honoured; nor `resourceSubscriptions` (an asset never changes once written; see
//! docs/design.md, Following).

use std::collections::{BTreeMap, VecDeque};
use std::hash::{BuildHasher, RandomState};
use std::sync::Arc;

use docket_catalog::CatalogChange;
use docket_protocol::jsonrpc::RequestId;
use docket_task::TaskId;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;

use crate::auth::Identity;
use crate::error::McpError;
use crate::reply::{Reply, StreamItem};
use crate::request::RequestContext;
use crate::state::App;
use crate::tasks;

/// The method.
pub(crate) const METHOD: &str = "subscriptions/listen";

/// The `_meta` key that ties a message to its subscription.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// How many tasks one listen may follow.
const MAX_TASKS: usize = 100;

#[derive(Deserialize)]
struct ListenParams {
    #[serde(default)]
    notifications: Requested,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Requested {
    #[serde(default)]
    task_ids: Option<Vec<String>>,
    #[serde(default)]
    prompts_list_changed: bool,
    #[serde(default)]
    resources_list_changed: bool,
}

/// Whether listening is offered: there are tasks to follow, or lists that change.
pub(crate) fn offered(app: &App) -> bool {
    app.tasks_enabled()
        || app.state.features.prompts_change()
        || app.state.features.lists_caller_resources()
}

/// Serves `subscriptions/listen` with request id `id`.
pub(crate) async fn listen(
    app: &App,
    context: RequestContext,
    id: &RequestId,
    params: Option<Value>,
) -> Result<Reply, McpError> {
    let ListenParams { notifications } =
        serde_json::from_value(params.unwrap_or_else(|| json!({})))
            .map_err(|err| McpError::InvalidParams(format!("invalid {METHOD} params: {err}")))?;
    let subscription = serde_json::to_value(id).unwrap_or(Value::Null);
    let asked_tasks = notifications.task_ids.is_some();
    let asked = notifications.task_ids.unwrap_or_default();
    if asked.len() > MAX_TASKS {
        return Err(McpError::InvalidParams(format!(
            "one listen follows at most {MAX_TASKS} tasks"
        )));
    }
    if !asked.is_empty() && !context.meta.client_capabilities.declares_tasks() {
        return Err(McpError::MissingCapability {
            message: "notifications about tasks need the io.modelcontextprotocol/tasks extension \
                      declared on the request"
                .to_owned(),
            required: Box::new(docket_protocol::meta::ClientCapabilities::with_extension(
                docket_protocol::TASKS_EXTENSION,
            )),
        });
    }
    let is_admin = app
        .state
        .personas
        .resolve(&context.identity.roles)
        .is_some_and(|persona| persona.is_admin);
    // Subscribed before anything is read, so no end between the read and the
    // subscription goes unheard.
    let task_changes = app.task_runtime().map(|runtime| runtime.watch());
    let run_ends = app.run_bridge().map(|bridge| bridge.watch_ended());
    // The tasks followed, by id (each once), with the message that says each as it is.
    let mut current = BTreeMap::new();
    if let Some(surface) = &app.state.tasks {
        for task_id in asked {
            match tasks::find(surface, &context.identity, is_admin, &task_id).await {
                Ok((found, view)) => {
                    current.insert(
                        task_id.clone(),
                        task_message(found.record, view, &subscription),
                    );
                }
                // A store that cannot be read is said, not taken for "not yours".
                Err(error @ McpError::Unavailable(_)) => return Err(error),
                // Unknown, expired and not-yours alike: not followed.
                Err(_) => {}
            }
        }
    }
    // What is honoured, of what was asked: the tasks the caller may follow; the
    // prompt list when it can change (the library); the caller's resource list when
    // it holds their assets.
    let mut honoured = serde_json::Map::new();
    if asked_tasks {
        honoured.insert("taskIds".into(), json!(current.keys().collect::<Vec<_>>()));
    }
    let lists = Lists {
        prompts: notifications.prompts_list_changed && app.state.features.prompts_change(),
        resources: notifications.resources_list_changed
            && app.state.features.lists_caller_resources(),
    };
    if lists.prompts {
        honoured.insert("promptsListChanged".into(), Value::Bool(true));
    }
    if lists.resources {
        honoured.insert("resourcesListChanged".into(), Value::Bool(true));
    }
    let list_changes = (lists.prompts || lists.resources).then(|| app.state.changes.subscribe());
    let acknowledged = json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "_meta": { SUBSCRIPTION_ID: subscription },
            "notifications": honoured,
        }
    });
    let app = app.clone();
    // A stream may stay open for hours and reads tasks only as its caller: it keeps
    // the caller's identity and nothing else of the request (its headers' values
    // share the connection's first read buffer and would keep all of it).
    let hasher = RandomState::new();
    let followed = current
        .iter()
        .map(|(id, message)| Followed {
            id: id.as_str().into(),
            sent: hasher.hash_one(message.to_string()),
        })
        .collect();
    let mut queue = VecDeque::with_capacity(1 + current.len());
    queue.push_back(StreamItem::Message(acknowledged));
    queue.extend(current.into_values().map(StreamItem::Message));
    let stream = Stream {
        closing: app.state.closing.clone(),
        app,
        identity: context.identity,
        is_admin,
        subscription,
        followed,
        hasher,
        lists,
        queue,
        ended: false,
        task_changes,
        run_ends,
        list_changes,
    };
    // Polled by the connection that writes it: a stream open for hours costs no
    // task or channel of its own, and ends when the client goes away.
    Ok(Reply::Stream(Box::pin(futures_util::stream::unfold(
        stream,
        |mut stream| async move {
            let item = stream.next().await?;
            Some((item, stream))
        },
    ))))
}

/// The list changes a stream says.
#[derive(Clone, Copy)]
struct Lists {
    prompts: bool,
    resources: bool,
}

/// A task a stream follows.
struct Followed {
    id: Box<str>,
    /// The hash of the message last sent for it, so a repeated signal (this
    /// replica's and the database's for one change) sends nothing new: a stream
    /// open for hours keeps eight bytes a task, not the message.
    sent: u64,
}

/// An open listen stream.
struct Stream {
    app: App,
    identity: Arc<Identity>,
    is_admin: bool,
    subscription: Value,
    /// The tasks followed, in the order of their ids.
    followed: Vec<Followed>,
    /// Hashes the messages sent ([`Followed::sent`]); keyed afresh for each stream.
    hasher: RandomState,
    lists: Lists,
    /// Messages to send before waiting again (the acknowledgement and the tasks as
    /// they are, first; both list changes when the stream fell behind).
    queue: VecDeque<StreamItem>,
    /// The closing response is queued: nothing follows it.
    ended: bool,
    closing: tokio_util::sync::CancellationToken,
    task_changes: Option<broadcast::Receiver<TaskId>>,
    run_ends: Option<broadcast::Receiver<String>>,
    list_changes: Option<broadcast::Receiver<CatalogChange>>,
}

impl Stream {
    /// The next message: a followed task as it changed, a list change, or, when
    /// the server shuts down, the closing response; `None` after it.
    async fn next(&mut self) -> Option<StreamItem> {
        loop {
            if let Some(item) = self.queue.pop_front() {
                if self.queue.is_empty() {
                    // The first burst's room (a message a followed task) is not
                    // kept for the stream's life.
                    self.queue.shrink_to(2);
                }
                return Some(item);
            }
            if self.ended {
                return None;
            }
            let changed = tokio::select! {
                changed = next(self.task_changes.as_mut()) => changed.map(|id| id.map(|id| id.as_str().to_owned())),
                ended = next(self.run_ends.as_mut()) => ended,
                listed = next(self.list_changes.as_mut()) => {
                    self.list_changed(listed);
                    continue;
                }
                () = self.closing.cancelled() => {
                    let closed = json!({
                        "resultType": "complete",
                        "_meta": { SUBSCRIPTION_ID: self.subscription },
                    });
                    self.queue.push_back(StreamItem::Result(closed));
                    self.ended = true;
                    continue;
                }
            };
            let ids: Vec<String> = match changed {
                Ok(Some(id)) if self.position(&id).is_some() => vec![id],
                Ok(_) => continue,
                // Fell behind: every followed task is read again.
                Err(()) => self
                    .followed
                    .iter()
                    .map(|task| task.id.to_string())
                    .collect(),
            };
            for id in ids {
                // Boxed: the read's future is large and alive only while it runs;
                // the stream, waiting between changes for hours, keeps only this loop.
                Box::pin(self.push(&id)).await;
            }
        }
    }

    /// Queues `list_changed` for a change the stream follows (both, when it fell
    /// behind).
    fn list_changed(&mut self, change: Result<Option<CatalogChange>, ()>) {
        let (prompts, resources) = match change {
            Ok(Some(CatalogChange::Prompts)) => (self.lists.prompts, false),
            Ok(Some(CatalogChange::Assets { owner })) => (
                false,
                self.lists.resources && owner == self.identity.subject,
            ),
            Ok(None) => (false, false),
            Err(()) => (self.lists.prompts, self.lists.resources),
        };
        for (said, method) in [
            (prompts, "notifications/prompts/list_changed"),
            (resources, "notifications/resources/list_changed"),
        ] {
            if !said {
                continue;
            }
            let message = json!({
                "jsonrpc": "2.0",
                "method": method,
                "params": { "_meta": { SUBSCRIPTION_ID: self.subscription } },
            });
            self.queue.push_back(StreamItem::Message(message));
        }
    }

    /// Where `id` is in [`Stream::followed`], if it is followed.
    fn position(&self, id: &str) -> Option<usize> {
        self.followed
            .binary_search_by(|task| task.id.as_ref().cmp(id))
            .ok()
    }

    /// Queues the task as it is now, unless it is as last sent.
    async fn push(&mut self, id: &str) {
        let (Some(surface), Some(at)) = (&self.app.state.tasks, self.position(id)) else {
            return;
        };
        // Gone (expired) or the store is away: nothing to say now.
        let Ok((found, view)) = tasks::find(surface, &self.identity, self.is_admin, id).await
        else {
            return;
        };
        let message = task_message(found.record, view, &self.subscription);
        let sent = self.hasher.hash_one(message.to_string());
        if self.followed[at].sent != sent {
            self.followed[at].sent = sent;
            self.queue.push_back(StreamItem::Message(message));
        }
    }
}

/// The next value of a broadcast, if there is one: `Ok(Some)`, `Ok(None)` for a
/// source there is none of (never resolves), `Err` when it fell behind.
async fn next<T: Clone>(receiver: Option<&mut broadcast::Receiver<T>>) -> Result<Option<T>, ()> {
    let Some(receiver) = receiver else {
        return std::future::pending().await;
    };
    match receiver.recv().await {
        Ok(value) => Ok(Some(value)),
        Err(RecvError::Lagged(_)) => Err(()),
        // The source stopped (the app is going away): wait for the close.
        Err(RecvError::Closed) => std::future::pending().await,
    }
}

/// `notifications/tasks` with the whole task, tagged with the subscription.
fn task_message(
    record: docket_task::TaskRecord,
    view: docket_task::TaskView,
    subscription: &Value,
) -> Value {
    let mut params = serde_json::to_value(tasks::get_result(record, view)).unwrap_or(Value::Null);
    if let Value::Object(object) = &mut params {
        object.remove("resultType");
        object.insert("_meta".into(), json!({ SUBSCRIPTION_ID: subscription }));
    }
    json!({"jsonrpc": "2.0", "method": "notifications/tasks", "params": params})
}
