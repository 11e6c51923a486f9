-- The status messages that changed since the replica's last beat (the caller
-- sends only those; a message equal to the stored one writes nothing). The beat
-- stamps the replica's own row and reads its pending cancels in statements of
-- its own, in the same transaction (see tasks.rs).
-- ?1 replica_id, ?2 the messages as a JSON array of [task_id, status_message] pairs.
UPDATE call_tasks
   SET status_message = beat.status_message,
       last_updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
  FROM (
      SELECT value ->> 0 AS task_id, value ->> 1 AS status_message
        FROM json_each(?2)
  ) AS beat
 WHERE call_tasks.task_id = beat.task_id
   AND call_tasks.replica_id = ?1
   AND call_tasks.status IN ('working', 'input_required')
   AND beat.status_message IS NOT NULL
   AND beat.status_message IS NOT call_tasks.status_message
