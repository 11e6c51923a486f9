DROP INDEX call_tasks_pending_cancel;
CREATE INDEX call_tasks_running_by_heartbeat ON call_tasks (heartbeat_at)
    WHERE status IN ('working', 'input_required');
-- Give each running task its replica's last stamp back.
UPDATE call_tasks AS task
   SET heartbeat_at = GREATEST(task.heartbeat_at, replica.last_beat_at)
  FROM replicas AS replica
 WHERE replica.id = task.replica_id
   AND task.status IN ('working', 'input_required');
DROP TABLE replicas;
