-- One beat of one replica, whatever the number of tasks it runs: stamps the
-- replica's own row (its tasks are as alive as it is), stores the status messages
-- that changed since its last beat (the caller sends only those; a message equal
-- to the stored one writes nothing, and last_updated_at moves only with a
-- change), and returns the replica's running tasks with a cancel pending, read
-- through the partial index call_tasks_pending_cancel. Data-modifying CTEs run
-- to completion whether or not the final SELECT reads them, RETURNING included:
-- each message written signals `changed:<task id>` on docket_tasks, so followers
-- on every replica read the task again when this commits.
-- The beat commits asynchronously (synchronous_commit off for this transaction
-- only): on an idle server the WAL flush of a lone commit costs milliseconds,
-- more than everything else here, and what a beat writes may be lost in a
-- database crash without harm: a stamp a moment older, a progress message
-- written again by the next beat. Nothing a beat writes is an outcome.
-- $1 replica_id, $2 task ids, $3 their new status messages (same order).
WITH alive AS (
    INSERT INTO replicas (id, started_at, last_beat_at)
    SELECT $1, now(), now()
      FROM (SELECT set_config('synchronous_commit', 'off', true)) AS relaxed
    ON CONFLICT (id) DO UPDATE SET last_beat_at = now()
), said AS (
    UPDATE call_tasks AS task
       SET status_message = beat.status_message,
           last_updated_at = now()
      FROM unnest($2::text[], $3::text[]) AS beat (task_id, status_message)
     WHERE task.task_id = beat.task_id
       AND task.replica_id = $1
       AND task.status IN ('working', 'input_required')
       AND beat.status_message IS NOT NULL
       AND beat.status_message IS DISTINCT FROM task.status_message
    RETURNING pg_notify('docket_tasks', 'changed:' || task.task_id)
)
SELECT task_id
  FROM call_tasks
 WHERE replica_id = $1
   AND cancel_requested_at IS NOT NULL
   AND status IN ('working', 'input_required')
