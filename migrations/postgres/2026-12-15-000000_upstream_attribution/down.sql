ALTER TABLE call_records DROP COLUMN upstream_ids, DROP COLUMN engine_user;
DROP INDEX audit_logs_call_id;
ALTER TABLE audit_logs DROP COLUMN upstream_ids, DROP COLUMN engine_user, DROP COLUMN call_id;
