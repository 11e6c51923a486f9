-- Deletes up to $1 tasks whose expiry has passed (database clock). SKIP LOCKED:
-- replicas running retention at the same time take disjoint rows instead of
-- queueing behind each other.
DELETE FROM call_tasks
 WHERE task_id IN (
     SELECT task_id
       FROM call_tasks
      WHERE expires_at <= now()
      ORDER BY expires_at
      LIMIT $1
        FOR UPDATE SKIP LOCKED
 )
RETURNING task_id
