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

use std::collections::{BTreeMap, BTreeSet};

use docket_catalog::CatalogChange;
use docket_protocol::jsonrpc::RequestId;
use docket_task::TaskId;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, mpsc};

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
    let mut followed = BTreeSet::new();
    let mut current = BTreeMap::new();
    if let Some(surface) = &app.state.tasks {
        for task_id in asked {
            match tasks::find(surface, &context, is_admin, &task_id).await {
                Ok((found, view)) => {
                    followed.insert(task_id.clone());
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
    let (items, receiver) = mpsc::channel(32);
    // What is honoured, of what was asked: the tasks the caller may follow; the
    // prompt list when it can change (the library); the caller's resource list when
    // it holds their assets.
    let mut honoured = serde_json::Map::new();
    if asked_tasks {
        honoured.insert("taskIds".into(), json!(followed.iter().collect::<Vec<_>>()));
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
    // no headers, whose values share the connection's first read buffer and would
    // keep all of it.
    let context = RequestContext {
        headers: http::HeaderMap::new(),
        ..context
    };
    let sent = current
        .iter()
        .map(|(id, message)| (id.clone(), message.to_string()))
        .collect();
    tokio::spawn(async move {
        if items.send(StreamItem::Message(acknowledged)).await.is_err() {
            return;
        }
        for message in current.values() {
            if items
                .send(StreamItem::Message(message.clone()))
                .await
                .is_err()
            {
                return;
            }
        }
        let mut stream = Stream {
            app,
            context,
            is_admin,
            subscription,
            followed,
            lists,
            items,
            sent,
        };
        stream.run(task_changes, run_ends, list_changes).await;
    });
    Ok(Reply::Stream(receiver))
}

/// The list changes a stream says.
#[derive(Clone, Copy)]
struct Lists {
    prompts: bool,
    resources: bool,
}

/// An open listen stream.
struct Stream {
    app: App,
    context: RequestContext,
    is_admin: bool,
    subscription: Value,
    followed: BTreeSet<String>,
    lists: Lists,
    items: mpsc::Sender<StreamItem>,
    /// The message last sent for each followed task, as sent (a string is a
    /// fraction of a JSON tree's size), so a repeated signal (this replica's and the
    /// database's for one change) sends nothing new.
    sent: BTreeMap<String, String>,
}

impl Stream {
    /// Pushes each followed task that changes until the client goes away or the
    /// server shuts down.
    async fn run(
        &mut self,
        mut task_changes: Option<broadcast::Receiver<TaskId>>,
        mut run_ends: Option<broadcast::Receiver<String>>,
        mut list_changes: Option<broadcast::Receiver<CatalogChange>>,
    ) {
        let closing = self.app.state.closing.clone();
        loop {
            let changed = tokio::select! {
                changed = next(task_changes.as_mut()) => changed.map(|id| id.map(|id| id.as_str().to_owned())),
                ended = next(run_ends.as_mut()) => ended,
                listed = next(list_changes.as_mut()) => {
                    if !self.list_changed(listed).await {
                        return;
                    }
                    continue;
                }
                () = self.items.closed() => return,
                () = closing.cancelled() => {
                    let closed = json!({
                        "resultType": "complete",
                        "_meta": { SUBSCRIPTION_ID: self.subscription },
                    });
                    let _ = self.items.send(StreamItem::Result(closed)).await;
                    return;
                }
            };
            let ids: Vec<String> = match changed {
                Ok(Some(id)) if self.followed.contains(&id) => vec![id],
                Ok(_) => continue,
                // Fell behind: every followed task is read again.
                Err(()) => self.followed.iter().cloned().collect(),
            };
            for id in ids {
                // Boxed: the read's future is large and alive only while it runs;
                // the stream, waiting between changes for hours, keeps only this loop.
                if !Box::pin(self.push(&id)).await {
                    return;
                }
            }
        }
    }

    /// Says `list_changed` for a change the stream follows (both, when it fell
    /// behind); false when the client went away.
    async fn list_changed(&self, change: Result<Option<CatalogChange>, ()>) -> bool {
        let (prompts, resources) = match change {
            Ok(Some(CatalogChange::Prompts)) => (self.lists.prompts, false),
            Ok(Some(CatalogChange::Assets { owner })) => (
                false,
                self.lists.resources && owner == self.context.identity.subject,
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
            if self.items.send(StreamItem::Message(message)).await.is_err() {
                return false;
            }
        }
        true
    }

    /// Sends the task as it is now, unless it is as last sent; false when the
    /// client went away.
    async fn push(&mut self, id: &str) -> bool {
        let Some(surface) = &self.app.state.tasks else {
            return true;
        };
        match tasks::find(surface, &self.context, self.is_admin, id).await {
            Ok((found, view)) => {
                let message = task_message(found.record, view, &self.subscription);
                let text = message.to_string();
                if self.sent.get(id) == Some(&text) {
                    return true;
                }
                self.sent.insert(id.to_owned(), text);
                self.items.send(StreamItem::Message(message)).await.is_ok()
            }
            // Gone (expired) or the store is away: nothing to say now.
            Err(_) => true,
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
