-- The retention pass deletes audit rows by age and finds the assets of tasks
-- that are gone; both look up by these columns.
CREATE INDEX audit_logs_created_at ON audit_logs (created_at);
CREATE INDEX assets_task_id ON assets (task_id) WHERE task_id IS NOT NULL;
