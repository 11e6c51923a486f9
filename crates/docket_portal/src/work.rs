//! `GET /portal/work`: the person's tasks and script runs, each with its
//! status and its result or error, kept live by `static/work.js` over the
//! composing server's `/portal/work/events`; `POST /portal/work/cancel` and
//! `/portal/work/cancel-run` stop one.

use askama::Template;
use http::StatusCode;
use serde_json::{Value, json};

use crate::desk::{Desk, TaskLine};
use crate::form::CheckedForm;
use crate::nav::{Nav, failed, person};
use crate::reply::{Reply, page, redirect};
use crate::session::SignedIn;

/// How many runs the page lists.
const RUNS_SHOWN: u64 = 50;

/// The most characters of a result or error the page shows.
const OUTCOME_CHARS: usize = 4_000;

/// One run as the page lists it.
pub(crate) struct RunLine {
    pub(crate) id: String,
    pub(crate) script: String,
    pub(crate) status: String,
    pub(crate) started_at: String,
    pub(crate) finished_at: String,
    pub(crate) outcome: String,
}

impl RunLine {
    pub(crate) fn running(&self) -> bool {
        matches!(self.status.as_str(), "queued" | "running")
    }

    fn from_json(run: &Value) -> Option<Self> {
        let text = |key: &str| {
            run.get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let outcome = ["error", "result"]
            .iter()
            .find_map(|key| run.get(*key).filter(|value| !value.is_null()))
            .map(|value| match value {
                Value::String(text) => clip(text),
                other => clip(&other.to_string()),
            })
            .unwrap_or_default();
        Some(Self {
            id: run.get("run_id").and_then(Value::as_str)?.to_owned(),
            script: text("name"),
            status: text("status"),
            started_at: text("started_at"),
            finished_at: text("finished_at"),
            outcome,
        })
    }
}

/// `text` cut at [`OUTCOME_CHARS`] characters.
pub(crate) fn clip(text: &str) -> String {
    match text.char_indices().nth(OUTCOME_CHARS) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

#[derive(Template)]
#[template(path = "work.html")]
struct WorkPage {
    nav: Nav,
    tasks: Vec<TaskLine>,
    next_tasks: Option<String>,
    runs: Vec<RunLine>,
    error: Option<String>,
}

pub(crate) async fn show(signed_in: &SignedIn, desk: &dyn Desk, query: &str) -> Reply {
    let person = person(signed_in);
    let cursor = form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "cursor")
        .map(|(_, value)| value.into_owned());
    let (tasks, next_tasks) = match desk.tasks(&person, cursor.as_deref()).await {
        Ok(found) => found,
        Err(error) => return failed(&error),
    };
    let tasks = tasks
        .into_iter()
        .map(|mut task| {
            task.outcome = task.outcome.map(|text| clip(&text));
            task
        })
        .collect();
    // Runs come from the run tools, as the person: a persona without them
    // sees why on the page, and the tasks still.
    let (runs, error) = match desk
        .call(&person, "list_runs", json!({"limit": RUNS_SHOWN}))
        .await
    {
        Ok(answer) => (
            answer
                .get("runs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(RunLine::from_json)
                .collect(),
            None,
        ),
        Err(error) => (Vec::new(), Some(format!("Script runs: {error}"))),
    };
    page(
        StatusCode::OK,
        &WorkPage {
            nav: Nav::of(signed_in),
            tasks,
            next_tasks,
            runs,
            error,
        },
    )
}

pub(crate) async fn cancel(signed_in: &SignedIn, desk: &dyn Desk, form: &CheckedForm) -> Reply {
    let person = person(signed_in);
    let done = match (form.get("task_id"), form.get("run_id")) {
        (Some(task_id), None) => desk.cancel_task(&person, task_id).await,
        (None, Some(run_id)) => desk
            .call(&person, "cancel_run", json!({"run_id": run_id}))
            .await
            .map(drop),
        _ => return failed(&crate::desk::DeskError::NotFound),
    };
    match done {
        Ok(()) => redirect("/portal/work", &[]),
        Err(error) => failed(&error),
    }
}

/// The page's script.
pub(crate) fn script() -> Reply {
    crate::reply::script(include_str!("../static/work.js"))
}
