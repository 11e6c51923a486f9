//! Check 5: exactly one audit row per ending and per call, read from `audit_logs`.
//!
//! Every request of the load is told apart by its arguments, which the audit row keeps:
//! a sleep's (unique) length, an export's (unique) name, a run's id (its ending row,
//! and each of its tool calls, carry it). So:
//!
//! - an acknowledged task of the task table has exactly one row, written with its
//!   ending in one statement, whose outcome is its ending's;
//! - an ended run has one ending row with its outcome, and its calls' rows number at
//!   least its calls (the attempt that finished made them all) when it succeeded, and
//!   never more than its calls times its attempts;
//! - a direct call that was answered has exactly one row;
//! - any other request (refused, or unanswered) has at most one.
//!
//! Rows written in the background after the answer (direct calls, runs' endings and
//! calls) may rightly be missing when the replica writing them was killed with
//! `kill -9` within their patience (`tasks.stale_after`, for runs the lease), or shut
//! down while the database was cut: those are counted as excused, never as present.
//! Nothing excuses a second row.

use std::collections::HashMap;

use crate::facts::{Facts, is_tool_error};
use crate::journal::Answer;
use crate::load::{SCRIPT_NAME, micros_of};
use crate::plan::Work;
use crate::timing;
use crate::verdict::Verdict;

/// What an audit row is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// A `diagnostics_sleep` call (task or direct) by its length in microseconds.
    Sleep(i64),
    /// An export by tool and name.
    Export(&'static str, String),
    /// A run's ending row.
    RunEnding(String),
    /// A call a run made.
    RunCall(String),
    /// The set-up call that saved the script.
    Setup,
    /// Anything else (a refused `run_script`, a call of no request of the soak).
    Other,
}

fn key_of(row: &crate::database::AuditRow) -> Key {
    let arguments = &row.arguments;
    if let Some(run_id) = arguments["run_id"].as_str() {
        return if row.tool == "run_script" && arguments.get("arguments").is_none() {
            Key::RunEnding(run_id.to_owned())
        } else {
            Key::RunCall(run_id.to_owned())
        };
    }
    match row.tool.as_str() {
        "diagnostics_sleep" => arguments["seconds"]
            .as_f64()
            .map_or(Key::Other, |seconds| Key::Sleep(micros_of(seconds))),
        "trino_export" | "api_export" => arguments["name"].as_str().map_or(Key::Other, |name| {
            let tool = if row.tool == "trino_export" {
                "trino_export"
            } else {
                "api_export"
            };
            Key::Export(tool, name.to_owned())
        }),
        "manage_script" if arguments["name"] == SCRIPT_NAME => Key::Setup,
        _ => Key::Other,
    }
}

fn key_of_work(work: &Work) -> Key {
    match work {
        Work::Sleep { micros } | Work::Direct { micros } => Key::Sleep(*micros),
        Work::TrinoExport { name } => Key::Export("trino_export", name.clone()),
        Work::ApiExport { name, .. } => Key::Export("api_export", name.clone()),
        Work::Run { .. } => Key::Other,
    }
}

