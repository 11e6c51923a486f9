-- Ends a task if it has not ended (compare-and-set on the status) and, only when
-- this statement ended it, writes its one audit row. One statement, so the
-- transition and the audit row commit together or not at all; a second writer
-- blocks on the row lock, then sees a terminal status and changes nothing.
-- $1 task_id, $2 status, $3 result, $4 error, $5 status_message (NULL keeps it),
-- $6 success, $7 outcome, $8 error_message. Affects one row exactly when it won, and
-- then signals `changed:<task id>` on docket_tasks.
WITH ended AS (
    UPDATE call_tasks
       SET status = $2,
           result = $3,
           error = $4,
           status_message = COALESCE($5, status_message),
           input_requests = NULL,
           last_updated_at = now()
     WHERE task_id = $1
       AND status IN ('working', 'input_required')
    RETURNING tool, owner, audit_persona, audit_connection, audit_arguments, created_at
)
INSERT INTO audit_logs (
    tool, subject, persona, connection, arguments, success, outcome, error_message, duration_ms
)
SELECT tool, owner, audit_persona, audit_connection, audit_arguments, $6::boolean, $7::text, $8::text,
       (extract(epoch FROM now() - created_at) * 1000)::bigint
  FROM ended
  -- Followers on every replica hear of the end when this commits (once per win).
  CROSS JOIN LATERAL (SELECT pg_notify('docket_tasks', 'changed:' || $1::text)) AS signalled
