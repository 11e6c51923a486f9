-- Durable MCP tasks and the audit log (docs/design.md, Tasks), SQLite twin of
-- migrations/postgres. JSON is stored as TEXT (checked with json_valid) and every
-- time as TEXT in one fixed-width form, strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
-- (RFC 3339, UTC, milliseconds), so text order is time order.

CREATE TABLE call_tasks (
    task_id TEXT PRIMARY KEY NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL CHECK (json_valid(arguments)),
    owner TEXT NOT NULL,
    extra_follower TEXT,
    replica_id TEXT NOT NULL,
    status TEXT NOT NULL
        CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
    status_message TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    last_updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    heartbeat_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    cancel_requested_at TEXT,
    result TEXT CHECK (result IS NULL OR json_valid(result)),
    error TEXT CHECK (error IS NULL OR json_valid(error)),
    input_requests TEXT CHECK (input_requests IS NULL OR json_valid(input_requests)),
    input_answers TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(input_answers)),
    requested_input_keys TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(requested_input_keys)),
    expires_at TEXT,
    poll_interval_ms INTEGER NOT NULL CHECK (poll_interval_ms >= 0),
    audit_persona TEXT,
    audit_connection TEXT,
    audit_arguments TEXT NOT NULL DEFAULT 'null' CHECK (json_valid(audit_arguments))
) STRICT;

CREATE INDEX call_tasks_running_by_replica ON call_tasks (replica_id)
    WHERE status IN ('working', 'input_required');

CREATE INDEX call_tasks_running_by_heartbeat ON call_tasks (heartbeat_at)
    WHERE status IN ('working', 'input_required');

CREATE INDEX call_tasks_expiry ON call_tasks (expires_at)
    WHERE expires_at IS NOT NULL;

CREATE TABLE audit_logs (
    id INTEGER PRIMARY KEY,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    tool TEXT NOT NULL,
    subject TEXT NOT NULL,
    persona TEXT,
    connection TEXT,
    arguments TEXT NOT NULL CHECK (json_valid(arguments)),
    success INTEGER NOT NULL CHECK (success IN (0, 1)),
    outcome TEXT NOT NULL,
    error_message TEXT,
    duration_ms INTEGER NOT NULL
) STRICT;

CREATE INDEX audit_logs_tool_created_at ON audit_logs (tool, created_at);
