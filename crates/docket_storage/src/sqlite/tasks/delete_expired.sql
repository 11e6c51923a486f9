-- Deletes up to ?1 tasks whose expiry has passed (database clock).
DELETE FROM call_tasks
 WHERE task_id IN (
     SELECT task_id
       FROM call_tasks
      WHERE expires_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
      ORDER BY expires_at
      LIMIT ?1
 )
RETURNING task_id
