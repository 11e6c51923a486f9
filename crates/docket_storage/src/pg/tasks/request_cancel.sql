-- Records a cancel request on a running task (the first request's time is kept)
-- and, in the same transaction, tells the replica running it: the notification is
-- delivered at commit, only if the task was still running.
-- $1 task_id.
WITH asked AS (
    UPDATE call_tasks
       SET cancel_requested_at = COALESCE(cancel_requested_at, now())
     WHERE task_id = $1
       AND status IN ('working', 'input_required')
    RETURNING task_id
)
SELECT pg_notify('docket_tasks', 'cancel:' || task_id) FROM asked
