//! Checks 1–3: every acknowledged task ends once and reads the same on every replica
//! at the end (and as its row says); no read after a terminal one differs from it; and
//! each terminal status carries the outcome its shape promises.

use std::collections::BTreeMap;

use crate::facts::Facts;
use crate::journal::TaskLog;
use crate::verdict::Verdict;

/// Check 1.
pub(crate) fn ended_alike(facts: &Facts<'_>) -> Verdict {
    let mut verdict = Verdict::new(
        1,
        "every acknowledged task ends once and reads the same on every replica",
    );
    let slots = facts
        .journal
        .processes
        .iter()
        .map(|process| process.slot)
        .max()
        .map_or(0, |max| max + 1);
    let mut by_kind: BTreeMap<&str, usize> = BTreeMap::new();
    for task in &facts.journal.tasks {
        *by_kind.entry(task.work.kind()).or_default() += 1;
        check_task(facts, task, slots, &mut verdict);
    }
    let kinds: Vec<String> = by_kind
        .iter()
        .map(|(kind, count)| format!("{count} {kind}"))
        .collect();
    verdict.counts = format!(
        "{} tasks ({}), read at the end on {slots} replicas",
        facts.journal.tasks.len(),
        kinds.join(", ")
    );
    verdict
}

fn check_task(facts: &Facts<'_>, task: &TaskLog, slots: usize, verdict: &mut Verdict) {
    let id = Some(task.id.as_str());
    let finals: Vec<_> = task
        .reads
        .iter()
        .filter(|read| read.sent >= facts.final_reads_from)
        .collect();
    let read_slots: std::collections::BTreeSet<usize> = finals
        .iter()
        .map(|read| facts.journal.processes[read.process].slot)
        .collect();
    if read_slots.len() < slots {
        verdict.fail(
            id,
            format!(
                "read at the end on {} of {slots} replicas only",
                read_slots.len()
            ),
        );
    }
    let Some(first) = finals.first() else {
        return;
    };
    if let Some(open) = finals.iter().find(|read| !read.is_terminal()) {
        verdict.fail(
            id,
            format!(
                "never ended: reads {} at the end on {}",
                open.status(),
                facts.journal.processes[open.process].label()
            ),
        );
        return;
    }
    if let Some(other) = finals.iter().find(|read| read.outcome() != first.outcome()) {
        verdict.fail(
            id,
            format!(
                "replicas disagree at the end: {} on {} but {} on {}",
                first.outcome(),
                facts.journal.processes[first.process].label(),
                other.outcome(),
                facts.journal.processes[other.process].label()
            ),
        );
        return;
    }
    match facts.db_status(task) {
        None => verdict.fail(id, "no row in the database"),
        Some(status) if status != first.status() => verdict.fail(
            id,
            format!(
                "reads {} everywhere but its row says {status}",
                first.status()
            ),
        ),
        Some(_) => {
            if let Some(row) = facts.task_row(&task.id) {
                let read = &first.task;
                if row.result.as_ref() != read.get("result")
                    || row.error.as_ref() != read.get("error")
                {
                    verdict.fail(
                        id,
                        format!(
                            "reads {} everywhere but its row holds result {:?} and error {:?}",
                            first.outcome(),
                            row.result,
                            row.error
                        ),
                    );
                }
            }
        }
    }
}

/// Check 2: once a reader was answered terminal, every read sent after that answer
/// (on any replica) says the same status and outcome.
pub(crate) fn terminal_is_final(facts: &Facts<'_>) -> Verdict {
    let mut verdict = Verdict::new(2, "no status changes after a terminal read");
    let mut reads = 0;
    let mut after_terminal = 0;
    for task in &facts.journal.tasks {
        reads += task.reads.len();
        let Some(first) = task.first_terminal() else {
            continue;
        };
        let mut terminals: Vec<_> = task
            .reads
            .iter()
            .filter(|read| read.is_terminal())
            .collect();
        terminals.sort_by(|a, b| a.answered.total_cmp(&b.answered));
        let later: Vec<_> = task
            .reads
            .iter()
            .filter(|read| read.sent > first.answered)
            .collect();
        after_terminal += later.len();
        // Each later read is held against every terminal read answered before it was sent.
        let broken = later.iter().find_map(|read| {
            terminals
                .iter()
                .filter(|terminal| terminal.answered < read.sent)
                .find(|terminal| terminal.outcome() != read.outcome())
                .map(|terminal| (*terminal, *read))
        });
        if let Some((terminal, read)) = broken {
            verdict.fail(
                Some(&task.id),
                format!(
                    "read {} on {} (answered at {:.2} s), then {} on {} (sent at {:.2} s)",
                    terminal.outcome(),
                    facts.journal.processes[terminal.process].label(),
                    terminal.answered,
                    read.outcome(),
                    facts.journal.processes[read.process].label(),
                    read.sent
                ),
            );
        }
    }
    verdict.counts = format!("{reads} reads, {after_terminal} of them sent after a terminal read");
    verdict
}

