//! [`MemoryScripts`]: scripts, their versions and the run queue in memory,
//! with the same claims, leases and fencing as the database backends.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use time::OffsetDateTime;

use super::{after, before, lock, now, page};
use crate::CatalogError;
use crate::scripts::{
    CancelOutcome, Fire, FireOutcome, FireRecord, FireStatus, Lease, NewRun, NewSchedule,
    NewScript, Renewal, Run, RunEnding, RunFilter, RunStatus, RunTrigger, Schedule, Script,
    ScriptChange, ScriptStatus, ScriptStore, ScriptVersion,
};

/// A run with the instant before which no worker may claim it (a retry's
/// backoff), which the tables keep as `not_before` and a [`Run`] does not show.
#[derive(Debug)]
struct QueuedRun {
    run: Run,
    not_before: OffsetDateTime,
}

#[derive(Debug, Default)]
struct State {
    scripts: HashMap<String, Script>,
    /// By script id and version number.
    versions: HashMap<(String, i32), ScriptVersion>,
    runs: HashMap<String, QueuedRun>,
    /// By script id.
    schedules: HashMap<String, Schedule>,
    /// By script id and fire time: the unique key of a fire.
    fires: HashMap<(String, OffsetDateTime), FireRecord>,
}

impl State {
    /// The run `lease` holds, while it holds it: the fence of every worker write.
    fn leased(&mut self, lease: &Lease) -> Option<&mut Run> {
        self.runs
            .get_mut(&lease.run_id)
            .map(|queued| &mut queued.run)
            .filter(|run| {
                run.status == RunStatus::Running
                    && run.lease_owner.as_deref() == Some(lease.owner.as_str())
                    && run.attempt == lease.attempt
            })
    }

    /// Puts a leased run back in the queue, not before `delay` from now; a
    /// retry (`error` given) counts a platform fault, a release does not.
    fn requeue(&mut self, lease: &Lease, error: Option<&str>, delay: Duration) -> bool {
        let now = now();
        let Some(run) = self.leased(lease) else {
            return false;
        };
        run.status = RunStatus::Queued;
        run.lease_owner = None;
        run.lease_expires_at = None;
        if let Some(error) = error {
            run.error = Some(error.to_owned());
            run.platform_faults += 1;
        }
        run.updated_at = now;
        if let Some(queued) = self.runs.get_mut(&lease.run_id) {
            queued.not_before = after(now, delay);
        }
        true
    }
}

/// A run as queued now.
fn queued_run(
    run: NewRun,
    now: OffsetDateTime,
    trigger: RunTrigger,
    fire_time: Option<OffsetDateTime>,
) -> Run {
    Run {
        id: run.id,
        script_id: run.script_id,
        script_name: run.script_name,
        script_owner: run.script_owner,
        version: run.version,
        status: RunStatus::Queued,
        params: run.params,
        requested_by: run.requested_by,
        trigger,
        fire_time,
        attempt: 0,
        platform_faults: 0,
        reclaims: 0,
        lease_owner: None,
        lease_expires_at: None,
        cancel_requested_at: None,
        host_calls: 0,
        result: None,
        error: None,
        error_kind: None,
        log: None,
        log_truncated: false,
        metrics: json!({}),
        created_at: now,
        started_at: None,
        finished_at: None,
        updated_at: now,
        trace_context: run.trace_context,
    }
}

/// A [`ScriptStore`] in memory, for one replica: there are no other replicas
/// to hear run signals from, so it keeps the trait's default listener.
#[derive(Debug, Default)]
pub struct MemoryScripts {
    state: Mutex<State>,
}

impl MemoryScripts {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl ScriptStore for MemoryScripts {
    async fn create_script(
        &self,
        script: NewScript,
        owner_limit: u32,
    ) -> Result<(Script, ScriptVersion), CatalogError> {
        script.validate()?;
        let mut state = lock(&self.state);
        let taken = state.scripts.values().any(|stored| {
            stored.id == script.id || (stored.owner == script.owner && stored.name == script.name)
        });
        if taken {
            return Err(CatalogError::Duplicate);
        }
        let owned = state
            .scripts
            .values()
            .filter(|stored| stored.owner == script.owner)
            .count();
        if owned >= owner_limit as usize {
            return Err(CatalogError::LimitReached(owner_limit));
        }
        let now = now();
        let stored = Script {
            id: script.id.clone(),
            owner: script.owner,
            name: script.name,
            description: script.description.clone(),
            params: script.params.clone(),
            status: ScriptStatus::Active,
            enabled: true,
            version: 1,
            created_at: now,
            updated_at: now,
        };
        let version = ScriptVersion {
            script_id: script.id.clone(),
            version: 1,
            source: script.source,
            description: script.description,
            params: script.params,
            author: script.author,
            author_roles: script.author_roles,
            created_at: now,
        };
        state.scripts.insert(script.id.clone(), stored.clone());
        state.versions.insert((script.id, 1), version.clone());
        Ok((stored, version))
    }

