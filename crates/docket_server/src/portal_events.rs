//! `GET /portal/work/events`: the work page's live statuses, as Server-Sent
//! Events. The page names what it shows still running (`tasks=` and `runs=`,
//! comma-separated, at most [`MAX_FOLLOWED`] of each); the stream follows
//! those the session's person may read (by `tasks::find`, the rule of
//! `tasks/get`, and `get_run`), and sends `event: change` with the task's or
//! run's status each time it changes, heard through the same change feed as
//! `subscriptions/listen` (the task runtime's changes, every replica's, and
//! the run bridge's ends). Others' ids are dropped unseen, like unknown ones.
//! Without a live session the answer is `204`, which tells a browser's
//! `EventSource` to stop asking.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use docket_portal::{Desk, Person};
use http::{HeaderValue, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use crate::portal::ComposedPortal;
use crate::portal_desk::{ServerDesk, identity_of, task_line};
use crate::state::App;
use crate::tasks;

/// How many tasks, and how many runs, one stream follows.
pub(crate) const MAX_FOLLOWED: usize = 100;

/// The path.
pub(crate) const PATH: &str = "/portal/work/events";

use crate::sse::Body;

/// The ids a query names under `key`: well-formed, distinct, bounded.
fn ids(query: &str, key: &str) -> BTreeSet<String> {
    form_urlencoded::parse(query.as_bytes())
        .filter(|(name, _)| name == key)
        .flat_map(|(_, value)| {
            value
                .split(',')
                .map(str::trim)
                .filter(|id| !id.is_empty() && id.len() <= 128)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .take(MAX_FOLLOWED)
        .collect()
}

fn answer(status: StatusCode) -> hyper::Response<Body> {
    let mut response = hyper::Response::new(BodyExt::boxed_unsync(Full::new(Bytes::new())));
    *response.status_mut() = status;
    response
}

/// Answers `GET /portal/work/events?…` for the browser whose cookie is in
/// `headers`.
pub(crate) async fn answer_events(
    app: &App,
    portal: &ComposedPortal,
    headers: &http::HeaderMap,
    query: &str,
) -> hyper::Response<Body> {
    let person = match portal.portal.person(headers).await {
        Ok(Some(person)) => person,
        Ok(None) => return answer(StatusCode::NO_CONTENT),
        Err(error) => {
            tracing::warn!(%error, "a portal session could not be read");
            return answer(StatusCode::SERVICE_UNAVAILABLE);
        }
    };
    // A stream lives as long as the page: it counts among the person's
    // streams, and its hold goes with it.
    let hold = match app.state.holds.enter(&person.subject).and_then(|mut hold| {
        hold.open_stream()?;
        Ok(hold)
    }) {
        Ok(hold) => hold,
        Err(refused) => {
            tracing::info!(%refused, "refused a portal events stream");
            return answer(StatusCode::TOO_MANY_REQUESTS);
        }
    };
    // Subscribed before anything is read, so no change between the read and
    // the subscription goes unheard.
    let task_changes = app.task_runtime().map(|runtime| runtime.watch());
    let run_ends = app.run_bridge().map(|bridge| bridge.watch_ended());
    let mut follow = Follow {
        app: app.clone(),
        viewer: portal.viewer.clone(),
        oversight: portal.oversight.clone(),
        person,
        tasks: ids(query, "tasks"),
        runs: ids(query, "runs"),
    };
    let (frames, receiver) = mpsc::channel::<Bytes>(16);
    let keepalive = app.state.sse_keepalive;
    tokio::spawn(async move {
        let _hold = hold;
        follow.run(task_changes, run_ends, frames, keepalive).await;
    });
    let mut response = crate::sse::event_stream(receiver);
    let headers = response.headers_mut();
    headers.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// One open stream.
struct Follow {
    app: App,
    viewer: std::sync::Arc<docket_export::view::Viewer>,
    oversight: Option<std::sync::Arc<dyn docket_task::oversight::Oversight>>,
    person: Person,
    tasks: BTreeSet<String>,
    runs: BTreeSet<String>,
}

async fn next<T: Clone>(receiver: Option<&mut broadcast::Receiver<T>>) -> Result<Option<T>, ()> {
    match receiver {
        Some(receiver) => match receiver.recv().await {
            Ok(value) => Ok(Some(value)),
            Err(broadcast::error::RecvError::Lagged(_)) => Err(()),
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        },
        None => std::future::pending().await,
    }
}

impl Follow {
    async fn run(
        &mut self,
        mut task_changes: Option<broadcast::Receiver<docket_task::TaskId>>,
        mut run_ends: Option<broadcast::Receiver<String>>,
        frames: mpsc::Sender<Bytes>,
        keepalive: Duration,
    ) {
        // Drop what the person may not read, and say where each one is now:
        // an end between the page's render and this stream is not missed.
        let asked: Vec<String> = self.tasks.iter().cloned().collect();
        self.tasks.clear();
        for id in asked {
            if let Some(change) = self.task(&id).await {
                self.tasks.insert(id);
                if frames.send(frame(&change)).await.is_err() {
                    return;
                }
            }
        }
        let asked: Vec<String> = self.runs.iter().cloned().collect();
        self.runs.clear();
        for id in asked {
            if let Some(change) = self.run_change(&id).await {
                self.runs.insert(id);
                if frames.send(frame(&change)).await.is_err() {
                    return;
                }
            }
        }
        let closing = self.app.state.closing.clone();
        let mut ticker = tokio::time::interval(keepalive);
        ticker.tick().await;
        loop {
            let changes: Vec<Value> = tokio::select! {
                changed = next(task_changes.as_mut()) => match changed {
                    Ok(Some(id)) if self.tasks.contains(id.as_str()) => {
                        self.task(id.as_str()).await.into_iter().collect()
                    }
                    Ok(_) => continue,
                    Err(()) => self.everything().await,
                },
                ended = next(run_ends.as_mut()) => match ended {
                    Ok(Some(id)) if self.runs.contains(&id) => {
                        self.run_change(&id).await.into_iter().collect()
                    }
                    Ok(_) => continue,
                    Err(()) => self.everything().await,
                },
                _ = ticker.tick() => {
                    if frames.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                        return;
                    }
                    continue;
                }
                () = frames.closed() => return,
                () = closing.cancelled() => return,
            };
            for change in changes {
                if frames.send(frame(&change)).await.is_err() {
                    return;
                }
            }
        }
    }

    /// Every followed task and run as it is now (after the stream fell
    /// behind).
    async fn everything(&self) -> Vec<Value> {
        let mut changes = Vec::new();
        for id in &self.tasks {
            changes.extend(self.task(id).await);
        }
        for id in &self.runs {
            changes.extend(self.run_change(id).await);
        }
        changes
    }

    /// The task `id` as the person may see it now.
    async fn task(&self, id: &str) -> Option<Value> {
        let surface = self.app.state.tasks.as_ref()?;
        let identity = identity_of(&self.app, &self.person).await.ok()?;
        let is_admin = self
            .app
            .state
            .personas
            .resolve(&self.person.roles)
            .is_some_and(|persona| persona.is_admin);
        let context = crate::portal_desk::context_of(identity);
        let (found, view) = tasks::find(surface, &context.identity, is_admin, id)
            .await
            .ok()?;
        let line = task_line(&found.record, &view);
        Some(json!({
            "kind": "task",
            "id": line.id,
            "status": line.status,
            "message": line.message,
            "outcome": line.outcome,
        }))
    }

    /// The run `id` as `get_run` shows it to the person now.
    async fn run_change(&self, id: &str) -> Option<Value> {
        let desk = ServerDesk {
            app: &self.app,
            viewer: &self.viewer,
            oversight: self.oversight.as_ref(),
        };
        let run = desk
            .call(&self.person, "get_run", json!({"run_id": id}))
            .await
            .ok()?;
        let outcome = ["error", "result"]
            .iter()
            .find_map(|key| run.get(*key).filter(|value| !value.is_null()))
            .map(|value| match value {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            });
        Some(json!({
            "kind": "run",
            "id": id,
            "status": run.get("status").and_then(Value::as_str).unwrap_or_default(),
            "outcome": outcome,
        }))
    }
}

/// One change as an SSE event.
fn frame(change: &Value) -> Bytes {
    Bytes::from(format!("event: change\ndata: {change}\n\n"))
}
