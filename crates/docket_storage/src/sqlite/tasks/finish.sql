-- Ends a task if it has not ended (compare-and-set on the status). Returns what
-- the audit row needs exactly when this statement ended it; the caller writes
-- that row in the same transaction.
-- ?1 task_id, ?2 status, ?3 result, ?4 error, ?5 status_message (NULL keeps it).
UPDATE call_tasks
   SET status = ?2,
       result = ?3,
       error = ?4,
       status_message = COALESCE(?5, status_message),
       input_requests = NULL,
       last_updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
 WHERE task_id = ?1
   AND status IN ('working', 'input_required')
RETURNING
    task_id, tool, owner, audit_persona, audit_connection, audit_arguments,
    CAST(round((julianday('now') - julianday(created_at)) * 86400000) AS INTEGER) AS duration_ms
