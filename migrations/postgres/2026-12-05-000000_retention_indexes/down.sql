DROP INDEX assets_task_id;
DROP INDEX audit_logs_created_at;
