//! The replicas' own health, beside the nine checks: every process started, exited only
//! when told to, and a SIGTERM ended it cleanly within its bound (grace period plus
//! ending grace plus the draining mark, with slack). A crash or a stop that has to be
//! killed is a finding too.

use crate::facts::Facts;
use crate::journal::{Reason, Signal};
use crate::verdict::Verdict;

pub(crate) fn replicas_behave(facts: &Facts<'_>) -> Verdict {
    let mut verdict = Verdict::new(0, "replicas exit only when told to, and stop cleanly");
    let (mut kills, mut stops) = (0, 0);
    for process in &facts.journal.processes {
        let label = process.label();
        if process.serving.is_none() {
            verdict.fail(
                None,
                format!(
                    "{label} never said it serves (see {})",
                    process.log.display()
                ),
            );
        }
        if process.signals.is_empty() {
            if let Some(exited) = process.exited {
                verdict.fail(
                    None,
                    format!(
                        "{label} exited at {exited:.2} s ({}) without being told to",
                        process.exit_status.as_deref().unwrap_or("?")
                    ),
                );
            }
            continue;
        }
        if process.killed().is_some() {
            kills += 1;
        }
        if process
            .signals
            .iter()
            .any(|(_, reason, _)| *reason == Reason::Overrun)
        {
            verdict.fail(
                None,
                format!("{label} did not finish its shutdown within its bound and was killed"),
            );
            continue;
        }
        if process.signalled(Signal::Term).is_some() && process.killed().is_none() {
            stops += 1;
            let clean = process
                .exit_status
                .as_deref()
                .is_some_and(|status| status.contains("exit status: 0"));
            if !clean {
                verdict.fail(
                    None,
                    format!(
                        "{label} stopped on SIGTERM with {}",
                        process.exit_status.as_deref().unwrap_or("no exit status")
                    ),
                );
            }
        }
    }
    verdict.counts = format!(
        "{} processes, {kills} killed, {stops} stopped by SIGTERM",
        facts.journal.processes.len()
    );
    verdict
}