pub(crate) fn audited_once(facts: &Facts<'_>) -> Verdict {
    let mut verdict = Verdict::new(5, "exactly one audit row per ending and per call");
    let mut rows: HashMap<Key, Vec<&crate::database::AuditRow>> = HashMap::new();
    for row in &facts.db.audit {
        rows.entry(key_of(row)).or_default().push(row);
    }
    let count = |key: &Key| rows.get(key).map_or(0, Vec::len);
    let (mut endings, mut run_endings, mut run_calls, mut direct, mut excused) = (0, 0, 0, 0, 0);
    let stale_after = timing::secs(timing::STALE_AFTER);
    let lease = timing::secs(timing::LEASE);

    for task in &facts.journal.tasks {
        let id = Some(task.id.as_str());
        if task.work.is_call_task() {
            let key = key_of_work(&task.work);
            let found = rows.get(&key).map(Vec::as_slice).unwrap_or_default();
            endings += found.len();
            let Some(row) = facts.task_row(&task.id) else {
                continue;
            };
            if row.status == "working" || row.status == "input_required" {
                continue; // Never ended: check 1 says so.
            }
            if found.len() != 1 {
                verdict.fail(
                    id,
                    format!("ended {} with {} audit rows", row.status, found.len()),
                );
                continue;
            }
            let expected = match row.status.as_str() {
                "completed" if row.result.as_ref().is_some_and(is_tool_error) => "tool_error",
                other => other,
            };
            if found[0].outcome != expected {
                verdict.fail(
                    id,
                    format!(
                        "ended {expected} but its audit row says {}",
                        found[0].outcome
                    ),
                );
            }
            continue;
        }
        let Work::Run { calls, .. } = task.work else {
            continue;
        };
        let Some(run) = facts.run_row(&task.id) else {
            continue;
        };
        let Some(finished) = facts.db_ended_at(task) else {
            continue;
        };
        let ending = count(&Key::RunEnding(task.id.clone()));
        let made = count(&Key::RunCall(task.id.clone()));
        run_endings += ending;
        run_calls += made;
        let background_excused =
            facts.background_write_excused(None, finished - lease, 2.0 * lease);
        match ending {
            1 => {
                let expected = match (run.status.as_str(), run.error_kind.as_deref()) {
                    ("succeeded", _) => "completed",
                    ("cancelled", _) => "cancelled",
                    (_, Some("platform")) => "failed",
                    _ => "tool_error",
                };
                let outcome = &rows[&Key::RunEnding(task.id.clone())][0].outcome;
                if outcome != expected {
                    verdict.fail(
                        id,
                        format!(
                            "the run ended {} but its audit row says {outcome}",
                            run.status
                        ),
                    );
                }
            }
            0 if background_excused => excused += 1,
            other => verdict.fail(
                id,
                format!("the run ended {} with {other} ending rows", run.status),
            ),
        }
        let attempts = u32::try_from(run.attempt.max(1)).unwrap_or(1);
        let most = usize::try_from(calls * attempts).unwrap_or(usize::MAX);
        let least = if run.status == "succeeded" {
            usize::try_from(calls).unwrap_or(0)
        } else {
            0
        };
        if made > most {
            verdict.fail(
                id,
                format!(
                    "{made} audit rows of its calls, more than {calls} calls × {attempts} attempts"
                ),
            );
        } else if made < least {
            if background_excused {
                excused += 1;
            } else {
                verdict.fail(
                    id,
                    format!(
                        "succeeded after {calls} calls but only {made} of them have an audit row"
                    ),
                );
            }
        }
    }

    for call in &facts.journal.calls {
        let key = key_of_work(&call.work);
        if key == Key::Other {
            continue;
        }
        let found = count(&key);
        let answered =
            matches!(call.work, Work::Direct { .. }) && matches!(call.answer, Answer::Result(_));
        if answered {
            direct += found;
            if found == 1 {
                continue;
            }
            if found == 0
                && facts.background_write_excused(call.process, call.answered, stale_after)
            {
                excused += 1;
                continue;
            }
            verdict.fail(
                None,
                format!(
                    "the direct call of op {} ({:?}, answered by {} at {:.2} s) has {found} \
                     audit rows{}",
                    call.op,
                    call.work,
                    call.process
                        .map_or_else(|| "?".to_owned(), |p| facts.journal.processes[p].label()),
                    call.answered,
                    facts.cut_note(call.answered)
                ),
            );
        } else if found > 1 {
            verdict.fail(
                None,
                format!(
                    "the refused or unanswered call of op {} has {found} audit rows",
                    call.op
                ),
            );
        }
    }

    let setup = count(&Key::Setup);
    if setup != 1 {
        verdict.fail(
            None,
            format!("saving the script left {setup} audit rows, not 1"),
        );
    }
    verdict.counts = format!(
        "{} rows: {endings} task endings, {run_endings} run endings, {run_calls} calls of runs, \
         {direct} direct calls, {} others; {excused} missing rows excused (their writer was \
         killed, or stopped while the database was cut)",
        facts.db.audit.len(),
        count(&Key::Other)
    );
    verdict
}
