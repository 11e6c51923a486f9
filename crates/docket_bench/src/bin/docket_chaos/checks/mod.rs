//! The contract, check by check (docs/design.md, Testing): each check reads the
//! journal and the database snapshot ([`Facts`]) and returns its [`Verdict`].

mod assets;
mod audit;
mod cancels;
mod endings;
mod health;
mod http;
mod outages;

use crate::facts::Facts;
use crate::verdict::Verdict;

/// Every check, in the contract's order, the replicas' health last.
pub(crate) fn run_all(facts: &Facts<'_>) -> Vec<Verdict> {
    vec![
        endings::ended_alike(facts),
        endings::terminal_is_final(facts),
        endings::outcome_shapes(facts),
        cancels::cancels_win(facts),
        audit::audited_once(facts),
        assets::assets_kept(facts),
        outages::killed_tasks_fail(facts),
        http::no_server_errors(facts),
        outages::short_outages_lose_nothing(facts),
        health::replicas_behave(facts),
    ]
}

/// The HTTP statuses and refusals seen, one per line.
pub(crate) fn http_breakdown(facts: &Facts<'_>) -> Vec<String> {
    http::breakdown(facts)
}
