-- tasks/list: a caller's tasks newest first, whether it started them or follows
-- them as their kind's extra follower; and the same for script runs, which are
-- tasks of their own.
CREATE INDEX call_tasks_owner_created_at ON call_tasks (owner, created_at, task_id);
CREATE INDEX call_tasks_follower_created_at ON call_tasks (extra_follower, created_at, task_id)
    WHERE extra_follower IS NOT NULL;
CREATE INDEX script_runs_requested_by_created_at ON script_runs (requested_by, created_at, id);
CREATE INDEX script_runs_owner_created_at ON script_runs (script_owner, created_at, id);
