-- Fails every running task whose replica stopped beating more than $1 ms ago
-- (database clock) and writes one audit row for each, in one statement. A task
-- is as alive as its replica's row says; a task whose replica never beat (or
-- whose row is gone) is judged by its own stamp, taken when it was created.
-- SKIP LOCKED: a task another replica's sweep (or a heartbeat, or a finish) holds
-- is left to that transaction, so concurrent sweeps never wait on each other and
-- never fail the same task twice; the status check in the UPDATE keeps the
-- compare-and-set even so.
-- It also forgets the replicas silent as long that ran nothing when the statement
-- began (every process has a replica id of its own, so rows would otherwise pile
-- up with restarts; a replica failed here is forgotten by the next sweep, and one
-- that beats again gets its row back).
-- A task whose cancel was recorded ends cancelled instead: the cancel was
-- acknowledged, and the work did stop.
-- $1 stale_after in ms, $2 error, $3 status_message and audit error message,
-- $4 audit success, $5 audit outcome; a cancel's $6 status_message, $7 audit
-- outcome and $8 audit error message; for a replica that had begun to drain
-- (it was shut down, not lost), $9 error and $10 status_message and audit error
-- message. Each audit row names its task as the call, and nothing upstream: the
-- sweep knows only what the task row holds.
WITH stale AS (
    SELECT task.task_id, COALESCE(replica.draining, false) AS draining
      FROM call_tasks AS task
      LEFT JOIN replicas AS replica ON replica.id = task.replica_id
     WHERE task.status IN ('working', 'input_required')
       AND GREATEST(task.heartbeat_at, replica.last_beat_at)
           < now() - $1::bigint * interval '1 millisecond'
       FOR UPDATE OF task SKIP LOCKED
), failed AS (
    UPDATE call_tasks AS task
       SET status = CASE WHEN task.cancel_requested_at IS NULL THEN 'failed' ELSE 'cancelled' END,
           error = CASE WHEN task.cancel_requested_at IS NOT NULL THEN NULL
                        WHEN stale.draining THEN $9 ELSE $2 END,
           status_message = CASE WHEN task.cancel_requested_at IS NOT NULL THEN $6
                                 WHEN stale.draining THEN $10 ELSE $3 END,
           input_requests = NULL,
           last_updated_at = now()
      FROM stale
     WHERE task.task_id = stale.task_id
       AND task.status IN ('working', 'input_required')
    RETURNING task.task_id, task.cancel_requested_at IS NOT NULL AS overruled, stale.draining,
              task.tool, task.owner, task.audit_persona,
              task.audit_connection, task.audit_arguments, task.created_at, task.trace_context
), forgotten AS (
    DELETE FROM replicas AS replica
     WHERE replica.last_beat_at < now() - $1::bigint * interval '1 millisecond'
       AND NOT EXISTS (
           SELECT 1 FROM call_tasks AS task
            WHERE task.replica_id = replica.id
              AND task.status IN ('working', 'input_required')
       )
), audited AS (
    INSERT INTO audit_logs (
        tool, subject, persona, connection, arguments, success, outcome, error_message,
        duration_ms, call_id
    )
    SELECT tool, owner, audit_persona, audit_connection, audit_arguments,
           $4::boolean AND NOT overruled,
           CASE WHEN overruled THEN $7::text ELSE $5::text END,
           CASE WHEN overruled THEN $8::text WHEN draining THEN $10::text ELSE $3::text END,
           (extract(epoch FROM now() - created_at) * 1000)::bigint,
           task_id
      FROM failed
)
SELECT task_id, trace_context FROM failed
