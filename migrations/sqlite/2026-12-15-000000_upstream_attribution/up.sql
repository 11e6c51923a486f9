-- Who a call ran as at the upstream engine and which upstream queries it caused,
-- on every audit row and every call record, so a line in Trino's query log leads
-- to the Docket call and back. SQLite twin of
-- migrations/postgres; the query ids are a JSON array as TEXT.

-- Docket's id of the call (for a task, its task id), the Trino session user it
-- ran as when it reached Trino, and the Trino query ids it caused, in order.
ALTER TABLE audit_logs ADD COLUMN call_id TEXT;
ALTER TABLE audit_logs ADD COLUMN engine_user TEXT;
ALTER TABLE audit_logs ADD COLUMN upstream_ids TEXT NOT NULL DEFAULT '[]'
    CHECK (json_valid(upstream_ids) AND json_type(upstream_ids) = 'array');

-- From a call (a call record, a query's client info) to its audit row.
CREATE INDEX audit_logs_call_id ON audit_logs (call_id) WHERE call_id IS NOT NULL;

-- A call record's id is the call id already.
ALTER TABLE call_records ADD COLUMN engine_user TEXT;
ALTER TABLE call_records ADD COLUMN upstream_ids TEXT NOT NULL DEFAULT '[]'
    CHECK (json_valid(upstream_ids) AND json_type(upstream_ids) = 'array');
