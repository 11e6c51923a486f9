ALTER TABLE call_records DROP COLUMN upstream_ids;
ALTER TABLE call_records DROP COLUMN engine_user;
DROP INDEX audit_logs_call_id;
ALTER TABLE audit_logs DROP COLUMN upstream_ids;
ALTER TABLE audit_logs DROP COLUMN engine_user;
ALTER TABLE audit_logs DROP COLUMN call_id;
