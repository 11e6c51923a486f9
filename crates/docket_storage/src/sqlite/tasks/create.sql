-- Inserts a working task and returns only what the database decided, its times
-- (the rest of the row is what the caller gave).
-- The three times are one reading of the clock ('now' is
-- fixed for the whole statement) and the expiry counts from that same instant.
-- ?1 task_id, ?2 tool, ?3 arguments, ?4 owner, ?5 extra_follower, ?6 replica_id,
-- ?7 status_message, ?8 retention as a time modifier ('+604800.000 seconds'; NULL:
-- no expiry, as strftime with a NULL modifier is NULL), ?9 poll_interval_ms,
-- ?10 audit_persona, ?11 audit_connection, ?12 audit_arguments, ?13 trace_context.
INSERT INTO call_tasks (
    task_id, tool, arguments, owner, extra_follower, replica_id, status, status_message,
    created_at, last_updated_at, heartbeat_at, expires_at, poll_interval_ms,
    audit_persona, audit_connection, audit_arguments, trace_context
) VALUES (
    ?1, ?2, ?3, ?4, ?5, ?6, 'working', ?7,
    strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
    strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
    strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
    strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?8),
    ?9, ?10, ?11, ?12, ?13
)
RETURNING created_at, expires_at
