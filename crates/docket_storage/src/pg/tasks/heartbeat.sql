-- Stamps every listed running task of one replica in ONE statement, storing the
-- progress messages that came with the beat (a NULL message keeps the stored one;
-- last_updated_at moves only when the message changed), and returns the tasks
-- among them that another replica asked to cancel.
-- $1 replica_id, $2 task ids, $3 their status messages (same order).
WITH stamped AS (
    UPDATE call_tasks AS task
       SET heartbeat_at = now(),
           last_updated_at = CASE
               WHEN beat.status_message IS NOT NULL
                AND beat.status_message IS DISTINCT FROM task.status_message
               THEN now()
               ELSE task.last_updated_at
           END,
           status_message = COALESCE(beat.status_message, task.status_message)
      FROM unnest($2::text[], $3::text[]) AS beat (task_id, status_message)
     WHERE task.task_id = beat.task_id
       AND task.replica_id = $1
       AND task.status IN ('working', 'input_required')
    RETURNING task.task_id, task.cancel_requested_at IS NOT NULL AS cancel_requested
)
SELECT task_id FROM stamped WHERE cancel_requested
