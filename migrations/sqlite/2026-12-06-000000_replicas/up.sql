-- Liveness per replica: each replica stamps its own row once per beat, and a
-- running task is as alive as its replica (see the PostgreSQL migration).
CREATE TABLE replicas (
    id TEXT PRIMARY KEY NOT NULL,
    started_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_beat_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    draining INTEGER NOT NULL DEFAULT 0
);

-- Carry the running tasks' liveness over (times are fixed-width text, so max
-- is the newest).
INSERT INTO replicas (id, started_at, last_beat_at)
SELECT replica_id, min(created_at), max(heartbeat_at)
  FROM call_tasks
 WHERE status IN ('working', 'input_required')
 GROUP BY replica_id;

CREATE INDEX call_tasks_pending_cancel ON call_tasks (replica_id)
    WHERE cancel_requested_at IS NOT NULL AND status IN ('working', 'input_required');

-- The stale sweep finds running tasks through their replica now, so the index of
-- running tasks by their own stamp only cost every insert and every ending.
DROP INDEX call_tasks_running_by_heartbeat;
