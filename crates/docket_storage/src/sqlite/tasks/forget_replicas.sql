-- Forgets the replicas silent since before the cut-off that run nothing any more
-- (every process has a replica id of its own, so rows would otherwise pile up
-- with restarts). A replica that beats again gets its row back.
-- ?1 the cut-off as a time modifier ('-30.000 seconds').
DELETE FROM replicas
 WHERE last_beat_at < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1)
   AND NOT EXISTS (
       SELECT 1 FROM call_tasks
        WHERE call_tasks.replica_id = replicas.id
          AND call_tasks.status IN ('working', 'input_required')
   )
