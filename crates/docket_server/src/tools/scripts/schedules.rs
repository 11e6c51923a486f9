//! `manage_script schedule_set`, `schedule_list`, `schedule_enable` and
//! `schedule_disable`: one schedule per script, set and switched by the
//! script's owner or an administrator. Fire times are computed by
//! `docket_run_bridge::cadence`; the times shown are read on the scheduler's
//! clock.

use docket_catalog::CatalogError;
use docket_catalog::scripts::{FireRecord, NewSchedule, Schedule, Script};
use docket_run_bridge::cadence::Cadence;
use serde_json::{Value, json};
use time::OffsetDateTime;

use crate::refusal::Refusal;
use crate::registry::{ToolCall, ToolOutcome};

use super::answers::{limit_reached, refusal, text_result, timestamp, unavailable};
use super::context::{MAX_LIST, ScriptTools, string_arg};
use super::params::bind_params;

/// How many coming fire times an answer shows.
const SHOWN_FIRES: usize = 5;

/// How many past fires `schedule_list` for one script shows.
const SHOWN_PAST_FIRES: u32 = 10;

/// How daylight-saving changes move fires, as answers state it.
const DST_RULE: &str = "In a skipped hour, a fixed-time schedule (e.g. 30 2 * * *) fires at the first \
     minute after the gap and a wildcard or step schedule has no fires in it; in a repeated hour, a \
     fixed-time schedule fires once (the first pass) and a wildcard or step schedule fires in both.";

fn no_schedule(name: &str) -> ToolOutcome {
    refusal(
        Refusal::NotFound,
        &format!("script {name:?} has no schedule"),
        "Set one with manage_script command=schedule_set name=... cron=... timezone=...",
    )
}

fn cadence_refusal(error: &docket_run_bridge::cadence::CadenceError) -> ToolOutcome {
    refusal(
        Refusal::InvalidArguments,
        &error.to_string(),
        "A cron expression has five fields (minute hour day-of-month month day-of-week) or is a \
         descriptor such as @daily; timezone is an IANA name such as Europe/Berlin.",
    )
}

fn schedule_json(schedule: &Schedule, now: OffsetDateTime) -> Value {
    // The schedule waits for next_fire_at; the cadence gives the ones after.
    let upcoming: Vec<Value> = match Cadence::parse(&schedule.cron, &schedule.timezone) {
        Ok(cadence) if schedule.enabled => std::iter::once(schedule.next_fire_at)
            .chain(cadence.upcoming(schedule.next_fire_at.max(now), SHOWN_FIRES - 1))
            .map(|at| timestamp(Some(at)))
            .collect(),
        _ => Vec::new(),
    };
    json!({
        "name": schedule.script_name,
        "owner": schedule.script_owner,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "args": schedule.args,
        "enabled": schedule.enabled,
        "next_fire_at": if schedule.enabled { timestamp(Some(schedule.next_fire_at)) } else { Value::Null },
        "next_fire_times": upcoming,
        "last_fire_at": timestamp(schedule.last_fire_at),
        "missed_fires": schedule.missed_fires,
        "set_by": schedule.set_by,
        "updated_at": timestamp(Some(schedule.updated_at)),
    })
}

fn fire_json(fire: &FireRecord) -> Value {
    json!({
        "fire_time": timestamp(Some(fire.fire_time)),
        "status": fire.status.as_str(),
        "run_id": fire.run_id,
        "missed": fire.missed,
        "fired_by": fire.fired_by,
    })
}

