-- Inserts working tasks, one per element of the arrays (all of the same length),
-- as create.sql inserts one, and returns each one's id and its times. One
-- statement, one commit: all are inserted, or none.
-- $1 task_id, $2 tool, $3 arguments, $4 owner, $5 extra_follower, $6 replica_id,
-- $7 status_message, $8 retention in ms (NULL: no expiry), $9 poll_interval_ms,
-- $10 audit_persona, $11 audit_connection, $12 audit_arguments, $13 trace_context.
INSERT INTO call_tasks (
    task_id, tool, arguments, owner, extra_follower, replica_id, status, status_message,
    expires_at, poll_interval_ms, audit_persona, audit_connection, audit_arguments,
    trace_context
)
SELECT
    task.task_id, task.tool, task.arguments, task.owner, task.extra_follower, task.replica_id,
    'working', task.status_message,
    now() + task.retention * interval '1 millisecond', task.poll_interval_ms,
    task.audit_persona, task.audit_connection, task.audit_arguments, task.trace_context
FROM unnest(
    $1::text[], $2::text[], $3::jsonb[], $4::text[], $5::text[], $6::text[],
    $7::text[], $8::bigint[], $9::bigint[], $10::text[], $11::text[], $12::jsonb[],
    $13::text[]
) AS task (
    task_id, tool, arguments, owner, extra_follower, replica_id,
    status_message, retention, poll_interval_ms, audit_persona, audit_connection, audit_arguments,
    trace_context
)
RETURNING task_id, created_at, expires_at
