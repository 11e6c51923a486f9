//! What the script tools share: the store, the run bridge and the limits, and
//! the rules for which script or run a caller may address.
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use docket_catalog::scripts::{NewRun, Run, Script, ScriptStatus, ScriptStore};
use docket_run_bridge::RunBridge;
use docket_script::{Isolation, Limits};
use serde_json::Value;

use crate::auth::{Identity, IdentityKind};
use crate::refusal::Refusal;
use crate::registry::{ToolCall, ToolOutcome};
use crate::state::AppState;

use super::answers::{REENTRANT, inside_run, not_found, refusal, unavailable};
use super::params::bind_params;

/// The tool names.
pub(super) const MANAGE_SCRIPT: &str = "manage_script";
/// Runs a saved script.
pub(super) const RUN_SCRIPT: &str = docket_run_bridge::RUN_SCRIPT_TOOL;
pub(super) const GET_RUN: &str = "get_run";
pub(super) const LIST_RUNS: &str = "list_runs";
pub(super) const CANCEL_RUN: &str = "cancel_run";

/// The longest `run_script` waits, whatever `wait_seconds` asks.
pub(super) const MAX_WAIT: Duration = Duration::from_secs(300);

/// The most scripts or runs one list answers.
pub(super) const MAX_LIST: u32 = 50;

/// What the script tools share.
pub(crate) struct ScriptTools {
    pub(crate) store: Arc<dyn ScriptStore>,
    pub(crate) bridge: Arc<RunBridge>,
    /// The app, for drafts' hosts; set once the app is built.
    pub(crate) app: Arc<OnceLock<Weak<AppState>>>,
    pub(crate) default_wait: Duration,
    pub(crate) run_limits: Limits,
    /// Where runs and drafts are evaluated.
    pub(crate) isolation: Isolation,
    /// How long a run is kept after it finished.
    pub(crate) run_retention: Duration,
    /// How often clients should poll a run's task.
    pub(crate) poll_interval_ms: u64,
    /// Drafts running on this replica at once (they run in the request, as
    /// their caller, outside the queue).
    pub(crate) draft_slots: tokio::sync::Semaphore,
    /// Scripts one identity may own (`scripts.max_per_owner`).
    pub(crate) max_per_owner: u32,
    /// Schedules one identity's scripts may have (`scripts.max_schedules_per_owner`).
    pub(crate) max_schedules_per_owner: u32,
}

/// How many drafts one replica runs at once.
pub(crate) const DRAFT_SLOTS: usize = 4;

/// How long a draft waits for a slot before it is refused.
pub(super) const DRAFT_SLOT_WAIT: Duration = Duration::from_secs(5);
pub(super) fn is_run(identity: &Identity) -> bool {
    identity.kind == IdentityKind::Script
}

pub(super) fn string_arg<'a>(call: &'a ToolCall, key: &str) -> Option<&'a str> {
    call.arguments.get(key).and_then(Value::as_str)
}

impl ScriptTools {
    /// The script `name` as the caller may address it: their own, or (for an
    /// administrator) `owner`'s.
    pub(super) async fn addressed(
        &self,
        call: &ToolCall,
        name: &str,
    ) -> Result<Option<Script>, ToolOutcome> {
        let owner = match string_arg(call, "owner") {
            Some(owner) if call.persona.is_admin => owner.to_owned(),
            Some(owner) if owner != call.identity.subject => return Ok(None),
            _ => call.identity.subject.clone(),
        };
        self.store
            .find_script(&owner, name)
            .await
            .map_err(|error| unavailable(&error))
    }

    /// [`ScriptTools::addressed`], with "not found" as the refusal.
    pub(super) async fn owned(&self, call: &ToolCall, name: &str) -> Result<Script, ToolOutcome> {
        self.addressed(call, name)
            .await?
            .ok_or_else(|| not_found(name))
    }

    /// The run `id` if the caller may read it.
    pub(super) async fn readable_run(
        &self,
        call: &ToolCall,
        id: &str,
    ) -> Result<Option<Run>, ToolOutcome> {
        // Text that is no run id reads as an unknown run, without a lookup.
        if !docket_task::id::is_well_formed(id) {
            return Ok(None);
        }
        let Some((run, _)) = self
            .store
            .run(id)
            .await
            .map_err(|error| unavailable(&error))?
        else {
            return Ok(None);
        };
        let subject = &call.identity.subject;
        let may =
            call.persona.is_admin || &run.requested_by == subject || &run.script_owner == subject;
        Ok(may.then_some(run))
    }

    /// Checks and saves a new run of the caller's script `name`; a refusal as
    /// the result to answer.
    pub(crate) async fn start_run(&self, call: &ToolCall) -> Result<Run, ToolOutcome> {
        if is_run(&call.identity) {
            return Err(inside_run("run_script", REENTRANT));
        }
        let name = string_arg(call, "name").unwrap_or_default();
        let script = self.owned(call, name).await?;
        if let Some(refused) = refuse_run(&script) {
            return Err(refusal(
                Refusal::ToolError,
                &format!(
                    "{refused}; use manage_script run_draft to execute it as yourself while you iterate"
                ),
                "Enable the script or run a draft.",
            ));
        }
        let args = call
            .arguments
            .get("args")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let params = bind_params(&script.params, args).map_err(|problem| {
            refusal(
                Refusal::InvalidArguments,
                &problem,
                "Read the script's params with manage_script command=get.",
            )
        })?;
        let id = RunBridge::new_run_id()
            .map_err(|error| refusal(Refusal::Internal, &error.to_string(), "Try again."))?;
        self.bridge
            .enqueue(NewRun {
                id,
                script_id: script.id.clone(),
                script_name: script.name.clone(),
                script_owner: script.owner.clone(),
                version: script.version,
                params: Value::Object(params),
                requested_by: call.identity.subject.clone(),
                // The worker that runs it, on any replica, continues this trace.
                trace_context: crate::telemetry::current_trace().map(|trace| trace.to_column()),
            })
            .await
            .map_err(|error| {
                tracing::warn!(%error, "could not queue a run");
                refusal(
                    Refusal::Unavailable,
                    &error.to_string(),
                    "Try again in a moment.",
                )
            })
    }
}

impl ScriptTools {
    /// `run_script` as a task: the run is queued (committed) and its task
    /// record — the run read as a task — is the answer.
    pub(crate) async fn start_run_task(
        &self,
        call: &ToolCall,
    ) -> Result<docket_task::TaskRecord, ToolOutcome> {
        let run = self.start_run(call).await?;
        let now = run.created_at;
        Ok(docket_run_bridge::task::run_task(
            &run,
            now,
            self.run_retention,
            self.poll_interval_ms,
            None,
        ))
    }
}

/// Why a script must not run now, as the original platform says it.
pub(super) fn refuse_run(script: &Script) -> Option<&'static str> {
    if !script.enabled {
        Some("the script is disabled")
    } else if script.status == ScriptStatus::Deprecated {
        Some("the script is deprecated and must not be executed")
    } else {
        None
    }
}