    async fn update_script(
        &self,
        id: &str,
        change: ScriptChange,
    ) -> Result<Option<(Script, ScriptVersion)>, CatalogError> {
        change.validate()?;
        let mut state = lock(&self.state);
        let Some(number) = state.scripts.get(id).map(|script| script.version) else {
            return Ok(None);
        };
        if let Some(base) = change.base_version
            && base != number
        {
            return Err(CatalogError::Stale(number));
        }
        let Some(current) = state.versions.get(&(id.to_owned(), number)).cloned() else {
            return Err(CatalogError::Corrupt(format!(
                "script {id} has no version {number}"
            )));
        };
        let now = now();
        // Only new source changes whose roles the version carries.
        let (source, author, author_roles) = match change.new_source(&current.source) {
            Some(source) => (
                source.to_owned(),
                change.editor.clone(),
                change.editor_roles.clone(),
            ),
            None => (current.source, current.author, current.author_roles),
        };
        let version = ScriptVersion {
            script_id: id.to_owned(),
            version: number + 1,
            source,
            description: change.description.unwrap_or(current.description),
            params: change.params.unwrap_or(current.params),
            author,
            author_roles,
            created_at: now,
        };
        let Some(script) = state.scripts.get_mut(id) else {
            return Ok(None);
        };
        script.version = version.version;
        script.description = version.description.clone();
        script.params = version.params.clone();
        script.enabled = change.enabled.unwrap_or(script.enabled);
        script.status = change.status.unwrap_or(script.status);
        script.updated_at = now;
        let script = script.clone();
        state
            .versions
            .insert((id.to_owned(), version.version), version.clone());
        Ok(Some((script, version)))
    }

    async fn find_script(&self, owner: &str, name: &str) -> Result<Option<Script>, CatalogError> {
        Ok(lock(&self.state)
            .scripts
            .values()
            .find(|script| script.owner == owner && script.name == name)
            .cloned())
    }

    async fn script(&self, id: &str) -> Result<Option<Script>, CatalogError> {
        Ok(lock(&self.state).scripts.get(id).cloned())
    }