/// Check 3: completed carries a result (and no error), failed an error with a message
/// (and no result), cancelled neither.
pub(crate) fn outcome_shapes(facts: &Facts<'_>) -> Verdict {
    let mut verdict = Verdict::new(3, "outcome shapes");
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for task in &facts.journal.tasks {
        let mut seen_bad = false;
        for read in task.reads.iter().filter(|read| read.is_terminal()) {
            let result = read.task.get("result").filter(|value| !value.is_null());
            let error = read.task.get("error").filter(|value| !value.is_null());
            let good = match read.status() {
                "completed" => result.is_some_and(|result| result.is_object()) && error.is_none(),
                "failed" => {
                    result.is_none()
                        && error.is_some_and(|error| {
                            error["message"]
                                .as_str()
                                .is_some_and(|text| !text.is_empty())
                        })
                }
                _ => result.is_none() && error.is_none(),
            };
            if !good && !seen_bad {
                seen_bad = true;
                verdict.fail(
                    Some(&task.id),
                    format!(
                        "reads {} on {} with result {:?} and error {:?}",
                        read.status(),
                        facts.journal.processes[read.process].label(),
                        result,
                        error
                    ),
                );
            }
        }
        if let Some(last) = task.reads.iter().rev().find(|read| read.is_terminal()) {
            *counts.entry(last.status().to_owned()).or_default() += 1;
        }
    }
    verdict.counts = counts
        .iter()
        .map(|(status, count)| format!("{count} {status}"))
        .collect::<Vec<_>>()
        .join(", ");
    verdict
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::database::Snapshot;
    use crate::journal::{Clock, Journal, Process, Read};

    fn read(sent: f64, answered: f64, status: &str) -> Read {
        let mut task = json!({"taskId": "task_1", "status": status});
        if status == "completed" {
            task["result"] = json!({"content": []});
        }
        Read {
            sent,
            answered,
            process: 0,
            task,
        }
    }

    fn journal(reads: Vec<Read>) -> Journal {
        let mut journal = Journal::default();
        journal.processes.push(Process::serving_in(0));
        journal.add_task(TaskLog::sleep(reads, Vec::new()));
        journal
    }

    fn terminal_violations(reads: Vec<Read>) -> usize {
        let journal = journal(reads);
        let db = Snapshot::default();
        let facts = Facts::new(&journal, &db, Clock::start(), "assets".into(), 100.0);
        terminal_is_final(&facts).violations.len()
    }

    #[test]
    fn a_read_sent_after_a_terminal_answer_must_agree_with_it() {
        // Sent before the terminal answer came: it may still have seen the task working.
        assert_eq!(
            terminal_violations(vec![read(1.0, 1.2, "completed"), read(1.1, 1.3, "working")]),
            0
        );
        // Sent after it: a change.
        assert_eq!(
            terminal_violations(vec![read(1.0, 1.2, "completed"), read(1.3, 1.4, "working")]),
            1
        );
        assert_eq!(
            terminal_violations(vec![read(1.0, 1.2, "failed"), read(2.0, 2.1, "completed")]),
            1
        );
    }

    #[test]
    fn each_terminal_status_has_its_shape() {
        let mut failed_without_error = read(1.0, 1.1, "failed");
        failed_without_error.task["result"] = json!({"content": []});
        let journal = journal(vec![read(1.0, 1.1, "completed"), failed_without_error]);
        let db = Snapshot::default();
        let facts = Facts::new(&journal, &db, Clock::start(), "assets".into(), 100.0);
        assert_eq!(outcome_shapes(&facts).violations.len(), 1);
    }
}
