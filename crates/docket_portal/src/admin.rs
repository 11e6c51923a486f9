//! `GET /portal/admin`: for administrators only — the audit log searchable by
//! person, tool and time, the replicas and their last beats, and the run
//! queue. Anyone else gets the portal's "not found".

use serde_json::json;

use crate::desk::{AuditSearch, Desk, DeskError};
use crate::nav::{Nav, Section, answers, failed, person};
use crate::render::escape;
use crate::reply::Reply;
use crate::session::SignedIn;

/// How many runs of each state the queue shows (`list_runs`' most).
const RUNS_SHOWN: u64 = 50;

/// The longest text of one search field.
const MAX_FIELD_CHARS: usize = 256;

pub(crate) async fn show(signed_in: &SignedIn, desk: &dyn Desk, query: &str) -> Reply {
    if !signed_in.session.administrator {
        return failed(&DeskError::NotFound);
    }
    let person = person(signed_in);
    let field = |name: &str| {
        form_urlencoded::parse(query.as_bytes())
            .find(|(key, _)| key == name)
            .map(|(_, value)| {
                value
                    .trim()
                    .chars()
                    .take(MAX_FIELD_CHARS)
                    .collect::<String>()
            })
            .filter(|value| !value.is_empty())
    };
    let search = AuditSearch {
        subject: field("person"),
        tool: field("tool"),
        since: field("since"),
        until: field("until"),
    };
    let form = search_form(&search);
    let audit = desk.audit(&person, &search).await;
    if matches!(audit, Err(DeskError::NotFound)) {
        return failed(&DeskError::NotFound);
    }
    let replicas = desk.replicas(&person).await;
    let queue = desk
        .call(
            &person,
            "list_runs",
            json!({"status": "queued", "limit": RUNS_SHOWN}),
        )
        .await;
    let running = desk
        .call(
            &person,
            "list_runs",
            json!({"status": "running", "limit": RUNS_SHOWN}),
        )
        .await;
    let sections = vec![
        Section {
            id: "audit-search",
            heading: "Audit log".to_owned(),
            html: form,
        },
        Section::answer("audit", "", audit),
        Section::answer("replicas", "Replicas", replicas),
        Section::answer("queue", "Queued runs", queue),
        Section::answer("running", "Running runs", running),
    ];
    answers(Nav::of(signed_in), "Administration", sections)
}

fn search_form(search: &AuditSearch) -> String {
    let value = |field: &Option<String>| escape(field.as_deref().unwrap_or_default());
    format!(
        "<form method=\"get\" action=\"/portal/admin\" class=\"pager\">\
         <label>Person <input type=\"text\" name=\"person\" value=\"{}\"></label>\
         <label>Tool <input type=\"text\" name=\"tool\" value=\"{}\"></label>\
         <label>Since <input type=\"text\" name=\"since\" placeholder=\"2026-12-01T00:00:00Z\" value=\"{}\"></label>\
         <label>Until <input type=\"text\" name=\"until\" value=\"{}\"></label>\
         <button type=\"submit\">Search</button></form>",
        value(&search.subject),
        value(&search.tool),
        value(&search.since),
        value(&search.until),
    )
}