/// `schedule_set {name, cron, timezone?, args?}`.
pub(super) async fn schedule_set(
    deps: &ScriptTools,
    call: &ToolCall,
    script: Script,
) -> ToolOutcome {
    let Some(cron) = string_arg(call, "cron") else {
        return refusal(
            Refusal::InvalidArguments,
            "schedule_set needs a cron expression",
            "Give cron, e.g. \"0 6 * * *\" for 06:00 every day, and a timezone.",
        );
    };
    let timezone = string_arg(call, "timezone").unwrap_or("UTC");
    let cadence = match Cadence::parse(cron, timezone) {
        Ok(cadence) => cadence,
        Err(error) => return cadence_refusal(&error),
    };
    let args = call
        .arguments
        .get("args")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    // Checked against the contract now, so a bad argument is heard here and
    // not at 03:00 in a failed run.
    let bound = match bind_params(&script.params, args) {
        Ok(bound) => bound,
        Err(problem) => {
            return refusal(
                Refusal::InvalidArguments,
                &problem,
                "Read the script's params with manage_script command=get.",
            );
        }
    };
    let now = deps.bridge.scheduler().clock().now();
    let first = match cadence.first_after(now) {
        Ok(first) => first,
        Err(error) => return cadence_refusal(&error),
    };
    let saved = deps
        .store
        .set_schedule(
            NewSchedule {
                script_id: script.id.clone(),
                cron: cadence.expression().to_owned(),
                timezone: cadence.zone().to_owned(),
                args: Value::Object(bound),
                next_fire_at: first,
                set_by: call.identity.subject.clone(),
            },
            deps.max_schedules_per_owner,
        )
        .await;
    match saved {
        Ok(schedule) => {
            let mut answer = schedule_json(&schedule, now);
            answer["dst_rule"] = json!(DST_RULE);
            answer["message"] = json!(if script.enabled {
                "Scheduled. Each fire runs the script's newest version with its author's roles that the owner still holds when it starts (trigger schedule)."
            } else {
                "Scheduled, but the script is disabled: it does not fire until the script is enabled."
            });
            ToolOutcome::Result(text_result(answer, false))
        }
        Err(CatalogError::LimitReached(limit)) => limit_reached(
            "scheduled scripts",
            limit,
            "scripts.max_schedules_per_owner",
            "Remove the schedule of a script you no longer run on a clock (delete the script or \
             ask an administrator to raise the limit).",
        ),
        Err(error) => unavailable(&error),
    }
}

/// `schedule_list {name?}`: one script's schedule with its recent fires, or
/// all the caller's schedules (an administrator's: everyone's).
pub(super) async fn schedule_list(deps: &ScriptTools, call: &ToolCall) -> ToolOutcome {
    let now = deps.bridge.scheduler().clock().now();
    if let Some(name) = string_arg(call, "name") {
        let script = match deps.owned(call, name).await {
            Ok(script) => script,
            Err(refused) => return refused,
        };
        let schedule = match deps.store.schedule(&script.id).await {
            Ok(Some(schedule)) => schedule,
            Ok(None) => return no_schedule(name),
            Err(error) => return unavailable(&error),
        };
        let fires = match deps
            .store
            .schedule_fires(&script.id, SHOWN_PAST_FIRES)
            .await
        {
            Ok(fires) => fires,
            Err(error) => return unavailable(&error),
        };
        let mut answer = schedule_json(&schedule, now);
        answer["script_enabled"] = json!(script.enabled);
        answer["fires"] = Value::Array(fires.iter().map(fire_json).collect());
        answer["dst_rule"] = json!(DST_RULE);
        return ToolOutcome::Result(text_result(answer, false));
    }
    let owner = (!call.persona.is_admin).then_some(call.identity.subject.as_str());
    match deps.store.list_schedules(owner, MAX_LIST).await {
        Ok(schedules) => {
            let listed: Vec<Value> = schedules
                .iter()
                .map(|schedule| schedule_json(schedule, now))
                .collect();
            ToolOutcome::Result(text_result(
                json!({"count": listed.len(), "schedules": listed}),
                false,
            ))
        }
        Err(error) => unavailable(&error),
    }
}

/// `schedule_enable` / `schedule_disable {name}`. Enabling resumes at the
/// next fire time from now: fires while disabled are not missed fires.
pub(super) async fn schedule_switch(
    deps: &ScriptTools,
    script: Script,
    enabled: bool,
) -> ToolOutcome {
    let now = deps.bridge.scheduler().clock().now();
    let current = match deps.store.schedule(&script.id).await {
        Ok(Some(schedule)) => schedule,
        Ok(None) => return no_schedule(&script.name),
        Err(error) => return unavailable(&error),
    };
    let next = match Cadence::parse(&current.cron, &current.timezone)
        .and_then(|cadence| cadence.first_after(now))
    {
        Ok(next) => next,
        Err(error) => return cadence_refusal(&error),
    };
    match deps
        .store
        .set_schedule_enabled(&script.id, enabled, next)
        .await
    {
        Ok(Some(schedule)) => {
            let mut answer = schedule_json(&schedule, now);
            answer["message"] = json!(if enabled {
                "The schedule is enabled; it fires from the next fire time on."
            } else {
                "The schedule is disabled; it fires no more until enabled."
            });
            ToolOutcome::Result(text_result(answer, false))
        }
        Ok(None) => no_schedule(&script.name),
        Err(error) => unavailable(&error),
    }
}
