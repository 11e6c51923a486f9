DROP INDEX call_tasks_pending_cancel;
CREATE INDEX call_tasks_running_by_heartbeat ON call_tasks (heartbeat_at)
    WHERE status IN ('working', 'input_required');
UPDATE call_tasks
   SET heartbeat_at = max(heartbeat_at, (SELECT last_beat_at FROM replicas WHERE id = replica_id))
 WHERE status IN ('working', 'input_required')
   AND replica_id IN (SELECT id FROM replicas);
DROP TABLE replicas;
