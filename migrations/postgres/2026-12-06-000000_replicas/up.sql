-- Liveness per replica: each replica stamps its own row once per beat, and a
-- running task is as alive as its replica. A beat therefore costs the same
-- whatever the number of tasks: one row, not one per task.
CREATE TABLE replicas (
    id text PRIMARY KEY,
    started_at timestamptz NOT NULL DEFAULT now(),
    last_beat_at timestamptz NOT NULL DEFAULT now(),
    -- Set when the replica begins a graceful shutdown: it takes no new work and
    -- finishes (or records) what it runs.
    draining boolean NOT NULL DEFAULT false
);

-- Carry the running tasks' liveness over: each replica that runs a task gets
-- the newest stamp any of its tasks had, so no task reads fresher or staler
-- than it did before this migration.
INSERT INTO replicas (id, started_at, last_beat_at)
SELECT replica_id, min(created_at), max(heartbeat_at)
  FROM call_tasks
 WHERE status IN ('working', 'input_required')
 GROUP BY replica_id;

-- A beat asks for this replica's running tasks with a cancel pending: only
-- those rows are in this index, so the question costs the same at 10 or 10 000
-- running tasks.
CREATE INDEX call_tasks_pending_cancel ON call_tasks (replica_id)
    WHERE cancel_requested_at IS NOT NULL AND status IN ('working', 'input_required');

-- The stale sweep finds running tasks through their replica now, so the index of
-- running tasks by their own stamp only cost every insert and every ending.
DROP INDEX call_tasks_running_by_heartbeat;
