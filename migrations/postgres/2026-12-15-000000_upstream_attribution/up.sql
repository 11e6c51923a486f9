-- Who a call ran as at the upstream engine and which upstream queries it caused,
-- on every audit row and every call record, so a line in Trino's query log leads
-- to the Docket call and back.

-- Docket's id of the call (for a task, its task id), the Trino session user it
-- ran as when it reached Trino, and the Trino query ids it caused, in order.
ALTER TABLE audit_logs
    ADD COLUMN call_id text NULL,
    ADD COLUMN engine_user text NULL,
    ADD COLUMN upstream_ids jsonb NOT NULL DEFAULT '[]'
        CHECK (jsonb_typeof(upstream_ids) = 'array');

-- From a call (a call record, a query's client info) to its audit row.
CREATE INDEX audit_logs_call_id ON audit_logs (call_id) WHERE call_id IS NOT NULL;

-- A call record's id is the call id already.
ALTER TABLE call_records
    ADD COLUMN engine_user text NULL,
    ADD COLUMN upstream_ids jsonb NOT NULL DEFAULT '[]'
        CHECK (jsonb_typeof(upstream_ids) = 'array');
