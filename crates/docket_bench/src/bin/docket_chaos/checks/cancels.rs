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
