DROP TABLE audit_logs;
DROP TABLE call_tasks;
