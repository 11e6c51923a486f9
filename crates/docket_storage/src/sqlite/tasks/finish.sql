-- Ends a task if it has not ended (compare-and-set on the status). Returns what
-- the audit row needs exactly when this statement ended it; the caller writes
-- that row in the same transaction. A cancel recorded before it wins: such a task
-- ends cancelled, whatever the ending says.
-- ?1 task_id, ?2 status, ?3 result, ?4 error, ?5 status_message (NULL keeps it),
-- ?6 a cancel's status_message.
UPDATE call_tasks
   SET status = CASE WHEN cancel_requested_at IS NULL THEN ?2 ELSE 'cancelled' END,
       result = CASE WHEN cancel_requested_at IS NULL THEN ?3 END,
       error = CASE WHEN cancel_requested_at IS NULL THEN ?4 END,
       status_message = CASE WHEN cancel_requested_at IS NULL
                             THEN COALESCE(?5, status_message) ELSE ?6 END,
       input_requests = NULL,
       last_updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
 WHERE task_id = ?1
   AND status IN ('working', 'input_required')
RETURNING
    task_id, status, cancel_requested_at IS NOT NULL AS overruled, 0 AS draining, tool, owner,
    audit_persona, audit_connection, audit_arguments,
    CAST(round((julianday('now') - julianday(created_at)) * 86400000) AS INTEGER) AS duration_ms,
    trace_context
