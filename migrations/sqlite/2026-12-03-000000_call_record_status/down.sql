ALTER TABLE call_records DROP COLUMN upstream_status;
