-- Durable MCP tasks and the audit log (docs/design.md, Tasks).
-- No table is qualified with a schema: per-test schemas work through search_path.

-- One row per tools/call that became a task. The row is the source of truth for
-- every replica: status, progress message, outcome, cancel flag, input requests.
CREATE TABLE call_tasks (
    task_id text PRIMARY KEY,
    tool text NOT NULL,
    arguments jsonb NOT NULL,
    -- The subject that started the task, and a further subject that may follow it.
    owner text NOT NULL,
    extra_follower text,
    -- The replica running the task; it stamps heartbeat_at while the work runs.
    replica_id text NOT NULL,
    status text NOT NULL
        CHECK (status IN ('working', 'input_required', 'completed', 'failed', 'cancelled')),
    status_message text,
    created_at timestamptz NOT NULL DEFAULT now(),
    last_updated_at timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    cancel_requested_at timestamptz,
    -- The CallToolResult once completed; the JSON-RPC error object once failed.
    result jsonb,
    error jsonb,
    -- Outstanding input requests by key, answers the work has not taken yet, and
    -- every key ever requested (keys are unique for the task's life).
    input_requests jsonb,
    input_answers jsonb NOT NULL DEFAULT '{}',
    requested_input_keys jsonb NOT NULL DEFAULT '[]',
    -- When retention may delete the task; NULL while it lives as long as something else.
    expires_at timestamptz,
    poll_interval_ms bigint NOT NULL CHECK (poll_interval_ms >= 0),
    -- What the task's one audit row records when it ends.
    audit_persona text,
    audit_connection text,
    audit_arguments jsonb NOT NULL DEFAULT 'null'
);

-- A replica's running tasks (the heartbeat and shutdown touch only these).
CREATE INDEX call_tasks_running_by_replica ON call_tasks (replica_id)
    WHERE status IN ('working', 'input_required');

-- The stale sweep: running tasks by their last stamp. Partial, because ended tasks
-- (nearly every row) can never be stale and need not be in it.
CREATE INDEX call_tasks_running_by_heartbeat ON call_tasks (heartbeat_at)
    WHERE status IN ('working', 'input_required');

-- Retention.
CREATE INDEX call_tasks_expiry ON call_tasks (expires_at)
    WHERE expires_at IS NOT NULL;

-- One row per tools/call that ended: direct answers, and tasks when they end.
CREATE TABLE audit_logs (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    tool text NOT NULL,
    subject text NOT NULL,
    persona text,
    connection text,
    arguments jsonb NOT NULL,
    success boolean NOT NULL,
    -- completed, tool_error, failed or cancelled.
    outcome text NOT NULL,
    error_message text,
    duration_ms bigint NOT NULL
);

CREATE INDEX audit_logs_tool_created_at ON audit_logs (tool, created_at);
