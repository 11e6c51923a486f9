-- Stamps every listed running task of one replica in ONE statement, storing the
-- progress messages that came with the beat (a NULL message keeps the stored one;
-- last_updated_at moves only when the message changed), and says for each whether
-- a cancel was asked for.
-- ?1 replica_id, ?2 the beats as a JSON array of [task_id, status_message] pairs.
UPDATE call_tasks
   SET heartbeat_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
       last_updated_at = CASE
           WHEN beat.status_message IS NOT NULL
            AND beat.status_message IS NOT call_tasks.status_message
           THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
           ELSE call_tasks.last_updated_at
       END,
       status_message = COALESCE(beat.status_message, call_tasks.status_message)
  FROM (
      SELECT value ->> 0 AS task_id, value ->> 1 AS status_message
        FROM json_each(?2)
  ) AS beat
 WHERE call_tasks.task_id = beat.task_id
   AND call_tasks.replica_id = ?1
   AND call_tasks.status IN ('working', 'input_required')
RETURNING task_id, cancel_requested_at IS NOT NULL AS cancel_requested
