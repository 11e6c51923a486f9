//! Checks 7 and 9: what outages may and may not cost.
//!
//! 7. A replica killed with `kill -9` stops beating, so its running tasks must read
//!    terminal (failed, unless they had ended) within `tasks.stale_after` plus a beat of
//!    the kill, with [`timing::STALE_READ_SLACK`] for the reader's polling on a busy
//!    machine, and longer by any database cut in that window plus the time to reconnect
//!    (nothing can be read while the database is away). Measured from the kill to the
//!    first terminal answer on any replica. Runs are left out: a dead replica's run is
//!    taken over when its lease expires, not failed.
//! 9. No outcome is lost to an outage shorter than `stale_after`: a sleep or an
//!    `api_export` whose work finished while the database was cut for at most
//!    [`timing::short_cut_max`] must end completed (an export without a tool error).
//!    A sleep's work ends `seconds` after it started, between the creation being sent
//!    and answered; an `api_export`'s when the upstream sent its last chunk. Only work
//!    that finished well inside the cut counts, and a task is left out when a cancel
//!    was sent for it, its replica was killed before the cut ended (plus time to
//!    reconnect), or its replica was stopped so long before the work finished that the
//!    grace period ended first.

use crate::facts::{Facts, is_tool_error};
use crate::journal::TaskLog;
use crate::load::seconds_of;
use crate::plan::Work;
use crate::timing::{self, secs};
use crate::verdict::Verdict;

/// Check 7.
pub(crate) fn killed_tasks_fail(facts: &Facts<'_>) -> Verdict {
    let mut verdict = Verdict::new(
        7,
        "a killed replica's tasks read failed within stale_after plus a beat",
    );
    let base = secs(timing::STALE_AFTER) + secs(timing::HEARTBEAT) + secs(timing::STALE_READ_SLACK);
    let (mut kills, mut orphans, mut slowest) = (0, 0, 0.0_f64);
    for (index, process) in facts.journal.processes.iter().enumerate() {
        let Some(killed) = process.killed() else {
            continue;
        };
        kills += 1;
        let extension: f64 = facts
            .journal
            .cuts
            .iter()
            .filter(|cut| cut.overlaps(killed, killed + base))
            .map(|cut| cut.length() + secs(timing::RECONNECT))
            .sum();
        let bound = base + extension;
        for task in facts.journal.tasks.iter().filter(|task| {
            task.process == index
                && task.work.is_call_task()
                && !task
                    .reads
                    .iter()
                    .any(|read| read.is_terminal() && read.answered <= killed)
        }) {
            orphans += 1;
            let Some(first) = task.first_terminal() else {
                verdict.fail(
                    Some(&task.id),
                    format!(
                        "{} was killed at {killed:.2} s and the task never read terminal",
                        process.label()
                    ),
                );
                continue;
            };
            let latency = first.answered - killed;
            slowest = slowest.max(latency);
            if latency > bound {
                verdict.fail(
                    Some(&task.id),
                    format!(
                        "{} was killed at {killed:.2} s; the task first read {} {latency:.2} s later \
                         (bound {bound:.1} s)",
                        process.label(),
                        first.status()
                    ),
                );
            }
        }
    }
    verdict.counts = format!(
        "{kills} kills, {orphans} tasks running on them, slowest first terminal read {slowest:.2} s \
         after the kill (bound {base:.1} s, longer across cuts)"
    );
    verdict
}

/// When a task's work finished, as a window: `None` when not known.
fn work_end(facts: &Facts<'_>, task: &TaskLog) -> Option<(f64, f64)> {
    match &task.work {
        Work::Sleep { micros } => {
            let seconds = seconds_of(*micros);
            Some((task.sent + seconds, task.acknowledged + seconds))
        }
        Work::ApiExport { name, .. } => {
            let ends = facts.journal.body_ends.get(name)?;
            let last = ends.iter().copied().fold(f64::MIN, f64::max);
            Some((last, last))
        }
        _ => None,
    }
}

/// Check 9.
pub(crate) fn short_outages_lose_nothing(facts: &Facts<'_>) -> Verdict {
    let mut verdict = Verdict::new(9, "no outcome lost to an outage shorter than stale_after");
    let short = secs(timing::short_cut_max());
    let grace = secs(timing::GRACE_PERIOD);
    let reconnect = secs(timing::RECONNECT);
    let short_cuts = facts
        .journal
        .cuts
        .iter()
        .filter(|cut| cut.length() <= short)
        .count();
    let (mut inside, mut left_out) = (0, 0);
    for task in &facts.journal.tasks {
        let Some((from, to)) = work_end(facts, task) else {
            continue;
        };
        let Some(cut) =
            facts.journal.cuts.iter().find(|cut| {
                cut.length() <= short && cut.start + 0.2 <= from && to + 0.3 <= cut.end
            })
        else {
            continue;
        };
        let process = &facts.journal.processes[task.process];
        let stopped_first = process
            .terminated()
            .is_some_and(|terminated| to > terminated + grace - 0.2);
        if !task.cancels.is_empty()
            || facts.killed_before(task.process, cut.end + reconnect + 2.0)
            || stopped_first
        {
            left_out += 1;
            continue;
        }
        inside += 1;
        let status = facts.db_status(task).unwrap_or_default();
        let row = facts.task_row(&task.id);
        let tool_error = row
            .and_then(|row| row.result.as_ref())
            .is_some_and(is_tool_error);
        if status != "completed" || tool_error {
            let said = row
                .and_then(|row| {
                    row.error
                        .as_ref()
                        .map(|error| error["message"].to_string())
                        .or_else(|| {
                            row.result
                                .as_ref()
                                .map(|result| result["content"].to_string())
                        })
                })
                .unwrap_or_default();
            verdict.fail(
                Some(&task.id),
                format!(
                    "its work finished at {from:.2}–{to:.2} s, inside a {:.1} s cut ({:.2}–{:.2} s), \
                     but it ended {status}{}: {said}",
                    cut.length(),
                    cut.start,
                    cut.end,
                    if tool_error { " with a tool error" } else { "" }
                ),
            );
        }
    }
    verdict.counts = format!(
        "{short_cuts} cuts of at most {short:.0} s; {inside} tasks finished their work inside one \
         ({left_out} more left out: cancelled, or their replica killed or stopped first)"
    );
    verdict
}