    async fn list_scripts(
        &self,
        owner: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Script>, CatalogError> {
        let mut scripts: Vec<Script> = lock(&self.state)
            .scripts
            .values()
            .filter(|script| owner.is_none_or(|owner| script.owner == owner))
            .cloned()
            .collect();
        scripts.sort_by(|a, b| (&a.name, &a.owner).cmp(&(&b.name, &b.owner)));
        scripts.truncate(page(limit));
        Ok(scripts)
    }

    async fn delete_script(&self, id: &str) -> Result<bool, CatalogError> {
        let mut state = lock(&self.state);
        let existed = state.scripts.remove(id).is_some();
        // Its versions and runs go with it, as the tables' cascade does.
        state.versions.retain(|(script_id, _), _| script_id != id);
        state.runs.retain(|_, queued| queued.run.script_id != id);
        state.schedules.remove(id);
        state.fires.retain(|(script_id, _), _| script_id != id);
        Ok(existed)
    }

    async fn script_version(
        &self,
        script_id: &str,
        version: i32,
    ) -> Result<Option<ScriptVersion>, CatalogError> {
        Ok(lock(&self.state)
            .versions
            .get(&(script_id.to_owned(), version))
            .cloned())
    }

    async fn enqueue(&self, run: NewRun) -> Result<Run, CatalogError> {
        run.validate()?;
        let mut state = lock(&self.state);
        if state.runs.contains_key(&run.id) {
            return Err(CatalogError::Duplicate);
        }
        if !state.scripts.contains_key(&run.script_id) {
            return Err(CatalogError::Invalid(format!(
                "there is no script {} to run",
                run.script_id
            )));
        }
        let now = now();
        let queued = queued_run(run.clone(), now, RunTrigger::Tool, None);
        state.runs.insert(
            run.id,
            QueuedRun {
                run: queued.clone(),
                not_before: now,
            },
        );
        Ok(queued)
    }

    async fn run(&self, id: &str) -> Result<Option<(Run, OffsetDateTime)>, CatalogError> {
        let state = lock(&self.state);
        Ok(state.runs.get(id).map(|queued| (queued.run.clone(), now())))
    }

    async fn list_runs(&self, filter: &RunFilter, limit: u32) -> Result<Vec<Run>, CatalogError> {
        let mut runs: Vec<Run> = lock(&self.state)
            .runs
            .values()
            .map(|queued| &queued.run)
            .filter(|run| {
                filter
                    .script_id
                    .as_ref()
                    .is_none_or(|script| run.script_id == *script)
            })
            .filter(|run| {
                filter.visible_to.as_ref().is_none_or(|subject| {
                    run.requested_by == *subject || run.script_owner == *subject
                })
            })
            .filter(|run| filter.status.is_none_or(|status| run.status == status))
            .filter(|run| {
                filter.before.as_ref().is_none_or(|cursor| {
                    (run.created_at, run.id.as_str()) < (cursor.created_at, cursor.id.as_str())
                })
            })
            .cloned()
            .collect();
        runs.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
        runs.truncate(page(limit));
        Ok(runs)
    }

    async fn claim(
        &self,
        worker: &str,
        lease: Duration,
        max_running_per_owner: u32,
    ) -> Result<Option<Run>, CatalogError> {
        let mut state = lock(&self.state);
        let now = now();
        // Each owner's runs held by a live lease: an owner at their share is
        // passed over, so their queue never takes every worker.
        let mut running: HashMap<String, u32> = HashMap::new();
        for held in state.runs.values() {
            if held.run.status == RunStatus::Running
                && held.run.lease_expires_at.is_some_and(|ends| ends >= now)
            {
                *running.entry(held.run.script_owner.clone()).or_default() += 1;
            }
        }
        let claimable = state
            .runs
            .values_mut()
            .filter(|queued| match queued.run.status {
                RunStatus::Queued => queued.not_before <= now,
                RunStatus::Running => queued.run.lease_expires_at.is_some_and(|ends| ends < now),
                _ => false,
            })
            .filter(|queued| {
                running.get(&queued.run.script_owner).copied().unwrap_or(0) < max_running_per_owner
            })
            .min_by(|a, b| (a.not_before, a.run.created_at).cmp(&(b.not_before, b.run.created_at)));
        let Some(queued) = claimable else {
            return Ok(None);
        };
        let run = &mut queued.run;
        // Taking a run back from a worker whose lease expired is a reclaim.
        if run.status == RunStatus::Running {
            run.reclaims += 1;
        }
        run.status = RunStatus::Running;
        run.attempt += 1;
        run.lease_owner = Some(worker.to_owned());
        run.lease_expires_at = Some(after(now, lease));
        run.started_at = Some(run.started_at.unwrap_or(now));
        run.updated_at = now;
        Ok(Some(run.clone()))
    }

    async fn renew(
        &self,
        lease: &Lease,
        duration: Duration,
        host_calls: i64,
    ) -> Result<Renewal, CatalogError> {
        let mut state = lock(&self.state);
        let now = now();
        Ok(match state.leased(lease) {
            Some(run) => {
                run.lease_expires_at = Some(after(now, duration));
                run.host_calls = run.host_calls.max(host_calls);
                run.updated_at = now;
                Renewal::Held {
                    cancel_requested: run.cancel_requested_at.is_some(),
                }
            }
            None => Renewal::Lost,
        })
    }

    async fn finish(
        &self,
        lease: &Lease,
        ending: RunEnding,
    ) -> Result<Option<RunStatus>, CatalogError> {
        ending.validate()?;
        let mut state = lock(&self.state);
        let now = now();
        let Some(run) = state.leased(lease) else {
            return Ok(None);
        };
        // A cancel asked for first wins, as the stores' compare-and-set has it.
        let ending = if run.cancel_requested_at.is_some() {
            RunEnding {
                status: RunStatus::Cancelled,
                result: None,
                error: None,
                error_kind: None,
                ..ending
            }
        } else {
            ending
        };
        let host_calls = ending
            .metrics
            .get("host_calls")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        run.status = ending.status;
        run.result = ending.result;
        run.error = ending.error;
        run.error_kind = ending.error_kind;
        run.log = Some(ending.log);
        run.log_truncated = ending.log_truncated;
        run.metrics = ending.metrics;
        run.host_calls = run.host_calls.max(host_calls);
        run.lease_owner = None;
        run.lease_expires_at = None;
        run.finished_at = Some(now);
        run.updated_at = now;
        Ok(Some(run.status))
    }

    async fn retry(
        &self,
        lease: &Lease,
        error: &str,
        delay: Duration,
    ) -> Result<bool, CatalogError> {
        Ok(lock(&self.state).requeue(lease, Some(error), delay))
    }

    async fn release(&self, lease: &Lease) -> Result<bool, CatalogError> {
        Ok(lock(&self.state).requeue(lease, None, Duration::ZERO))
    }

    async fn cancel_run(&self, id: &str) -> Result<Option<CancelOutcome>, CatalogError> {
        let mut state = lock(&self.state);
        let now = now();
        let Some(queued) = state.runs.get_mut(id) else {
            return Ok(None);
        };
        let run = &mut queued.run;
        Ok(Some(match run.status {
            RunStatus::Queued => {
                run.status = RunStatus::Cancelled;
                run.cancel_requested_at = Some(now);
                run.finished_at = Some(now);
                run.updated_at = now;
                CancelOutcome::Ended(Box::new(run.clone()))
            }
            RunStatus::Running => {
                run.cancel_requested_at = Some(run.cancel_requested_at.unwrap_or(now));
                run.updated_at = now;
                CancelOutcome::Requested
            }
            _ => CancelOutcome::AlreadyEnded,
        }))
    }

    async fn delete_finished_runs(
        &self,
        retention: Duration,
        limit: u32,
    ) -> Result<Vec<String>, CatalogError> {
        let mut state = lock(&self.state);
        let cutoff = before(now(), retention);
        let due: Vec<String> = state
            .runs
            .values()
            .map(|queued| &queued.run)
            .filter(|run| run.status.is_terminal())
            .filter(|run| run.finished_at.is_some_and(|finished| finished < cutoff))
            .map(|run| run.id.clone())
            .take(page(limit))
            .collect();
        for id in &due {
            state.runs.remove(id);
        }
        Ok(due)
    }

    async fn set_schedule(
        &self,
        schedule: NewSchedule,
        owner_limit: u32,
    ) -> Result<Schedule, CatalogError> {
        schedule.validate()?;
        let mut state = lock(&self.state);
        let Some(script) = state.scripts.get(&schedule.script_id).cloned() else {
            return Err(CatalogError::Invalid(format!(
                "there is no script {} to schedule",
                schedule.script_id
            )));
        };
        // Replacing this script's schedule adds none.
        let others = state
            .schedules
            .values()
            .filter(|other| other.script_owner == script.owner && other.script_id != script.id)
            .count();
        if others >= owner_limit as usize {
            return Err(CatalogError::LimitReached(owner_limit));
        }
        let now = now();
        let created_at = state
            .schedules
            .get(&script.id)
            .map_or(now, |existing| existing.created_at);
        let saved = Schedule {
            script_id: script.id.clone(),
            script_name: script.name,
            script_owner: script.owner,
            cron: schedule.cron,
            timezone: schedule.timezone,
            args: schedule.args,
            enabled: true,
            next_fire_at: schedule.next_fire_at,
            last_fire_at: None,
            missed_fires: 0,
            set_by: schedule.set_by,
            created_at,
            updated_at: now,
        };
        state.schedules.insert(script.id, saved.clone());
        Ok(saved)
    }

    async fn schedule(&self, script_id: &str) -> Result<Option<Schedule>, CatalogError> {
        Ok(lock(&self.state).schedules.get(script_id).cloned())
    }

    async fn list_schedules(
        &self,
        owner: Option<&str>,
        limit: u32,
    ) -> Result<Vec<Schedule>, CatalogError> {
        let mut schedules: Vec<Schedule> = lock(&self.state)
            .schedules
            .values()
            .filter(|schedule| owner.is_none_or(|owner| schedule.script_owner == owner))
            .cloned()
            .collect();
        schedules.sort_by(|a, b| {
            (&a.script_name, &a.script_owner).cmp(&(&b.script_name, &b.script_owner))
        });
        schedules.truncate(page(limit));
        Ok(schedules)
    }

    async fn set_schedule_enabled(
        &self,
        script_id: &str,
        enabled: bool,
        next_fire_at: OffsetDateTime,
    ) -> Result<Option<Schedule>, CatalogError> {
        let mut state = lock(&self.state);
        let Some(schedule) = state.schedules.get_mut(script_id) else {
            return Ok(None);
        };
        if enabled && !schedule.enabled {
            schedule.next_fire_at = next_fire_at;
        }
        schedule.enabled = enabled;
        schedule.updated_at = now();
        Ok(Some(schedule.clone()))
    }

    async fn due_schedules(
        &self,
        now: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<(Schedule, Script)>, CatalogError> {
        let state = lock(&self.state);
        let mut due: Vec<(Schedule, Script)> = state
            .schedules
            .values()
            .filter(|schedule| schedule.enabled && schedule.next_fire_at <= now)
            .filter_map(|schedule| {
                let script = state.scripts.get(&schedule.script_id)?;
                Some((schedule.clone(), script.clone()))
            })
            .collect();
        due.sort_by_key(|(schedule, _)| schedule.next_fire_at);
        due.truncate(page(limit));
        Ok(due)
    }

    async fn fire_schedule(&self, fire: Fire) -> Result<FireOutcome, CatalogError> {
        fire.validate()?;
        let mut state = lock(&self.state);
        let now = now();
        let Some(schedule) = state.schedules.get_mut(&fire.script_id) else {
            return Ok(FireOutcome::Lost);
        };
        let key = (fire.script_id.clone(), fire.fire_time);
        if !schedule.enabled
            || schedule.next_fire_at != fire.expected_next_fire_at
            || (fire.run.is_some() && state.fires.contains_key(&key))
        {
            return Ok(FireOutcome::Lost);
        }
        let Some(schedule) = state.schedules.get_mut(&fire.script_id) else {
            return Ok(FireOutcome::Lost);
        };
        schedule.next_fire_at = fire.next_fire_at;
        schedule.updated_at = now;
        let Some(run) = fire.run else {
            return Ok(FireOutcome::Advanced);
        };
        schedule.last_fire_at = Some(fire.fire_time);
        schedule.missed_fires += fire.missed;
        let overlapping = state.runs.values().any(|queued| {
            queued.run.script_id == fire.script_id
                && queued.run.trigger == RunTrigger::Schedule
                && !queued.run.status.is_terminal()
        });
        let mut record = FireRecord {
            script_id: fire.script_id,
            fire_time: fire.fire_time,
            status: FireStatus::SkippedOverlap,
            run_id: None,
            missed: fire.missed,
            fired_by: fire.fired_by,
            created_at: now,
        };
        if overlapping {
            state.fires.insert(key, record);
            return Ok(FireOutcome::SkippedOverlap);
        }
        let queued = queued_run(run, now, RunTrigger::Schedule, Some(fire.fire_time));
        record.status = FireStatus::Queued;
        record.run_id = Some(queued.id.clone());
        state.fires.insert(key, record);
        state.runs.insert(
            queued.id.clone(),
            QueuedRun {
                run: queued.clone(),
                not_before: now,
            },
        );
        Ok(FireOutcome::Queued(Box::new(queued)))
    }

    async fn schedule_fires(
        &self,
        script_id: &str,
        limit: u32,
    ) -> Result<Vec<FireRecord>, CatalogError> {
        let mut fires: Vec<FireRecord> = lock(&self.state)
            .fires
            .values()
            .filter(|fire| fire.script_id == script_id)
            .cloned()
            .collect();
        fires.sort_by_key(|fire| std::cmp::Reverse(fire.fire_time));
        fires.truncate(page(limit));
        Ok(fires)
    }

    async fn delete_old_fires(&self, retention: Duration, limit: u32) -> Result<u64, CatalogError> {
        let mut state = lock(&self.state);
        let cutoff = before(now(), retention);
        let due: Vec<(String, OffsetDateTime)> = state
            .fires
            .iter()
            .filter(|(_, fire)| fire.created_at < cutoff)
            .map(|(key, _)| key.clone())
            .take(page(limit))
            .collect();
        for key in &due {
            state.fires.remove(key);
        }
        Ok(u64::try_from(due.len()).unwrap_or(u64::MAX))
    }
}
