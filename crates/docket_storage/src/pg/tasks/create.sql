-- Inserts a working task and returns only what the database decided, its times
-- (the rest of the row is what the caller gave).
-- The three times default to now() (one value: the
-- transaction's start), and the expiry counts from that same instant.
-- $1 task_id, $2 tool, $3 arguments, $4 owner, $5 extra_follower, $6 replica_id,
-- $7 status_message, $8 retention in ms (NULL: no expiry), $9 poll_interval_ms,
-- $10 audit_persona, $11 audit_connection, $12 audit_arguments, $13 trace_context.
INSERT INTO call_tasks (
    task_id, tool, arguments, owner, extra_follower, replica_id, status, status_message,
    expires_at, poll_interval_ms, audit_persona, audit_connection, audit_arguments, trace_context
) VALUES (
    $1, $2, $3, $4, $5, $6, 'working', $7,
    now() + $8::bigint * interval '1 millisecond', $9, $10, $11, $12, $13
)
RETURNING created_at, expires_at
