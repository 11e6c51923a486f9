//! The signed-in pages through `Portal::handle` with a desk that plays the
//! server: each shows only the person's own work, every change needs the
//! session's CSRF token, and what is not the person's is "not found".

use docket_portal::TaskLine;
use http::StatusCode;

use crate::flow::{Harness, body, csrf_of, header, person};

fn task(id: &str, status: &str) -> TaskLine {
    TaskLine {
        id: id.to_owned(),
        tool: "trino_export".to_owned(),
        status: status.to_owned(),
        message: None,
        created_at: "2026-12-06T00:00:00Z".to_owned(),
        outcome: None,
    }
}

#[tokio::test]
async fn the_work_page_lists_only_the_persons_tasks_and_cancels_with_the_token() {
    let harness = Harness::new("https://docket.example");
    {
        let mut tasks = harness.desk.tasks.lock().expect("lock");
        tasks.push(("oidc:alice".to_owned(), task("task-of-alice", "working")));
        tasks.push(("oidc:bob".to_owned(), task("task-of-bob", "working")));
    }
    let alice = harness.log_in(person("alice")).await;
    let page = harness.get("/portal/work", &[&alice]).await;
    assert_eq!(page.status(), StatusCode::OK);
    let text = body(&page);
    assert!(text.contains("data-task-id=\"task-of-alice\""), "{text}");
    assert!(!text.contains("task-of-bob"), "{text}");
    assert!(text.contains("<script src=\"/portal/static/work.js\"></script>"));
    let token = csrf_of(&text);

    // Without the token nothing is cancelled.
    let refused = harness
        .post("/portal/work/cancel", &[&alice], "task_id=task-of-alice")
        .await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    // Another person's task is not found, even with alice's token.
    let foreign = harness
        .post(
            "/portal/work/cancel",
            &[&alice],
            &format!("csrf={token}&task_id=task-of-bob"),
        )
        .await;
    assert_eq!(foreign.status(), StatusCode::NOT_FOUND);
    let cancelled = harness
        .post(
            "/portal/work/cancel",
            &[&alice],
            &format!("csrf={token}&task_id=task-of-alice"),
        )
        .await;
    assert_eq!(cancelled.status(), StatusCode::SEE_OTHER);
    let tasks = harness.desk.tasks.lock().expect("lock").clone();
    assert_eq!(tasks[0].1.status, "cancelled");
    assert_eq!(tasks[1].1.status, "working");
}

#[tokio::test]
async fn the_script_is_served_as_javascript_and_pages_need_a_session() {
    let harness = Harness::new("https://docket.example");
    let script = harness.get("/portal/static/work.js", &[]).await;
    assert_eq!(script.status(), StatusCode::OK);
    assert!(header(&script, "content-type").starts_with("text/javascript"));
    assert!(body(&script).contains("/portal/work/events"));
    for path in [
        "/portal/work",
        "/portal/exports",
        "/portal/exports/a1",
        "/portal/scripts",
        "/portal/prompts",
        "/portal/admin",
    ] {
        let page = harness.get(path, &[]).await;
        assert_eq!(page.status(), StatusCode::SEE_OTHER, "{path}");
        assert!(header(&page, "location").starts_with("/portal/login?return_to="));
    }
}

#[tokio::test]
async fn the_viewer_pages_through_the_persons_export_and_refuses_anothers() {
    let harness = Harness::new("https://docket.example");
    let rows: Vec<Vec<String>> = (0..250).map(|n| vec![n.to_string()]).collect();
    harness.desk.exports.lock().expect("lock").extend([
        ("oidc:alice".to_owned(), "a1".to_owned(), rows.clone()),
        ("oidc:bob".to_owned(), "b1".to_owned(), rows),
    ]);
    let alice = harness.log_in(person("alice")).await;
    let first = body(&harness.get("/portal/exports/a1", &[&alice]).await);
    assert!(first.contains("Rows 1–100"), "{first}");
    assert!(
        first.contains("href=\"/portal/exports/a1?row=101\""),
        "{first}"
    );
    assert!(!first.contains("id=\"previous\""), "{first}");
    let last = body(&harness.get("/portal/exports/a1?row=201", &[&alice]).await);
    assert!(last.contains("Rows 201–250"), "{last}");
    assert!(last.contains("<td>249</td>"), "{last}");
    assert!(!last.contains("id=\"next\""), "{last}");
    assert!(
        last.contains("href=\"/portal/exports/a1?row=101\""),
        "{last}"
    );
    // Bob's export, an unknown one and a hostile id all read "not found".
    for id in ["b1", "nope", "%3Cscript%3E"] {
        let refused = harness
            .get(&format!("/portal/exports/{id}"), &[&alice])
            .await;
        assert_eq!(refused.status(), StatusCode::NOT_FOUND, "{id}");
    }
    let listed = body(&harness.get("/portal/exports?search=A1", &[&alice]).await);
    assert!(
        listed.contains("a1.csv") && !listed.contains("b1.csv"),
        "{listed}"
    );
    let none = body(&harness.get("/portal/exports?search=zzz", &[&alice]).await);
    assert!(none.contains("id=\"no-exports\""), "{none}");
}

#[tokio::test]
async fn a_share_is_made_by_a_checked_form_and_its_link_is_shown_once() {
    let harness = Harness::new("https://docket.example");
    harness.desk.exports.lock().expect("lock").push((
        "oidc:alice".to_owned(),
        "a1".to_owned(),
        vec![vec!["1".to_owned()]],
    ));
    let alice = harness.log_in(person("alice")).await;
    let page = body(&harness.get("/portal/exports/a1", &[&alice]).await);
    let token = csrf_of(&page);
    let made = harness
        .post(
            "/portal/exports/a1/share",
            &[&alice],
            &format!("csrf={token}&audience=public&expires_in_seconds=3600"),
        )
        .await;
    assert_eq!(made.status(), StatusCode::OK);
    assert!(
        body(&made).contains("id=\"share-url\" href=\"https://docket.example/shares/s1?sig=y\"")
    );
    let calls = harness.desk.calls.lock().expect("lock").clone();
    let create = calls
        .iter()
        .find(|(_, tool, arguments)| tool == "share_asset" && arguments["command"] == "create")
        .expect("a create");
    assert_eq!(create.0, "oidc:alice");
    assert_eq!(create.2["audience"], "public");
    assert_eq!(create.2["expires_in_seconds"], 3600);
}

#[tokio::test]
async fn administration_is_not_found_for_others_and_searches_for_administrators() {
    let harness = Harness::new("https://docket.example");
    let alice = harness.log_in(person("alice")).await;
    let refused = harness.get("/portal/admin", &[&alice]).await;
    assert_eq!(refused.status(), StatusCode::NOT_FOUND);
    assert!(!body(&harness.get("/portal/work", &[&alice]).await).contains("nav-admin"));

    let mut root = person("root");
    root.administrator = true;
    let root = harness.log_in(root).await;
    let page = harness
        .get("/portal/admin?person=oidc%3Abob&tool=%3Cb%3E", &[&root])
        .await;
    assert_eq!(page.status(), StatusCode::OK);
    let text = body(&page);
    assert!(text.contains("<td>oidc:bob</td>"), "{text}");
    assert!(
        text.contains("&lt;b&gt;") && !text.contains("<b>"),
        "{text}"
    );
    assert!(text.contains("r-1"), "{text}");
}
