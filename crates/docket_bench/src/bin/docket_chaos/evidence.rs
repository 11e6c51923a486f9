//! The evidence a soak leaves in its folder (`target/chaos/<seed>/`): the summary, the
//! timeline of faults and restarts, the processes, cuts and HTTP counts, every
//! violation, and for each task a violation names its whole record (creation, every
//! read and cancel with their times), its rows in the database and the replicas' log
//! lines that mention it. The replicas' logs are in `logs/`; a soak that passed keeps
//! only the summary, the timeline and the counts.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::Context as _;
use serde_json::{Value, json};

use crate::facts::Facts;
use crate::verdict::Verdict;

fn write_json(path: &Path, value: &Value) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes the evidence of a soak into `dir`.
pub(crate) fn write(
    dir: &Path,
    facts: &Facts<'_>,
    verdicts: &[Verdict],
    summary: &str,
) -> anyhow::Result<()> {
    let journal = facts.journal;
    std::fs::write(dir.join("summary.txt"), summary)?;
    let timeline: String = journal
        .timeline
        .iter()
        .map(|event| format!("{:8.2}s  {}\n", event.at, event.what))
        .collect();
    std::fs::write(dir.join("timeline.txt"), timeline)?;
    write_json(
        &dir.join("processes.json"),
        &Value::Array(journal.processes.iter().map(|p| p.to_json()).collect()),
    )?;
    write_json(
        &dir.join("cuts.json"),
        &Value::Array(
            journal
                .cuts
                .iter()
                .map(|cut| json!({"start": cut.start, "end": cut.end, "length": cut.length()}))
                .collect(),
        ),
    )?;
    let http = &journal.http;
    write_json(
        &dir.join("http.json"),
        &json!({
            "statuses": http.statuses.iter().map(|((method, status), count)| json!({"method": method, "status": status, "count": count})).collect::<Vec<_>>(),
            "refusals": http.errors.iter().map(|((method, message), count)| json!({"method": method, "message": message, "count": count})).collect::<Vec<_>>(),
            "unanswered": http.lost,
            "server_errors": http.server_errors.iter().chain(&http.internal_errors).map(|error| json!({
                "at": error.at, "replica": journal.processes[error.process].label(),
                "method": error.method, "status": error.status, "body": error.body,
            })).collect::<Vec<_>>(),
        }),
    )?;
    let passed = verdicts.iter().all(Verdict::passed);
    if passed {
        // Nothing to follow up: the logs are only taking space.
        let _ = std::fs::remove_dir_all(dir.join("logs"));
        return Ok(());
    }
    write_json(
        &dir.join("calls.json"),
        &Value::Array(journal.calls.iter().map(|call| call.to_json()).collect()),
    )?;
    let mut violations = Vec::new();
    let mut named = BTreeSet::new();
    for verdict in verdicts {
        for violation in &verdict.violations {
            violations.push(json!({
                "check": verdict.number, "title": verdict.title,
                "task": violation.task, "detail": violation.detail,
            }));
            if let Some(task) = &violation.task {
                named.insert(task.clone());
            }
        }
    }
    write_json(&dir.join("violations.json"), &Value::Array(violations))?;
    let tasks_dir = dir.join("tasks");
    std::fs::create_dir_all(&tasks_dir)?;
    let logs = read_logs(facts);
    for id in &named {
        write_json(
            &tasks_dir.join(format!("{id}.json")),
            &task_evidence(facts, id),
        )?;
        let lines: String = logs
            .iter()
            .flat_map(|(name, text)| {
                text.lines()
                    .filter(|line| line.contains(id.as_str()))
                    .map(move |line| format!("{name}: {line}\n"))
            })
            .collect();
        std::fs::write(tasks_dir.join(format!("{id}.log")), lines)?;
    }
    Ok(())
}

/// Every replica's log, by file name.
fn read_logs(facts: &Facts<'_>) -> Vec<(String, String)> {
    facts
        .journal
        .processes
        .iter()
        .filter_map(|process| {
            let name = process.log.file_name()?.to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&process.log).ok()?;
            Some((name, text))
        })
        .collect()
}

/// A task's whole record: what the soak saw and what the database holds.
fn task_evidence(facts: &Facts<'_>, id: &str) -> Value {
    let journal = facts.journal;
    let seen = journal
        .by_id
        .get(id)
        .and_then(|index| journal.tasks.get(*index));
    // An audit row names a task through its arguments: its sleep length, export name
    // or run id.
    let marker = seen.map(|task| match &task.work {
        crate::plan::Work::Sleep { micros } | crate::plan::Work::Direct { micros } => {
            crate::load::seconds_of(*micros).to_string()
        }
        crate::plan::Work::TrinoExport { name } | crate::plan::Work::ApiExport { name, .. } => {
            format!("\"{name}\"")
        }
        crate::plan::Work::Run { .. } => id.to_owned(),
    });
    let audit: Vec<Value> = facts
        .db
        .audit
        .iter()
        .filter(|row| {
            let text = row.arguments.to_string();
            text.contains(id) || marker.as_ref().is_some_and(|marker| text.contains(marker))
        })
        .map(|row| row.to_json())
        .collect();
    json!({
        "seen": seen.map(|task| task.to_json(&journal.processes)),
        "task_row": facts.task_row(id).map(|row| row.to_json()),
        "run_row": facts.run_row(id).map(|row| row.to_json()),
        "audit_rows": audit,
        "asset_rows": facts.db.assets.iter().filter(|row| row.task_id.as_deref() == Some(id)).map(|row| row.to_json()).collect::<Vec<_>>(),
        "cuts": journal.cuts.iter().map(|cut| json!({"start": cut.start, "end": cut.end})).collect::<Vec<_>>(),
    })
}
