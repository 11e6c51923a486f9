-- The trace a task or a run belongs to: the W3C trace context (traceparent, and
-- tracestate after a line break) of the request that created it, so the replica
-- that executes, cancels or ends it continues that trace. NULL when the request
-- had none. Bounded as docket_task::trace::MAX_TRACE_COLUMN_BYTES. SQLite twin
-- of migrations/postgres.
ALTER TABLE call_tasks ADD COLUMN trace_context TEXT
    CHECK (length(CAST(trace_context AS BLOB)) <= 641);
ALTER TABLE script_runs ADD COLUMN trace_context TEXT
    CHECK (length(CAST(trace_context AS BLOB)) <= 641);
