-- Ends a task if it has not ended (compare-and-set on the status) and, only when
-- this statement ended it, writes its one audit row. One statement, so the
-- transition and the audit row commit together or not at all; a second writer
-- blocks on the row lock, then sees a terminal status and changes nothing.
-- A cancel recorded before it wins: such a task ends cancelled, whatever the
-- ending says, and is audited as cancelled.
-- $1 task_id, $2 status, $3 result, $4 error, $5 status_message (NULL keeps it),
-- $6 success, $7 outcome, $8 error_message; a cancel's $9 status_message,
-- $10 outcome and $11 error_message; the attribution the ending's result carries,
-- $12 call_id (NULL: the task id), $13 engine_user and $14 upstream_ids, which
-- the audit row keeps even when a cancel overrules the ending (the upstream
-- queries it names did run). Returns the status it ended the task in, exactly
-- when it won, and then signals `changed:<task id>` on docket_tasks.
WITH ended AS (
    UPDATE call_tasks
       SET status = CASE WHEN cancel_requested_at IS NULL THEN $2 ELSE 'cancelled' END,
           result = CASE WHEN cancel_requested_at IS NULL THEN $3 END,
           error = CASE WHEN cancel_requested_at IS NULL THEN $4 END,
           status_message = CASE WHEN cancel_requested_at IS NULL
                                 THEN COALESCE($5, status_message) ELSE $9 END,
           input_requests = NULL,
           last_updated_at = now()
     WHERE task_id = $1
       AND status IN ('working', 'input_required')
    RETURNING status, cancel_requested_at IS NOT NULL AS overruled, tool, owner,
              audit_persona, audit_connection, audit_arguments, created_at
), audited AS (
    INSERT INTO audit_logs (
        tool, subject, persona, connection, arguments, success, outcome, error_message,
        duration_ms, call_id, engine_user, upstream_ids
    )
    SELECT tool, owner, audit_persona, audit_connection, audit_arguments,
           $6::boolean AND NOT overruled,
           CASE WHEN overruled THEN $10::text ELSE $7::text END,
           CASE WHEN overruled THEN $11::text ELSE $8::text END,
           (extract(epoch FROM now() - created_at) * 1000)::bigint,
           COALESCE($12::text, $1::text), $13::text, $14::jsonb
      FROM ended
      -- Followers on every replica hear of the end when this commits (once per win).
      CROSS JOIN LATERAL (SELECT pg_notify('docket_tasks', 'changed:' || $1::text)) AS signalled
)
SELECT status FROM ended
