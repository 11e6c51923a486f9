-- Fails every running task whose replica stopped beating before the cut-off (a
-- task is as alive as its replica's row says; one whose replica never beat is
-- judged by its own stamp, taken when it was created),
-- and returns what each one's audit row needs; the caller writes those rows in
-- the same transaction.
-- A task whose cancel was recorded ends cancelled instead: the cancel was
-- acknowledged, and the work did stop.
-- ?1 the cut-off as a time modifier ('-30.000 seconds'), ?2 error,
-- ?3 status_message, ?4 a cancel's status_message; for a replica that had begun
-- to drain (it was shut down, not lost), ?5 error and ?6 status_message.
UPDATE call_tasks
   SET status = CASE WHEN cancel_requested_at IS NULL THEN 'failed' ELSE 'cancelled' END,
       error = CASE WHEN cancel_requested_at IS NOT NULL THEN NULL
                    WHEN COALESCE((SELECT draining FROM replicas
                                    WHERE replicas.id = call_tasks.replica_id), 0) THEN ?5
                    ELSE ?2 END,
       status_message = CASE WHEN cancel_requested_at IS NOT NULL THEN ?4
                             WHEN COALESCE((SELECT draining FROM replicas
                                             WHERE replicas.id = call_tasks.replica_id), 0) THEN ?6
                             ELSE ?3 END,
       input_requests = NULL,
       last_updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
 WHERE status IN ('working', 'input_required')
   AND max(heartbeat_at, COALESCE(
           (SELECT last_beat_at FROM replicas WHERE replicas.id = call_tasks.replica_id),
           heartbeat_at
       )) < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1)
RETURNING
    task_id, status, cancel_requested_at IS NOT NULL AS overruled,
    COALESCE((SELECT draining FROM replicas WHERE replicas.id = call_tasks.replica_id), 0)
        AS draining,
    tool, owner, audit_persona, audit_connection, audit_arguments,
    CAST(round((julianday('now') - julianday(created_at)) * 86400000) AS INTEGER) AS duration_ms,
    trace_context
