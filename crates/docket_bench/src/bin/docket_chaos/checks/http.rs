//! Check 8: no HTTP 5xx except documented refusals, every refusal counted.
//!
//! The documented 5xx answers on the MCP endpoint are a 503 with `Retry-After` for a
//! connection over `server.max_connections`, and a 503 while draining. Anything else
//! with a 5xx status is a violation, and so is a JSON-RPC "internal error; see the
//! server log" (a 500 in all but its status). Refusals the server explains (the store
//! is unavailable, the replica is shutting down) are JSON-RPC errors with a 200 and
//! are counted by message; requests that got no answer (a killed replica, a closed
//! listener) are counted by method.

use crate::facts::Facts;
use crate::verdict::Verdict;

pub(crate) fn no_server_errors(facts: &Facts<'_>) -> Verdict {
    let mut verdict = Verdict::new(8, "no HTTP 5xx except documented refusals");
    let http = &facts.journal.http;
    let mut documented = 0;
    for error in &http.server_errors {
        let is_documented =
            error.status == 503 && (error.retry_after || error.body.contains("draining"));
        if is_documented {
            documented += 1;
            continue;
        }
        verdict.fail(
            None,
            format!(
                "{} answered {} with HTTP {} at {:.2} s: {}",
                facts.journal.processes[error.process].label(),
                error.method,
                error.status,
                error.at,
                error.body
            ),
        );
    }
    for error in &http.internal_errors {
        verdict.fail(
            None,
            format!(
                "{} answered {} with an internal error at {:.2} s: {}",
                facts.journal.processes[error.process].label(),
                error.method,
                error.at,
                error.body
            ),
        );
    }
    let answers: u64 = http.statuses.values().sum();
    let refusals: u64 = http.errors.values().sum();
    let lost: u64 = http.lost.values().sum();
    verdict.counts = format!(
        "{answers} HTTP answers, {} with 5xx ({documented} documented); {refusals} JSON-RPC \
         refusals; {lost} requests unanswered",
        http.server_errors.len()
    );
    verdict
}

/// The refusals and statuses, one per line, for the report.
pub(crate) fn breakdown(facts: &Facts<'_>) -> Vec<String> {
    let http = &facts.journal.http;
    let mut lines = Vec::new();
    for ((method, status), count) in &http.statuses {
        lines.push(format!("    HTTP {status} for {method}: {count}"));
    }
    for ((method, message), count) in &http.errors {
        lines.push(format!("    refused {method} ×{count}: {message}"));
    }
    for (method, count) in &http.lost {
        lines.push(format!("    unanswered {method}: {count}"));
    }
    lines
}
