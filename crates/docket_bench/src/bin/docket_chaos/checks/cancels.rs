//! Check 4: acknowledged cancels win.
//!
//! `tasks/cancel` answers an empty result whether or not the task was still running,
//! so what a cancel did is told by the row and by time:
//!
//! - a row whose `cancel_requested_at` is set was cancelled while it ran (the store
//!   writes it only then, in the statement the acknowledgement waits for), so it must
//!   end cancelled, whichever statement ended it (the work, a shutdown, a stale read or
//!   sweep, a run's takeover);
//! - otherwise an acknowledged cancel, sent at `s` and answered at `a`, is held against
//!   the instant the ending was written (the row's last update, a run's
//!   `finished_at`): `a` before it means the cancel was acknowledged while the task ran
//!   and yet not recorded — a violation; `s` after it means the task had already ended
//!   (nothing changes); in between, the ending and the cancel raced inside the request
//!   and either outcome is right.

use crate::facts::Facts;
use crate::verdict::Verdict;

/// Cancels closer than this to the ending are counted as raced: the database's
/// `now()` is its transaction's start, a few milliseconds before the commit.
const MARGIN: f64 = 0.05;

pub(crate) fn cancels_win(facts: &Facts<'_>) -> Verdict {
    let mut verdict = Verdict::new(4, "acknowledged cancels win");
    let (mut acknowledged, mut recorded, mut after, mut raced, mut unanswered) = (0, 0, 0, 0, 0);
    for task in &facts.journal.tasks {
        unanswered += task
            .cancels
            .iter()
            .filter(|cancel| !cancel.acknowledged())
            .count();
        let Some(status) = facts.db_status(task) else {
            continue;
        };
        let ended_at = facts
            .db_ended_at(task)
            .or_else(|| task.first_terminal().map(|read| read.answered));
        let ended = || ended_at.map_or("an unknown time".to_owned(), |at| format!("{at:.3} s"));
        let cancel = task.cancels.iter().find(|cancel| cancel.acknowledged());
        acknowledged += usize::from(cancel.is_some());
        if let Some(requested_at) = facts.db_cancel_requested_at(task) {
            recorded += 1;
            if status != "cancelled" {
                verdict.fail(
                    Some(&task.id),
                    format!(
                        "its row records a cancel at {requested_at:.3} s, but it ended {status} at {}",
                        ended()
                    ),
                );
            }
            continue;
        }
        let (Some(cancel), Some(ended_at)) = (cancel, ended_at) else {
            // No cancel acknowledged, or never ended (check 1 says so).
            continue;
        };
        if cancel.answered < ended_at - MARGIN {
            verdict.fail(
                Some(&task.id),
                format!(
                    "a cancel sent through {} was acknowledged at {:.3} s, before the ending was \
                     written at {ended_at:.3} s, yet its row records no cancel and it ended {status}",
                    facts.journal.processes[cancel.process].label(),
                    cancel.answered
                ),
            );
        } else if cancel.sent > ended_at + MARGIN {
            after += 1;
        } else {
            raced += 1;
        }
    }
    verdict.counts = format!(
        "{acknowledged} tasks with an acknowledged cancel; {recorded} rows record a cancel on \
         running work (each must end cancelled); {after} cancels came after the ending, \
         {raced} raced with it; {unanswered} cancels refused or unanswered"
    );
    verdict
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::database::{Snapshot, TaskRow};
    use crate::journal::{Answer, CancelCall, Clock, Journal, Process, TaskLog};

    /// A task cancelled (sent at 1.0, acknowledged at 1.2) whose row ended `status` at
    /// `ended` seconds with `requested` as its cancel stamp, on the soak's clock.
    fn violations(status: &str, ended: f64, requested: Option<f64>) -> usize {
        let clock = Clock::start();
        let unix = |at: f64| at - clock.at_unix(0.0);
        let mut journal = Journal::default();
        journal.processes.push(Process::serving_in(1));
        journal.add_task(TaskLog::sleep(
            Vec::new(),
            vec![CancelCall {
                sent: 1.0,
                answered: 1.2,
                process: 0,
                answer: Answer::Result(json!({})),
            }],
        ));
        let db = Snapshot {
            tasks: vec![TaskRow {
                id: "task_1".into(),
                tool: "diagnostics_sleep".into(),
                status: status.into(),
                replica_id: "r1-x".into(),
                arguments: Value::Null,
                result: None,
                error: None,
                created_at: unix(0.0),
                last_updated_at: unix(ended),
                cancel_requested_at: requested.map(unix),
            }],
            ..Snapshot::default()
        };
        let facts = Facts::new(&journal, &db, clock, "assets".into(), 100.0);
        cancels_win(&facts).violations.len()
    }

    #[test]
    fn a_recorded_cancel_must_end_the_task_cancelled() {
        assert_eq!(violations("cancelled", 1.1, Some(1.05)), 0);
        assert_eq!(violations("completed", 1.5, Some(1.05)), 1);
    }

    #[test]
    fn an_unrecorded_cancel_is_judged_by_when_the_ending_was_written() {
        // Ended before the cancel was sent: it found the task ended.
        assert_eq!(violations("completed", 0.5, None), 0);
        // Ended while the cancel was in flight: raced.
        assert_eq!(violations("completed", 1.1, None), 0);
        // Ended after the acknowledgement, and the cancel was never recorded.
        assert_eq!(violations("completed", 2.0, None), 1);
    }
}
