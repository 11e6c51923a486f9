ALTER TABLE script_runs DROP COLUMN trace_context;
ALTER TABLE call_tasks DROP COLUMN trace_context;
