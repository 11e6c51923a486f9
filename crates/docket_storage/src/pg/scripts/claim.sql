-- Claims a run for one worker: a running run whose lease expired (its worker
-- died; that counts as a reclaim, apart from platform faults, so the bridge can
-- stop a source that keeps taking its worker down), else the oldest queued run
-- whose not_before has come. SKIP LOCKED lets workers on every replica
-- claim at once without waiting on, or taking, each other's rows. The attempt
-- goes up: it is the fencing token of every later write.
-- An owner who already holds $3 running runs under a live lease is passed over,
-- so one owner's queue cannot take every worker (the fair share). Claims racing
-- on other replicas each count before the others commit, so the share can be
-- passed by as many runs as claims race at that instant, never more.
-- $1 worker, $2 lease in milliseconds, $3 the share. The statement ends with RETURNING; the
-- code appends the run's columns (run_columns!), so the list is written once.
UPDATE script_runs AS run
   SET status = 'running',
       attempt = run.attempt + 1,
       reclaims = run.reclaims
           + CASE WHEN run.status = 'running' THEN 1 ELSE 0 END,
       lease_owner = $1,
       lease_expires_at = now() + $2 * interval '1 millisecond',
       started_at = COALESCE(run.started_at, now()),
       updated_at = now()
 WHERE run.id = COALESCE(
       -- First a run whose worker died (rare; through the lease index) …
       (SELECT id
          FROM script_runs AS candidate
         WHERE status = 'running' AND lease_expires_at < now()
           AND (SELECT count(*)
                  FROM script_runs AS held
                 WHERE held.script_owner = candidate.script_owner
                   AND held.status = 'running'
                   AND held.lease_expires_at >= now()) < $3
         ORDER BY not_before, created_at
         LIMIT 1
           FOR UPDATE SKIP LOCKED),
       -- … else the oldest queued run, read in the queue index's order, so a claim
       -- stops at the first run it may take instead of sorting the whole queue
       -- (which made draining a backlog cost the square of its length).
       (SELECT id
          FROM script_runs AS candidate
         WHERE status = 'queued' AND not_before <= now()
           AND (SELECT count(*)
                  FROM script_runs AS held
                 WHERE held.script_owner = candidate.script_owner
                   AND held.status = 'running'
                   AND held.lease_expires_at >= now()) < $3
         ORDER BY not_before, created_at
         LIMIT 1
           FOR UPDATE SKIP LOCKED)
 )
RETURNING
